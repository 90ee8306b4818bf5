"""Colours by speed, direction and age: gradients, known motions to known colours, streams equal to batches."""

import dataclasses

import numpy as np
import pytest
from trackoverlay.utils.draw.colors import parse_gradient, sample_gradient
from trackoverlay.utils.draw.display_list import merge_sequences
from trackoverlay.utils.draw.motion import Motion, MotionTracker, motion_colors, still_colors, track_motion
from trackoverlay.utils.draw.overlays import box_overlay, box_primitives, link_overlay, link_polylines
from trackoverlay.utils.draw.styles import BoxStyle, LineStyle
from trackoverlay.utils.graph.neighbours import GraphParams
from trackoverlay.utils.raster.batch import render_batch
from trackoverlay.utils.tracks.contract import Tracks
from trackoverlay.utils.video.stream import FrameSource, OverlaySpec, TrackPoints, overlay_frames, render_video

RED, GREEN, BLUE = (1, 0, 0, 1), (0, 1, 0, 1), (0, 0, 1, 1)
GREYS = "#000000,#FFFFFF"


# ------------------------------------------------------------------ gradients


def test_a_gradient_mixes_evenly_spaced_colours_and_clamps():
    stops = parse_gradient("#FF0000, #00FF00 ,#0000FF")
    np.testing.assert_array_equal(stops, [RED, GREEN, BLUE])
    got = sample_gradient(stops, np.array([-1.0, 0.0, 0.25, 0.5, 0.75, 1.0, 3.0]))
    want = [RED, RED, (0.5, 0.5, 0, 1), GREEN, (0, 0.5, 0.5, 1), BLUE, BLUE]
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_a_cyclic_gradient_goes_round_and_closes_on_its_first_colour():
    stops = parse_gradient([RED, GREEN, BLUE])
    got = sample_gradient(stops, np.array([0.0, 1 / 3, 2 / 3, 5 / 6, 1.0, -1 / 6, 7 / 3]), cyclic=True)
    want = [RED, GREEN, BLUE, (0.5, 0, 0.5, 1), RED, (0.5, 0, 0.5, 1), GREEN]
    np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("value, message", [
    ("#FF0000", r"gradient colors '#FF0000' must name at least 2 colours"),
    ("#FF0000,,#00FF00", r"has an empty entry"),
    ("#FF0000,red", r"gradient colors entry 2 'red' is not a colour"),
    ("", r"has an empty entry"),
])
def test_bad_gradients_are_refused(value, message):
    with pytest.raises(ValueError, match=message):
        parse_gradient(value)


def test_styles_check_their_gradient_and_ranges_whatever_the_mode():
    with pytest.raises(ValueError, match="line gradient_colors '#FFF' must name at least 2 colours"):
        LineStyle(gradient_colors="#FFF")
    with pytest.raises(ValueError, match=r"box speed range must be a number in \(0, 100000\], got 0"):
        BoxStyle(speed_range=0.0)
    with pytest.raises(ValueError, match=r"line age range must be a number in \(0, 1e\+07\], got -1"):
        LineStyle(age_range=-1.0)


# ------------------------------------------------------------------ motion


def known_path():
    """Track 0 moves (3, 4) right and down, rests, hides, comes back 10 px right; track 1 appears at frame 2
    and moves up 5, left 5, down 5."""
    path = np.array([[[0, 0], [0, 0]], [[3, 4], [0, 0]], [[3, 4], [50, 50]], [[np.nan, np.nan], [50, 45]],
                     [[13, 4], [45, 45]], [[13, 4], [45, 50]]], np.float32)
    visible = np.array([[1, 0], [1, 0], [1, 1], [0, 1], [1, 1], [1, 1]], bool)
    return path, visible


def test_speed_direction_and_age_of_known_moves():
    motion = track_motion(*known_path())
    np.testing.assert_allclose(motion.speed, [[0, 0], [5, 0], [0, 0], [0, 5], [0, 5], [0, 5]], atol=1e-6)
    down_right = np.degrees(np.arctan2(-4, 3)) % 360  # 306.87: image rows grow downward
    np.testing.assert_allclose(motion.direction, [[0, 0], [down_right, 0], [0, 0], [0, 90], [0, 180], [0, 270]],
                               atol=1e-4)
    np.testing.assert_array_equal(motion.age, [[0, 0], [1, 0], [2, 0], [3, 1], [4, 2], [5, 3]])


