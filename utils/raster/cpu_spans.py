"""CPU rasteriser: display list -> sparse premultiplied RGBA layer (NumPy).

Every primitive is cut into horizontal pixel spans computed exactly from its
geometry (no per-primitive Python loop); coverage is then evaluated with the
coverage model (docs/architecture.md) on those pixels only, and the (pixel, primitive)
contributions are composited "over" in list order by depth peeling.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..draw.display_list import Boxes, DisplayList, Glyphs, Polylines
from .layer import SparseLayer
from .segments import SegmentTable, build_segment_table

_EPS = 1e-6
_PAIRS_PER_FLUSH = 4_000_000  # bounds the working memory of one frame
BYTES_PER_CANDIDATE = 24
"""Working memory per candidate pixel while rasterising (measured with tracemalloc: 1080p with 100 / 300
points 29 / 28 bytes, 4K with 100 / 1000 points 25 / 21; a 1080p frame of 2 000 points in radius mode,
107 000 links, peaks at 2.0 GB)."""
# A polyline turning further than this in total may come back within its own width.
_SELF_OVERLAP_TURN = np.radians(120.0)


@dataclass
class _Pairs:
    """(pixel, premultiplied colour, alpha) contributions in drawing order."""

    pixels: np.ndarray
    color: np.ndarray
    alpha: np.ndarray


def _clamp01(values):
    return np.clip(values, 0.0, 1.0, out=values)


def _row_ranges(ymin, ymax, rows):
    """First row and row count whose centres lie in [ymin, ymax], within ``rows`` (a range)."""
    first = np.maximum(np.ceil(ymin - 0.5), rows.start).astype(np.int64)
    last = np.minimum(np.floor(ymax - 0.5), rows.stop - 1).astype(np.int64)
    return first, np.maximum(last - first + 1, 0)


def _expand(starts, counts):
    """Repeat ids by ``counts`` and number each copy from ``starts``."""
    owner = np.repeat(np.arange(len(counts)), counts)
    run_start = np.cumsum(counts) - counts
    values = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(run_start - starts, counts)
    return owner, values


def _slab(slope, offset, low, high):
    """Interval of x with ``low <= slope * x + offset <= high`` (inf/-inf when unbounded)."""
    flat = np.abs(slope) < _EPS
    safe = np.where(flat, 1.0, slope)
    a = (low - offset) / safe
    b = (high - offset) / safe
    lo = np.where(flat, np.where((low <= offset) & (offset <= high), -np.inf, np.inf), np.minimum(a, b))
    hi = np.where(flat, np.where((low <= offset) & (offset <= high), np.inf, -np.inf), np.maximum(a, b))
    return lo, hi


def _plane_side(point, normal, yc, negative=False):
    """Column bounds on row centre ``yc`` where ``(q - point)·normal >= 0``.

    With ``negative`` the bounds of the complement (``< 0``). Both sides come
    from the same arithmetic, so neighbouring segments share each joint
    pixel exactly once.
    """
    nx, ny = normal[:, 0], normal[:, 1]
    flat = np.abs(nx) < _EPS
    crossing = point[:, 0] - ny * (yc - point[:, 1]) / np.where(flat, 1.0, nx)
    up = np.ceil(crossing - 0.5)     # first column on the >= side when nx > 0
    down = np.floor(crossing - 0.5)  # last column on the >= side when nx < 0
    if negative:
        first = np.where(nx < 0, down + 1, -np.inf)
        last = np.where(nx > 0, up - 1, np.inf)
    else:
        first = np.where(nx > 0, up, -np.inf)
        last = np.where(nx < 0, down, np.inf)
    row_inside = (ny * (yc - point[:, 1]) >= 0) != negative
    first = np.where(flat, np.where(row_inside, -np.inf, np.inf), first)
    last = np.where(flat, np.where(row_inside, np.inf, -np.inf), last)
    return first, last


def _line_spans(layer: _LineLayer, rows: range, width: int):
    """Per (segment, row): the columns whose pixel centre is within the segment's radius."""
    table, radius = layer.table, layer.radius
    ymin = np.minimum(table.p0[:, 1], table.p1[:, 1]) - radius
    ymax = np.maximum(table.p0[:, 1], table.p1[:, 1]) + radius
    first_row, row_count = _row_ranges(ymin, ymax, rows)
    seg, row = _expand(first_row, row_count)
    yc = row.astype(np.float32) + np.float32(0.5)
    p0, p1, r = table.p0.take(seg, axis=0), table.p1.take(seg, axis=0), radius[seg]
    length, tangent = layer.length[seg], layer.tangent.take(seg, axis=0)
    lo = np.full(len(seg), np.inf, np.float32)
    hi = np.full(len(seg), -np.inf, np.float32)
    with np.errstate(invalid="ignore"):
        discs = [(end, np.sqrt(r * r - np.square(yc - end[:, 1]))) for end in (p0, p1)]
    for end, half in discs:  # NaN half-widths where the row misses the disc
        np.fmin(lo, end[:, 0] - half, out=lo)
        np.fmax(hi, end[:, 0] + half, out=hi)
    along_lo, along_hi = _slab(tangent[:, 0], (yc - p0[:, 1]) * tangent[:, 1] - p0[:, 0] * tangent[:, 0], 0.0, length)
    across_lo, across_hi = _slab(-tangent[:, 1], (yc - p0[:, 1]) * tangent[:, 0] + p0[:, 0] * tangent[:, 1], -r, r)
    band_lo = np.maximum(along_lo, across_lo)
    band_hi = np.minimum(along_hi, across_hi)
    band = (band_lo <= band_hi) & (length > _EPS)
    lo = np.where(band, np.minimum(lo, band_lo), lo)
    hi = np.where(band, np.maximum(hi, band_hi), hi)
    first = np.ceil(lo - 0.5)
    last = np.floor(hi - 0.5)
    for has_plane, point, normal, negative in ((table.has_start, p0, table.start_normal, False),
                                               (table.has_end, p1, table.end_normal, True)):
        plane_first, plane_last = _plane_side(point, normal.take(seg, axis=0), yc, negative)
        used = has_plane[seg]
        np.maximum(first, plane_first, out=first, where=used)
        np.minimum(last, plane_last, out=last, where=used)
    first = np.maximum(first, 0)
    last = np.minimum(last, width - 1)
    count = last - first + 1
    keep = count > 0
    return seg[keep], row[keep], first[keep].astype(np.int64), count[keep].astype(np.int64)


