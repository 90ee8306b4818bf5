"""GPU renderer (CuPy): the tiled kernels of ``gpu_raster.cu``.

The display list is flattened on the host into a few small arrays (a scene),
uploaded, binned into 16x16 tiles on the GPU (count, prefix sum, fill, sort)
and rasterised by one block per tile. Frames that live on the GPU are
composited there (:meth:`GpuRenderer.render_device`); host frames get a
sparse layer back and are composited on the host threads, so only the
overlay's pixels cross the bus.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.cuda import cuda_kernel
from ..core.log import LOGGER
from ..draw.display_list import DisplayList, Polylines
from .layer import SparseLayer, check_frame, output_buffer
from .renderer import Renderer
from .segments import build_segment_table

TILE = 16
_SCENE_FIELDS = (
    "prim_kind", "prim_ref", "seg_p0", "seg_p1", "seg_polyline", "seg_arc0",
    "line_width", "line_color0", "line_color1", "line_dash", "line_dash_round", "line_arc_total",
    "box_center", "box_half", "box_radius", "box_stroke", "box_stroke_color", "box_fill_color", "box_bracket",
)
_PIXEL_TYPES = {np.dtype(np.uint8): "unsigned char", np.dtype(np.float32): "float"}
_KEY_TYPES = {np.dtype(np.uint32): "unsigned int", np.dtype(np.uint64): "unsigned long long"}


def _kernel_names():
    for key in _KEY_TYPES.values():
        yield f"bin_tiles<{key}>"
        yield f"layer_tiles<{key}>"
        for pixel in _PIXEL_TYPES.values():
            yield f"composite_tiles<{pixel}, {key}>"


_SOURCE = Path(__file__).with_name("gpu_raster.cu")


def _kernel(name: str):
    return cuda_kernel(_SOURCE, name, tuple(_kernel_names()))


def _memset(array, byte: int) -> None:
    """Fill ``array``'s bytes with ``byte`` on the current stream (no kernel, no allocation)."""
    import cupy

    cupy.cuda.runtime.memsetAsync(array.data.ptr, byte, array.nbytes, cupy.cuda.get_current_stream().ptr)


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
    """Each tile's primitives: ``keys[tile_end[t] - tile_count[t] : tile_end[t]]`` (low bits)."""

    keys: object
    prim_mask: object
    tile_end: object
    tile_count: object
    tiles_x: int
    needed: object  # device scalar: keys the scene needs (more than ``len(keys)`` = overflow)


