"""Exact coverage of the CPU rasteriser, checked against the coverage model (docs/architecture.md).

Capsule of width w: coverage = clamp(0.5 - (distance - w/2), 0, 1).
Rounded box (signed distance s): stroke clamp(0.5 - (|s| - stroke/2), 0, 1),
fill clamp(0.5 - s, 0, 1) * fill alpha. Colours are premultiplied and
composite "over" in list order.

A brute-force reference written here (float64, every pixel, nearest segment
over the whole polyline) is compared with the engine (float32, span-based)
to 1e-4 on alpha and colour; single-primitive checks hold to 1e-5.
"""

import tracemalloc

import numpy as np
import pytest
from scenes import SCENES, boxes, flat_frame, polylines, textured_frame
from trackoverlay.utils.draw.curves import control_points, flatten
from trackoverlay.utils.draw.display_list import Boxes, DisplayList, Polylines
from trackoverlay.utils.draw.overlays import box_primitives
from trackoverlay.utils.draw.styles import BoxStyle
from trackoverlay.utils.raster import cpu_spans
from trackoverlay.utils.raster.cpu import CpuRenderer

REFERENCE_TOLERANCE = 1e-4  # engine (float32) vs brute-force reference (float64)
MODEL_TOLERANCE = 1e-5      # one primitive vs its closed-form coverage


@pytest.fixture(scope="module")
def renderer():
    cpu = CpuRenderer(workers=2)
    yield cpu
    cpu.close()


# ----------------------------------------------------------------- reference


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
    nearest, arc = np.full(x.shape, np.inf), np.zeros(x.shape)
    for p0, p1, arc_start, length in zip(vertices[:-1], vertices[1:], arc_starts, lengths):
        distance, t = segment_distance(x, y, p0, p1)
        closer = distance < nearest
        nearest = np.where(closer, distance, nearest)
        arc = np.where(closer, arc_start + t * length, arc)
    half_width = float(lines.width[index]) / 2
    outside = nearest - half_width
    on, off = lines.dash[index].astype(np.float64)
    if off > 0:
        along = dash_distance(arc, on, off)
        outside = np.hypot(nearest, np.maximum(along, 0)) - half_width if lines.dash_round[index] \
            else np.maximum(outside, along)
    start, end = lines.color_start[index].astype(np.float64), lines.color_end[index].astype(np.float64)
    rgba = start + (end - start) * (arc / lengths.sum())[..., None]
    alpha = rgba[..., 3] * np.clip(0.5 - outside, 0.0, 1.0)
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


def engine_alpha(renderer, display_list, height=48, width=64):
    return dense(renderer.rasterize(display_list, height, width))[1]


# ------------------------------------------------------------- random scenes


def random_curves(rng, kind, count, height, width):
    """``count`` gentle Bézier curves (bend <= 0.5, chords 25..60 px) with random styles."""
    start = rng.uniform((0, 0), (width, height), (count, 2))
    angle = rng.uniform(0, 2 * np.pi, count)
    end = start + rng.uniform(25, 60, (count, 1)) * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    controls = control_points(start, end, kind, rng.uniform(0.05, 0.5), rng.choice([-1.0, 1.0], count))
    vertices, offsets = flatten(controls)
    pattern = rng.integers(0, 3, count)  # solid, dashed, dotted
    dash = np.stack([np.where(pattern == 1, rng.uniform(3, 8, count), 0.0),
                     np.where(pattern > 0, rng.uniform(2, 6, count), 0.0)], axis=1)
    colors = rng.uniform((0, 0, 0, 0.3), (1, 1, 1, 1), (2, count, 4))
    return Polylines(vertices, offsets, rng.uniform(0.5, 3.5, count), colors[0], colors[1], dash,
                     (pattern == 2) | (rng.random(count) < 0.3))


def random_boxes(rng, count, height, width):
    """Boxes of random size, roundness, stroke, fill and brackets, some cut by the border."""
    half = rng.uniform(4, 20, (count, 2))
    shorter = half.min(axis=1)
    colors = rng.uniform((0, 0, 0, 0.2), (1, 1, 1, 1), (2, count, 4))
    colors[1, rng.random(count) < 0.3, 3] = 0.0  # some boxes without fill
    return Boxes(rng.uniform((-5, -5), (width + 5, height + 5), (count, 2)), half,
                 shorter * rng.uniform(0, 1, count), rng.uniform(0, 3, count) * (rng.random(count) < 0.85),
                 colors[0], colors[1], np.where(rng.random(count) < 0.4, shorter * rng.uniform(0.2, 0.8, count), 0))


