"""kNN searches on the GPU: the fused CuPy kernel, exactly :func:`knn_cpu` (marked ``gpu``)."""


import numpy as np
import pytest
from trackoverlay.utils.graph.knn_gpu import knn_gpu
from trackoverlay.utils.graph.neighbours import knn_cpu


@pytest.mark.gpu
@pytest.mark.parametrize("count,k", [(1, 5), (2, 5), (50, 3), (300, 8), (2000, 5)])
def test_knn_kernel_matches_cpu(count, k):
    import cupy

    points = (np.random.default_rng(count).random((count, 2)) * [1920, 1080]).astype(np.float32)
    want_index, want_distance = knn_cpu(points, k)
    index, distance = knn_gpu(cupy.asarray(points), k)
    np.testing.assert_array_equal(index.get(), want_index)
    np.testing.assert_allclose(distance.get(), want_distance, rtol=1e-5, atol=1e-3)