class GpuRenderer(Renderer):
    """Draws display lists with CuPy kernels; same API as :class:`CpuRenderer`.

    Buffers are kept between frames; the key buffer grows when a frame needs
    more (that frame is then binned again).

    Args:
        workers: host threads used to composite host frames.
    """

    name = "gpu"

    def __init__(self, workers: int | None = None):
        super().__init__(workers)
        self._pinned = {}
        self._buffers = {}
        self._capacity = 1 << 16

    # -- device side ------------------------------------------------------------
    def upload(self, display_list: DisplayList) -> DeviceScene:
        """The display list's scene on the GPU."""
        return DeviceScene.from_arrays(scene_arrays(display_list))

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

    def bin(self, scene: DeviceScene, height: int, width: int) -> TileBins:
        """Bin the scene's primitives into tiles, sorted in drawing order per tile (no host sync)."""
        import cupy

        tiles_x, tiles_y = -(-width // TILE), -(-height // TILE)
        prim_bits = max(int(scene.prim_count).bit_length(), 1)
        key_type = np.dtype(np.uint32 if (tiles_x * tiles_y) << prim_bits < 2**32 else np.uint64)
        tiles = tiles_x * tiles_y
        tile_count = self._buffer("tile_count", tiles, cupy.int32)
        tile_end = self._buffer("tile_end", tiles, cupy.int64)
        prim_tiles = self._buffer("prim_tiles", max(scene.prim_count, 1), cupy.int32)
        prim_end = self._buffer("prim_end", max(scene.prim_count, 1), cupy.int64)
        keys = self._buffer("keys", self._capacity, key_type)
        _memset(tile_count, 0)
        _memset(prim_end, 0)
        _memset(keys, 0xFF)  # unused keys sort last
        if scene.prim_count:
            kernel = _kernel(f"bin_tiles<{_KEY_TYPES[key_type]}>")
            grid = (-(-scene.prim_count // 128),)
            head = [scene.table, np.int32(scene.prim_count), np.int32(tiles_x), np.int32(tiles_y)]
            tail = [np.int32(prim_bits), prim_tiles, tile_count, prim_end, keys, np.int64(self._capacity)]
            kernel(grid, (128,), head + [np.int32(0)] + tail)
            _kernel("scan_pair")((2,), (1024,), (prim_tiles, prim_end, np.int32(scene.prim_count),
                                                 tile_count, tile_end, np.int32(tiles)))
            kernel(grid, (128,), head + [np.int32(1)] + tail)
            keys.sort()
        else:
            _memset(tile_end, 0)
        needed = prim_end[max(scene.prim_count, 1) - 1:]
        return TileBins(keys, key_type.type((1 << prim_bits) - 1), tile_end, tile_count, tiles_x, needed)

    def _binned(self, scene: DeviceScene, height: int, width: int, launch):
        """Bin, run ``launch(bins)``, and redo both once with a larger key buffer on overflow."""
        bins = self.bin(scene, height, width)
        result = launch(bins)
        needed = int(bins.needed[0])
        if needed > self._capacity:
            self._capacity = int(needed * 1.25) + 1024
            LOGGER.debug("tile key buffer grown to %d keys", self._capacity)
            bins = self.bin(scene, height, width)
            result = launch(bins)
        return result

    def render_device(self, frame, scene: DeviceScene, out=None):
        """Composite ``scene`` over a GPU frame (CuPy [H, W, 3] uint8/float32) into ``out``.

        Returns once the frame is done: the key count is read back to check
        that the key buffer was large enough (the one host sync per frame).
        """
        import cupy

        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype not in _PIXEL_TYPES:
            raise ValueError(f"frame must be a uint8/float32 [H, W, 3] CuPy array, got {frame.dtype} {frame.shape}")
        height, width = frame.shape[:2]
        frame = cupy.ascontiguousarray(frame)
        out = cupy.empty_like(frame) if out is None else out

        def launch(bins: TileBins):
            kernel = _kernel(f"composite_tiles<{_PIXEL_TYPES[frame.dtype]}, {_KEY_TYPES[bins.keys.dtype]}>")
            kernel((bins.tile_count.size,), (TILE, TILE), (
                scene.table, bins.keys, np.int64(bins.keys.size), bins.prim_mask, bins.tile_end, bins.tile_count,
                np.int32(bins.tiles_x), frame, out, np.int32(width), np.int32(height)))
            return out

        return self._binned(scene, height, width, launch)

    def layer_device(self, scene: DeviceScene, height: int, width: int):
        """The layer's non-empty pixels on the GPU: (ascending flat pixels, premultiplied RGBA [M, 4])."""
        import cupy

        def launch(bins: TileBins):
            touched = cupy.flatnonzero(bins.tile_count).astype(cupy.int32)
            layer = self._buffer("layer", len(touched) * TILE * TILE * 4, cupy.float32).reshape(-1, TILE * TILE, 4)
            if len(touched):
                _kernel(f"layer_tiles<{_KEY_TYPES[bins.keys.dtype]}>")(
                    (len(touched),), (TILE, TILE), (scene.table, bins.keys, np.int64(bins.keys.size), bins.prim_mask,
                                                   bins.tile_end, bins.tile_count, touched, np.int32(bins.tiles_x),
                                                   layer))
            return touched, layer

        touched, layer = self._binned(scene, height, width, launch)
        tiles_x = -(-width // TILE)
        lane = cupy.arange(TILE * TILE, dtype=cupy.int64)
        x = (touched[:, None] % tiles_x) * TILE + lane % TILE
        y = (touched[:, None] // tiles_x) * TILE + lane // TILE
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

    def _host_layer(self, scene: DeviceScene, height: int, width: int) -> SparseLayer:
        """The scene's sparse layer in reused pinned host buffers (valid until the next call)."""
        import cupy

        pixels, rgba = self.layer_device(scene, height, width)
        planar = self._to_host("rgba", cupy.ascontiguousarray(rgba.T))
        return SparseLayer(height, width, self._to_host("pixels", pixels), planar[:3], planar[3])

    def rasterize(self, display_list: DisplayList, height: int, width: int) -> SparseLayer:
        """The overlay layer rasterised on the GPU, as a host sparse layer."""
        layer = self._host_layer(self.upload(display_list), height, width)
        return SparseLayer(height, width, layer.pixels.copy(), layer.color.copy(), layer.alpha.copy())

    def render_host(self, frame: np.ndarray, scene: DeviceScene, out: np.ndarray | None = None) -> np.ndarray:
        """``scene`` over a host ``frame`` into a new frame (or ``out``).

        Host threads copy the frame while the GPU rasterises; then only the
        overlay's pixels are blended on the host.
        """
        check_frame(frame)
        out = output_buffer(frame, out)
        copies = self.pool.copy_async(frame, out)
        layer = self._host_layer(scene, *frame.shape[:2])
        for copy in copies:
            copy.result()
        self.pool.blend(out, layer)
        return out

    def render(self, frame: np.ndarray, display_list: DisplayList, out: np.ndarray | None = None) -> np.ndarray:
        """``display_list`` over a host ``frame`` into a new frame (or ``out``)."""
        return self.render_host(frame, self.upload(display_list), out)

    def close(self) -> None:
        """Release host threads and pinned buffers."""
        super().close()
        self._pinned.clear()
        LOGGER.debug("GPU renderer closed")
