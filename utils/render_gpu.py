"""GPU renderer (CuPy): the tiled kernels of ``kernels/raster.cu``.

The display list is flattened on the host into a few small arrays (a scene),
uploaded, binned into 16x16 tiles on the GPU (count, prefix sum, fill, sort)
and rasterised by one block per tile. Frames that live on the GPU are
composited there (:meth:`GpuRenderer.render_device`); host frames get a
sparse layer back and are composited on the host threads, so only the
overlay's pixels cross the bus.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .bands import BandPool
from .composite import check_frame, layer_to_rgba, output_buffer
from .display_list import DisplayList, Polylines
from .log import LOGGER
from .raster_cpu import SparseLayer
from .segments import build_segment_table

TILE = 16
_SCENE_FIELDS = (
    "prim_kind", "prim_ref", "seg_p0", "seg_p1", "seg_polyline", "seg_arc0",
    "line_width", "line_color0", "line_color1", "line_dash", "line_dash_round", "line_arc_total",
    "box_center", "box_half", "box_radius", "box_stroke", "box_stroke_color", "box_fill_color", "box_bracket",
)
_NULL = np.uint64(0)  # a null pointer kernel argument
_FRAME_KERNELS = {np.dtype(np.uint8): "composite_tiles<unsigned char>", np.dtype(np.float32): "composite_tiles<float>"}


@functools.lru_cache(maxsize=1)
def _module():
    """The compiled kernel module (compiled on first use, cached by CuPy on disk)."""
    import cupy

    source = (Path(__file__).parent / "kernels" / "raster.cu").read_text()
    return cupy.RawModule(code=source, options=("--std=c++17",), name_expressions=tuple(_FRAME_KERNELS.values()))


def scene_arrays(display_list: DisplayList) -> dict:
    """Flatten a display list into the kernel's scene tables (NumPy, drawing order)."""
    kinds, refs = [], []
    segments, lines, boxes = [], [], []
    seg_count = line_count = box_count = 0
    for layer in display_list.layers:
        if isinstance(layer, Polylines):
            table = build_segment_table(layer)
            segments.append((table.p0, table.p1, table.polyline + line_count, table.arc_start))
            lines.append((layer.width, layer.color_start, layer.color_end, layer.dash,
                          layer.dash_round.astype(np.int32), table.arc_total))
            kinds.append(np.zeros(table.count, np.int32))
            refs.append(np.arange(seg_count, seg_count + table.count, dtype=np.int32))
            seg_count += table.count
            line_count += layer.count
        else:
            boxes.append((layer.center, layer.half_size, layer.radius, layer.stroke_width,
                          layer.stroke_color, layer.fill_color, layer.bracket))
            kinds.append(np.ones(layer.count, np.int32))
            refs.append(np.arange(box_count, box_count + layer.count, dtype=np.int32))
            box_count += layer.count
    shapes = {"seg": ((2,), (2,), (), ()), "line": ((), (4,), (4,), (2,), (), ()),
              "box": ((2,), (2,), (), (), (4,), (4,), ())}
    arrays = {"prim_kind": np.concatenate(kinds) if kinds else np.zeros(0, np.int32),
              "prim_ref": np.concatenate(refs) if refs else np.zeros(0, np.int32)}
    for prefix, groups in (("seg", segments), ("line", lines), ("box", boxes)):
        names = [name for name in _SCENE_FIELDS if name.startswith(prefix + "_")]
        for position, name in enumerate(names):
            parts = [group[position] for group in groups]
            dtype = np.int32 if name in ("seg_polyline", "line_dash_round") else np.float32
            empty = np.zeros((0,) + shapes[prefix][position], dtype)
            arrays[name] = np.ascontiguousarray(np.concatenate(parts) if parts else empty, dtype=dtype)
    return arrays


@dataclass
class DeviceScene:
    """Scene tables on the GPU and the packed pointer table the kernels read."""

    arrays: dict
    table: object
    prim_count: int

    @classmethod
    def from_arrays(cls, arrays: dict) -> "DeviceScene":
        """Upload (or adopt, for CuPy arrays) the scene tables."""
        import cupy

        device = {name: cupy.ascontiguousarray(cupy.asarray(arrays[name])) for name in _SCENE_FIELDS}
        pointers = np.array([device[name].data.ptr for name in _SCENE_FIELDS], dtype=np.uint64)
        return cls(device, cupy.asarray(pointers), int(device["prim_kind"].shape[0]))


@dataclass
class TileBins:
    """Each tile's primitives: ``keys[tile_start[t] : tile_start[t] + tile_count[t]]``."""

    keys: object
    tile_start: object
    tile_count: object
    tiles_x: int
    tiles_y: int


