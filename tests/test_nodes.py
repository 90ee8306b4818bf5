"""Every node executed as ComfyUI would: torch tensors in, torch tensors / overlays out."""

import json
import os
import sys
import types
from dataclasses import fields

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fake_comfy import Interrupted, install_progress_bar  # noqa: E402
from trackoverlay.nodes import NODE_CLASS_MAPPINGS  # noqa: E402
from trackoverlay.utils.draw.styles import BoxStyle, LineStyle  # noqa: E402
from trackoverlay.utils.graph.neighbours import GraphParams  # noqa: E402

BACKGROUND = 0.2
GREY = np.full(3, BACKGROUND, np.float32)  # the background as float32 stores it
PERCENT = "% of frame height"


# ------------------------------------------------------------------ helpers


def widget_defaults(node) -> dict:
    """Default value of every widget of ``node``."""
    spec = node.INPUT_TYPES()
    return {name: options["default"] for group in ("required", "optional")
            for name, (_, options) in spec.get(group, {}).items() if "default" in options}


def run(node_id: str, **inputs):
    """Execute a node with its widget defaults, overridden by ``inputs``; returns its outputs."""
    node = NODE_CLASS_MAPPINGS[f"TrackOverlay{node_id}"]
    result = getattr(node(), node.FUNCTION)(**{**widget_defaults(node), **inputs})
    return result["result"] if isinstance(result, dict) else result


def frames(count=1, height=60, width=80, value=BACKGROUND):
    """A grey IMAGE batch."""
    return torch.full((count, height, width, 3), value, dtype=torch.float32)


def make_tracks(points, visible=None, size=None) -> dict:
    """A TRACKS dict of torch tensors from [T, N, 2] points."""
    path = torch.as_tensor(np.asarray(points, np.float32).reshape(len(points), -1, 2))
    vis = torch.ones(path.shape[:2], dtype=torch.bool) if visible is None else torch.as_tensor(visible)
    result = {"track_path": path, "track_visibility": vis}
    if size is not None:
        result["track_size"] = torch.as_tensor(np.asarray(size, np.float32))
    return result


def render(image, overlay):
    """Render Overlay on the CPU backend."""
    return run("Render", image=image, overlay=overlay, backend="cpu")


def boxes_overlay(tracks, **widgets):
    """A Boxes overlay with hollow boxes unless told otherwise."""
    return run("Boxes", tracks=tracks, **{"fill_opacity": 0.0, **widgets})[0]


def snapshot(tensors: dict) -> dict:
    return {key: value.clone() for key, value in tensors.items()}


def assert_unchanged(tensors: dict, before: dict):
    for key, value in tensors.items():
        assert torch.equal(value, before[key]), f"{key} was modified"


# ------------------------------------------------------------- track sources


def square_frames(count=3, step=(2, 1)):
    """Frames with four bright 8x8 squares moving by ``step`` pixels per frame."""
    image = frames(count, 96, 128, 0.05)
    for t in range(count):
        for x, y in ((20, 20), (80, 24), (30, 60), (90, 66)):
            x0, y0 = x + step[0] * t, y + step[1] * t
            image[t, y0:y0 + 8, x0:x0 + 8] = 0.95
    return image


def test_detect_tracks_follows_moving_squares_and_keeps_input():
    image = square_frames()
    before = image.clone()
    (tracks,) = run("DetectTracks", image=image, min_distance=4.0, point_size=12.0)
    assert torch.equal(image, before)
    path, visible = tracks["track_path"], tracks["track_visibility"]
    assert path.dtype == torch.float32 and visible.dtype == torch.bool
    assert path.shape[0] == 3 and path.shape[1] >= 4 and tracks["track_size"].shape == path.shape
    assert torch.all(tracks["track_size"] == 12.0)
    both = visible[0] & visible[1]
    assert both.sum() >= 4
    motion = (path[1] - path[0])[both]
    np.testing.assert_allclose(motion.numpy(), np.tile([2.0, 1.0], (len(motion), 1)), atol=0.3)


