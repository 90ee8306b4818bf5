"""Hostile input: every bad or extreme input gets a clear error or a documented, tested behaviour.

Nothing crashes deep inside NumPy (RuntimeWarnings fail these tests), nothing
hangs (every input is small), nothing is lost: every case snapshots the user
objects it passes in and checks them unchanged afterwards, error or not. The
CLI's error cases are in tests/examples/test_overlay_video.py.

| cases (test ids)                                                    | what they get                                                          |
|---------------------------------------------------------------------|------------------------------------------------------------------------|
| display list: nan-vertex, inf-box-center                            | ValueError "polyline vertices / box center holds 1 NaN/inf value(s)"  |
| display list: vertex-1e30, box-size-1e30, width-1e30                | ValueError "<field> holds N value(s) beyond ±1,000,000 ... pixels"    |
| display list: zero-width, negative-box-size, negative-stroke, one-vertex, colour-above-1, radius-too-big | ValueError naming the field and what is allowed |
| display list: layer-not-a-primitive                                 | TypeError "display list layers must be Polylines or Boxes, got str"   |
| display list: arrays given to Polylines/Boxes                       | copied: the caller's arrays stay writable and unchanged                |
| renderer: frame-float64, frame-2d, frame-rgba, frame-0x0, out-is-the-frame | ValueError naming frame (or out): dtype, [H, W, 3], empty, aliasing |
| batch: entries-not-display-lists, 3-frames-vs-2-overlays; merge 2-vs-3-frames | TypeError / ValueError naming both counts and the 1-repeats rule |
| choices: curve, pattern, bend-side, colour-mode, box-shape, size-mode, graph-mode, backend, detect-method, units | ValueError "<name> '<value>' is not one of <allowed>" |
| numbers: line-width-0/-negative, box-size-negative/-nan, stroke-negative, colour-name, k-0, k-2.5, hysteresis-1 | ValueError naming the field, its range and the value |
| TRACKS: none, string, list, missing-visibility, path-shape, visibility-shape, path-strings, path-none, path-ragged, visibility-2, size-negative, size-1e30, node-given-none | TypeError / ValueError naming tracks['<key>'] and the shape/type wanted |
| JSON: not-json, truncated-file, not-utf8, missing-path, version-2, version-string, a-list, wrong-shape, strings, frames-negative | ValueError naming the source (text or file) and the problem |
| video in: input-text-file, input-empty-file, input-folder, input-truncated-mp4 | ValueError naming the path ("not a readable video", "is empty", ...) |
| video out: output-is-a-folder, output-folder-missing, output-folder-unwritable (/proc), write-float-frame, write-size-change | IsADirectoryError / FileNotFoundError / PermissionError / ValueError; no file or temp file left |
| nodes: image-rgba, image-grey-1-channel, image-int64, image-numpy, image-empty, 3-images-vs-2-overlay-frames, backend-cuda, overlay-none, overlay-of-0-frames, bounding-box-1e30, merge-2-vs-3-frames, mask-int64 | TypeError / ValueError naming the input and the fix |
| line / box far outside the frame                                    | frame bit-identical (a new array)                                      |
| line from inside the frame to 100,000 px away                       | drawn partly: exact colour on its rows, every other pixel untouched    |
| box centred on the frame's corner                                   | the quarter inside drawn exactly, the rest untouched                   |
| 5000 px line on 64x48                                               | fills the frame with the exact colour; under 16 MB allocated           |
| 1x1 frames (uint8, float32)                                         | covered pixel exact, missed pixel untouched; 1x1 layer alpha 1         |
| 4K frame                                                            | only the box's pixels change                                           |
| empty display list                                                  | output equals the input, as a new array                                |
| zero-size box with a stroke                                         | a dot of the stroke's diameter                                         |
| 0-points, 1-point, 2-points                                         | no edge, no edge, one edge; drawn: nothing, nothing, one exact line    |
| k >= N                                                              | the complete graph                                                     |
| duplicate points                                                    | zero-length edges, i < j, unique, ties by index; drawn as a dot        |
| TRACKS position nan, inf, 1e30                                      | that slot is hidden (1e30 logs a warning); the rest renders as if it were absent |
| JSON null / NaN coordinates                                         | hidden slots                                                           |
| 0 tracks                                                            | empty overlays; frames unchanged, layer and alpha 0                    |
| IMAGE image-hwc, image-float64, image-float16, image-uint8-scaled   | the picture of the float32 [B, H, W, 3] IMAGE of the same values (uint8 / 255) |
| 1-image-3-overlays, 3-images-1-overlay                              | broadcast to 3 frames                                                  |
| empty video (0 frames)                                              | probe says 0 frames; reading yields none                               |
| writer closed without a frame                                       | ValueError "no frames were written"; nothing left in the folder        |
"""

