"""The pack's track file: versioned JSON holding a :class:`Tracks`."""

from __future__ import annotations

import json
import os

import numpy as np

from .contract import (
    CONFIDENCE_KEY,
    CUTS_KEY,
    FRAME_SIZE_KEY,
    OPACITY_KEY,
    PATH_KEY,
    SIZE_KEY,
    TEXT_KEY,
    VISIBILITY_KEY,
    Tracks,
    normalize_tracks,
)

JSON_FORMAT = "trackoverlay.tracks"
JSON_VERSION = 1
_FILE_KEYS = {PATH_KEY: "path", VISIBILITY_KEY: "visible", SIZE_KEY: "size", CONFIDENCE_KEY: "confidence",
              OPACITY_KEY: "opacity", TEXT_KEY: "text", FRAME_SIZE_KEY: "frame_size", CUTS_KEY: "cuts"}


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
    """Serialise tracks (a :class:`Tracks` or TRACKS dict) in format version 1.

    Optional keys: ``size``, ``confidence``, ``opacity`` (per frame and track),
    ``text`` (one string per track), ``frame_size`` ([width, height] of the
    frames the positions were measured on) and ``cuts`` (the frames that start
    a new shot); readers that predate the last three ignore them.
    """
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
    if tracks.opacity is not None:
        document["opacity"] = _short_floats(tracks.opacity)
    if tracks.text is not None:
        document["text"] = list(tracks.text)
    if tracks.frame_size is not None:
        document["frame_size"] = list(tracks.frame_size)
    if tracks.cuts:
        document["cuts"] = list(tracks.cuts)
    return json.dumps(document, separators=(",", ":"), allow_nan=False)


_NUMBER_TYPES = {int, float, type(None)}  # null = NaN (a lost point); JSON true/false are not numbers


def _json_array(document: dict, key: str, shape: tuple, source: str, flags: bool = False) -> np.ndarray:
    """float64 array of ``shape`` from nested lists that really hold that many numbers.

    Empty dimensions must be spelled out too (``frames`` empty lists for zero
    tracks), so a declared count can never exceed the data. ``flags`` also
    accepts true/false.
    """
    wanted = f"'{key}' must be nested lists of numbers of shape {list(shape)}"
    try:
        array = np.array(document[key], dtype=object)
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{source}: {wanted} ({error})") from None
    size = int(np.prod(shape))
    if size == 0:
        spelled = shape[:shape.index(0) + 1]
        if array.size != 0 or array.shape[:len(spelled)] != spelled or array.ndim > len(shape):
            raise ValueError(f"{source}: '{key}' has shape {list(array.shape)}, expected {list(shape)} from "
                             "'frames' and 'tracks' (with empty lists for empty frames)")
        return np.zeros(shape, np.float64)
    if array.shape != shape:
        raise ValueError(f"{source}: '{key}' has shape {list(array.shape)}, expected {list(shape)} "
                         "from 'frames' and 'tracks'")
    kinds = set(map(type, array.flat))
    allowed = _NUMBER_TYPES | {bool} if flags else _NUMBER_TYPES
    if not kinds <= allowed:
        found = ", ".join(sorted(kind.__name__ for kind in kinds - allowed))
        raise ValueError(f"{source}: {wanted}; found {found}")
    try:
        return array.astype(np.float64)
    except OverflowError:
        raise ValueError(f"{source}: '{key}' holds a number too large for a float") from None


def tracks_from_json(text: str, source: str = "tracks JSON") -> Tracks:
    """Parse format-version-1 JSON text; errors name ``source`` (e.g. a file path)."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, 4300+ digit integers, deep nesting
        reason = "nested too deeply" if isinstance(error, RecursionError) else " ".join(str(error).split())
        raise ValueError(f"{source} is not valid JSON ({reason})") from None
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
    path = _json_array(document, "path", (frames, count, 2), source)
    visible = _json_array(document, "visible", (frames, count), source, flags=True)
    if not np.all((visible == 0) | (visible == 1)):
        raise ValueError(f"{source}: 'visible' must hold only 0 and 1")
    optional = {}
    for key, tail in (("size", (2,)), ("confidence", ()), ("opacity", ())):
        if document.get(key) is not None:
            optional[key] = _json_array(document, key, (frames, count) + tail, source)
    return Tracks(path, visible, optional.get("size"), optional.get("confidence"), optional.get("opacity"),
                  document.get("text"), document.get("frame_size"), document.get("cuts"), name=source,
                  keys=_FILE_KEYS)


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