def test_detect_tracks_accepts_one_hwc_image():
    (tracks,) = run("DetectTracks", image=square_frames(1)[0], min_distance=4.0)
    assert tracks["track_path"].shape[0] == 1 and tracks["track_visibility"].sum() >= 4


def test_detect_tracks_rejects_rgba_with_a_clear_error():
    with pytest.raises(ValueError, match=r"image must be an IMAGE of shape \[B, H, W, 3\].*\[1, 10, 10, 4\]"):
        run("DetectTracks", image=torch.zeros(1, 10, 10, 4))


def test_tracks_from_mask_centres_sizes_and_input_untouched():
    mask = torch.zeros(2, 50, 60)
    mask[0, 10:20, 5:15] = 1.0   # 10x10 region, centre (10, 15)
    mask[1, 12:22, 8:18] = 1.0   # moved by (3, 2)
    mask[:, 30:34, 40:46] = 1.0  # 6x4 region, still
    before = mask.clone()
    (tracks,) = run("TracksFromMask", mask=mask)
    assert torch.equal(mask, before)
    assert tracks["track_path"].shape == (2, 2, 2) and bool(tracks["track_visibility"].all())
    np.testing.assert_allclose(tracks["track_path"][:, 0].numpy(), [[10.0, 15.0], [13.0, 17.0]], atol=1e-5)
    np.testing.assert_allclose(tracks["track_path"][:, 1].numpy(), [[43.0, 32.0], [43.0, 32.0]], atol=1e-5)
    np.testing.assert_array_equal(tracks["track_size"][0].numpy(), [[10, 10], [6, 4]])


def test_tracks_from_mask_accepts_hw_mask():
    mask = torch.zeros(20, 20)
    mask[5:9, 5:9] = 1.0
    (tracks,) = run("TracksFromMask", mask=mask)
    assert tracks["track_path"].shape == (1, 1, 2)


def test_tracks_json_round_trip_is_exact():
    tracks = make_tracks(np.random.default_rng(1).random((3, 5, 2)) * 100,
                         visible=np.random.default_rng(2).random((3, 5)) > 0.3,
                         size=np.full((3, 5, 2), 7.5))
    before = snapshot(tracks)
    (text,) = run("TracksToJSON", tracks=tracks)
    assert_unchanged(tracks, before)
    (loaded,) = run("TracksFromJSON", json_or_path=text)
    assert set(loaded) == {"track_path", "track_visibility", "track_size"}
    visible = tracks["track_visibility"]
    assert torch.equal(loaded["track_visibility"], visible)
    assert torch.equal(loaded["track_path"][visible], tracks["track_path"][visible])
    assert torch.equal(loaded["track_size"], tracks["track_size"])


def test_tracks_from_json_errors_name_the_input(tmp_path):
    with pytest.raises(ValueError, match="json_or_path is empty"):
        run("TracksFromJSON", json_or_path="  ")
    with pytest.raises(ValueError, match="json_or_path is not valid JSON"):
        run("TracksFromJSON", json_or_path="{not json")
    missing = tmp_path / "none.json"
    with pytest.raises(FileNotFoundError, match=f"track file {missing} does not exist"):
        run("TracksFromJSON", json_or_path=str(missing))


@pytest.fixture
def fake_comfy_folders(tmp_path, monkeypatch):
    """A stand-in for ComfyUI's ``folder_paths`` with input/ and output/ under ``tmp_path``."""
    module = types.ModuleType("folder_paths")
    (tmp_path / "input").mkdir()
    (tmp_path / "output").mkdir()
    module.get_input_directory = lambda: str(tmp_path / "input")
    module.get_output_directory = lambda: str(tmp_path / "output")

    def get_save_image_path(prefix, output_dir):
        subfolder, name = os.path.split(prefix)
        return os.path.join(output_dir, subfolder), name, 1, subfolder, prefix

    module.get_save_image_path = get_save_image_path
    monkeypatch.setitem(sys.modules, "folder_paths", module)
    return tmp_path


