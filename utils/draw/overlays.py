"""Geometry builders: tracked points + graph + style -> display lists."""

from __future__ import annotations

import numpy as np

from ..core.arrays import to_numpy
from ..core.log import LOGGER
from ..graph.knn_gpu import KNN_GPU_MAX_K, knn_gpu
from ..graph.neighbours import GraphParams, build_edge_batch, knn_cpu, knn_query_count
from ..tracks.contract import located
from .colors import palette_colors, parse_color
from .curves import bend_signs, control_points, flatten
from .display_list import Boxes, DisplayList, Polylines
from .motion import MOTION_MODES, motion_colors, track_motion
from .styles import BoxStyle, LineStyle, TrailStyle


def _dash(style: LineStyle, count: int, xp=np):
    """(on, off) lengths and round-cap flags for every edge."""
    on_off = {"solid": (0.0, 0.0), "dashed": (style.dash_length, style.gap_length),
              "dotted": (0.0, style.gap_length)}[style.pattern]
    dash = xp.tile(xp.asarray(on_off, dtype=xp.float32), (count, 1))
    return dash, xp.full(count, style.pattern == "dotted")


def _point_colors(style, point_colors, count: int):
    """``point_colors`` checked against a style colouring by motion (None for other modes)."""
    if style.color_mode not in MOTION_MODES:
        return None
    if point_colors is None:
        raise ValueError(f"color_mode {style.color_mode!r} colours by the tracks' motion, which one frame does not "
                         "show: draw with link_overlay/box_overlay or the streaming OverlayBuilder, or pass "
                         "point_colors (motion.motion_colors)")
    if tuple(point_colors.shape) != (count, 4):
        raise ValueError(f"point_colors must have shape [{count}, 4] (one RGBA per point), got "
                         f"{list(point_colors.shape)}")
    return point_colors


def _line_colors(style: LineStyle, id_a, id_b, xp=np, colors=None):
    """Start and end RGBA per edge, with the opacity folded into alpha (``colors``: each end's point colour,
    for the motion modes)."""
    count = len(id_a)
    if colors is not None:
        start, end = colors[0], colors[1] if style.gradient else colors[0]
    elif style.color_mode == "track":
        start = palette_colors(xp.minimum(id_a, id_b), xp=xp)
        end = palette_colors(xp.maximum(id_a, id_b), xp=xp) if style.gradient else start
    else:
        start = xp.tile(xp.asarray(parse_color(style.color)), (count, 1))
        end = xp.tile(xp.asarray(parse_color(style.color_end)), (count, 1)) if style.gradient else start
    opacity = xp.asarray([1, 1, 1, style.opacity], dtype=xp.float32)
    return start * opacity, end * opacity


def link_geometry(points, track_ids, edges, style: LineStyle, xp=np, opacity=None, point_colors=None) -> dict:
    """The :class:`Polylines` fields of the curves for ``edges`` (index pairs into ``points``),
    each drawn from its lower track id, as ``xp`` arrays (NumPy or CuPy), in edge order.

    ``opacity`` [N] (0..1 per point, e.g. a fading track) scales each end's alpha,
    so a link fades toward a point that fades. ``point_colors`` [N, 4] (RGBA per
    point, :func:`~.motion.motion_colors`) colours the ends for the motion colour modes.
    """
    ids = xp.asarray(track_ids, dtype=xp.int64)
    swap = ids[edges[:, 0]] > ids[edges[:, 1]]
    a = xp.where(swap, edges[:, 1], edges[:, 0])
    b = xp.where(swap, edges[:, 0], edges[:, 1])
    signs = bend_signs(ids[a], ids[b], style.bend_side, xp=xp)
    controls = control_points(points[a], points[b], style.curve, style.bend, signs, xp=xp)
    vertices, offsets = flatten(controls, xp=xp)
    colors = _point_colors(style, point_colors, len(ids))
    start, end = _line_colors(style, ids[a], ids[b], xp=xp, colors=None if colors is None else (colors[a], colors[b]))
    if opacity is not None:
        opacity = xp.asarray(opacity, dtype=xp.float32)
        start[:, 3] *= opacity[a]
        end[:, 3] *= opacity[b]
    dash, dash_round = _dash(style, len(edges), xp=xp)
    return {"vertices": vertices, "offsets": offsets, "width": xp.full(len(edges), style.width, dtype=xp.float32),
            "color_start": start, "color_end": end, "dash": dash, "dash_round": dash_round}


