"""Hostile input: every bad or extreme input gets a clear error or a documented, tested behaviour.

Nothing crashes deep inside NumPy (RuntimeWarnings fail these tests), nothing
hangs (every input is small), nothing is lost: every case snapshots the user
objects it passes in and checks them unchanged afterwards, error or not.

Bad input that one stage owns is tested beside that stage, once: bad frames
and huge primitives in tests/raster/test_raster.py, graph parameters in
tests/graph/test_neighbours.py, the backend name in tests/raster/test_fallback.py,
TRACKS and track files in tests/tracks/test_tracks.py, video files in
tests/video/test_video_io.py, the CLI in tests/examples/test_overlay_video.py.

| cases (test ids)                                                    | what they get                                                          |
|---------------------------------------------------------------------|------------------------------------------------------------------------|
| display list: nan-vertex, inf-box-center                            | ValueError "polyline vertices / box center holds 1 NaN/inf value(s)"  |
| display list: vertex-1e30, box-size-1e30, width-1e30                | ValueError "<field> holds N value(s) beyond ±1,000,000 ... pixels"    |
| display list: zero-width, negative-box-size, negative-stroke, one-vertex, colour-above-1, radius-too-big | ValueError naming the field and what is allowed |
| display list: layer-not-a-primitive                                 | TypeError "display list layers must be Polylines, Boxes or Glyphs, got str" |
| display list: arrays given to Polylines/Boxes                       | copied: the caller's arrays stay writable and unchanged                |
| renderer: out-is-the-frame                                          | ValueError "out must not share memory with the input frame"            |
| batch: entries-not-display-lists, 3-frames-vs-2-overlays; merge 2-vs-3-frames | TypeError / ValueError naming both counts and the 1-repeats rule |
| choices: curve, pattern, bend-side, colour-mode, box-shape, size-mode, detect-method, units | ValueError "<name> '<value>' is not one of <allowed>" |
| numbers: line-width-0/-negative, box-size-negative/-nan, stroke-negative, colour-name | ValueError naming the field, its range and the value |
| TRACKS: none, string, path-none, visibility-2, size-1e30, node-given-none | TypeError / ValueError naming tracks['<key>'] and the shape/type wanted |
| JSON: not-json, version-string, strings                             | ValueError naming the source and the problem                           |
| nodes: image-rgba, image-grey-1-channel, image-int64, image-numpy, image-empty, 3-images-vs-2-overlay-frames, backend-cuda, overlay-none, overlay-of-0-frames, bounding-box-1e30, merge-2-vs-3-frames, mask-int64 | TypeError / ValueError naming the input and the fix |
| line / box far outside the frame                                    | frame bit-identical (a new array)                                      |
| line from inside the frame to 100,000 px away                       | drawn partly: exact colour on its rows, every other pixel untouched    |
| box centred on the frame's corner                                   | the quarter inside drawn exactly, the rest untouched                   |
| 1x1 frames (uint8, float32)                                         | covered pixel exact, missed pixel untouched; 1x1 layer alpha 1         |
| 4K frame                                                            | only the box's pixels change                                           |
| zero-size box with a stroke                                         | a dot of the stroke's diameter                                         |
| 0-points, 1-point, 2-points                                         | no edge, no edge, one edge; drawn: nothing, nothing, one exact line    |
| duplicate points                                                    | zero-length edges, i < j, unique, ties by index; drawn as a dot        |
| TRACKS position nan, inf, 1e30                                      | that slot is hidden (1e30 logs a warning); the rest renders as if it were absent |
| JSON null / NaN coordinates                                         | hidden slots                                                           |
| 0 tracks                                                            | empty overlays; frames unchanged, layer and alpha 0                    |
| IMAGE image-hwc, image-float64, image-float16, image-uint8-scaled   | the picture of the float32 [B, H, W, 3] IMAGE of the same values (uint8 / 255) |
| 1-image-3-overlays, 3-images-1-overlay                              | broadcast to 3 frames                                                  |
| empty video (0 frames)                                              | probe says 0 frames; reading yields none                               |
"""