def test_tracks_to_json_saves_under_the_output_folder(fake_comfy_folders):
    tracks = make_tracks([[[1.5, 2.5], [10, 20]]])
    result = NODE_CLASS_MAPPINGS["TrackOverlayTracksToJSON"]().to_json(tracks, filename_prefix="tracks/shot")
    (text,) = result["result"]
    assert result["ui"]["tracks_json"] == [{"filename": "shot_00001_.json", "subfolder": "tracks", "type": "output"}]
    saved = fake_comfy_folders / "output" / "tracks" / "shot_00001_.json"
    assert saved.read_text(encoding="utf-8") == text
    assert json.loads(text)["path"] == [[[1.5, 2.5], [10, 20]]]


def test_tracks_to_json_without_comfyui_only_returns_text(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "folder_paths", None)  # makes the import fail, as outside ComfyUI
    result = NODE_CLASS_MAPPINGS["TrackOverlayTracksToJSON"]().to_json(make_tracks([[[1, 2]]]), "shot")
    assert result["ui"]["tracks_json"] == [] and json.loads(result["result"][0])["tracks"] == 1
    assert list(tmp_path.iterdir()) == []


def test_tracks_from_json_reads_files_from_the_input_folder_and_notices_edits(fake_comfy_folders):
    (text,) = run("TracksToJSON", tracks=make_tracks([[[4, 5]]]))
    track_file = fake_comfy_folders / "input" / "shot.json"
    track_file.write_text(text, encoding="utf-8")
    (loaded,) = run("TracksFromJSON", json_or_path="shot.json")
    assert loaded["track_path"].tolist() == [[[4.0, 5.0]]]
    node = NODE_CLASS_MAPPINGS["TrackOverlayTracksFromJSON"]
    first = node.IS_CHANGED("shot.json")
    os.utime(track_file, (1_000_000, 1_000_000))
    assert node.IS_CHANGED("shot.json") == 1_000_000 != first
    assert node.IS_CHANGED(text) == ""


# ------------------------------------------------------------------ overlays


def test_line_links_draw_a_line_between_two_tracks():
    tracks = make_tracks([[[10.5, 30.5], [70.5, 30.5]]])
    (overlay,) = run("LineLinks", tracks=tracks, curve="straight", width=3.0, color="#FF0000")
    image = frames()
    out, layer, alpha = render(image, overlay)
    np.testing.assert_allclose(out[0, 30, 40].numpy(), [1.0, 0.0, 0.0], atol=1e-6)
    assert float(alpha[0, 30, 40]) == 1.0 and float(alpha[0, 10, 40]) == 0.0
    np.testing.assert_array_equal(out[0, 10, 40].numpy(), GREY)
    np.testing.assert_array_equal(out[0, 30, 75].numpy(), GREY)  # past the end cap


def test_line_links_graph_widgets_reach_the_graph():
    tracks = make_tracks([[[10, 10], [30, 10], [70, 10]]])
    (knn,) = run("LineLinks", tracks=tracks, k=1, curve="straight")
    (capped,) = run("LineLinks", tracks=tracks, k=2, max_length=25.0, curve="straight")
    (radius,) = run("LineLinks", tracks=tracks, mode="radius", radius=50.0, curve="straight")
    counts = [overlay[0].primitive_count for overlay in (knn, capped, radius)]
    assert counts == [2, 1, 2]


def test_line_links_bad_colour_names_the_field():
    with pytest.raises(ValueError, match="line color_end '#12' is not a colour"):
        run("LineLinks", tracks=make_tracks([[[1, 1], [5, 5]]]), color_end="#12")


def test_percent_units_need_a_reference_image():
    with pytest.raises(ValueError, match="units '% of frame height' needs the reference image.*pixels"):
        run("LineLinks", tracks=make_tracks([[[1, 1], [5, 5]]]), units=PERCENT)


def coverage(node_id, height, units, **widgets):
    """Total alpha of an overlay of three points drawn at ``height`` (positions scale with it)."""
    scale = height / 100.0
    tracks = make_tracks(np.array([[[30, 30], [70, 40], [50, 75]]]) * scale)
    image = frames(1, height, height)
    (overlay,) = run(node_id, tracks=tracks, units=units, reference=image, **widgets)
    return float(render(image, overlay)[2].sum())


