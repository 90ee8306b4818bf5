"""Overlay Video (VIDEO -> VIDEO, streaming) with a stand-in ComfyUI, and interrupt safety of render_video.

ComfyUI is not importable here, so ``folder_paths``, ``comfy.utils.ProgressBar``
and ``comfy_api.latest`` (whose ``InputImpl.VideoFromFile`` the node returns)
are small fakes, and the VIDEO inputs are duck-typed like ComfyUI's
(``get_stream_source`` / ``save_to``).
"""

import hashlib
import inspect
import io
import os
import shutil
import sys
import threading
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fake_comfy import WIDGET_TYPES, Interrupted, VideoFromFile, install_comfy_api, install_progress_bar  # noqa: E402

install_comfy_api()

from trackoverlay.nodes.video import OverlayVideoNode, _overlay_spec  # noqa: E402
from trackoverlay.utils.draw.styles import BoxStyle, LineStyle  # noqa: E402
from trackoverlay.utils.graph.neighbours import GraphParams  # noqa: E402
from trackoverlay.utils.raster.cpu import CpuRenderer  # noqa: E402
from trackoverlay.utils.tracks.demo import DemoClip  # noqa: E402
from trackoverlay.utils.tracks.detect import TrackDetector  # noqa: E402
from trackoverlay.utils.video.io import (  # noqa: E402
    VideoWriter,
    iter_video_frames,
    presentation_times,
    probe_video,
)
from trackoverlay.utils.video.stream import DemoPoints, FrameSource, OverlaySpec, render_video  # noqa: E402

NODE = OverlayVideoNode
WIDGETS = {item.id: item.default for item in NODE.GET_SCHEMA().inputs if issubclass(item.Parent, WIDGET_TYPES)}
FRAMES, WIDTH, HEIGHT, FPS = 8, 96, 64, 12
BOX_CENTER = (48.0, 32.0)


# ------------------------------------------------------------------ fakes


class FileVideo:
    """A VIDEO backed by a file (like VideoFromFile(path))."""

    def __init__(self, path):
        self.path = str(path)

    def get_stream_source(self):
        return self.path


class BytesVideo:
    """A VIDEO held in memory (like VideoFromFile(BytesIO))."""

    def __init__(self, path):
        self.buffer = io.BytesIO(open(path, "rb").read())

    def get_stream_source(self):
        self.buffer.seek(0)
        return self.buffer


class LegacyVideo:
    """A VIDEO of older ComfyUI versions: no get_stream_source, only save_to."""

    def __init__(self, path):
        self.path = str(path)

    def save_to(self, path):
        shutil.copyfile(self.path, path)


@pytest.fixture
def comfy(tmp_path, monkeypatch):
    """Fake ComfyUI modules; returns the temp folder, the progress bar class and its recorded updates."""
    temp = tmp_path / "temp"
    paths = types.ModuleType("folder_paths")
    paths.get_temp_directory = lambda: str(temp)
    paths.get_output_directory = lambda: str(tmp_path / "output")

    def get_save_image_path(prefix, output_dir):
        subfolder, name = os.path.split(prefix)
        return os.path.join(output_dir, subfolder), name, 1, subfolder, prefix

    paths.get_save_image_path = get_save_image_path
    ProgressBar, calls = install_progress_bar(monkeypatch)
    monkeypatch.setitem(sys.modules, "folder_paths", paths)
    return temp, ProgressBar, calls


@pytest.fixture(scope="module")
def clip_file(tmp_path_factory):
    """An 8-frame 96x64 12 fps clip of glowing dots."""
    path = tmp_path_factory.mktemp("clip") / "dots.mp4"
    with VideoWriter(path, fps=FPS, crf=10) as writer:
        for frame in DemoClip(WIDTH, HEIGHT, FRAMES, fps=FPS, dots=5, seed=2).frames():
            writer.write(frame)
    return path


def digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def open_descriptors(path) -> list:
    """This process's file descriptors open on ``path`` (Linux /proc)."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd")
    target = os.path.realpath(path)
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == target:
                found.append(fd)
        except OSError:  # closed while listing
            pass
    return found


def files_under(folder) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def node_output(video, **inputs):
    """Overlay Video's NodeOutput with its widget defaults (CPU, bright-spot detection), overridden by
    ``inputs``."""
    widgets = {**WIDGETS, "backend": "cpu", "detect_method": "bright", "detect_min_distance": 6.0, "crf": 0}
    return NODE.execute(video=video, **{**widgets, **inputs})


def run_node(video, **inputs):
    """Overlay Video's VIDEO (see :func:`node_output`)."""
    (result,) = node_output(video, **inputs).args
    return result


