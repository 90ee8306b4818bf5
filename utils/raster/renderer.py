"""What every renderer shares: host frames composited band by band on a thread pool.

Subclasses provide ``rasterize`` (display list -> sparse layer) and ``render``
(display list over a frame, each backend's fastest way).
"""

from __future__ import annotations

import numpy as np

from ..draw.display_list import DisplayList
from .bands import BandPool
from .layer import SparseLayer, check_frame, layer_to_rgba, output_buffer


class Renderer:
    """Base of the CPU and GPU renderers (``render``/``rasterize``/``render_layer`` API).

    Args:
        workers: host threads for compositing (default: the CPU count, at most 8).
    """

    name = "base"

    def __init__(self, workers: int | None = None):
        self.pool = BandPool(workers)

    def rasterize(self, display_list: DisplayList, height: int, width: int) -> SparseLayer:
        """The premultiplied overlay layer of ``display_list`` as a sparse layer."""
        raise NotImplementedError

    def composite(self, frame: np.ndarray, layer: SparseLayer, out: np.ndarray | None = None) -> np.ndarray:
        """A rasterised ``layer`` over a host ``frame`` into a new frame (or ``out``)."""
        check_frame(frame)
        return self.pool.composite(frame, layer, output_buffer(frame, out))

    def render_layer(self, display_list: DisplayList, height: int, width: int):
        """The overlay alone: straight RGB float32 [H, W, 3] and alpha float32 [H, W]."""
        return layer_to_rgba(self.rasterize(display_list, height, width))

    def close(self) -> None:
        """Stop the worker threads (the renderer stays usable)."""
        self.pool.close()
