"""GPU renderer only: frames on the device, buffer reuse and growth (max |GPU - CPU| <= 2/255 per channel).

Host-frame rendering on the GPU runs the same tests as the CPU through the
``renderer`` fixture (test_raster, test_golden, test_properties); this module
holds what only the GPU renderer has.
"""

import numpy as np
import pytest
from scenes import RENDER_OPTIONS, SCENES, as_dtype, assert_parity, boxes, flat_frame
from trackoverlay.utils.draw.display_list import DisplayList
from trackoverlay.utils.draw.overlays import box_primitives, link_polylines, trail_overlay
from trackoverlay.utils.draw.styles import BoxStyle, LineStyle, TrailStyle
from trackoverlay.utils.graph.neighbours import GraphParams, build_edges

pytestmark = pytest.mark.gpu


def render_on_device(gpu, frame, display_list, glow=None):
    """``display_list`` (with its ``glow``) over ``frame`` composited on the GPU, back on the host."""
    import cupy

    return gpu.render_device(cupy.asarray(frame), gpu.upload(display_list), glow=glow).get()


def link_display_list(points, params, line_style, box_style):
    """kNN links of ``line_style`` under boxes of ``box_style`` around ``points``."""
    edges, _ = build_edges(points, params)
    ids = np.arange(len(points))
    return DisplayList((link_polylines(points, ids, edges, line_style),
                        box_primitives(points, np.full((len(points), 2), box_style.size), ids, box_style)))


@pytest.mark.parametrize("name", sorted(SCENES))
def test_device_frames_match_cpu(cpu_renderer, gpu_renderer, name):
    frame, scene = SCENES[name]()
    options = RENDER_OPTIONS.get(name, {})
    assert_parity(render_on_device(gpu_renderer, frame, scene, **options), cpu_renderer.render(frame, scene, **options))


LINK_LOOKS = [
    (LineStyle(), BoxStyle()),
    (LineStyle(color_mode="track", gradient=True, curve="cubic", width=3.0, opacity=0.7),
     BoxStyle(color_mode="track", shape="brackets", fill_opacity=0.0, roundness=0.0)),
    (LineStyle(pattern="dashed", curve="s_curve", bend=0.4, color="#FF8800CC"),
     BoxStyle(size=24, stroke_width=3.0, fill_color="#00FF00", roundness=1.0)),
    (LineStyle(pattern="dotted", curve="straight", width=2.5), BoxStyle(size=0.0, stroke_width=4.0)),
]


@pytest.mark.parametrize("look", range(len(LINK_LOOKS)))
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_gpu_link_looks_match_cpu_on_a_device_frame(cpu_renderer, gpu_renderer, look, dtype):
    line_style, box_style = LINK_LOOKS[look]
    params = GraphParams(k=5, delta_y_cap=150.0, max_length=220.0)
    rng = np.random.default_rng(look)
    points = (rng.random((120, 2)) * [640, 360]).astype(np.float32)
    frame = as_dtype(rng.integers(0, 256, (360, 640, 3), dtype=np.uint8), dtype)
    display_list = link_display_list(points, params, line_style, box_style)
    assert_parity(render_on_device(gpu_renderer, frame, display_list), cpu_renderer.render(frame, display_list))


TRAIL_LOOKS = [TrailStyle(), TrailStyle(length=60, width=9.0, taper=1.0, fade=0.4, smoothing=1.0, color_mode="track"),
               TrailStyle(length=5, width=1.0, taper=0.0, fade=3.0, smoothing=0.0, color="#FF880080")]


@pytest.mark.parametrize("look", range(len(TRAIL_LOOKS)))
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_gpu_trails_match_cpu_on_a_device_frame(cpu_renderer, gpu_renderer, look, dtype):
    """300 trails of wandering, sometimes hidden tracks over a random frame, with fades."""
    rng = np.random.default_rng(10 + look)
    frames = 70
    velocity = rng.normal(0.0, 3.0, (300, 2))
    path = rng.random((300, 2)) * [640, 360] + velocity * np.arange(frames)[:, None, None] \
        + rng.normal(0.0, 1.0, (frames, 300, 2)).cumsum(axis=0)
    visible = rng.random((frames, 300)) > 0.05
    opacity = rng.uniform(0.2, 1.0, (frames, 300)).astype(np.float32)
    display_list = trail_overlay(path.astype(np.float32), visible, TRAIL_LOOKS[look], opacity)[-1]
    assert display_list.primitive_count > 250
    frame = as_dtype(rng.integers(0, 256, (360, 640, 3), dtype=np.uint8), dtype)
    assert_parity(render_on_device(gpu_renderer, frame, display_list), cpu_renderer.render(frame, display_list))


@pytest.mark.parametrize("opacity", [0.3, 0.55, 0.77])
def test_device_uint8_blend_rounds_to_nearest(gpu_renderer, opacity):
    """The device composite rounds to the nearest level, like the host blend (truncation is 1 level off)."""
    frame = np.repeat(np.arange(256, dtype=np.uint8).reshape(16, 16, 1), 3, axis=2)
    out = render_on_device(gpu_renderer, frame, DisplayList((boxes([8, 8], [20, 20],
                                                                   fill_color=(1, 1, 1, opacity)),)))
    exact = opacity * 255 + frame.astype(np.float64) * (1 - opacity)
    clear = np.abs(exact - np.floor(exact) - 0.5) > 1e-3  # ties may go either way in float32
    expected = np.floor(exact + 0.5)
    assert np.any(expected[clear] != np.floor(exact[clear]))  # truncation would fail here
    np.testing.assert_array_equal(out[clear], expected[clear])


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_gpu_scene_over_host_frame_matches_cpu(cpu_renderer, gpu_renderer, dtype):
    """Host frames reuse the pinned buffers from frame to frame and the input is never touched."""
    params, line_style, box_style = GraphParams(k=5), LineStyle(width=2.0), BoxStyle()
    rng = np.random.default_rng(11)
    points = (rng.random((100, 2)) * [960, 540]).astype(np.float32)
    frame = as_dtype(rng.integers(0, 256, (540, 960, 3), dtype=np.uint8), dtype)
    original = frame.copy()
    display_list = link_display_list(points, params, line_style, box_style)
    want = cpu_renderer.render(frame, display_list)
    for _ in range(2):  # the second frame reuses every buffer
        assert_parity(gpu_renderer.render(frame, display_list), want)
    np.testing.assert_array_equal(frame, original)


def test_key_buffer_grows_when_a_scene_needs_more(cpu_renderer):
    from trackoverlay.utils.raster.gpu import GpuRenderer

    frame, scene = SCENES["seed_scene"]()
    renderer = GpuRenderer(workers=1)
    renderer._capacity = 8  # far too small: the first binning overflows
    try:
        got = renderer.render(frame, scene)
    finally:
        renderer.close()
    assert renderer._capacity > 8
    assert_parity(got, cpu_renderer.render(frame, scene))


def test_device_frame_of_the_wrong_shape_is_refused(gpu_renderer):
    import cupy

    with pytest.raises(ValueError, match=r"frame must be a uint8/float32 \[H, W, 3\] CuPy array"):
        gpu_renderer.render_device(cupy.zeros((8, 8, 4), cupy.uint8), gpu_renderer.upload(DisplayList()))


def test_empty_scene_on_a_device_frame_copies_it(gpu_renderer):
    frame = flat_frame(50, 70, (0.2, 0.4, 0.6))
    np.testing.assert_array_equal(render_on_device(gpu_renderer, frame, DisplayList()), frame)