def link_polylines(points: np.ndarray, track_ids: np.ndarray, edges: np.ndarray, style: LineStyle,
                   opacity: np.ndarray | None = None, point_colors: np.ndarray | None = None) -> Polylines:
    """Curves for ``edges`` (index pairs into ``points``), drawn from the lower track id
    (``opacity`` [N], ``point_colors`` [N, 4]: see :func:`link_geometry`)."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    if len(edges) == 0:
        return Polylines.empty()
    return Polylines(**link_geometry(np.asarray(points, np.float32), track_ids, edges, style, opacity=opacity,
                                     point_colors=point_colors))


def box_primitives(centers: np.ndarray, sizes: np.ndarray, track_ids: np.ndarray, style: BoxStyle,
                   opacity: np.ndarray | None = None, point_colors: np.ndarray | None = None) -> Boxes:
    """Rounded (or corner-bracket) boxes of ``sizes`` [N, 2] (w, h) at ``centers``.

    ``opacity`` [N] (0..1 per box, e.g. a fading track) scales stroke and fill alpha;
    ``point_colors`` [N, 4] colours them for the motion colour modes.
    """
    count = len(centers)
    half = np.asarray(sizes, np.float32).reshape(count, 2) * 0.5
    shorter = half.min(axis=1) if count else np.zeros(0, np.float32)
    colors = _point_colors(style, point_colors, count)
    if colors is not None:
        stroke = np.array(colors, np.float32)
    elif style.color_mode == "track":
        stroke = palette_colors(track_ids)
    else:
        stroke = np.tile(parse_color(style.color), (count, 1))
    fill = stroke.copy() if style.fill_color is None else np.tile(parse_color(style.fill_color), (count, 1))
    stroke[:, 3] *= style.opacity
    fill[:, 3] *= style.fill_opacity * style.opacity
    if opacity is not None:
        stroke[:, 3] *= opacity
        fill[:, 3] *= opacity
    bracket = 2 * shorter * style.bracket_length if style.shape == "brackets" else np.zeros(count)
    return Boxes(centers, half, shorter * style.roundness, np.full(count, style.stroke_width),
                 stroke, fill, bracket)


def _visible(path: np.ndarray, visibility: np.ndarray) -> np.ndarray:
    """Visible slots whose position is usable (finite, within ±POSITION_LIMIT; as in :class:`Tracks`)."""
    return visibility & located(path)


def _frame_slices(frame_of_item: np.ndarray, frames: int) -> np.ndarray:
    """Bounds [frames + 1] of each frame's run in items sorted by frame."""
    return np.searchsorted(frame_of_item, np.arange(frames + 1))


def _array_module(backend: str):
    """NumPy, or CuPy when ``backend`` resolves to the GPU."""
    from ..raster.backend import select_backend

    if select_backend(backend).selected == "gpu":
        import cupy

        return cupy
    return np


def link_overlay(path, visibility, params: GraphParams, style: LineStyle, knn=None, backend: str = "auto",
                 opacity=None, cuts=()) -> list:
    """Per-frame display lists of the neighbour-graph curves of a track set.

    ``path`` float32 [T, N, 2], ``visibility`` bool [T, N]; columns are track ids.
    Positions that are NaN/inf or beyond ±``POSITION_LIMIT`` count as hidden.
    The graph and the curves of all frames are built at once, on the GPU when
    ``backend`` resolves to it (NumPy and CuPy run the same code); ``knn``
    overrides the neighbour search (default: the backend's fastest).
    ``opacity`` float32 [T, N] (the tracks' fades) scales each link end's alpha; ``cuts`` (the frames that
    start a shot) stop the graph's hysteresis and the motion colour modes' moves there.
    """
    xp = _array_module(backend)
    if xp is not np:
        try:
            return _link_overlay(path, visibility, params, style, knn, xp, opacity, cuts)
        except (ValueError, TypeError):
            raise  # bad input: the CPU would refuse it too
        except Exception as error:  # CuPy/CUDA errors have no common base class
            LOGGER.warning("building the links on the GPU failed (%s: %s); building them on the CPU",
                           type(error).__name__, error)
    return _link_overlay(path, visibility, params, style, knn, np, opacity, cuts)


