"""Colour parsing and per-track palettes (straight RGBA floats in 0..1)."""

from __future__ import annotations

import re

import numpy as np

_HEX = re.compile(r"[0-9A-Fa-f]{3}|[0-9A-Fa-f]{6}|[0-9A-Fa-f]{8}")  # ASCII only: no '+f', ' f' or full-width digits

# A qualitative palette that stays readable over most footage.
TRACK_PALETTE = np.array([
    [0.000, 0.898, 1.000], [1.000, 0.341, 0.133], [0.463, 1.000, 0.012],
    [1.000, 0.839, 0.000], [0.835, 0.000, 0.976], [0.000, 0.690, 1.000],
    [1.000, 0.090, 0.267], [0.392, 1.000, 0.855], [1.000, 0.569, 0.000],
    [0.682, 0.918, 0.000], [0.878, 0.251, 0.984], [0.188, 0.310, 0.996],
], dtype=np.float32)


def parse_color(value, name: str = "color") -> np.ndarray:
    """Parse ``#RGB``, ``#RRGGBB``, ``#RRGGBBAA`` or an RGB(A) sequence in 0..1.

    Returns float32 [4] straight RGBA. Raises ``ValueError`` naming ``name``.
    """
    if isinstance(value, str):
        text = value.strip()
        text = text[1:] if text.startswith("#") else text
        if not _HEX.fullmatch(text):
            raise ValueError(f"{name} {value!r} is not a colour: use hex digits, e.g. #00E5FF (#RGB, #RRGGBB "
                             "or #RRGGBBAA; ASCII 0-9 and A-F only)")
        if len(text) == 3:
            text = "".join(ch * 2 for ch in text)
        channels = [int(text[i:i + 2], 16) / 255.0 for i in range(0, len(text), 2)]
    else:
        array = np.asarray(value)
        if array.dtype.kind not in "iuf":  # bools, strings and objects are not colour channels
            raise ValueError(f"{name} {value!r} must be 3 or 4 numbers in 0..1")
        channels = [float(c) for c in array.astype(np.float64).ravel()]
        if len(channels) not in (3, 4) or not all(0.0 <= c <= 1.0 for c in channels):
            raise ValueError(f"{name} {value!r} must be 3 or 4 numbers in 0..1")
    if len(channels) == 3:
        channels.append(1.0)
    return np.array(channels, dtype=np.float32)


def palette_colors(track_ids, palette: np.ndarray = TRACK_PALETTE, xp=np):
    """Opaque RGBA colour per track id, cycling through ``palette`` (``xp``: NumPy or CuPy)."""
    ids = xp.asarray(track_ids, dtype=xp.int64)
    rgb = xp.asarray(palette)[xp.mod(ids, len(palette))]
    return xp.concatenate([rgb, xp.ones(rgb.shape[:-1] + (1,), dtype=xp.float32)], axis=-1)


def parse_gradient(value, name: str = "gradient colors") -> np.ndarray:
    """Parse a gradient: two or more colours, as comma-separated text (``"#00E5FF, #FF1744"``) or a sequence.

    Returns float32 [K, 4] straight RGBA stops, evenly spaced. Raises ``ValueError`` naming ``name``.
    """
    parts = value.split(",") if isinstance(value, str) else list(value)
    if isinstance(value, str) and any(not part.strip() for part in parts):
        raise ValueError(f"{name} {value!r} has an empty entry: give colours separated by commas, e.g. "
                         "#00E5FF,#FF1744")
    stops = [parse_color(part.strip() if isinstance(part, str) else part, f"{name} entry {index + 1}")
             for index, part in enumerate(parts)]
    if len(stops) < 2:
        raise ValueError(f"{name} {value!r} must name at least 2 colours separated by commas, e.g. #00E5FF,#FF1744")
    return np.stack(stops)


def sample_gradient(stops, position, cyclic: bool = False, xp=np):
    """RGBA at ``position`` (float array) along evenly spaced ``stops`` [K, 4], mixed linearly.

    Position 0 is the first stop. Without ``cyclic`` position 1 is the last
    stop (positions outside 0..1 are clamped); with it the stops go round a
    circle (position 1 is the first stop again, after the last).
    """
    stops = xp.asarray(stops, dtype=xp.float32)
    count = stops.shape[0]
    position = xp.asarray(position, dtype=xp.float32)
    if cyclic:
        place = xp.mod(position, 1.0) * count
        low = xp.minimum(xp.floor(place).astype(xp.int64), count - 1)
        high = xp.mod(low + 1, count)
    else:
        place = xp.clip(position, 0.0, 1.0) * (count - 1)
        low = xp.minimum(xp.floor(place).astype(xp.int64), count - 2)
        high = low + 1
    mix = (place - low)[..., None]
    return (stops[low] * (1.0 - mix) + stops[high] * mix).astype(xp.float32)