import copy
import dataclasses
import json
import logging
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from bad_videos import write_empty_video
from scenes import boxes, flat_frame, polylines
from trackoverlay.utils.draw.display_list import Boxes, DisplayList, Polylines, merge_sequences
from trackoverlay.utils.draw.overlays import link_overlay
from trackoverlay.utils.draw.styles import BoxStyle, LineStyle
from trackoverlay.utils.graph.neighbours import GraphParams, build_edges
from trackoverlay.utils.raster.batch import render_batch
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.tracks.contract import normalize_tracks
from trackoverlay.utils.tracks.track_file import tracks_from_json
from trackoverlay.utils.video.io import iter_video_frames, probe_video

torch = pytest.importorskip("torch")
from test_nodes import run as run_node  # noqa: E402  (widget defaults + one node call, as ComfyUI does)

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

RED = (1.0, 0.0, 0.0, 1.0)
GREY = (0.2, 0.2, 0.2)
H, W = 48, 64


# ------------------------------------------------------------------ helpers


def _same(before, after) -> bool:
    """Deep equality of user objects (NaN equals NaN; types, dtypes and shapes must match)."""
    if type(before) is not type(after):
        return False
    if isinstance(before, torch.Tensor):
        before, after = before.numpy(), after.numpy()
    if isinstance(before, np.ndarray):
        return before.dtype == after.dtype and np.array_equal(before, after, equal_nan=before.dtype.kind in "fc")
    if dataclasses.is_dataclass(before):
        before, after = vars(before), vars(after)
    if isinstance(before, dict):
        return before.keys() == after.keys() and all(_same(before[key], after[key]) for key in before)
    if isinstance(before, (list, tuple)):
        return len(before) == len(after) and all(map(_same, before, after))
    return before == after or (before != before and after != after)  # NaN scalars


def _state(value):
    """What must not change: a file's bytes for a path (None when absent), else a deep copy."""
    if isinstance(value, Path):
        return value.read_bytes() if value.is_file() else None
    return copy.deepcopy(value)


def _writable(objects) -> list:
    return [value.flags.writeable for value in objects if isinstance(value, np.ndarray)]


@contextmanager
def kept(*objects):
    """Assert that ``objects`` (arrays, tensors, dicts, lists, files) are unchanged when the block exits.

    Checked on a normal exit and when an exception leaves the block; arrays
    must also keep their ``writeable`` flag.
    """
    before, writable = [_state(value) for value in objects], _writable(objects)
    try:
        yield
    finally:
        for index, (value, old) in enumerate(zip(objects, before)):
            assert _same(old, _state(value) if isinstance(value, Path) else value), \
                f"input {index} ({value if isinstance(value, Path) else type(value).__name__}) was modified"
        assert _writable(objects) == writable, "an input array was made read-only"


def line(points, width=2.0, color=RED, **options) -> Polylines:
    return polylines([points], width=width, color=color, **options)


def render(frame, *layers):
    """``layers`` drawn over ``frame`` by a fresh CpuRenderer (neither may be modified)."""
    renderer = CpuRenderer(workers=2)
    try:
        with kept(frame, layers):
            return renderer.render(frame, DisplayList(layers))
    finally:
        renderer.close()


def grey_frame(height=H, width=W, dtype=np.uint8):
    return flat_frame(height, width, GREY, dtype)


def tracks_dict(points, visible=None, size=None) -> dict:
    """A TRACKS dict of torch tensors from [T, N, 2] points."""
    path = torch.as_tensor(np.asarray(points, np.float32))
    vis = torch.ones(path.shape[:2], dtype=torch.bool) if visible is None else torch.as_tensor(visible)
    result = {"track_path": path, "track_visibility": vis}
    if size is not None:
        result["track_size"] = torch.as_tensor(np.asarray(size, np.float32))
    return result


def image(count=1):
    """A grey float32 IMAGE batch of 64x48 frames."""
    return torch.full((count, H, W, 3), 0.2, dtype=torch.float32)


