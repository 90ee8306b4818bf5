"""Detect Tracks: detection, Lucas-Kanade following, id stability, parameters."""

import cv2
import numpy as np
import pytest
from synthetic import make_clip
from trackoverlay.utils.core.arrays import unit_to_uint8
from trackoverlay.utils.tracks.detect import (
    CORNER_REFERENCE,
    PREPARE_OPENCV_THREADS,
    TrackDetector,
    _Candidates,
    _corner_candidates,
    detect_tracks,
    opencv_pool_held,
    prepare_ahead,
    track_clip,
)

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


def textured_clip(frames=14, width=160, height=120, cut=8):
    """uint8 frames of smooth noise panning 2 px a frame with a bright square crossing it, and a cut to
    another texture at frame ``cut``."""
    import cv2

    rng = np.random.default_rng(5)
    textures = [cv2.resize(rng.random((height // 8, width // 8 + 8)).astype(np.float32), (width + 64, height),
                           interpolation=cv2.INTER_CUBIC) for _ in range(2)]
    clip = np.zeros((frames, height, width, 3), np.uint8)
    for t in range(frames):
        picture = np.roll(textures[t >= cut], 2 * t, axis=1)[:, :width] * 200
        picture[40:60, 20 + 5 * t:40 + 5 * t] = 255
        clip[t] = np.clip(picture, 0, 255).astype(np.uint8)[..., None]
    return clip


def detect_serially(clip, masks, **params):
    detector = TrackDetector(**params)
    finished = []
    for index, frame in enumerate(clip):
        finished += detector.push(frame, None if masks is None else masks[index])
    return detector, finished + detector.finish()


@pytest.mark.parametrize("method", ["corners", "motion", "bright", "blobs"])
@pytest.mark.parametrize("threads", [1, 3])
def test_frames_prepared_ahead_on_threads_give_the_serial_tracks_bit_for_bit(method, threads):
    clip = textured_clip()
    masks = np.zeros(clip.shape[:3], bool)
    masks[:, 10:110, 10:150] = True
    for subject in (None, masks):
        serial, expected = detect_serially(clip, subject, method=method, min_distance=8, redetect_interval=3)
        detector = TrackDetector(method=method, min_distance=8, redetect_interval=3)
        items = ((frame, None if subject is None else subject[t]) for t, frame in enumerate(clip))
        got = []
        for prepared in prepare_ahead(detector, items, threads=threads):
            got += detector.push_prepared(prepared)
        got += detector.finish()
        assert serial.cuts == detector.cuts == [8]
        assert len(got) == len(expected) == len(clip)
        for mine, theirs in zip(got, expected):
            np.testing.assert_array_equal(mine.positions, theirs.positions)
            np.testing.assert_array_equal(mine.visible, theirs.visible)
            np.testing.assert_array_equal(mine.opacity, theirs.opacity)
        assert detector.track_count == serial.track_count > 0


def test_frames_prepared_ahead_are_linked_without_waiting_for_the_frame_befores_own_link(monkeypatch):
    """Linking frame 2 to frame 1 needs frame 1 prepared, not frame 1 linked to frame 0: links of consecutive
    frames run side by side (one after another they set the pace of detection in a video)."""
    import threading

    link, started, waited = TrackDetector.link, threading.Event(), []

    def held_link(earlier, later):
        if later.index == 1:
            waited.append(started.wait(timeout=5))  # frame 2's link starts meanwhile
        if later.index == 2:
            started.set()
        link(earlier, later)

    monkeypatch.setattr(TrackDetector, "link", staticmethod(held_link))
    detector = TrackDetector()
    prepared = list(prepare_ahead(detector, ((frame, None) for frame in textured_clip(frames=5)), threads=3))
    assert [frame.index for frame in prepared] == [0, 1, 2, 3, 4] and waited == [True]
    assert prepared[0].motion_in is None and all(frame.motion_in is not None for frame in prepared[1:])


def test_a_bad_frame_prepared_ahead_fails_at_its_turn_and_the_threads_stop():
    import threading

    clip = list(textured_clip(frames=6))
    clip[4] = clip[4][..., :2]  # two channels
    detector = TrackDetector()
    before = threading.active_count()
    pushed = []
    with pytest.raises(ValueError, match=r"frames must be RGB images \[B, H, W, 3\]"):
        for prepared in prepare_ahead(detector, ((frame, None) for frame in clip), threads=3):
            pushed.append(prepared.index)
            detector.push_prepared(prepared)
    assert pushed == [0, 1, 2, 3]
    assert threading.active_count() == before
    with pytest.raises(ValueError, match="frame 2 was pushed as frame 0; push prepared frames in the order"):
        TrackDetector().push_prepared(detector.prepare(clip[0], index=2))


@pytest.fixture
def opencv_threads():
    """OpenCV's thread count as the test leaves it is put back after it."""
    before = cv2.getNumThreads()
    yield
    cv2.setNumThreads(before)


def test_opencv_pool_is_held_while_frames_are_prepared_ahead_and_given_back_after(opencv_threads):
    cv2.setNumThreads(8)
    detector = TrackDetector(redetect_interval=1)  # corners on every frame: OpenCV's pool is used
    seen = []
    prepare = detector.prepare
    detector.prepare = lambda *args: seen.append(cv2.getNumThreads()) or prepare(*args)
    prepared = prepare_ahead(detector, ((frame, None) for frame in textured_clip(frames=6)), threads=2)
    detector.push_prepared(next(prepared))
    assert cv2.getNumThreads() == PREPARE_OPENCV_THREADS == 2  # the caller's own calls too, between frames
    with opencv_pool_held(4):  # a hold overlapping the first: the count from before the first comes back
        assert cv2.getNumThreads() == 2
    prepared.close()
    assert cv2.getNumThreads() == 8
    assert len(seen) >= 2 and set(seen) == {2}
    cv2.setNumThreads(1)  # a host's lower count is kept
    seen.clear()
    for frame in prepare_ahead(detector, ((frame, None) for frame in textured_clip(frames=3)), threads=2):
        pass
    assert set(seen) == {1} and cv2.getNumThreads() == 1


def test_opencv_pool_is_given_back_when_preparing_fails(opencv_threads):
    cv2.setNumThreads(8)
    clip = list(textured_clip(frames=4))
    clip[2] = clip[2][..., :2]
    with pytest.raises(ValueError, match=r"frames must be RGB images"):
        for prepared in prepare_ahead(TrackDetector(), ((frame, None) for frame in clip), threads=2):
            assert cv2.getNumThreads() == 2
    assert cv2.getNumThreads() == 8


def test_lost_point_is_found_again_in_its_column_and_a_short_gap_is_bridged():
    clip, truth = dot_clip(frames=14, starts=np.array([[60.3, 60.3]]), velocity=np.array([[2.0, 0.0]]))
    clip[5:8] = 0.0  # the dot disappears for three frames
    tracks = detect_tracks(clip, method="bright", fade_frames=0)
    assert tracks.track_count == 1
    assert tracks.visibility.all()  # found again nearby: same column, the gap bridged
    np.testing.assert_allclose(tracks.path[:, 0], truth[:, 0], atol=0.5)  # gap positions interpolated
    np.testing.assert_array_equal(tracks.opacity, np.ones((14, 1)))


def test_long_gap_keeps_the_column_and_fades_out_and_in():
    clip, truth = dot_clip(frames=30, starts=np.array([[60.3, 60.3]]), velocity=np.array([[1.0, 0.0]]))
    clip[10:18] = 0.0  # gone for eight frames: longer than a bridge
    tracks = detect_tracks(clip, method="bright", fade_frames=2, min_track_length=3)
    assert tracks.track_count == 1
    np.testing.assert_array_equal(tracks.visibility[:, 0], [1] * 10 + [0] * 8 + [1] * 12)
    np.testing.assert_allclose(tracks.opacity[8:20, 0], [2 / 3, 1 / 3] + [0] * 8 + [1 / 3, 2 / 3], atol=1e-6)
    np.testing.assert_allclose(tracks.path[18:, 0], truth[18:, 0], atol=0.5)


def test_dot_leaving_the_frame_becomes_invisible():
    clip, _ = dot_clip(frames=10, width=80, height=60, starts=np.array([[70.0, 30.0]]),
                       velocity=np.array([[4.0, 0.0]]))
    tracks = detect_tracks(clip, method="bright", min_track_length=1)
    assert tracks.visibility[0, 0] and not tracks.visibility[-1, 0]
    assert not detect_tracks(clip, method="bright").visibility.any()  # 3 frames: too short to show


def test_a_bright_spot_that_touches_another_for_a_frame_keeps_its_track():
    """A dot moving 3 px a frame touches a flare in frame 8 only: their spots merge, the centroid jumps 3.5 px
    and the next prediction misses by twice that. The dot is found again near where it was, in one track."""
    clip, truth = dot_clip(frames=16, starts=np.array([[40.0, 120.0]]), velocity=np.array([[3.0, 0.0]]))
    flare, _ = dot_clip(frames=1, starts=truth[8] + [0.0, -7.0], velocity=np.zeros((1, 2)))
    clip[8] = np.maximum(clip[8], flare[0])
    tracks = detect_tracks(clip, method="bright", min_distance=8.0, min_track_length=1, fade_frames=0)
    assert tracks.track_count == 1 and tracks.visibility.all()
    np.testing.assert_allclose(tracks.path[9:, 0], truth[9:, 0], atol=0.3)


def test_two_spots_whose_glows_touch_stay_two():
    """Two dots 10 px apart whose glows join above the detection level (one connected spot) are split at
    their cores: two tracks, each at its dot's centre."""
    rows, cols = np.indices((120, 160)) + 0.5
    truth = np.array([[70.3, 60.4], [80.3, 60.4]])
    image = np.zeros((120, 160), np.float32)
    for x, y in truth:
        distance = np.hypot(cols - x, rows - y)
        image = np.maximum(image, np.maximum(np.clip(3.5 - distance, 0, 1), 0.9 * np.exp(-0.5 * (distance / 6) ** 2)))
    assert 153 < round(255 * image[60, 75]) < 204  # the saddle: above the level, below the cores' level
    clip = np.repeat(np.repeat(image[None, ..., None], 3, axis=-1), 6, axis=0)
    tracks = detect_tracks(clip, method="bright", min_distance=6.0, min_track_length=1, fade_frames=0)
    assert tracks.track_count == 2 and tracks.visibility.all()
    found = tracks.path[0][np.argsort(tracks.path[0, :, 0])]
    np.testing.assert_allclose(found, truth, atol=0.2)


def test_crossing_bright_spots_keep_their_tracks():
    """Two dots pass through each other (one spot for a few frames). The spot's centroid says where the pair
    is, not how either moves, so each track keeps its motion and its own dot after the crossing."""
    clip, truth = dot_clip(frames=30, starts=np.array([[60.3, 100.2], [130.3, 102.2]]),
                           velocity=np.array([[2.5, 0.0], [-2.5, 0.0]]))
    tracks = detect_tracks(clip, method="bright", min_distance=8.0, min_track_length=1, fade_frames=0)
    assert tracks.track_count == 2 and tracks.visibility.all()
    columns = match_columns(tracks, truth)
    for column, dot in enumerate(columns):
        np.testing.assert_allclose(tracks.path[18:, column], truth[18:, dot], atol=0.3)  # after the crossing


def test_lamps_on_lit_ground_are_the_bright_spots():
    """A night street: the lower part is ground lit to 190 (over the sensitivity's level, 153), with three white
    lamps (radius 4) on it and one in the dark sky. The ground used to be one heavy spot with a box on its
    middle; as a lit area (over 1 % of the frame) it is replaced by the lights standing out in it."""
    lamps = np.array([[40.3, 150.2], [120.6, 180.4], [250.2, 200.7], [160.4, 40.5]])
    clip, truth = dot_clip(frames=6, starts=lamps, velocity=np.zeros((4, 2)))
    clip[:, 140:] = np.maximum(clip[:, 140:], 190 / 255)
    assert np.mean(unit_to_uint8(clip[0, ..., 0]) > 153) > 0.3
    tracks = detect_tracks(clip, method="bright", min_distance=8.0, min_track_length=1, fade_frames=0)
    assert tracks.track_count == 4 and tracks.visibility.all()
    np.testing.assert_allclose(tracks.path[0][np.argsort(match_columns(tracks, truth))], lamps, atol=0.3)


def test_new_points_go_to_the_brightest_spots_first():
    """Three small white lamps and five larger patches of lit ground at 170, each heavier than a lamp: with
    room for three points, the lamps get them (heaviest first put them on the ground). Among spots about as
    bright, the heaviest goes first."""
    lamps = np.array([[40.3, 40.2], [160.6, 40.4], [280.2, 40.7]])
    clip, _ = dot_clip(frames=6, starts=lamps, velocity=np.zeros((3, 2)))
    for x in (20, 80, 140, 200, 260):
        clip[:, 150:180, x:x + 30] = 170 / 255
    tracks = detect_tracks(clip, method="bright", max_points=3, min_track_length=1, fade_frames=0)
    assert tracks.track_count == 3
    np.testing.assert_allclose(np.sort(tracks.path[0, :, 0]), lamps[:, 0], atol=0.3)
    # about as bright (250 against 255), a large lamp goes before a small one
    large, _ = dot_clip(frames=6, starts=np.array([[200.4, 120.3]]), velocity=np.zeros((1, 2)), radius=12.0)
    small, _ = dot_clip(frames=6, starts=lamps[:1], velocity=np.zeros((1, 2)))
    tracks = detect_tracks(np.maximum(large * 250 / 255, small), method="bright", max_points=1, min_track_length=1,
                           fade_frames=0)
    np.testing.assert_allclose(tracks.path[0, 0], [200.4, 120.3], atol=0.3)


@pytest.mark.parametrize("mean, deviation", [(180, 2), (170, 8), (200, 6), (230, 8), (250, 4)])
def test_a_lit_area_without_lights_stays_one_spot(mean, deviation):
    """A bright area with grain (a white wall, a sky, a title card; a little blurred, as compressed video is)
    holds no light: no speck of its grain becomes a spot. Grain of 6 levels' deviation once made dozens."""
    rng = np.random.default_rng(0)
    blurred = np.stack([cv2.GaussianBlur(rng.normal(0, 1, (140, 320)).astype(np.float32), (3, 3), 0)
                        for _ in range(6)])
    grain = mean + deviation * blurred / blurred.std()
    clip = np.zeros((6, 240, 320, 3), np.float32)
    clip[:, 100:] = np.clip(grain, 0, 255)[..., None] / 255
    tracks = detect_tracks(clip, method="bright", min_track_length=1, fade_frames=0)
    assert tracks.track_count == 1
    np.testing.assert_allclose(tracks.path[0, 0], [160, 170], atol=2)


def test_large_lights_that_are_not_white_are_spots():
    """Eight flat discs at grey 200, each over 1 % of the frame, stand out from a dark frame: they are lit
    areas without lights in them, so each stays one spot, at its centre."""
    centres = np.array([[40.5, 60.5], [120.5, 60.5], [200.5, 60.5], [280.5, 60.5],
                        [40.5, 180.5], [120.5, 180.5], [200.5, 180.5], [280.5, 180.5]])
    rows, cols = np.indices((240, 320)) + 0.5
    image = np.zeros((240, 320), np.float32)
    for x, y in centres:
        image[np.hypot(cols - x, rows - y) <= 18] = 200 / 255
    assert np.mean(image > 0) > 0.1
    clip = np.repeat(np.repeat(image[None, ..., None], 3, axis=-1), 6, axis=0)
    tracks = detect_tracks(clip, method="bright", min_distance=8.0, min_track_length=1, fade_frames=0)
    assert tracks.track_count == 8
    np.testing.assert_allclose(tracks.path[0][np.argsort(match_columns(tracks, centres[None]))], centres, atol=0.1)


def test_a_frame_without_texture_gives_no_corners():
    """Grey frames with faint blurred noise (a blank wall through a compressed camera) used to get a hundred
    boxes on the noise, as corners were only held to the frame's own strongest. Held to a reference strength,
    they find none; at the highest sensitivity the noise passes again."""
    rng = np.random.default_rng(0)
    noise = np.clip(128 + rng.normal(0, 3, (6, 120, 160)), 0, 255).astype(np.uint8)
    clip = np.stack([np.repeat(cv2.GaussianBlur(frame, (3, 3), 0)[..., None], 3, axis=-1) for frame in noise])
    assert detect_tracks(clip, method="corners", min_track_length=1).track_count == 0
    assert detect_tracks(clip, method="corners", sensitivity=1.0, min_track_length=1).track_count > 0


def test_a_faint_square_still_gives_its_corners():
    """A square only 40 grey levels brighter than its background (strength about 0.006, under the reference):
    its four corners are found and followed."""
    clip, truth = square_clip()
    faint = (100 + 40 * clip).astype(np.float32) / 255
    tracks = detect_tracks(faint, method="corners", min_track_length=1)
    assert tracks.track_count == 4 and tracks.visibility.all()
    np.testing.assert_allclose(np.sort(tracks.path[-1], axis=0), np.sort(truth[-1], axis=0), atol=0.5)


@pytest.mark.parametrize("contrast", [0.02, 0.1, 0.3, 1.0])
@pytest.mark.parametrize("sensitivity", [0.0, 0.5, 1.0])
def test_corners_are_opencvs_search_held_to_the_stronger_of_the_frame_and_the_reference(contrast, sensitivity):
    """The corners of one search equal OpenCV's own search held to ``quality`` x max(the frame's strongest,
    CORNER_REFERENCE), in the same order: on texture too faint for any corner, on faint texture (strongest under
    the reference: contrasts 0.1 and 0.3) and on strong texture (1.0)."""
    rng = np.random.default_rng(3)
    noise = cv2.resize(rng.random((60, 80)).astype(np.float32), (320, 240), interpolation=cv2.INTER_CUBIC)
    gray = np.clip(128 + contrast * (noise - 0.5) * 250, 0, 255).astype(np.uint8)
    quality = 0.1 ** (1.0 + 2.0 * sensitivity)
    strongest = float(cv2.cornerMinEigenVal(gray, 3).max())
    assert (strongest > CORNER_REFERENCE) == (contrast == 1.0)
    level = quality * max(strongest, CORNER_REFERENCE) / strongest  # OpenCV reads it relative to the strongest
    expected = cv2.goodFeaturesToTrack(gray, 0, level, 20.0, blockSize=3)
    expected = np.zeros((0, 2), np.float32) if expected is None else expected.reshape(-1, 2)
    assert (len(expected) > 0) == (contrast > 0.02 and (sensitivity > 0 or contrast > 0.1))
    np.testing.assert_array_equal(_corner_candidates(gray, sensitivity, 20.0, None), expected)


def test_candidate_searches_equal_the_distances_to_every_point():
    """Searching around the points in the candidates' tree gives what measuring every candidate's distance
    gives: candidates exactly ``min_distance`` away count as away, and the nearest one found for a point is the
    nearest of those allowed, closer than the reach (none beyond it); the candidates are not modified."""
    rng = np.random.default_rng(5)
    candidates = rng.uniform(0, 400, (3000, 2)).astype(np.float32)
    points = rng.uniform(0, 400, (60, 2)).astype(np.float32)
    points[:3] = [[500, 500], [600, 500], [500, 600]]  # apart from the others, each with a candidate 20 px away
    candidates[:3] = points[:3] + np.float32([[20, 0], [0, 20], [12, 16]])
    given = candidates.copy()
    found = _Candidates.of(candidates, np.zeros(len(candidates), bool))
    distance = np.hypot(*(candidates[:, None].astype(np.float64) - points[None]).transpose(2, 0, 1))
    away = found.away_from(points, 20.0)
    np.testing.assert_array_equal(away, distance.min(axis=1) >= 20.0)
    assert away[:3].all() and 0 < away.sum() < len(away)
    among = rng.random(len(candidates)) < 0.5
    nearest, index = found.nearest(points, 6.0, among)
    allowed = np.where(among[:, None], distance, np.inf)
    expected = allowed.min(axis=0)
    hit = expected < 6.0
    assert 0 < hit.sum() < len(points)
    np.testing.assert_allclose(nearest[hit], expected[hit], rtol=1e-6)
    np.testing.assert_array_equal(index[hit], allowed.argmin(axis=0)[hit])
    assert np.isinf(nearest[~hit]).all() and (index[~hit] == len(candidates)).all()
    assert np.isinf(found.nearest(points, 6.0, np.zeros(len(candidates), bool))[0]).all()  # none allowed
    np.testing.assert_array_equal(candidates, given)


def glow_clip(frames, starts, velocity, height=160, width=240):
    """Black float frames with glowing dots moving linearly (a 3.5 px core and a wide glow, as the demo's),
    each pixel the brighter of the dots'; returns (frames, truth)."""
    rows, cols = np.indices((height, width)) + 0.5
    truth = starts[None] + velocity[None] * np.arange(frames)[:, None, None]
    clip = np.zeros((frames, height, width), np.float32)
    for t in range(frames):
        for x, y in truth[t]:
            distance = np.hypot(cols - x, rows - y)
            clip[t] = np.maximum(clip[t], np.maximum(np.clip(3.5 - distance, 0, 1),
                                                     0.9 * np.exp(-0.5 * (distance / 6) ** 2)))
    return np.repeat(clip[..., None], 3, axis=-1), truth


@pytest.mark.parametrize(("offset", "speed"), [(0.0, 2.0), (3.0, 2.0), (6.0, 2.0), (3.0, 3.0)])
def test_glowing_dots_that_merge_into_one_spot_share_it(offset, speed):
    """Two glowing dots pass each other ``offset`` px apart: for a few frames their glows make one spot with
    one core. Both tracks share that spot, each kept where its motion puts it, shifted with its partner onto
    the spot's centroid by mass, so both stay visible on their own dots (before: one track went lost for
    frames, or sat on the pair's centroid 3 px off its dot)."""
    clip, truth = glow_clip(30, np.array([[60.3, 80.2], [180.3, 80.2 + offset]]),
                            np.array([[speed, 0.0], [-speed, 0.0]]))
    tracks = detect_tracks(clip, method="bright", min_distance=8.0, min_track_length=1, fade_frames=0)
    assert tracks.track_count == 2 and tracks.visibility.all()
    for column, dot in enumerate(match_columns(tracks, truth)):
        assert np.hypot(*(tracks.path[:, column] - truth[:, dot]).T).max() < 1.0


def test_a_dot_that_goes_out_beside_another_does_not_share_its_spot():
    """A dot that goes dark 9 px from another leaves its track without a spot; the other's spot lies within
    reach, but its mass is one dot's, not two, so the track is not kept alive on it."""
    clip, truth = glow_clip(20, np.array([[60.3, 80.2], [60.3, 89.2]]), np.array([[2.0, 0.0], [2.0, 0.0]]))
    alone, _ = glow_clip(10, truth[10, :1], np.array([[2.0, 0.0]]))
    clip[10:] = alone
    tracks = detect_tracks(clip, method="bright", min_distance=8.0, min_track_length=1, fade_frames=0)
    assert tracks.track_count == 2
    gone = match_columns(tracks, truth).index(1)
    assert tracks.visibility[:10, gone].all() and not tracks.visibility[10:, gone].any()


@pytest.mark.parametrize("dots", [1, 2])
def test_a_spot_is_shared_only_when_it_holds_the_mass_of_its_tracks(dots):
    """Two live tracks, each last seen alone with one dot's mass, predicted where the dots are: on two dots 3 px
    apart (one spot, one core) both share the spot, each at its own dot. Predicted both on a lone dot, which
    the pair's mean fits as well as either track alone, only one takes it: the spot has one dot's mass."""
    from trackoverlay.utils.tracks.spots import Spots

    truth = np.array([[60.3, 80.2], [63.3, 80.2]])[:dots]
    clip, _ = glow_clip(1, truth, np.zeros((dots, 2)))
    spots = Spots.find(unit_to_uint8(clip[0, ..., 0]), sensitivity=0.5)
    lone = Spots.find(unit_to_uint8(glow_clip(1, truth[:1], np.zeros((1, 2)))[0][0, ..., 0]), sensitivity=0.5)
    assert len(spots.mass) == 2  # one spot (row 0 is the background)
    predicted = (truth[[0, -1]] - 0.5).astype(np.float32)  # OpenCV convention: pixel centres at .0
    followed = spots.follow(predicted, predicted, np.full(2, 6.0), np.full(2, lone.mass[1]),
                            np.zeros((0, 2), np.float32), np.zeros(0))
    assert followed.matched.sum() == dots
    np.testing.assert_allclose(followed.positions[followed.matched], predicted[:dots], atol=0.2)


def test_demo_dots_keep_their_ids_through_crossings():
    """The demo's dots cross each other and their glows pull the spots together. Each dot keeps one track
    id whenever it is clear of the others (more than 12 px from any), and no track starts twice for a dot:
    lost tracks compete for the spots as the dots part (before: 65 tracks, 5 id changes)."""
    from trackoverlay.utils.tracks.demo import DemoClip
    from trackoverlay.utils.tracks.quality import identity_changes

    clip = DemoClip()
    tracks = detect_tracks(np.stack(list(clip.frames())), **clip.detect_params())
    assert tracks.track_count == clip.dots
    assert identity_changes(tracks, clip.tracks().path, near=3.0, apart=12.0) == (0, 0)


def test_max_points_and_column_cap_with_a_warning(caplog):
    rng = np.random.default_rng(3)
    starts = rng.uniform(20, 220, size=(12, 2))
    clip, _ = dot_clip(frames=4, starts=starts, velocity=np.zeros((12, 2)))
    assert detect_tracks(clip, method="bright", max_points=3, min_distance=5).visibility.sum(axis=1).max() == 3
    shots = make_clip(frames=8, cuts=range(1, 8)).frames  # a new shot every frame
    detector = TrackDetector(max_points=2, max_tracks=5, min_track_length=1)
    tracks = track_clip(shots, detector)
    assert detector.cuts == list(range(1, 8))
    assert tracks.track_count == 5 and detector.limit_frame == 2  # 2 + 2 + 1 columns, then none
    assert tracks.visibility[3:].sum() == 0
    assert "max_tracks=5 reached at frame 2" in caplog.text


def test_no_hidden_column_cap():
    shots = make_clip(frames=12, cuts=range(1, 12)).frames  # twelve one-frame shots
    tracks = detect_tracks(shots, max_points=4, min_track_length=1)
    assert tracks.track_count == 48  # far more than 4 x max_points columns
    assert (tracks.visibility.sum(axis=1) == 4).all()  # and no frame left blank


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


@pytest.mark.parametrize("height, width", [(1, 1), (4, 4), (6, 8), (14, 200), (200, 14)])
@pytest.mark.parametrize("method", ["corners", "motion", "blobs", "bright"])
def test_frames_smaller_than_opencvs_windows_are_tracked(height, width, method):
    """Corner refinement and blob search have least sizes in OpenCV; smaller frames get smaller windows or
    no blobs, not an OpenCV error."""
    clip = (np.random.default_rng(0).random((5, height, width, 3)) * 255).astype(np.uint8)
    tracks = detect_tracks(clip, method=method, min_track_length=1)
    assert tracks.frame_count == 5
    assert np.all((tracks.path[tracks.visibility] >= 0) & (tracks.path[tracks.visibility] <= [width, height]))


def test_float_frames_are_read_as_rounded_bytes():
    """0..1 float frames become uint8 as floor(clip(x, 0, 1) * 255 + 0.5), NaN as 0, whatever their dtype,
    layout or height (they are converted a band of rows at a time)."""
    for dtype in (np.float32, np.float64):
        half_steps = ((np.arange(256) + 0.5) / 255).astype(dtype)
        specials = np.array([np.nan, np.inf, -np.inf, -0.1, 1.2, 0.0, 1.0], dtype)
        column = np.concatenate([specials, half_steps, np.nextafter(half_steps, dtype(-1)),
                                 np.nextafter(half_steps, dtype(2))])
        image = np.repeat(column[:, None, None], 3, axis=2)
        expected = (np.clip(np.nan_to_num(image), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
        np.testing.assert_array_equal(unit_to_uint8(image), expected)
        np.testing.assert_array_equal(unit_to_uint8(image)[:7, 0, 0], [0, 255, 0, 0, 255, 0, 255])
    frame = np.random.default_rng(1).uniform(-0.1, 1.1, (67, 45, 3)).astype(np.float32)
    reference = (np.clip(frame, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    np.testing.assert_array_equal(unit_to_uint8(np.asfortranarray(frame)), reference)
    np.testing.assert_array_equal(unit_to_uint8(frame[::-1, ::2]), reference[::-1, ::2])


def test_torch_frames():
    torch = pytest.importorskip("torch")
    clip, _ = dot_clip(frames=3)
    tracks = detect_tracks(torch.from_numpy(clip), method="bright")
    assert tracks.track_count == 5


@pytest.mark.parametrize("kwargs, words", [
    ({"method": "sift"}, ["'sift'", "corners", "blobs", "bright", "motion"]),
    ({"max_points": 0}, ["max_points"]),
    ({"min_distance": -1}, ["min_distance"]),
    ({"sensitivity": 1.5}, ["sensitivity", "[0, 1]"]),
    ({"redetect_interval": 0}, ["redetect_interval"]),
    ({"point_size": -2}, ["point_size"]),
    ({"max_points": 10, "max_tracks": 5}, ["max_tracks", "max_points"]),
    ({"max_tracks": -1}, ["max_tracks", "0 = no limit", "[0, inf]"]),
    ({"motion_preference": 1.5}, ["motion_preference", "[0, 1]"]),
    ({"min_track_length": 0}, ["min_track_length"]),
    ({"fade_frames": -1}, ["fade_frames"]),
    ({"cut_threshold": 2.0}, ["cut_threshold", "[0, 1]"]),
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


def test_demo_boxes_sit_on_the_dots_by_the_last_frame():
    """The CLI's demo settings (examples/overlay_video.py, no options): by frame 89 every box is within
    6 px of a dot and every dot has a box."""
    from scenes import overlay_video_cli
    from trackoverlay.utils.tracks.demo import DemoClip
    from trackoverlay.utils.video.stream import FrameSource

    cli = overlay_video_cli()
    args = cli.build_parser().parse_args([])
    source = FrameSource.from_demo(DemoClip())
    points = cli.point_source(args, cli.input_mode(args, None), source, None)
    last = None
    for index, (_, frame_points) in enumerate(points.pairs(source.frames)):
        last = index, frame_points
    index, frame_points = last
    assert index == 89
    boxes = frame_points.positions[frame_points.visible]
    dots = source.clip.positions(index)
    distance = np.hypot(*(boxes[:, None, :] - dots[None, :, :]).transpose(2, 0, 1))
    assert (distance.min(axis=1) <= 6).all()  # no box off the dots
    assert (distance.min(axis=0) <= 6).all()  # no dot without a box
    assert len(boxes) == len(dots)
