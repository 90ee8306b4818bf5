"""Backend choice and GPU faults: the run completes on the CPU with one warning, never a wrong frame."""

import logging

import numpy as np
import pytest
from scenes import SCENES
from trackoverlay.utils.raster import backend
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.raster.fallback import FallbackRenderer
from trackoverlay.utils.raster.renderer import FramesHalfWritten


class OutOfMemoryError(Exception):
    """Stands in for cupy.cuda.memory.OutOfMemoryError (matched by name)."""


class FailingGpu:
    """A GPU renderer whose calls raise ``errors`` in turn, then draw with ``cpu``."""

    def __init__(self, cpu, *errors):
        self.cpu = cpu
        self.errors = list(errors)
        self.calls = 0
        self.closed = False

    def render(self, frame, display_list, out=None, glow=None):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.cpu.render(frame, display_list, out=out, glow=glow)

    def close(self):
        self.closed = True


@pytest.fixture
def scene():
    return SCENES["seed_scene"]()


def test_kernel_failure_falls_back_to_cpu_with_one_warning(cpu_renderer, scene, caplog):
    frame, display_list = scene
    gpu = FailingGpu(cpu_renderer, RuntimeError("cudaErrorLaunchFailure: unspecified launch failure"))
    renderer = FallbackRenderer(gpu, CpuRenderer)
    with caplog.at_level(logging.WARNING, logger="trackoverlay"):
        first = renderer.render(frame, display_list)
        second = renderer.render(frame, display_list)
    want = cpu_renderer.render(frame, display_list)
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(second, want)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unspecified launch failure" in warnings[0].getMessage()
    assert renderer.name == "cpu" and gpu.closed and gpu.calls == 1


def test_out_of_memory_frees_the_pool_and_retries_on_the_gpu(cpu_renderer, scene, monkeypatch, caplog):
    frame, display_list = scene
    freed = []
    monkeypatch.setattr("trackoverlay.utils.raster.fallback._free_gpu_pool", lambda: freed.append(True))
    gpu = FailingGpu(cpu_renderer, OutOfMemoryError("out of memory allocating 99532800 bytes"))
    renderer = FallbackRenderer(gpu, CpuRenderer)
    with caplog.at_level(logging.WARNING, logger="trackoverlay"):
        out = renderer.render(frame, display_list)
    np.testing.assert_array_equal(out, cpu_renderer.render(frame, display_list))
    assert freed == [True] and gpu.calls == 2 and renderer.name == "gpu"
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_repeated_out_of_memory_falls_back_to_cpu(cpu_renderer, scene, monkeypatch, caplog):
    frame, display_list = scene
    monkeypatch.setattr("trackoverlay.utils.raster.fallback._free_gpu_pool", lambda: None)
    gpu = FailingGpu(cpu_renderer, OutOfMemoryError("first"), OutOfMemoryError("second"))
    renderer = FallbackRenderer(gpu, CpuRenderer)
    with caplog.at_level(logging.WARNING, logger="trackoverlay"):
        out = renderer.render(frame, display_list)
    np.testing.assert_array_equal(out, cpu_renderer.render(frame, display_list))
    assert renderer.name == "cpu" and "second" in caplog.text


def test_a_failure_while_drawn_frames_are_written_back_is_raised_not_redrawn(cpu_renderer, scene, caplog):
    """Frames the GPU was writing back over in place may be half drawn: drawing them again on the CPU would
    draw their overlay twice, so the error reaches the caller and no CPU renderer takes over."""
    frame, display_list = scene
    gpu = FailingGpu(cpu_renderer, FramesHalfWritten("the GPU failed while copying drawn frames back"))
    made = []
    renderer = FallbackRenderer(gpu, lambda: made.append(CpuRenderer()))
    with caplog.at_level(logging.WARNING, logger="trackoverlay"), pytest.raises(FramesHalfWritten, match="copying"):
        renderer.render(frame, display_list)
    assert not made and renderer.name == "gpu" and gpu.calls == 1
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_cupy_import_error_selects_the_cpu_with_the_reason(monkeypatch):
    monkeypatch.setattr(backend, "probe_gpu", lambda: (False, "CuPy is not importable (ImportError: no cupy)"))
    info = backend.select_backend("auto")
    assert info.selected == "cpu" and "no cupy" in info.reason
    renderer, _ = backend.make_renderer("auto")
    assert isinstance(renderer, CpuRenderer)
    with pytest.raises(RuntimeError, match="backend 'gpu' was requested but CuPy is not importable.*backend 'cpu'"):
        backend.select_backend("gpu")


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="backend 'cuda' is not one of auto, cpu, gpu"):
        backend.select_backend("cuda")