def box_overlay_of(tracks, **widgets):
    """A Boxes node overlay: 10 px hollow red squares (the inputs may not be modified)."""
    options = {"size": 10.0, "stroke_width": 2.0, "color": "#FF0000", "fill_opacity": 0.0, "roundness": 0.0}
    with kept(tracks, widgets):
        return run_node("Boxes", tracks=tracks, **{**options, **widgets})[0]


def render_node(image_in, overlay):
    """The Render Overlay node on the CPU (the inputs may not be modified)."""
    with kept(image_in, overlay):
        return run_node("Render", image=image_in, overlay=overlay, backend="cpu")


def json_document(**changes) -> str:
    document = {"format": "trackoverlay.tracks", "version": 1, "frames": 1, "tracks": 2,
                "path": [[[10, 10], [40, 30]]], "visible": [[1, 1]]}
    document.update(changes)
    return json.dumps({key: value for key, value in document.items() if value is not ...})


# --------------------------------------------------- clear errors, by group


def case(case_id, make, action, error, match):
    """``action(*make(tmp_path))`` must raise ``error`` matching ``match``; ``make`` builds the user inputs."""
    return pytest.param(make, action, error, match, id=case_id)


def check_error(make, action, error, match, tmp_path):
    inputs = make(tmp_path)
    with pytest.raises(error, match=match), kept(*inputs):
        action(*inputs)


def two_points():
    return np.array([[10, 10], [50, 30]], np.float32)


DISPLAY_LIST_ERRORS = [
    case("nan-vertex", lambda tmp: (np.array([[np.nan, 1], [5, 5]], np.float32),), line,
         ValueError, r"polyline vertices holds 1 NaN/inf value\(s\); give finite numbers"),
    case("inf-box-center", lambda tmp: (np.array([[np.inf, 4]]),), lambda c: boxes(c, [5, 5], stroke_width=1),
         ValueError, r"box center holds 1 NaN/inf value\(s\)"),
    case("vertex-1e30", lambda tmp: (np.array([[1e30, 1e30], [2e30, 5]], np.float32),), line,
         ValueError, r"polyline vertices holds 3 value\(s\) beyond ±1,000,000 .*within ±1,000,000 pixels"),
    case("box-size-1e30", lambda tmp: (np.array([[1e30, 1e30]], np.float32),),
         lambda half: boxes([[10, 10]], half, stroke_width=1), ValueError, r"box half_size holds 2 value\(s\) beyond"),
    case("width-1e30", lambda tmp: (two_points(),), lambda v: line(v, width=1e30),
         ValueError, r"line width holds 1 value\(s\) beyond ±1,000,000"),
    case("zero-width", lambda tmp: (two_points(),), lambda v: line(v, width=0.0),
         ValueError, r"line width must be > 0 pixels"),
    case("negative-box-size", lambda tmp: (np.array([[-4, 5]], np.float32),),
         lambda half: boxes([[10, 10]], half), ValueError, r"box sizes must be >= 0 pixels"),
    case("negative-stroke", lambda tmp: (two_points(),), lambda c: boxes(c, [5, 5], stroke_width=-1),
         ValueError, r"box stroke width must be >= 0 pixels"),
    case("one-vertex", lambda tmp: (np.array([[5, 5]], np.float32),), line,
         ValueError, r"every polyline needs at least two vertices"),
    case("colour-above-1", lambda tmp: (two_points(),), lambda v: line(v, color=(1.5, 0, 0, 1)),
         ValueError, r"line color_start must be RGBA values in 0\.\.1"),
    case("radius-too-big", lambda tmp: (two_points(),), lambda c: boxes(c, [5, 5], radius=8),
         ValueError, r"box corner radius must lie in 0\.\.min\(width, height\)/2"),
    case("layer-not-a-primitive", lambda tmp: (["not a layer"],), lambda layers: DisplayList(tuple(layers)),
         TypeError, r"display list layers must be Polylines, Boxes or Glyphs, got str"),
]