def _dash_distance(arc, on, off):
    """Signed distance along the arc to the nearest dash (negative inside)."""
    period = np.maximum(on + off, _EPS)
    phase = np.mod(arc, period)
    inside = phase <= on
    return np.where(inside, -np.minimum(phase, on - phase), np.minimum(phase - on, period - phase))


def _pair_pixels(row, first, count, width_px):
    """Expand spans: span index, pixel-centre x and flat pixel index per pair."""
    span, cols = _expand(first, count)
    pixels = row.take(span) * width_px + cols
    return span, cols.astype(np.float32) + np.float32(0.5), pixels


def _planar(colors, index):
    """Per-pair planar RGBA [4, M] gathered from per-primitive colours [P, 4].

    When every primitive has the same colour this is a [4, 1] column that
    broadcasts (no per-pair gather).
    """
    if len(colors) and (colors == colors[0]).all():
        return colors[0][:, None].copy()
    return np.ascontiguousarray(colors.T).take(index, axis=1)


@dataclass(frozen=True)
class _LineLayer:
    """A polyline batch prepared for rasterising.

    ``table`` keeps joint planes only where the bisector split is exact (the
    turn is gentle for the line's width, and the width does not taper);
    ``overlapping`` flags polylines that
    may still reach a pixel from two segments (sharp turns, or turning so far
    that the line can come back on itself): their pixels keep only the
    segment whose capsule they lie deepest in, as the coverage model asks.
    """

    lines: Polylines
    table: SegmentTable
    radius: np.ndarray
    overlapping: np.ndarray
    length: np.ndarray     # [S] each segment's length
    tangent: np.ndarray    # [S, 2] its unit tangent (0 for a zero-length segment)
    direction: np.ndarray  # [S, 2] likewise, but (1, 0) for a zero-length segment: a dot


