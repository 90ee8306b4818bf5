"""The overlay composited in a video's own 8-bit 4:2:0 YUV, without converting the frame to RGB.

Converting YUV to RGB is affine, ``yuv = M @ rgb + o``, so the overlay's
"over" maps exactly into YUV: with premultiplied RGB ``c`` and alpha ``a``,

    yuv_out = (1 - a) * yuv + (M @ c + a * o)

which is exact for luma. Chroma is shared by a 2x2 block, so each block
takes the mean of its four pixels' terms (pixels outside the layer have
``a = 0``): ``u_out = (1 - mean a) * u + mean(M_u @ c + a * 128)``. Values
are 0..255 uint8 levels, rounded to nearest and clipped; ``M`` and ``o``
come from the picture's colour matrix and range (:func:`yuv_coefficients`).

Only the layer's pixels are touched, so the cost follows the overlay, not
the frame. The same code runs on NumPy and CuPy planes (frames decoded on
the host or on a GPU fit one :class:`YuvPlanes`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.arrays import array_module

PLANAR_FORMATS = ("yuv420p", "yuvj420p")
"""Decoded pixel formats composited as they are (anything else is drawn in RGB)."""

KR_KB = {1: (0.2126, 0.0722), 5: (0.299, 0.114), 6: (0.299, 0.114), 7: (0.212, 0.087), 9: (0.2627, 0.0593),
         10: (0.2627, 0.0593)}
"""Luma weights of red and blue per FFmpeg colour-space tag (BT.709, BT.470BG, SMPTE 170M, SMPTE 240M, BT.2020)."""


def matrix_tag(colorspace: int, height: int) -> int:
    """The colour-space tag a picture is read with: its own, else BT.709 from 720 lines up and BT.601 below."""
    return colorspace if colorspace in KR_KB else (1 if height >= 720 else 6)


def is_full_range(frame) -> bool:
    """Whether a decoded frame uses full-range (JPEG) levels: tagged so, or a ``yuvj`` format."""
    return frame.color_range == 2 or frame.format.name.startswith("yuvj")


@dataclass
class YuvPlanes:
    """One 8-bit 4:2:0 picture: Y [H, W] and U, V [H/2, W/2] uint8, C-contiguous (NumPy or CuPy).

    ``colorspace`` is the FFmpeg tag of its colour matrix (a key of
    :data:`KR_KB`), ``full_range`` says 0..255 levels (else 16..235/240).
    ``primaries`` and ``transfer`` are the source's tags, carried to the
    output unchanged. The planes are the holder's own: they are composited
    in place.
    """

    y: object
    u: object
    v: object
    colorspace: int = 1
    full_range: bool = False
    primaries: int = 2
    transfer: int = 2

    def __post_init__(self):
        height, width = self.y.shape
        half = (height // 2, width // 2)
        if height % 2 or width % 2 or self.u.shape != half or self.v.shape != half:
            raise ValueError(f"planes must be Y [H, W] with H, W even and U, V [H/2, W/2], got Y "
                             f"{list(self.y.shape)}, U {list(self.u.shape)}, V {list(self.v.shape)}")
        if not all(plane.flags.c_contiguous for plane in (self.y, self.u, self.v)):
            raise ValueError("planes must be C-contiguous arrays (copy strided views, e.g. NV12 chroma, first)")
        if self.colorspace not in KR_KB:
            raise ValueError(f"colorspace tag {self.colorspace} is not one of {sorted(KR_KB)}")

    @property
    def height(self) -> int:
        return self.y.shape[0]

    @property
    def width(self) -> int:
        return self.y.shape[1]


def yuv_coefficients(colorspace: int, full_range: bool) -> tuple[np.ndarray, np.ndarray]:
    """float32 M [3, 3] and o [3] with ``(Y, U, V) = M @ rgb + o``, for 0..1 RGB and 0..255 levels."""
    red, blue = KR_KB[colorspace]
    green = 1.0 - red - blue
    matrix = np.array([[red, green, blue],
                       [-red / (2 * (1 - blue)), -green / (2 * (1 - blue)), 0.5],
                       [0.5, -green / (2 * (1 - red)), -blue / (2 * (1 - red))]]) * 255.0
    if not full_range:
        matrix *= np.array([[219.0], [224.0], [224.0]]) / 255.0
    offset = np.array([0.0 if full_range else 16.0, 128.0, 128.0])
    return matrix.astype(np.float32), offset.astype(np.float32)


def _levels(values, xp):
    """float values as uint8 levels: rounded to nearest, clipped to 0..255."""
    return xp.clip(xp.floor(values + 0.5), 0, 255).astype(xp.uint8)


def composite_planes(planes: YuvPlanes, pixels, color, alpha) -> None:
    """Composite a premultiplied layer "over" ``planes`` in place (see the module docstring).

    ``pixels`` are flat indices ``y * W + x`` (unique), ``color`` premultiplied
    RGB 0..1 [3, M], ``alpha`` [M]: a :class:`~..raster.layer.SparseLayer`'s
    fields, as arrays of the planes' module (NumPy or CuPy).
    """
    if len(pixels) == 0:
        return
    xp = array_module(planes.y)
    height, width = planes.height, planes.width
    matrix, offset = yuv_coefficients(planes.colorspace, planes.full_range)
    alpha = xp.asarray(alpha, xp.float32)
    color = xp.asarray(color, xp.float32)
    pixels = xp.asarray(pixels)
    rows = pixels // width
    cols = pixels - rows * width

    def layer_term(channel: int):  # M_c @ premultiplied colour + alpha * o_c, per pixel
        m = matrix[channel]
        return m[0] * color[0] + m[1] * color[1] + m[2] * color[2] + alpha * offset[channel]

    luma_plane = planes.y.reshape(-1)  # views: the planes are C-contiguous
    luma = luma_plane[pixels].astype(xp.float32)
    luma_plane[pixels] = _levels((1 - alpha) * luma + layer_term(0), xp)

    half = width // 2
    block = (rows >> 1) * half + (cols >> 1)
    blocks = xp.zeros((height // 2) * half, bool)
    blocks[block] = True
    blocks = xp.flatnonzero(blocks)  # the touched 2x2 blocks, ascending
    slot = xp.empty((height // 2) * half, xp.int64)
    slot[blocks] = xp.arange(len(blocks))
    slot = slot[block]  # each pixel's block among them
    cover = xp.bincount(slot, weights=alpha, minlength=len(blocks)) * 0.25
    for channel, plane in ((1, planes.u), (2, planes.v)):
        term = xp.bincount(slot, weights=layer_term(channel), minlength=len(blocks)) * 0.25
        chroma_plane = plane.reshape(-1)
        below = chroma_plane[blocks].astype(xp.float64)
        chroma_plane[blocks] = _levels((1 - cover) * below + term, xp)


def planes_layer(renderer, display_list, planes: YuvPlanes) -> tuple:
    """``display_list`` rasterised by ``renderer`` for ``planes``: (pixels, color, alpha) as arrays of the planes'
    module, ready for :func:`composite_planes`.

    Host planes take the renderer's sparse layer (``rasterize``; the GPU
    renderer brings it back from the GPU). Planes on a GPU take the layer
    there (``layer_device``, or the host layer uploaded), so the frame never
    crosses the bus.
    """
    xp = array_module(planes.y)
    if xp is not np and hasattr(renderer, "layer_device"):
        pixels, rgba = renderer.layer_device(renderer.upload(display_list), planes.height, planes.width)
        return pixels, rgba[:, :3].T, rgba[:, 3]
    layer = renderer.rasterize(display_list, planes.height, planes.width)
    return xp.asarray(layer.pixels), xp.asarray(layer.color), xp.asarray(layer.alpha)


def overlay_planes(renderer, display_list, planes: YuvPlanes) -> None:
    """Draw ``display_list`` over ``planes`` in place with ``renderer``'s rasteriser (see :func:`planes_layer`)."""
    composite_planes(planes, *planes_layer(renderer, display_list, planes))


