"""CPU renderer: rasterises display lists band by band, or several frames at once, on thread pools."""

from __future__ import annotations

import copy
import os
from contextlib import closing, contextmanager

import numpy as np

from ..core.threads import SharedGate, ordered_ahead
from ..draw.display_list import DisplayList
from .cpu_spans import BYTES_PER_CANDIDATE, candidate_pixels, prepare, rasterize_band
from .glow import Glow, glow_layer, glows
from .layer import SparseLayer, blend_pixels, check_frame, output_buffer
from .renderer import Renderer

RASTER_BAND_ROWS = 540
"""A frame is rasterised in parallel bands of about this many rows. Rasterising is mostly small NumPy calls
that hold Python's lock, so more bands mostly repeat that work. Measured on a 16-core machine (100 points,
ms for 1 / 2 / 4 / 8 bands): 1080p 57 / 31 / 42 / 124; 4K 195 / 116 / 71 / 137; 4K with 1000 points
1370 / 606 / 329 / 272."""


FRAMES_AT_ONCE = max(1, min(8, os.cpu_count() or 1))
"""How many frames the CPU renderer draws at once when it draws a batch or a video, each frame in one band on
a thread of its own: frames share Python's lock better than bands of one frame do. Measured on a 16-core
machine (100 points, ms a frame at 1080p / 4K): bands of 540 rows, a frame at a time 50.7 / 49.8; frames at
once x2 35.2 / 55.2, x4 21.8 / 32.4, x8 24.1 / 24.9, x16 35.2 / 36.4."""


AT_ONCE_BYTES = 128 << 20
"""A frame whose rasterising needs more working memory than this is drawn alone (in bands, the other frames
waiting), so frames drawn at once hold at most :data:`FRAMES_AT_ONCE` x this. Measured: 1080p with 100 / 300
points 36 / 82 MB, 4K with 100 / 1000 points 54 / 280 MB."""


def _raster_bands(height: int) -> int:
    """How many bands a frame ``height`` rows tall is rasterised in."""
    return max(1, height // RASTER_BAND_ROWS)


class CpuRenderer(Renderer):
    """Draws display lists over frames on the CPU (NumPy): a frame in bands, or batches several frames at once.

    Args:
        workers: threads to use (default: the CPU count, at most 8).
        frames_at_once: frames a batch or a video draws at once (default :data:`FRAMES_AT_ONCE`, at most
            ``workers``); 1 draws a frame at a time, in bands.
        stop_check: called every few million pixels drawn, on the drawing threads; it raises to stop the
            run (e.g. ComfyUI's interrupt), which a frame of very wide lines would otherwise hold for minutes.
    """

    name = "cpu"

    def __init__(self, workers: int | None = None, frames_at_once: int | None = None, stop_check=None):
        super().__init__(workers)
        self.stop_check = stop_check
        self.frames_at_once = max(1, min(frames_at_once or FRAMES_AT_ONCE, self.pool.workers))
        self._gate = None  # set on :meth:`one_band`'s twins, which share it

    def one_band(self) -> CpuRenderer:
        """This renderer (same threads) for callers that draw :attr:`frames_at_once` frames at once on threads
        of their own: a frame is drawn in one band, or alone in bands when it needs much memory
        (:data:`AT_ONCE_BYTES`)."""
        twin = copy.copy(self)
        twin._gate = SharedGate(self.frames_at_once)
        return twin

    @contextmanager
    def _bands(self, display_list: DisplayList, height: int):
        """The row bands to draw ``display_list`` in, held for the block (see :meth:`one_band`)."""
        if self._gate is None:
            yield self.pool.bands(height, _raster_bands(height))
            return
        alone = candidate_pixels(display_list) * BYTES_PER_CANDIDATE > AT_ONCE_BYTES
        with self._gate.share(alone):
            yield self.pool.bands(height, _raster_bands(height) if alone else 1)

    def rasterize(self, display_list: DisplayList, height: int, width: int, glow: Glow | None = None) -> SparseLayer:
        """The premultiplied overlay layer of ``display_list`` (over its ``glow``) as a sparse layer."""
        if not display_list.primitive_count:
            return SparseLayer.empty(height, width)
        prepared = prepare(display_list)
        with self._bands(display_list, height) as bands:
            parts = self.pool.map(lambda rows: rasterize_band(prepared, rows, height, width, self.stop_check), bands)
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
            blend_pixels(out, rasterize_band(prepared, rows, height, width, self.stop_check))

        with self._bands(display_list, height) as bands:
            self.pool.map(render_band, bands)
        return out

    def render_frames(self, frames, overlays: list, out, progress=None, layers=None, glow: Glow | None = None):
        """See :meth:`Renderer.render_frames`; host batches draw :attr:`frames_at_once` frames at once."""
        if self.frames_at_once == 1 or len(overlays) == 1 or not isinstance(frames, np.ndarray):
            return super().render_frames(frames, overlays, out, progress, layers, glow)
        single = self.one_band()

        def job(index: int):
            picked = slice(index, index + 1)
            return lambda: single.render_frames(frames[picked] if len(frames) > 1 else frames, overlays[picked],
                                                  out[picked], None, None if layers is None else
                                                  (layers[0][picked], layers[1][picked]), glow)

        jobs = (job(index) for index in range(len(overlays)))
        with closing(ordered_ahead(jobs, self.frames_at_once, "raster")) as drawn:
            for done, _ in enumerate(drawn, 1):
                if progress is not None:
                    progress(done, len(overlays))
        return out