RENDER_ERRORS = [
    case("out-is-the-frame", lambda tmp: (grey_frame(),), lambda f: CpuRenderer(1).render(f, DisplayList(), out=f),
         ValueError, r"out must not share memory with the input frame"),
    case("batch-entries-not-display-lists", lambda tmp: (np.zeros((1, H, W, 3), np.uint8), [[]]),
         lambda frames, overlays: render_batch(frames, overlays, CpuRenderer(1)),
         TypeError, r"overlay entries must be DisplayList, got list"),
    case("batch-3-frames-vs-2-overlays", lambda tmp: (np.zeros((3, H, W, 3), np.uint8), [DisplayList()] * 2),
         lambda frames, overlays: render_batch(frames, overlays, CpuRenderer(1)),
         ValueError, r"the image batch has 3 frames but the overlay has 2: give equal frame counts, or 1"),
    case("merge-2-vs-3-frames", lambda tmp: ([DisplayList()] * 2, [DisplayList()] * 3), merge_sequences,
         ValueError, r"overlay 1 has 2 frames but overlay 2 has 3"),
]

CHOICE_ERRORS = [
    case("curve", lambda tmp: ("zigzag",), lambda v: LineStyle(curve=v),
         ValueError, r"curve 'zigzag' is not one of straight, quadratic, cubic, s_curve"),
    case("pattern", lambda tmp: ("wavy",), lambda v: LineStyle(pattern=v),
         ValueError, r"line pattern 'wavy' is not one of solid, dashed, dotted"),
    case("bend-side", lambda tmp: ("up",), lambda v: LineStyle(bend_side=v),
         ValueError, r"bend side 'up' is not one of alternate, left, right"),
    case("colour-mode", lambda tmp: ("rainbow",), lambda v: BoxStyle(color_mode=v),
         ValueError, r"box color_mode 'rainbow' is not one of single, track"),
    case("box-shape", lambda tmp: ("star",), lambda v: BoxStyle(shape=v),
         ValueError, r"box shape 'star' is not one of rounded, brackets"),
    case("size-mode", lambda tmp: ("auto",), lambda v: BoxStyle(size_mode=v),
         ValueError, r"box size_mode 'auto' is not one of fixed, track"),
    case("detect-method", lambda tmp: (image(),), lambda i: run_node("DetectTracks", image=i, method="sift"),
         ValueError, r"method 'sift' is not one of corners, blobs, bright"),
    case("units", lambda tmp: (tracks_dict([[[1, 1], [5, 5]]]),),
         lambda t: run_node("LineLinks", tracks=t, units="inches"),
         ValueError, r"units 'inches' is not one of pixels, % of frame height"),
]

NUMBER_ERRORS = [
    case("line-width-0", lambda tmp: (0.0,), lambda v: LineStyle(width=v),
         ValueError, r"line width must be a number in \(0, 10000\], got 0\.0"),
    case("line-width-negative", lambda tmp: (-2.0,), lambda v: LineStyle(width=v),
         ValueError, r"line width must be a number in \(0, 10000\], got -2\.0"),
    case("box-size-negative", lambda tmp: (-1.0,), lambda v: BoxStyle(size=v),
         ValueError, r"box size must be a number in \[0, 100000\], got -1\.0"),
    case("box-size-nan", lambda tmp: (float("nan"),), lambda v: BoxStyle(size=v),
         ValueError, r"box size must be a number in \[0, 100000\], got nan"),
    case("stroke-negative", lambda tmp: (-1.0,), lambda v: BoxStyle(stroke_width=v),
         ValueError, r"box stroke width must be a number in \[0, 10000\], got -1\.0"),
    case("colour-name", lambda tmp: ("red",), lambda v: LineStyle(color=v),
         ValueError, r"line color 'red' is not a colour: use hex digits, e.g. #00E5FF"),
]


def path_and(visibility, **extra):
    return lambda tmp: ({"track_path": np.zeros((1, 2, 2), np.float32), "track_visibility": visibility, **extra},)


