"""Glow (bloom): a soft halo of the drawn layer, composited under it.

The halo is the layer's premultiplied RGBA blurred by a Gaussian, times the
glow's strength; where that would be more than opaque it is scaled down to
alpha 1 (its colour with it, so it stays a valid premultiplied colour). The
layer then goes over the halo and both over the frame::

    out = layer over (halo over frame) = (layer over halo) over frame

Both backends blur with the weights of :func:`gaussian_weights` and treat
everything outside the frame as empty (zero). The CPU blurs here, with
OpenCV, into a new sparse layer (:func:`glow_layer`) that any compositor can
use; the GPU blurs a dense half-precision copy of the layer with its own
kernels (``gpu_raster.cu``). The two pictures agree within 2/255 per channel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core.checks import Range, check_range
from .layer import SparseLayer

GLOW_RADIUS = Range(0.0, 1000.0)
"""Glow radius in pixels (0 = no glow)."""
GLOW_RADIUS_PERCENT = Range(0.0, 10.0)
"""Glow radius in percent of the frame height, where a node or option gives it that way."""
GLOW_STRENGTH = Range(0.0, 20.0)
"""Glow strength (0 = no glow; 1 = the blurred layer as it is)."""


@dataclass(frozen=True)
class Glow:
    """A glow around everything drawn.

    Attributes:
        radius: how far the halo reaches, in pixels: the Gaussian's sigma is
            ``radius / 3`` and its weights stop at ``ceil(radius)``.
        strength: the halo's weight (its alpha is kept at most 1).

    Radius 0 or strength 0 (the default) is no glow: the picture is exactly the one without it.
    """

    radius: float = 0.0
    strength: float = 0.0

    def __post_init__(self):
        check_range("glow radius (pixels)", self.radius, GLOW_RADIUS)
        check_range("glow strength", self.strength, GLOW_STRENGTH)

    @property
    def enabled(self) -> bool:
        return self.radius > 0 and self.strength > 0


def glows(glow: Glow | None) -> bool:
    """Whether ``glow`` (a :class:`Glow` or None) draws anything."""
    if glow is not None and not isinstance(glow, Glow):
        raise TypeError(f"glow must be a Glow (radius, strength) or None, got {type(glow).__name__}")
    return glow is not None and glow.enabled


def gaussian_weights(radius: float) -> np.ndarray:
    """The normalised 1-D Gaussian both backends blur with: float32 [2 r + 1], r = ceil(radius), sigma = radius / 3."""
    check_range("glow radius (pixels)", radius, GLOW_RADIUS)
    reach = math.ceil(radius)
    if reach == 0:
        return np.ones(1, np.float32)
    offsets = np.arange(-reach, reach + 1, dtype=np.float64)
    weights = np.exp(-0.5 * (offsets * 3.0 / radius) ** 2)
    return (weights / weights.sum()).astype(np.float32)


def glow_under(layer: np.ndarray, halo: np.ndarray, strength: float) -> np.ndarray:
    """``layer`` over the strengthened ``halo`` (premultiplied RGBA planes [4, ...] float32), written into ``halo``."""
    halo *= np.float32(strength) / np.maximum(np.float32(1.0), np.float32(strength) * halo[3])
    halo *= np.float32(1.0) - layer[3]
    halo += layer
    return halo


def glow_layer(layer: SparseLayer, glow: Glow | None) -> SparseLayer:
    """``layer`` with its glow: the sparse layer of ``layer over halo`` (``layer`` itself when ``glow`` is off).

    The layer is scattered into dense float32 planes over its bounding box,
    grown by the blur's reach (and cut at the frame), blurred there with
    OpenCV, and kept where the result is not empty.
    """
    if not glows(glow) or len(layer.pixels) == 0:
        return layer
    # Imported here, not at the top: drawing workers load this module, and OpenCV's thread pool would cost
    # each worker's start while few renders glow.
    import cv2

    weights = gaussian_weights(glow.radius)
    reach = len(weights) // 2
    rows, columns = np.divmod(layer.pixels, layer.width)
    top, left = max(int(rows[0]) - reach, 0), max(int(columns.min()) - reach, 0)
    bottom, right = min(int(rows[-1]) + reach + 1, layer.height), min(int(columns.max()) + reach + 1, layer.width)
    shape = (bottom - top, right - left)
    dense = np.zeros((4, shape[0] * shape[1]), np.float32)
    local = (rows - top) * shape[1] + (columns - left)
    dense[:3, local] = layer.color
    dense[3, local] = layer.alpha
    dense = dense.reshape(4, *shape)
    halo = np.stack([cv2.sepFilter2D(plane, -1, weights, weights, borderType=cv2.BORDER_CONSTANT)
                     for plane in dense])
    combined = glow_under(dense, halo, glow.strength).reshape(4, -1)
    kept = combined[3] > 0
    keep = np.flatnonzero(kept)
    row_shift = (np.arange(top, bottom) * layer.width + left) - np.arange(shape[0]) * shape[1]
    pixels = keep + np.repeat(row_shift, np.count_nonzero(kept.reshape(shape), axis=1))
    rgba = combined[:, keep]
    return SparseLayer(layer.height, layer.width, pixels, rgba[:3], rgba[3])
