"""Detect Tracks: detection, Lucas-Kanade following, id stability, parameters."""

import numpy as np
import pytest
from trackoverlay.utils.tracks.detect import detect_tracks

STARTS = np.array([[40, 40], [200, 60], [100, 150], [260, 180], [60, 200]]) + 0.37
VELOCITY = np.array([[2.3, 1.1], [-1.7, 2.0], [3.0, -0.6], [-2.2, -1.4], [1.2, -2.5]])


def dot_clip(frames=20, width=320, height=240, radius=4.0, starts=STARTS, velocity=VELOCITY):
    """Black float frames with anti-aliased white dots moving linearly; returns (frames, truth)."""
    rows, cols = np.indices((height, width)) + 0.5
    clip = np.zeros((frames, height, width, 3), np.float32)
    truth = starts[None] + velocity[None] * np.arange(frames)[:, None, None]
    for t in range(frames):
        for x, y in truth[t]:
            cover = np.clip(radius + 0.5 - np.hypot(cols - x, rows - y), 0.0, 1.0)
            clip[t] = np.maximum(clip[t], cover[..., None])
    return clip, truth


def square_clip(frames=6, corner=(30.3, 40.6), side=24.0, velocity=(1.7, 0.9), height=120, width=160):
    """A white square on black, moving linearly, each pixel covered by its exact area.

    Returns (frames, truth): truth [T, 4, 2] holds the square's corners in pixel
    coordinates (origin at the image's top-left corner, so pixel centres sit at +0.5).
    """
    clip = np.zeros((frames, height, width, 3), np.float32)
    truth = np.zeros((frames, 4, 2))
    for t in range(frames):
        x0, y0 = corner[0] + velocity[0] * t, corner[1] + velocity[1] * t
        cover_x = np.clip(np.minimum(np.arange(width) + 1, x0 + side) - np.maximum(np.arange(width), x0), 0, 1)
        cover_y = np.clip(np.minimum(np.arange(height) + 1, y0 + side) - np.maximum(np.arange(height), y0), 0, 1)
        clip[t] = (cover_y[:, None] * cover_x[None, :])[..., None]
        truth[t] = [[x0, y0], [x0 + side, y0], [x0, y0 + side], [x0 + side, y0 + side]]
    return clip, truth


@pytest.fixture(scope="module")
def dots():
    return dot_clip()


def match_columns(tracks, truth):
    """Truth dot index per column, by nearest dot on the first frame."""
    first = tracks.path[0]
    return [int(np.argmin(np.hypot(*(truth[0] - point).T))) for point in first]


@pytest.mark.parametrize("method", ["bright", "blobs"])
def test_dots_keep_their_columns_and_positions(dots, method):
    clip, truth = dots
    before = clip.copy()
    tracks = detect_tracks(clip, method=method, point_size=12)
    np.testing.assert_array_equal(clip, before)
    assert tracks.frame_count == 20 and tracks.track_count == 5
    assert tracks.visibility.all()
    owners = match_columns(tracks, truth)
    assert sorted(owners) == list(range(5))
    for column, dot in enumerate(owners):
        error = np.hypot(*(tracks.path[:, column] - truth[:, dot]).T)
        assert error.max() < 1.0, (method, column, error.max())
    np.testing.assert_array_equal(tracks.size, np.full((20, 5, 2), 12, np.float32))


@pytest.mark.parametrize("method", ["bright", "blobs", "corners"])
def test_positions_sit_on_the_true_sub_pixel_centres(method):
    """Detected and followed positions use pixel centres at +0.5 (OpenCV puts them at integers).

    Dots (bright, blobs) are found at their centres and a square's corners
    (corners) at its corners: on average within 0.15 px per axis and never
    0.3 px off, where a lost half-pixel shift puts every point 0.5 px up and left.
    """
    clip, truth = square_clip() if method == "corners" else dot_clip(frames=6)
    tracks = detect_tracks(clip, method=method, min_distance=10)
    assert tracks.track_count == truth.shape[1] and tracks.visibility.all()
    owners = match_columns(tracks, truth)
    assert sorted(owners) == list(range(truth.shape[1]))
    error = tracks.path - truth[:, owners]  # [T, N, 2]: frame 0 detected, later frames followed
    assert np.abs(error.mean(axis=(0, 1))).max() < 0.15, error.mean(axis=(0, 1))
    assert np.abs(error).max() < 0.3, np.abs(error).max(axis=(0, 1))


def test_corners_on_dots_keep_ids(dots):
    clip, truth = dots
    tracks = detect_tracks((clip * 255).astype(np.uint8), method="corners", min_distance=15)
    assert tracks.track_count == 5 and tracks.visibility.all()
    owners = match_columns(tracks, truth)
    assert sorted(owners) == list(range(5))
    for column, dot in enumerate(owners):
        assert np.hypot(*(tracks.path[:, column] - truth[:, dot]).T).max() < 6.0  # on the dot's rim


