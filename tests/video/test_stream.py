"""Streaming pipeline: laziness, parity with the batch path, sources, sizes, errors."""

import dataclasses
import signal
import threading
import time
import weakref
from fractions import Fraction

import cv2
import numpy as np
import pytest
from synthetic import make_clip
from trackoverlay.utils.draw.display_list import Glyphs, merge_sequences
from trackoverlay.utils.draw.labels import label_overlay
from trackoverlay.utils.draw.overlays import box_overlay, link_overlay, trail_overlay
from trackoverlay.utils.draw.styles import BoxStyle, LabelStyle, LineStyle, TrailStyle
from trackoverlay.utils.graph.neighbours import GraphParams, build_edge_sequence, build_edges
from trackoverlay.utils.raster.batch import render_batch
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.raster.glow import Glow
from trackoverlay.utils.tracks.contract import Tracks
from trackoverlay.utils.tracks.demo import DemoClip
from trackoverlay.utils.tracks.detect import PREPARE_THREADS, TrackDetector
from trackoverlay.utils.tracks.track_file import load_tracks_json, save_tracks_json
from trackoverlay.utils.video.io import iter_video_frames, probe_video
from trackoverlay.utils.video.stream import (
    QUEUE_DEPTH,
    DemoPoints,
    DetectedPoints,
    FramePoints,
    FrameSource,
    OverlayBuilder,
    OverlaySpec,
    TrackPoints,
    TrailHistory,
    frames_in_flight,
    layer_rgba,
    overlay_frames,
    render_video,
)
from trackoverlay.utils.video.budget import Budget, MemoryBudgetError

SPEC = OverlaySpec(GraphParams(k=2, hysteresis=0.3), LineStyle(width=1.5, curve="straight"),
                   BoxStyle(size=10, stroke_width=1.0, fill_opacity=0.25))


class CountingFrames:
    """A frame generator that counts pulls and keeps weak references to what it gave out."""

    def __init__(self, frame, limit=None):
        self.frame, self.limit = frame, limit
        self.given = []

    def __iter__(self):
        while self.limit is None or len(self.given) < self.limit:
            frame = self.frame.copy()
            self.given.append(weakref.ref(frame))
            yield frame

    def alive(self):
        return sum(ref() is not None for ref in self.given)


def test_frames_are_pulled_lazily_and_released(demo_clip, cpu_renderer, tmp_path):
    frames = CountingFrames(demo_clip.frame(0))
    results = overlay_frames(iter(frames), DemoPoints(demo_clip), SPEC, cpu_renderer)
    assert len(frames.given) == 0
    next(results)
    assert len(frames.given) == 1
    next(results)
    assert len(frames.given) == 2

    alive = []
    endless = CountingFrames(demo_clip.frame(0))  # never ends: only max_frames stops it
    source = FrameSource(iter(endless), 160, 96, 12, 0, demo_clip)
    count = render_video(source, DemoPoints(demo_clip), SPEC, cpu_renderer, tmp_path / "out.mp4", max_frames=6,
                         progress=lambda done: alive.append(endless.alive()))
    assert count == 6 and len(endless.given) <= 6 + 2 * QUEUE_DEPTH  # pulled ahead by the decode queue at most
    assert max(alive) <= 2 * QUEUE_DEPTH + 3  # earlier input frames are gone: memory does not grow


def test_stream_matches_batch_pipeline(demo_clip, cpu_renderer):
    """Frame-by-frame graph with hysteresis draws exactly what the batch path draws."""
    path = np.stack([demo_clip.positions(t) for t in range(demo_clip.frame_count)])
    visible = np.ones(path.shape[:2], bool)
    visible[2:5, 1] = False  # a track hides for a while
    path[3, 4] = np.nan  # a lost tracker's NaN
    tracks = Tracks(path, visible)
    frames = np.stack(list(demo_clip.frames()))
    before = frames.copy()
    streamed = np.stack(list(overlay_frames(iter(frames), TrackPoints(tracks), SPEC, cpu_renderer)))
    overlays = merge_sequences(link_overlay(tracks.path, tracks.visibility, SPEC.graph, SPEC.lines),
                               box_overlay(tracks.path, tracks.visibility, SPEC.boxes))
    batch = render_batch(frames, overlays, cpu_renderer).frames
    np.testing.assert_array_equal(streamed, batch)
    np.testing.assert_array_equal(frames, before)
    assert not np.array_equal(streamed, frames)


