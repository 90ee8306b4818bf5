"""The coverage model written out in float64, every primitive on every pixel (docs/architecture.md).

Capsule of width w: coverage = clamp(0.5 - (distance - w/2), 0, 1), the
distance taken to the whole polyline (its nearest segment). Per-vertex width
and alpha factors are interpolated linearly along that nearest segment, at
the foot of the pixel centre (a tapered capsule). Rounded box
(signed distance s): stroke clamp(0.5 - (|s| - stroke/2), 0, 1), fill
clamp(0.5 - s, 0, 1) * fill alpha. Colours are premultiplied and composite
"over" in list order. Pixel centres sit at +0.5.

The renderers (float32, span- or tile-based) are compared with this
brute-force reference; ``random_display_list`` gives deterministic scenes
that use every primitive feature.
"""

import numpy as np
from trackoverlay.utils.draw.curves import control_points, flatten
from trackoverlay.utils.draw.display_list import Boxes, DisplayList, Polylines


def pixel_centres(height, width):
    """x and y of every pixel centre, float64 [H, W]."""
    y, x = np.mgrid[0:height, 0:width] + 0.5
    return x, y


def segment_distance(x, y, p0, p1):
    """Distance from each point to segment p0-p1, and the clamped parameter of its foot."""
    dx, dy = p1[0] - p0[0], p1[1] - p0[1]
    t = np.clip(((x - p0[0]) * dx + (y - p0[1]) * dy) / max(dx * dx + dy * dy, 1e-12), 0.0, 1.0)
    return np.hypot(x - p0[0] - t * dx, y - p0[1] - t * dy), t


def capsule_coverage(distance, width):
    return np.clip(0.5 - (distance - width / 2), 0.0, 1.0)


def rounded_rect_sdf(x, y, center, half, radius):
    """Signed distance to an axis-aligned rounded rectangle (negative inside)."""
    qx = np.abs(x - center[0]) - (half[0] - radius)
    qy = np.abs(y - center[1]) - (half[1] - radius)
    return np.hypot(np.maximum(qx, 0), np.maximum(qy, 0)) + np.minimum(np.maximum(qx, qy), 0) - radius


def dash_distance(arc, on, off):
    """Signed distance along the arc to the nearest dash (negative inside one)."""
    period = on + off
    phase = np.mod(arc, period)
    return np.where(phase <= on, -np.minimum(phase, on - phase), np.minimum(phase - on, period - phase))


def reference_polyline(x, y, lines: Polylines, index):
    """Premultiplied RGB [H, W, 3] and alpha [H, W] of one polyline of a batch."""
    vertices = lines.vertices[lines.offsets[index]:lines.offsets[index + 1]].astype(np.float64)
    lengths = np.hypot(*np.diff(vertices, axis=0).T)
    arc_starts = np.r_[0.0, np.cumsum(lengths)[:-1]]
    factors = np.ones((len(vertices), 2))
    for column, given in enumerate((lines.vertex_width, lines.vertex_alpha)):
        if given is not None:
            factors[:, column] = given[lines.offsets[index]:lines.offsets[index + 1]]
    nearest, arc, outside = np.full(x.shape, np.inf), np.zeros(x.shape), np.full(x.shape, np.inf)
    factor = np.ones(x.shape + (2,))
    for p0, p1, f0, f1, arc_start, length in zip(vertices[:-1], vertices[1:], factors[:-1], factors[1:], arc_starts,
                                                 lengths):
        distance, t = segment_distance(x, y, p0, p1)
        here = f0 + (f1 - f0) * t[..., None]
        inside = distance - float(lines.width[index]) / 2 * here[..., 0]
        deeper = inside < outside  # the segment whose (tapered) capsule holds the pixel deepest
        outside = np.where(deeper, inside, outside)
        nearest = np.where(deeper, distance, nearest)
        arc = np.where(deeper, arc_start + t * length, arc)
        factor = np.where(deeper[..., None], here, factor)
    half_width = float(lines.width[index]) / 2 * factor[..., 0]
    on, off = lines.dash[index].astype(np.float64)
    if off > 0:
        along = dash_distance(arc, on, off)
        outside = np.hypot(nearest, np.maximum(along, 0)) - half_width if lines.dash_round[index] \
            else np.maximum(outside, along)
    start, end = lines.color_start[index].astype(np.float64), lines.color_end[index].astype(np.float64)
    rgba = start + (end - start) * (arc / lengths.sum())[..., None]
    alpha = rgba[..., 3] * np.clip(0.5 - outside, 0.0, 1.0) * factor[..., 1]
    return rgba[..., :3] * alpha[..., None], alpha


