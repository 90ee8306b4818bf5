"""Array-module helpers shared by the CPU (NumPy) and GPU (CuPy) paths.

Engine functions that run on both backends take an ``xp`` argument (``numpy``
or ``cupy``); :func:`array_module` picks it from an array.
"""

from __future__ import annotations

import numpy as np


def array_module(array):
    """Return ``cupy`` for CuPy arrays and ``numpy`` for everything else."""
    module = type(array).__module__
    if module.startswith("cupy"):
        import cupy

        return cupy
    return np


def to_numpy(array) -> np.ndarray:
    """Host copy of a NumPy, CuPy or torch array (no copy for NumPy)."""
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "get") and type(array).__module__.startswith("cupy"):
        return array.get()
    if type(array).__module__.startswith("torch"):
        return array.detach().cpu().numpy()
    return np.asarray(array)


UINT8_ROWS = 32
"""Rows converted at a time by :func:`unit_to_uint8`, so the float temporaries stay in cache."""


def unit_to_uint8(image: np.ndarray) -> np.ndarray:
    """uint8 of a 0..1 float image [H, ...]: ``floor(clip(x, 0, 1) * 255 + 0.5)``, NaN as 0; a new array.
    Converted a band of rows at a time: the whole-frame expression made five frame-sized float temporaries
    (28 ms for a float32 1080p RGB frame)."""
    out = np.empty(image.shape, np.uint8)
    band = np.empty((min(UINT8_ROWS, len(image)),) + image.shape[1:], np.result_type(image.dtype, np.float32))
    for top in range(0, len(image), UINT8_ROWS):
        rows = image[top:top + UINT8_ROWS]
        scaled = np.multiply(rows, 255.0, out=band[:len(rows)])
        scaled += 0.5
        np.fmax(scaled, 0.5, out=scaled)  # fmax and fmin take the number over NaN: NaN becomes 0.5, so 0
        np.fmin(scaled, 255.5, out=scaled)
        out[top:top + UINT8_ROWS] = scaled
    return out


COORD_LIMIT = 1e6
"""Largest magnitude, in pixels, of display-list coordinates and lengths: float32
still resolves 1/16 pixel there, and squares and pixel indices cannot overflow."""


def require_bounded(name: str, values: np.ndarray, limit: float = COORD_LIMIT) -> None:
    """Raise ``ValueError`` naming ``name`` if ``values`` holds NaN, inf or magnitudes above ``limit``."""
    if values.size == 0 or (-limit <= values.min() and values.max() <= limit):  # NaN fails both comparisons
        return
    if not np.all(np.isfinite(values)):
        bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
        raise ValueError(f"{name} holds {bad} NaN/inf value(s); give finite numbers")
    far = int(np.count_nonzero(np.abs(values) > limit))
    if far:
        raise ValueError(f"{name} holds {far} value(s) beyond ±{limit:,.0f} (largest {np.abs(values).max():g}); "
                         f"coordinates and sizes must lie within ±{limit:,.0f} pixels")