def test_a_shot_holds_on_to_no_link_of_the_shot_before():
    """With hysteresis, the stream's graph on a shot's first frame is that frame's own, as the batch's is; here
    the links held from the frame before would differ (8 points walking at random, a cut at frame 2)."""
    rng = np.random.default_rng(0)
    path = (rng.uniform(0, 100, (1, 8, 2)) + np.cumsum(rng.normal(0, 6, (4, 8, 2)), axis=0)).astype(np.float32)
    tracks = Tracks(path, np.ones((4, 8), bool), cuts=(2,))
    params = GraphParams(k=2, hysteresis=0.5)
    builder, points = OverlayBuilder(OverlaySpec(params, boxes=None)), TrackPoints(tracks)
    streamed = []
    for t in range(4):
        builder(points(t, None), t)
        streamed.append(builder.edges)
    batch = build_edge_sequence(path, tracks.visibility, params, cuts=tracks.cuts)
    for got, want in zip(streamed, batch, strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(streamed[2], build_edges(path[2], params)[0])
    assert not np.array_equal(streamed[2], build_edge_sequence(path, tracks.visibility, params)[2])


def test_stream_draws_the_spec_glow_like_the_batch_path(demo_clip, cpu_renderer, tmp_path):
    glow = Glow(radius=5.0, strength=2.0)
    spec = dataclasses.replace(SPEC, glow=glow)
    path = np.stack([demo_clip.positions(t) for t in range(demo_clip.frame_count)])
    tracks = Tracks(path, np.ones(path.shape[:2], bool))
    frames = np.stack(list(demo_clip.frames()))
    streamed = np.stack(list(overlay_frames(iter(frames), TrackPoints(tracks), spec, cpu_renderer)))
    overlays = merge_sequences(link_overlay(tracks.path, tracks.visibility, SPEC.graph, SPEC.lines),
                               box_overlay(tracks.path, tracks.visibility, SPEC.boxes))
    np.testing.assert_array_equal(streamed, render_batch(frames, overlays, cpu_renderer, glow=glow).frames)
    assert np.any(streamed != render_batch(frames, overlays, cpu_renderer).frames)
    count = render_video(FrameSource.from_demo(demo_clip), TrackPoints(tracks), spec, cpu_renderer,
                         f"{tmp_path}/layer/", max_frames=2, layer_only=True)
    written = cv2.cvtColor(cv2.imread(str(tmp_path / "layer" / "frame_000001.png"), cv2.IMREAD_UNCHANGED),
                           cv2.COLOR_BGRA2RGBA)
    assert count == 2
    np.testing.assert_array_equal(written, layer_rgba(cpu_renderer, overlays[1], 96, 160, glow=glow))


def test_a_glow_too_large_for_the_memory_budget_is_refused_before_any_output(demo_clip, cpu_renderer, tmp_path):
    spec = dataclasses.replace(SPEC, glow=Glow(radius=5.0, strength=2.0))
    budget = Budget(160 * 96 * 4 * frames_in_flight(cpu_renderer) + (64 << 20) + 1000)  # the frames fit, the glow not
    with pytest.raises(MemoryBudgetError, match=r"the glow of a 160x96 video needs about .* or without glow"):
        render_video(FrameSource.from_demo(demo_clip), DemoPoints(demo_clip), spec, cpu_renderer,
                     tmp_path / "out.mp4", budget=budget)
    assert list(tmp_path.iterdir()) == []
    render_video(FrameSource.from_demo(demo_clip), DemoPoints(demo_clip), SPEC, cpu_renderer, tmp_path / "out.mp4",
                 budget=budget, max_frames=1)  # the same budget without the glow


def test_the_memory_budget_counts_the_frames_a_detector_holds(demo_clip, cpu_renderer, tmp_path):
    detected = DetectedPoints(TrackDetector(method="bright"))
    assert detected.frames_held() >= detected.detector.lookahead + 2
    budget = Budget(160 * 96 * 4 * frames_in_flight(cpu_renderer) + (64 << 20) + 1000)  # the pipeline's frames fit, not more
    # MB, not "0.1 GB ... 0.1 GB" (the sizes, three digits, depend on the frames drawn at once: the CPU count)
    with pytest.raises(MemoryBudgetError, match=r"a 160x96 video needs about 6[0-9](\.[0-9])? MB of memory but the "
                       r"limit is 6[0-9](\.[0-9])? MB; render a smaller video"):
        render_video(FrameSource.from_demo(demo_clip), detected, SPEC, cpu_renderer, tmp_path / "out.mp4",
                     budget=budget)
    assert list(tmp_path.iterdir()) == []
    render_video(FrameSource.from_demo(demo_clip), DemoPoints(demo_clip), SPEC, cpu_renderer, tmp_path / "out.mp4",
                 budget=budget, max_frames=1)  # the same budget with points that need no frames


@pytest.mark.parametrize("canvas", [True, False])
def test_a_demo_or_canvas_source_from_a_start_frame_gives_every_later_frame(demo_clip, canvas):
    source = FrameSource.from_demo(demo_clip, canvas=canvas)
    frames = list(source.timed(3))
    assert [item.index for item in frames] == list(range(3, demo_clip.frame_count))
    if not canvas:
        np.testing.assert_array_equal(frames[0].image, demo_clip.frame(3))


def test_hysteresis_carries_edges_between_frames():
    """Edges are track-column pairs kept from frame to frame: a sticky edge beats a slightly nearer newcomer."""
    spec = OverlaySpec(GraphParams(k=1, hysteresis=0.5), LineStyle(), None)
    points = np.array([[0, 0], [5, 0], [0, 10], [0, 21], [0, 19.5]], np.float32)
    hidden = np.array([True, True, True, True, False])  # track 4 appears in the second frame
    builder = OverlayBuilder(spec)
    builder(FramePoints(points, hidden))
    assert builder.edges.tolist() == [[0, 1], [0, 2], [2, 3]]
    builder(FramePoints(points, np.ones(5, bool)))
    assert builder.edges.tolist() == [[0, 1], [0, 2], [3, 4]]  # 2 keeps 0 (10 px) over newcomer 4 (9.5 px)
    fresh = OverlayBuilder(spec)
    fresh(FramePoints(points, np.ones(5, bool)))
    assert fresh.edges.tolist() == [[0, 1], [2, 4], [3, 4]]


def _layers_equal(one, other) -> None:
    assert [type(layer) for layer in one.layers] == [type(layer) for layer in other.layers]
    for mine, theirs in zip(one.layers, other.layers):
        for name in mine.__dataclass_fields__:
            value, expected = getattr(mine, name), getattr(theirs, name)
            if isinstance(value, np.ndarray):
                assert value.dtype == expected.dtype and not value.flags.writeable, name
                np.testing.assert_array_equal(value, expected, err_msg=name)
            elif name == "atlas":
                np.testing.assert_array_equal(value.coverage, expected.coverage)
            else:
                assert value == expected, name


@pytest.mark.parametrize("spec", [
    SPEC,
    OverlaySpec(GraphParams(k=3, hysteresis=0.3), LineStyle(color_mode="speed", gradient=True, curve="cubic"),
                BoxStyle(color_mode="age", size_mode="track", fill_opacity=0.2), TrailStyle(length=5), LabelStyle()),
    OverlaySpec(GraphParams(mode="radius", radius=40.0), LineStyle(pattern="dashed", color_mode="track"),
                BoxStyle(shape="brackets", color_mode="speed")),
], ids=["plain", "motion-trails-labels", "radius-dashed-brackets"])
def test_frames_built_together_equal_frames_built_one_by_one(spec):
    """A group's display lists equal the builder's frame by frame, bit for bit: tracks that appear, hide, carry
    no position, fade or have sizes in some frames only, and a shot that starts inside a group."""
    rng = np.random.default_rng(5)
    frames = []
    for t in range(22):
        count = 0 if t < 2 else 3 + t // 2  # new tracks keep appearing (columns only grow)
        positions = (rng.random((count, 2)) * [160, 90]).astype(np.float32)
        if count > 4:
            positions[2] = np.nan
        frames.append(FramePoints(positions, rng.random(count) > 0.2,
                                  (rng.random((count, 2)) * 20).astype(np.float32) if t % 3 == 0 else None,
                                  rng.random(count).astype(np.float32) if t % 2 else None,
                                  tuple(f"p{i}" for i in range(count)), shot_start=t == 12))
    one_by_one = OverlayBuilder(spec, frame_size=(160, 90))
    expected = [one_by_one(points, index) for index, points in enumerate(frames)]
    together = OverlayBuilder(spec, frame_size=(160, 90))
    built = [display_list for start in range(0, len(frames), 8)
             for display_list in together.group(frames[start:start + 8], list(range(start, start + 8)))]
    assert len(built) == len(expected)
    assert sum(display_list.primitive_count for display_list in expected) > 150
    for display_list, wanted in zip(built, expected):
        _layers_equal(display_list, wanted)
    np.testing.assert_array_equal(together.edges, one_by_one.edges)


def test_boxes_follow_tracks_json(tmp_path, cpu_renderer):
    """Tracks from a JSON file land where the file says, frame by frame, with their own sizes."""
    centers = np.array([[[20.0, 30.0], [60.0, 30.0]], [[24.0, 34.0], [60.0, 50.0]]], np.float32)
    size = np.full((2, 2, 2), 12.0, np.float32)
    save_tracks_json(Tracks(centers, np.ones((2, 2), bool), size), tmp_path / "tracks.json")
    points = TrackPoints(load_tracks_json(tmp_path / "tracks.json"))
    spec = OverlaySpec(GraphParams(k=1), None, BoxStyle(size_mode="track", stroke_width=2.0, fill_opacity=0.0,
                                                        roundness=0.0, color="#FF0000"))
    black = np.zeros((2, 64, 96, 3), np.uint8)
    out = list(overlay_frames(iter(black), points, spec, cpu_renderer))
    for t, frame in enumerate(out):
        for x, y in centers[t]:
            left_edge = frame[int(y), int(x - 6)]  # the stroke is centred on the box outline
            assert tuple(left_edge) == (255, 0, 0), (t, x, y)
            assert frame[int(y), int(x)].sum() == 0  # no fill
        assert frame[5, 90].sum() == 0


def test_track_frame_count_must_match(tmp_path, cpu_renderer):
    tracks = Tracks(np.zeros((3, 1, 2), np.float32) + 8, np.ones((3, 1), bool))
    clip = DemoClip(width=32, height=32, frame_count=5, dots=0)
    output = tmp_path / "out.mp4"
    with pytest.raises(ValueError, match="tracks in t.json have 3 frames but the video has more"):
        render_video(FrameSource.from_demo(clip), TrackPoints(tracks, "tracks in t.json"), SPEC, cpu_renderer, output)
    short = DemoClip(width=32, height=32, frame_count=2, dots=0)
    with pytest.raises(ValueError, match="have 3 frames but the video has only 2"):
        render_video(FrameSource.from_demo(short), TrackPoints(tracks), SPEC, cpu_renderer, output)
    assert list(tmp_path.iterdir()) == []  # atomic: nothing written on error
    limited = render_video(FrameSource.from_demo(clip), TrackPoints(tracks), SPEC, cpu_renderer, output, max_frames=3)
    assert limited == 3
    one = Tracks(np.full((1, 1, 2), 8.0, np.float32), np.ones((1, 1), bool))  # one track frame repeats
    assert render_video(FrameSource.from_demo(clip), TrackPoints(one), SPEC, cpu_renderer, output) == 5


def test_video_in_video_out_keeps_size_rate_and_count(demo_clip_file, cpu_renderer, tmp_path):
    source_path, output = demo_clip_file, tmp_path / "out.mp4"
    detector = TrackDetector(method="bright", min_distance=8)
    count = render_video(FrameSource.from_video(source_path), DetectedPoints(detector), SPEC, cpu_renderer, output,
                         png_dir=tmp_path / "png")
    info = probe_video(output)
    assert (count, info.frame_count, info.width, info.height, info.fps) == (8, 8, 160, 96, 12)
    assert detector.track_count >= 6
    pngs = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert pngs == [f"frame_{i:06d}.png" for i in range(8)]
    first_in, first_out = next(iter_video_frames(source_path)), next(iter_video_frames(output))
    assert np.abs(first_out.astype(int) - first_in.astype(int)).max() > 100  # the overlay is there


def test_a_detection_that_finds_nothing_to_draw_says_so(demo_clip, cpu_renderer, tmp_path, caplog):
    with caplog.at_level("WARNING", logger="trackoverlay"):
        render_video(FrameSource.from_demo(demo_clip, canvas=True), DetectedPoints(TrackDetector()), SPEC,
                     cpu_renderer, tmp_path / "blank.mp4")
        assert "detection (method corners) found no point to draw in any frame" in caplog.text
        caplog.clear()
        render_video(FrameSource.from_demo(demo_clip), DetectedPoints(TrackDetector(method="bright")), SPEC,
                     cpu_renderer, tmp_path / "dots.mp4")
        assert "found no point" not in caplog.text


def test_png_dir_that_is_a_file(demo_clip, cpu_renderer, tmp_path):
    (tmp_path / "taken").write_text("x")
    with pytest.raises(ValueError, match=r"cannot write PNG folder .*taken: it is a file, not a folder; give a new or empty folder"):
        render_video(FrameSource.from_demo(demo_clip), DemoPoints(demo_clip), SPEC, cpu_renderer,
                     tmp_path / "o.mp4", png_dir=tmp_path / "taken")


def test_detected_points_pair_each_frame_with_its_own_points(demo_clip):
    frames = list(demo_clip.frames())
    detector = TrackDetector(method="bright", min_distance=8)
    pairs = list(DetectedPoints(detector).pairs(iter(frames)))
    assert len(pairs) == len(frames) and detector.lookahead > 1  # frames held back, none lost
    for t, (frame, points) in enumerate(pairs):
        assert frame is frames[t]
        shown = points.positions[points.visible]
        truth = demo_clip.positions(t)
        assert np.hypot(*(shown[:, None] - truth[None]).transpose(2, 0, 1)).min(axis=1).max() < 1.0
        assert points.opacity is not None and (points.opacity[points.visible] > 0).all()


def test_detector_rejects_size_change_and_batches():
    detector = TrackDetector()
    detector.push(np.zeros((16, 16, 3), np.uint8))
    with pytest.raises(ValueError, match="frame 1 is 20x16 but earlier frames are 16x16"):
        detector.push(np.zeros((16, 20, 3), np.uint8))
    with pytest.raises(ValueError, match=r"one frame \[H, W, 3\]"):
        detector.push(np.zeros((2, 16, 16, 3), np.uint8))
    with pytest.raises(ValueError, match=r"subject mask of frame 1 has shape \[8, 8\], expected \[16, 16\]"):
        detector.push(np.zeros((16, 16, 3), np.uint8), np.ones((8, 8), bool))


def test_labels_follow_the_tracks_text_inside_the_frame(cpu_renderer):
    """Labels draw on top of the boxes, with each track's text, the same as the batch builder's, kept on screen."""
    path = np.array([[[5.0, 5.0], [50.0, 30.0]], [[6.0, 6.0], [51.0, 31.0]]], np.float32)
    tracks = Tracks(path, np.ones((2, 2), bool), text=["Ωx", "Жy"])
    style = LabelStyle(text="track_text", size=10, box_size=10.0)
    spec = OverlaySpec(SPEC.graph, None, SPEC.boxes, labels=style)
    builder = OverlayBuilder(spec, frame_size=(64, 48))
    points = TrackPoints(tracks)
    for index in range(2):
        display_list = builder(points(index, None), index)
        assert isinstance(display_list.layers[-1], Glyphs) and display_list.layers[-1].count == 4
        batch = label_overlay(path, tracks.visibility, style, tracks.text, bounds=(64, 48))[index]
        np.testing.assert_array_equal(display_list.layers[-1].origin, batch.layers[-1].origin)
        assert display_list.layers[-1].origin.min() >= 0  # the label at (5, 5) stays inside
    frame = np.zeros((48, 64, 3), np.uint8)
    drawn = list(overlay_frames([frame, frame], points, spec, cpu_renderer))
    assert all(np.count_nonzero(image) > 100 for image in drawn)
    with pytest.raises(ValueError, match="texts must hold 2 strings"):
        FramePoints(path[0], np.ones(2, bool), texts=("a",))


def test_frame_points_shapes():
    with pytest.raises(ValueError, match=r"positions must have shape \[3, 2\]"):
        FramePoints(np.zeros((2, 2)), np.ones(3, bool))
    with pytest.raises(ValueError, match=r"sizes must have shape \[1, 2\]"):
        FramePoints(np.zeros((1, 2)), np.ones(1, bool), np.zeros((1, 3)))


def moving_tracks(frames=24, columns=6, seed=0):
    """Random walks on a 96x64 canvas, some hidden now and then, with fades."""
    rng = np.random.default_rng(seed)
    path = (rng.uniform(20, 60, (columns, 2)) + rng.normal(0.0, 2.0, (frames, columns, 2)).cumsum(axis=0))
    visible = rng.random((frames, columns)) > 0.12
    opacity = rng.uniform(0.3, 1.0, (frames, columns)).astype(np.float32)
    return path.astype(np.float32), visible, opacity


def test_streamed_trails_equal_the_batch_trails(cpu_renderer):
    """Trails from the stream's ring of frames equal the batch builder's, field by field and drawn,
    with tracks that hide, fade, end, and columns that appear mid-stream (as a detector adds them)."""
    path, visible, opacity = moving_tracks(frames=30)
    visible[:10, 4:] = False  # columns 4 and 5 appear at frame 10
    visible[18:, 2] = False  # track 2 ends: its trail fades out
    trails = TrailStyle(length=7, width=3.0, smoothing=0.5, fade=1.5, color_mode="track")
    spec = OverlaySpec(GraphParams(k=2), LineStyle(width=1.0, curve="straight"), BoxStyle(size=6), trails)
    builder = OverlayBuilder(spec)
    streamed = [builder(FramePoints(path[t, :4 if t < 10 else 6], visible[t, :4 if t < 10 else 6],
                                    opacity=opacity[t, :4 if t < 10 else 6])) for t in range(30)]
    batch = trail_overlay(path, visible, trails, opacity)
    assert sum(display_list.primitive_count for display_list in batch) > 100
    for t, (ours, theirs) in enumerate(zip(streamed, batch)):
        trail_layers = [layer for layer in ours.layers if getattr(layer, "vertex_width", None) is not None]
        assert len(trail_layers) == len(theirs.layers) == (t > 0)
        for mine, lines in zip(trail_layers, theirs.layers):
            for name in ("vertices", "offsets", "width", "color_start", "color_end", "vertex_width", "vertex_alpha"):
                np.testing.assert_array_equal(getattr(mine, name), getattr(lines, name), err_msg=f"{t} {name}")
    tracks = Tracks(path, visible, opacity=opacity)
    frames = np.zeros((30, 64, 96, 3), np.uint8)
    drawn = list(overlay_frames(iter(frames), TrackPoints(tracks), spec, cpu_renderer))
    overlays = merge_sequences(trail_overlay(tracks.path, tracks.visibility, trails, tracks.opacity),
                               link_overlay(tracks.path, tracks.visibility, spec.graph, spec.lines,
                                            opacity=tracks.opacity),
                               box_overlay(tracks.path, tracks.visibility, spec.boxes, opacity=tracks.opacity))
    np.testing.assert_array_equal(np.stack(drawn), render_batch(frames, overlays, cpu_renderer).frames)


def test_a_scene_cut_ends_the_streamed_trails_as_it_ends_the_batch_trails(cpu_renderer):
    """Tracks with a cut at frame 15 (some end there, some keep their column): the stream draws what the
    batch draws, and neither draws the old shot's trails over the new one."""
    path, visible, opacity = moving_tracks(frames=30)
    visible[15:, :3] = False
    trails = TrailStyle(length=7, width=3.0, smoothing=0.5)
    spec = OverlaySpec(lines=None, boxes=None, trails=trails)
    frames = np.zeros((30, 64, 96, 3), np.uint8)
    drawn = list(overlay_frames(iter(frames), TrackPoints(Tracks(path, visible, opacity=opacity, cuts=(15,))),
                                spec, cpu_renderer))
    batch = render_batch(frames, trail_overlay(path, visible, trails, opacity, cuts=(15,)), cpu_renderer).frames
    np.testing.assert_array_equal(np.stack(drawn), batch)
    uncut = render_batch(frames, trail_overlay(path, visible, trails, opacity), cpu_renderer).frames
    np.testing.assert_array_equal(batch[:15], uncut[:15])
    assert all((batch[t] != uncut[t]).any() for t in range(15, 21))


def test_detected_points_end_every_trail_at_a_scene_cut(cpu_renderer):
    clip = make_clip(frames=24, cuts=(12,), pan=(1.0, 0.5))
    spec = OverlaySpec(lines=None, boxes=None, trails=TrailStyle(length=8))
    points = DetectedPoints(TrackDetector(max_points=30, min_distance=10.0))
    drawn = list(overlay_frames(iter(clip.frames), points, spec, cpu_renderer))
    assert points.detector.cuts == [12]
    assert (drawn[11] != clip.frames[11]).any() and (drawn[13] != clip.frames[13]).any()
    np.testing.assert_array_equal(drawn[12], clip.frames[12])  # the new shot's points have one position there


def test_trail_history_keeps_a_constant_number_of_frames():
    history = TrailHistory(5)
    for t in range(40):
        history.push(FramePoints(np.full((3, 2), t, np.float32), np.ones(3, bool)))
    path, visible, opacity = history.window()
    assert path.shape == (5, 3, 2) and history.path.shape == (5, 3, 2)
    assert path[:, 0, 0].tolist() == [35, 36, 37, 38, 39] and visible.all() and (opacity == 1).all()


def test_trail_frame_ranges_join_bit_exact(tmp_path, cpu_renderer):
    """A part starting at frame 14 replays the trails' frames before it: the parts equal the whole render."""
    path, visible, _ = moving_tracks(frames=20)
    tracks = Tracks(path, visible)
    spec = OverlaySpec(GraphParams(), None, None, TrailStyle(length=6, width=3.0, smoothing=0.5, opacity=1.0))
    clip = DemoClip(width=96, height=64, frame_count=20, fps=12, dots=0)

    def render(name, tracks=tracks, **frame_range):
        folder = f"{tmp_path}/{name}/"
        render_video(FrameSource.from_demo(clip, canvas=True), TrackPoints(tracks), spec, cpu_renderer, folder,
                     **frame_range)
        return {p.name: cv2.imread(str(p)) for p in sorted((tmp_path / name).iterdir())}

    whole = render("whole")
    joined = {**render("a", end_frame=14), **render("b", start_frame=14)}
    assert list(joined) == list(whole) == [f"frame_{i:06d}.png" for i in range(20)]
    for name, image in whole.items():
        np.testing.assert_array_equal(joined[name], image, err_msg=name)
    fresh = render("fresh", tracks=Tracks(path[14:], visible[14:]), max_frames=1)  # no history: a different frame
    assert not np.array_equal(fresh["frame_000000.png"], whole["frame_000014.png"])


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError])
def test_a_detection_render_stopped_midway_leaves_no_file_and_no_thread(demo_clip_file, cpu_renderer, tmp_path,
                                                                        failure):
    """Detection decodes on a thread of its own and prepares frames on more: an interrupt (or a failing
    frame callback) stops them all before the source closes, and nothing is written."""

    def progress(done):
        if done == 3:
            raise failure("stop here")

    before = threading.active_count()
    output = tmp_path / "out.mp4"
    with pytest.raises(failure, match="stop here"):
        render_video(FrameSource.from_video(demo_clip_file), DetectedPoints(TrackDetector(method="bright")), SPEC,
                     cpu_renderer, output, progress=progress)
    assert threading.active_count() == before
    assert list(tmp_path.iterdir()) == []


