"""Property tests (hypothesis) over random valid scenes and point sets.

Renderer, for random polylines (2..6 vertices, widths 0.5..20, colours with
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
- ``CpuRenderer(workers=1)`` and ``CpuRenderer(workers=3)`` agree bit for bit
  (on canvases tall enough, 130..320 rows, to be split into several bands).

Graph, for random point sets (duplicates and ties included, invalid points
holding NaN) and random parameters: edges are int64 ``i < j``, unique,
sorted, only between valid points, with their true lengths; ``max_length``,
``delta_y_cap``, ``degree_cap`` and the radius (widened only for sticky edges)
hold; without caps every valid point keeps ``min(k, valid - 1)`` kNN links;
results are deterministic and the inputs unchanged.

GPU (marked, skipped without one): the same scenes through ``GpuRenderer``
match the CPU within 2/255 per channel and render bit-identically twice.

Runs are deterministic (``derandomize=True``) and modest (40-50 examples).
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trackoverlay.utils.draw.display_list import Boxes, DisplayList, Polylines
from trackoverlay.utils.graph.neighbours import MODES, GraphParams, build_edges
from trackoverlay.utils.raster.cpu import CpuRenderer

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


@pytest.fixture(scope="module")
def cpu():
    renderer = CpuRenderer(workers=2)
    yield renderer
    renderer.close()


@SETTINGS
@given(scene=scenes())
def test_render_keeps_shape_dtype_finite_and_far_pixels(cpu, scene):
    frame, display_list = scene
    before = frame.copy()
    out = cpu.render(frame, display_list)
    assert np.array_equal(frame, before)
    assert out.shape == frame.shape and out.dtype == frame.dtype and np.all(np.isfinite(out))
    far = far_pixels(display_list, *frame.shape[:2])
    assert np.array_equal(out[far], frame[far])


@SETTINGS
@given(scene=scenes())
def test_layer_alpha_and_rgb_lie_in_0_1(cpu, scene):
    frame, display_list = scene
    height, width = frame.shape[:2]
    rgb, alpha = cpu.render_layer(display_list, height, width)
    assert rgb.shape == (height, width, 3) and alpha.shape == (height, width)
    assert rgb.dtype == alpha.dtype == np.float32
    assert np.all((alpha >= 0) & (alpha <= 1)) and np.all((rgb >= 0) & (rgb <= 1))  # NaN fails both
    assert not alpha[far_pixels(display_list, height, width)].any()


@SETTINGS
@given(scene=scenes())
def test_same_input_renders_bit_identically(cpu, scene):
    frame, display_list = scene
    first = cpu.render(frame, display_list)
    fresh = CpuRenderer(workers=2)
    try:
        again = fresh.render(frame, display_list)
    finally:
        fresh.close()
    assert np.array_equal(first, cpu.render(frame, display_list)) and np.array_equal(first, again)


@pytest.fixture(scope="module")
def one_and_three_workers():
    renderers = CpuRenderer(workers=1), CpuRenderer(workers=3)
    yield renderers
    for renderer in renderers:
        renderer.close()


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


# ---------------------------------------------------------------------- graph


@st.composite
def point_sets(draw):
    """(points [N, 2] float32, valid [N]): 0..40 points, on a coarse grid (duplicates, ties) or anywhere.

    Invalid points may hold NaN.
    """
    count = draw(st.integers(0, 40))
    coordinate = st.integers(0, 6).map(float) if draw(st.booleans()) else floats(0.0, 200.0)
    points = np.array(draw(st.lists(st.tuples(coordinate, coordinate), min_size=count, max_size=count)),
                      np.float32).reshape(count, 2)
    flags = np.array(draw(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=count, max_size=count)),
                     bool).reshape(count, 2)
    valid = ~flags[:, 0]
    points[~valid & flags[:, 1]] = np.nan
    return points, valid


graph_params = st.builds(
    GraphParams, mode=st.sampled_from(MODES), k=st.integers(1, 8), radius=floats(1.0, 150.0),
    max_length=st.one_of(st.just(0.0), floats(1.0, 200.0)), delta_y_cap=st.one_of(st.just(0.0), floats(1.0, 100.0)),
    degree_cap=st.integers(0, 4), hysteresis=st.one_of(st.just(0.0), floats(0.0, 0.875)))


@st.composite
def graph_cases(draw):
    """(points, valid, params, previous edges or None)."""
    points, valid = draw(point_sets())
    count = len(points)
    previous = None
    if count > 1 and draw(st.booleans()):
        pairs = draw(st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, count - 1)), max_size=30))
        previous = np.array([pair for pair in pairs if pair[0] != pair[1]], np.int64).reshape(-1, 2)
    return points, valid, draw(graph_params), previous


@SETTINGS
@given(case=graph_cases())
def test_graph_edges_are_canonical_capped_and_between_valid_points(case):
    points, valid, params, previous = case
    inputs = [value.copy() for value in (points, valid, previous) if value is not None]
    edges, lengths = build_edges(points, params, valid=valid, previous=previous)
    for value, copy in zip([value for value in (points, valid, previous) if value is not None], inputs):
        assert np.array_equal(value, copy, equal_nan=True)
    assert edges.dtype == np.int64 and edges.shape == (len(lengths), 2) and lengths.dtype == np.float32
    assert np.all(edges[:, 0] < edges[:, 1])
    keys = edges[:, 0] * len(points) + edges[:, 1]
    assert np.all(np.diff(keys) > 0)  # unique and sorted by (i, j)
    assert np.all(valid[edges])
    delta = points[edges[:, 1]].astype(np.float64) - points[edges[:, 0]]
    np.testing.assert_allclose(lengths, np.hypot(delta[:, 0], delta[:, 1]), rtol=1e-6, atol=1e-6)
    if params.max_length > 0:
        assert np.all(lengths <= params.max_length)
    if params.delta_y_cap > 0:
        assert np.all(np.abs(delta[:, 1]) <= params.delta_y_cap)
    degree = np.bincount(edges.ravel(), minlength=len(points))
    if params.degree_cap > 0:
        assert np.all(degree <= params.degree_cap)
    if params.mode == "radius":  # new edges within the radius; sticky ones within radius * (1 + hysteresis)
        sticky = np.zeros(len(edges), bool)
        if params.hysteresis > 0 and previous is not None:
            known = np.sort(previous, axis=1)
            sticky = (edges[:, None, :] == known[None]).all(axis=2).any(axis=1)
        assert np.all(lengths <= np.where(sticky, params.radius * (1.0 + params.hysteresis), params.radius))
    elif params.max_length == params.delta_y_cap == params.degree_cap == 0:
        assert np.all(degree[valid] >= min(params.k, int(valid.sum()) - 1))
    again, again_lengths = build_edges(points, params, valid=valid, previous=previous)
    assert np.array_equal(edges, again) and np.array_equal(lengths, again_lengths)


# ------------------------------------------------------------------------ GPU


@pytest.fixture(scope="module")
def gpu():
    from trackoverlay.utils.raster.gpu import GpuRenderer

    renderer = GpuRenderer()
    yield renderer
    renderer.close()


@pytest.mark.gpu
@SETTINGS
@given(scene=scenes())
def test_gpu_matches_cpu_and_is_deterministic(cpu, gpu, scene):
    frame, display_list = scene
    want = cpu.render(frame, display_list).astype(np.float32)
    got = gpu.render(frame, display_list)
    assert got.shape == frame.shape and got.dtype == frame.dtype
    scale = 255.0 if frame.dtype == np.uint8 else 1.0
    assert np.abs(got.astype(np.float32) - want).max() / scale <= PARITY
    assert np.array_equal(got, gpu.render(frame, display_list))