def one_box_tracks(frames=1) -> dict:
    path = torch.tensor([[BOX_CENTER]], dtype=torch.float32).repeat(frames, 1, 1)
    return {"track_path": path, "track_visibility": torch.ones(frames, 1, dtype=torch.bool)}


# ------------------------------------------------------------------ the node


def test_streams_a_video_into_a_new_video_in_the_temp_folder(comfy, clip_file):
    temp, _, calls = comfy
    before = digest(clip_file)
    output = node_output(FileVideo(clip_file))
    (result,) = output.args
    assert isinstance(result, VideoFromFile)  # the core VIDEO type, backed by the new file
    assert output.ui.as_dict() == {"images": [{"filename": "overlay_00001_.mp4", "subfolder": "TrackOverlay",
                                               "type": "temp"}], "animated": (True,)}  # shown without Save Video
    assert files_under(temp) == ["TrackOverlay/overlay_00001_.mp4"]
    assert result.path == str(temp / "TrackOverlay" / "overlay_00001_.mp4")
    info = probe_video(result.path)
    assert (info.width, info.height, info.fps, info.frame_count) == (WIDTH, HEIGHT, FPS, FRAMES)
    assert calls == [("total", FRAMES)] + [(done, FRAMES) for done in range(1, FRAMES + 1)]
    first_in, first_out = next(iter_video_frames(clip_file)), next(iter_video_frames(result.path))
    assert np.abs(first_out.astype(int) - first_in.astype(int)).max() > 100  # detected dots are boxed
    assert digest(clip_file) == before and open_descriptors(clip_file) == []


def test_save_video_stores_the_layer_over_black(comfy, clip_file, tmp_path):
    """Core Save Video copies a VIDEO's streams into MP4, which refuses the layer's ProRes ("'mp4' format does
    not support 'prores'"). The layer's VIDEO saves the layer premultiplied over black instead, frame for frame
    and at the same times; the .mov with alpha is left as it is."""
    output = node_output(FileVideo(clip_file), layer_only=True)
    (result,) = output.args
    layer = result.layer_path
    (said,) = output.ui.as_dict()["text"]  # a browser cannot play the layer: the node says where it is
    assert f"({FRAMES} frames, ProRes 4444)" in said and said.endswith("TrackOverlay/layer_00001_.mov")
    assert files_under(tmp_path / "output") == ["TrackOverlay/layer_00001_.mov"]
    with pytest.raises(ValueError, match="does not support 'prores'"):
        VideoFromFile(layer).save_to(str(tmp_path / "copied.mp4"))
    before = digest(layer)
    result.save_to(str(tmp_path / "saved.mp4"))
    import av

    with av.open(layer) as container:
        rgba = np.stack([frame.to_ndarray(format="rgba") for frame in container.decode(video=0)]).astype(float)
    over_black = rgba[..., :3] * rgba[..., 3:] / 255
    saved = np.stack(list(iter_video_frames(tmp_path / "saved.mp4"))).astype(float)
    assert saved.shape == over_black.shape and over_black.max() > 200  # boxes drawn
    assert np.abs(saved - over_black).mean() < 1.0 and np.percentile(np.abs(saved - over_black), 99) < 14  # crf 18
    assert list(presentation_times(tmp_path / "saved.mp4")) == list(presentation_times(layer))
    assert digest(layer) == before and files_under(tmp_path / "output") == ["TrackOverlay/layer_00001_.mov"]


def test_connected_tracks_place_the_boxes_where_they_say(comfy, clip_file):
    result = run_node(FileVideo(clip_file), tracks=one_box_tracks(), draw_lines=False, units="pixels", box_size=20.0,
                      box_stroke_width=4.0, box_fill_opacity=0.0, box_roundness=0.0, box_color="#FF00FF")
    source, output = list(iter_video_frames(clip_file)), list(iter_video_frames(result.path))
    x, y = BOX_CENTER
    for before, after in zip(source, output):
        stroke = after[int(y), int(x) - 10].astype(int)  # left side of the 20 px box (4 px: whole chroma blocks)
        assert stroke[0] > 200 and stroke[2] > 200 and stroke[1] < 80, stroke
        np.testing.assert_allclose(after[int(y), int(x)], before[int(y), int(x)], atol=12)  # hollow inside