@pytest.mark.parametrize("node_id, widgets, pixel_ratio", [
    ("Boxes", {"size": 20.0, "stroke_width": 2.0}, 1.0),  # pixel boxes keep their size
    ("LineLinks", {"width": 2.0, "pattern": "dashed", "dash_length": 8.0, "gap_length": 4.0}, 2.0),
])
def test_percent_units_give_proportional_sizes_at_two_resolutions(node_id, widgets, pixel_ratio):
    small, large = coverage(node_id, 100, PERCENT, **widgets), coverage(node_id, 200, PERCENT, **widgets)
    assert large / small == pytest.approx(4.0, rel=0.02)  # every length doubles: the area quadruples
    pixels = coverage(node_id, 200, "pixels", **widgets) / coverage(node_id, 100, "pixels", **widgets)
    assert pixels == pytest.approx(pixel_ratio, rel=0.05)  # pixel sizes ignore the resolution


def test_boxes_stroke_at_the_track_and_nothing_far_away():
    tracks = make_tracks([[[40, 30], [10, 10]]], visible=[[True, False]])
    before = snapshot(tracks)
    overlay = boxes_overlay(tracks, size=20.0, stroke_width=2.0, color="#00FF00")
    assert_unchanged(tracks, before)
    image = frames()
    out, layer, alpha = render(image, overlay)
    np.testing.assert_allclose(out[0, 30, 30].numpy(), [0.0, 1.0, 0.0], atol=1e-6)  # left edge, x = 30
    np.testing.assert_array_equal(out[0, 30, 40].numpy(), GREY)  # hollow centre
    np.testing.assert_array_equal(out[0, 10, 10].numpy(), GREY)  # invisible track
    assert float(alpha[0].sum()) == pytest.approx(float(alpha[0, 17:44, 27:54].sum()))


def test_boxes_fill_colour_and_track_sizes():
    tracks = make_tracks([[[40, 30]]], size=[[[30, 10]]])
    overlay = boxes_overlay(tracks, size_mode="track", stroke_width=0.0, fill_opacity=0.5,
                            fill_color="#FF0000", roundness=0.0)
    out, _, alpha = render(frames(value=0.0), overlay)
    np.testing.assert_allclose(out[0, 30, 40].numpy(), [0.5, 0.0, 0.0], atol=1e-6)
    assert float(alpha[0].sum()) == pytest.approx(30 * 10 * 0.5)


def test_boxes_draw_bounding_boxes_per_frame():
    tracks = make_tracks(np.zeros((2, 0, 2)))
    boxes = [[{"x": 10, "y": 10, "width": 20, "height": 10, "metadata": {}}], []]
    overlay = boxes_overlay(tracks, boxes=boxes, stroke_width=2.0, roundness=0.0)
    assert [entry.primitive_count for entry in overlay] == [1, 0]
    _, _, alpha = render(frames(2), overlay)
    assert float(alpha[0, 15, 10]) == 1.0 and float(alpha[0, 15, 20]) == 0.0
    assert float(alpha[1].sum()) == 0.0


def test_boxes_single_frame_bounding_boxes_repeat_over_tracks():
    tracks = make_tracks(np.full((3, 1, 2), 50.0))
    overlay = boxes_overlay(tracks, boxes=[{"x": 0, "y": 0, "width": 8, "height": 8}])
    assert [entry.primitive_count for entry in overlay] == [2, 2, 2]


def test_boxes_input_errors():
    tracks = make_tracks(np.zeros((3, 1, 2)))
    with pytest.raises(ValueError, match="tracks has 3 frames but boxes has 2"):
        boxes_overlay(tracks, boxes=[[], []])
    with pytest.raises(ValueError, match="boxes frame 0 box 0 is missing width"):
        boxes_overlay(tracks, boxes=[{"x": 0, "y": 0, "height": 8}])
    with pytest.raises(TypeError, match="boxes must be BOUNDING_BOXES"):
        boxes_overlay(tracks, boxes="0,0,8,8")


