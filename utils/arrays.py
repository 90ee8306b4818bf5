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


def require_finite(name: str, values: np.ndarray) -> None:
    """Raise ``ValueError`` naming ``name`` if ``values`` holds NaN or inf."""
    if not np.all(np.isfinite(values)):
        bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
        raise ValueError(f"{name} holds {bad} NaN/inf value(s); give finite numbers")