def _line_layer(lines: Polylines) -> _LineLayer:
    table = build_segment_table(lines.vertices, lines.offsets, vertex_width=lines.vertex_width,
                                vertex_alpha=lines.vertex_alpha)
    half_width = lines.width[table.polyline] * 0.5
    if table.factor0 is not None:  # a tapered segment reaches as far as its wider end
        half_width = half_width * np.maximum(table.factor0[:, 0], table.factor1[:, 0])
    radius = half_width + 0.5
    delta = table.p1 - table.p0
    length = np.sqrt((delta * delta).sum(axis=1))
    tangent = delta / np.maximum(length, _EPS)[:, None]
    joint = np.flatnonzero(table.has_start)  # joint between segments joint - 1 and joint
    cos_turn = np.clip((tangent[joint - 1] * tangent[joint]).sum(axis=1), -1.0, 1.0)
    half_tan = np.sqrt((1.0 - cos_turn) / np.maximum(1.0 + cos_turn, _EPS))
    room = np.minimum(length[joint - 1], length[joint]) * 0.5
    sharp_turn = (cos_turn <= 0) | (np.maximum(radius[joint - 1], radius[joint]) * half_tan > room)
    tapering = np.zeros(lines.count, bool)  # width varies: the deepest capsule, not a bisector, owns a pixel
    if table.factor0 is not None:
        tapering[table.polyline[table.factor0[:, 0] != table.factor1[:, 0]]] = True
    sharp = joint[sharp_turn | tapering[table.polyline[joint]]]
    has_start, has_end = table.has_start.copy(), table.has_end.copy()
    has_start[sharp] = False
    has_end[sharp - 1] = False
    turning = np.bincount(table.polyline[joint], np.arccos(cos_turn), minlength=lines.count)
    overlapping = turning > _SELF_OVERLAP_TURN
    overlapping[table.polyline[sharp]] = True
    table = replace(table, has_start=has_start, has_end=has_end)
    direction = np.where((length > _EPS)[:, None], tangent, np.float32([1, 0]))
    return _LineLayer(lines, table, radius, overlapping, length, tangent, direction)


def _nearest_only(key, outside):
    """Mask keeping, per ``key``, the pair deepest inside its segment's capsule, i.e. with the least
    distance minus half width (ties: the first pair, which is the first segment: pairs come in segment
    order)."""
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    sorted_outside = outside[order]
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(order)]))
    deepest = np.flatnonzero(sorted_outside == np.minimum.reduceat(sorted_outside, starts)[group])
    first_deepest = deepest[np.r_[True, group[deepest][1:] != group[deepest][:-1]]]
    keep = np.zeros(len(order), bool)
    keep[order[first_deepest]] = True
    return keep