TRACKS_ERRORS = [
    case("none", lambda tmp: (None,), normalize_tracks,
         TypeError, r"tracks must be a TRACKS dict with 'track_path' and 'track_visibility', got NoneType"),
    case("string", lambda tmp: ("tracks.json",), normalize_tracks, TypeError, r"must be a TRACKS dict .*got str"),
    case("path-none", lambda tmp: ({"track_path": None, "track_visibility": [[1]]},), normalize_tracks,
         TypeError, r"tracks\['track_path'\] must hold integers or floats, got dtype object"),
    case("visibility-2", path_and(np.full((1, 2), 2)), normalize_tracks,
         ValueError, r"tracks\['track_visibility'\] must hold bools or 0/1 numbers; found other values"),
    case("size-1e30", path_and(np.ones((1, 2), bool), track_size=np.full((1, 2, 2), 1e30, np.float32)),
         normalize_tracks, ValueError, r"tracks\['track_size'\] holds sizes above 100,000 pixels"),
    case("node-given-none", lambda tmp: (None,), lambda t: run_node("LineLinks", tracks=t),
         TypeError, r"tracks must be a TRACKS dict"),
]


JSON_ERRORS = [
    case("not-json", lambda tmp: ("hello",), tracks_from_json, ValueError, r"tracks JSON is not valid JSON"),
    case("version-string", lambda tmp: (json_document(version="1"),), tracks_from_json,
         ValueError, r"format version '1'; this pack reads version 1"),
    case("strings", lambda tmp: (json_document(visible=[["x", 1]]),), tracks_from_json,
         ValueError, r"'visible' must be nested lists of numbers of shape \[1, 2\]"),
]


def two_frame_box_overlay():
    return box_overlay_of(tracks_dict(np.full((2, 1, 2), 20.0)))


NODE_ERRORS = [
    case("image-rgba", lambda tmp: (torch.zeros(1, H, W, 4), two_frame_box_overlay()), render_node,
         ValueError, r"image must be an IMAGE of shape \[B, H, W, 3\] .*got shape \[1, 48, 64, 4\]; convert grey .* or RGBA"),
    case("image-grey-1-channel", lambda tmp: (torch.zeros(1, H, W, 1), two_frame_box_overlay()), render_node,
         ValueError, r"with 3 colour channels, got shape \[1, 48, 64, 1\]; convert grey \(1 channel\)"),
    case("image-int64", lambda tmp: (torch.zeros(1, H, W, 3, dtype=torch.int64), two_frame_box_overlay()),
         render_node, TypeError, r"image must hold floats in 0\.\.1 \(or uint8 0\.\.255\), got torch\.int64"),
    case("image-numpy", lambda tmp: (np.zeros((1, H, W, 3), np.float32), two_frame_box_overlay()), render_node,
         TypeError, r"image must be a torch tensor \(IMAGE\), got ndarray"),
    case("image-empty", lambda tmp: (torch.zeros(0, H, W, 3), two_frame_box_overlay()), render_node,
         ValueError, r"image is empty \(shape \[0, 48, 64, 3\]\); connect at least one frame"),
    case("3-images-vs-2-overlay-frames", lambda tmp: (image(3), two_frame_box_overlay()), render_node,
         ValueError, r"the image batch has 3 frames but the overlay has 2"),
    case("backend-cuda", lambda tmp: (image(), two_frame_box_overlay()),
         lambda i, o: run_node("Render", image=i, overlay=o, backend="cuda"),
         ValueError, r"backend 'cuda' is not one of auto, cpu, gpu"),
    case("overlay-none", lambda tmp: (image(), None), render_node,
         TypeError, r"overlay must be a TRACK_OVERLAY \(one display list per frame\)"),
    case("overlay-of-0-frames", lambda tmp: (image(), box_overlay_of(tracks_dict(np.zeros((0, 2, 2))))), render_node,
         ValueError, r"overlay has no frames; its tracks must cover at least one frame"),
    case("bounding-box-1e30", lambda tmp: (tracks_dict(np.zeros((1, 0, 2))), [{"x": 1e30, "y": 0, "width": 5, "height": 5}]),
         lambda t, b: box_overlay_of(t, boxes=b),
         ValueError, r"boxes frame 0 box 0: x, y, width, height must be finite pixels within ±100,000"),
    case("merge-2-vs-3-frames", lambda tmp: ([DisplayList()] * 2, [DisplayList()] * 3),
         lambda a, b: run_node("Merge", overlay_a=a, overlay_b=b),
         ValueError, r"overlay_a has 2 frames but overlay_b has 3"),
    case("mask-int64", lambda tmp: (torch.zeros(1, H, W, dtype=torch.int64),), lambda m: run_node("TracksFromMask", mask=m),
         TypeError, r"mask must hold floats in 0\.\.1 \(or uint8 0\.\.255\), got torch\.int64"),
]