@pytest.mark.parametrize("make_video", [BytesVideo, LegacyVideo], ids=["in-memory", "save_to-only"])
def test_videos_without_a_path_are_copied_and_the_copy_removed(comfy, clip_file, make_video):
    temp, _, _ = comfy
    result = run_node(make_video(clip_file), max_frames=3)
    assert probe_video(result.path).frame_count == 3
    assert files_under(temp) == ["TrackOverlay/overlay_00001_.mp4"]  # the decoded copy is gone


@pytest.mark.parametrize("make_video", [FileVideo, BytesVideo], ids=["file", "in-memory"])
def test_interrupt_mid_stream_leaves_no_file_and_closes_the_decoder(comfy, clip_file, make_video):
    temp, bar, calls = comfy
    bar.stop_at = 3
    with pytest.raises(Interrupted):
        run_node(make_video(clip_file))
    assert calls[-1] == (3, FRAMES)
    assert files_under(temp) == []  # no half-written video, no .part file, no input copy
    assert open_descriptors(clip_file) == []


def test_percent_units_scale_with_the_video_height():
    widgets = {name: value for name, value in WIDGETS.items() if name.startswith(("link_", "line_", "box_"))}
    widgets.update(line_width=1.0, box_size=10.0, box_stroke_width=0.5, link_radius=20.0, link_k=2,
                   line_color="#FF0000", box_fill_color=" ")
    spec = _overlay_spec(widgets, 2.0, lines=True, boxes=False)
    assert spec.boxes is None
    assert (spec.lines.width, spec.lines.color, spec.graph.radius, spec.graph.k) == (2.0, "#FF0000", 40.0, 2)
    boxes = _overlay_spec(widgets, 2.0, lines=False, boxes=True).boxes
    assert (boxes.size, boxes.stroke_width, boxes.fill_color) == (20.0, 1.0, None)
    widgets.update(line_color_mode="speed", line_speed_range=3.0, line_gradient_colors="#000000,#FFFFFF",
                   box_color_mode="age", box_age_range=12.0)
    spec = _overlay_spec(widgets, 2.0, lines=True, boxes=True)
    assert (spec.lines.color_mode, spec.lines.speed_range, spec.lines.gradient_colors) == ("speed", 6.0,
                                                                                          "#000000,#FFFFFF")
    assert (spec.boxes.color_mode, spec.boxes.age_range) == ("age", 12.0)  # frames: not a length


def test_every_engine_parameter_has_a_prefixed_widget():
    spec = WIDGETS
    for prefix, engine in (("link_", GraphParams), ("line_", LineStyle), ("box_", BoxStyle)):
        names = {name[len(prefix):] for name in spec if name.startswith(prefix)}
        assert names == set(engine.__dataclass_fields__), prefix
    assert {name for name in spec if name.startswith("detect_")} == {  # detection runs on the node's backend
        "detect_" + name for name in inspect.signature(TrackDetector).parameters if name != "backend"}
    assert "backend" in spec


def test_track_count_mismatch_names_both_and_leaves_no_file(comfy, clip_file):
    temp, _, _ = comfy
    with pytest.raises(ValueError, match="tracks have 5 frames but the video has more"):
        run_node(FileVideo(clip_file), tracks=one_box_tracks(5))
    assert files_under(temp) == [] and open_descriptors(clip_file) == []
    with pytest.raises(ValueError, match="tracks belong to 1920x1080 frames but the video is"):
        run_node(FileVideo(clip_file), tracks={**one_box_tracks(), "track_frame_size": [1920, 1080]})
    assert files_under(temp) == [] and open_descriptors(clip_file) == []


def test_bad_inputs_say_what_to_connect_or_choose(comfy, tmp_path, clip_file):
    temp, _, _ = comfy
    with pytest.raises(TypeError, match="video must be a VIDEO .* got Tensor"):
        run_node(torch.zeros(2, 8, 8, 3))
    with pytest.raises(FileNotFoundError, match="missing.mp4 does not exist"):
        run_node(FileVideo(tmp_path / "missing.mp4"))
    with pytest.raises(ValueError, match="preset 'fastest' is not an x264 preset; use one of ultrafast"):
        run_node(FileVideo(clip_file), preset="fastest")
    with pytest.raises(ValueError, match="color"):
        run_node(FileVideo(clip_file), line_color="teal")
    assert files_under(temp) == [] and open_descriptors(clip_file) == []


# ------------------------------------------------------------ render_video