def _line_pairs(layer: _LineLayer, seg, row, first, count, width_px):
    """Coverage and colour of each (polyline, pixel) pair of a polyline batch."""
    lines, table = layer.lines, layer.table
    span, x, pixels = _pair_pixels(row, first, count, width_px)
    yc = row.astype(np.float32) + np.float32(0.5)
    p0 = table.p0.take(seg, axis=0)
    length, tangent = layer.length[seg], layer.direction.take(seg, axis=0)
    qy = yc - p0[:, 1]
    qx = x - p0[:, 0].take(span)
    tx, ty, seg_length = tangent[:, 0].take(span), tangent[:, 1].take(span), length.take(span)
    # Pixel offsets along and across the segment: the distance beside the segment is
    # |across| itself (exactly 0 for pixel centres on an axis-aligned line).
    along = qx * tx + (qy * tangent[:, 1]).take(span)
    across = qx * ty - (qy * tangent[:, 0]).take(span)
    overhang = np.maximum(np.maximum(-along, along - seg_length), 0.0)
    distance = np.sqrt(across * across + overhang * overhang)
    clamped = np.clip(along, 0.0, seg_length)
    arc = (table.arc_start[seg]).take(span) + clamped
    factor = None
    if table.factor0 is not None:  # width and alpha factors, linear between the segment's ends
        start = table.factor0.take(seg, axis=0)[span]
        factor = start + (table.factor1.take(seg, axis=0)[span] - start) * (clamped / np.maximum(seg_length, _EPS))[:, None]
    polyline = table.polyline[seg]
    half_width = (lines.width[polyline] * 0.5).take(span)
    if factor is not None:
        half_width = half_width * factor[:, 0]
    outside = distance - half_width
    overlapping = layer.overlapping[polyline].take(span)
    if np.any(overlapping):
        chosen = np.flatnonzero(overlapping)
        key = polyline[span[chosen]].astype(np.int64) * (int(pixels.max()) + 1) + pixels[chosen]
        keep = np.ones(len(span), bool)
        keep[chosen] = _nearest_only(key, outside[chosen])
        span, pixels, distance, arc, half_width, outside = (values[keep] for values in (
            span, pixels, distance, arc, half_width, outside))
        factor = None if factor is None else factor[keep]
    dash = lines.dash.take(polyline, axis=0)
    if np.any(dash[:, 1] > 0):
        dashed = (dash[:, 1] > 0).take(span)
        to_dash = _dash_distance(arc, dash[:, 0].take(span), dash[:, 1].take(span))
        rounded = np.hypot(distance, np.maximum(to_dash, 0.0)) - half_width
        butt = np.maximum(outside, to_dash)
        outside = np.where(dashed, np.where(lines.dash_round[polyline].take(span), rounded, butt), outside)
    coverage = _clamp01(np.float32(0.5) - outside)
    pair_polyline = polyline.take(span)
    rgba = _planar(lines.color_start, pair_polyline)
    if not np.array_equal(lines.color_start, lines.color_end):
        mix = arc / np.maximum(table.arc_total[pair_polyline], _EPS)
        rgba = rgba + (_planar(lines.color_end, pair_polyline) - rgba) * mix
    alpha = rgba[3] * coverage
    if factor is not None:
        alpha = alpha * factor[:, 1]
    return _Pairs(pixels, rgba[:3] * alpha, alpha)


def _box_spans(boxes: Boxes, rows: range, width: int):
    """Per (box, row): one full span, or two edge spans across an unfilled box's hole."""
    margin = boxes.stroke_width * 0.5 + 0.5
    cy, hh = boxes.center[:, 1], boxes.half_size[:, 1]
    first_row, row_count = _row_ranges(cy - hh - margin, cy + hh + margin, rows)
    box, row = _expand(first_row, row_count)
    yc = row.astype(np.float32) + np.float32(0.5)
    m, cx, hw, r = margin[box], boxes.center[:, 0][box], boxes.half_size[:, 0][box], boxes.radius[box]
    hollow = (boxes.fill_color[:, 3][box] <= 0) & (hw - m > 0) & \
        (np.abs(yc - cy[box]) < hh[box] - r - m)
    left_end = np.where(hollow, cx - hw + m, cx + hw + m)
    out = []
    for lo, hi, used in ((cx - hw - m, left_end, np.ones(len(box), bool)), (cx + hw - m, cx + hw + m, hollow)):
        first = np.maximum(np.ceil(lo - 0.5), 0)
        last = np.minimum(np.floor(hi - 0.5), width - 1)
        count = np.where(used, np.maximum(last - first + 1, 0), 0)
        out.append((box, row, first.astype(np.int64), count.astype(np.int64)))
    box = np.concatenate([o[0] for o in out])
    row = np.concatenate([o[1] for o in out])
    first = np.concatenate([o[2] for o in out])
    count = np.concatenate([o[3] for o in out])
    order = np.argsort(box, kind="stable")  # keep each box's spans together, in box order
    keep = order[count[order] > 0]
    return box[keep], row[keep], first[keep], count[keep]


