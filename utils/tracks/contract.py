"""The TRACKS contract: core ComfyUI's track dict, checked and normalised.

Core ComfyUI's ``TRACKS`` is a dict with ``track_path`` float32 [T, N, 2]
(pixel x, y; origin top-left, pixel centres at +0.5) and ``track_visibility``
bool [T, N]; column ``n`` is one persistent track id. Core's own producers
also emit visibility [T, 1] (GenerateTracks and WanMoveTracksFromCoords with
a ``track_mask``: one flag per frame for every track); it broadcasts, as core's
consumers broadcast it, and so do [T] and [1, N]. This pack adds six
optional keys: ``track_size`` float32 [T, N, 2] (box width, height in pixels),
``track_confidence`` float32 [T, N], ``track_opacity`` float32 [T, N] in
0..1 (how strongly each point is drawn: births and deaths fade in and out),
``track_text``, a list of N strings (a name per track, e.g. for labels),
``track_frame_size``, [width, height] of the frames the positions were
measured on (so they are never drawn on frames of another size), and
``track_cuts``, the frames (1..T-1, ascending) that start a new shot (so no
trail reaches across a scene cut).

:func:`normalize_tracks` turns such a dict (torch tensors or NumPy arrays)
into an immutable :class:`Tracks`. The track file lives in ``track_file``,
mask tracking in ``from_mask``.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass

import numpy as np

from ..core.arrays import to_numpy
from ..core.log import LOGGER

PATH_KEY = "track_path"
VISIBILITY_KEY = "track_visibility"
SIZE_KEY = "track_size"
CONFIDENCE_KEY = "track_confidence"
OPACITY_KEY = "track_opacity"
TEXT_KEY = "track_text"
FRAME_SIZE_KEY = "track_frame_size"
CUTS_KEY = "track_cuts"
MAX_TEXT = 1_000  # characters of one track's text
_MASK_PRODUCERS = "core GenerateTracks / WanMoveTracksFromCoords with 'track_mask' connected"

POSITION_LIMIT = 1e5
"""Pixels: positions farther out on either axis are lost tracker output (like NaN), and
sizes must not exceed it; links bowing between such points stay inside the display
list's ``COORD_LIMIT``."""


def located(path) -> np.ndarray:
    """bool [...]: which positions of ``path`` [..., 2] are finite and within ±``POSITION_LIMIT``."""
    return np.all(np.abs(path) <= POSITION_LIMIT, axis=-1)


def host_array(value, label: str) -> np.ndarray:
    """Host NumPy view of a torch/CuPy/NumPy array or nested list (callers copy)."""
    try:
        return np.asarray(to_numpy(value))
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"{label} must be an array of numbers, got {type(value).__name__} ({error})") from None


def _numbers(value, label: str, tail: tuple) -> np.ndarray:
    """float32 [T, N, *tail]; a one-frame [N, *tail] array becomes T = 1."""
    array = host_array(value, label)
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.integer)
                                   or np.issubdtype(array.dtype, np.floating)):
        raise TypeError(f"{label} must hold integers or floats, got dtype {array.dtype}")
    if array.ndim == 1 + len(tail):
        array = array[None]
    want = "[T, N" + "".join(f", {n}" for n in tail) + "]"
    if array.ndim != 2 + len(tail) or array.shape[2:] != tail:
        raise ValueError(f"{label} must have shape {want} (or one frame {want.replace('T, ', '')}), "
                         f"got {list(np.shape(value))}")
    return array.astype(np.float32)


def _visibility(value, label: str, path_label: str, frames: int, count: int) -> np.ndarray:
    """bool [T, N] from bools or 0/1 numbers of shape [T, N], [T, 1], [T], [1, N] or one frame [N].

    [T, 1] is what core's track producers emit with a ``track_mask``; it and
    [T] hold one flag per frame for every track, [1, N] one per track for
    every frame. Anything else is an error naming the shape and the fix.
    """
    array = host_array(value, label)
    if array.dtype != bool:
        if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
            raise TypeError(f"{label} must hold bools or 0/1 numbers, got dtype {array.dtype}")
        if not np.all((array == 0) | (array == 1)):
            raise ValueError(f"{label} must hold bools or 0/1 numbers; found other values")
    array = array.astype(bool)
    shape = list(np.shape(value))
    if array.ndim == 1:
        array = array[:, None] if len(array) == frames and (frames != 1 or count == 1) else array[None]
    if array.ndim != 2:
        raise ValueError(f"{label} must have shape [T, N] (or [T, 1], [T], one frame [N]), got {shape}")
    rows, columns = array.shape
    if columns == 1 and rows != frames:
        raise ValueError(f"{label} has {rows} frame flags ({shape}) but {path_label} has {frames} frames; "
                         f"{_MASK_PRODUCERS} emit one flag per mask frame: give a track_mask of {frames} "
                         "frames (the tracks' frame count)")
    if rows == frames and columns == count:
        return array
    if (rows == frames or rows == 1) and columns in (1, count):
        return np.broadcast_to(array, (frames, count)).copy()
    hint = ""
    if rows == frames and columns < count:
        hint = (f"; core WanMoveConcatTrack makes this when it joins tracks whose visibility is [T, 1] "
                f"({_MASK_PRODUCERS}): concatenate tracks without 'track_mask', or use the tracks one by one")
    raise ValueError(f"{label} has [T, N] = {[rows, columns]} but {path_label} has {[frames, count]}; they "
                     f"must match (or be [T, 1] / [1, N]){hint}")


