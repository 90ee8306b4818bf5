"""Batch rendering: frames + per-frame display lists -> composited frames (+ layer).

Shared by the ComfyUI nodes and the scripts. Frame and overlay counts must
match or one of them be 1 (it repeats); anything else is a clear error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..core.checks import broadcast_length
from ..draw.display_list import DisplayList
from .layer import layer_to_rgba


def _check_overlays(overlays: list) -> None:
    if not overlays:
        raise ValueError("no overlay given: connect an overlay with at least one frame")
    for entry in overlays:
        if not isinstance(entry, DisplayList):
            raise TypeError(f"overlay entries must be DisplayList, got {type(entry).__name__}")


@dataclass
class RenderedBatch:
    """Composited frames, and the overlay alone when it was asked for."""

    frames: np.ndarray
    layer_rgb: Optional[np.ndarray] = None
    layer_alpha: Optional[np.ndarray] = None


def render_batch(frames: np.ndarray, overlays: list, renderer, with_layer: bool = False,
                 progress: Callable[[int, int], None] | None = None) -> RenderedBatch:
    """Draw ``overlays`` (one DisplayList per frame, or one for all) over ``frames``.

    ``frames`` is [B, H, W, 3] uint8 or float32 and is never modified; the
    result has the broadcast length and the input's dtype. ``progress(done,
    total)`` is called after every frame (it may raise to stop the run).
    """
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"frames must have shape [B, H, W, 3], got {list(frames.shape)}")
    _check_overlays(overlays)
    count = broadcast_length(**{"the image batch": len(frames), "the overlay": len(overlays)})
    height, width = frames.shape[1:3]
    out = np.empty((count,) + frames.shape[1:], frames.dtype)
    layer_rgb = np.zeros((count, height, width, 3), np.float32) if with_layer else None
    layer_alpha = np.zeros((count, height, width), np.float32) if with_layer else None
    for index in range(count):
        frame = frames[index if len(frames) > 1 else 0]
        display_list = overlays[index if len(overlays) > 1 else 0]
        if with_layer:  # one rasterisation feeds both outputs
            layer = renderer.rasterize(display_list, height, width)
            renderer.composite(frame, layer, out=out[index])
            layer_to_rgba(layer, layer_rgb[index], layer_alpha[index])
        else:
            renderer.render(frame, display_list, out=out[index])
        if progress is not None:
            progress(index + 1, count)
    return RenderedBatch(out, layer_rgb, layer_alpha)


def render_layers(overlays: list, count: int, height: int, width: int, renderer,
                  progress: Callable[[int, int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The overlay alone, without frames: straight RGB float32 [B, H, W, 3] and alpha float32 [B, H, W].

    ``count`` is the number of frames it will go over (``overlays`` of one
    entry repeat; otherwise the counts must match or ``count`` be 1). The
    pixels equal the ``layer_rgb``/``layer_alpha`` of :func:`render_batch`.
    """
    _check_overlays(overlays)
    count = broadcast_length(**{"the image batch": count, "the overlay": len(overlays)})
    rgb = np.zeros((count, height, width, 3), np.float32)
    alpha = np.zeros((count, height, width), np.float32)
    for index in range(count):
        layer = renderer.rasterize(overlays[index if len(overlays) > 1 else 0], height, width)
        layer_to_rgba(layer, rgb[index], alpha[index])
        if progress is not None:
            progress(index + 1, count)
    return rgb, alpha
