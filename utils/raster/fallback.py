"""A GPU renderer that finishes the run on the CPU when the GPU fails.

GPU out-of-memory first frees CuPy's memory pool and retries once; any other
GPU failure (or a second out-of-memory) logs one warning with the reason and
continues on the CPU renderer, which draws the same picture. A failure after
frames drawn in place began to be written back (:class:`~.renderer.FramesHalfWritten`)
is raised instead: drawing them again would draw their overlay twice.
"""

from __future__ import annotations

from ..core.log import LOGGER
from .renderer import FramesHalfWritten


def _is_out_of_memory(error: Exception) -> bool:
    return type(error).__name__ == "OutOfMemoryError"


def _free_gpu_pool() -> None:
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()


class FallbackRenderer:
    """Delegates to ``gpu`` until it fails, then to ``cpu_factory()`` for good."""

    frames_at_once = 1  # the GPU's: one frame at a time (after a fallback too)

    def __init__(self, gpu, cpu_factory):
        self._gpu = gpu
        self._cpu_factory = cpu_factory
        self._cpu = None

    @property
    def name(self) -> str:
        """``gpu`` while the GPU renders, ``cpu`` after a fallback."""
        return "cpu" if self._cpu is not None else "gpu"

    def _on_gpu(self, function) -> tuple:
        """(True, ``function(gpu)``) while the GPU renders; (False, None) once on the CPU or when it fails now."""
        if self._cpu is not None:
            return False, None
        try:
            return True, function(self._gpu)
        except FramesHalfWritten:
            raise
        except Exception as error:  # CuPy/CUDA errors have no common base class
            if _is_out_of_memory(error):
                _free_gpu_pool()
                try:
                    return True, function(self._gpu)
                except Exception as retry_error:
                    error = retry_error
            LOGGER.warning("GPU rendering failed (%s: %s); continuing on the CPU", type(error).__name__, error)
            self._gpu.close()
            self._cpu = self._cpu_factory()
            return False, None

    def _call(self, method: str, *args, **kwargs):
        done, result = self._on_gpu(lambda gpu: getattr(gpu, method)(*args, **kwargs))
        return result if done else getattr(self._cpu, method)(*args, **kwargs)

    def on_gpu(self, function):
        """``function(gpu_renderer)`` under the same fallback rules, for work that keeps its results on the GPU;
        None once rendering is on the CPU (the caller then takes the CPU path)."""
        return self._on_gpu(function)[1]

    def host_array(self, nbytes: int):
        """See :meth:`Renderer.host_array` (the GPU renderer's while it renders)."""
        return (self._cpu or self._gpu).host_array(nbytes)

    def render(self, frame, display_list, out=None, glow=None):
        """See :meth:`CpuRenderer.render`."""
        return self._call("render", frame, display_list, out=out, glow=glow)

    def render_frames(self, frames, overlays, out, progress=None, layers=None, glow=None):
        """See :meth:`Renderer.render_frames` (a GPU failure redraws the whole batch on the CPU)."""
        return self._call("render_frames", frames, overlays, out, progress=progress, layers=layers, glow=glow)

    def rasterize(self, display_list, height: int, width: int, glow=None):
        """See :meth:`CpuRenderer.rasterize`."""
        return self._call("rasterize", display_list, height, width, glow=glow)

    def composite(self, frame, layer, out=None):
        """See :meth:`CpuRenderer.composite`."""
        return self._call("composite", frame, layer, out=out)

    def render_layer(self, display_list, height: int, width: int, glow=None):
        """See :meth:`CpuRenderer.render_layer`."""
        return self._call("render_layer", display_list, height, width, glow=glow)

    def close(self) -> None:
        """Release both renderers' resources."""
        self._gpu.close()
        if self._cpu is not None:
            self._cpu.close()