def _link_overlay(path, visibility, params: GraphParams, style: LineStyle, knn, xp, opacity=None, cuts=()) -> list:
    visible = xp.asarray(_visible(path, visibility))
    points = xp.asarray(np.nan_to_num(np.asarray(path, np.float32)))
    frames, columns = visible.shape
    knn = knn or _fastest_knn(xp, params)
    frame, edges, _ = build_edge_batch(points, visible, params, knn=knn, cuts=cuts)
    nodes = edges + (frame * columns)[:, None]
    alpha = None if opacity is None else xp.asarray(np.asarray(opacity, np.float32).reshape(-1))
    colors = None
    if style.color_mode in MOTION_MODES:
        colors = motion_colors(style, track_motion(points, visible, xp, cuts), xp).reshape(-1, 4)
    geometry = link_geometry(points.reshape(-1, 2), xp.arange(frames * columns) % max(columns, 1), nodes, style, xp=xp,
                             opacity=alpha, point_colors=colors)
    return [DisplayList((lines,)) for lines in _polylines_by_frame(geometry, frame, frames)]


def _polylines_by_frame(geometry: dict, frame, frames: int) -> list:
    """One :class:`Polylines` per frame (empty where it has no edge) from :func:`link_geometry`'s fields for edges
    sorted by ``frame`` (each edge's frame)."""
    lines = Polylines(**{name: to_numpy(values) for name, values in geometry.items()})
    return lines.parts(_frame_slices(to_numpy(frame), frames))


def link_polylines_frames(points: np.ndarray, edges: list, style: LineStyle, opacity: np.ndarray | None = None,
                          point_colors: np.ndarray | None = None) -> list:
    """:func:`link_polylines` of several frames in one geometry build, equal to it frame by frame (a curve
    depends on its own edge only): ``points`` float32 [T, N, 2] (the track ids are the columns), ``edges`` one
    int [E, 2] per frame, ``opacity`` [T, N], ``point_colors`` [T, N, 4]; one :class:`Polylines` per frame."""
    frames, columns = points.shape[:2]
    frame = np.repeat(np.arange(frames), [len(part) for part in edges])
    if len(frame) == 0:
        return [Polylines.empty() for _ in range(frames)]
    nodes = np.concatenate([np.asarray(part, np.int64).reshape(-1, 2) for part in edges]) + (frame * columns)[:, None]
    geometry = link_geometry(np.asarray(points, np.float32).reshape(-1, 2), np.arange(frames * columns) % columns,
                             nodes, style, opacity=None if opacity is None else np.asarray(opacity).reshape(-1),
                             point_colors=None if point_colors is None else np.asarray(point_colors).reshape(-1, 4))
    return _polylines_by_frame(geometry, frame, frames)


def _fastest_knn(xp, params: GraphParams):
    """The fused GPU kernel for CuPy points (when it takes the neighbour count asked), else cKDTree."""
    fits = knn_query_count(params, params.hysteresis > 0) <= KNN_GPU_MAX_K
    return knn_gpu if xp is not np and fits else knn_cpu


def box_overlay(path, visibility, style: BoxStyle, sizes=None, opacity=None, point_colors=None, cuts=()) -> list:
    """Per-frame display lists of a box around every visible track.

    ``sizes`` float32 [T, N, 2] (w, h) is used when ``style.size_mode == 'track'``;
    tracks without a finite size fall back to ``style.size``. Positions that are
    NaN/inf or beyond ±``POSITION_LIMIT`` count as hidden. ``opacity`` float32
    [T, N] (the tracks' fades) scales each box's alpha. The motion colour modes
    take the tracks' motion over these frames (no move into a frame of ``cuts``,
    a shot's first), or ``point_colors`` [T, N, 4] where given. All frames'
    boxes are built at once.
    """
    visible = _visible(path, visibility)
    frame, columns = np.nonzero(visible)
    wh = np.full((len(columns), 2), style.size, np.float32)
    if style.size_mode == "track" and sizes is not None:
        given = sizes[frame, columns]
        wh = np.where(np.isfinite(given) & (given >= 0), given, wh)
    if style.color_mode in MOTION_MODES and point_colors is None:
        point_colors = motion_colors(style, track_motion(path, visible, cuts=cuts))
    boxes = box_primitives(path[frame, columns], wh, columns, style,
                           None if opacity is None else np.asarray(opacity)[frame, columns],
                           None if point_colors is None else np.asarray(point_colors)[frame, columns])
    return [DisplayList((part,)) for part in boxes.parts(_frame_slices(frame, visible.shape[0]))]


