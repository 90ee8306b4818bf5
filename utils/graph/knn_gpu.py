"""Exact 2-D kNN on the GPU: the fused two-stage kernel of ``knn.cu`` (CuPy).

Same contract as :func:`.neighbours.knn_cpu`, so the graph code takes either.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.cuda import cuda_kernel
from .neighbours import neighbour_count

_KNN_WIDTHS = (4, 8, 16, 32)
KNN_GPU_MAX_K = _KNN_WIDTHS[-1]
"""Most neighbours the fused kernel returns per point."""


_SOURCE = Path(__file__).with_name("knn.cu")
_NAMES = tuple(f"knn2d_{stage}<{width}>" for stage in ("partial", "merge") for width in _KNN_WIDTHS)


def _kernel(name: str):
    return cuda_kernel(_SOURCE, name, _NAMES)


def _launch_knn(points, mask, k: int, index, distance) -> None:
    """Run the two-stage kNN kernels over [frames, n] points: candidate slices in parallel, then a merge."""
    import cupy

    frames, n = int(points.shape[0]), int(points.shape[1])
    width = next(w for w in _KNN_WIDTHS if w >= k)
    slices = int(np.clip(-(-131072 // (n * frames)), 1, max(1, n // 128)))
    slice_size = -(-n // slices)
    part_index = cupy.empty((frames, slices, n, width), cupy.int32)
    part_distance = cupy.empty((frames, slices, n, width), cupy.float32)
    _kernel(f"knn2d_partial<{width}>")((-(-n // 128), slices, frames), (128,), (
        points, mask, np.int32(n), np.int32(slice_size), part_index, part_distance))
    _kernel(f"knn2d_merge<{width}>")((-(-n // 128), frames), (128,), (
        part_index, part_distance, mask, np.int32(n), np.int32(k), np.int32(slices), index, distance))


def knn_gpu(points, k: int, valid=None):
    """Exact k nearest neighbours of 2-D CuPy points (fused kernel), excluding self.

    ``points`` is [N, 2], or [T, N, 2] for T independent frames (``valid``
    [N] or [T, N] then). Returns ``(idx int64 [..., N, k'], dist float32
    [..., N, k'])`` with ``k' = min(k, N - 1)`` (up to 32), rows sorted by
    distance with ties by index; -1 (and distance 3e38) where a point is
    invalid or has fewer valid neighbours. Same contract as ``graph.knn_cpu``
    (and ``knn_cpu.frames`` for batches).
    """
    import cupy

    points = cupy.ascontiguousarray(points, dtype=cupy.float32)
    batch = points.reshape((-1,) + points.shape[-2:])
    n = int(batch.shape[1])
    k = neighbour_count(k, n)
    if k > KNN_GPU_MAX_K:
        raise ValueError(f"knn_gpu supports k <= {KNN_GPU_MAX_K}, got {k}")
    index = cupy.empty(points.shape[:-1] + (max(k, 0),), cupy.int64)
    distance = cupy.empty(points.shape[:-1] + (max(k, 0),), cupy.float32)
    if k < 1 or batch.shape[0] == 0:
        return index, distance
    mask = np.uint64(0) if valid is None else cupy.ascontiguousarray(valid, dtype=cupy.uint8)
    _launch_knn(batch, mask, k, index, distance)
    return index, distance


knn_gpu.frames = knn_gpu  # the batched form (see graph.neighbours): the kernel takes frames as they are