def random_scene(seed, height=72, width=96):
    """Overlapping semi-transparent curves (all kinds, dashes, gradients) and boxes."""
    rng = np.random.default_rng(seed)
    curves = tuple(random_curves(rng, kind, 3, height, width) for kind in ("straight", "quadratic", "cubic", "s_curve"))
    return DisplayList(curves[:2] + (random_boxes(rng, 4, height, width),) + curves[2:])


@pytest.mark.parametrize("seed", range(6))
def test_engine_matches_bruteforce_reference(renderer, seed):
    display_list = random_scene(seed)
    color, alpha = dense(renderer.rasterize(display_list, 72, 96))
    ref_color, ref_alpha = reference_layer(display_list, 72, 96)
    assert np.count_nonzero(ref_alpha > 0) > 0.15 * ref_alpha.size  # the scene is not empty
    assert np.abs(alpha - ref_alpha).max() <= REFERENCE_TOLERANCE
    assert np.abs(color - ref_color).max() <= REFERENCE_TOLERANCE
    frame = textured_frame(72, 96, np.float32)
    expected = ref_color + frame * (1 - ref_alpha[..., None])
    assert np.abs(renderer.render(frame, display_list) - expected).max() <= REFERENCE_TOLERANCE


# ------------------------------------------------------------------ capsules


def test_aligned_1px_line_covers_exactly_one_pixel_row(renderer):
    alpha = engine_alpha(renderer, DisplayList((polylines([[(3.5, 10.5), (40.5, 10.5)]], width=1.0),)))
    expected = np.zeros((48, 64), np.float32)
    expected[10, 3:41] = 1.0
    np.testing.assert_array_equal(alpha, expected)


@pytest.mark.parametrize("width", [0.5, 1.0, 2.0, 7.3])
@pytest.mark.parametrize("ends", [[(10.3, 20.7), (50.8, 33.1)], [(31.9, 5.2), (33.4, 41.6)],
                                  [(20.25, 24.5), (20.25, 24.5)]],
                         ids=["shallow", "steep", "dot"])
def test_capsule_coverage_is_the_model_on_every_pixel(renderer, width, ends):
    alpha = engine_alpha(renderer, DisplayList((polylines([ends], width=width),)))
    distance, _ = segment_distance(*pixel_centres(48, 64), np.array(ends[0]), np.array(ends[1]))
    np.testing.assert_allclose(alpha, capsule_coverage(distance, width), rtol=0, atol=MODEL_TOLERANCE)


@pytest.mark.parametrize("width, line_y, row, expected", [
    (1.0, 10.5, 10, 1.0),   # pixel centre on the stroke
    (1.0, 10.5, 11, 0.0),   # 0.5 px outside the edge
    (1.0, 10.25, 10, 0.75),
    (1.0, 10.25, 9, 0.25),
    (2.0, 20.5, 21, 0.5),   # pixel centre on the edge: half coverage
    (2.0, 20.5, 19, 0.5),
    (3.0, 20.5, 23, 0.0),   # 1.5 px outside the edge
    (0.5, 10.5, 10, 0.75),  # thinner than a pixel: partial at the centre
    (7.3, 30.5, 34, 0.15),
])
def test_coverage_at_known_distances(renderer, width, line_y, row, expected):
    alpha = engine_alpha(renderer, DisplayList((polylines([[(5.0, line_y), (60.0, line_y)]], width=width),)))
    np.testing.assert_allclose(alpha[row, 20:40], expected, rtol=0, atol=MODEL_TOLERANCE)


def test_diagonal_1px_line_is_antialiased(renderer):
    alpha = engine_alpha(renderer, DisplayList((polylines([[(4.0, 6.0), (58.0, 37.0)]], width=1.0),)))
    partial = (alpha > 0.01) & (alpha < 0.99)
    assert np.all(partial[:, 10:50].sum(axis=0) >= 2)  # every column has soft edge pixels
    assert len(np.unique(np.round(alpha[partial], 3))) > 20


# --------------------------------------------------------------------- boxes


def test_round_corners_lower_the_corner_alpha(renderer):
    square, rounded = (engine_alpha(renderer, DisplayList((boxes([32, 24], [15, 10], radius=r,
                                                                 fill_color=(1, 1, 1, 1)),)))
                       for r in (0.0, 8.0))
    assert square[14, 17] == 1.0 and rounded[14, 17] == 0.0  # the top-left corner pixel
    assert np.all(rounded <= square) and rounded.sum() < square.sum() - 20
    np.testing.assert_array_equal(rounded[24, 10:54], square[24, 10:54])  # straight edges unchanged


