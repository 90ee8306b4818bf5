"""GPU batches: whole IMAGE batches (host or device) through the GPU renderer, and graphs built on the GPU, against the CPU path."""

import numpy as np
import pytest
from scenes import PARITY, as_dtype, assert_parity
from trackoverlay.utils.draw.display_list import DisplayList
from trackoverlay.utils.draw.overlays import box_primitives, link_polylines
from trackoverlay.utils.draw.styles import BoxStyle, LineStyle
from trackoverlay.utils.graph.neighbours import GraphParams
from trackoverlay.utils.raster.cpu import CpuRenderer

pytestmark = pytest.mark.gpu


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
    from trackoverlay.utils.raster.gpu import GpuRenderer

    return GpuRenderer()


@pytest.mark.parametrize("k", [1, 5, 12])
def test_knn_kernel_on_a_batch_matches_the_cpu_per_frame(k):
    import cupy
    from trackoverlay.utils.graph.knn_gpu import knn_gpu
    from trackoverlay.utils.graph.neighbours import knn_cpu_frames

    rng = np.random.default_rng(k)
    points = (rng.random((5, 300, 2)) * [1920, 1080]).astype(np.float32)
    valid = rng.random((5, 300)) > 0.2
    valid[1, 3:] = False  # 3 valid points: fewer than k
    valid[2] = False
    want_index, want_distance = knn_cpu_frames(points, k, valid)
    index, distance = knn_gpu(cupy.asarray(points), k, cupy.asarray(valid))
    np.testing.assert_array_equal(index.get(), want_index)
    found = want_index >= 0
    np.testing.assert_allclose(distance.get()[found], want_distance[found], rtol=1e-5, atol=1e-3)


def test_key_buffer_grows_for_a_resident_frame_too():
    import cupy
    from trackoverlay.utils.raster.gpu import GpuRenderer

    frame, scene = random_scene(14, count=200, size=(640, 480), width=30.0)
    renderer = GpuRenderer()
    renderer._capacity = 8  # the unchecked binning overflows; the frame is drawn again
    got = renderer.render_device(cupy.asarray(frame), renderer.upload(scene)).get()
    assert renderer._capacity > 8
    assert_parity(got, CpuRenderer().render(frame, scene))


# ------------------------------------------------------------------ whole batches


def _batch(seed, frames, dtype, size=(320, 240)):
    """A batch of different frames and one display list per frame (one of them empty)."""
    rng = np.random.default_rng(seed)
    width, height = size
    images = as_dtype(rng.integers(0, 256, (frames, height, width, 3), dtype=np.uint8), dtype)
    options = SCENE_OPTIONS * frames
    overlays = [random_scene(seed + index, count=10 + 7 * index, size=size, **options[index])[1]
                for index in range(frames)]
    overlays[1] = DisplayList()
    return images, overlays


