"""The layer both rasterisers produce, and the host rules for frames and compositing.

Neither backend owns this module: the CPU and GPU rasterisers both return a
:class:`SparseLayer`, and host frames are checked and blended here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FRAME_DTYPES = (np.uint8, np.float32)


@dataclass(frozen=True)
class SparseLayer:
    """A premultiplied RGBA layer stored only where it is non-empty.

    ``pixels`` are flat indices ``y * width + x`` (unique, ascending),
    ``color`` is planar premultiplied RGB float32 [3, M] and ``alpha`` float32 [M].
    """

    height: int
    width: int
    pixels: np.ndarray
    color: np.ndarray
    alpha: np.ndarray

    @classmethod
    def empty(cls, height: int, width: int) -> "SparseLayer":
        return cls(height, width, np.zeros(0, np.int64), np.zeros((3, 0), np.float32),
                   np.zeros(0, np.float32))


def check_frame(frame, name: str = "frame") -> None:
    """Raise a clear error unless ``frame`` is an RGB [H, W, 3] uint8/float32 array."""
    if not isinstance(frame, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array, got {type(frame).__name__}")
    if frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(f"{name} must have shape [H, W, 3], got {list(frame.shape)}")
    if frame.dtype not in FRAME_DTYPES:
        raise ValueError(f"{name} dtype must be uint8 or float32, got {frame.dtype}")
    if frame.shape[0] < 1 or frame.shape[1] < 1:
        raise ValueError(f"{name} is empty ({frame.shape[0]}x{frame.shape[1]} pixels)")


def _pixel_items(flat: np.ndarray) -> np.ndarray:
    """[N, C] C-contiguous -> [N] view with one item per pixel, so that pixels are gathered and scattered
    by 1-D ``take``/``put`` (NumPy's row fancy indexing is several times slower)."""
    return flat.view(np.dtype((np.void, flat.shape[1] * flat.itemsize))).reshape(-1)


def blend_pixels(frame: np.ndarray, layer: SparseLayer) -> None:
    """Composite ``layer`` over ``frame`` (C-contiguous) in place, touching only the layer's pixels."""
    if len(layer.pixels) == 0:
        return
    flat = frame.reshape(-1, 3)
    blended = flat.take(layer.pixels, axis=0).astype(np.float32, copy=False)  # [M, 3], rows as in the frame
    blended *= (1.0 - layer.alpha)[:, None]
    if frame.dtype == np.uint8:
        blended += layer.color.T * np.float32(255.0)
        blended = np.clip(blended + np.float32(0.5), 0, 255).astype(np.uint8)
    else:
        blended += layer.color.T
    np.put(_pixel_items(flat), layer.pixels, _pixel_items(blended))


def layer_to_rgba(layer: SparseLayer, rgb: np.ndarray | None = None,
                  alpha: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The layer alone: straight (un-premultiplied) RGB [H, W, 3] and alpha [H, W], float32.

    ``rgb``/``alpha`` may be given as zero-filled (C-contiguous) arrays to write into.
    """
    rgb = np.zeros((layer.height, layer.width, 3), np.float32) if rgb is None else rgb
    alpha = np.zeros((layer.height, layer.width), np.float32) if alpha is None else alpha
    alpha.reshape(-1)[layer.pixels] = layer.alpha
    straight = np.ascontiguousarray(np.clip(layer.color / np.maximum(layer.alpha, 1e-8), 0.0, 1.0).T)
    np.put(_pixel_items(rgb.reshape(-1, 3)), layer.pixels, _pixel_items(straight))
    return rgb, alpha


def output_buffer(frame: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """A new C-contiguous frame like ``frame``, or ``out`` checked to fit (and not alias) it."""
    if out is None:
        return np.empty(frame.shape, frame.dtype)
    if out.shape != frame.shape or out.dtype != frame.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {frame.dtype} array of shape {list(frame.shape)}")
    if np.shares_memory(out, frame):
        raise ValueError("out must not share memory with the input frame")
    return out
