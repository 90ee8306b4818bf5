"""Every node executed as ComfyUI would: torch tensors in, torch tensors / overlays out."""

import json
import os
import sys
import tracemalloc
import types
from dataclasses import fields

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fake_comfy import (  # noqa: E402
    WIDGET_TYPES,
    ExecutionBlocker,
    FakeDynamicPrompt,
    Hidden,
    Interrupted,
    install_comfy_api,
    install_progress_bar,
)

install_comfy_api()

from trackoverlay.nodes.extension import NODES  # noqa: E402
from trackoverlay.utils.draw.styles import BoxStyle, LabelStyle, LineStyle, TrailStyle  # noqa: E402
from trackoverlay.utils.graph.neighbours import GraphParams  # noqa: E402
from trackoverlay.utils.raster import cpu  # noqa: E402
from trackoverlay.utils.tracks.demo import DemoClip  # noqa: E402

NODE_BY_ID = {node.GET_SCHEMA().node_id: node for node in NODES}

BACKGROUND = 0.2
GREY = np.full(3, BACKGROUND, np.float32)  # the background as float32 stores it
PERCENT = "% of frame height"


# ------------------------------------------------------------------ helpers


def widget_defaults(node) -> dict:
    """Default value of every widget of ``node``."""
    return {item.id: item.default for item in node.GET_SCHEMA().inputs if issubclass(item.Parent, WIDGET_TYPES)}


def execute(node_id: str, hidden: dict | None = None, **inputs):
    """Execute a node as ComfyUI does (a clone holding the hidden inputs) with its widget defaults, overridden
    by ``inputs``; returns its NodeOutput."""
    node = NODE_BY_ID[f"TrackOverlay{node_id}"]
    return node.PREPARE_CLASS_CLONE(hidden).execute(**{**widget_defaults(node), **inputs})


def run(node_id: str, **inputs):
    """Execute a node with its widget defaults, overridden by ``inputs``; returns its outputs."""
    return tuple(execute(node_id, **inputs).args)


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
    (text,) = run("TracksToJSON", tracks={**tracks, "track_frame_size": [640, 360]})
    assert run("TracksFromJSON", json_or_path=text)[0]["track_frame_size"] == [640, 360]
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
    result = execute("TracksToJSON", tracks=tracks, filename_prefix="tracks/shot")
    (text,) = result.args
    assert result.ui["tracks_json"] == [{"filename": "shot_00001_.json", "subfolder": "tracks", "type": "output"}]
    saved = fake_comfy_folders / "output" / "tracks" / "shot_00001_.json"
    assert saved.read_text(encoding="utf-8") == text
    assert json.loads(text)["path"] == [[[1.5, 2.5], [10, 20]]]


def test_tracks_to_json_without_comfyui_only_returns_text(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "folder_paths", None)  # makes the import fail, as outside ComfyUI
    result = execute("TracksToJSON", tracks=make_tracks([[[1, 2]]]), filename_prefix="shot")
    assert result.ui["tracks_json"] == [] and json.loads(result.args[0])["tracks"] == 1
    assert list(tmp_path.iterdir()) == []


def test_tracks_from_json_finds_what_tracks_to_json_saved_in_the_output_folder(fake_comfy_folders):
    """Tracks To JSON saves under output/; the same relative name used to be looked up in input/ only."""
    run("TracksToJSON", tracks=make_tracks([[[4, 5]]]), filename_prefix="tracks/shot")
    (loaded,) = run("TracksFromJSON", json_or_path="tracks/shot_00001_.json")
    assert loaded["track_path"].tolist() == [[[4.0, 5.0]]]
    (fake_comfy_folders / "input" / "tracks").mkdir()  # a file of that name in input/ comes first
    (other,) = run("TracksToJSON", tracks=make_tracks([[[7, 8]]]))
    (fake_comfy_folders / "input" / "tracks" / "shot_00001_.json").write_text(other, encoding="utf-8")
    (loaded,) = run("TracksFromJSON", json_or_path="tracks/shot_00001_.json")
    assert loaded["track_path"].tolist() == [[[7.0, 8.0]]]
    with pytest.raises(FileNotFoundError, match="input"):
        run("TracksFromJSON", json_or_path="tracks/missing.json")