import copy
import dataclasses
import json
import logging
import os
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from clips import truncated_copy, write_empty_video
from scenes import boxes, flat_frame, polylines
from trackoverlay.utils.draw.display_list import Boxes, DisplayList, Polylines, merge_sequences
from trackoverlay.utils.draw.overlays import link_overlay
from trackoverlay.utils.draw.styles import BoxStyle, LineStyle
from trackoverlay.utils.graph.neighbours import GraphParams, build_edges
from trackoverlay.utils.raster.backend import select_backend
from trackoverlay.utils.raster.batch import render_batch
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.tracks.contract import normalize_tracks
from trackoverlay.utils.tracks.track_file import load_tracks_json, tracks_from_json
from trackoverlay.utils.video.io import VideoWriter, iter_video_frames, probe_video

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


def write_video(path, frames=6):
    """A 64x48 MP4 of ``frames`` flat frames at 12 fps."""
    with VideoWriter(path, fps=12, preset="ultrafast") as writer:
        for index in range(frames):
            writer.write(np.full((H, W, 3), 40 * index, np.uint8))
    return path


def file_with(name: str, data: bytes):
    """``make`` for a case whose one input is a file holding ``data``."""
    def make(tmp):
        path = tmp / name
        path.write_bytes(data)
        return (path,)
    return make


def write_frames(path, *frames):
    with VideoWriter(path) as writer:
        for frame in frames:
            writer.write(frame)


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
         TypeError, r"display list layers must be Polylines or Boxes, got str"),
]

RENDER_ERRORS = [
    case("frame-float64", lambda tmp: (np.zeros((H, W, 3)),), render,
         ValueError, r"frame dtype must be uint8 or float32, got float64"),
    case("frame-2d", lambda tmp: (np.zeros((H, W), np.uint8),), render,
         ValueError, r"frame must have shape \[H, W, 3\], got \[48, 64\]"),
    case("frame-rgba", lambda tmp: (np.zeros((H, W, 4), np.uint8),), render,
         ValueError, r"frame must have shape \[H, W, 3\], got \[48, 64, 4\]"),
    case("frame-0x0", lambda tmp: (np.zeros((0, 0, 3), np.uint8),), render,
         ValueError, r"frame is empty \(0x0 pixels\)"),
    case("out-is-the-frame", lambda tmp: (grey_frame(),), lambda f: CpuRenderer(1).render(f, DisplayList(), out=f),
         ValueError, r"out must not share memory with the input frame"),
    case("batch-entries-not-display-lists", lambda tmp: (np.zeros((1, H, W, 3), np.uint8), [[]]),
         lambda frames, overlays: render_batch(frames, overlays, CpuRenderer(1)),
         TypeError, r"overlay entries must be DisplayList, got list"),
    case("batch-3-frames-vs-2-overlays", lambda tmp: (np.zeros((3, H, W, 3), np.uint8), [DisplayList()] * 2),
         lambda frames, overlays: render_batch(frames, overlays, CpuRenderer(1)),
         ValueError, r"the image batch has 3 frames but the overlay frames have 2: give equal counts, or 1"),
    case("merge-2-vs-3-frames", lambda tmp: ([DisplayList()] * 2, [DisplayList()] * 3), merge_sequences,
         ValueError, r"cannot merge overlays of \[2, 3\] frames"),
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
    case("graph-mode", lambda tmp: ("delaunay",), lambda v: GraphParams(mode=v),
         ValueError, r"GraphParams\.mode must be one of \('knn', 'radius'\), got 'delaunay'"),
    case("backend", lambda tmp: ("cuda",), select_backend,
         ValueError, r"backend 'cuda' is not one of auto, cpu, gpu"),
    case("detect-method", lambda tmp: (image(),), lambda i: run_node("DetectTracks", image=i, method="sift"),
         ValueError, r"method 'sift' is not known; use one of corners, blobs, bright"),
    case("units", lambda tmp: (tracks_dict([[[1, 1], [5, 5]]]),),
         lambda t: run_node("LineLinks", tracks=t, units="inches"),
         ValueError, r"units 'inches' is not one of pixels, % of frame height"),
]

