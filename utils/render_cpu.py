"""CPU renderer: rasterises display lists in horizontal bands on a thread pool.

Bands are independent (each pixel row belongs to one band), and NumPy
releases the GIL inside its loops, so bands render in parallel threads.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .composite import blend_pixels, check_frame, layer_to_rgba
from .display_list import DisplayList
from .raster_cpu import SparseLayer, prepare, rasterize_band

_MIN_BAND_ROWS = 64


class CpuRenderer:
    """Draws display lists over frames on the CPU.

    Args:
        workers: threads to use (default: the CPU count, at most 8).
    """

    name = "cpu"

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or min(os.cpu_count() or 1, 8))
        self._pool = None

    def _bands(self, height: int) -> list:
        count = max(1, min(self.workers * 2, height // _MIN_BAND_ROWS))
        edges = np.linspace(0, height, count + 1).astype(int)
        return [range(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]

    def _map(self, function, items):
        if self.workers == 1 or len(items) == 1:
            return [function(item) for item in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="trackoverlay")
        return list(self._pool.map(function, items))

    def rasterize(self, display_list: DisplayList, height: int, width: int) -> SparseLayer:
        """The premultiplied overlay layer of ``display_list`` as a sparse layer."""
        prepared = prepare(display_list)
        parts = self._map(lambda rows: rasterize_band(prepared, rows, height, width), self._bands(height))
        return SparseLayer(height, width, np.concatenate([p.pixels for p in parts]),
                           np.concatenate([p.color for p in parts], axis=1),
                           np.concatenate([p.alpha for p in parts]))

    def render(self, frame: np.ndarray, display_list: DisplayList, out: np.ndarray | None = None) -> np.ndarray:
        """``display_list`` composited over ``frame`` into a new frame (or ``out``)."""
        check_frame(frame)
        height, width = frame.shape[:2]
        if out is None:
            out = np.empty_like(frame)
        prepared = prepare(display_list)

        def render_band(rows: range) -> None:
            out[rows.start:rows.stop] = frame[rows.start:rows.stop]
            blend_pixels(out, rasterize_band(prepared, rows, height, width))

        self._map(render_band, self._bands(height))
        return out

    def render_layer(self, display_list: DisplayList, height: int, width: int):
        """The overlay alone: straight RGB float32 [H, W, 3] and alpha float32 [H, W]."""
        return layer_to_rgba(self.rasterize(display_list, height, width))

    def close(self) -> None:
        """Stop the worker threads (the renderer stays usable)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
