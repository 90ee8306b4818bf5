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


COORD_LIMIT = 1e6
"""Largest magnitude, in pixels, of display-list coordinates and lengths: float32
still resolves 1/16 pixel there, and squares and pixel indices cannot overflow."""


def require_bounded(name: str, values: np.ndarray, limit: float = COORD_LIMIT) -> None:
    """Raise ``ValueError`` naming ``name`` if ``values`` holds NaN, inf or magnitudes above ``limit``."""
    if not np.all(np.isfinite(values)):
        bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
        raise ValueError(f"{name} holds {bad} NaN/inf value(s); give finite numbers")
    far = int(np.count_nonzero(np.abs(values) > limit))
    if far:
        raise ValueError(f"{name} holds {far} value(s) beyond ±{limit:,.0f} (largest {np.abs(values).max():g}); "
                         f"coordinates and sizes must lie within ±{limit:,.0f} pixels")
