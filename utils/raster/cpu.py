"""CPU renderer: rasterises display lists band by band on a thread pool."""

from __future__ import annotations

import numpy as np

from ..draw.display_list import DisplayList
from .cpu_spans import prepare, rasterize_band
from .glow import Glow, glow_layer, glows
from .layer import SparseLayer, blend_pixels, check_frame, output_buffer
from .renderer import Renderer

RASTER_BAND_ROWS = 540
"""A frame is rasterised in parallel bands of about this many rows. Rasterising is mostly small NumPy calls
that hold Python's lock, so more bands mostly repeat that work. Measured on a 16-core machine (100 points,
ms for 1 / 2 / 4 / 8 bands): 1080p 57 / 31 / 42 / 124; 4K 195 / 116 / 71 / 137; 4K with 1000 points
1370 / 606 / 329 / 272."""


def _raster_bands(height: int) -> int:
    """How many bands a frame ``height`` rows tall is rasterised in."""
    return max(1, height // RASTER_BAND_ROWS)


class CpuRenderer(Renderer):
    """Draws display lists over frames on the CPU (NumPy, one band per thread).

    Args:
        workers: threads to use (default: the CPU count, at most 8).
    """

    name = "cpu"

    def rasterize(self, display_list: DisplayList, height: int, width: int, glow: Glow | None = None) -> SparseLayer:
        """The premultiplied overlay layer of ``display_list`` (over its ``glow``) as a sparse layer."""
        if not display_list.primitive_count:
            return SparseLayer.empty(height, width)
        prepared = prepare(display_list)
        parts = self.pool.map(lambda rows: rasterize_band(prepared, rows, height, width),
                              self.pool.bands(height, _raster_bands(height)))
        return glow_layer(SparseLayer(height, width, np.concatenate([p.pixels for p in parts]),
                                      np.concatenate([p.color for p in parts], axis=1),
                                      np.concatenate([p.alpha for p in parts])), glow)

    def render(self, frame: np.ndarray, display_list: DisplayList, out: np.ndarray | None = None,
               glow: Glow | None = None) -> np.ndarray:
        """``display_list`` (with its ``glow``) composited over ``frame`` into a new frame (or ``out``), band by band."""
        if glows(glow):  # the halo crosses bands: the whole layer first
            return super().render(frame, display_list, out, glow)
        check_frame(frame)
        height, width = frame.shape[:2]
        out = output_buffer(frame, out)
        prepared = prepare(display_list)

        def render_band(rows: range) -> None:
            out[rows.start:rows.stop] = frame[rows.start:rows.stop]
            blend_pixels(out, rasterize_band(prepared, rows, height, width))

        self.pool.map(render_band, self.pool.bands(height, _raster_bands(height)))
        return out