def _box_pairs(boxes: Boxes, box, row, first, count, width_px):
    """Coverage and colour of each (box, pixel) pair: stroke over fill."""
    span, x, pixels = _pair_pixels(row, first, count, width_px)
    yc = row.astype(np.float32) + np.float32(0.5)
    half = boxes.half_size.take(box, axis=0)
    radius = boxes.radius[box]
    offset_x = np.abs(x - boxes.center[:, 0][box].take(span))
    offset_y = np.abs(yc - boxes.center[:, 1][box]).take(span)
    qx = offset_x - (half[:, 0] - radius).take(span)
    qy = offset_y - (half[:, 1] - radius).take(span)
    outer = np.sqrt(np.square(np.maximum(qx, 0)) + np.square(np.maximum(qy, 0)))
    signed = outer + np.minimum(np.maximum(qx, qy), 0) - radius.take(span)
    half_stroke = (boxes.stroke_width[box] * 0.5).take(span)
    stroke = _clamp01(np.float32(0.5) - (np.abs(signed) - half_stroke)) * (half_stroke > 0)
    bracket = boxes.bracket[box]
    if np.any(bracket > 0):
        arm_x = (half[:, 0] - bracket).take(span)
        arm_y = (half[:, 1] - bracket).take(span)
        arms = _clamp01(0.5 + offset_x - arm_x) * _clamp01(0.5 + offset_y - arm_y)
        stroke = np.where((bracket > 0).take(span), stroke * arms, stroke)
    pair_box = box.take(span)
    stroke_rgba = _planar(boxes.stroke_color, pair_box)
    fill_rgba = _planar(boxes.fill_color, pair_box)
    stroke_alpha = stroke * stroke_rgba[3]
    under = (1.0 - stroke_alpha) * _clamp01(np.float32(0.5) - signed) * fill_rgba[3]
    color = stroke_rgba[:3] * stroke_alpha + fill_rgba[:3] * under
    return _Pairs(pixels, color, stroke_alpha + under)


def _glyph_spans(glyphs: Glyphs, rows: range, width: int):
    """Per (glyph, row): the columns whose pixel centre lies in the quad (``x <= px < x + w``)."""
    (x, y), (w, h) = glyphs.origin.T, glyphs.size.T
    first_row = np.maximum(np.ceil(y - 0.5), rows.start).astype(np.int64)
    last_row = np.minimum(np.ceil(y + h - 0.5) - 1, rows.stop - 1).astype(np.int64)
    glyph, row = _expand(first_row, np.maximum(last_row - first_row + 1, 0))
    first = np.maximum(np.ceil(x - 0.5), 0)[glyph]
    last = np.minimum(np.ceil(x + w - 0.5) - 1, width - 1)[glyph]
    count = last - first + 1
    keep = count > 0
    return glyph[keep], row[keep], first[keep].astype(np.int64), count[keep].astype(np.int64)


def _atlas_texels(coverage, column, row):
    """Atlas coverage (uint8 as float32) at integer texels; 0 outside the atlas."""
    height, width = coverage.shape
    inside = (column >= 0) & (column < width) & (row >= 0) & (row < height)
    values = coverage[np.clip(row, 0, height - 1), np.clip(column, 0, width - 1)].astype(np.float32)
    return np.where(inside, values, np.float32(0))