@pytest.mark.parametrize("make, action, error, match", DISPLAY_LIST_ERRORS)
def test_display_list_rejects(make, action, error, match, tmp_path):
    check_error(make, action, error, match, tmp_path)


@pytest.mark.parametrize("make, action, error, match", RENDER_ERRORS)
def test_renderer_and_batch_reject(make, action, error, match, tmp_path):
    check_error(make, action, error, match, tmp_path)


@pytest.mark.parametrize("make, action, error, match", CHOICE_ERRORS)
def test_unknown_choice_names_the_allowed_values(make, action, error, match, tmp_path):
    check_error(make, action, error, match, tmp_path)


@pytest.mark.parametrize("make, action, error, match", NUMBER_ERRORS)
def test_out_of_range_number_names_field_range_and_value(make, action, error, match, tmp_path):
    check_error(make, action, error, match, tmp_path)


@pytest.mark.parametrize("make, action, error, match", TRACKS_ERRORS)
def test_malformed_tracks_name_the_key(make, action, error, match, tmp_path):
    check_error(make, action, error, match, tmp_path)


@pytest.mark.parametrize("make, action, error, match", JSON_ERRORS)
def test_malformed_track_json_names_the_source(make, action, error, match, tmp_path):
    check_error(make, action, error, match, tmp_path)


@pytest.mark.parametrize("make, action, error, match", NODE_ERRORS)
def test_nodes_reject(make, action, error, match, tmp_path):
    check_error(make, action, error, match, tmp_path)


# -------------------------------------------------- geometry at the extremes


def test_display_list_copies_the_arrays_it_is_given():
    vertices, width = np.array([[0, 0], [5, 5]], np.float32), np.array([2], np.float32)
    colour, dash, offsets = np.ones((1, 4), np.float32), np.zeros((1, 2), np.float32), np.array([0, 2])
    centers, zeros = np.array([[1, 1]], np.float32), np.zeros(1, np.float32)
    with kept(vertices, width, colour, dash, offsets, centers, zeros):
        lines = Polylines(vertices, offsets, width, colour, colour, dash, np.zeros(1, bool))
        marks = Boxes(centers, colour[:, :2], zeros, zeros, colour, colour, zeros)
    vertices[0], centers[0] = 99, 99  # the caller may go on using its arrays
    assert lines.vertices[0].tolist() == [0, 0] and marks.center[0].tolist() == [1, 1]
    assert not lines.vertices.flags.writeable and not marks.center.flags.writeable


def test_line_far_outside_the_frame_leaves_it_untouched():
    frame = grey_frame()
    far = line(np.array([[5e4, 5e4], [9e4, -3e4]], np.float32), width=20.0)
    out = render(frame, far, boxes([[-5e4, 30]], [100, 100], stroke_width=4, fill_color=RED))
    assert out is not frame and np.array_equal(out, frame)


def test_line_leaving_the_frame_for_100000_px_is_drawn_partly():
    frame = grey_frame()
    vertices = np.array([[32.0, 24.0], [1e5, 24.0]], np.float32)
    with kept(vertices):
        out = render(frame, line(vertices, width=2.0))
    assert np.all(out[23:25, 32:] == [255, 0, 0])  # rows 23 and 24 lie inside the 2 px line
    untouched = np.ones((H, W), bool)
    untouched[23:25, 31:] = False
    assert np.array_equal(out[untouched], frame[untouched])