SPEC = OverlaySpec(GraphParams(k=2), LineStyle(width=1.5), BoxStyle(size=10))


@pytest.fixture
def renderer():
    cpu = CpuRenderer(workers=1)
    yield cpu
    cpu.close()


class FailingRenderer:
    """Renders with ``renderer`` but raises ``error`` when asked for frame ``fail_at`` (0-based)."""

    def __init__(self, renderer, error, fail_at):
        self.renderer, self.error, self.fail_at, self.calls = renderer, error, fail_at, 0
        self.frames_at_once, self.name = renderer.frames_at_once, renderer.name
        self._lock = threading.Lock()

    def _count(self):
        with self._lock:
            if self.calls == self.fail_at:
                raise self.error
            self.calls += 1

    def one_band(self):  # the renderer the video path draws with when it draws frames at once
        twin = FailingRenderer(self.renderer.one_band(), self.error, self.fail_at)
        twin._count = self._count
        return twin

    def render(self, frame, display_list, out=None, glow=None):
        self._count()
        return self.renderer.render(frame, display_list, out, glow)

    def rasterize(self, display_list, height, width, glow=None):  # what the video path asks for in YUV
        self._count()
        return self.renderer.rasterize(display_list, height, width, glow=glow)

    def host_array(self, nbytes):  # the YUV path's frame memory
        return self.renderer.host_array(nbytes)


def demo_points():
    return DemoPoints(DemoClip(WIDTH, HEIGHT, dots=5))


def test_a_decoder_closed_before_its_first_frame_releases_the_file(clip_file):
    frames = iter_video_frames(clip_file)
    assert len(open_descriptors(clip_file)) == 1
    frames.close()
    assert open_descriptors(clip_file) == []
    assert list(frames) == []


@pytest.mark.parametrize("where", ["progress", "renderer"])
@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("GPU fault")], ids=["ctrl-c", "error"])
def test_render_video_interrupted_leaves_no_file_and_closes_the_decoder(tmp_path, clip_file, renderer, where,
                                                                        error):
    failing = FailingRenderer(renderer, error, fail_at=2 if where == "renderer" else -1)

    def progress(done):
        if where == "progress" and done == 3:
            raise error

    with pytest.raises(type(error)):
        render_video(FrameSource.from_video(clip_file), demo_points(), SPEC, failing, tmp_path / "out.mp4",
                     progress=progress)
    assert list(tmp_path.iterdir()) == []
    assert open_descriptors(clip_file) == []


def test_render_video_closes_the_source_when_a_frame_limit_stops_it(tmp_path, clip_file, renderer):
    count = render_video(FrameSource.from_video(clip_file), demo_points(), SPEC, renderer, tmp_path / "out.mp4",
                         max_frames=2)
    assert count == 2 and open_descriptors(clip_file) == []


def test_render_video_runs_the_source_generators_cleanup(tmp_path, renderer):
    clip = DemoClip(WIDTH, HEIGHT, 50, dots=5)
    cleaned = []

    def frames():
        try:
            yield from clip.frames()
        finally:
            cleaned.append(True)

    def stop(done):
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        render_video(FrameSource(frames(), WIDTH, HEIGHT, 12, 50, clip), DemoPoints(clip), SPEC, renderer,
                     tmp_path / "out.mp4", progress=stop)
    # ``caught`` keeps the traceback, and with it the generator, alive: only an explicit close cleans up
    assert caught.type is KeyboardInterrupt and cleaned == [True] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("height", [360, 2160])
def test_default_widgets_give_the_pack_look_at_any_height(height):
    """A new node draws the CLI's default look: lengths in percent of the video's height."""
    from trackoverlay.nodes.adapters import pixels_per_unit
    from trackoverlay.utils.draw.units import look_lengths

    assert WIDGETS["units"] == "% of frame height"
    spec = _overlay_spec(WIDGETS, pixels_per_unit(WIDGETS["units"], height), lines=True, boxes=True)
    look = look_lengths(height, radius=None, line_width=None, dash_length=None, gap_length=None, box_size=None,
                        box_stroke=None)
    assert spec.graph.radius == pytest.approx(look["radius"])
    assert (spec.lines.width, spec.lines.dash_length, spec.lines.gap_length) == pytest.approx(
        (look["line_width"], look["dash_length"], look["gap_length"]))
    assert (spec.boxes.size, spec.boxes.stroke_width) == pytest.approx((look["box_size"], look["box_stroke"]))