@pytest.mark.parametrize("stroke, radius, center", [(1.0, 0.0, (32, 24)), (2.0, 4.0, (31.7, 24.2)),
                                                    (3.5, 9.0, (32.3, 23.6)), (0.6, 2.5, (30.1, 25.9))])
def test_box_stroke_coverage_is_the_model(renderer, stroke, radius, center):
    alpha = engine_alpha(renderer, DisplayList((boxes(center, [20, 12], radius=radius, stroke_width=stroke),)))
    signed = rounded_rect_sdf(*pixel_centres(48, 64), center, (20, 12), radius)
    expected = np.clip(0.5 - (np.abs(signed) - stroke / 2), 0, 1)
    np.testing.assert_allclose(alpha, expected, rtol=0, atol=MODEL_TOLERANCE)


@pytest.mark.parametrize("radius", [0.0, 5.5, 10.0])
def test_box_fill_coverage_is_the_model(renderer, radius):
    alpha = engine_alpha(renderer, DisplayList((boxes((31.3, 24.8), [16, 10], radius=radius,
                                                      fill_color=(0.2, 0.9, 0.4, 0.4)),)))
    signed = rounded_rect_sdf(*pixel_centres(48, 64), (31.3, 24.8), (16, 10), radius)
    np.testing.assert_allclose(alpha, np.clip(0.5 - signed, 0, 1) * 0.4, rtol=0, atol=MODEL_TOLERANCE)


@pytest.mark.parametrize("fill, background, expected", [("#FFFFFF", 0.2, 0.3 + 0.2 * 0.7),
                                                         ("#000000", 0.8, 0.8 * 0.7)], ids=["white", "black"])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_fill_blends_towards_its_colour(renderer, fill, background, expected, dtype):
    style = BoxStyle(stroke_width=0.0, fill_color=fill, fill_opacity=0.3)
    frame = flat_frame(48, 64, (background,) * 3, dtype)
    box = box_primitives(np.array([[32.0, 24.0]]), np.array([[30.0, 20.0]]), [0], style)
    out = renderer.render(frame, DisplayList((box,)))
    inside = out[16:32, 19:45]
    if dtype == np.uint8:
        np.testing.assert_array_equal(inside, np.round(255 * expected))
    else:
        np.testing.assert_allclose(inside, expected, rtol=0, atol=1e-6)
    lighter = (out.astype(float) >= frame).all() and (out.astype(float) > frame).any()
    darker = (out.astype(float) <= frame).all() and (out.astype(float) < frame).any()
    assert lighter if fill == "#FFFFFF" else darker


@pytest.mark.parametrize("opacity", [0.3, 0.55, 0.77])
def test_uint8_blend_rounds_to_nearest(renderer, opacity):
    frame = np.repeat(np.arange(256, dtype=np.uint8).reshape(16, 16, 1), 3, axis=2)
    out = renderer.render(frame, DisplayList((boxes([8, 8], [20, 20], fill_color=(1, 1, 1, opacity)),)))
    exact = opacity * 255 + frame.astype(np.float64) * (1 - opacity)
    clear = np.abs(exact - np.floor(exact) - 0.5) > 1e-3  # ties may go either way in float32
    expected = np.floor(exact + 0.5)
    assert np.any(expected[clear] != np.floor(exact[clear]))  # truncation would fail here
    np.testing.assert_array_equal(out[clear], expected[clear])


def test_float32_frames_are_not_quantised(renderer):
    frame = flat_frame(16, 16, (0.123456, 0.5, 0.987654), np.float32)
    out = renderer.render(frame, DisplayList((boxes([8, 8], [20, 20], fill_color=(1, 1, 1, 0.3)),)))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, 0.3 + frame * 0.7, rtol=0, atol=1e-7)


# -------------------------------------------------------- joints and ordering


def test_semi_transparent_polyline_joints_composite_once(renderer):
    zigzag = [(4, 40), (16, 8), (28, 38), (36, 10), (50, 36), (60, 30)]
    lines = polylines([zigzag], width=6.0, color=(1, 1, 1, 0.5))
    alpha = engine_alpha(renderer, DisplayList((lines,)))
    assert alpha.max() <= 0.5 + 1e-7
    for x, y in zigzag[1:-1]:
        assert alpha[int(y), int(x)] == pytest.approx(0.5)
    _, expected = reference_polyline(*pixel_centres(48, 64), lines, 0)
    np.testing.assert_allclose(alpha, expected, rtol=0, atol=REFERENCE_TOLERANCE)


