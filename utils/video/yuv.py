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
the frame. On the CPU it runs in two steps: :func:`planar_layer` turns a
rasterised layer into the ``keep`` and ``term`` of every touched luma pixel
and chroma block (it needs the frame's size and colour tags, not its
pixels), and :func:`composite_planes` applies them to :class:`YuvPlanes`
(so the second step can run on another thread). The GPU renderer does the
same sums in its tile kernel (``composite_yuv420_tiles``), in place.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..core.arrays import array_module
from ..raster.gpu import VIDEO_HOST_BUILD_VERTICES

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
        if any(plane.dtype != np.uint8 for plane in (self.y, self.u, self.v)):
            raise ValueError(f"planes must be uint8 (8-bit video), got {self.y.dtype}, {self.u.dtype}, "
                             f"{self.v.dtype}")
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

    def packed(self) -> np.ndarray | None:
        """Host planes as one flat uint8 array, Y then U then V, when they are views of one such array (decoded
        frames' planes are: :class:`PlaneBuffers`), else None; a copy of it crosses the bus in one transfer."""
        holder = getattr(self.y, "base", None)
        if not isinstance(holder, np.ndarray) or holder.ndim != 1 or holder.dtype != np.uint8 \
                or holder.size != self.y.size * 3 // 2:
            return None
        start = holder.ctypes.data
        at = [start, start + self.y.size, start + self.y.size + self.u.size]
        return holder if [plane.ctypes.data for plane in (self.y, self.u, self.v)] == at else None


def yuv_coefficients(colorspace: int, full_range: bool) -> tuple[np.ndarray, np.ndarray]:
    """float64 M [3, 3] and o [3] with ``(Y, U, V) = M @ rgb + o``, for 0..1 RGB and 0..255 levels."""
    red, blue = KR_KB[colorspace]
    green = 1.0 - red - blue
    matrix = np.array([[red, green, blue],
                       [-red / (2 * (1 - blue)), -green / (2 * (1 - blue)), 0.5],
                       [0.5, -green / (2 * (1 - red)), -blue / (2 * (1 - red))]]) * 255.0
    if not full_range:
        matrix *= np.array([[219.0], [224.0], [224.0]]) / 255.0
    return matrix, np.array([0.0 if full_range else 16.0, 128.0, 128.0])


def _levels(values, xp):
    """float values as uint8 levels: rounded to nearest, clipped to 0..255 (``values`` is used up: rounded in
    place)."""
    values += 0.5
    return xp.clip(values, 0, 255, out=values).astype(xp.uint8)  # >= 0 now: truncating is flooring


@dataclass(frozen=True)
class PlanarLayer:
    """A layer as it acts on 4:2:0 planes: ``plane[i] = keep * plane[i] + term`` at its luma pixels and at
    its chroma blocks (flat indices, int64; float32 factors; arrays of one module, NumPy or CuPy, that of
    the planes it is composited over).

    It depends on the frame's size and colour tags only, not on its pixels,
    so it can be made before the frame is decoded or while another is encoded.
    """

    pixels: object
    keep: object
    luma: object
    blocks: object
    chroma_keep: object
    u: object
    v: object