def test_deterministic(dots):
    clip, _ = dots
    first = detect_tracks(clip[:6], method="corners")
    second = detect_tracks(clip[:6], method="corners")
    np.testing.assert_array_equal(first.path, second.path)
    np.testing.assert_array_equal(first.visibility, second.visibility)


def test_lost_point_gets_invisible_and_new_point_new_column():
    clip, truth = dot_clip(frames=12, starts=np.array([[60.3, 60.3]]), velocity=np.array([[2.0, 0.0]]))
    clip[5:8] = 0.0  # the dot disappears for three frames
    tracks = detect_tracks(clip, method="bright", redetect_interval=1)
    assert tracks.track_count == 2
    np.testing.assert_array_equal(tracks.visibility[:, 0], [1] * 5 + [0] * 7)
    np.testing.assert_array_equal(tracks.visibility[:, 1], [0] * 8 + [1] * 4)
    assert np.isfinite(tracks.path).all()  # hidden slots hold the nearest known position
    np.testing.assert_allclose(tracks.path[8:, 1], truth[8:, 0], atol=0.5)


def test_dot_leaving_the_frame_becomes_invisible():
    clip, _ = dot_clip(frames=10, width=80, height=60, starts=np.array([[70.0, 30.0]]),
                       velocity=np.array([[4.0, 0.0]]))
    tracks = detect_tracks(clip, method="bright")
    assert tracks.visibility[0, 0] and not tracks.visibility[-1, 0]


def test_max_points_and_column_cap():
    rng = np.random.default_rng(3)
    starts = rng.uniform(20, 220, size=(12, 2))
    clip, _ = dot_clip(frames=4, starts=starts, velocity=np.zeros((12, 2)))
    assert detect_tracks(clip, method="bright", max_points=3, min_distance=5).track_count == 3
    blinking = np.concatenate([clip[:1], np.zeros_like(clip[:1])] * 3)
    tracks = detect_tracks(blinking, method="bright", max_points=2, max_tracks=5, redetect_interval=1,
                           min_distance=5)
    assert tracks.track_count == 5  # columns are never reused; the cap stops new ones
    assert tracks.visibility[4].sum() == 1


def test_min_distance_between_new_points():
    starts = np.array([[50.0, 50.0], [58.0, 50.0], [150.0, 100.0]])
    clip, _ = dot_clip(frames=2, starts=starts, velocity=np.zeros((3, 2)), radius=2.0)
    assert detect_tracks(clip, method="bright", min_distance=20).track_count == 2
    assert detect_tracks(clip, method="bright", min_distance=4).track_count == 3


def test_single_frame_empty_batch_and_blank_frames():
    single = detect_tracks(dot_clip(frames=1)[0][0], method="bright")
    assert single.frame_count == 1 and single.track_count == 5
    empty = detect_tracks(np.zeros((0, 16, 16, 3), np.uint8))
    assert (empty.frame_count, empty.track_count) == (0, 0)
    blank = detect_tracks(np.zeros((3, 32, 32, 3), np.uint8), method="corners")
    assert (blank.frame_count, blank.track_count) == (3, 0)


def test_torch_frames():
    torch = pytest.importorskip("torch")
    clip, _ = dot_clip(frames=3)
    tracks = detect_tracks(torch.from_numpy(clip), method="bright")
    assert tracks.track_count == 5


@pytest.mark.parametrize("kwargs, words", [
    ({"method": "sift"}, ["'sift'", "corners", "blobs", "bright"]),
    ({"max_points": 0}, ["max_points"]),
    ({"min_distance": -1}, ["min_distance"]),
    ({"sensitivity": 1.5}, ["sensitivity", "[0, 1]"]),
    ({"redetect_interval": 0}, ["redetect_interval"]),
    ({"point_size": -2}, ["point_size"]),
    ({"max_points": 10, "max_tracks": 5}, ["max_tracks", "max_points"]),
])
def test_bad_parameters(kwargs, words):
    with pytest.raises(ValueError) as caught:
        detect_tracks(np.zeros((1, 8, 8, 3), np.uint8), **kwargs)
    for word in words:
        assert word in str(caught.value)


@pytest.mark.parametrize("frames, error, words", [
    (np.zeros((2, 8, 8), np.uint8), ValueError, ["frames", "[B, H, W, 3]", "[2, 8, 8]"]),
    (np.zeros((2, 8, 8, 4), np.uint8), ValueError, ["frames", "[2, 8, 8, 4]"]),
    (np.zeros((8, 8)), ValueError, ["frames", "[8, 8]"]),
    (np.zeros((1, 8, 8, 3), np.int32), TypeError, ["frames", "int32"]),
])
def test_bad_frames(frames, error, words):
    with pytest.raises(error) as caught:
        detect_tracks(frames)
    for word in words:
        assert word in str(caught.value)