class GpuRenderer:
    """Draws display lists with CuPy kernels; same API as :class:`CpuRenderer`.

    Args:
        workers: host threads used to composite host frames.
    """

    name = "gpu"

    def __init__(self, workers: int | None = None):
        self.pool = BandPool(workers)
        self._pinned = {}

    # -- device side ------------------------------------------------------------
    def upload(self, display_list: DisplayList) -> DeviceScene:
        """The display list's scene on the GPU."""
        return DeviceScene.from_arrays(scene_arrays(display_list))

    def bin(self, scene: DeviceScene, height: int, width: int) -> TileBins:
        """Bin the scene's primitives into tiles, sorted in drawing order per tile."""
        import cupy

        tiles_x, tiles_y = -(-width // TILE), -(-height // TILE)
        tile_count = cupy.zeros(tiles_x * tiles_y, cupy.int32)
        if scene.prim_count == 0:
            return TileBins(cupy.zeros(0, cupy.uint64), cupy.zeros_like(tile_count, cupy.int64),
                            tile_count, tiles_x, tiles_y)
        prim_tiles = cupy.empty(scene.prim_count, cupy.int32)
        kernel = _module().get_function("bin_tiles")
        grid = (-(-scene.prim_count // 128),)
        args = [scene.table, np.int32(scene.prim_count), np.int32(tiles_x), np.int32(tiles_y)]
        kernel(grid, (128,), args + [np.int32(0), prim_tiles, tile_count, _NULL, _NULL])
        ends = cupy.cumsum(prim_tiles, dtype=cupy.int64)
        total = int(ends[-1])
        keys = cupy.empty(total, cupy.uint64)
        kernel(grid, (128,), args + [np.int32(1), prim_tiles, tile_count, ends - prim_tiles, keys])
        keys = cupy.sort(keys)
        tile_start = cupy.cumsum(tile_count, dtype=cupy.int64) - tile_count
        return TileBins(keys, tile_start, tile_count, tiles_x, tiles_y)

    def render_device(self, frame, scene: DeviceScene, out=None):
        """Composite ``scene`` over a GPU frame (CuPy [H, W, 3] uint8/float32) into ``out``."""
        import cupy

        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype not in _FRAME_KERNELS:
            raise ValueError(f"frame must be a uint8/float32 [H, W, 3] CuPy array, got {frame.dtype} {frame.shape}")
        height, width = frame.shape[:2]
        out = cupy.empty_like(frame) if out is None else out
        bins = self.bin(scene, height, width)
        kernel = _module().get_function(_FRAME_KERNELS[frame.dtype])
        kernel((bins.tiles_x * bins.tiles_y,), (TILE, TILE),
               (scene.table, bins.keys, bins.tile_start, bins.tile_count, _NULL, np.int32(bins.tiles_x),
                cupy.ascontiguousarray(frame), out, np.int32(width), np.int32(height)))
        return out

    def layer_device(self, scene: DeviceScene, height: int, width: int):
        """The layer's touched pixels on the GPU: (flat pixels, premultiplied RGBA [M, 4]), ascending."""
        import cupy

        bins = self.bin(scene, height, width)
        touched = cupy.flatnonzero(bins.tile_count).astype(cupy.int32)
        layer = cupy.empty((len(touched), TILE * TILE, 4), cupy.float32)
        if len(touched):
            _module().get_function("layer_tiles")(
                (len(touched),), (TILE, TILE),
                (scene.table, bins.keys, bins.tile_start, bins.tile_count, touched, np.int32(bins.tiles_x), layer))
        lane = cupy.arange(TILE * TILE, dtype=cupy.int64)
        x = (touched[:, None] % bins.tiles_x) * TILE + lane % TILE
        y = (touched[:, None] // bins.tiles_x) * TILE + lane // TILE
        keep = (x < width) & (y < height) & (layer[:, :, 3] > 0)
        pixels = (y * width + x)[keep]
        order = cupy.argsort(pixels)
        return pixels[order], layer[keep][order]

    # -- host frames ---------------------------------------------------------------
    def _to_host(self, name: str, array) -> np.ndarray:
        """Copy a CuPy array into a reused pinned host buffer (a view of it)."""
        import cupy

        nbytes = array.nbytes
        buffer = self._pinned.get(name)
        if buffer is None or buffer.nbytes < nbytes:
            buffer = np.frombuffer(cupy.cuda.alloc_pinned_memory(max(nbytes, 1)), np.uint8)
            self._pinned[name] = buffer
        host = buffer[:nbytes].view(array.dtype).reshape(array.shape)
        array.get(out=host)
        return host

    def rasterize(self, display_list: DisplayList, height: int, width: int) -> SparseLayer:
        """The overlay layer rasterised on the GPU, returned as a host sparse layer."""
        pixels, rgba = self.layer_device(self.upload(display_list), height, width)
        pixels = self._to_host("pixels", pixels)
        rgba = self._to_host("rgba", rgba)
        return SparseLayer(height, width, pixels.copy(), np.ascontiguousarray(rgba[:, :3].T), rgba[:, 3].copy())

    def render(self, frame: np.ndarray, display_list: DisplayList, out: np.ndarray | None = None) -> np.ndarray:
        """``display_list`` over a host ``frame`` into a new frame (or ``out``)."""
        check_frame(frame)
        layer = self.rasterize(display_list, *frame.shape[:2])
        return self.pool.composite(frame, layer, output_buffer(frame, out))

    def render_layer(self, display_list: DisplayList, height: int, width: int):
        """The overlay alone: straight RGB float32 [H, W, 3] and alpha float32 [H, W]."""
        return layer_to_rgba(self.rasterize(display_list, height, width))

    def close(self) -> None:
        """Release host threads and pinned buffers."""
        self.pool.close()
        self._pinned.clear()
        LOGGER.debug("GPU renderer closed")
