"""The TRACKS contract: core ComfyUI's track dict, checked and normalised.

Core ComfyUI's ``TRACKS`` is a dict with ``track_path`` float32 [T, N, 2]
(pixel x, y; origin top-left, pixel centres at +0.5) and ``track_visibility``
bool [T, N]; column ``n`` is one persistent track id. This pack adds two
optional keys: ``track_size`` float32 [T, N, 2] (box width, height in pixels)
and ``track_confidence`` float32 [T, N].

:func:`normalize_tracks` turns such a dict (torch tensors or NumPy arrays)
into an immutable :class:`Tracks`; the JSON helpers store it in a stable,
versioned file format; :func:`tracks_from_mask` builds tracks from a MASK batch.
"""

from __future__ import annotations

import json
import os
from dataclasses import InitVar, dataclass

import cv2
import numpy as np
from scipy.optimize import linear_sum_assignment

from .arrays import to_numpy
from .log import LOGGER

PATH_KEY = "track_path"
VISIBILITY_KEY = "track_visibility"
SIZE_KEY = "track_size"
CONFIDENCE_KEY = "track_confidence"

JSON_FORMAT = "trackoverlay.tracks"
JSON_VERSION = 1

POSITION_LIMIT = 1e5
"""Pixels: positions farther out on either axis are lost tracker output (like NaN), and
sizes must not exceed it; links bowing between such points stay inside the display
list's ``COORD_LIMIT``."""


def located(path) -> np.ndarray:
    """bool [...]: which positions of ``path`` [..., 2] are finite and within ±``POSITION_LIMIT``."""
    return np.all(np.abs(path) <= POSITION_LIMIT, axis=-1)


def _host(value, label: str) -> np.ndarray:
    """Host NumPy view of a torch/CuPy/NumPy array or nested list (callers copy)."""
    try:
        return np.asarray(to_numpy(value))
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"{label} must be an array of numbers, got {type(value).__name__} ({error})") from None


def _numbers(value, label: str, tail: tuple) -> np.ndarray:
    """float32 [T, N, *tail]; a one-frame [N, *tail] array becomes T = 1."""
    array = _host(value, label)
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