SHARP_POLYLINES = {
    "hairpin": [(0.0, 0.0), (16.0, 2.0), (0.125, 0.0)],
    "right_angle_short_leg": [(4.0, 10.0), (40.0, 10.0), (40.0, 12.0), (4.0, 30.0)],
    "self_crossing_loop": [(6.0, 40.0), (56.0, 8.0), (58.0, 40.0), (4.0, 10.0)],
    "tight_spiral": [(32 + r * np.cos(a), 24 + r * np.sin(a)) for r, a in zip(np.linspace(3, 20, 40), np.linspace(0, 9, 40))],
}


@pytest.mark.parametrize("name", sorted(SHARP_POLYLINES))
@pytest.mark.parametrize("width", [1.0, 7.0])
def test_sharp_and_self_crossing_polylines_use_the_nearest_segment(renderer, name, width):
    """Each pixel takes its distance to the whole polyline, even where bisectors can't split it."""
    lines = polylines([SHARP_POLYLINES[name]], width=width, color=(1, 0.5, 0.2, 0.6), dash=(5.0, 3.0))
    color, alpha = dense(renderer.rasterize(DisplayList((lines,)), 48, 64))
    ref_color, ref_alpha = reference_polyline(*pixel_centres(48, 64), lines, 0)
    np.testing.assert_allclose(alpha, ref_alpha, rtol=0, atol=REFERENCE_TOLERANCE)
    np.testing.assert_allclose(color, ref_color, rtol=0, atol=REFERENCE_TOLERANCE)


def test_separate_polylines_do_composite_over_each_other(renderer):
    lines = polylines([[(4, 24.5), (60, 24.5)], [(32.5, 4), (32.5, 44)]], width=4.0, color=(1, 1, 1, 0.5))
    alpha = engine_alpha(renderer, DisplayList((lines,)))
    assert alpha[24, 32] == pytest.approx(0.75) and alpha[24, 10] == pytest.approx(0.5)


RED, BLUE = (1.0, 0.0, 0.0), (0.0, 0.0, 1.0)
HORIZONTAL, VERTICAL = [(4, 24.5), (60, 24.5)], [(32.5, 4), (32.5, 44)]


@pytest.mark.parametrize("opacity, expected", [(1.0, BLUE), (0.6, (0.24, 0.0, 0.6))])
@pytest.mark.parametrize("layout", ["one batch", "two layers"])
def test_later_primitives_are_on_top(renderer, opacity, expected, layout):
    red = polylines([HORIZONTAL], width=5.0, color=RED + (opacity,))
    blue = polylines([VERTICAL], width=5.0, color=BLUE + (opacity,))
    if layout == "one batch":
        both = Polylines(np.concatenate([red.vertices, blue.vertices]), [0, 2, 4], [5.0, 5.0],
                         np.concatenate([red.color_start, blue.color_start]),
                         np.concatenate([red.color_end, blue.color_end]), np.zeros((2, 2)), [False, False])
        display_list = DisplayList((both,))
    else:
        display_list = DisplayList((red,)) + DisplayList((blue,))
    out = renderer.render(flat_frame(48, 64, (0, 0, 0), np.float32), display_list)
    np.testing.assert_allclose(out[24, 32], expected, rtol=0, atol=1e-6)


def test_layer_export_blends_back_to_the_composite(renderer):
    display_list = random_scene(11)
    rgb, alpha = renderer.render_layer(display_list, 72, 96)
    assert rgb.dtype == alpha.dtype == np.float32 and rgb.min() >= 0 and rgb.max() <= 1
    premultiplied = rgb * alpha[..., None]
    for background in (0.0, 1.0):
        frame = flat_frame(72, 96, (background,) * 3, np.float32)
        expected = premultiplied + background * (1 - alpha[..., None])
        np.testing.assert_allclose(renderer.render(frame, display_list), expected, rtol=0, atol=1e-5)


# -------------------------------------------------------------------- frames


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_empty_display_list_returns_an_equal_new_frame(renderer, dtype):
    frame = textured_frame(48, 64, dtype)
    out = renderer.render(frame, DisplayList())
    assert out is not frame and not np.shares_memory(out, frame) and out.dtype == dtype
    np.testing.assert_array_equal(out, frame)
    rgb, alpha = renderer.render_layer(DisplayList(), 48, 64)
    assert not rgb.any() and not alpha.any()