def test_merge_draws_later_inputs_on_top_and_repeats_single_frames():
    tracks = make_tracks(np.full((3, 1, 2), 30.0))
    red = boxes_overlay(tracks, fill_opacity=1.0, color="#FF0000")
    blue = boxes_overlay(make_tracks([[[30, 30]]]), fill_opacity=1.0, color="#0000FF")
    (merged,) = run("Merge", overlay_a=red, overlay_b=blue)
    assert len(merged) == 3
    out = render(frames(3), merged)[0]
    np.testing.assert_allclose(out[:, 30, 30].numpy(), np.tile([0.0, 0.0, 1.0], (3, 1)), atol=1e-6)
    (merged,) = run("Merge", overlay_a=blue, overlay_b=red, overlay_d=blue)
    np.testing.assert_allclose(render(frames(3), merged)[0][:, 30, 30].numpy(),
                               np.tile([0.0, 0.0, 1.0], (3, 1)), atol=1e-6)


def test_merge_errors_name_the_inputs():
    three = boxes_overlay(make_tracks(np.zeros((3, 1, 2))))
    two = boxes_overlay(make_tracks(np.zeros((2, 1, 2))))
    with pytest.raises(ValueError, match="overlay_a has 3 frames but overlay_c has 2"):
        run("Merge", overlay_a=three, overlay_b=three[:1], overlay_c=two)
    with pytest.raises(TypeError, match="overlay_b must be a TRACK_OVERLAY"):
        run("Merge", overlay_a=three, overlay_b=frames())


# -------------------------------------------------------------------- render


def moving_box_overlay(count):
    """One 10x10 filled box per frame, moving 10 pixels right each frame."""
    tracks = make_tracks([[[15 + 10 * t, 30]] for t in range(count)])
    return boxes_overlay(tracks, size=10.0, fill_opacity=1.0, roundness=0.0, stroke_width=0.0)


def test_render_outputs_layer_and_mask_consistent_with_the_composite():
    image = torch.rand(3, 60, 80, 3, generator=torch.Generator().manual_seed(0))
    before = image.clone()
    tracks = make_tracks(np.array([[[20, 20], [60, 40]]] * 3) + np.arange(3)[:, None, None])
    (links,) = run("LineLinks", tracks=tracks, color_mode="track", opacity=0.7)
    out, layer, alpha = render(image, run("Merge", overlay_a=links, overlay_b=boxes_overlay(tracks))[0])
    assert torch.equal(image, before)
    for tensor, shape in ((out, (3, 60, 80, 3)), (layer, (3, 60, 80, 3)), (alpha, (3, 60, 80))):
        assert tensor.shape == shape and tensor.dtype == torch.float32 and tensor.device.type == "cpu"
    assert bool(((alpha > 0) & (alpha < 1)).any()) and float(alpha.max()) == 1.0  # anti-aliased edges
    expected = layer * alpha[..., None] + image * (1.0 - alpha[..., None])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)


def test_render_broadcasts_one_image_over_an_animated_overlay():
    out, _, alpha = render(frames(1), moving_box_overlay(3))
    assert out.shape[0] == 3
    assert [float(alpha[t, 30, 15 + 10 * t]) for t in range(3)] == [1.0, 1.0, 1.0]
    assert float(alpha[0, 30, 35]) == 0.0


def test_render_repeats_one_overlay_over_a_batch():
    image = frames(4) + torch.arange(4).view(4, 1, 1, 1) * 0.1
    out, _, alpha = render(image, moving_box_overlay(1))
    assert out.shape[0] == 4 and torch.equal(alpha, alpha[:1].expand(4, -1, -1))
    torch.testing.assert_close(out[:, 0, 0], image[:, 0, 0], atol=0, rtol=0)


def test_render_mismatched_batches_name_both_counts():
    with pytest.raises(ValueError, match="the image batch has 3 frames but the overlay frames have 2"):
        render(frames(3), moving_box_overlay(2))