class Stop(BaseException):
    """What a signal handler raises (like the CLI's SIGTERM handler)."""


def pipeline_threads():
    return [thread.name for thread in threading.enumerate() if thread.name.startswith("trackoverlay-")]


def stalling_source(clip, stall_at, count=48):
    """A source whose frame ``stall_at`` takes half a second to come (a 4K decode, say); ``entered`` is set
    when it starts, so the test can fail while the decoding thread is inside the source's generator."""
    entered = threading.Event()

    def frames():
        for index in range(count):
            if index == stall_at:
                entered.set()
                time.sleep(0.5)
            yield clip.frame(index % clip.frame_count)

    return FrameSource(frames(), clip.width, clip.height, Fraction(clip.fps), count), entered


@pytest.mark.parametrize("failure", ["detector", "signal", "drawing"])
def test_an_error_while_the_source_is_decoding_ahead_comes_out_unchanged(demo_clip, tmp_path, failure):
    """The frames a detector needs are decoded on a thread of their own: an error (or a signal) while that
    thread is inside the source's generator stops and joins it before the source is closed, so the error is
    the caller's (not 'generator already executing'), no thread is left and no file is written."""
    detector = TrackDetector(method="bright")
    first_unneeded = 2 * PREPARE_THREADS + (detector.lookahead if failure == "drawing" else 0)
    source, entered = stalling_source(demo_clip, first_unneeded)
    prepare = detector.prepare
    renderer = CpuRenderer(workers=1)

    def failing_prepare(frame, subject=None, index=None):  # frame 0's result is awaited while first_unneeded decodes
        if index == 0:
            assert entered.wait(10)
            if failure == "detector":
                raise cv2.error("cornerSubPix: the frame is too small")
            if failure == "signal":
                time.sleep(0.1)  # the caller waits for this frame's result, outside the decoding generator
                signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)
        return prepare(frame, subject, index)

    def failing_render(*args, **kwargs):  # frame 0 is drawn while the first frame it does not need decodes
        assert entered.wait(10)
        raise RuntimeError("cudaErrorLaunchFailure")

    def stop(signum, frame):
        raise Stop(signum)

    if failure == "drawing":
        renderer.render = failing_render
    else:
        detector.prepare = failing_prepare
    expected = {"detector": (cv2.error, "too small"), "signal": (Stop, str(int(signal.SIGUSR1))),
                "drawing": (RuntimeError, "cudaErrorLaunchFailure")}[failure]
    previous = signal.signal(signal.SIGUSR1, stop)
    try:
        with pytest.raises(expected[0], match=expected[1]):
            render_video(source, DetectedPoints(detector), SPEC, renderer, tmp_path / "out.mp4")
    finally:
        signal.signal(signal.SIGUSR1, previous)
        renderer.close()
    assert pipeline_threads() == []
    assert list(tmp_path.iterdir()) == []