def _flags(value, label: str) -> np.ndarray:
    """bool [T, N] from bools or 0/1 numbers; a one-frame [N] array becomes T = 1."""
    array = _host(value, label)
    if array.dtype != bool:
        if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
            raise TypeError(f"{label} must hold bools or 0/1 numbers, got dtype {array.dtype}")
        if not np.all((array == 0) | (array == 1)):
            raise ValueError(f"{label} must hold bools or 0/1 numbers; found other values")
    array = array.astype(bool)
    if array.ndim == 1:
        array = array[None]
    if array.ndim != 2:
        raise ValueError(f"{label} must have shape [T, N] (or one frame [N]), got {list(np.shape(value))}")
    return array


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

    The constructor copies and checks its inputs (``name`` labels error messages);
    a single frame (path [N, 2], visibility [N]) is taken as T = 1. Values in
    invisible slots are unspecified, except that non-finite ones become NaN.
    """

    path: np.ndarray
    visibility: np.ndarray
    size: np.ndarray | None = None
    confidence: np.ndarray | None = None
    name: InitVar[str] = "tracks"

    def __post_init__(self, name: str):
        path = _numbers(self.path, f"{name}['{PATH_KEY}']", (2,))
        visibility = _flags(self.visibility, f"{name}['{VISIBILITY_KEY}']")
        if visibility.shape != path.shape[:2]:
            raise ValueError(f"{name}['{VISIBILITY_KEY}'] has [T, N] = {list(visibility.shape)} but "
                             f"{name}['{PATH_KEY}'] has {list(path.shape[:2])}; they must match")
        lost = ~located(path)
        far = int(np.count_nonzero(lost & visibility & np.all(np.isfinite(path), axis=-1)))
        if far:
            LOGGER.warning("%s: %d visible point(s) lie beyond ±%s pixels, far outside any frame; "
                           "treated as lost", name, far, f"{POSITION_LIMIT:,.0f}")
        path[lost] = np.nan
        visibility &= ~lost
        values = {"path": path, "visibility": visibility, "size": None, "confidence": None}
        for field, key, tail in (("size", SIZE_KEY, (2,)), ("confidence", CONFIDENCE_KEY, ())):
            raw = getattr(self, field)
            if raw is None:
                continue
            label = f"{name}['{key}']"
            array = _numbers(raw, label, tail)
            if array.shape[:2] != path.shape[:2]:
                raise ValueError(f"{label} has [T, N] = {list(array.shape[:2])} but "
                                 f"{name}['{PATH_KEY}'] has {list(path.shape[:2])}; they must match")
            finite = np.isfinite(array)
            if not np.all(finite[visibility]):
                raise ValueError(f"{label} holds NaN/inf in visible slots; give finite numbers there")
            array[~finite] = np.nan
            if field == "size" and np.any(array < 0):
                raise ValueError(f"{label} holds negative sizes; widths and heights must be >= 0 pixels")
            if field == "size" and np.any(array > POSITION_LIMIT):
                raise ValueError(f"{label} holds sizes above {POSITION_LIMIT:,.0f} pixels; widths and heights "
                                 f"must lie in 0..{POSITION_LIMIT:,.0f}")
            values[field] = array
        for field, array in values.items():
            if array is not None:
                array.setflags(write=False)
            object.__setattr__(self, field, array)

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
                  tracks.get(CONFIDENCE_KEY), name=name)


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


# --- JSON ---------------------------------------------------------------------

def _short_floats(values: np.ndarray) -> list:
    """Nested lists of the shortest decimals that read back to the same float32.

    NaN becomes None (JSON null).
    """
    exact = values.astype(np.float64)
    chosen = exact.copy()
    pending = np.isfinite(exact)
    for decimals in range(10):
        rounded = np.round(exact, decimals)
        hit = pending & (rounded.astype(np.float32) == values)
        chosen[hit] = rounded[hit]
        pending &= ~hit
    result = chosen.astype(object)
    result[~np.isfinite(exact)] = None
    return result.tolist()


def tracks_to_json(tracks) -> str:
    """Serialise tracks (a :class:`Tracks` or TRACKS dict) in format version 1."""
    tracks = normalize_tracks(tracks)
    document = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "frames": tracks.frame_count,
        "tracks": tracks.track_count,
        "path": _short_floats(tracks.path),
        "visible": tracks.visibility.astype(np.uint8).tolist(),
    }
    if tracks.size is not None:
        document["size"] = _short_floats(tracks.size)
    if tracks.confidence is not None:
        document["confidence"] = _short_floats(tracks.confidence)
    return json.dumps(document, separators=(",", ":"), allow_nan=False)


def _json_array(document: dict, key: str, shape: tuple, source: str, dtype) -> np.ndarray:
    try:
        array = np.array(document[key], dtype=dtype)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{source}: '{key}' must be nested lists of numbers of shape {list(shape)} "
                         f"({error})") from None
    if array.size == 0 and int(np.prod(shape)) == 0:
        array = array.reshape(shape)
    if array.shape != shape:
        raise ValueError(f"{source}: '{key}' has shape {list(array.shape)}, expected {list(shape)} "
                         "from 'frames' and 'tracks'")
    return array


def tracks_from_json(text: str, source: str = "tracks JSON") -> Tracks:
    """Parse format-version-1 JSON text; errors name ``source`` (e.g. a file path)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{source} is not valid JSON ({error})") from None
    if not isinstance(document, dict) or document.get("format") != JSON_FORMAT:
        raise ValueError(f"{source} is not a track file: expected \"format\": \"{JSON_FORMAT}\"")
    version = document.get("version")
    if type(version) is not int or version != JSON_VERSION:
        raise ValueError(f"{source} has format version {version!r}; this pack reads version {JSON_VERSION}")
    counts = []
    for key in ("frames", "tracks"):
        count = document.get(key)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"{source}: '{key}' must be a whole number >= 0, got {count!r}")
        counts.append(count)
    for key in ("path", "visible"):
        if key not in document:
            raise ValueError(f"{source} is missing '{key}'")
    frames, count = counts
    path = _json_array(document, "path", (frames, count, 2), source, np.float64)
    visible = _json_array(document, "visible", (frames, count), source, np.float64)
    if not np.all((visible == 0) | (visible == 1)):
        raise ValueError(f"{source}: 'visible' must hold only 0 and 1")
    optional = {}
    for key, tail in (("size", (2,)), ("confidence", ())):
        if document.get(key) is not None:
            optional[key] = _json_array(document, key, (frames, count) + tail, source, np.float64)
    return Tracks(path, visible, optional.get("size"), optional.get("confidence"), name=source)