def test_box_centred_on_the_corner_draws_the_quarter_inside():
    frame = grey_frame()
    corner = boxes([[0, 0]], [10, 10], fill_color=RED)
    out = render(frame, corner)
    assert np.all(out[:10, :10] == [255, 0, 0])
    assert np.array_equal(out[10:], frame[10:]) and np.array_equal(out[:, 10:], frame[:, 10:])


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_1x1_frames(dtype):
    frame = grey_frame(1, 1, dtype)
    hit = render(frame, line(np.array([[-3, 0.5], [3, 0.5]], np.float32), width=2.0))
    miss = render(frame, line(np.array([[-3, 5.0], [3, 5.0]], np.float32), width=2.0))
    full = 255 if dtype == np.uint8 else 1.0
    assert hit.shape == (1, 1, 3) and hit.dtype == dtype and hit[0, 0].tolist() == [full, 0, 0]
    assert np.array_equal(miss, frame)
    rgb, alpha = CpuRenderer(1).render_layer(DisplayList((line(np.array([[0.5, 0.5], [0.5, 0.5]]), 4.0),)), 1, 1)
    assert alpha.tolist() == [[1.0]] and rgb[0, 0].tolist() == [1.0, 0.0, 0.0]


def test_4k_frame_draws_only_the_box_pixels():
    frame = np.zeros((2160, 3840, 3), np.uint8)
    out = render(frame, boxes([[3000.5, 2000.5]], [20, 10], stroke_width=2, stroke_color=RED))
    changed = np.argwhere(out.any(axis=2))
    assert out.shape == frame.shape and out.dtype == np.uint8 and not frame.any()
    assert changed.min(axis=0).tolist() == [1989, 2979] and changed.max(axis=0).tolist() == [2011, 3021]
    assert out[1990, 3000].tolist() == [255, 0, 0] and out[2000, 3000].tolist() == [0, 0, 0]


def changed_pixels(out, frame):
    """(row, column) of every pixel that differs from ``frame``."""
    return np.argwhere((out != frame).any(axis=2))


def test_zero_size_box_with_a_stroke_is_a_dot():
    frame = grey_frame()
    out = render(frame, boxes([[20.5, 20.5]], [0, 0], stroke_width=2, stroke_color=RED))
    assert out[20, 20].tolist() == [255, 0, 0]  # 1 px from the centre at most: the stroke's radius
    changed = changed_pixels(out, frame)
    assert changed.min() == 19 and changed.max() == 21


# ------------------------------------------------------------ graph corners


@pytest.mark.parametrize("count, edges", [(0, []), (1, []), (2, [[0, 1]])], ids=["0-points", "1-point", "2-points"])
def test_zero_one_two_points(count, edges):
    points = np.array([[10.0, 24.0], [50.0, 24.0]], np.float32)[:count]
    path, visible = points[None], np.ones((1, count), bool)
    with kept(points, path, visible):
        found, lengths = build_edges(points, GraphParams(k=5))
        overlay = link_overlay(path, visible, GraphParams(k=5), LineStyle(width=2.0, color="#FF0000", curve="straight"))
    assert found.shape == (len(edges), 2) and found.tolist() == edges and lengths.tolist() == [40.0] * len(edges)
    drawn = changed_pixels(render(grey_frame(), *overlay[0].layers), grey_frame())
    if count < 2:
        assert len(drawn) == 0
    else:  # a 2 px line on y = 24 from x = 10 to 50, round caps
        assert drawn.min(axis=0).tolist() == [23, 9] and drawn.max(axis=0).tolist() == [24, 50]


def test_duplicate_points_link_with_zero_length_and_draw_a_dot():
    points = np.array([[20.5, 20.5]] * 3 + [[40.5, 30.5]], np.float32)
    with kept(points):
        edges, lengths = build_edges(points, GraphParams(k=2))
    # the three copies link to each other; the lone point's two nearest tie, broken by index (0, 1)
    assert edges.tolist() == [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3]]
    assert lengths[[0, 1, 3]].tolist() == [0.0, 0.0, 0.0]
    dot = line(points[[0, 1]], width=3.0)
    out = render(grey_frame(), dot)
    assert out[20, 20].tolist() == [255, 0, 0] and out[20, 23].tolist() == list(grey_frame()[20, 23])


