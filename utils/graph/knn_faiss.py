"""k nearest neighbours with FAISS on the GPU (optional dependency).

Coordinates are centred and scaled before the search (raw pixel coordinates
lose precision in FAISS's ``|x|^2 - 2xy + |y|^2`` form and overflow FP16);
the returned neighbours are then re-ranked by exact float32 distances, so
the result follows the same contract as ``graph.knn_cpu``. If FAISS fails,
the search runs on the CPU instead, with one warning.
"""

from __future__ import annotations

import functools

import numpy as np

from ..core.arrays import array_module, to_numpy
from ..core.log import LOGGER
from .neighbours import knn_cpu, neighbour_count

_EXTRA = 4  # candidates beyond k, so exact re-ranking can settle near-ties


@functools.lru_cache(maxsize=1)
def _resources():
    import faiss

    resources = faiss.StandardGpuResources()
    resources.setTempMemory(64 * 2**20)  # tiny problems: don't reserve FAISS's default 1.5 GiB
    return resources


@functools.lru_cache(maxsize=1)
def _warn_fallback(reason: str) -> None:
    LOGGER.warning("FAISS kNN failed (%s); searching on the CPU instead", reason)


def knn_faiss(points, k: int):
    """``(idx int64 [N, k'], dist float32 [N, k'])``, ``k' = min(k, N - 1)``; input's array module."""
    try:
        return _knn_faiss(points, k)
    except Exception as error:  # ImportError, CUDA errors, FAISS assertions
        _warn_fallback(f"{type(error).__name__}: {error}")
        return knn_cpu(points, k)


def _knn_faiss(points, k: int):
    import faiss

    xp = array_module(points)
    pts = to_numpy(points).astype(np.float32)
    n = len(pts)
    k = neighbour_count(k, n)
    if k < 1:
        return xp.zeros((n, 0), xp.int64), xp.zeros((n, 0), xp.float32)
    centre = pts.mean(axis=0)
    scale = max(float(np.abs(pts - centre).max()), 1e-6)
    normalised = np.ascontiguousarray((pts - centre) / scale, dtype=np.float32)
    width = min(k + 1 + _EXTRA, n)
    _, cand = faiss.knn_gpu(_resources(), normalised, normalised, width)
    cand = cand.astype(np.int64)
    delta = pts[cand] - pts[:, None, :]
    dist = np.sqrt((delta * delta).sum(axis=2))
    dist[(cand == np.arange(n)[:, None]) | (cand < 0)] = np.inf
    order = np.lexsort((cand, dist), axis=1)[:, :k]
    return xp.asarray(np.take_along_axis(cand, order, 1)), xp.asarray(np.take_along_axis(dist, order, 1))