NUMBER_ERRORS = [
    case("line-width-0", lambda tmp: (0.0,), lambda v: LineStyle(width=v),
         ValueError, r"line width must be in \(0\.0, 10000\.0\], got 0\.0"),
    case("line-width-negative", lambda tmp: (-2.0,), lambda v: LineStyle(width=v),
         ValueError, r"line width must be in \(0\.0, 10000\.0\], got -2\.0"),
    case("box-size-negative", lambda tmp: (-1.0,), lambda v: BoxStyle(size=v),
         ValueError, r"box size must be in \[0\.0, 100000\.0\], got -1\.0"),
    case("box-size-nan", lambda tmp: (float("nan"),), lambda v: BoxStyle(size=v),
         ValueError, r"box size must be in \[0\.0, 100000\.0\], got nan"),
    case("stroke-negative", lambda tmp: (-1.0,), lambda v: BoxStyle(stroke_width=v),
         ValueError, r"box stroke width must be in \[0\.0, 10000\.0\], got -1\.0"),
    case("colour-name", lambda tmp: ("red",), lambda v: LineStyle(color=v),
         ValueError, r"line color 'red' is not a colour: use hex digits, e.g. #00E5FF"),
    case("k-0", lambda tmp: (0,), lambda v: GraphParams(k=v),
         ValueError, r"GraphParams\.k must be an integer in \[1, inf\), got 0"),
    case("k-2.5", lambda tmp: (2.5,), lambda v: GraphParams(k=v),
         ValueError, r"GraphParams\.k must be an integer in \[1, inf\), got 2\.5"),
    case("hysteresis-1", lambda tmp: (1.0,), lambda v: GraphParams(hysteresis=v),
         ValueError, r"GraphParams\.hysteresis must be a number in \[0\.0, 1\.0\), got 1\.0"),
]


def path_and(visibility, **extra):
    return lambda tmp: ({"track_path": np.zeros((1, 2, 2), np.float32), "track_visibility": visibility, **extra},)


TRACKS_ERRORS = [
    case("none", lambda tmp: (None,), normalize_tracks,
         TypeError, r"tracks must be a TRACKS dict with 'track_path' and 'track_visibility', got NoneType"),
    case("string", lambda tmp: ("tracks.json",), normalize_tracks, TypeError, r"must be a TRACKS dict .*got str"),
    case("list", lambda tmp: ([[1, 2]],), normalize_tracks, TypeError, r"must be a TRACKS dict .*got list"),
    case("missing-visibility", lambda tmp: ({"track_path": np.zeros((1, 2, 2))},), normalize_tracks,
         ValueError, r"tracks is missing 'track_visibility'; a TRACKS dict needs 'track_path' \[T, N, 2\]"),
    case("path-shape", lambda tmp: ({"track_path": np.zeros((1, 2, 3)), "track_visibility": np.ones((1, 2), bool)},),
         normalize_tracks, ValueError, r"tracks\['track_path'\] must have shape \[T, N, 2\].*got \[1, 2, 3\]"),
    case("visibility-shape", path_and(np.ones((1, 3), bool)), normalize_tracks,
         ValueError, r"tracks\['track_visibility'\] has \[T, N\] = \[1, 3\] but tracks\['track_path'\] has \[1, 2\]"),
    case("path-strings", lambda tmp: ({"track_path": [[["a", "b"]]], "track_visibility": [[1]]},), normalize_tracks,
         TypeError, r"tracks\['track_path'\] must hold integers or floats, got dtype <U1"),
    case("path-none", lambda tmp: ({"track_path": None, "track_visibility": [[1]]},), normalize_tracks,
         TypeError, r"tracks\['track_path'\] must hold integers or floats, got dtype object"),
    case("path-ragged", lambda tmp: ({"track_path": [[[1, 2], [3]]], "track_visibility": [[1, 1]]},),
         normalize_tracks, TypeError, r"tracks\['track_path'\] must be an array of numbers, got list"),
    case("visibility-2", path_and(np.full((1, 2), 2)), normalize_tracks,
         ValueError, r"tracks\['track_visibility'\] must hold bools or 0/1 numbers; found other values"),
    case("size-negative", path_and(np.ones((1, 2), bool), track_size=-np.ones((1, 2, 2))), normalize_tracks,
         ValueError, r"tracks\['track_size'\] holds negative sizes"),
    case("size-1e30", path_and(np.ones((1, 2), bool), track_size=np.full((1, 2, 2), 1e30, np.float32)),
         normalize_tracks, ValueError, r"tracks\['track_size'\] holds sizes above 100,000 pixels"),
    case("node-given-none", lambda tmp: (None,), lambda t: run_node("LineLinks", tracks=t),
         TypeError, r"tracks must be a TRACKS dict"),
]


