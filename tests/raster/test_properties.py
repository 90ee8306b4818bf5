"""Property tests (hypothesis) over random valid scenes, on every backend.

For random polylines (2..6 vertices, widths 0.5..20, colours with
alpha, solid/dashed/dotted, gradients) and boxes (radius, stroke, fill,
brackets) on canvases of 1x1..96x80, uint8 and float32:

- the output has the frame's shape and dtype and holds no NaN/inf; the frame is not modified;
- the layer (``render_layer``) has alpha and straight RGB in [0, 1];
- every pixel whose centre is farther than ``width / 2 + 1`` px from every
  primitive (min distance to the polyline segments; for boxes the
  rounded-rect signed distance minus half the stroke, or the signed distance
  itself where the box is filled) is bit-identical to the input frame and has
  layer alpha 0;
- the same input renders bit-identically twice;
- renderers with 1 and 3 worker threads agree bit for bit (on canvases tall
  enough, 130..320 rows, to be split into several bands).

Each property runs on every available backend (the ``renderer`` fixture);
on the GPU the same scenes also match the CPU within 2/255 per channel.

Runs are deterministic (``derandomize=True``) and modest (40-50 examples).
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trackoverlay.utils.draw.display_list import Boxes, DisplayList, Polylines

SETTINGS = settings(max_examples=50, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MARGIN = 1.0  # px beyond the coverage model's reach (half a pixel) for float32 rounding
PARITY = 2 / 255


# ----------------------------------------------------------------- strategies


def flush_tiny(values):
    """``values`` with magnitudes below 1e-30 set to 0.

    GPUs flush subnormal floats to zero, and halving a tiny stroke or bracket
    makes one; at 0 the model switches (no stroke / full outline), so such
    sizes would test the flush, not the picture.
    """
    values = np.asarray(values, np.float32)
    return np.where(np.abs(values) < 1e-30, np.float32(0), values)


def floats(low, high):
    """float32-representable floats in [low, high], none of them tiny (see :func:`flush_tiny`)."""
    return st.floats(low, high, allow_nan=False, allow_infinity=False, width=32).map(lambda v: float(flush_tiny(v)))


def unit_floats():
    return floats(0.0, 1.0)


def rgba():
    return st.tuples(unit_floats(), unit_floats(), unit_floats(), unit_floats())


@st.composite
def frames(draw, heights=(1, 80), widths=(1, 96)):
    """A random uint8 or float32 [H, W, 3] frame."""
    height, width = draw(st.integers(*heights)), draw(st.integers(*widths))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        return rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    return rng.random((height, width, 3), dtype=np.float32)


def points_near(height, width, count):
    """``count`` (x, y) points on the canvas or up to 20 px beyond it."""
    point = st.tuples(floats(-20.0, width + 20.0), floats(-20.0, height + 20.0))
    return st.lists(point, min_size=count, max_size=count)


@st.composite
def dash_styles(draw):
    """(on, off, round caps): solid, dashed or dotted."""
    kind = draw(st.sampled_from(["solid", "dashed", "dotted"]))
    if kind == "solid":
        return 0.0, 0.0, False
    off = draw(floats(1.0, 15.0))
    return (draw(floats(1.0, 15.0)), off, draw(st.booleans())) if kind == "dashed" else (0.0, off, True)


@st.composite
def polyline_batches(draw, height, width):
    """1..4 polylines of 2..6 vertices each."""
    sizes = draw(st.lists(st.integers(2, 6), min_size=1, max_size=4))
    count = len(sizes)
    vertices = np.array([vertex for size in sizes for vertex in draw(points_near(height, width, size))], np.float32)
    gradient = draw(st.booleans())
    starts = np.array(draw(st.lists(rgba(), min_size=count, max_size=count)), np.float32)
    ends = np.array(draw(st.lists(rgba(), min_size=count, max_size=count)), np.float32) if gradient else starts
    dashes = draw(st.lists(dash_styles(), min_size=count, max_size=count))
    return Polylines(vertices, np.r_[0, np.cumsum(sizes)], draw(st.lists(floats(0.5, 20.0), min_size=count,
                                                                         max_size=count)),
                     starts, ends, [dash[:2] for dash in dashes], [dash[2] for dash in dashes])


@st.composite
def box_batches(draw, height, width):
    """1..4 boxes with random size, corner radius, stroke, fill and corner brackets."""
    count = draw(st.integers(1, 4))
    half = np.array(draw(st.lists(st.tuples(floats(0.0, 30.0), floats(0.0, 30.0)), min_size=count,
                                  max_size=count)), np.float32)
    shorter = half.min(axis=1)
    fractions = np.array(draw(st.lists(st.tuples(unit_floats(), floats(0.0, 0.5), st.booleans()),
                                       min_size=count, max_size=count)), np.float32)
    return Boxes(draw(points_near(height, width, count)), half, flush_tiny(shorter * fractions[:, 0]),
                 draw(st.lists(floats(0.0, 6.0), min_size=count, max_size=count)),
                 draw(st.lists(rgba(), min_size=count, max_size=count)),
                 draw(st.lists(rgba(), min_size=count, max_size=count)),
                 flush_tiny(2 * shorter * fractions[:, 1] * fractions[:, 2]))


@st.composite
def scenes(draw, heights=(1, 80), widths=(1, 96)):
    """(frame, display list): 1..3 layers of polylines and boxes, in random order."""
    frame = draw(frames(heights, widths))
    height, width = frame.shape[:2]
    kinds = draw(st.lists(st.sampled_from([polyline_batches, box_batches]), min_size=1, max_size=3))
    return frame, DisplayList(tuple(draw(kind(height, width)) for kind in kinds))


# ---------------------------------------------------------- geometry reference


def pixel_centres(height, width) -> np.ndarray:
    """float64 [H * W, 2] (x, y) pixel centres, row-major."""
    y, x = np.mgrid[0:height, 0:width] + 0.5
    return np.stack([x.ravel(), y.ravel()], axis=1)


def segment_distance(points, p0, p1) -> np.ndarray:
    """[P, S] distance from each point to each segment p0-p1 (float64; a zero-length segment is its point)."""
    delta = p1 - p0
    length_sq = (delta * delta).sum(axis=1)
    offset = points[:, None, :] - p0[None]
    t = np.clip((offset * delta[None]).sum(axis=2) / np.maximum(length_sq, 1e-300), 0.0, 1.0)
    return np.linalg.norm(offset - t[..., None] * delta[None], axis=2)


def polyline_reach(lines: Polylines, points) -> np.ndarray:
    """[P] min over the polylines of (distance to the polyline - width / 2)."""
    reach = np.full(len(points), np.inf)
    for index in range(lines.count):
        vertices = lines.vertices[lines.offsets[index]:lines.offsets[index + 1]].astype(np.float64)
        distance = segment_distance(points, vertices[:-1], vertices[1:]).min(axis=1)
        reach = np.minimum(reach, distance - lines.width[index] / 2.0)
    return reach


def box_reach(boxes: Boxes, points) -> np.ndarray:
    """[P] min over the boxes of |sdf| - stroke / 2 (stroked boxes) and sdf (filled boxes)."""
    center, half = boxes.center.astype(np.float64), boxes.half_size.astype(np.float64)
    radius = boxes.radius.astype(np.float64)
    q = np.abs(points[:, None, :] - center[None]) - (half - radius[:, None])[None]
    sdf = np.linalg.norm(np.maximum(q, 0.0), axis=2) + np.minimum(q.max(axis=2), 0.0) - radius[None]
    stroke = np.where(boxes.stroke_width > 0, np.abs(sdf) - boxes.stroke_width / 2.0, np.inf)
    fill = np.where(boxes.fill_color[:, 3] > 0, sdf, np.inf)
    return np.minimum(stroke, fill).min(axis=1)


def far_pixels(display_list: DisplayList, height: int, width: int) -> np.ndarray:
    """bool [H, W]: pixels whose centre lies more than MARGIN px beyond every primitive's reach."""
    points = pixel_centres(height, width)
    reach = np.full(len(points), np.inf)
    for layer in display_list.layers:
        layer_reach = polyline_reach if isinstance(layer, Polylines) else box_reach
        reach = np.minimum(reach, layer_reach(layer, points))
    return (reach > MARGIN).reshape(height, width)


