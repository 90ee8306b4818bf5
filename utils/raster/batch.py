"""Batch rendering: frames + per-frame display lists -> composited frames (+ layer).

Shared by the ComfyUI nodes and the scripts. Frame and overlay counts must
match or one of them be 1 (it repeats); anything else is a clear error.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ..core.arrays import array_module
from ..core.checks import broadcast_length, check_frame_size
from ..core.threads import ordered_ahead
from ..draw.display_list import DisplayList
from .glow import Glow, glows
from .layer import FRAME_DTYPES, layer_to_rgba


def _check_overlays(overlays: list, height: int, width: int) -> None:
    if not overlays:
        raise ValueError("no overlay given: connect an overlay with at least one frame")
    for entry in overlays:
        if not isinstance(entry, DisplayList):
            raise TypeError(f"overlay entries must be DisplayList, got {type(entry).__name__}")
        check_frame_size(entry.frame_size, width, height, "the overlay's points", "the image batch")


@dataclass
class RenderedBatch:
    """Composited frames, and the overlay alone when it was asked for."""

    frames: np.ndarray
    layer_rgb: Optional[np.ndarray] = None
    layer_alpha: Optional[np.ndarray] = None


def frame_batch(frames):
    """``frames`` as a NumPy or CuPy array without copying.

    Takes NumPy and CuPy arrays and any DLPack tensor (e.g. a torch tensor on
    the CPU or on a CUDA device); anything else is a ``TypeError``.
    """
    if isinstance(frames, np.ndarray) or type(frames).__module__.startswith("cupy"):
        return frames
    if hasattr(frames, "__dlpack__") and hasattr(frames, "__dlpack_device__"):
        device_type = int(frames.__dlpack_device__()[0])
        if device_type == _DLPACK_CPU:
            return np.from_dlpack(frames)
        if device_type == _DLPACK_CUDA:
            import cupy

            return cupy.from_dlpack(frames)
        raise TypeError(f"frames live on a DLPack device of type {device_type}; give CPU or CUDA frames")
    raise TypeError(f"frames must be a NumPy, CuPy or DLPack (e.g. torch) array, got {type(frames).__name__}")


_DLPACK_CPU, _DLPACK_CUDA = 1, 2


def render_batch(frames, overlays: list, renderer, with_layer: bool = False,
                 progress: Callable[[int, int], None] | None = None, glow: Glow | None = None) -> RenderedBatch:
    """Draw ``overlays`` (one DisplayList per frame, or one for all, each with its ``glow``) over ``frames``.

    ``frames`` is [B, H, W, 3] uint8 or float32 (NumPy, CuPy, or a DLPack
    tensor such as a torch tensor on the CPU or a CUDA device, read without a
    copy) and is never modified. The result has the broadcast length and the
    input's dtype, on the input's side: a NumPy array for host frames, a CuPy
    array for frames on the GPU (``torch.from_dlpack`` takes it without a
    copy). ``progress(done, total)`` follows the work (it may raise to stop
    the run). The layer outputs are host arrays.
    """
    frames = frame_batch(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"frames must have shape [B, H, W, 3], got {list(frames.shape)}")
    if np.dtype(frames.dtype) not in FRAME_DTYPES:
        raise ValueError(f"frames dtype must be uint8 or float32, got {frames.dtype}")
    if 0 in frames.shape:
        raise ValueError(f"frames are empty (shape {list(frames.shape)})")
    _check_overlays(overlays, *frames.shape[1:3])
    glows(glow)
    count = broadcast_length(**{"the image batch": len(frames), "the overlay": len(overlays)})
    per_frame = list(overlays) if len(overlays) == count else [overlays[0]] * count
    height, width = frames.shape[1:3]
    out = array_module(frames).empty((count,) + frames.shape[1:], frames.dtype)
    layers = None
    if with_layer:
        layers = (np.zeros((count, height, width, 3), np.float32), np.zeros((count, height, width), np.float32))
    renderer.render_frames(frames, per_frame, out, progress=progress, layers=layers, glow=glow)
    return RenderedBatch(out, *(layers or ()))


def render_layers(overlays: list, count: int, height: int, width: int, renderer,
                  progress: Callable[[int, int], None] | None = None,
                  glow: Glow | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The overlay alone (with its ``glow``), without frames: straight RGB float32 [B, H, W, 3] and alpha
    float32 [B, H, W].

    ``count`` is the number of frames it will go over (``overlays`` of one
    entry repeat; otherwise the counts must match or ``count`` be 1). The
    pixels equal the ``layer_rgb``/``layer_alpha`` of :func:`render_batch`. A renderer that draws several
    frames at once (the CPU's ``frames_at_once``) rasterises them so here too: one at a time took 5x Render
    Overlay's time on the same frames (1080p, 100 points, 2 cores).
    """
    _check_overlays(overlays, height, width)
    glows(glow)
    count = broadcast_length(**{"the image batch": count, "the overlay": len(overlays)})
    rgb = np.zeros((count, height, width, 3), np.float32)
    alpha = np.zeros((count, height, width), np.float32)
    at_once = renderer.frames_at_once
    drawer = renderer.one_band() if at_once > 1 else renderer  # frames at once: each in one band

    def job(index: int):
        display_list = overlays[index if len(overlays) > 1 else 0]
        return lambda: layer_to_rgba(drawer.rasterize(display_list, height, width, glow=glow), rgb[index],
                                       alpha[index])

    jobs = (job(index) for index in range(count))
    with closing(ordered_ahead(jobs, at_once, "layer") if at_once > 1 else (run() for run in jobs)) as drawn:
        for done, _ in enumerate(drawn, 1):
            if progress is not None:
                progress(done, count)
    return rgb, alpha
