"""Exact coverage on every backend, checked against the coverage model (coverage_reference.py).

Each test takes the ``renderer`` fixture and runs once per available backend
(CPU, and GPU where CuPy can use one). A brute-force float64 reference
(every pixel, nearest segment over the whole polyline) is compared with the
engine (float32) to 1e-4 on alpha and colour; single-primitive checks hold
to 1e-5 against their closed-form coverage.
"""

import threading
import tracemalloc

import numpy as np
import pytest
from coverage_reference import (
    capsule_coverage,
    dense,
    pixel_centres,
    random_display_list,
    reference_layer,
    reference_polyline,
    rounded_rect_sdf,
    segment_distance,
)
from scenes import SCENES, boxes, flat_frame, polylines, textured_frame
from trackoverlay.utils.draw.display_list import DisplayList, Polylines
from trackoverlay.utils.draw.overlays import box_primitives
from trackoverlay.utils.draw.styles import BoxStyle
from trackoverlay.utils.raster import cpu, cpu_spans
from trackoverlay.utils.raster.cpu import CpuRenderer

REFERENCE_TOLERANCE = 1e-4  # engine (float32) vs brute-force reference (float64)
MODEL_TOLERANCE = 1e-5      # one primitive vs its closed-form coverage


def engine_alpha(renderer, display_list, height=48, width=64):
    return dense(renderer.rasterize(display_list, height, width))[1]


@pytest.mark.parametrize("seed", range(6))
def test_engine_matches_bruteforce_reference(renderer, seed):
    display_list = random_display_list(seed)
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


HOLLOW_HALVES = (0.0, 0.5, 0.75, 1.0, 1.5, 2.5)
HOLLOW_STROKES = (0.5, 1.0, 2.0, 3.0)
HOLLOW_ROUNDNESS = (0.0, 0.5, 1.0)
HOLLOW_OFFSETS = ((0.0, 0.0), (0.25, 0.5), (0.5, 0.25), (0.7, 0.7))
CELL = 12  # px per box: wider than the largest box's reach (2 * (2.5 + 3.0 / 2 + 0.5))


