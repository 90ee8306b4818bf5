"""GPU renderer (CuPy): the tiled kernels of ``gpu_raster.cu``.

The display lists of a whole batch become one scene: their layers are
concatenated on the host (one array per field), uploaded once, and the
segment table and primitive tables are built on the GPU (the same
``build_segment_table`` the CPU rasteriser runs, on CuPy). Frames are then
drawn in chunks: each chunk's primitives are binned into 16x16 tiles
(one pass, an atomic cursor, a sort) and one block per tile composites the
layer over the frame.

Frames on the GPU are composited in place of a new batch there. Host frames
travel in large chunks through reused pinned buffers: host threads copy a
chunk in while the GPU draws the one before, and copy finished chunks out
into the result, so the host never waits for the bus and each frame crosses
it once each way.

With a glow (:mod:`.glow`) each frame's layer is stored densely in half
precision, blurred along rows, then along columns by the kernel that puts the
layer over its halo and composites both over the frame.
"""

from __future__ import annotations

import os
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.arrays import to_numpy
from ..core.cuda import cuda_kernel, pinned_array
from ..core.log import LOGGER
from ..draw.display_list import DisplayList, GlyphAtlas, Glyphs, Polylines
from .glow import Glow, gaussian_weights, glows
from .layer import SparseLayer, check_frame, layer_to_rgba, output_buffer
from .renderer import FramesHalfWritten, Renderer
from .segments import build_segment_table

TILE = 16
_SCENE_FIELDS = (
    "prim_kind", "prim_ref", "prim_frame", "seg_p0", "seg_p1", "seg_polyline", "seg_arc0",
    "seg_factor0", "seg_factor1",
    "line_width", "line_color0", "line_color1", "line_dash", "line_dash_round", "line_arc_total",
    "box_center", "box_half", "box_radius", "box_stroke", "box_stroke_color", "box_fill_color", "box_bracket",
    "glyph_origin", "glyph_size", "glyph_texel", "glyph_color", "glyph_atlas", "atlas_data", "atlas_width",
    "atlas_height",
)
# Display-list fields -> scene fields (and their dtype in the scene).
_LINE_FIELDS = (("width", "line_width", np.float32), ("color_start", "line_color0", np.float32),
                ("color_end", "line_color1", np.float32), ("dash", "line_dash", np.float32),
                ("dash_round", "line_dash_round", np.int32))
_BOX_FIELDS = (("center", "box_center", np.float32), ("half_size", "box_half", np.float32),
               ("radius", "box_radius", np.float32), ("stroke_width", "box_stroke", np.float32),
               ("stroke_color", "box_stroke_color", np.float32), ("fill_color", "box_fill_color", np.float32),
               ("bracket", "box_bracket", np.float32))
_GLYPH_FIELDS = (("origin", "glyph_origin", np.float32), ("size", "glyph_size", np.float32),
                 ("texel", "glyph_texel", np.float32), ("color", "glyph_color", np.float32))
_ATLASES_KEPT = 8  # glyph atlases a renderer keeps on the GPU
_PIXEL_TYPES = {np.dtype(np.uint8): "unsigned char", np.dtype(np.float32): "float"}
_KEY_TYPES = {np.dtype(np.uint32): "unsigned int", np.dtype(np.uint64): "unsigned long long"}
_BIN_THREADS = 128  # a multiple of the warp size (bin_tiles claims key slots per warp)
_GLOW_ROW_SPAN, _GLOW_COLUMN_ROWS = 256, 8  # as GLOW_ROW_SPAN, GLOW_COLUMN_ROWS in gpu_raster.cu
_GLOW_BLOCK = (32, 8)
HOST_CHUNK_BYTES = 128 * 2**20
"""Host frames cross the bus in chunks of about this many bytes (at least one frame)."""
DEVICE_CHUNK_BYTES = 1 << 30
"""Frames on the GPU are binned and drawn in chunks of about this many bytes."""
_SLOTS = 3  # pinned chunks in flight: one filling, one on the GPU, one draining
_MAX_CHUNK_FRAMES = 1024  # keeps a chunk's launch grid and tile keys small for tiny frames
HOST_BUILD_VERTICES = 8192
"""Scenes of at most this many polyline vertices (plus layers) are built on the host (see DeviceScene.build).
Measured on an H100 (build + upload, ms, host / GPU): 5 300 vertices (100 linked points) 2.0 / 2.6;
30 000 (1 000 points) 8.5 / 2.8; 84 000 (16 frames of 100 points) 17.7 / 2.8."""
VIDEO_HOST_BUILD_VERTICES = 65536
"""The same limit for a video's scenes, built while its decoding, building and encoding threads take turns at
Python's lock: the host's few NumPy calls on a whole scene give the lock up less often than CuPy's many
launches. A 1080p render with a track file (H100, 3-4 rounds a run), time a frame against the plain transcode,
built on the GPU / on the host: 100 points (8 frames, 25 700 vertices a scene) 1.44 / 1.32 (4-12% faster in
runs on two machines), 200 points (43 000) 1.54 / 1.47, 300 points (58 000) 1.68 / 1.65, level there."""