def test_render_empty_tracks_leave_frames_unchanged():
    image = torch.rand(2, 30, 40, 3, generator=torch.Generator().manual_seed(3))
    empty = make_tracks(np.zeros((2, 0, 2)))
    (overlay,) = run("Merge", overlay_a=run("LineLinks", tracks=empty)[0], overlay_b=boxes_overlay(empty))
    out, layer, alpha = render(image, overlay)
    assert torch.equal(out, image) and not out.data_ptr() == image.data_ptr()
    assert float(layer.abs().sum()) == 0.0 and float(alpha.abs().sum()) == 0.0


def test_render_accepts_hwc_and_half_precision_images():
    out, _, _ = render(frames(1)[0].half(), moving_box_overlay(1))
    assert out.shape == (1, 60, 80, 3) and out.dtype == torch.float32


@pytest.fixture
def fake_progress_bar(monkeypatch):
    """A stand-in ``comfy.utils.ProgressBar`` recording its updates; ``stop_at`` raises like an interrupt."""
    return install_progress_bar(monkeypatch)


def test_render_updates_the_progress_bar_per_frame(fake_progress_bar):
    _, calls = fake_progress_bar
    render(frames(1), moving_box_overlay(3))
    assert calls == [("total", 3), (1, 3), (2, 3), (3, 3)]


def test_render_stops_when_the_progress_bar_raises(fake_progress_bar):
    bar, calls = fake_progress_bar
    bar.stop_at = 2
    with pytest.raises(Interrupted):
        render(frames(1), moving_box_overlay(3))
    assert calls[-1] == (2, 3)


def test_render_rejects_a_non_overlay():
    with pytest.raises(TypeError, match="overlay must be a TRACK_OVERLAY"):
        render(frames(), {"track_path": torch.zeros(1, 1, 2)})


@pytest.mark.gpu
def test_render_on_the_gpu_matches_the_cpu():
    image = torch.rand(2, 64, 96, 3, generator=torch.Generator().manual_seed(5))
    before = image.clone()
    tracks = make_tracks(np.array([[[20, 20], [70, 30], [45, 50]]] * 2) + np.arange(2)[:, None, None])
    (links,) = run("LineLinks", tracks=tracks, curve="cubic", pattern="dashed", gradient=True)
    (overlay,) = run("Merge", overlay_a=links, overlay_b=boxes_overlay(tracks, fill_opacity=0.3))
    cpu = render(image, overlay)
    gpu = run("Render", image=image, overlay=overlay, backend="gpu")
    assert torch.equal(image, before)
    for on_cpu, on_gpu in zip(cpu, gpu):
        assert on_gpu.dtype == torch.float32 and on_gpu.device.type == "cpu" and on_gpu.shape == on_cpu.shape
    premultiplied = [layer * alpha[..., None] for _, layer, alpha in (cpu, gpu)]  # straight rgb: unstable near 0
    for on_cpu, on_gpu in ((cpu[0], gpu[0]), (cpu[2], gpu[2]), premultiplied):
        assert float((on_gpu - on_cpu).abs().max()) <= 2 / 255


def test_backend_info_reports_the_cpu_choice():
    (text,) = run("BackendInfo", backend="cpu")
    assert text.startswith("requested: cpu\nselected: cpu (requested)")


def test_backend_info_reports_rather_than_fails_for_gpu():
    (text,) = run("BackendInfo", backend="gpu")
    assert text.startswith("requested: gpu\nselected: ")
    assert "selected: gpu" in text or "choose backend 'cpu'" in text


# ------------------------------------------------------ widgets <-> engine


@pytest.mark.parametrize("node_id, engine", [
    ("LineLinks", (GraphParams, LineStyle)),
    ("Boxes", (BoxStyle,)),
])
def test_every_style_widget_reaches_the_engine(node_id, engine):
    node = NODE_CLASS_MAPPINGS[f"TrackOverlay{node_id}"]
    spec = node.INPUT_TYPES()
    widgets = set(spec["required"]) - {"tracks", "units"}
    assert widgets == {field.name for cls in engine for field in fields(cls)}
