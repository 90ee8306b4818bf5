"""Row bands and the thread pool that renders or blends them in parallel.

Each pixel row belongs to one band, so bands can be written by different
threads; NumPy releases the GIL inside its loops.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .layer import SparseLayer, blend_pixels

_MIN_BAND_ROWS = 64


class BandPool:
    """Splits frames into row bands and maps work over them on worker threads.

    Args:
        workers: threads to use (default: the CPU count, at most 8).
    """

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or min(os.cpu_count() or 1, 8))
        self._pool = None

    def bands(self, height: int, most: int | None = None) -> list:
        """Row ranges covering ``height`` rows, a few per worker (at most ``most``)."""
        count = max(1, min(self.workers * 2, height // _MIN_BAND_ROWS, most or height))
        edges = np.linspace(0, height, count + 1).astype(int)
        return [range(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="trackoverlay")
        return self._pool

    def map(self, function, items) -> list:
        """``[function(item) for item in items]``, on the worker threads."""
        if self.workers == 1 or len(items) == 1:
            return [function(item) for item in items]
        return list(self._executor().map(function, items))

    def copy_async(self, frames: np.ndarray, out: np.ndarray) -> list:
        """Start copying ``frames`` ([H, W, 3] or [n, H, W, 3], any strides) into ``out``
        band by band; returns the futures to wait on."""
        def copy(index: tuple) -> None:
            np.copyto(out[index], frames[index])

        lead = frames.shape[:-3]
        bands = self.bands(frames.shape[-3])
        return [self._executor().submit(copy, frame + (slice(rows.start, rows.stop),))
                for frame in np.ndindex(lead) for rows in bands]

    def blend(self, frame: np.ndarray, layer: SparseLayer) -> None:
        """Blend ``layer`` (ascending pixels) over ``frame`` in place, band by band."""
        width = frame.shape[1]

        def band(rows: range) -> None:
            lo, hi = np.searchsorted(layer.pixels, [rows.start * width, rows.stop * width])
            blend_pixels(frame, SparseLayer(layer.height, layer.width, layer.pixels[lo:hi],
                                            layer.color[:, lo:hi], layer.alpha[lo:hi]))

        self.map(band, self.bands(frame.shape[0]))

    def composite(self, frame: np.ndarray, layer: SparseLayer, out: np.ndarray) -> np.ndarray:
        """Copy ``frame`` into ``out`` and blend ``layer`` over it."""
        for copy in self.copy_async(frame, out):
            copy.result()
        self.blend(out, layer)
        return out

    def close(self) -> None:
        """Stop the worker threads (the pool restarts on next use)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