JSON_ERRORS = [
    case("not-json", lambda tmp: ("hello",), tracks_from_json, ValueError, r"tracks JSON is not valid JSON"),
    case("truncated-file", file_with("tracks.json", json_document()[:45].encode()), load_tracks_json,
         ValueError, r"track file .*tracks\.json is not valid JSON \(Expecting value: line 1 column 46"),
    case("not-utf8", file_with("x.json", b"\xff\xfe{"), load_tracks_json,
         ValueError, r"track file .*x\.json is not valid JSON \(not UTF-8 text\)"),
    case("missing-path", lambda tmp: (json_document(path=...),), tracks_from_json,
         ValueError, r"tracks JSON is missing 'path'"),
    case("version-2", lambda tmp: (json_document(version=2),), tracks_from_json,
         ValueError, r"tracks JSON has format version 2; this pack reads version 1"),
    case("version-string", lambda tmp: (json_document(version="1"),), tracks_from_json,
         ValueError, r"format version '1'; this pack reads version 1"),
    case("a-list", lambda tmp: ("[1, 2]",), tracks_from_json,
         ValueError, r"tracks JSON is not a track file: expected \"format\": \"trackoverlay\.tracks\""),
    case("wrong-shape", lambda tmp: (json_document(path=[[[1, 2]]]),), tracks_from_json,
         ValueError, r"'path' has shape \[1, 1, 2\], expected \[1, 2, 2\] from 'frames' and 'tracks'"),
    case("strings", lambda tmp: (json_document(visible=[["x", 1]]),), tracks_from_json,
         ValueError, r"'visible' must be nested lists of numbers of shape \[1, 2\]"),
    case("frames-negative", lambda tmp: (json_document(frames=-1),), tracks_from_json,
         ValueError, r"'frames' must be a whole number >= 0, got -1"),
]


VIDEO_ERRORS = [
    case("input-text-file", file_with("notes.mp4", b"not a video"), iter_video_frames,
         ValueError, r"notes\.mp4 is not a readable video"),
    case("input-empty-file", file_with("empty.mp4", b""), probe_video, ValueError, r"video file .*empty\.mp4 is empty"),
    case("input-folder", lambda tmp: (tmp,), iter_video_frames, ValueError, r"video path .* is not a file"),
    case("input-truncated-mp4", lambda tmp: (truncated_copy(write_video(tmp / "full.mp4"), tmp / "cut.mp4"),),
         probe_video, ValueError, r"cut\.mp4 is not a readable video"),
    case("output-is-a-folder", lambda tmp: (tmp,), VideoWriter, IsADirectoryError, r"cannot write video .*: it is a folder"),
    case("output-folder-missing", lambda tmp: (tmp / "no" / "out.mp4",), VideoWriter,
         FileNotFoundError, r"cannot write video .*out\.mp4: folder .*no does not exist"),
    pytest.param(lambda tmp: (Path("/proc/out.mp4"),), VideoWriter, PermissionError,
                 r"cannot write video /proc/out\.mp4: folder /proc is not writable", id="output-folder-unwritable",
                 marks=pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")),
    case("write-float-frame", lambda tmp: (tmp / "o.mp4", np.zeros((H, W, 3), np.float32)), write_frames,
         ValueError, r"frame 0 for .*o\.mp4 must be a uint8 RGB array \[H, W, 3\], got float32 \[48, 64, 3\]"),
    case("write-size-change", lambda tmp: (tmp / "o.mp4", np.zeros((H, W, 3), np.uint8), np.zeros((24, 32, 3), np.uint8)),
         write_frames, ValueError, r"frame 1 is 32x24 but video .*o\.mp4 is 64x48 \(set by its first frame\)"),
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
         ValueError, r"the image batch has 3 frames but the overlay frames have 2"),
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


@pytest.mark.parametrize("make, action, error, match", VIDEO_ERRORS)
def test_bad_video_paths_and_frames(make, action, error, match, tmp_path):
    check_error(make, action, error, match, tmp_path)
    assert not list(tmp_path.glob(".*.part")) and not (tmp_path / "o.mp4").exists()  # atomic: nothing left


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


def test_5000_px_line_fills_a_small_frame_without_a_memory_blow_up():
    frame = grey_frame()
    tracemalloc.start()
    try:
        out = render(frame, line(np.array([[10, 10], [50, 40]], np.float32), width=5000.0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.all(out == [255, 0, 0])
    assert peak < 16 * 2**20


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


def test_empty_display_list_returns_an_identical_new_frame():
    frame = flat_frame(H, W, (0.3, 0.6, 0.9), np.float32)
    out = render(frame)
    assert out is not frame and out.dtype == np.float32 and np.array_equal(out, frame)


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


def test_k_at_least_n_gives_the_complete_graph():
    points = np.array([[0, 0], [10, 0], [0, 10], [10, 10], [5, 20]], np.float32)
    with kept(points):
        edges, _ = build_edges(points, GraphParams(k=10))
    assert edges.tolist() == [[i, j] for i in range(5) for j in range(i + 1, 5)]


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


def test_writer_closed_without_frames_leaves_nothing(tmp_path):
    writer = VideoWriter(tmp_path / "none.mp4")
    with pytest.raises(ValueError, match=r"no frames were written to .*none\.mp4; nothing saved"):
        writer.close()
    assert list(tmp_path.iterdir()) == []