def planes_from_frame(frame, turns: int = 0) -> YuvPlanes:
    """Host copies of a decoded 8-bit 4:2:0 ``av.VideoFrame``'s planes, turned ``turns`` quarter turns
    counter-clockwise (upright); FFmpeg's own buffers are only read. Other formats are converted first."""
    if frame.format.name not in PLANAR_FORMATS:
        frame = frame.reformat(format="yuvj420p" if is_full_range(frame) else "yuv420p")
    if any(plane.line_size < plane.width for plane in frame.planes):  # bottom-up rows: PyAV lays them out
        flat = frame.to_ndarray().reshape(-1)
        size = frame.width * frame.height
        shapes = [(frame.height, frame.width)] + [(frame.height // 2, frame.width // 2)] * 2
        sources = [flat[:size], flat[size:size * 5 // 4], flat[size * 5 // 4:]]
        sources = [part.reshape(shape) for part, shape in zip(sources, shapes)]
    else:
        sources = [np.frombuffer(plane, np.uint8)[:plane.line_size * plane.height]
                   .reshape(plane.height, plane.line_size)[:, :plane.width] for plane in frame.planes]
    pictures = [np.ascontiguousarray(np.rot90(source, turns)) if turns else source.copy() for source in sources]
    colorspace = matrix_tag(frame.colorspace, frame.height)
    return YuvPlanes(*pictures, colorspace=colorspace, full_range=is_full_range(frame),
                     primaries=frame.color_primaries, transfer=frame.color_trc)