def _shifted(values, step: int, fill, xp):
    """``values`` moved along axis 0: ``out[s] = values[s + step]``, ``fill`` where that is outside."""
    out = xp.full_like(values, fill)
    count = values.shape[0]
    if abs(step) < count:
        if step >= 0:
            out[:count - step] = values[step:]
        else:
            out[-step:] = values[:count + step]
    return out


def trail_geometry(path, visibility, style: TrailStyle, opacity=None, frames=None, cuts=(), xp=np):
    """The trails drawn at ``frames`` (int array, default every frame) of a track set, as
    ``(frame [P], fields)``: each polyline's frame, in ascending order, and the
    :class:`Polylines` fields (vertex factors included) as ``xp`` arrays.

    At frame ``t`` a track's trail is its visible positions of frames
    ``t - length + 1 .. t``, one vertex per frame, oldest first; a hidden frame
    breaks it into separate polylines (single positions draw nothing). A vertex
    of age ``k = t - s`` gets width factor ``1 - taper * k / (length - 1)`` and
    alpha ``(1 - k / (length - 1)) ** fade`` times the track's ``opacity`` [T, N]
    at frame ``s``, so a track that ends leaves its trail where it was, fading
    and shrinking from the tail for ``length - 1`` frames. ``cuts`` (frames that
    start a new shot) end every trail: no trail holds positions of an earlier shot.

    Smoothing replaces each position by the mean of a centred window of
    ``2h + 1`` frames, ``h = min(style.smoothing_frames, k, visible frames before
    s, visible frames after s)`` (of its shot): it never looks past ``t`` nor
    across a hidden frame or a cut, so the head sits on the point, a point
    moving steadily on a line keeps its line exactly, and earlier frames'
    results do not change later.
    Only frames ``t - length - smoothing_frames + 1 .. t`` matter for frame ``t``,
    and a frame's trails come out bit for bit the same whichever frames are
    built with it (the stream builds one frame at a time from those frames).
    Runs on NumPy or CuPy (``xp``).
    """
    path = xp.asarray(path, dtype=xp.float32)
    count, columns = path.shape[:2]
    visible = xp.asarray(visibility, dtype=bool) & located(path)  # NumPy's functions dispatch to CuPy arrays
    frames = xp.arange(count, dtype=xp.int64) if frames is None else xp.asarray(frames, dtype=xp.int64)
    length, reach = style.length, style.smoothing_frames

    # Vertex (frame index i, column n, window slot j) for slot j = frame t - length + 1 + j, oldest first.
    padded = xp.concatenate([xp.zeros((length - 1, columns), dtype=bool), visible])
    slots = xp.arange(length, dtype=xp.int64)
    present = padded[frames[:, None, None] + slots, xp.arange(columns)[None, :, None]]
    if cuts:  # each frame's shot (0, then one more at each cut): a trail keeps the vertices of its own shot
        starts = np.zeros(count, np.int64)
        starts[list(cuts)] = 1
        shot = xp.asarray(np.cumsum(starts))
        padded_shot = xp.concatenate([xp.full(length - 1, -1, dtype=xp.int64), shot])
        present &= (padded_shot[frames[:, None] + slots] == shot[frames][:, None])[:, None, :]
    index, column, slot = xp.nonzero(present)
    # A polyline runs over consecutive slots of one (frame, column); keep those of two vertices or more.
    joined = xp.zeros(index.shape[0], dtype=bool)
    joined[1:] = (index[1:] == index[:-1]) & (column[1:] == column[:-1]) & (slot[1:] == slot[:-1] + 1)
    run = xp.cumsum(~joined) - 1
    keep = xp.bincount(run)[run] >= 2 if run.shape[0] else joined
    index, column, slot, starts = index[keep], column[keep], slot[keep], ~joined[keep]
    first = xp.nonzero(starts)[0]
    offsets = xp.concatenate([first, xp.asarray([index.shape[0]], dtype=first.dtype)]).astype(xp.int64)

    age = (length - 1) - slot
    frame = frames[index] - age
    # Smoothing half-window per vertex: capped by its age and by the visible frames on either side.
    before = xp.zeros((count, columns), dtype=xp.int64)
    after = xp.zeros((count, columns), dtype=xp.int64)
    for side, step in ((before, -1), (after, 1)):
        unbroken = xp.ones((count, columns), dtype=bool)
        for offset in range(1, reach + 1):
            unbroken &= _shifted(visible, step * offset, False, xp)
            if cuts:
                unbroken &= (_shifted(shot, step * offset, -1, xp) == shot)[:, None]
            side += unbroken
    half = xp.minimum(xp.minimum(before, after)[frame, column], age)
    positions = xp.where(visible[..., None], path, 0).astype(xp.float64)
    window = positions.copy()
    vertices = xp.zeros((index.shape[0], 2), dtype=xp.float32)
    for width in range(reach + 1):  # window sums of 2 * width + 1 frames, always added in the same order
        if width:
            window += _shifted(positions, -width, 0.0, xp) + _shifted(positions, width, 0.0, xp)
        chosen = xp.nonzero(half == width)[0]
        vertices[chosen] = (window[frame[chosen], column[chosen]] / (2 * width + 1)).astype(xp.float32)

    fraction = age.astype(xp.float32) / xp.float32(length - 1)
    vertex_width = xp.float32(1.0) - xp.float32(style.taper) * fraction
    vertex_alpha = (xp.float32(1.0) - fraction) ** xp.float32(style.fade)
    if opacity is not None:
        vertex_alpha = vertex_alpha * xp.asarray(opacity, dtype=xp.float32)[frame, column]
    lines = first.shape[0]
    line_column = column[first]
    if style.color_mode == "track":
        color = palette_colors(line_column, xp=xp)
    else:
        color = xp.tile(xp.asarray(parse_color(style.color)), (lines, 1))
    color = color * xp.asarray([1, 1, 1, style.opacity], dtype=xp.float32)
    fields = {"vertices": vertices, "offsets": offsets, "width": xp.full(lines, style.width, dtype=xp.float32),
              "color_start": color, "color_end": color, "dash": xp.zeros((lines, 2), dtype=xp.float32),
              "dash_round": xp.zeros(lines, dtype=bool), "vertex_width": vertex_width,
              "vertex_alpha": xp.clip(vertex_alpha, 0.0, 1.0)}
    return frames[index[first]], fields


