"""kNN searches on the GPU: the fused CuPy kernel and FAISS, each exactly :func:`knn_cpu`.

The GPU searches are marked ``gpu`` (skipped without one); FAISS's CPU
fallback is checked everywhere with a stand-in ``faiss`` module.
"""

import logging
import sys
import types

import numpy as np
import pytest
from trackoverlay.utils.graph import knn_faiss
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


@pytest.mark.gpu
@pytest.mark.parametrize("count", [3, 100, 5000])
def test_faiss_knn_matches_cpu(count):
    pytest.importorskip("faiss", reason="FAISS GPU is optional")
    points = (np.random.default_rng(count).random((count, 2)) * [3840, 2160]).astype(np.float32)
    want_index, want_distance = knn_cpu(points, 5)
    index, distance = knn_faiss.knn_faiss(points, 5)
    np.testing.assert_array_equal(index, want_index)
    np.testing.assert_allclose(distance, want_distance, rtol=1e-5, atol=1e-3)


def test_faiss_failure_falls_back_to_the_cpu_search(monkeypatch, caplog):
    broken = types.ModuleType("faiss")
    broken.knn_gpu = lambda *args, **kwargs: (_ for _ in ()).throw(RuntimeError("Error in virtual void faiss::gpu"))
    broken.StandardGpuResources = lambda: types.SimpleNamespace(setTempMemory=lambda size: None)
    monkeypatch.setitem(sys.modules, "faiss", broken)
    knn_faiss._resources.cache_clear()
    knn_faiss._warn_fallback.cache_clear()
    points = (np.random.default_rng(0).random((50, 2)) * 500).astype(np.float32)
    try:
        with caplog.at_level(logging.WARNING, logger="trackoverlay"):
            for _ in range(3):
                index, distance = knn_faiss.knn_faiss(points, 4)
    finally:
        knn_faiss._resources.cache_clear()
    want_index, want_distance = knn_cpu(points, 4)
    np.testing.assert_array_equal(index, want_index)
    np.testing.assert_array_equal(distance, want_distance)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "faiss::gpu" in warnings[0].getMessage()