def save_tracks_json(tracks, path: str | os.PathLike) -> None:
    """Write tracks to ``path`` as JSON (format version 1)."""
    text = tracks_to_json(tracks)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def load_tracks_json(path: str | os.PathLike) -> Tracks:
    """Read a track file written by :func:`save_tracks_json`."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"track file {path} does not exist")
    with open(path, encoding="utf-8") as handle:
        try:
            text = handle.read()
        except UnicodeDecodeError:
            raise ValueError(f"track file {path} is not valid JSON (not UTF-8 text)") from None
    return tracks_from_json(text, source=f"track file {path}")


# --- masks --------------------------------------------------------------------

def _mask_batch(masks, threshold: float) -> np.ndarray:
    array = _host(masks, "masks")
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3:
        raise ValueError(f"masks must have shape [B, H, W] or [H, W], got {list(np.shape(masks))}")
    if array.dtype == np.uint8:
        array = array / 255.0
    elif not (array.dtype == bool or np.issubdtype(array.dtype, np.integer)
              or np.issubdtype(array.dtype, np.floating)):
        raise TypeError(f"masks must hold bools or numbers, got dtype {array.dtype}")
    return array > threshold


def tracks_from_mask(masks, threshold: float = 0.5, min_area: int = 4,
                     max_distance: float = 50.0, max_tracks: int = 256) -> Tracks:
    """Tracks from the connected components of a MASK batch [B, H, W] (or [H, W]).

    Each component of at least ``min_area`` pixels is a point at its centroid with
    its bounding-box size. Components are matched to the previous frame's visible
    tracks by optimal assignment on centroid distance (pairs farther than
    ``max_distance`` pixels never match); unmatched components start new columns,
    in raster order, until ``max_tracks`` columns exist (later ones are dropped).
    Float masks compare with ``threshold``; uint8 masks are read as 0..255.
    Invisible slots hold the track's nearest known position and size (:func:`fill_hidden`).
    """
    if min_area < 1:
        raise ValueError(f"min_area must be >= 1 pixel, got {min_area}")
    if not max_distance > 0:
        raise ValueError(f"max_distance must be > 0 pixels, got {max_distance}")
    if max_tracks < 1:
        raise ValueError(f"max_tracks must be >= 1, got {max_tracks}")
    binary = _mask_batch(masks, threshold)
    frames = binary.shape[0]
    path = np.full((frames, max_tracks, 2), np.nan, np.float32)
    size = np.zeros((frames, max_tracks, 2), np.float32)
    visible = np.zeros((frames, max_tracks), bool)
    used = 0
    dropped = 0
    for t in range(frames):
        _, _, stats, centroids = cv2.connectedComponentsWithStats(binary[t].astype(np.uint8), connectivity=8)
        keep = np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] >= min_area) + 1
        points = centroids[keep].astype(np.float32) + 0.5
        boxes = stats[keep][:, [cv2.CC_STAT_WIDTH, cv2.CC_STAT_HEIGHT]].astype(np.float32)
        columns = np.full(len(keep), -1)
        live = np.flatnonzero(visible[t - 1, :used]) if t else np.zeros(0, int)
        if len(live) and len(points):
            distance = np.linalg.norm(points[:, None, :] - path[t - 1, live][None, :, :], axis=-1)
            rows, cols = linear_sum_assignment(np.where(distance <= max_distance, distance, 1e9))
            ok = distance[rows, cols] <= max_distance
            columns[rows[ok]] = live[cols[ok]]
        for index in np.flatnonzero(columns < 0):
            if used == max_tracks:
                dropped += 1
                continue
            columns[index] = used
            used += 1
        placed = columns >= 0
        path[t, columns[placed]] = points[placed]
        size[t, columns[placed]] = boxes[placed]
        visible[t, columns[placed]] = True
    if dropped:
        LOGGER.warning("tracks_from_mask: max_tracks=%d reached; %d new component(s) got no track",
                       max_tracks, dropped)
    visible = visible[:, :used]
    return Tracks(fill_hidden(path[:, :used], visible), visible, fill_hidden(size[:, :used], visible),
                  name="tracks from mask")