def test_tracks_from_json_reads_files_from_the_input_folder_and_notices_edits(fake_comfy_folders):
    (text,) = run("TracksToJSON", tracks=make_tracks([[[4, 5]]]))
    track_file = fake_comfy_folders / "input" / "shot.json"
    track_file.write_text(text, encoding="utf-8")
    (loaded,) = run("TracksFromJSON", json_or_path="shot.json")
    assert loaded["track_path"].tolist() == [[[4.0, 5.0]]]
    fingerprint = NODE_BY_ID["TrackOverlayTracksFromJSON"].fingerprint_inputs
    first = fingerprint(json_or_path="shot.json")
    assert first and fingerprint(json_or_path="shot.json") == first  # unchanged file: ComfyUI may reuse
    stat = track_file.stat()
    (edited,) = run("TracksToJSON", tracks=make_tracks([[[6, 5]]]))  # same length, other content
    track_file.write_text(edited, encoding="utf-8")
    os.utime(track_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with the old time stamp
    assert fingerprint(json_or_path="shot.json") not in ("", first)
    os.utime(track_file, (1_000_000, 1_000_000))
    assert fingerprint(json_or_path="shot.json").startswith("1000000000000000:")
    assert fingerprint(json_or_path=text) == "" and fingerprint(json_or_path="missing.json") == ""


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


def test_line_links_draw_the_delaunay_triangulation_and_the_spanning_tree():
    square = make_tracks([[[10, 10], [50, 10], [10, 50], [50, 50], [30, 30]]])  # a square and its centre
    (mesh,) = run("LineLinks", tracks=square, mode="delaunay", curve="straight")
    (tree,) = run("LineLinks", tracks=square, mode="mst", curve="straight")
    (short,) = run("LineLinks", tracks=square, mode="delaunay", max_length=30.0, curve="straight")
    assert [overlay[0].primitive_count for overlay in (mesh, tree, short)] == [8, 4, 4]  # 4 sides of 40 px dropped
    widget = next(item for item in NODE_BY_ID["TrackOverlayLineLinks"].GET_SCHEMA().inputs if item.id == "mode")
    assert widget.options == ["knn", "radius", "delaunay", "mst"]


def test_line_links_and_boxes_colour_by_speed_and_age_through_the_gradient():
    tracks = make_tracks([[[10, 10], [60, 10]], [[13, 14], [60, 10]], [[13, 14], [60, 20]]])  # moves of 5 and 10
    reference = frames(1, height=200)  # 5 % of 200 px = 10 px per frame reaches the last colour
    (links,) = run("LineLinks", tracks=tracks, k=1, color_mode="speed", gradient_colors="#000000,#FFFFFF",
                   gradient=True, units=PERCENT, reference=reference, speed_range=5.0, width=0.5, opacity=1.0)
    np.testing.assert_allclose(links[1].layers[0].color_start, [[0.5, 0.5, 0.5, 1.0]], atol=1e-6)  # track 0: 5 px
    np.testing.assert_allclose(links[1].layers[0].color_end, [[0, 0, 0, 1.0]], atol=1e-6)  # track 1: still
    np.testing.assert_allclose(links[2].layers[0].color_end, [[1, 1, 1, 1.0]], atol=1e-6)  # track 1: 10 px
    extra = [{"x": 0, "y": 0, "width": 4, "height": 4}]
    (boxes,) = run("Boxes", tracks=tracks, color_mode="age", gradient_colors="#FF0000,#0000FF", age_range=2.0,
                   boxes=extra, opacity=1.0)
    np.testing.assert_allclose(boxes[2].layers[0].stroke_color, [[0, 0, 1, 1], [0, 0, 1, 1]], atol=1e-6)
    np.testing.assert_allclose(boxes[1].layers[0].stroke_color, [[0.5, 0, 0.5, 1]] * 2, atol=1e-6)
    np.testing.assert_allclose(boxes[0].layers[1].stroke_color, [[1, 0, 0, 1]], atol=1e-6)  # given boxes: still, new
    cut = {**tracks, "track_cuts": [2]}  # frame 2 starts a new shot: track 1's jump there is no motion
    (links,) = run("LineLinks", tracks=cut, k=1, color_mode="speed", gradient_colors="#000000,#FFFFFF",
                   gradient=True, units=PERCENT, reference=reference, speed_range=5.0, width=0.5, opacity=1.0)
    np.testing.assert_allclose(links[2].layers[0].color_end, [[0, 0, 0, 1.0]], atol=1e-6)
    (boxes,) = run("Boxes", tracks=cut, color_mode="speed", gradient_colors="#000000,#FFFFFF", opacity=1.0,
                   units=PERCENT, reference=reference, speed_range=5.0)
    np.testing.assert_allclose(boxes[2].layers[0].stroke_color, [[0, 0, 0, 1]] * 2, atol=1e-6)
    np.testing.assert_allclose(boxes[1].layers[0].stroke_color, [[0.5, 0.5, 0.5, 1], [0, 0, 0, 1]], atol=1e-6)
    with pytest.raises(ValueError, match="box gradient_colors '#0000FF' must name at least 2 colours"):
        run("Boxes", tracks=tracks, color_mode="age", gradient_colors="#0000FF")
    with pytest.raises(ValueError, match="line gradient_colors entry 2 'blue' is not a colour"):
        run("LineLinks", tracks=tracks, color_mode="speed", gradient_colors="#FF0000, blue")


def test_line_links_bad_colour_names_the_field():
    with pytest.raises(ValueError, match="line color_end '#12' is not a colour"):
        run("LineLinks", tracks=make_tracks([[[1, 1], [5, 5]]]), color_end="#12")


def test_percent_units_need_a_frame_height():
    with pytest.raises(ValueError, match="units '% of frame height' needs the frame height: connect the frames to "
                                         "'reference'.*pixels"):
        run("LineLinks", tracks=make_tracks([[[1, 1], [5, 5]]]), units=PERCENT)


def sized_tracks(points, width=80, height=60) -> dict:
    """:func:`make_tracks` that carry the size of the frames they were found on, as this pack's track nodes'."""
    return {**make_tracks(points), "track_frame_size": [width, height]}


@pytest.mark.parametrize("node_id, widgets", [
    ("LineLinks", {"width": 5.0}), ("Boxes", {"size": 20.0, "stroke_width": 3.0}), ("Trails", {"width": 4.0}),
    ("Labels", {"size": 20.0}),
])
def test_percent_units_take_the_height_the_tracks_carry(node_id, widgets):
    """Tracks that carry their frame size need no 'reference': the overlay is the one drawn with it."""
    tracks = sized_tracks([[[20, 15], [60, 40]], [[24, 17], [63, 44]]], width=100, height=200)
    (carried,) = run(node_id, tracks=tracks, units=PERCENT, **widgets)
    (given,) = run(node_id, tracks=tracks, units=PERCENT, reference=frames(2, 200, 100), **widgets)
    image = frames(2, 200, 100, value=0.0)
    assert float(render(image, carried)[0].sum()) > 0
    assert torch.equal(render(image, carried)[0], render(image, given)[0])
    assert carried[0].frame_size == (100, 200)


@pytest.mark.parametrize("node_id", ["LineLinks", "Boxes", "Trails", "Labels"])
def test_overlays_refuse_a_reference_of_another_size_than_the_tracks(node_id):
    tracks = sized_tracks([[[20, 15], [60, 40]]], width=80, height=60)
    with pytest.raises(ValueError, match=r"the tracks belong to 80x60 frames but 'reference' is 160x120, so the "
                                         r"points would land in the wrong places.*resize 'reference' to 80x60"):
        run(node_id, tracks=tracks, reference=frames(1, 120, 160))
    run(node_id, tracks=tracks, reference=frames(1, 60, 80))  # the tracks' own size


@pytest.mark.parametrize("node_id", ["Render", "RenderLayer"])
def test_render_refuses_frames_of_another_size_than_the_overlays_tracks(node_id):
    """Detect Tracks on 128x96 frames, drawn on frames twice as large: the points would all sit in the top-left
    quarter. Render names both sizes and the fix instead."""
    image = square_frames()
    (tracks,) = run("DetectTracks", image=image, min_distance=4.0)
    assert tracks["track_frame_size"] == [128, 96]
    (overlay,) = run("Boxes", tracks=tracks)
    larger = torch.nn.functional.interpolate(image.permute(0, 3, 1, 2), scale_factor=2).permute(0, 2, 3, 1)
    with pytest.raises(ValueError, match="the overlay's points belong to 128x96 frames but the image batch is "
                                         "256x192"):
        run(node_id, image=larger, overlay=overlay, backend="cpu")
    assert run(node_id, image=image, overlay=overlay, backend="cpu")[0].shape[1:3] == (96, 128)


@pytest.mark.parametrize("node_id", ["Render", "RenderLayer"])
def test_render_stops_inside_a_frame_when_comfyui_is_interrupted(monkeypatch, node_id):
    """The renderer checks ComfyUI's interrupt flag as it draws, not only between frames (a frame of very wide
    lines took minutes): with the flag set, the node raises ComfyUI's interrupt before a frame is done."""
    class InterruptProcessingException(BaseException):
        pass

    management = types.ModuleType("comfy.model_management")
    management.InterruptProcessingException = InterruptProcessingException
    management.processing_interrupted = lambda: True
    comfy = types.ModuleType("comfy")
    comfy.model_management = management
    monkeypatch.setitem(sys.modules, "comfy", comfy)
    monkeypatch.setitem(sys.modules, "comfy.model_management", management)
    (overlay,) = run("LineLinks", tracks=make_tracks([[[10, 10], [70, 50], [40, 20]]]))
    with pytest.raises(InterruptProcessingException):
        run(node_id, image=frames(), overlay=overlay, backend="cpu")
    management.processing_interrupted = lambda: False
    assert run(node_id, image=frames(), overlay=overlay, backend="cpu")[0].shape[0] == 1


def test_tracks_without_a_frame_size_draw_on_any_frames():
    """Core's TRACKS (GenerateTracks, ...) carry no frame size: nothing to check them against."""
    (overlay,) = run("Boxes", tracks=make_tracks([[[20, 15]]]))
    assert overlay[0].frame_size is None
    assert render(frames(1, 300, 400), overlay)[0].shape == (1, 300, 400, 3)


def test_a_percent_size_over_the_engine_limit_is_named_in_percent_too():
    """300 % of a 360 px frame is 1080 px, over the 1000 px that plate padding may be: the error used to quote
    only 1080.0, a number the user never typed."""
    with pytest.raises(ValueError, match=r"got 1080\.0 \(% of frame height is 3\.6 px per % on these frames: "
                                         r"plate_padding 300 % = 1080 px; lower the size, or give it in pixels\)"):
        run("Labels", tracks=make_tracks([[[10, 10], [50, 50]]]), units=PERCENT, reference=frames(1, 360, 640),
            plate_padding=300.0)


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


def sliding_track(frames=12, step=4.0):
    """One track moving right ``step`` px per frame along y = 30.5, from x = 10.5."""
    x = 10.5 + step * np.arange(frames)
    return make_tracks(np.stack([x, np.full(frames, 30.5)], axis=-1)[:, None])


def test_trails_draw_a_tapering_fading_line_behind_the_track():
    tracks = sliding_track()
    before = snapshot(tracks)
    (overlay,) = run("Trails", tracks=tracks, length=8, width=4.0, taper=0.5, fade=1.0, smoothing=0.0,
                     color="#FF0000", opacity=1.0)
    assert_unchanged(tracks, before)
    assert [entry.primitive_count for entry in overlay] == [0] + [1] * 11
    out, _, alpha = render(frames(12, value=0.0), overlay)
    np.testing.assert_allclose(out[11, 30, 54].numpy(), [1.0, 0.0, 0.0], atol=1e-6)  # the head, on the point
    # halfway along the 28 px trail: age 3.5 of 7, so alpha 0.5 and half width 2 x 0.75 = 1.5 px
    np.testing.assert_allclose(out[11, 31, 40].numpy(), [0.5, 0.0, 0.0], atol=1e-6)
    assert float(alpha[11, 32, 40]) == 0.0 and float(alpha[11, 32, 54]) == 0.5  # the 4 px head's edge
    assert float(alpha[11, 30, 20]) == 0.0  # behind the tail (x = 26.5)


def test_trails_width_follows_the_units():
    tracks = sliding_track()
    (overlay,) = run("Trails", tracks=tracks, units=PERCENT, reference=frames(1, 200, 120), width=2.0, taper=0.0,
                     fade=1.0, smoothing=0.0)
    assert overlay[-1].layers[0].width.tolist() == [4.0]  # 2 % of 200 px
def test_labels_write_the_track_id_beside_its_box_and_stay_in_the_frame():
    tracks = make_tracks([[[40, 30], [78, 58]], [[40, 30], [78, 58]]], visible=[[True, True], [True, False]])
    before = snapshot(tracks)
    (overlay,) = run("Labels", tracks=tracks, color="#00FF00", plate_opacity=0.0, placement="right", box_size=10.0,
                     margin=2.0, reference=frames(2))
    assert_unchanged(tracks, before)
    assert len(overlay) == 2 and [entry.primitive_count for entry in overlay] == [2, 1]  # one glyph per "0", "1"
    out, _, alpha = render(frames(2, value=0.0), overlay)
    green = (out[0, :, :, 1] > 0.5) & (out[0, :, :, 0] < 0.1)
    rows, columns = np.nonzero(green.numpy())
    assert columns[rows < 45].min() >= 40 + 5 + 2  # right of the first box
    assert columns.max() < 80 and rows.max() < 60  # the second label was pushed back inside the 80x60 frame
    assert float(alpha[1, 45:, 60:].sum()) == 0.0  # its track is hidden in frame 1


def test_labels_take_the_tracks_own_text_and_font_from_the_input_folder(fake_comfy_folders):
    import shutil

    from trackoverlay.utils.draw.glyphs import DEFAULT_FONT

    shutil.copy(DEFAULT_FONT, fake_comfy_folders / "input" / "mine.ttf")
    tracks = {**make_tracks([[[20, 20], [60, 40]]]), "track_text": ["AB", ""]}
    (overlay,) = run("Labels", tracks=tracks, text="track_text", font="mine.ttf")
    assert overlay[0].primitive_count == 1 + 2  # one plate, two glyphs; the empty text draws nothing
    with pytest.raises(ValueError, match="input/missing.ttf' does not exist"):
        run("Labels", tracks=tracks, font="missing.ttf")


def test_labels_format_percent_units_and_errors():
    tracks = make_tracks([[[20, 20]]])
    (small,) = run("Labels", tracks=tracks, text="format", format="{id:03d}", units=PERCENT, size=10.0,
                   reference=frames(height=60))
    (large,) = run("Labels", tracks=tracks, text="format", format="{id:03d}", units=PERCENT, size=10.0,
                   reference=frames(height=120))
    glyphs = [entry[0].layers[1] for entry in (small, large)]
    assert glyphs[0].count == glyphs[1].count == 3
    assert glyphs[1].size[:, 1].sum() > 1.6 * glyphs[0].size[:, 1].sum()  # 12 px vs 6 px glyphs
    with pytest.raises(ValueError, match=r"label format '\{nope\}' uses \{nope\}"):
        run("Labels", tracks=tracks, text="format", format="{nope}")
    with pytest.raises(ValueError, match="needs text per track"):
        run("Labels", tracks=tracks, text="track_text")



def test_labels_sized_in_percent_fit_the_fonts_range_on_tiny_and_huge_frames(caplog):
    tracks = make_tracks([[[4, 4]]])
    (tiny,) = run("Labels", tracks=tracks, units=PERCENT, size=1.7, reference=frames(height=40, width=40))
    (huge,) = run("Labels", tracks=tracks, units=PERCENT, size=100.0, reference=frames(height=600, width=40))
    (one,) = run("Labels", tracks=tracks, size=1.0)
    (most,) = run("Labels", tracks=tracks, size=512.0)
    for fitted, pixels in ((tiny, one), (huge, most)):  # drawn at 1 px and at 512 px, not refused
        np.testing.assert_array_equal(fitted[0].layers[1].size, pixels[0].layers[1].size)
    assert caplog.text.count("labels are drawn at") == 2 and "0.68 px" in caplog.text
    with pytest.raises(ValueError, match=r"label size must be a number in \[1, 512\], got 0.5"):
        run("Labels", tracks=tracks, size=0.5)  # pixels given out of range are refused

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
    small, large = (boxes_overlay(sized_tracks([[[20, 15]]], width, height)) for width, height in ((80, 60), (160, 120)))
    with pytest.raises(ValueError, match="overlay_a was built for 80x60 frames but overlay_c for 160x120 frames"):
        run("Merge", overlay_a=small, overlay_b=three, overlay_c=large)
    (merged,) = run("Merge", overlay_a=three, overlay_b=small)  # core tracks (no size) go with any
    assert [entry.frame_size for entry in merged] == [(80, 60)] * 3


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
    with pytest.raises(ValueError, match="the image batch has 3 frames but the overlay has 2"):
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


def test_demo_clip_fills_the_progress_bar_frame_by_frame_and_stops_when_it_raises(fake_progress_bar):
    bar, calls = fake_progress_bar
    run("DemoClip", width=64, height=48, frame_count=4, dots=3)
    assert calls == [("total", 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    calls.clear()
    bar.stop_at = 2  # a long clip is cancelled while its frames are made, not after
    with pytest.raises(Interrupted):
        run("DemoClip", width=64, height=48, frame_count=400, dots=3)
    assert calls[-1] == (2, 400)


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


def test_render_glow_is_off_by_default_and_its_radius_follows_the_frame_height(busy_scene):
    from trackoverlay.utils.raster.batch import render_batch, render_layers
    from trackoverlay.utils.raster.cpu import CpuRenderer
    from trackoverlay.utils.raster.glow import Glow

    image, overlay = busy_scene  # 72 px tall: 5 % of its height is 3.6 px
    defaults = widget_defaults(NODE_BY_ID["TrackOverlayRender"])
    assert defaults["glow_strength"] == 0.0 and defaults["glow_radius"] == 1.5
    plain = render(image, overlay)
    glowing = run("Render", image=image, overlay=overlay, backend="cpu", glow_radius=5.0, glow_strength=2.0)
    want = render_batch(image.numpy(), overlay, CpuRenderer(workers=1), with_layer=True,
                        glow=Glow(radius=3.6, strength=2.0))
    for got, expected in zip(glowing, (want.frames, want.layer_rgb, want.layer_alpha), strict=True):
        np.testing.assert_allclose(got.numpy(), expected, atol=1e-6)
    assert float((glowing[2] - plain[2]).min()) >= 0 and float((glowing[2] - plain[2]).max()) > 0.3
    layer, alpha = run("RenderLayer", image=image, overlay=overlay, backend="cpu", glow_radius=5.0, glow_strength=2.0)
    rgb, want_alpha = render_layers(overlay, 6, 72, 96, CpuRenderer(workers=1), glow=Glow(radius=3.6, strength=2.0))
    np.testing.assert_allclose(alpha.numpy(), want_alpha, atol=1e-6)
    np.testing.assert_allclose(layer.numpy(), rgb, atol=1e-6)


def test_render_layers_draws_frames_at_once_as_one_at_a_time(busy_scene):
    """The CPU renderer rasterises several layer frames at once: the same pixels as one at a time, and the
    progress still counts 1..n in order."""
    from trackoverlay.utils.raster.batch import render_layers
    from trackoverlay.utils.raster.cpu import CpuRenderer

    _, overlay = busy_scene
    serial = render_layers(overlay, 6, 72, 96, CpuRenderer(workers=1))
    seen = []
    together = render_layers(overlay, 6, 72, 96, CpuRenderer(workers=4, frames_at_once=4),
                             progress=lambda done, total: seen.append((done, total)))
    for got, want in zip(together, serial, strict=True):
        np.testing.assert_array_equal(got, want)
    assert seen == [(done, 6) for done in range(1, 7)] and float(serial[1].max()) > 0.5


def test_render_refuses_a_glow_strength_out_of_range(busy_scene):
    image, overlay = busy_scene
    with pytest.raises(ValueError, match=r"glow strength must be a number in \[0, 20\], got -1"):
        run("Render", image=image, overlay=overlay, backend="cpu", glow_strength=-1.0)


# ------------------------------------- layer outputs: built only where they are read


def render_in_graph(image, overlay, read_slots, node_id="7"):
    """Render Overlay run as node ``node_id`` of a graph whose other nodes read ``read_slots`` of it."""
    prompt = {node_id: {"class_type": "TrackOverlayRender", "inputs": {"image": ["1", 0], "overlay": ["2", 0]}}}
    for index, slot in enumerate(read_slots):
        prompt[f"r{index}"] = {"class_type": "PreviewAny", "inputs": {"source": [node_id, slot], "other": 3}}
    prompt["x"] = {"class_type": "PreviewAny", "inputs": {"source": ["99", 1]}}  # another node's slot 1
    hidden = {Hidden.unique_id: node_id, Hidden.dynprompt: FakeDynamicPrompt(prompt)}
    return execute("Render", hidden=hidden, image=image, overlay=overlay, backend="cpu").args


def peak_bytes(action) -> int:
    """Peak bytes allocated while ``action()`` runs (NumPy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def busy_scene():
    image = torch.rand(6, 72, 96, 3, generator=torch.Generator().manual_seed(8))
    tracks = make_tracks(np.array([[[20, 20], [70, 30], [45, 60]]] * 6) + np.arange(6)[:, None, None])
    (links,) = run("LineLinks", tracks=tracks, color_mode="track", opacity=0.8)
    (overlay,) = run("Merge", overlay_a=links, overlay_b=boxes_overlay(tracks, fill_opacity=0.3))
    return image, overlay


def test_render_builds_no_layer_when_only_the_image_is_read(busy_scene):
    image, overlay = busy_scene
    out, layer, alpha = render_in_graph(image, overlay, read_slots=[0])
    assert torch.equal(out, render(image, overlay)[0])  # identical frames either way
    for blocked in (layer, alpha):  # a later graph reading them from ComfyUI's cache stops with the fix
        assert isinstance(blocked, ExecutionBlocker) and "Use Render Layer" in blocked.message


@pytest.mark.parametrize("slot", [1, 2])
def test_render_builds_the_layer_when_either_layer_output_is_read(busy_scene, slot):
    image, overlay = busy_scene
    reference = render(image, overlay)
    result = render_in_graph(image, overlay, read_slots=[slot])
    for built, expected in zip(result, reference):
        assert torch.equal(built, expected)


def test_render_without_the_layer_allocates_no_layer_arrays(busy_scene, monkeypatch):
    monkeypatch.setattr(cpu, "FRAMES_AT_ONCE", 1)  # the working memory of one frame at a time, not of several
    image = busy_scene[0].repeat(1, 4, 4, 1)  # [6, 288, 384, 3]: arrays big enough to dominate the peak
    (overlay,) = run("Merge", overlay_a=busy_scene[1], overlay_b=busy_scene[1])
    frame_bytes = image.numel() * 4
    image_only = peak_bytes(lambda: render_in_graph(image, overlay, read_slots=[0]))
    with_layer = peak_bytes(lambda: render_in_graph(image, overlay, read_slots=[0, 1]))
    assert image_only < 1.3 * frame_bytes  # the composite only (plus small per-frame buffers)
    assert with_layer - image_only > 1.2 * frame_bytes  # layer rgb (1x) + alpha (1/3x)


def test_render_layer_equals_the_layer_outputs_and_builds_no_composite(busy_scene, monkeypatch):
    monkeypatch.setattr(cpu, "FRAMES_AT_ONCE", 1)  # the working memory of one frame at a time, not of several
    image, overlay = busy_scene
    _, layer, alpha = render(image, overlay)
    rendered_layer, rendered_alpha = run("RenderLayer", image=image, overlay=overlay, backend="cpu")
    assert torch.equal(rendered_layer, layer) and torch.equal(rendered_alpha, alpha)
    big = image.repeat(1, 4, 4, 1)
    frame_bytes = big.numel() * 4
    peak = peak_bytes(lambda: run("RenderLayer", image=big, overlay=overlay, backend="cpu"))
    assert peak < 1.6 * frame_bytes  # layer (1x) + alpha (1/3x), no composited copy of the frames


def test_render_layer_repeats_one_frame_or_one_overlay_and_names_mismatches():
    layer, alpha = run("RenderLayer", image=frames(1), overlay=moving_box_overlay(3), backend="cpu")
    assert layer.shape == (3, 60, 80, 3) and alpha.shape == (3, 60, 80)
    assert [float(alpha[t, 30, 15 + 10 * t]) for t in range(3)] == [1.0, 1.0, 1.0]
    layer, alpha = run("RenderLayer", image=frames(4), overlay=moving_box_overlay(1), backend="cpu")
    assert alpha.shape[0] == 4 and torch.equal(alpha, alpha[:1].expand(4, -1, -1))
    with pytest.raises(ValueError, match="the image batch has 3 frames but the overlay has 2"):
        run("RenderLayer", image=frames(3), overlay=moving_box_overlay(2), backend="cpu")


# ------------------------------------------------------------------ demo clip


def test_demo_clip_outputs_frames_true_tracks_and_a_video_with_sound():
    frames_out, tracks, video, audio = run("DemoClip", width=64, height=48, frame_count=5, fps=10.0, dots=3,
                                           variant=4)
    clip = DemoClip(64, 48, 5, fps=10.0, dots=3, seed=4)
    assert frames_out.shape == (5, 48, 64, 3) and frames_out.dtype == torch.float32
    np.testing.assert_array_equal((frames_out[2].numpy() * 255).round().astype(np.uint8), clip.frame(2))
    np.testing.assert_array_equal(tracks["track_path"][3].numpy(), clip.positions(3))
    assert bool(tracks["track_visibility"].all()) and tracks["track_path"].shape == (5, 3, 2)
    components = video.get_components()
    assert components.images is frames_out and components.frame_rate == 10
    assert components.audio is audio and audio["sample_rate"] == 44_100
    assert audio["waveform"].shape == (1, 2, 22_050)  # 5 frames at 10 fps: half a second, stereo
    assert 0.1 < float(audio["waveform"].abs().max()) <= 1.0


def test_demo_clip_frames_feed_detection_that_finds_the_dots():
    frames_out, tracks, _, _ = run("DemoClip", width=160, height=96, frame_count=3, dots=4, variant=1)
    (detected,) = run("DetectTracks", image=frames_out, method="bright", min_distance=6.0)
    truth = tracks["track_path"][0].numpy()
    found = detected["track_path"][0][detected["track_visibility"][0]].numpy()
    nearest = np.min(np.linalg.norm(truth[:, None] - found[None], axis=-1), axis=1)
    assert np.all(nearest < 1.5), nearest


def test_demo_clip_rejects_sizes_the_engine_refuses():
    with pytest.raises(ValueError, match="frame width must be 16..16384 pixels, got 8"):
        run("DemoClip", width=8)


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
    ("Trails", (TrailStyle,)),
    ("Labels", (LabelStyle,)),
])
def test_every_style_widget_reaches_the_engine(node_id, engine):
    widgets = set(widget_defaults(NODE_BY_ID[f"TrackOverlay{node_id}"])) - {"units"}
    assert widgets == {field.name for cls in engine for field in fields(cls)}