def _glyph_pairs(glyphs: Glyphs, glyph, row, first, count, width_px):
    """Coverage and colour of each (glyph, pixel) pair: the atlas sampled bilinearly (see :class:`Glyphs`)."""
    span, x, pixels = _pair_pixels(row, first, count, width_px)
    yc = row.astype(np.float32) + np.float32(0.5)
    origin, texel = glyphs.origin.take(glyph, axis=0), glyphs.texel.take(glyph, axis=0)
    u = (x - origin[:, 0].take(span)) + texel[:, 0].take(span) - np.float32(0.5)
    v = ((yc - origin[:, 1]) + texel[:, 1] - np.float32(0.5)).take(span)
    u0, v0 = np.floor(u), np.floor(v)
    fu, fv = u - u0, v - v0
    i, j = u0.astype(np.int64), v0.astype(np.int64)
    atlas = glyphs.atlas.coverage
    coverage = ((1 - fu) * (1 - fv) * _atlas_texels(atlas, i, j) + fu * (1 - fv) * _atlas_texels(atlas, i + 1, j)
                + (1 - fu) * fv * _atlas_texels(atlas, i, j + 1) + fu * fv * _atlas_texels(atlas, i + 1, j + 1))
    rgba = _planar(glyphs.color, glyph.take(span))
    alpha = rgba[3] * (coverage / np.float32(255))
    return _Pairs(pixels, rgba[:3] * alpha, alpha)


def _chunks(counts, limit, groups=None):
    """Split span ranges so that each chunk expands to about ``limit`` pixels.

    A chunk never splits a run of equal ``groups`` values (spans that must be
    evaluated together).
    """
    totals = np.cumsum(counts)
    bounds = np.searchsorted(totals, np.arange(limit, totals[-1] if len(totals) else 0, limit), side="right")
    if groups is not None and len(groups):
        starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
        bounds = starts[np.minimum(np.searchsorted(starts, bounds), len(starts) - 1)]
    edges = np.unique(np.r_[0, bounds, len(counts)])
    return zip(edges[:-1], edges[1:])


def _composite(pending: list, height: int, width: int) -> SparseLayer:
    """Composite contributions (in drawing order) per pixel into a sparse layer.

    Contributions are sorted by pixel, then drawing order, with one 64-bit key
    that holds both (the pixel above, the contribution's place below) while
    they fit, as they do up to frames of billions of pixels; beyond, the
    pixels alone are sorted stably. Each primitive's pixels come ascending, so
    the stable sort merges runs. Each pixel starts from its top-most
    contribution and adds the ones below it *under* the running result, front
    to back, one depth level per pass.
    """
    pixels = np.concatenate([p.pixels for p in pending])
    if len(pixels) == 0:
        return SparseLayer.empty(height, width)
    color = np.concatenate([p.color for p in pending], axis=1)
    alpha = np.concatenate([p.alpha for p in pending])
    first = int(pixels.min())
    shift = len(pixels).bit_length()
    keys = np.subtract(pixels, first, dtype=np.int64)
    if (int(pixels.max()) - first).bit_length() + shift < 64:
        keys <<= shift
        keys |= np.arange(len(pixels))
        keys.sort(kind="stable")
        order = keys & ((1 << shift) - 1)
        sorted_pixels = keys >> shift
    else:
        order = np.argsort(keys, kind="stable")
        sorted_pixels = keys[order]
    boundary = np.ones(len(order), dtype=bool)
    np.not_equal(sorted_pixels[1:], sorted_pixels[:-1], out=boundary[:-1])
    last = np.flatnonzero(boundary)
    depth = last - np.concatenate(([-1], last[:-1]))
    top = order[last]
    acc_color = color.take(top, axis=1)
    acc_alpha = alpha[top]
    deeper = np.flatnonzero(depth > 1)
    level = 1
    while len(deeper):
        below = order[last[deeper] - level]
        transmit = 1.0 - acc_alpha[deeper]
        for channel, accumulated in enumerate(acc_color):  # a row's own view indexes twice as fast
            accumulated[deeper] += color[channel].take(below) * transmit
        acc_alpha[deeper] += alpha[below] * transmit
        level += 1
        deeper = deeper[depth[deeper] > level]
    return SparseLayer(height, width, sorted_pixels[last] + first, acc_color, acc_alpha)