def tiny_hollow_boxes():
    """Unfilled boxes of every combination above, each alone in its own cell: (Boxes, cell origins [Q, 2]).

    Half-sizes from 0 to 2.5 px on each axis, so the stroke often covers the
    whole interior; corner radius 0..1 of the shorter half-side; centres at
    sub-pixel offsets (0.5 puts the hollow's edge exactly on a pixel centre).
    The stroke is semi-transparent, so a pixel drawn twice shows in alpha.
    """
    combos = [(hw, hh, stroke, roundness, offset) for hw in HOLLOW_HALVES for hh in HOLLOW_HALVES
              for stroke in HOLLOW_STROKES for roundness in HOLLOW_ROUNDNESS for offset in HOLLOW_OFFSETS]
    columns = 48
    index = np.arange(len(combos))
    origins = np.stack([index % columns, index // columns], axis=1) * CELL
    half = np.array([combo[:2] for combo in combos], np.float32)
    centers = origins + CELL / 2 + np.array([combo[4] for combo in combos], np.float32)
    radius = half.min(axis=1) * np.array([combo[3] for combo in combos], np.float32)
    return boxes(centers, half, radius=radius, stroke_width=np.array([combo[2] for combo in combos]),
                 stroke_color=(1.0, 0.8, 0.2, 0.6)), origins


def test_tiny_hollow_boxes_match_the_model(renderer):
    """The hollow-middle shortcut skips only pixels the stroke cannot reach, and no pixel twice."""
    batch, origins = tiny_hollow_boxes()
    height, width = int(origins[:, 1].max()) + CELL, int(origins[:, 0].max()) + CELL
    alpha = engine_alpha(renderer, DisplayList((batch,)), height, width)
    local = np.arange(CELL) + 0.5
    x = origins[:, 0, None, None] + local[None, None, :]
    y = origins[:, 1, None, None] + local[None, :, None]
    center, half = batch.center.astype(np.float64), batch.half_size.astype(np.float64)
    signed = rounded_rect_sdf(x, y, center.T[:, :, None, None], half.T[:, :, None, None],
                              batch.radius.astype(np.float64)[:, None, None])
    expected = 0.6 * np.clip(0.5 - (np.abs(signed) - batch.stroke_width[:, None, None] / 2), 0, 1)
    rows = origins[:, 1, None] + np.arange(CELL)
    cols = origins[:, 0, None] + np.arange(CELL)
    got = alpha[rows[:, :, None], cols[:, None, :]]
    worst = np.abs(got - expected).max(axis=(1, 2))
    bad = np.flatnonzero(worst > MODEL_TOLERANCE)
    assert not len(bad), (f"{len(bad)} of {len(worst)} tiny hollow boxes differ from the model by up to "
                          f"{worst.max():.3f}; first: center {batch.center[bad[0]].tolist()}, half "
                          f"{batch.half_size[bad[0]].tolist()}, radius {float(batch.radius[bad[0]])}, "
                          f"stroke {float(batch.stroke_width[bad[0]])}")
    assert np.count_nonzero(alpha) == np.count_nonzero(got)  # nothing drawn outside the boxes' cells


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


def test_a_pixel_equally_deep_in_two_segments_takes_the_first(renderer):
    """Out and back along one row: every pixel ties between the two segments; the first one's arc (its
    gradient colour) wins, as in the coverage model."""
    lines = polylines([[(4.0, 20.0), (40.0, 20.0), (4.0, 20.0)]], width=6.0, color=(1, 0, 0, 1),
                      color_end=(0, 0, 1, 1))
    color, alpha = dense(renderer.rasterize(DisplayList((lines,)), 40, 48))
    ref_color, ref_alpha = reference_polyline(*pixel_centres(40, 48), lines, 0)
    np.testing.assert_allclose(alpha, ref_alpha, rtol=0, atol=REFERENCE_TOLERANCE)
    np.testing.assert_allclose(color, ref_color, rtol=0, atol=REFERENCE_TOLERANCE)
    assert color[20, 10, 0] > 0.8 and color[20, 10, 2] < 0.2  # arc 6 of 72 (the way back would say 66)


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


def test_deep_stacks_composite_in_drawing_order(renderer):
    """Seven half-transparent boxes of different colours over one pixel, and a box over part of them: each
    pixel is the "over" of its own stack, bottom to top, however deep."""
    colors = np.random.default_rng(4).random((7, 3)).astype(np.float32)
    stack = DisplayList(tuple(boxes([16, 12], [6 + i, 5 + i], fill_color=(*colors[i], 0.5)) for i in range(7)))
    stack += DisplayList((boxes([26, 12], [2, 2], fill_color=(1.0, 1.0, 1.0, 0.25)),))  # over boxes 5, 6 alone
    out = renderer.render(flat_frame(24, 32, (0, 0, 0), np.float32), stack)
    expected = np.zeros(3, np.float32)
    for color in colors:
        expected = color * 0.5 + expected * 0.5
    np.testing.assert_allclose(out[12, 16], expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(out[12, 26], 0.25 + (colors[6] * 0.5 + colors[5] * 0.25) * 0.75, rtol=0, atol=1e-6)


@pytest.mark.parametrize("far", [9, 2**58, 2**61])
def test_the_cpu_composite_sorts_by_pixel_then_drawing_order_at_any_pixel_index(far):
    """Contributions in drawing order over shared pixels come out per pixel, ascending, each pixel the "over" of
    its own stack. The pixel index and the contribution's place share one 64-bit sort key while they fit; past
    that (pixels 2**61 apart here) the pixels alone are sorted stably, to the same layer."""
    pixels = np.array([7, 3, far, 3, 7, 3, 1], np.int64)
    alpha = np.array([0.5, 0.25, 1.0, 0.5, 0.75, 1.0, 0.125], np.float32)
    gray = np.array([0.2, 0.4, 0.6, 0.8, 1.0, 0.1, 0.3], np.float32)
    pairs = cpu_spans._Pairs(pixels, np.tile(gray * alpha, (3, 1)), alpha)
    layer = cpu_spans._composite([pairs], 1, far + 1)

    def over(stack):  # bottom to top
        color = total = 0.0
        for index in stack:
            color = gray[index] * alpha[index] + color * (1 - alpha[index])
            total = alpha[index] + total * (1 - alpha[index])
        return color, total

    expected = {pixel: over([i for i in range(len(pixels)) if pixels[i] == pixel]) for pixel in np.unique(pixels)}
    assert layer.pixels.tolist() == sorted(expected)
    np.testing.assert_allclose(layer.color[0], [expected[p][0] for p in layer.pixels], rtol=0, atol=1e-7)
    np.testing.assert_allclose(layer.alpha, [expected[p][1] for p in layer.pixels], rtol=0, atol=1e-7)


def test_the_cpu_composite_takes_32_bit_pixel_indices_as_64_bit_ones():
    """The sort key is made in 64 bits whatever integer type the pixels come in (32 bits would overflow)."""
    pixels = np.arange(300_000, dtype=np.int64)[::-1] % 70_000
    alpha = np.linspace(0.1, 0.9, len(pixels), dtype=np.float32)
    color = np.tile(alpha * 0.5, (3, 1))
    wide, narrow = (cpu_spans._composite([cpu_spans._Pairs(pixels.astype(dtype), color, alpha)], 1, 70_000)
                    for dtype in (np.int64, np.int32))
    assert narrow.pixels.tolist() == wide.pixels.tolist() == list(range(70_000))
    np.testing.assert_array_equal(narrow.color, wide.color)
    np.testing.assert_array_equal(narrow.alpha, wide.alpha)


def test_layer_export_blends_back_to_the_composite(renderer):
    display_list = random_display_list(11)
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


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("layout", ["Fortran order", "mirrored view"])
def test_frames_of_any_memory_layout_are_drawn_alike(renderer, dtype, layout):
    frame, display_list = SCENES["seed_scene"]()
    frame = np.asfortranarray(frame.astype(dtype)) if layout == "Fortran order" else frame.astype(dtype)[:, ::-1]
    np.testing.assert_array_equal(renderer.render(frame, display_list),
                                  renderer.render(np.ascontiguousarray(frame), display_list))


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
    display_list = random_display_list(21, height=256, width=96)
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


@pytest.mark.parametrize("broadcast", [False, True], ids=["a-frame-each", "one-frame-for-all"])
def test_frames_drawn_at_once_match_frames_drawn_one_at_a_time(broadcast):
    """A batch drawn several frames at once (one band each) is bit for bit the batch drawn a frame at a time
    in bands, layers included; progress comes in order, on the caller's thread."""
    overlays = [random_display_list(seed, height=200, width=96) for seed in range(7)]
    frames = np.stack([textured_frame(200, 96)] * (1 if broadcast else 7))
    results, calls = [], []
    for at_once in (1, 3):
        cpu = CpuRenderer(workers=4, frames_at_once=at_once)
        out = np.zeros((7, 200, 96, 3), np.uint8)
        layers = (np.zeros((7, 200, 96, 3), np.float32), np.zeros((7, 200, 96), np.float32))
        cpu.render_frames(frames, overlays, out, lambda done, total, at_once=at_once: calls.append(
            (at_once, done, total, threading.current_thread() is threading.main_thread())), layers=layers)
        cpu.close()
        results.append((out, *layers))
    assert cpu.frames_at_once == 3
    for one, many in zip(*results):
        np.testing.assert_array_equal(one, many)
    assert calls == [(at_once, done, 7, True) for at_once in (1, 3) for done in range(1, 8)]
    assert results[0][0].std(axis=(1, 2, 3)).min() > 0 and not np.array_equal(results[0][0][0], results[0][0][1])


def test_frames_needing_much_memory_are_drawn_alone(monkeypatch):
    """A frame over the working-memory bound of frames drawn at once waits for the others and is drawn by
    itself (in bands); the picture is the same."""
    overlays = [random_display_list(seed, height=200, width=96) for seed in range(6)]
    frames = np.stack([textured_frame(200, 96)] * 6)
    expected = CpuRenderer(workers=4, frames_at_once=1).render_frames(frames, overlays, np.zeros_like(frames))
    heavy = {id(overlays[3]), id(overlays[5])}
    monkeypatch.setattr(cpu, "candidate_pixels", lambda display_list: 1e12 if id(display_list) in heavy else 1.0)
    heavy_prepared, first_two, third, active, overlapping, kept = set(), set(), set(), {}, [], []
    together, passed = threading.Barrier(2, timeout=10), threading.Event()
    lock = threading.Lock()
    band, prepare = cpu.rasterize_band, cpu.prepare

    def tagged(display_list):
        prepared = prepare(display_list)
        kept.append(prepared)  # alive, so that no later list takes its id
        if id(display_list) in heavy:
            heavy_prepared.add(id(prepared))
        if display_list is overlays[0] or display_list is overlays[1]:
            first_two.add(id(prepared))
        if display_list is overlays[2]:
            third.add(id(prepared))
        return prepared

    def watched(prepared, rows, height, width, stop_check=None):
        with lock:
            active[id(prepared)] = active.get(id(prepared), 0) + 1
            overlapping.append((id(prepared) in heavy_prepared, len(active)))
        try:
            if id(prepared) in first_two:
                together.wait()  # frames 0 and 1 pass only if they are drawn at once
                passed.set()
            elif id(prepared) in third:  # holds its thread, so a heavy frame cannot take frame 1's share first
                passed.wait(timeout=10)
            return band(prepared, rows, height, width, stop_check)
        finally:
            with lock:
                active[id(prepared)] -= 1
                if not active[id(prepared)]:
                    del active[id(prepared)]

    monkeypatch.setattr(cpu, "prepare", tagged)
    monkeypatch.setattr(cpu, "rasterize_band", watched)
    renderer = CpuRenderer(workers=4, frames_at_once=3)
    out = renderer.render_frames(frames, overlays, np.zeros_like(frames))
    renderer.close()
    np.testing.assert_array_equal(out, expected)
    assert len(heavy_prepared) == 2 and len(first_two) == 2
    assert [count for is_heavy, count in overlapping if is_heavy] == [1, 1]  # each heavy frame alone


def test_an_interrupt_while_frames_are_drawn_at_once_stops_them_all():
    overlays = [random_display_list(seed, height=64, width=64) for seed in range(40)]
    frames = np.stack([textured_frame(64, 64)] * 40)
    cpu = CpuRenderer(workers=4, frames_at_once=4)
    drawn = []

    def progress(done, total):
        drawn.append(done)
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cpu.render_frames(frames, overlays, np.zeros_like(frames), progress)
    cpu.close()
    assert drawn == [1, 2, 3]
    assert not [t for t in threading.enumerate() if t.name.startswith("trackoverlay-raster")]


class Stop(Exception):
    pass


@pytest.mark.parametrize("frames_at_once", [1, 3])
def test_a_stop_check_stops_a_frame_between_chunks(monkeypatch, frames_at_once):
    """A frame of very wide lines takes minutes (640x360, 100 curved links 1600 px wide: 139 s) and an interrupt
    used to wait for it. The renderer's stop check runs before each chunk of a few million pixels (a wide curve
    is one chunk: its pixels keep their nearest segment), on the drawing threads, and its exception ends the
    run; a check that never raises changes no pixel."""
    monkeypatch.setattr(cpu_spans, "_PAIRS_PER_FLUSH", 300)  # many chunks in a small frame
    arc = np.stack([32 + 20 * np.cos(np.linspace(0, 3, 30)), 32 + 20 * np.sin(np.linspace(0, 3, 30))], axis=1)
    overlays = [DisplayList((polylines([arc + shift + turn for turn in range(12)], width=24.0),))
                for shift in range(6)]
    frames = np.stack([textured_frame(64, 64)] * 6)
    calls = []

    def counting():
        calls.append(threading.current_thread().name)

    plain = CpuRenderer(workers=4, frames_at_once=frames_at_once)
    checked = CpuRenderer(workers=4, frames_at_once=frames_at_once, stop_check=counting)
    expected = plain.render_frames(frames, overlays, np.zeros_like(frames))
    np.testing.assert_array_equal(checked.render_frames(frames, overlays, np.zeros_like(frames)), expected)
    assert len(calls) > 10 * len(frames)  # checked many times within each frame

    def stop():  # as ComfyUI's interrupt flag: once set, every thread's next check raises
        calls.append("stop")
        if calls.count("stop") >= 3:
            raise Stop

    stopping = CpuRenderer(workers=4, frames_at_once=frames_at_once, stop_check=stop)
    drawn = []
    with pytest.raises(Stop):
        stopping.render_frames(frames, overlays, np.zeros_like(frames), lambda done, total: drawn.append(done))
    for renderer in (plain, checked, stopping):
        renderer.close()
    assert drawn == []  # stopped inside the first frames
    assert not [t for t in threading.enumerate() if t.name.startswith("trackoverlay-raster")]


def test_small_flushes_give_the_same_layer(cpu_renderer, monkeypatch):
    display_list = random_display_list(5)
    color, alpha = dense(cpu_renderer.rasterize(display_list, 72, 96))
    monkeypatch.setattr(cpu_spans, "_PAIRS_PER_FLUSH", 97)
    small_color, small_alpha = dense(cpu_renderer.rasterize(display_list, 72, 96))
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
