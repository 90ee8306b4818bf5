"""GPU-resident overlay: points on the GPU -> kNN graph -> curves + boxes -> scene.

The kernels of ``kernels/scene.cu`` write the scene tables of the GPU
rasteriser directly, into buffers kept between frames, so a frame costs a
handful of kernel launches and no host round trip. It draws the same
picture as ``link_polylines`` + ``box_primitives`` over ``build_edges`` for the
kNN graph without degree caps or hysteresis (those run through the generic
graph code, which accepts :func:`knn_gpu` as its kNN).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from .colors import TRACK_PALETTE, parse_color
from .curves import CURVE_KINDS
from .graph import GraphParams
from .render_gpu import DeviceScene
from .styles import BoxStyle, LineStyle

MAX_SEGMENTS = 64
_RANK_IN_KERNEL = 8192  # up to this many edge slots, curve_segments ranks the keys itself
_NULL = np.uint64(0)
_KNN_WIDTHS = (4, 8, 16, 32)
_F4 = ("<f4", (4,))
LINE_LOOK = np.dtype({
    "names": ["color0", "color1", "width", "dash_on", "dash_off", "bend", "tolerance", "dash_round",
              "color_mode", "gradient", "curve", "palette_size", "opacity"],
    "formats": [_F4, _F4, "<f4", "<f4", "<f4", "<f4", "<f4", "<i4", "<i4", "<i4", "<i4", "<i4", "<f4"],
    "offsets": [0, 16, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72], "itemsize": 80})
BOX_LOOK = np.dtype({
    "names": ["stroke_color", "fill_color", "size", "stroke_width", "roundness", "bracket_length",
              "color_mode", "palette_size", "own_fill", "opacity", "fill_opacity"],
    "formats": [_F4, _F4, "<f4", "<f4", "<f4", "<f4", "<i4", "<i4", "<i4", "<f4", "<f4"],
    "offsets": [0, 16, 32, 36, 40, 44, 48, 52, 56, 60, 64], "itemsize": 80})


@functools.lru_cache(maxsize=None)
def _kernel(name: str):
    return _module().get_function(name)


@functools.lru_cache(maxsize=1)
def _module():
    import cupy

    source = (Path(__file__).parent / "kernels" / "scene.cu").read_text()
    names = [f"knn2d_{stage}<{width}>" for stage in ("partial", "merge") for width in _KNN_WIDTHS]
    return cupy.RawModule(code=source, options=("--std=c++17",), name_expressions=tuple(names))


def _launch_knn(points, mask, k: int, index, distance) -> None:
    """Run the two-stage kNN kernels: candidate slices in parallel, then a merge."""
    import cupy

    n = int(points.shape[0])
    width = next(w for w in _KNN_WIDTHS if w >= k)
    slices = int(np.clip(-(-131072 // n), 1, max(1, n // 128)))
    slice_size = -(-n // slices)
    part_index = cupy.empty((slices, n, width), cupy.int32)
    part_distance = cupy.empty((slices, n, width), cupy.float32)
    _kernel(f"knn2d_partial<{width}>")((-(-n // 128), slices), (128,), (
        points, mask, np.int32(n), np.int32(slice_size), part_index, part_distance))
    _kernel(f"knn2d_merge<{width}>")((-(-n // 128),), (128,), (
        part_index, part_distance, mask, np.int32(n), np.int32(k), np.int32(slices), index, distance))


def knn_gpu(points, k: int, valid=None):
    """Exact k nearest neighbours of 2-D CuPy points (fused kernel), excluding self.

    Returns ``(idx int64 [N, k'], dist float32 [N, k'])`` with ``k' = min(k, N - 1)``
    (up to 32), rows sorted by distance with ties by index; -1 where fewer
    valid neighbours exist. Same contract as ``graph.knn_cpu``.
    """
    import cupy

    points = cupy.ascontiguousarray(points, dtype=cupy.float32)
    n = int(points.shape[0])
    k = min(int(k), n - 1)
    if k > _KNN_WIDTHS[-1]:
        raise ValueError(f"knn_gpu supports k <= {_KNN_WIDTHS[-1]}, got {k}")
    index = cupy.empty((n, max(k, 0)), cupy.int64)
    distance = cupy.empty((n, max(k, 0)), cupy.float32)
    if k < 1:
        return index, distance
    mask = np.uint64(0) if valid is None else cupy.ascontiguousarray(valid, dtype=cupy.uint8)
    _launch_knn(points, mask, k, index, distance)
    return index, distance


def _line_look(style: LineStyle) -> np.ndarray:
    look = np.zeros(1, LINE_LOOK)
    start = parse_color(style.color) * [1, 1, 1, style.opacity]
    look["color0"] = start
    look["color1"] = parse_color(style.color_end) * [1, 1, 1, style.opacity] if style.gradient else start
    look["width"] = style.width
    pattern = {"solid": (0.0, 0.0), "dashed": (style.dash_length, style.gap_length), "dotted": (0.0, style.gap_length)}
    look["dash_on"], look["dash_off"] = pattern[style.pattern]
    look["dash_round"] = style.pattern == "dotted"
    look["bend"] = style.bend
    look["tolerance"] = 0.05
    look["color_mode"] = style.color_mode == "track"
    look["gradient"] = style.gradient
    look["curve"] = CURVE_KINDS.index(style.curve)
    look["palette_size"] = len(TRACK_PALETTE)
    look["opacity"] = style.opacity
    return look


def _box_look(style: BoxStyle) -> np.ndarray:
    look = np.zeros(1, BOX_LOOK)
    stroke = parse_color(style.color)
    look["stroke_color"] = stroke * [1, 1, 1, style.opacity]
    fill = stroke if style.fill_color is None else parse_color(style.fill_color)
    look["fill_color"] = fill * [1, 1, 1, style.fill_opacity * style.opacity]
    look["size"] = style.size
    look["stroke_width"] = style.stroke_width
    look["roundness"] = style.roundness
    look["bracket_length"] = style.bracket_length if style.shape == "brackets" else 0.0
    look["color_mode"] = style.color_mode == "track"
    look["palette_size"] = len(TRACK_PALETTE)
    look["own_fill"] = style.fill_color is not None or style.color_mode == "single"
    look["opacity"] = style.opacity
    look["fill_opacity"] = style.fill_opacity
    return look


class GpuLinkScene:
    """Builds one frame's kNN-link curves and point boxes on the GPU.

    Buffers are allocated for ``count`` points and reused for every frame.
    Lines are drawn first and boxes on top (the order of
    ``DisplayList((link_polylines(...), box_primitives(...)))``).
    """

    def __init__(self, count: int, params: GraphParams, line_style: LineStyle, box_style: BoxStyle | None):
        import cupy

        if params.mode != "knn" or params.degree_cap or params.hysteresis:
            raise ValueError("the GPU link scene draws plain kNN graphs: use build_edges for "
                             "radius mode, degree caps or hysteresis")
        if box_style is not None and box_style.size_mode != "fixed":
            raise ValueError("the GPU link scene draws fixed-size boxes")
        self.count = count
        self.params = params
        self.k = min(params.k, max(count - 1, 0))
        edges = count * self.k
        segments = edges * MAX_SEGMENTS
        boxes = count if box_style is not None else 0
        empty = lambda shape, dtype=cupy.float32: cupy.zeros(shape, dtype)
        self.arrays = {
            "prim_kind": cupy.concatenate([cupy.zeros(segments, cupy.int32), cupy.ones(boxes, cupy.int32)]),
            "prim_ref": cupy.concatenate([cupy.arange(segments, dtype=cupy.int32),
                                          cupy.arange(boxes, dtype=cupy.int32)]),
            "seg_p0": empty((segments, 2)), "seg_p1": empty((segments, 2)),
            "seg_polyline": cupy.full(segments, -1, cupy.int32), "seg_arc0": empty(segments),
            "line_width": empty(edges), "line_color0": empty((edges, 4)), "line_color1": empty((edges, 4)),
            "line_dash": empty((edges, 2)), "line_dash_round": empty(edges, cupy.int32),
            "line_arc_total": empty(edges),
            "box_center": empty((boxes, 2)), "box_half": empty((boxes, 2)), "box_radius": empty(boxes),
            "box_stroke": empty(boxes), "box_stroke_color": empty((boxes, 4)), "box_fill_color": empty((boxes, 4)),
            "box_bracket": empty(boxes),
        }
        self.scene = DeviceScene.from_arrays(self.arrays)
        self._knn = (empty((count, self.k), cupy.int64), empty((count, self.k)))
        self._edges = (empty(edges, cupy.int64), empty(edges, cupy.int64), empty(edges, cupy.uint64))
        self._line_look = cupy.asarray(_line_look(line_style).view(np.uint8))
        self._box_look = cupy.asarray(_box_look(box_style).view(np.uint8)) if box_style is not None else None
        self._palette = cupy.asarray(TRACK_PALETTE)

    def build(self, points, valid=None) -> DeviceScene:
        """Fill the scene for ``points`` (CuPy float32 [count, 2]); ``valid`` masks hidden points."""
        import cupy

        points = cupy.ascontiguousarray(points, dtype=cupy.float32)
        if points.shape != (self.count, 2):
            raise ValueError(f"points must have shape [{self.count}, 2], got {list(points.shape)}")
        mask = np.uint64(0) if valid is None else cupy.ascontiguousarray(valid, dtype=cupy.uint8)
        a = self.arrays
        n, k = np.int32(self.count), np.int32(self.k)
        edges = self.count * self.k
        if edges:
            index, distance = self._knn
            _launch_knn(points, mask, self.k, index, distance)
            edge_a, edge_b, key = self._edges
            _kernel("link_edges")((-(-edges // 256),), (256,), (
                points, index, n, k, np.float32(self.params.delta_y_cap), np.float32(self.params.max_length),
                edge_a, edge_b, key))
            # Few edges: the kernel ranks the keys itself (no sort launches).
            order = _NULL if edges <= _RANK_IN_KERNEL else cupy.argsort(key)
            _kernel("curve_segments")((-(-edges // 128),), (128,), (
                points, edge_a, edge_b, key, order, np.int32(edges), self._line_look, self._palette,
                a["seg_p0"], a["seg_p1"], a["seg_polyline"], a["seg_arc0"], a["line_width"], a["line_color0"],
                a["line_color1"], a["line_dash"], a["line_dash_round"], a["line_arc_total"]))
        if self._box_look is not None and self.count:
            _kernel("point_boxes")((-(-self.count // 256),), (256,), (
                points, mask, n, self._box_look, self._palette, a["box_center"], a["box_half"], a["box_radius"],
                a["box_stroke"], a["box_stroke_color"], a["box_fill_color"], a["box_bracket"]))
        return self.scene
