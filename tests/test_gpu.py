"""GPU backend: same picture as the CPU path (max |GPU - CPU| <= 2/255 per channel)."""

import numpy as np
import pytest

from trackoverlay.utils.display_list import DisplayList
from trackoverlay.utils.overlay import box_primitives, link_polylines
from trackoverlay.utils.render_cpu import CpuRenderer
from trackoverlay.utils.styles import BoxStyle, LineStyle

pytestmark = pytest.mark.gpu

PARITY = 2 / 255


def random_scene(seed, count=40, size=(320, 240), **line_options):
    rng = np.random.default_rng(seed)
    width, height = size
    points = (rng.random((count, 2)) * [width, height]).astype(np.float32)
    a, b = np.triu_indices(count, 1)
    near = np.hypot(*(points[a] - points[b]).T) < 70
    edges = np.stack([a[near], b[near]], axis=1)
    ids = np.arange(count)
    lines = link_polylines(points, ids, edges, LineStyle(**{"width": 2.5, "opacity": 0.8, **line_options}))
    boxes = box_primitives(points, np.full((count, 2), 18.0), ids,
                           BoxStyle(stroke_width=1.5, fill_opacity=0.25, roundness=0.4, color_mode="track"))
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    return frame, DisplayList((boxes, lines))


SCENE_OPTIONS = [
    {},
    {"color_mode": "track", "gradient": True, "curve": "cubic"},
    {"pattern": "dashed", "curve": "s_curve", "width": 4.0},
    {"pattern": "dotted", "gap_length": 9.0, "width": 3.0, "curve": "straight"},
]


@pytest.fixture(scope="module")
def gpu():
    from trackoverlay.utils.render_gpu import GpuRenderer

    return GpuRenderer()


@pytest.mark.parametrize("options", SCENE_OPTIONS)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_host_frames_match_cpu(gpu, options, dtype):
    frame, scene = random_scene(3, **options)
    frame = frame if dtype == np.uint8 else (frame / 255).astype(np.float32)
    want = CpuRenderer().render(frame, scene).astype(np.float32)
    got = gpu.render(frame, scene).astype(np.float32)
    scale = 255 if dtype == np.uint8 else 1
    assert np.abs(got - want).max() / scale <= PARITY


@pytest.mark.parametrize("options", SCENE_OPTIONS)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_device_frames_match_cpu(gpu, options, dtype):
    import cupy

    frame, scene = random_scene(5, **options)
    frame = frame if dtype == np.uint8 else (frame / 255).astype(np.float32)
    want = CpuRenderer().render(frame, scene).astype(np.float32)
    got = gpu.render_device(cupy.asarray(frame), gpu.upload(scene)).get().astype(np.float32)
    scale = 255 if dtype == np.uint8 else 1
    assert np.abs(got - want).max() / scale <= PARITY


def test_layer_matches_cpu(gpu):
    frame, scene = random_scene(7, color_mode="track", gradient=True)
    height, width = frame.shape[:2]
    want_rgb, want_alpha = CpuRenderer().render_layer(scene, height, width)
    got_rgb, got_alpha = gpu.render_layer(scene, height, width)
    assert np.abs(got_alpha - want_alpha).max() <= PARITY
    visible = want_alpha > 0.05
    assert np.abs(got_rgb - want_rgb)[visible].max() <= PARITY


def test_empty_scene_copies_frame(gpu):
    frame = np.random.default_rng(0).integers(0, 256, (50, 70, 3), dtype=np.uint8)
    out = gpu.render(frame, DisplayList())
    assert out is not frame
    np.testing.assert_array_equal(out, frame)