# ------------------------------------------------------------------- renderer


@SETTINGS
@given(scene=scenes())
def test_render_keeps_shape_dtype_finite_and_far_pixels(renderer, scene):
    frame, display_list = scene
    before = frame.copy()
    out = renderer.render(frame, display_list)
    assert np.array_equal(frame, before)
    assert out.shape == frame.shape and out.dtype == frame.dtype and np.all(np.isfinite(out))
    far = far_pixels(display_list, *frame.shape[:2])
    assert np.array_equal(out[far], frame[far])


@SETTINGS
@given(scene=scenes())
def test_layer_alpha_and_rgb_lie_in_0_1(renderer, scene):
    frame, display_list = scene
    height, width = frame.shape[:2]
    rgb, alpha = renderer.render_layer(display_list, height, width)
    assert rgb.shape == (height, width, 3) and alpha.shape == (height, width)
    assert rgb.dtype == alpha.dtype == np.float32
    assert np.all((alpha >= 0) & (alpha <= 1)) and np.all((rgb >= 0) & (rgb <= 1))  # NaN fails both
    assert not alpha[far_pixels(display_list, height, width)].any()


@SETTINGS
@given(scene=scenes())
def test_same_input_renders_bit_identically(renderer, scene):
    frame, display_list = scene
    first = renderer.render(frame, display_list)
    fresh = type(renderer)(workers=2)
    try:
        again = fresh.render(frame, display_list)
    finally:
        fresh.close()
    assert np.array_equal(first, renderer.render(frame, display_list)) and np.array_equal(first, again)


@pytest.fixture(scope="module")
def one_and_three_workers(renderer):
    """Two renderers of the backend under test, with 1 and 3 host threads."""
    renderers = type(renderer)(workers=1), type(renderer)(workers=3)
    yield renderers
    for one in renderers:
        one.close()


@settings(SETTINGS, max_examples=40)
@given(scene=scenes(heights=(130, 320)))
def test_worker_count_changes_no_bit(one_and_three_workers, scene):
    frame, display_list = scene
    single, several = one_and_three_workers
    assert len(several.pool.bands(frame.shape[0])) > 1
    assert np.array_equal(single.render(frame, display_list), several.render(frame, display_list))
    for one, three in zip(single.render_layer(display_list, *frame.shape[:2]),
                          several.render_layer(display_list, *frame.shape[:2])):
        assert np.array_equal(one, three)


# --------------------------------------------------------------- GPU vs CPU


@pytest.mark.gpu
@SETTINGS
@given(scene=scenes())
def test_gpu_matches_cpu(cpu_renderer, gpu_renderer, scene):
    frame, display_list = scene
    want = cpu_renderer.render(frame, display_list).astype(np.float32)
    got = gpu_renderer.render(frame, display_list)
    assert got.shape == frame.shape and got.dtype == frame.dtype
    scale = 255.0 if frame.dtype == np.uint8 else 1.0
    assert np.abs(got.astype(np.float32) - want).max() / scale <= PARITY
