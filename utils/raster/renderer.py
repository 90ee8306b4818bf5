"""What every renderer shares: host frames composited band by band on a thread pool.

Subclasses provide ``rasterize`` (display list -> sparse layer, with its glow
when a :class:`~.glow.Glow` is given) and may override ``render`` and
``render_frames`` with faster fused paths.
"""

from __future__ import annotations

import numpy as np

from ..core.arrays import to_numpy
from ..draw.display_list import DisplayList
from .bands import BandPool
from .glow import Glow
from .layer import SparseLayer, check_frame, layer_to_rgba, output_buffer


class FramesHalfWritten(RuntimeError):
    """A GPU failure while drawn frames were being copied back over the caller's host frames in place: they may
    be half drawn, so no renderer may draw them again (a fallback would draw their overlay twice)."""


class Renderer:
    """Base of the CPU and GPU renderers (``render``/``rasterize``/``render_layer`` API).

    Args:
        workers: host threads for compositing (default: the CPU count, at most 8).
    """

    name = "base"
    frames_at_once = 1
    """How many frames callers should draw at once, on threads of their own (see :class:`~.cpu.CpuRenderer`)."""

    def __init__(self, workers: int | None = None):
        self.pool = BandPool(workers)

    def rasterize(self, display_list: DisplayList, height: int, width: int, glow: Glow | None = None) -> SparseLayer:
        """The premultiplied overlay layer of ``display_list`` (over its ``glow``) as a sparse layer."""
        raise NotImplementedError

    def host_array(self, nbytes: int) -> np.ndarray:
        """A new uint8 host array of ``nbytes`` for frames this renderer will draw on (the GPU's is page-locked)."""
        return np.empty(nbytes, np.uint8)

    def render(self, frame: np.ndarray, display_list: DisplayList, out: np.ndarray | None = None,
               glow: Glow | None = None) -> np.ndarray:
        """``display_list`` (with its ``glow``) composited over ``frame`` into a new frame (or ``out``)."""
        check_frame(frame)
        return self.composite(frame, self.rasterize(display_list, *frame.shape[:2], glow=glow), out)

    def render_frames(self, frames, overlays: list, out, progress=None, layers=None, glow: Glow | None = None):
        """``overlays[i]`` over ``frames[i]`` (or ``frames[0]`` for all) into ``out[i]``, frame by frame.

        ``layers`` = (rgb [n, H, W, 3], alpha [n, H, W]), zero-filled float32
        host arrays, also receives each overlay alone (one rasterisation feeds
        both). CuPy frames are rendered through host copies (``out`` is then a
        CuPy array too). ``progress(done, total)`` is called after every frame.
        ``glow`` adds its halo to every overlay (and to ``layers``).
        """
        if not isinstance(frames, np.ndarray):  # frames on a GPU, drawn on the CPU
            host = np.empty(out.shape, out.dtype)
            self.render_frames(to_numpy(frames), overlays, host, progress, layers, glow)
            out.set(host)
            return out
        height, width = frames.shape[1:3]
        for index, display_list in enumerate(overlays):
            frame = frames[index if len(frames) > 1 else 0]
            if layers is None:
                self.render(frame, display_list, out=out[index], glow=glow)
            else:
                layer = self.rasterize(display_list, height, width, glow=glow)
                self.composite(frame, layer, out=out[index])
                layer_to_rgba(layer, layers[0][index], layers[1][index])
            if progress is not None:
                progress(index + 1, len(overlays))
        return out

    def composite(self, frame: np.ndarray, layer: SparseLayer, out: np.ndarray | None = None) -> np.ndarray:
        """A rasterised ``layer`` over a host ``frame`` into a new frame (or ``out``)."""
        check_frame(frame)
        return self.pool.composite(frame, layer, output_buffer(frame, out))

    def render_layer(self, display_list: DisplayList, height: int, width: int, glow: Glow | None = None):
        """The overlay alone (with its ``glow``): straight RGB float32 [H, W, 3] and alpha float32 [H, W]."""
        return layer_to_rgba(self.rasterize(display_list, height, width, glow=glow))

    def close(self) -> None:
        """Stop the worker threads (the renderer stays usable)."""
        self.pool.close()