def test_the_stream_tracker_gives_the_batch_motion_frame_by_frame():
    path, visible = known_path()
    batch = track_motion(path, visible)
    tracker = MotionTracker()
    for t in range(len(path)):
        columns = 1 if t < 2 else 2  # a column that joins later
        step = tracker(path[t, :columns], visible[t, :columns])
        for got, want in zip(step, batch, strict=True):
            np.testing.assert_array_equal(got, want[t, :columns])


def test_a_cut_ends_the_moves_but_not_the_age():
    """A scene cut before frame 4: track 1, seen on both sides, does not move into it (speed and direction 0, as
    after a gap), its age goes on, and it moves again after; the stream, told of the cut, agrees."""
    path, visible = known_path()
    motion = track_motion(path, visible, cuts=(4,))
    np.testing.assert_allclose(motion.speed, [[0, 0], [5, 0], [0, 0], [0, 5], [0, 0], [0, 5]], atol=1e-6)
    np.testing.assert_allclose(motion.direction[4], [0, 0])
    np.testing.assert_array_equal(motion.age, track_motion(path, visible).age)
    tracker = MotionTracker()
    for t in range(len(path)):
        for got, want in zip(tracker(path[t], visible[t], shot_start=t == 4), motion, strict=True):
            np.testing.assert_array_equal(got, want[t])


def test_known_motions_map_to_known_colours():
    motion = Motion(np.array([0.0, 5.0, 10.0, 40.0], np.float32), np.array([0, 90, 180, 315], np.float32),
                    np.array([0, 1, 2, 8], np.float32))
    speed = motion_colors(LineStyle(color_mode="speed", gradient_colors=GREYS, speed_range=10.0), motion)
    np.testing.assert_allclose(speed[:, 0], [0.0, 0.5, 1.0, 1.0], atol=1e-6)
    age = motion_colors(BoxStyle(color_mode="age", gradient_colors=GREYS, age_range=4.0), motion)
    np.testing.assert_allclose(age[:, 0], [0.0, 0.25, 0.5, 1.0], atol=1e-6)
    direction = motion_colors(LineStyle(color_mode="direction", gradient_colors="#FF0000,#00FF00,#0000FF,#FFFFFF"),
                              motion)  # four colours at 0, 90, 180, 270 degrees
    np.testing.assert_allclose(direction[:3], [RED, GREEN, BLUE], atol=1e-6)
    np.testing.assert_allclose(direction[3], [1.0, 0.5, 0.5, 1.0], atol=1e-6)  # halfway from white back to red
    np.testing.assert_allclose(still_colors(BoxStyle(color_mode="age", gradient_colors=GREYS), 2),
                               [(0, 0, 0, 1)] * 2)
    assert still_colors(BoxStyle(), 2) is None


# ------------------------------------------------------------------ builders


def test_links_take_each_end_tracks_colour_and_boxes_their_own():
    path, visible = known_path()
    style = LineStyle(color_mode="speed", gradient_colors=GREYS, speed_range=10.0, opacity=0.5, gradient=True)
    lines = link_overlay(path, visible, GraphParams(k=1), style, backend="cpu")
    frame = lines[4].layers[0]  # tracks 0 (speed 0) and 1 (speed 5) both visible
    np.testing.assert_allclose(frame.color_start, [[0, 0, 0, 0.5]], atol=1e-6)  # drawn from the lower id: 0
    np.testing.assert_allclose(frame.color_end, [[0.5, 0.5, 0.5, 0.5]], atol=1e-6)
    single = link_overlay(path, visible, GraphParams(k=1), dataclasses.replace(style, gradient=False), backend="cpu")
    np.testing.assert_allclose(single[4].layers[0].color_end, [[0, 0, 0, 0.5]], atol=1e-6)
    boxes = box_overlay(path, visible, BoxStyle(color_mode="age", gradient_colors=GREYS, age_range=4.0,
                                                fill_opacity=0.5, opacity=1.0))
    np.testing.assert_allclose(boxes[4].layers[0].stroke_color, [[1, 1, 1, 1], [0.5, 0.5, 0.5, 1]], atol=1e-6)
    np.testing.assert_allclose(boxes[4].layers[0].fill_color[:, 3], [0.5, 0.5], atol=1e-6)


def test_one_frame_builders_need_the_motion_given():
    points = np.array([[0, 0], [10, 0]], np.float32)
    with pytest.raises(ValueError, match="color_mode 'age' colours by the tracks' motion"):
        link_polylines(points, np.arange(2), np.array([[0, 1]]), LineStyle(color_mode="age"))
    with pytest.raises(ValueError, match=r"point_colors must have shape \[2, 4\]"):
        box_primitives(points, np.ones((2, 2)), np.arange(2), BoxStyle(color_mode="speed"),
                       point_colors=np.zeros((3, 4), np.float32))