# ------------------------------------------------------------- hostile TRACKS


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e30], ids=["nan", "inf", "1e30"])
def test_unusable_track_position_hides_that_slot_and_draws_the_rest(bad, caplog):
    tracks = tracks_dict([[[20.0, 20.0], [bad, 30.0]]])
    with kept(tracks), caplog.at_level(logging.WARNING, logger="trackoverlay"):
        links = run_node("LineLinks", tracks=tracks)[0]
    boxes_out = box_overlay_of(tracks)
    assert boxes_out[0].primitive_count == 1 and links[0].primitive_count == 0
    alone = box_overlay_of(tracks_dict([[[20.0, 20.0]]]))
    assert all(torch.equal(got, want) for got, want in zip(render_node(image(), boxes_out), render_node(image(), alone)))
    assert ("1 visible point(s) lie beyond ±100,000 pixels" in caplog.text) == (bad == 1e30)


def test_null_and_nan_json_coordinates_are_hidden_slots():
    text = ('{"format": "trackoverlay.tracks", "version": 1, "frames": 1, "tracks": 3,'
            ' "path": [[[10, 10], [null, 5], [NaN, 2]]], "visible": [[1, 1, 1]]}')
    with kept(text):
        tracks = tracks_from_json(text)
    assert tracks.visibility.tolist() == [[True, False, False]] and np.isnan(tracks.path[0, 1:]).all()


def test_zero_tracks_leave_the_frames_unchanged():
    frames_in = image(2)
    tracks = tracks_dict(np.zeros((2, 0, 2)))
    with kept(tracks):
        links = run_node("LineLinks", tracks=tracks)[0]
    overlay = run_node("Merge", overlay_a=box_overlay_of(tracks), overlay_b=links)[0]
    out, layer, alpha = render_node(frames_in, overlay)
    assert torch.equal(out, frames_in) and float(alpha.abs().sum()) == 0.0 and float(layer.abs().sum()) == 0.0


# ------------------------------------------------------------ IMAGE variants


@pytest.mark.parametrize("variant", ["hwc", "float64", "float16", "uint8"],
                         ids=["image-hwc", "image-float64", "image-float16", "image-uint8-scaled"])
def test_image_variants_give_the_float32_picture(variant):
    """Each variant renders exactly like the float32 [B, H, W, 3] IMAGE holding its values (uint8: / 255)."""
    overlay = box_overlay_of(tracks_dict([[[30.0, 20.0]]]), fill_opacity=0.5)
    pixels = torch.as_tensor(flat_frame(H, W, (0.25, 0.5, 0.75), np.float32))[None]
    given, same_values = {
        "hwc": (pixels[0], pixels),
        "float64": (pixels.double(), pixels),
        "float16": (pixels.half(), pixels.half().float()),
        "uint8": ((pixels * 255).round().to(torch.uint8), (pixels * 255).round() / 255),
    }[variant]
    got, want = render_node(given, overlay), render_node(same_values, overlay)
    assert got[0].shape == (1, H, W, 3) and got[0].dtype == torch.float32
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert float(got[2].max()) == 1.0  # the box is drawn


@pytest.mark.parametrize("images, overlay_frames", [(1, 3), (3, 1)], ids=["1-image-3-overlays", "3-images-1-overlay"])
def test_one_to_many_broadcasts(images, overlay_frames):
    tracks = tracks_dict(np.array([[[10.0 + 15 * t, 20.0]] for t in range(overlay_frames)]))
    out, _, alpha = render_node(image(images), box_overlay_of(tracks))
    assert out.shape[0] == alpha.shape[0] == 3
    left_edges = [int(alpha[t, 20].nonzero()[0]) for t in range(3)]  # 6 px left of each box centre
    assert left_edges == ([4, 19, 34] if overlay_frames == 3 else [4, 4, 4])


# ----------------------------------------------------------------- video edge


def test_empty_video_has_no_frames(tmp_path):
    path = write_empty_video(tmp_path / "empty.avi")
    with kept(path):
        assert probe_video(path).frame_count == 0
        assert list(iter_video_frames(path)) == []