def track_texts(value, label: str, count: int) -> tuple:
    """A tuple of ``count`` strings from a list of strings (None for no text)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{label} must be a list of {count} strings (one per track), got {type(value).__name__}")
    if len(value) != count:
        raise ValueError(f"{label} has {len(value)} entries but there are {count} tracks; give one text per "
                         "track ('' or null for none)")
    texts = tuple("" if text is None else text for text in value)
    for index, text in enumerate(texts):
        if not isinstance(text, str) or len(text) > MAX_TEXT:
            got = f"{len(text):,} characters" if isinstance(text, str) else type(text).__name__
            raise ValueError(f"{label}[{index}] must be a string of at most {MAX_TEXT:,} characters (or null), "
                             f"got {got}")
    return texts


def checked_frame_size(value, label: str) -> tuple:
    """(width, height) from two whole numbers of pixels in 1..``POSITION_LIMIT``."""
    array = host_array(value, label)
    whole = array.dtype != bool and (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating))
    if not whole or array.shape != (2,) or not np.all(np.isfinite(array)) or np.any(array != np.round(array)) \
            or np.any(array < 1) or np.any(array > POSITION_LIMIT):
        raise ValueError(f"{label} must be [width, height] of the frames the tracks were found on: two whole "
                         f"numbers of pixels in 1..{POSITION_LIMIT:,.0f}, got {value!r}")
    return int(array[0]), int(array[1])


def shot_cuts(value, label: str, frames: int) -> tuple:
    """The frames that start a new shot, as a tuple of ascending whole numbers in 1..``frames`` - 1."""
    array = host_array(value, label)
    numbers = array.dtype != bool and (np.issubdtype(array.dtype, np.integer)
                                       or np.issubdtype(array.dtype, np.floating))
    if array.size == 0:
        return ()
    if not numbers or array.ndim != 1 or not np.all(np.isfinite(array)) or np.any(array != np.round(array)) \
            or np.any(array < 1) or np.any(array > frames - 1) or np.any(np.diff(array) <= 0):
        allowed = f"ascending whole numbers in 1..{frames - 1}" if frames > 1 else "none, for one frame"
        raise ValueError(f"{label} must list the frames that start a new shot: {allowed} (frame 0 starts the "
                         f"first shot; the tracks have {frames} frame(s)), got {value!r}")
    return tuple(int(frame) for frame in array)


@dataclass(frozen=True, eq=False)
class Tracks:
    """Checked, read-only tracks: ``T`` frames of ``N`` persistent track columns.

    Attributes:
        path: float32 [T, N, 2] pixel x, y.
        visibility: bool [T, N]. Slots whose path is NaN/inf (a lost tracker emits
            NaN) or beyond ±``POSITION_LIMIT`` pixels are invisible; their
            coordinates are stored as NaN.
        size: float32 [T, N, 2] box width, height in pixels (0..``POSITION_LIMIT``), or None.
        confidence: float32 [T, N], or None.
        opacity: float32 [T, N] in 0..1, how strongly each visible point is drawn
            (fades at births and deaths), or None (all 1).
        text: tuple of N strings, each track's own text ('' for none), or None.
        frame_size: (width, height) of the frames the positions were measured on, or None (unknown).
        cuts: the frames that start a new shot (ascending, in 1..T-1); () for one shot.

    The constructor copies and checks its inputs (``name`` labels error messages,
    ``keys`` maps a contract key to the name its source gives it);
    a single frame (path [N, 2], visibility [N]) is taken as T = 1; visibility
    [T, 1], [T] and [1, N] broadcast. Values in invisible slots are unspecified,
    except that non-finite ones become NaN.
    """

    path: np.ndarray
    visibility: np.ndarray
    size: np.ndarray | None = None
    confidence: np.ndarray | None = None
    opacity: np.ndarray | None = None
    text: tuple | None = None
    frame_size: tuple | None = None
    cuts: tuple = ()
    name: InitVar[str] = "tracks"
    keys: InitVar[dict | None] = None

    def __post_init__(self, name: str, keys: dict | None):
        def label(key: str) -> str:  # errors name each value as its source spells it
            return f"{name}['{(keys or {}).get(key, key)}']"

        path = _numbers(self.path, label(PATH_KEY), (2,))
        visibility = _visibility(self.visibility, label(VISIBILITY_KEY), label(PATH_KEY), *path.shape[:2])
        lost = ~located(path)
        far = int(np.count_nonzero(lost & visibility & np.all(np.isfinite(path), axis=-1)))
        if far:
            LOGGER.warning("%s: %d visible point(s) lie beyond ±%s pixels, far outside any frame; "
                           "treated as lost", name, far, f"{POSITION_LIMIT:,.0f}")
        path[lost] = np.nan
        visibility &= ~lost
        values = {"path": path, "visibility": visibility, "size": None, "confidence": None, "opacity": None}
        for field, key, tail in (("size", SIZE_KEY, (2,)), ("confidence", CONFIDENCE_KEY, ()),
                                 ("opacity", OPACITY_KEY, ())):
            raw = getattr(self, field)
            if raw is None:
                continue
            named = label(key)
            array = _numbers(raw, named, tail)
            if array.shape[:2] != path.shape[:2]:
                raise ValueError(f"{named} has [T, N] = {list(array.shape[:2])} but "
                                 f"{label(PATH_KEY)} has {list(path.shape[:2])}; they must match")
            finite = np.isfinite(array)
            if not np.all(finite[visibility]):
                raise ValueError(f"{named} holds NaN/inf in visible slots; give finite numbers there")
            array[~finite] = np.nan
            if field == "size" and np.any(array < 0):
                raise ValueError(f"{named} holds negative sizes; widths and heights must be >= 0 pixels")
            if field == "size" and np.any(array > POSITION_LIMIT):
                raise ValueError(f"{named} holds sizes above {POSITION_LIMIT:,.0f} pixels; widths and heights "
                                 f"must lie in 0..{POSITION_LIMIT:,.0f}")
            if field == "opacity" and np.any((array < 0) | (array > 1)):
                raise ValueError(f"{named} holds values outside 0..1; opacities must lie in 0..1")
            values[field] = array
        for field, array in values.items():
            if array is not None:
                array.setflags(write=False)
            object.__setattr__(self, field, array)
        if self.text is not None:
            object.__setattr__(self, "text", track_texts(self.text, label(TEXT_KEY), path.shape[1]))
        if self.frame_size is not None:
            object.__setattr__(self, "frame_size", checked_frame_size(self.frame_size, label(FRAME_SIZE_KEY)))
        object.__setattr__(self, "cuts", shot_cuts(() if self.cuts is None else self.cuts, label(CUTS_KEY),
                                                   path.shape[0]))

    @property
    def frame_count(self) -> int:
        """Number of frames T."""
        return self.path.shape[0]

    @property
    def track_count(self) -> int:
        """Number of track columns N."""
        return self.path.shape[1]

    def to_comfy(self) -> dict:
        """The TRACKS dict with writable NumPy copies (the node layer makes tensors)."""
        result = {PATH_KEY: self.path.copy(), VISIBILITY_KEY: self.visibility.copy()}
        if self.size is not None:
            result[SIZE_KEY] = self.size.copy()
        if self.confidence is not None:
            result[CONFIDENCE_KEY] = self.confidence.copy()
        if self.opacity is not None:
            result[OPACITY_KEY] = self.opacity.copy()
        if self.text is not None:
            result[TEXT_KEY] = list(self.text)
        if self.frame_size is not None:
            result[FRAME_SIZE_KEY] = list(self.frame_size)
        if self.cuts:
            result[CUTS_KEY] = list(self.cuts)
        return result


def normalize_tracks(tracks, name: str = "tracks") -> Tracks:
    """Check a TRACKS dict (torch or NumPy values) and return a :class:`Tracks` copy.

    A :class:`Tracks` passes through unchanged. Raises ``TypeError``/``ValueError``
    naming ``name`` and the offending key.
    """
    if isinstance(tracks, Tracks):
        return tracks
    if not isinstance(tracks, dict):
        raise TypeError(f"{name} must be a TRACKS dict with '{PATH_KEY}' and '{VISIBILITY_KEY}', "
                        f"got {type(tracks).__name__}")
    missing = [key for key in (PATH_KEY, VISIBILITY_KEY) if key not in tracks]
    if missing:
        raise ValueError(f"{name} is missing {', '.join(repr(k) for k in missing)}; a TRACKS dict needs "
                         f"'{PATH_KEY}' [T, N, 2] and '{VISIBILITY_KEY}' [T, N]")
    return Tracks(tracks[PATH_KEY], tracks[VISIBILITY_KEY], tracks.get(SIZE_KEY),
                  tracks.get(CONFIDENCE_KEY), tracks.get(OPACITY_KEY), tracks.get(TEXT_KEY),
                  tracks.get(FRAME_SIZE_KEY), tracks.get(CUTS_KEY), name=name)


def fill_hidden(values: np.ndarray, visibility: np.ndarray) -> np.ndarray:
    """Copy of ``values`` [T, N, ...] whose invisible slots hold the column's latest
    earlier visible value (or its first one, before the track appears).

    This pack's track producers use it so that consumers which ignore visibility
    never meet NaN. Columns that are never visible keep their values.
    """
    if values.shape[0] == 0:
        return values.copy()
    frames = np.arange(values.shape[0])[:, None]
    last_seen = np.maximum.accumulate(np.where(visibility, frames, -1), axis=0)
    source = np.where(last_seen >= 0, last_seen, np.argmax(visibility, axis=0)[None, :])
    filled = values[source, np.arange(values.shape[1])[None, :]]
    never = ~visibility.any(axis=0)
    filled[:, never] = values[:, never]
    return filled
