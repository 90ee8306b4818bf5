"""Polylines flattened into a segment table, shared by both rasterisers.

Each segment carries its polyline, its arc-length offset, the bisector
planes at its interior joints and, for tapered or fading lines, the width
and alpha factors of its two ends. The bisectors partition a polyline's
neighbourhood among its segments, so each pixel is evaluated once per
polyline against the segment nearest to it (exact while the line is narrower
than the curve's radius of curvature).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EPS = 1e-6


@dataclass(frozen=True)
class SegmentTable:
    """Segments of a batch of polylines, in drawing order (xp arrays).

    ``start_normal``/``end_normal`` are the unit normals of the joint planes:
    a point ``q`` belongs to the segment when ``(q - p0)·start_normal >= 0``
    (if ``has_start``) and ``(q - p1)·end_normal < 0`` (if ``has_end``).
    """

    p0: object            # float32 [S, 2]
    p1: object            # float32 [S, 2]
    polyline: object      # int32 [S]
    arc_start: object     # float32 [S] arc length at p0 along the polyline
    start_normal: object  # float32 [S, 2]
    end_normal: object    # float32 [S, 2]
    has_start: object     # bool [S]
    has_end: object       # bool [S]
    arc_total: object     # float32 [P] length of each polyline
    factor0: object = None  # float32 [S, 2] (width, alpha) factors at p0, or None (all 1)
    factor1: object = None  # float32 [S, 2] likewise at p1

    @property
    def count(self) -> int:
        return int(self.p0.shape[0])


def _unit(vectors, xp):
    length = xp.sqrt((vectors * vectors).sum(axis=1, keepdims=True))
    return vectors / xp.maximum(length, _EPS), length[:, 0]


def build_segment_table(vertices, offsets, xp=np, vertex_width=None, vertex_alpha=None) -> SegmentTable:
    """Flatten polylines (``vertices`` [V, 2], ``offsets`` [P + 1] and the optional
    per-vertex factors ``vertex_width``/``vertex_alpha`` [V], as in
    :class:`~..draw.display_list.Polylines`) into segments, dropping zero-length ones.

    A polyline whose vertices all coincide keeps one zero-length segment
    (drawn as a round dot of the line's width). Each segment keeps the factors
    of its two vertices (none when neither factor is given). Runs on NumPy or
    CuPy (``xp``).
    """
    vertices = xp.asarray(vertices, dtype=xp.float32)
    offsets = xp.asarray(offsets, dtype=xp.int64)
    lines = offsets.shape[0] - 1
    # Polyline p owns segments seg_offsets[p]..seg_offsets[p + 1] - 1; segment s starts at vertex s + p.
    seg_offsets = offsets - xp.arange(lines + 1, dtype=xp.int64)
    index = xp.arange(vertices.shape[0] - lines if lines else 0, dtype=xp.int64)
    polyline = xp.searchsorted(seg_offsets[1:], index, side="right")
    starts = index + polyline
    p0 = vertices.take(starts, axis=0)  # take: row fancy indexing is several times slower
    p1 = vertices.take(starts + 1, axis=0)
    tangent, length = _unit(p1 - p0, xp)

    # Keep non-degenerate segments, or the first segment of an all-degenerate polyline.
    long_enough = length > _EPS
    polyline_has_length = xp.zeros(lines, dtype=bool)
    polyline_has_length[polyline[long_enough]] = True
    keep = long_enough | ((index == seg_offsets[polyline]) & ~polyline_has_length[polyline])
    kept = xp.nonzero(keep)[0]
    p0, p1, tangent = (rows.take(kept, axis=0) for rows in (p0, p1, tangent))
    length, polyline = length[kept], polyline[kept]
    factor0 = factor1 = None
    if vertex_width is not None or vertex_alpha is not None:
        factors = xp.ones((vertices.shape[0], 2), dtype=xp.float32)
        for column, given in enumerate((vertex_width, vertex_alpha)):
            if given is not None:
                factors[:, column] = xp.asarray(given, dtype=xp.float32)
        factor0, factor1 = factors.take(starts[kept], axis=0), factors.take(starts[kept] + 1, axis=0)

    count = p0.shape[0]
    same_as_prev = xp.zeros(count, dtype=bool)
    if count > 1:
        same_as_prev[1:] = polyline[1:] == polyline[:-1]
    has_start = same_as_prev
    has_end = xp.zeros(count, dtype=bool)
    has_end[:-1] = same_as_prev[1:]

    # Joint plane normal = mean of the incoming and outgoing tangents (the tangent at a reversal).
    joint = xp.zeros((count, 2), dtype=xp.float32)
    if count > 1:
        joint[1:] = tangent[:-1] + tangent[1:]
    joint = xp.where(((joint * joint).sum(axis=1) < _EPS)[:, None], tangent, joint)
    joint, _ = _unit(joint, xp)
    start_normal = xp.where(has_start[:, None], joint, 0).astype(xp.float32)
    end_normal = xp.zeros((count, 2), dtype=xp.float32)
    if count > 1:
        end_normal[:-1] = start_normal[1:]

    # Arc length at each segment start, restarting at every polyline.
    cumulative = xp.cumsum(length.astype(xp.float64)) - length  # float64: exact per-polyline offsets
    firsts = xp.nonzero(~same_as_prev)[0]
    first_index = xp.zeros(lines, dtype=xp.int64)
    first_index[polyline[firsts]] = firsts
    arc_start = (cumulative - cumulative[first_index[polyline]]).astype(xp.float32)
    arc_total = xp.zeros(lines, dtype=xp.float32)
    if count:
        lasts = xp.concatenate([firsts[1:] - 1, xp.full(1, count - 1, dtype=xp.int64)])
        arc_total[polyline[lasts]] = (arc_start + length)[lasts]
    return SegmentTable(p0.astype(xp.float32), p1.astype(xp.float32), polyline.astype(xp.int32),
                        arc_start, start_normal, end_normal, has_start, has_end, arc_total, factor0, factor1)