def _as_pairs(layer: SparseLayer) -> _Pairs:
    return _Pairs(layer.pixels, layer.color, layer.alpha)


def candidate_pixels(display_list: DisplayList) -> float:
    """About how many pixels rasterising ``display_list`` looks at (its working memory grows with them): a
    segment of length L and width w about (L + 4) x (w + 4), a box or a glyph its bounding box."""
    total = 0.0
    for layer in display_list.layers:
        if isinstance(layer, Polylines):
            lengths = np.hypot(*np.diff(layer.vertices, axis=0).T)
            lengths[layer.offsets[1:-1] - 1] = 0.0  # from one polyline's end to the next one's start
            widths = np.repeat(layer.width, np.diff(layer.offsets))[:-1]
            if layer.vertex_width is not None:  # a tapered segment reaches as far as its wider end
                widths = widths * np.maximum(layer.vertex_width[:-1], layer.vertex_width[1:])
            total += float(np.dot(lengths + 4.0, widths + 4.0))
        elif isinstance(layer, Boxes):
            total += float(np.prod(2 * layer.half_size + layer.stroke_width[:, None] + 4.0, axis=1).sum())
        else:
            total += float(np.prod(layer.size + 1.0, axis=1).sum())
    return total


def prepare(display_list: DisplayList) -> list:
    """Band-independent preprocessing of each layer (polylines: their segment tables)."""
    return [_line_layer(layer) if isinstance(layer, Polylines) else layer for layer in display_list.layers]


def _band_pairs(prepared: list, rows: range, width: int, stop_check=None):
    """(pixel, colour, alpha) contributions inside ``rows``, in drawing order."""
    for layer in prepared:
        if isinstance(layer, _LineLayer):
            spans = _line_spans(layer, rows, width)
            polyline = layer.table.polyline[spans[0]]
            groups = np.where(layer.overlapping[polyline], polyline, -1 - np.arange(len(polyline)))
            evaluate = lambda *span: _line_pairs(layer, *span, width)
        elif isinstance(layer, Glyphs):
            spans = _glyph_spans(layer, rows, width)
            groups = None
            evaluate = lambda *span: _glyph_pairs(layer, *span, width)
        else:
            spans = _box_spans(layer, rows, width)
            groups = None
            evaluate = lambda *span: _box_pairs(layer, *span, width)
        for lo, hi in _chunks(spans[3], _PAIRS_PER_FLUSH, groups):
            if stop_check is not None:
                stop_check()
            yield evaluate(*(part[lo:hi] for part in spans))


def rasterize_band(prepared: list, rows: range, height: int, width: int, stop_check=None) -> SparseLayer:
    """The layer's pixels inside ``rows``, composited in drawing order.

    Work is flushed every few million (pixel, primitive) pairs, so memory
    stays bounded even for primitives larger than the frame. ``stop_check()``,
    when given, is called before each such chunk and may raise to stop (a frame
    of very wide lines takes seconds to minutes).
    """
    layer = SparseLayer.empty(height, width)
    pending, pending_size = [], 0
    for pairs in _band_pairs(prepared, rows, width, stop_check):
        pending.append(pairs)
        pending_size += len(pairs.pixels)
        if pending_size >= _PAIRS_PER_FLUSH:
            layer = _composite([_as_pairs(layer)] + pending, height, width)
            pending, pending_size = [], 0
    return _composite([_as_pairs(layer)] + pending, height, width) if pending else layer