def _cpu_batch(frames, overlays):
    from trackoverlay.utils.raster.batch import render_batch

    return render_batch(frames, overlays, CpuRenderer()).frames


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("chunk_frames", [1, 2, 100])
def test_host_batch_matches_cpu_through_the_pinned_chunks(gpu, monkeypatch, dtype, chunk_frames):
    from trackoverlay.utils.raster import gpu as gpu_module
    from trackoverlay.utils.raster.batch import render_batch

    frames, overlays = _batch(21, 7, dtype)  # 7 chunks of one frame go round the 3 slots twice
    monkeypatch.setattr(gpu_module, "HOST_CHUNK_BYTES", frames[0].nbytes * chunk_frames)
    original = frames.copy()
    done = []
    got = render_batch(frames, overlays, gpu, progress=lambda count, total: done.append((count, total))).frames
    assert isinstance(got, np.ndarray) and got.dtype == frames.dtype and got.shape == frames.shape
    assert_parity(got, _cpu_batch(frames, overlays))
    np.testing.assert_array_equal(frames, original)
    assert done[-1] == (7, 7) and len(done) == -(-7 // chunk_frames)


@pytest.mark.parametrize("frames_count,overlay_count", [(1, 5), (5, 1)])
def test_host_batch_broadcasts_one_frame_or_one_overlay(gpu, frames_count, overlay_count):
    from trackoverlay.utils.raster.batch import render_batch

    frames, overlays = _batch(22, 5, np.float32)
    frames, overlays = frames[:frames_count], (overlays if overlay_count > 1 else overlays[2:3])
    got = render_batch(frames, overlays, gpu).frames
    assert len(got) == 5
    assert_parity(got, _cpu_batch(frames, overlays))


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_device_batch_stays_on_the_gpu_and_matches_cpu(gpu, monkeypatch, dtype):
    import cupy
    from trackoverlay.utils.raster import gpu as gpu_module
    from trackoverlay.utils.raster.batch import render_batch

    frames, overlays = _batch(23, 5, dtype)
    monkeypatch.setattr(gpu_module, "DEVICE_CHUNK_BYTES", frames[0].nbytes * 2)  # chunks of 2 frames
    device = cupy.asarray(frames)
    got = render_batch(device, overlays, gpu).frames
    assert isinstance(got, cupy.ndarray)
    assert_parity(got.get(), _cpu_batch(frames, overlays))
    np.testing.assert_array_equal(device.get(), frames)


def test_cuda_torch_batch_is_read_without_a_copy_and_comes_back_on_the_gpu(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from trackoverlay.utils.raster.batch import frame_batch, render_batch

    frames, overlays = _batch(24, 3, np.float32)
    tensor = torch.from_numpy(frames).cuda()
    assert frame_batch(tensor).data.ptr == tensor.data_ptr()
    got = torch.from_dlpack(render_batch(tensor, overlays, gpu).frames)
    assert got.is_cuda
    assert_parity(got.cpu().numpy(), _cpu_batch(frames, overlays))


def test_batch_with_layer_outputs_matches_cpu(gpu):
    from trackoverlay.utils.raster.batch import render_batch

    frames, overlays = _batch(27, 4, np.float32)
    want = render_batch(frames, overlays, CpuRenderer(), with_layer=True)
    got = render_batch(frames, overlays, gpu, with_layer=True)
    assert_parity(got.frames, want.frames)
    assert np.abs(got.layer_alpha - want.layer_alpha).max() <= PARITY
    visible = want.layer_alpha > 0.05
    assert np.abs(got.layer_rgb - want.layer_rgb)[visible].max() <= PARITY


def test_interrupted_batch_stops_cleanly_and_the_renderer_still_works(gpu, monkeypatch):
    from trackoverlay.utils.raster import gpu as gpu_module
    from trackoverlay.utils.raster.batch import render_batch

    frames, overlays = _batch(25, 6, np.float32)
    monkeypatch.setattr(gpu_module, "HOST_CHUNK_BYTES", frames[0].nbytes)

    def interrupt(done, total):
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        render_batch(frames, overlays, gpu, progress=interrupt)
    assert_parity(render_batch(frames, overlays, gpu).frames, _cpu_batch(frames, overlays))


@pytest.mark.parametrize("params", [GraphParams(k=5), GraphParams(k=4, hysteresis=0.3, degree_cap=3),
                                    GraphParams(mode="radius", radius=60.0)])
def test_link_overlay_built_on_the_gpu_matches_the_cpu_build(params):
    from trackoverlay.utils.draw.overlays import link_overlay

    rng = np.random.default_rng(26)
    path = (rng.random((1, 150, 2)) * [640, 360] + np.cumsum(rng.normal(0, 3, (6, 150, 2)), axis=0))
    visibility = rng.random((6, 150)) > 0.1
    style = LineStyle(color_mode="track", gradient=True, curve="cubic", pattern="dashed")
    want = link_overlay(path.astype(np.float32), visibility, params, style, backend="cpu")
    got = link_overlay(path.astype(np.float32), visibility, params, style, backend="gpu")
    for frame_want, frame_got in zip(want, got, strict=True):
        for layer_want, layer_got in zip(frame_want.layers, frame_got.layers, strict=True):
            for name, value in vars(layer_want).items():
                np.testing.assert_allclose(np.asarray(getattr(layer_got, name), np.float64),
                                           np.asarray(value, np.float64), rtol=0, atol=1e-3, err_msg=name)


def test_link_overlay_falls_back_to_the_cpu_when_the_gpu_build_fails(monkeypatch, caplog):
    from trackoverlay.utils.draw import overlays

    def broken(points, k, valid=None):
        raise RuntimeError("cudaErrorLaunchFailure")

    broken.frames = broken
    monkeypatch.setattr(overlays, "knn_gpu", broken)
    rng = np.random.default_rng(28)
    path = (rng.random((3, 60, 2)) * [640, 360]).astype(np.float32)
    visibility = np.ones((3, 60), bool)
    with caplog.at_level("WARNING", logger="trackoverlay"):
        got = overlays.link_overlay(path, visibility, GraphParams(k=3), LineStyle(), backend="gpu")
    want = overlays.link_overlay(path, visibility, GraphParams(k=3), LineStyle(), backend="cpu")
    assert "cudaErrorLaunchFailure" in caplog.text
    for frame_want, frame_got in zip(want, got, strict=True):
        np.testing.assert_array_equal(frame_got.layers[0].vertices, frame_want.layers[0].vertices)


def test_a_scene_built_on_the_host_equals_one_built_on_the_gpu(gpu):
    """Small scenes are built with NumPy and uploaded once, large ones on the GPU: the same tables either way
    (trails with tapered, fading vertices and boxes, over three frames, an empty one among them)."""
    from dataclasses import replace

    from trackoverlay.utils.raster.gpu import DeviceScene, HostLayers

    lists = [random_scene(seed, **options)[1] for seed, options in enumerate(SCENE_OPTIONS[:2])]
    tapered = lists[0].layers[1]
    factors = np.linspace(1.0, 0.2, len(tapered.vertices), dtype=np.float32)
    lists.insert(1, DisplayList(()))
    lists.append(DisplayList((replace(tapered, vertex_width=factors, vertex_alpha=factors[::-1].copy()),)))
    layers = HostLayers.gather(lists)
    on_host, on_gpu = (DeviceScene.build(layers, on_host=flag) for flag in (True, False))
    np.testing.assert_array_equal(on_host.frame_prims, on_gpu.frame_prims)
    for name, array in on_gpu.arrays.items():
        np.testing.assert_array_equal(on_host.arrays[name].get(), array.get(), err_msg=name)
