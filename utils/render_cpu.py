"""CPU renderer: rasterises display lists band by band on a thread pool."""

from __future__ import annotations

import numpy as np

from .bands import BandPool
from .composite import blend_pixels, check_frame, layer_to_rgba, output_buffer
from .display_list import DisplayList
from .raster_cpu import SparseLayer, prepare, rasterize_band


class CpuRenderer:
    """Draws display lists over frames on the CPU.

    Args:
        workers: threads to use (default: the CPU count, at most 8).
    """

    name = "cpu"

    def __init__(self, workers: int | None = None):
        self.pool = BandPool(workers)

    def rasterize(self, display_list: DisplayList, height: int, width: int) -> SparseLayer:
        """The premultiplied overlay layer of ``display_list`` as a sparse layer."""
        prepared = prepare(display_list)
        parts = self.pool.map(lambda rows: rasterize_band(prepared, rows, height, width), self.pool.bands(height))
        return SparseLayer(height, width, np.concatenate([p.pixels for p in parts]),
                           np.concatenate([p.color for p in parts], axis=1),
                           np.concatenate([p.alpha for p in parts]))

    def render(self, frame: np.ndarray, display_list: DisplayList, out: np.ndarray | None = None) -> np.ndarray:
        """``display_list`` composited over ``frame`` into a new frame (or ``out``)."""
        check_frame(frame)
        height, width = frame.shape[:2]
        out = output_buffer(frame, out)
        prepared = prepare(display_list)

        def render_band(rows: range) -> None:
            out[rows.start:rows.stop] = frame[rows.start:rows.stop]
            blend_pixels(out, rasterize_band(prepared, rows, height, width))

        self.pool.map(render_band, self.pool.bands(height))
        return out

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
