"""Geometry builders: tracked points + graph + style -> display lists."""

from __future__ import annotations

import numpy as np

from ..graph.neighbours import GraphParams, build_edge_sequence, knn_cpu
from ..tracks.contract import located
from .colors import palette_colors, parse_color
from .curves import bend_signs, control_points, flatten
from .display_list import Boxes, DisplayList, Polylines
from .styles import BoxStyle, LineStyle


def _dash(style: LineStyle, count: int):
    """(on, off) lengths and round-cap flags for every edge."""
    on_off = {"solid": (0.0, 0.0), "dashed": (style.dash_length, style.gap_length),
              "dotted": (0.0, style.gap_length)}[style.pattern]
    dash = np.tile(np.array(on_off, np.float32), (count, 1))
    return dash, np.full(count, style.pattern == "dotted")


def _line_colors(style: LineStyle, id_a, id_b):
    """Start and end RGBA per edge, with the opacity folded into alpha."""
    count = len(id_a)
    if style.color_mode == "track":
        start = palette_colors(np.minimum(id_a, id_b))
        end = palette_colors(np.maximum(id_a, id_b)) if style.gradient else start
    else:
        start = np.tile(parse_color(style.color), (count, 1))
        end = np.tile(parse_color(style.color_end), (count, 1)) if style.gradient else start
    opacity = np.array([1, 1, 1, style.opacity], np.float32)
    return start * opacity, end * opacity


def link_polylines(points: np.ndarray, track_ids: np.ndarray, edges: np.ndarray, style: LineStyle,
                   opacity: np.ndarray | None = None) -> Polylines:
    """Curves for ``edges`` (index pairs into ``points``), drawn from the lower track id.

    ``opacity`` [N] (0..1 per point, e.g. a fading track) scales each end's alpha,
    so a link fades toward a point that fades.
    """
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    if len(edges) == 0:
        return Polylines.empty()
    ids = np.asarray(track_ids, dtype=np.int64)
    swap = ids[edges[:, 0]] > ids[edges[:, 1]]
    a = np.where(swap, edges[:, 1], edges[:, 0])
    b = np.where(swap, edges[:, 0], edges[:, 1])
    signs = bend_signs(ids[a], ids[b], style.bend_side)
    controls = control_points(points[a], points[b], style.curve, style.bend, signs)
    vertices, offsets = flatten(controls)
    start, end = _line_colors(style, ids[a], ids[b])
    if opacity is not None:
        opacity = np.asarray(opacity, np.float32)
        start[:, 3] *= opacity[a]
        end[:, 3] *= opacity[b]
    dash, dash_round = _dash(style, len(edges))
    return Polylines(vertices, offsets, np.full(len(edges), style.width, np.float32),
                     start, end, dash, dash_round)


def box_primitives(centers: np.ndarray, sizes: np.ndarray, track_ids: np.ndarray, style: BoxStyle,
                   opacity: np.ndarray | None = None) -> Boxes:
    """Rounded (or corner-bracket) boxes of ``sizes`` [N, 2] (w, h) at ``centers``.

    ``opacity`` [N] (0..1 per box, e.g. a fading track) scales stroke and fill alpha.
    """
    count = len(centers)
    half = np.asarray(sizes, np.float32).reshape(count, 2) * 0.5
    shorter = half.min(axis=1) if count else np.zeros(0, np.float32)
    if style.color_mode == "track":
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


def link_overlay(path, visibility, params: GraphParams, style: LineStyle, knn=knn_cpu, opacity=None) -> list:
    """Per-frame display lists of the neighbour-graph curves of a track set.

    ``path`` float32 [T, N, 2], ``visibility`` bool [T, N]; columns are track ids.
    Positions that are NaN/inf or beyond ±``POSITION_LIMIT`` count as hidden.
    ``opacity`` float32 [T, N] (the tracks' fades) scales each link end's alpha.
    """
    visible = _visible(path, visibility)
    sequence = build_edge_sequence(path, visible, params, knn=knn)
    ids = np.arange(path.shape[1])
    return [DisplayList((link_polylines(np.nan_to_num(path[t]), ids, sequence[t], style,
                                        None if opacity is None else opacity[t]),))
            for t in range(path.shape[0])]


def box_overlay(path, visibility, style: BoxStyle, sizes=None, opacity=None) -> list:
    """Per-frame display lists of a box around every visible track.

    ``sizes`` float32 [T, N, 2] (w, h) is used when ``style.size_mode == 'track'``;
    tracks without a finite size fall back to ``style.size``. Positions that are
    NaN/inf or beyond ±``POSITION_LIMIT`` count as hidden. ``opacity`` float32
    [T, N] (the tracks' fades) scales each box's alpha.
    """
    visible = _visible(path, visibility)
    frames = []
    for t in range(path.shape[0]):
        columns = np.flatnonzero(visible[t])
        wh = np.full((len(columns), 2), style.size, np.float32)
        if style.size_mode == "track" and sizes is not None:
            given = sizes[t, columns]
            wh = np.where(np.isfinite(given) & (given >= 0), given, wh)
        alpha = None if opacity is None else opacity[t, columns]
        frames.append(DisplayList((box_primitives(path[t, columns], wh, columns, style, alpha),)))
    return frames