def planar_layer(pixels, color, alpha, planes: YuvPlanes) -> PlanarLayer:
    """The :class:`PlanarLayer` of a premultiplied layer over pictures like ``planes`` (size and colour tags).

    ``pixels`` are flat indices ``y * W + x`` (unique), ``color`` premultiplied
    RGB 0..1 [3, M], ``alpha`` [M] (a :class:`~..raster.layer.SparseLayer`'s
    fields), all NumPy or all CuPy; the result is made with the same module.
    """
    xp = array_module(pixels)
    width, half = planes.width, planes.width // 2
    matrix, offset = (part.astype(np.float32) for part in yuv_coefficients(planes.colorspace, planes.full_range))
    alpha = xp.asarray(alpha, xp.float32)
    color = xp.asarray(color, xp.float32)
    pixels = xp.asarray(pixels).astype(xp.int64, copy=False)  # NumPy indexes fastest with its own int
    if len(pixels) == 0:
        return PlanarLayer(pixels, alpha, alpha, pixels, alpha, alpha, alpha)

    terms = xp.empty((3, len(alpha)), xp.float32)  # M @ premultiplied colour + alpha * o, per pixel
    for row, (m, term) in enumerate(zip(matrix, terms)):  # (elementwise: a BLAS call would spin threads)
        xp.multiply(color[0], m[0], out=term)
        term += color[1] * m[1]
        term += color[2] * m[2]
        term += alpha * offset[row]
    rows = pixels // width  # each pixel's 2x2 block: (y // 2) * W / 2 + x // 2
    block = pixels - rows * width  # (x, without NumPy's slow remainder)
    block >>= 1
    rows >>= 1
    rows *= half
    block += rows
    touched = xp.zeros((planes.height // 2) * half, bool)
    touched[block] = True
    blocks = xp.flatnonzero(touched).astype(xp.int64, copy=False)  # the touched blocks, ascending
    slot = xp.empty(len(touched), xp.int64)
    slot[blocks] = xp.arange(len(blocks))
    slot = slot[block]  # each pixel's block among them

    def mean(values):  # over each block's four pixels (those outside the layer add 0)
        return (xp.bincount(slot, weights=values, minlength=len(blocks)) * 0.25).astype(xp.float32)

    return PlanarLayer(pixels, 1 - alpha, terms[0], blocks, 1 - mean(alpha), mean(terms[1]), mean(terms[2]))


def composite_planes(planes: YuvPlanes, layer: PlanarLayer) -> None:
    """Composite ``layer`` "over" ``planes`` in place (see the module docstring)."""
    if len(layer.pixels) == 0:
        return
    xp = array_module(planes.y)
    for plane, index, keep, term in ((planes.y, layer.pixels, layer.keep, layer.luma),
                                     (planes.u, layer.blocks, layer.chroma_keep, layer.u),
                                     (planes.v, layer.blocks, layer.chroma_keep, layer.v)):
        flat = plane.reshape(-1)  # a view: the planes are C-contiguous
        blended = keep * flat[index]
        blended += term
        flat[index] = _levels(blended, xp)


def _drawn_in_place(renderer, display_lists: list, planes: list, glow) -> int:
    """How many of ``display_lists`` (from the first) ``renderer`` drew over their ``planes`` in place (over their
    ``glow``): all of them on worker processes (:mod:`.processes`) or on the GPU (from one scene uploaded for
    them), none when it draws on the CPU here, or those done before the GPU failed (a retry resumes after
    them)."""
    if hasattr(renderer, "draw_planes_in_place"):
        return renderer.draw_planes_in_place(display_lists, planes, glow)
    done = [0]

    def draw(gpu):
        scene = gpu.upload_batch(display_lists[done[0]:], VIDEO_HOST_BUILD_VERTICES)
        for _ in gpu.draw_planes_each(scene, planes[done[0]:], glow):
            done[0] += 1

    if hasattr(renderer, "on_gpu"):  # the GPU renderer with its CPU fallback
        renderer.on_gpu(draw)
    elif hasattr(renderer, "draw_planes_each"):
        draw(renderer)
    return done[0]


def draw_planes_together(renderer, display_lists: list, planes: list, glow=None) -> list:
    """Start drawing each of ``display_lists`` (over its ``glow``, a :class:`~..raster.glow.Glow`) over its
    ``planes`` with ``renderer``; one :class:`PlanarLayer` or None per frame.

    The GPU renderer uploads one scene for the frames that have something to
    draw and composites each at once, in place (host planes cross the bus
    once each way), and worker processes (:mod:`.processes`) draw in place
    over planes in shared memory: None comes back, as it does for an empty
    list. Otherwise each layer is rasterised on the CPU and its
    :class:`PlanarLayer` comes back, for :func:`composite_planes` to apply
    (on another thread, if the caller likes); the planes' pixels are not
    read yet.
    """
    layers = [None] * len(display_lists)  # nothing to draw, nothing to glow: empty frames stay as they are
    drawn = [index for index, display_list in enumerate(display_lists) if display_list.primitive_count]
    if not drawn:
        return layers
    in_place = _drawn_in_place(renderer, [display_lists[i] for i in drawn], [planes[i] for i in drawn], glow)
    for index in drawn[in_place:]:
        picture = planes[index]
        sparse = renderer.rasterize(display_lists[index], picture.height, picture.width, glow=glow)
        layers[index] = planar_layer(sparse.pixels, sparse.color, sparse.alpha, picture)
    return layers


def draw_planes(renderer, display_list, planes: YuvPlanes, glow=None) -> PlanarLayer | None:
    """:func:`draw_planes_together` of one frame."""
    return draw_planes_together(renderer, [display_list], [planes], glow)[0]


def overlay_planes(renderer, display_list, planes: YuvPlanes, glow=None) -> None:
    """Draw ``display_list`` (over its ``glow``) over ``planes`` in place with ``renderer`` (see
    :func:`draw_planes`)."""
    layer = draw_planes(renderer, display_list, planes, glow)
    if layer is not None:
        composite_planes(planes, layer)


class _Memory(np.ndarray):
    """A reused buffer's memory. Its own array type stops NumPy from pointing a frame's plane views past
    that frame's holder array straight at the buffer, so the holder lives exactly as long as the planes."""


class PlaneBuffers:
    """Reused host memory for decoded frames' planes: decoding allocates once per frame in flight, not once
    per frame.

    A buffer is used again once nothing holds the planes last made in it (the
    pipeline's queues, the encoder, the caller: every plane of a frame is a
    view of one holder array, watched by a weak reference).
    ``allocate(nbytes)`` gives a new buffer, a uint8 array (default NumPy's;
    a GPU renderer's page-locked memory makes its copies to and from the GPU
    asynchronous and about four times faster).
    """

    def __init__(self, allocate: Callable[[int], np.ndarray] | None = None):
        self._allocate = allocate or (lambda nbytes: np.empty(nbytes, np.uint8))
        self._slots: list = []  # [memory, weak reference to the holder of the planes last made in it]

    @property
    def allocated(self) -> int:
        """How many buffers were allocated so far."""
        return len(self._slots)

    def take(self, shapes) -> list[np.ndarray]:
        """Uninitialised uint8 arrays of ``shapes`` (one frame's planes) in a buffer nothing else uses."""
        sizes = [int(np.prod(shape)) for shape in shapes]
        total = sum(sizes)
        slot = next((slot for slot in self._slots if slot[0].size >= total and slot[1]() is None), None)
        if slot is None:
            slot = [self._allocate(total).view(_Memory), None]
            self._slots.append(slot)
        holder = slot[0][:total].view(np.ndarray)
        slot[1] = weakref.ref(holder)
        return packed_planes(holder, shapes)


def plane_shapes(height: int, width: int) -> list[tuple[int, int]]:
    """The shapes of the Y, U and V planes of a ``width`` x ``height`` 8-bit 4:2:0 picture (even sizes)."""
    return [(height, width)] + [(height // 2, width // 2)] * 2


def packed_planes(flat, shapes) -> list:
    """Views of the 1-D array ``flat`` (NumPy or CuPy) as planes of ``shapes`` packed one after another."""
    sizes = [int(np.prod(shape)) for shape in shapes]
    starts = np.cumsum([0, *sizes])
    return [flat[start:start + size].reshape(shape) for start, size, shape in zip(starts, sizes, shapes)]


def planes_from_frame(frame, turns: int = 0, buffers: PlaneBuffers | None = None) -> YuvPlanes:
    """Host copies of a decoded 8-bit 4:2:0 ``av.VideoFrame``'s planes, turned ``turns`` quarter turns
    counter-clockwise (upright), in memory from ``buffers`` (default: new); FFmpeg's own buffers are only
    read. Other formats are converted first."""
    if frame.format.name not in PLANAR_FORMATS:
        frame = frame.reformat(format="yuvj420p" if is_full_range(frame) else "yuv420p")
    if any(plane.line_size < plane.width for plane in frame.planes):  # bottom-up rows: PyAV lays them out
        sources = packed_planes(frame.to_ndarray().reshape(-1), plane_shapes(frame.height, frame.width))
    else:
        sources = [np.frombuffer(plane, np.uint8)[:plane.line_size * plane.height]
                   .reshape(plane.height, plane.line_size)[:, :plane.width] for plane in frame.planes]
    sources = [np.rot90(source, turns) for source in sources]
    pictures = (buffers or PlaneBuffers()).take([source.shape for source in sources])
    for picture, source in zip(pictures, sources):
        np.copyto(picture, source)
    colorspace = matrix_tag(frame.colorspace, frame.height)
    return YuvPlanes(*pictures, colorspace=colorspace, full_range=is_full_range(frame),
                     primaries=getattr(frame, "color_primaries", 2), transfer=getattr(frame, "color_trc", 2))