@pytest.mark.parametrize("scene", ["seed_scene", "float32_frame"])
def test_render_never_modifies_its_inputs(renderer, scene):
    frame, display_list = SCENES[scene]()
    before = frame.copy()
    out = renderer.render(frame, display_list)
    np.testing.assert_array_equal(frame, before)
    assert out.dtype == frame.dtype and out.shape == frame.shape and np.any(out != frame)


@pytest.mark.parametrize("frame, error, message", [
    ([[[0, 0, 0]]], TypeError, "frame must be a NumPy array"),
    (np.zeros((8, 8), np.uint8), ValueError, r"frame must have shape \[H, W, 3\], got \[8, 8\]"),
    (np.zeros((8, 8, 4), np.uint8), ValueError, r"frame must have shape \[H, W, 3\], got \[8, 8, 4\]"),
    (np.zeros((8, 8, 3), np.float64), ValueError, "frame dtype must be uint8 or float32, got float64"),
    (np.zeros((8, 8, 3), np.int32), ValueError, "frame dtype must be uint8 or float32, got int32"),
    (np.zeros((0, 8, 3), np.uint8), ValueError, r"frame is empty \(0x8 pixels\)"),
])
def test_bad_frames_raise_clear_errors(renderer, frame, error, message):
    with pytest.raises(error, match=message):
        renderer.render(frame, DisplayList())


@pytest.mark.parametrize("out, message", [
    (np.zeros((8, 8, 3), np.float32), r"out must be a C-contiguous uint8 array of shape \[8, 8, 3\]"),
    (np.zeros((8, 9, 3), np.uint8), r"out must be a C-contiguous uint8 array of shape \[8, 8, 3\]"),
])
def test_bad_out_buffers_raise_clear_errors(renderer, out, message):
    with pytest.raises(ValueError, match=message):
        renderer.render(np.zeros((8, 8, 3), np.uint8), DisplayList(), out=out)


def test_out_buffer_is_filled_and_returned(renderer):
    frame, display_list = SCENES["knn_straight"]()
    out = np.zeros_like(frame)
    assert renderer.render(frame, display_list, out=out) is out
    np.testing.assert_array_equal(out, renderer.render(frame, display_list))


# ----------------------------------------------------- bands, threads, memory


def test_workers_and_bands_give_bit_identical_results():
    display_list = random_scene(21, height=256, width=96)
    frame = textured_frame(256, 96)
    whole = cpu_spans.rasterize_band(cpu_spans.prepare(display_list), range(0, 256), 256, 96)
    results = []
    for workers in (1, 2):
        cpu = CpuRenderer(workers=workers)
        results.append((cpu.render(frame, display_list), cpu.render(frame.astype(np.float32) / 255, display_list),
                        cpu.rasterize(display_list, 256, 96)))
        cpu.close()
    (one_u8, one_f32, one_layer), (two_u8, two_f32, two_layer) = results
    np.testing.assert_array_equal(one_u8, two_u8)
    np.testing.assert_array_equal(one_f32, two_f32)
    for layer in (one_layer, two_layer):
        for field in ("pixels", "color", "alpha"):
            np.testing.assert_array_equal(getattr(layer, field), getattr(whole, field))


def test_small_flushes_give_the_same_layer(renderer, monkeypatch):
    display_list = random_scene(5)
    color, alpha = dense(renderer.rasterize(display_list, 72, 96))
    monkeypatch.setattr(cpu_spans, "_PAIRS_PER_FLUSH", 97)
    small_color, small_alpha = dense(renderer.rasterize(display_list, 72, 96))
    np.testing.assert_allclose(small_alpha, alpha, rtol=0, atol=1e-6)
    np.testing.assert_allclose(small_color, color, rtol=0, atol=1e-6)


def test_primitive_much_larger_than_the_frame_uses_bounded_memory(renderer):
    huge = DisplayList((polylines([[(-3000.0, -2000.0), (3000.0, 2500.0)]], width=5000.0, color=(0.2, 0.6, 1.0, 1.0)),
                        boxes([32, 24], [2500, 2500], radius=800.0, stroke_width=5000.0,
                              stroke_color=(1.0, 1.0, 1.0, 0.5))))
    frame = flat_frame(48, 64, (0, 0, 0), np.float32)
    tracemalloc.start()
    try:
        out = renderer.render(frame, huge)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20  # a few MB; the primitives cover ~10^7..10^8 pixels off-frame
    np.testing.assert_allclose(out, np.broadcast_to([0.6, 0.8, 1.0], out.shape), rtol=0, atol=1e-6)