def reference_box(x, y, batch: Boxes, index):
    """Premultiplied RGB and alpha of one box: stroke (or corner brackets) over fill."""
    center, half = batch.center[index].astype(np.float64), batch.half_size[index].astype(np.float64)
    signed = rounded_rect_sdf(x, y, center, half, float(batch.radius[index]))
    half_stroke = float(batch.stroke_width[index]) / 2
    stroke = np.clip(0.5 - (np.abs(signed) - half_stroke), 0.0, 1.0) if half_stroke > 0 else np.zeros(x.shape)
    bracket = float(batch.bracket[index])
    if bracket > 0:
        stroke *= np.clip(0.5 + np.abs(x - center[0]) - (half[0] - bracket), 0.0, 1.0) * \
            np.clip(0.5 + np.abs(y - center[1]) - (half[1] - bracket), 0.0, 1.0)
    stroke_rgba, fill_rgba = batch.stroke_color[index], batch.fill_color[index]
    stroke_alpha = stroke * stroke_rgba[3]
    under = (1 - stroke_alpha) * np.clip(0.5 - signed, 0.0, 1.0) * fill_rgba[3]
    color = stroke_rgba[:3] * stroke_alpha[..., None] + fill_rgba[:3] * under[..., None]
    return color, stroke_alpha + under


def reference_layer(display_list: DisplayList, height, width):
    """Brute-force premultiplied layer: every primitive on every pixel, composited over in order."""
    x, y = pixel_centres(height, width)
    color, alpha = np.zeros((height, width, 3)), np.zeros((height, width))
    for batch in display_list.layers:
        draw = reference_polyline if isinstance(batch, Polylines) else reference_box
        for index in range(batch.count):
            top_color, top_alpha = draw(x, y, batch, index)
            color = top_color + color * (1 - top_alpha[..., None])
            alpha = top_alpha + alpha * (1 - top_alpha)
    return color, alpha


def dense(layer):
    """A sparse layer as dense premultiplied RGB [H, W, 3] and alpha [H, W]."""
    color = np.zeros((layer.height * layer.width, 3), np.float32)
    alpha = np.zeros(layer.height * layer.width, np.float32)
    color[layer.pixels] = layer.color.T
    alpha[layer.pixels] = layer.alpha
    return color.reshape(layer.height, layer.width, 3), alpha.reshape(layer.height, layer.width)



# ------------------------------------------------------------- random scenes


def random_curves(rng, kind, count, height, width, tapered=False):
    """``count`` gentle Bézier curves (bend <= 0.5, chords 25..60 px) with random styles
    (``tapered``: random width and alpha factors per vertex too)."""
    start = rng.uniform((0, 0), (width, height), (count, 2))
    angle = rng.uniform(0, 2 * np.pi, count)
    end = start + rng.uniform(25, 60, (count, 1)) * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    controls = control_points(start, end, kind, rng.uniform(0.05, 0.5), rng.choice([-1.0, 1.0], count))
    vertices, offsets = flatten(controls)
    pattern = rng.integers(0, 3, count)  # solid, dashed, dotted
    dash = np.stack([np.where(pattern == 1, rng.uniform(3, 8, count), 0.0),
                     np.where(pattern > 0, rng.uniform(2, 6, count), 0.0)], axis=1)
    colors = rng.uniform((0, 0, 0, 0.3), (1, 1, 1, 1), (2, count, 4))
    vertex_width = vertex_alpha = None
    if tapered:
        vertex_width, vertex_alpha = rng.uniform((0.0, 0.0), (2.0, 1.0), (len(vertices), 2)).T
    return Polylines(vertices, offsets, rng.uniform(0.5, 3.5, count), colors[0], colors[1], dash,
                     (pattern == 2) | (rng.random(count) < 0.3), vertex_width, vertex_alpha)


def random_boxes(rng, count, height, width):
    """Boxes of random size, roundness, stroke, fill and brackets, some cut by the border."""
    half = rng.uniform(4, 20, (count, 2))
    shorter = half.min(axis=1)
    colors = rng.uniform((0, 0, 0, 0.2), (1, 1, 1, 1), (2, count, 4))
    colors[1, rng.random(count) < 0.3, 3] = 0.0  # some boxes without fill
    return Boxes(rng.uniform((-5, -5), (width + 5, height + 5), (count, 2)), half,
                 shorter * rng.uniform(0, 1, count), rng.uniform(0, 3, count) * (rng.random(count) < 0.85),
                 colors[0], colors[1], np.where(rng.random(count) < 0.4, shorter * rng.uniform(0.2, 0.8, count), 0))


def random_display_list(seed, height=72, width=96, tapered=False):
    """Overlapping semi-transparent curves (all kinds, dashes, gradients; ``tapered``: with
    per-vertex width and alpha factors) and boxes."""
    rng = np.random.default_rng(seed)
    curves = tuple(random_curves(rng, kind, 3, height, width, tapered)
                   for kind in ("straight", "quadratic", "cubic", "s_curve"))
    return DisplayList(curves[:2] + (random_boxes(rng, 4, height, width),) + curves[2:])