def moving_tracks(frames=10, count=7, seed=4, cuts=()):
    rng = np.random.default_rng(seed)
    path = (rng.uniform(20, 140, (1, count, 2)) + np.cumsum(rng.normal(0, 3, (frames, count, 2)), axis=0))
    visible = rng.random((frames, count)) > 0.15
    visible[:4, -1] = False  # a track that appears later
    path = path.astype(np.float32)
    path[5, 2] = np.nan  # a lost tracker's NaN
    return Tracks(path, visible | np.isnan(path).any(axis=2), cuts=cuts)


SPEC = OverlaySpec(GraphParams(k=2, hysteresis=0.3),
                   LineStyle(width=2.0, curve="straight", color_mode="speed", speed_range=6.0, gradient=True),
                   BoxStyle(size=12, stroke_width=1.5, fill_opacity=0.3, color_mode="direction"))


@pytest.mark.parametrize("spec", [SPEC, dataclasses.replace(SPEC, lines=dataclasses.replace(SPEC.lines,
                                                                                              color_mode="age"),
                                                          boxes=dataclasses.replace(SPEC.boxes, color_mode="age",
                                                                                    age_range=5.0))],
                         ids=["speed-direction", "age"])
@pytest.mark.parametrize("cuts", [(), (6,)], ids=["one shot", "a cut"])
def test_the_stream_draws_the_batch_colours(cpu_renderer, spec, cuts):
    tracks = moving_tracks(cuts=cuts)
    frames = np.full((len(tracks.path), 120, 160, 3), 30, np.uint8)
    streamed = np.stack(list(overlay_frames(iter(frames), TrackPoints(tracks), spec, cpu_renderer)))
    overlays = merge_sequences(link_overlay(tracks.path, tracks.visibility, spec.graph, spec.lines, backend="cpu",
                                            cuts=cuts), box_overlay(tracks.path, tracks.visibility, spec.boxes,
                                                                    cuts=cuts))
    np.testing.assert_array_equal(streamed, render_batch(frames, overlays, cpu_renderer).frames)
    plain = dataclasses.replace(spec, lines=dataclasses.replace(spec.lines, color_mode="single"),
                                boxes=dataclasses.replace(spec.boxes, color_mode="single"))
    assert np.any(streamed != np.stack(list(overlay_frames(iter(frames), TrackPoints(tracks), plain, cpu_renderer))))


def test_a_frame_range_replays_the_motion_before_it(cpu_renderer, tmp_path):
    """Age and speed need every earlier frame: a part from frame 4 equals the whole render's frames 4.."""
    import cv2
    from trackoverlay.utils.tracks.demo import DemoClip

    tracks = moving_tracks()
    spec = dataclasses.replace(SPEC, graph=GraphParams(k=2), lines=dataclasses.replace(SPEC.lines, color_mode="age"))
    clip = DemoClip(160, 120, frame_count=len(tracks.path), dots=0)
    render_video(FrameSource.from_demo(clip, canvas=True), TrackPoints(tracks), spec, cpu_renderer, f"{tmp_path}/all/")
    render_video(FrameSource.from_demo(clip, canvas=True), TrackPoints(tracks), spec, cpu_renderer,
                 f"{tmp_path}/part/", start_frame=4)
    for index in range(4, len(tracks.path)):
        name = f"frame_{index:06d}.png"
        np.testing.assert_array_equal(cv2.imread(str(tmp_path / "part" / name)), cv2.imread(str(tmp_path / "all" / name)))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["speed", "direction", "age"])
def test_motion_colours_built_on_the_gpu_match_the_cpu(mode, caplog):
    """On CuPy, with a cut (the GPU build, not its fallback to the CPU)."""
    tracks = moving_tracks(frames=6, count=30)
    style = LineStyle(color_mode=mode, gradient=True, gradient_colors="#00E5FF,#FFD600,#FF1744,#76FF03")
    want = link_overlay(tracks.path, tracks.visibility, GraphParams(k=3), style, backend="cpu", cuts=(3,))
    got = link_overlay(tracks.path, tracks.visibility, GraphParams(k=3), style, backend="gpu", cuts=(3,))
    assert "on the GPU failed" not in caplog.text
    for frame_want, frame_got in zip(want, got, strict=True):
        for name in ("color_start", "color_end"):
            np.testing.assert_allclose(getattr(frame_got.layers[0], name), getattr(frame_want.layers[0], name),
                                       atol=1e-4)