def _kernel_names():
    for key in _KEY_TYPES.values():
        yield f"bin_tiles<{key}>"
        yield f"tile_ranges<{key}>"
        yield f"layer_tiles<{key}>"
        yield f"composite_yuv420_tiles<{key}>"
        for pixel in _PIXEL_TYPES.values():
            yield f"composite_tiles<{pixel}, {key}>"
    yield from _glow_kernel_names()


def _glow_kernel_names():
    yield from ("glow_rows", "glow_layer_rgba")
    for key in _KEY_TYPES.values():
        yield f"layer_dense<{key}>"
    for pixel in _PIXEL_TYPES.values():
        yield f"glow_composite<{pixel}>"


_SOURCE = Path(__file__).with_name("gpu_raster.cu")


def _kernel(name: str):
    return cuda_kernel(_SOURCE, name, tuple(_kernel_names()))


def _memset(array, byte: int) -> None:
    """Fill ``array``'s bytes with ``byte`` on the current stream (no kernel, no allocation)."""
    import cupy

    cupy.cuda.runtime.memsetAsync(array.data.ptr, byte, array.nbytes, cupy.cuda.get_current_stream().ptr)


def _blocks(count: int, threads: int) -> int:
    return max(1, -(-count // threads))


@dataclass
class HostLayers:
    """Every frame's layers concatenated on the host, with the runs that keep their order.

    ``runs`` is int64 [R, 4]: (frame, kind 0 = polylines / 1 = boxes / 2 = glyphs, first item, item count),
    in drawing order frame by frame; ``lines``/``boxes``/``glyphs`` map scene field names to arrays;
    ``atlases`` are the glyph atlases, each once, that ``glyphs["glyph_atlas"]`` indexes.
    ``vertex_factors`` is float32 [V, 2], each vertex's (width, alpha) factors, or None
    when no polyline has any.
    """

    vertices: np.ndarray
    offsets: np.ndarray
    lines: dict
    boxes: dict
    runs: np.ndarray
    frames: int
    glyphs: dict = field(default_factory=dict)
    atlases: list = field(default_factory=list)
    vertex_factors: np.ndarray | None = None

    @classmethod
    def gather(cls, display_lists: list) -> "HostLayers":
        """Concatenate ``display_lists`` (one per frame); Python work per layer, not per primitive."""
        vertices, vertex_counts, runs = [], [], []
        lines = {name: [] for _, name, _ in _LINE_FIELDS}
        boxes = {name: [] for _, name, _ in _BOX_FIELDS}
        glyphs = {name: [] for _, name, _ in _GLYPH_FIELDS}
        glyph_atlas, atlas_index, atlases = [], {}, []
        line_total = box_total = glyph_total = 0
        line_layers = []
        for frame, display_list in enumerate(display_lists):
            for layer in display_list.layers:
                if isinstance(layer, Polylines):
                    line_layers.append(layer)
                    vertices.append(layer.vertices)
                    vertex_counts.append(np.diff(layer.offsets))
                    fields, table, first, kind = _LINE_FIELDS, lines, line_total, 0
                    line_total += layer.count
                elif isinstance(layer, Glyphs):
                    fields, table, first, kind = _GLYPH_FIELDS, glyphs, glyph_total, 2
                    glyph_total += layer.count
                    index = atlas_index.setdefault(layer.atlas.key, len(atlases))
                    if index == len(atlases):
                        atlases.append(layer.atlas)
                    glyph_atlas.append(np.full(layer.count, index, np.int32))
                else:
                    fields, table, first, kind = _BOX_FIELDS, boxes, box_total, 1
                    box_total += layer.count
                for source, name, _ in fields:
                    table[name].append(getattr(layer, source))
                runs.append((frame, kind, first, layer.count))

        def joined(parts, dtype, tail=()):
            return np.ascontiguousarray(np.concatenate(parts) if parts else np.zeros((0,) + tail), dtype=dtype)

        counts = joined(vertex_counts, np.int64)
        offsets = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        tails = {"line_color0": (4,), "line_color1": (4,), "line_dash": (2,), "box_center": (2,), "box_half": (2,),
                 "box_stroke_color": (4,), "box_fill_color": (4,), "glyph_origin": (2,), "glyph_size": (2,),
                 "glyph_texel": (2,), "glyph_color": (4,)}
        glyph_table = {name: joined(glyphs[name], dtype, tails[name]) for _, name, dtype in _GLYPH_FIELDS}
        glyph_table["glyph_atlas"] = joined(glyph_atlas, np.int32)
        factors = None
        if any(layer.vertex_width is not None or layer.vertex_alpha is not None for layer in line_layers):
            factors = joined([_vertex_factors(layer) for layer in line_layers], np.float32, (2,))
        return cls(joined(vertices, np.float32, (2,)), offsets,
                   {name: joined(lines[name], dtype, tails.get(name, ())) for _, name, dtype in _LINE_FIELDS},
                   {name: joined(boxes[name], dtype, tails.get(name, ())) for _, name, dtype in _BOX_FIELDS},
                   np.array(runs, np.int64).reshape(-1, 4), len(display_lists), glyph_table, atlases, factors)


def _vertex_factors(lines: Polylines) -> np.ndarray:
    """float32 [V, 2]: each vertex's (width, alpha) factors, 1 where the layer gives none."""
    factors = np.ones((len(lines.vertices), 2), np.float32)
    for column, given in enumerate((lines.vertex_width, lines.vertex_alpha)):
        if given is not None:
            factors[:, column] = given
    return factors


@dataclass
class DeviceScene:
    """Scene tables on the GPU, the packed pointer table the kernels read, and where
    each frame's primitives lie: frame ``f`` owns ``frame_prims[f]:frame_prims[f + 1]``
    (``atlases`` keeps the glyph atlases the table points to)."""

    arrays: dict
    table: object
    frame_prims: np.ndarray
    atlases: list = field(default_factory=list)

    @property
    def prim_count(self) -> int:
        return int(self.frame_prims[-1])

    @property
    def frames(self) -> int:
        return len(self.frame_prims) - 1

    @classmethod
    def build(cls, layers: HostLayers, atlas=None, on_host: bool | None = None,
              host_vertices: int = HOST_BUILD_VERTICES) -> "DeviceScene":
        """Build the segment and primitive tables of ``layers`` and put them on the GPU.

        Small scenes (one video frame's) are built with NumPy and uploaded in
        one transfer: CuPy's launches would cost more than the work. Large
        ones (batches) are uploaded first and built there. ``on_host`` forces
        either (default: at most ``host_vertices`` vertices and layers on the
        host); both run the same code. ``atlas(GlyphAtlas)`` gives an atlas's
        coverage on the GPU (default: a new copy).
        """
        import cupy

        if on_host is None:
            on_host = len(layers.vertices) + len(layers.runs) <= host_vertices
        xp = np if on_host else cupy
        move = (lambda arrays: arrays) if on_host else _upload
        frame, kind, first, count = layers.runs.T
        line_bounds = np.stack([first, first + count], axis=1)[kind == 0].ravel()
        coverages = [(atlas or device_atlas)(glyph_atlas) for glyph_atlas in layers.atlases]
        shapes = np.array([glyph_atlas.coverage.shape for glyph_atlas in layers.atlases], np.int32).reshape(-1, 2)
        factors = {} if layers.vertex_factors is None else {"vertex_factors": layers.vertex_factors}
        inputs = move({"vertices": layers.vertices, "offsets": layers.offsets, "line_bounds": line_bounds,
                       **layers.lines, **layers.boxes, **layers.glyphs, **factors,
                       "atlas_data": np.array([coverage.data.ptr for coverage in coverages], np.uint64),
                       "atlas_width": shapes[:, 1].copy(), "atlas_height": shapes[:, 0].copy()})
        factors = inputs.pop("vertex_factors", None)
        table = build_segment_table(inputs.pop("vertices"), inputs.pop("offsets"), xp=xp,
                                    **({} if factors is None else {"vertex_width": factors[:, 0],
                                                                   "vertex_alpha": factors[:, 1]}))
        ones = xp.ones((table.count, 2), xp.float32) if table.factor0 is None else None
        arrays = {"seg_p0": table.p0, "seg_p1": table.p1, "seg_polyline": table.polyline,
                  "seg_arc0": table.arc_start, "line_arc_total": table.arc_total,
                  "seg_factor0": table.factor0 if ones is None else ones,
                  "seg_factor1": table.factor1 if ones is None else ones, **inputs}
        # A polyline run's segments: those of its polylines (zero-length ones were dropped).
        segments = to_numpy(xp.searchsorted(table.polyline, arrays.pop("line_bounds")))
        ref_first, size = first.copy(), count.copy()
        ref_first[kind == 0] = segments[0::2]
        size[kind == 0] = segments[1::2] - segments[0::2]
        run_start = np.zeros(len(size) + 1, np.int64)
        np.cumsum(size, out=run_start[1:])
        frame_prims = np.zeros(layers.frames + 1, np.int64)
        np.cumsum(np.bincount(frame, weights=size, minlength=layers.frames).astype(np.int64), out=frame_prims[1:])
        runs = move({"start": run_start, "ref": ref_first, "kind": kind.astype(np.int32),
                     "frame": frame.astype(np.int32)})
        prim = xp.arange(int(run_start[-1]), dtype=xp.int64)
        run = xp.searchsorted(runs["start"][1:], prim, side="right")
        arrays["prim_kind"] = runs["kind"][run]
        arrays["prim_frame"] = runs["frame"][run]
        arrays["prim_ref"] = (runs["ref"][run] + prim - runs["start"][run]).astype(xp.int32)
        fields = {name: arrays[name] for name in _SCENE_FIELDS}
        device = _upload(fields) if on_host else {name: cupy.ascontiguousarray(array) for name, array in fields.items()}
        pointers = np.array([device[name].data.ptr for name in _SCENE_FIELDS], dtype=np.uint64)
        return cls(device, cupy.asarray(pointers), frame_prims, coverages)


def device_atlas(atlas: GlyphAtlas):
    """A GPU copy of a glyph atlas's coverage (uint8 [Ha, Wa])."""
    import cupy

    return cupy.asarray(atlas.coverage)


def _upload(arrays: dict) -> dict:
    """GPU copies of host arrays in one transfer: views into one device buffer, 16-byte aligned."""
    import cupy

    starts, size = {}, 0
    for name, values in arrays.items():
        starts[name] = size
        size += -(-values.nbytes // 16) * 16
    host = np.empty(size, np.uint8)
    for name, values in arrays.items():
        host[starts[name]:starts[name] + values.nbytes] = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
    device = cupy.asarray(host)
    return {name: device[starts[name]:starts[name] + values.nbytes].view(values.dtype).reshape(values.shape)
            for name, values in arrays.items()}


@dataclass
class TileBins:
    """Binned primitives of frames ``frames`` of a scene: tile ``t`` (numbered across those
    frames) draws ``prim_begin + (keys[tile_start[t]:tile_end[t]] & prim_mask)``, in order."""

    keys: object
    prim_mask: object
    prim_begin: int
    tile_start: object
    tile_end: object
    tiles_x: int
    frame_tiles: int
    needed: object  # device scalar: the keys the frames need
    capacity: int  # keys the buffer held

    def fitted(self) -> bool:
        """Whether every key fitted the buffer (reads the key count back: a sync)."""
        return int(self.needed.get()[0]) <= self.capacity


@dataclass
class _Slot:
    """One chunk's pinned host buffer and GPU buffer, and the host copies still using them."""

    host: np.ndarray
    device: object
    event: object
    copies: list = field(default_factory=list)

    def wait(self) -> None:
        """Wait for the copies that still read or write ``host``."""
        copies, self.copies = self.copies, []
        for copy in copies:
            copy.result()


class GpuRenderer(Renderer):
    """Draws display lists with CuPy kernels; same API as :class:`CpuRenderer`.

    Buffers (device and pinned host) are kept between calls; the key buffer
    grows when a chunk needs more (that chunk is then binned again).

    Args:
        workers: host threads that copy host frames to and from the pinned buffers
            (default: three quarters of the CPU cores, the fastest share measured
            on a 16-core machine; the copies are bound by memory bandwidth).
    """

    name = "gpu"

    def __init__(self, workers: int | None = None):
        super().__init__(workers or max(1, (os.cpu_count() or 1) * 3 // 4))
        self._pinned = {}
        self._buffers = {}
        self._capacity = 1 << 16
        self._stream = None
        self._atlases = OrderedDict()
        self._glow_weights_for = (None, None)  # (radius, its weights on the GPU)
        self._coefficients = {}  # (colour tag, full range): RGB -> YUV on the GPU

    # -- scene and bins -------------------------------------------------------------
    def upload(self, display_list: DisplayList) -> DeviceScene:
        """One display list's scene on the GPU."""
        return self.upload_batch([display_list])

    def upload_batch(self, display_lists: list, host_vertices: int = HOST_BUILD_VERTICES) -> DeviceScene:
        """The scene of several frames' display lists (frame ``f`` draws ``display_lists[f]``), built on the host
        up to ``host_vertices`` vertices (:meth:`DeviceScene.build`)."""
        with self._on_stream():
            return DeviceScene.build(HostLayers.gather(display_lists), self._atlas, host_vertices=host_vertices)

    def _atlas(self, atlas: GlyphAtlas):
        """``atlas`` on the GPU: uploaded once, kept for the next scenes (the latest few atlases)."""
        coverage = self._atlases.pop(atlas.key, None)
        if coverage is None:
            coverage = device_atlas(atlas)
        self._atlases[atlas.key] = coverage
        while len(self._atlases) > _ATLASES_KEPT:
            self._atlases.popitem(last=False)
        return coverage

    def _on_stream(self):
        """The renderer's stream (ordered with the default stream, so inputs written there come first)."""
        import cupy

        if self._stream is None:
            self._stream = cupy.cuda.Stream()
        return self._stream

    def _buffer(self, name: str, size: int, dtype):
        """A persistent device buffer of at least ``size`` elements (a prefix view).

        Buffers grow by half again when too small, so varying frames settle on
        a few allocations instead of fragmenting the memory pool.
        """
        import cupy

        buffer = self._buffers.get(name)
        if buffer is None or buffer.size < size or buffer.dtype != dtype:
            grown = size if buffer is None or buffer.dtype != dtype else max(size, buffer.size * 3 // 2)
            buffer = cupy.empty(max(grown, 1), dtype)
            self._buffers[name] = buffer
        return buffer[:size]

    def _pinned_buffer(self, name: str, nbytes: int) -> np.ndarray:
        """A persistent pinned host buffer of at least ``nbytes`` bytes (uint8 prefix view)."""
        buffer = self._pinned.get(name)
        if buffer is None or buffer.nbytes < nbytes:
            buffer = self.host_array(nbytes)
            self._pinned[name] = buffer
        return buffer[:nbytes]

    def host_array(self, nbytes: int) -> np.ndarray:
        """A new page-locked uint8 host array of ``nbytes`` (:func:`~..core.cuda.pinned_array`)."""
        return pinned_array(nbytes)

    def bin(self, scene: DeviceScene, height: int, width: int, frames: range = range(1),
            wait: bool = True) -> TileBins:
        """Bin the primitives of scene frames ``frames`` into tiles, in drawing order per tile.

        With ``wait`` the key count is read back (a sync on the renderer's
        stream) before sorting, and a chunk whose keys did not fit is binned
        again with a larger buffer. Without it nothing waits: the whole key
        buffer is sorted, and the caller draws, then checks ``fitted()`` and
        bins again with ``wait`` if not (so never in place).
        """
        tiles_x, tiles_y = -(-width // TILE), -(-height // TILE)
        tiles = tiles_x * tiles_y * len(frames)
        prim_begin = int(scene.frame_prims[frames.start])
        prim_count = int(scene.frame_prims[frames.stop]) - prim_begin
        prim_bits = max(prim_count.bit_length(), 1)
        if tiles << prim_bits >= 2**64:
            raise ValueError(f"{len(frames)} frames of {prim_count} primitives are too many to bin at once")
        key_type = np.dtype(np.uint32 if tiles << prim_bits < 2**32 else np.uint64)
        with self._on_stream():
            return self._bin(scene, frames, tiles_x, tiles_y, prim_begin, prim_count, prim_bits, key_type, wait)

    def _bin(self, scene, frames, tiles_x, tiles_y, prim_begin, prim_count, prim_bits, key_type, wait) -> TileBins:
        import cupy

        tiles = tiles_x * tiles_y * len(frames)
        counters = self._buffer("bin_counters", 2 + 2 * tiles, cupy.int32)  # cursor, tile starts, tile ends
        _memset(counters, 0)
        cursor, tile_start, tile_end = counters[:2].view(cupy.uint64), counters[2:2 + tiles], counters[2 + tiles:]
        keys = self._buffer(f"keys_{key_type}", 0, key_type)
        if prim_count:
            while True:
                keys = self._buffer(f"keys_{key_type}", self._capacity, key_type)
                if not wait:
                    _memset(keys, 0xFF)  # unused keys sort last
                _kernel(f"bin_tiles<{_KEY_TYPES[key_type]}>")((_blocks(prim_count, _BIN_THREADS),), (_BIN_THREADS,), (
                    scene.table, np.int32(prim_begin), np.int32(prim_count), np.int32(frames.start),
                    np.int32(tiles_x), np.int32(tiles_y), np.int32(prim_bits), keys, np.int64(self._capacity),
                    cursor))
                if not wait:
                    break
                needed = int(cursor.get()[0])
                if needed <= self._capacity:
                    keys = keys[:needed]
                    break
                self._capacity = int(needed * 1.25) + 1024
                LOGGER.debug("tile key buffer grown to %d keys", self._capacity)
                _memset(cursor, 0)
            keys.sort()
            _kernel(f"tile_ranges<{_KEY_TYPES[key_type]}>")((_blocks(keys.size, 256),), (256,), (
                keys, np.int64(keys.size), np.int32(prim_bits), np.int64(tiles), tile_start, tile_end))
        return TileBins(keys, key_type.type((1 << prim_bits) - 1), prim_begin, tile_start, tile_end, tiles_x,
                        tiles_x * tiles_y, cursor, self._capacity)

    def _grow(self, bins: TileBins) -> None:
        """Make room for the keys ``bins`` needed (after ``fitted()`` said no)."""
        self._capacity = int(int(bins.needed.get()[0]) * 1.25) + 1024
        LOGGER.debug("tile key buffer grown to %d keys", self._capacity)

    def _composite(self, scene: DeviceScene, bins: TileBins, frames, out, frame_stride: int | None = None) -> None:
        """Launch the composite of the binned frames' layers over ``frames`` into ``out``
        (CuPy [n, H, W, 3]; ``frames`` may be ``out``; ``frame_stride`` 0 repeats one frame)."""
        count, height, width = out.shape[:3]
        stride = height * width * 3 if frame_stride is None else frame_stride
        kernel = _kernel(f"composite_tiles<{_PIXEL_TYPES[out.dtype]}, {_KEY_TYPES[bins.keys.dtype]}>")
        kernel((bins.frame_tiles, count), (TILE, TILE), (
            scene.table, np.int32(bins.prim_begin), bins.keys, bins.prim_mask, bins.tile_start, bins.tile_end,
            np.int32(bins.tiles_x), np.int32(bins.frame_tiles), frames, np.int64(stride), out, np.int32(width),
            np.int32(height)))

    def _draw(self, scene: DeviceScene, bins: TileBins, frames, out, frame_stride: int | None = None,
              glow: Glow | None = None) -> None:
        """:meth:`_composite`, or with a ``glow`` :meth:`_composite_glow`."""
        if glows(glow):
            self._composite_glow(scene, bins, frames, out, frame_stride, glow)
        else:
            self._composite(scene, bins, frames, out, frame_stride)

    # -- frames on the GPU ------------------------------------------------------------
    def render_device(self, frame, scene: DeviceScene, out=None, glow: Glow | None = None):
        """Composite the scene's first frame (with its ``glow``) over a GPU frame (CuPy [H, W, 3] uint8/float32)
        into ``out``."""
        import cupy

        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype not in _PIXEL_TYPES:
            raise ValueError(f"frame must be a uint8/float32 [H, W, 3] CuPy array, got {frame.dtype} {frame.shape}")
        out = cupy.empty_like(frame, order="C") if out is None else out
        if out.shape != frame.shape or out.dtype != frame.dtype or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous {frame.dtype} CuPy array of shape {list(frame.shape)}")
        self._render_resident(cupy.ascontiguousarray(frame)[None], scene, out[None], glow=glow)
        return out

    def _render_resident(self, frames, scene: DeviceScene, out, progress=None, glow: Glow | None = None) -> None:
        """Scene frame ``i`` over ``frames[i]`` (or ``frames[0]`` for all) into ``out[i]``, all on the GPU."""
        count, height, width = out.shape[:3]
        per_chunk = int(np.clip(DEVICE_CHUNK_BYTES // max(out[0].nbytes, 1), 1, _MAX_CHUNK_FRAMES))
        stream = self._on_stream()
        with stream:
            for start in range(0, count, per_chunk):
                chunk = range(start, min(count, start + per_chunk))
                source = frames[start:chunk.stop] if len(frames) > 1 else frames
                stride = None if len(frames) > 1 else 0
                bins = self.bin(scene, height, width, chunk, wait=False)  # no sync between the launches
                self._draw(scene, bins, source, out[start:chunk.stop], stride, glow)
                if not bins.fitted():
                    self._grow(bins)
                    self._draw(scene, self.bin(scene, height, width, chunk), source, out[start:chunk.stop], stride,
                               glow)
                if progress is not None:
                    progress(chunk.stop, count)
            stream.synchronize()

    def layer_device(self, scene: DeviceScene, height: int, width: int):
        """The first frame's layer where it is non-empty: (ascending flat pixels, premultiplied RGBA [M, 4])."""
        import cupy

        with self._on_stream():
            bins = self.bin(scene, height, width)
            touched = cupy.flatnonzero(bins.tile_end - bins.tile_start).astype(cupy.int32)
            layer = self._buffer("layer", len(touched) * TILE * TILE * 4, cupy.float32).reshape(-1, TILE * TILE, 4)
            if len(touched):
                keys = bins.keys
                _kernel(f"layer_tiles<{_KEY_TYPES[keys.dtype]}>")((len(touched),), (TILE, TILE), (
                    scene.table, np.int32(bins.prim_begin), keys, bins.prim_mask, bins.tile_start, bins.tile_end,
                    touched, np.int32(bins.tiles_x), layer))
            lane = cupy.arange(TILE * TILE, dtype=cupy.int64)
            x = (touched[:, None] % bins.tiles_x) * TILE + lane % TILE
            y = (touched[:, None] // bins.tiles_x) * TILE + lane // TILE
            keep = (x < width) & (y < height) & (layer[:, :, 3] > 0)
            pixels = (y * width + x)[keep]
            order = cupy.argsort(pixels)
            return pixels[order], layer[keep][order]

    def draw_planes_each(self, scene: DeviceScene, planes: list, glow: Glow | None = None) -> Iterator[int]:
        """:meth:`draw_planes` of scene frame ``i`` over ``planes[i]``, for each; yields ``i`` once that frame is
        written back. Frames of one size and colour tags drawn without glow are binned at once (one sort for
        them all); on the host they also cross the bus together and are composited by one launch, with one
        wait for them all."""
        tags = {(picture.height, picture.width, picture.colorspace, picture.full_range) for picture in planes}
        bins = None
        if len(planes) > 1 and len(tags) == 1 and not glows(glow):
            bins = self.bin(scene, planes[0].height, planes[0].width, range(len(planes)))
            if all(isinstance(picture.y, np.ndarray) for picture in planes):
                self._draw_planes(scene, planes, None, 0, bins)
                yield from range(len(planes))
                return
        for frame, picture in enumerate(planes):
            self._draw_planes(scene, [picture], glow, frame, bins)
            yield frame

    def draw_planes(self, scene: DeviceScene, planes, glow: Glow | None = None, frame: int = 0) -> None:
        """Composite the scene's frame ``frame`` (over its ``glow``) over 8-bit 4:2:0 ``planes`` (a
        :class:`~..video.yuv.YuvPlanes`) in place, in their own YUV. Host planes cross the bus once each
        way; GPU planes stay there. Without glow one tile kernel does it; with glow the glowing layer is made
        planar and composited by :mod:`..video.yuv`'s own steps, on CuPy."""
        self._draw_planes(scene, [planes], glow, frame, None)

    def _draw_planes(self, scene: DeviceScene, planes: list, glow: Glow | None, frame: int,
                     bins: TileBins | None) -> None:
        """:meth:`draw_planes` of scene frames ``frame``, ``frame + 1``, ... over ``planes`` (several: host planes
        of one size and colour tags, without glow, binned in ``bins`` from scene frame 0), staged one after
        another in one device buffer and composited by one launch; one wait at the end."""
        import cupy

        from ..video.yuv import (
            YuvPlanes,
            composite_planes,
            packed_planes,
            planar_layer,
            plane_shapes,
        )

        first = planes[0]
        with self._on_stream() as stream:
            if isinstance(first.y, np.ndarray):
                size = first.y.size * 3 // 2
                staging = self._buffer("planes", size * len(planes), cupy.uint8)
                targets, pairs = [], []
                for at, picture in enumerate(planes):
                    flat = staging[at * size:(at + 1) * size]
                    views = packed_planes(flat, plane_shapes(picture.height, picture.width))
                    targets.append(YuvPlanes(*views, colorspace=picture.colorspace, full_range=picture.full_range))
                    packed = picture.packed()  # one copy each way where the planes are packed as the staging is
                    pairs += [(flat, packed)] if packed is not None else \
                        list(zip(views, (picture.y, picture.u, picture.v)))
                for target, plane in pairs:
                    target.set(plane, stream)
            else:
                size, targets, pairs = 0, planes, []
            if glows(glow):
                pixels, rgba = self.glow_layer_device(scene, first.height, first.width, glow, frame)
                composite_planes(targets[0], planar_layer(pixels, rgba[:, :3].T, rgba[:, 3], targets[0]))
            else:
                binned = frame  # the first frame's place among the binned frames
                if bins is None:
                    bins, binned = self.bin(scene, first.height, first.width, range(frame, frame + 1)), 0
                tiles = slice(binned * bins.frame_tiles, (binned + len(targets)) * bins.frame_tiles)
                _kernel(f"composite_yuv420_tiles<{_KEY_TYPES[bins.keys.dtype]}>")(
                    (bins.frame_tiles, len(targets)), (TILE, TILE), (
                        scene.table, np.int32(bins.prim_begin), bins.keys, bins.prim_mask, bins.tile_start[tiles],
                        bins.tile_end[tiles], np.int32(bins.tiles_x),
                        self._yuv_coefficients(first.colorspace, first.full_range), targets[0].y, targets[0].u,
                        targets[0].v, np.int64(size), np.int32(first.width), np.int32(first.height)))
            stream.synchronize()  # a failure up to here leaves host planes as they were, for a fallback to draw
            if not pairs:  # planes on the GPU: drawn where they are
                return
            try:
                for target, plane in pairs:
                    target.get(stream, out=plane)
                stream.synchronize()
            except Exception as error:  # CuPy/CUDA errors have no common base class
                raise FramesHalfWritten(f"the GPU failed while copying drawn frames back ({type(error).__name__}: "
                                        f"{error}); they may be half drawn, so the render stops; run it again, "
                                        f"or with the CPU backend") from error

    def _yuv_coefficients(self, colorspace: int, full_range: bool):
        """The RGB -> YUV matrix and offset of planes so tagged (float32 [12] on the GPU), uploaded once."""
        import cupy

        from ..video.yuv import yuv_coefficients

        key = (colorspace, full_range)
        if key not in self._coefficients:
            matrix, offset = yuv_coefficients(colorspace, full_range)
            self._coefficients[key] = cupy.asarray(np.concatenate([matrix.ravel(), offset]).astype(np.float32))
        return self._coefficients[key]

    # -- host frames ---------------------------------------------------------------
    def rasterize(self, display_list: DisplayList, height: int, width: int, glow: Glow | None = None) -> SparseLayer:
        """The overlay layer (over its ``glow``) rasterised on the GPU, as a host sparse layer."""
        import cupy

        scene = self.upload(display_list)
        pixels, rgba = (self.glow_layer_device(scene, height, width, glow) if glows(glow)
                        else self.layer_device(scene, height, width))
        planar = cupy.ascontiguousarray(rgba.T).get()
        return SparseLayer(height, width, pixels.get(), planar[:3], planar[3])

    def render(self, frame: np.ndarray, display_list: DisplayList, out: np.ndarray | None = None,
               glow: Glow | None = None) -> np.ndarray:
        """``display_list`` (with its ``glow``) over a host ``frame`` into a new frame (or ``out``)."""
        check_frame(frame)
        out = output_buffer(frame, out)
        self.render_frames(frame[None], [display_list], out[None], glow=glow)
        return out

    def render_frames(self, frames, overlays: list, out, progress=None, layers=None, glow: Glow | None = None):
        """``overlays[i]`` over ``frames[i]`` (or ``frames[0]`` for all) into ``out[i]``.

        NumPy frames go through the pinned chunks; CuPy frames stay on the GPU
        (``out`` then a CuPy array too). ``progress(done, total)`` follows the
        chunks. ``layers`` (see :meth:`Renderer.render_frames`) is filled frame
        by frame from sparse layers. ``glow`` adds its halo to every overlay.
        """
        import cupy

        glows(glow)  # a wrong type fails here, before any work
        scene = self.upload_batch(overlays)
        if isinstance(frames, np.ndarray):
            self._render_host(frames, scene, out, progress, glow)
        else:
            self._render_resident(cupy.ascontiguousarray(frames), scene, out, progress, glow)
        for index, display_list in enumerate(overlays if layers is not None else ()):
            layer_to_rgba(self.rasterize(display_list, *out.shape[1:3], glow=glow), layers[0][index],
                          layers[1][index])
        return out

    def _slots(self, frames: int, shape: tuple, dtype) -> list:
        import cupy

        nbytes = frames * int(np.prod(shape)) * np.dtype(dtype).itemsize
        return [_Slot(self._pinned_buffer(f"slot{i}", nbytes).view(dtype).reshape((frames,) + shape),
                      self._buffer(f"slot{i}", nbytes, cupy.uint8).view(dtype).reshape((frames,) + shape),
                      cupy.cuda.Event(block=False, disable_timing=True))
                for i in range(_SLOTS)]

    def _render_host(self, frames: np.ndarray, scene: DeviceScene, out: np.ndarray, progress,
                     glow: Glow | None = None) -> None:
        """Host frames through the pinned chunks: copy in, draw in place on the GPU, copy out."""
        count, height, width = out.shape[:3]
        per_chunk = int(np.clip(HOST_CHUNK_BYTES // max(out[0].nbytes, 1), 1, _MAX_CHUNK_FRAMES))
        slots = self._slots(min(per_chunk, count), out.shape[1:], out.dtype)
        source = frames if len(frames) == count else np.broadcast_to(frames[0], out.shape)
        launched = deque()  # (slot, chunk) whose GPU work is queued

        def drain() -> None:  # copy finished chunks out, on the host threads
            while launched:
                slot, chunk = launched.popleft()
                slot.event.synchronize()
                slot.copies = self.pool.copy_async(slot.host[:len(chunk)], out[chunk.start:chunk.stop])
                if progress is not None:
                    progress(chunk.stop, count)

        stream = self._on_stream()
        failures = []
        try:
            with stream:
                for number, start in enumerate(range(0, count, per_chunk)):
                    chunk = range(start, min(count, start + per_chunk))
                    slot = slots[number % _SLOTS]
                    slot.wait()
                    host, device = slot.host[:len(chunk)], slot.device[:len(chunk)]
                    filling = self.pool.copy_async(source[chunk.start:chunk.stop], host)
                    bins = self.bin(scene, height, width, chunk)  # while the threads fill
                    drain()
                    for copy in filling:
                        copy.result()
                    device.set(host, stream=stream)
                    self._draw(scene, bins, device, device, glow=glow)
                    device.get(stream=stream, out=host, blocking=False)
                    slot.event.record(stream)
                    launched.append((slot, chunk))
                drain()
        finally:  # no thread may still touch a buffer once we return
            for slot in slots:
                failures += [copy.exception() for copy in slot.copies if copy.exception() is not None]
                slot.copies = []
            stream.synchronize()
        if failures:
            raise failures[0]

    # -- glow ---------------------------------------------------------------------------
    def _glow_weights(self, radius: float):
        """The blur's weights (:func:`gaussian_weights`) on the GPU, kept for the last radius."""
        import cupy

        if self._glow_weights_for[0] != radius:
            self._glow_weights_for = (radius, cupy.asarray(gaussian_weights(radius)))
        return self._glow_weights_for[1]

    def _glow_halo(self, scene: DeviceScene, bins: TileBins, frame: int, height: int, width: int, glow: Glow):
        """Binned frame ``frame``'s dense layer and its blur along rows (half-precision RGBA [H, W, 4] each),
        with the weights and their reach."""
        import cupy

        layer = self._buffer("glow_layer", height * width * 4, cupy.uint16).reshape(height, width, 4)
        rows = self._buffer("glow_rows", height * width * 4, cupy.uint16).reshape(height, width, 4)
        weights = self._glow_weights(glow.radius)
        reach = len(weights) // 2
        _kernel(f"layer_dense<{_KEY_TYPES[bins.keys.dtype]}>")((bins.frame_tiles,), (TILE, TILE), (
            scene.table, np.int32(bins.prim_begin), bins.keys, bins.prim_mask, bins.tile_start, bins.tile_end,
            np.int32(bins.tiles_x), np.int32(bins.frame_tiles), np.int32(frame), layer, np.int32(width),
            np.int32(height)))
        _kernel("glow_rows")((height, _blocks(width, _GLOW_ROW_SPAN)), (_GLOW_ROW_SPAN,), (
            layer, rows, weights, np.int32(reach), np.int32(width)),
            shared_mem=(_GLOW_ROW_SPAN + 2 * reach) * 16 + len(weights) * 4)
        return layer, rows, weights, reach

    @staticmethod
    def _column_grid(height: int, width: int) -> tuple:
        return _blocks(width, _GLOW_BLOCK[0]), _blocks(height, _GLOW_BLOCK[1] * _GLOW_COLUMN_ROWS)

    def _composite_glow(self, scene: DeviceScene, bins: TileBins, frames, out, frame_stride, glow: Glow) -> None:
        """:meth:`_composite` with a glow, frame by frame: dense layer, row blur, then column blur and composite."""
        count, height, width = out.shape[:3]
        for index in range(count):
            layer, rows, weights, reach = self._glow_halo(scene, bins, index, height, width, glow)
            frame = frames[0 if frame_stride == 0 else index]
            kernel = _kernel(f"glow_composite<{_PIXEL_TYPES[out.dtype]}>")
            kernel(self._column_grid(height, width), _GLOW_BLOCK, (
                layer, rows, weights, np.int32(reach), np.float32(glow.strength), frame, out[index],
                np.int32(width), np.int32(height)), shared_mem=len(weights) * 4)

    def glow_layer_device(self, scene: DeviceScene, height: int, width: int, glow: Glow, frame: int = 0):
        """Like :meth:`layer_device`, the layer of the scene's frame ``frame`` over its ``glow``."""
        import cupy

        with self._on_stream():
            bins = self.bin(scene, height, width, range(frame, frame + 1))
            layer, rows, weights, reach = self._glow_halo(scene, bins, 0, height, width, glow)
            rgba = self._buffer("glow_rgba", height * width * 4, cupy.float32).reshape(-1, 4)
            _kernel("glow_layer_rgba")(self._column_grid(height, width), _GLOW_BLOCK, (
                layer, rows, weights, np.int32(reach), np.float32(glow.strength), rgba, np.int32(width),
                np.int32(height)), shared_mem=len(weights) * 4)
            pixels = cupy.flatnonzero(rgba[:, 3] > 0)
            return pixels, rgba[pixels]

    def close(self) -> None:
        """Release host threads and pinned buffers."""
        super().close()
        self._pinned.clear()
        self._atlases.clear()
        LOGGER.debug("GPU renderer closed")