def trail_polylines(fields: dict, lines: slice) -> Polylines:
    """The :class:`Polylines` of polylines ``lines`` (a slice) of :func:`trail_geometry` fields (NumPy)."""
    offsets = fields["offsets"][lines.start:lines.stop + 1]
    if len(offsets) < 2:
        return Polylines.empty()
    vertex_range = slice(int(offsets[0]), int(offsets[-1]))
    per_vertex = ("vertices", "vertex_width", "vertex_alpha")
    per_line = {name: values[lines] for name, values in fields.items() if name not in per_vertex + ("offsets",)}
    return Polylines(offsets=offsets - offsets[0], **{name: fields[name][vertex_range] for name in per_vertex},
                     **per_line)


def trail_overlay(path, visibility, style: TrailStyle, opacity=None, cuts=()) -> list:
    """Per-frame display lists of every track's motion trail (see :func:`trail_geometry`).

    ``path`` float32 [T, N, 2], ``visibility`` bool [T, N]; ``opacity`` float32
    [T, N] (the tracks' fades) scales each vertex's alpha; ``cuts`` (frames that
    start a new shot) end every trail. Positions that are NaN/inf or beyond
    ±``POSITION_LIMIT`` count as hidden. All frames' trails are built at once.
    """
    path = np.asarray(path, np.float32)
    frame, fields = trail_geometry(path, visibility, style, opacity, cuts=cuts)
    bounds = _frame_slices(frame, path.shape[0])
    return [DisplayList((trail_polylines(fields, slice(int(a), int(b))),)) for a, b in zip(bounds[:-1], bounds[1:])]
