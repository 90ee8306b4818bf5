"""Tracks that hold on synthetic clips with known motion and cuts: cuts, ids, count, points on what moves."""

import cv2
import numpy as np
import pytest
from synthetic import GREYS, make_clip, on_mask_share, passer_clip
from trackoverlay.utils.tracks.cuts import CutDetector, colour_histogram, reduced_frame
from trackoverlay.utils.tracks import detect
from trackoverlay.utils.tracks.detect import TrackDetector, detect_tracks, follow_copy, track_clip
from trackoverlay.utils.tracks.quality import measure_tracks

PARAMS = dict(max_points=40, min_distance=10)


@pytest.fixture(scope="module")
def panning_cut():
    """40 frames, camera panning 1.5 px/frame right and 0.5 down, subject moving (3, 1); a cut at 20."""
    return make_clip(frames=40, cuts=(20,), pan=(1.5, 0.5))


@pytest.fixture(scope="module")
def corners_run(panning_cut):
    detector = TrackDetector(**PARAMS)
    return detector, track_clip(panning_cut.frames, detector)


def test_the_cut_is_found_and_reseeded_on_its_own_frame(corners_run, panning_cut):
    detector, tracks = corners_run
    assert detector.cuts == [20] and tracks.cuts == (20,)  # the tracks carry it (trails end there)
    live = tracks.visibility.sum(axis=1)
    assert live.min() >= 0.75 * PARAMS["max_points"]  # an overlay on every frame, the cut's included
    np.testing.assert_array_equal(tracks.opacity[20][tracks.visibility[20]], 1.0)  # seeds need no fade-in


def test_no_track_crosses_the_cut(corners_run):
    _, tracks = corners_run
    before, after = tracks.visibility[:20].any(axis=0), tracks.visibility[20:].any(axis=0)
    assert not (before & after).any()


def test_tracks_hold_and_the_count_stays_near_max_points(corners_run):
    _, tracks = corners_run
    quality = measure_tracks(tracks)
    assert quality.one_frame_share == 0.0 and quality.empty_frames == 0
    assert quality.median_life >= 15  # shots of 20 frames
    assert quality.count_swing <= 0.1 * PARAMS["max_points"]
    assert quality.mean_live >= 0.875 * PARAMS["max_points"]  # a point the subject passes over waits hidden


def test_a_figure_walking_past_does_not_drag_the_wall_points_along():
    """The wall's corners stay where they are while a textured figure passes in front of them: hidden, then
    found again, not pulled along its edge (18 of the 26 wall-born tracks were, before)."""
    clip = passer_clip()
    tracks = detect_tracks(clip.frames, **PARAMS)
    path, visible = tracks.path, tracks.visibility
    columns = np.arange(tracks.track_count)
    born = visible.argmax(axis=0)
    x = path[born, columns, 0]
    on_wall = (x < clip.left[born] - 12) | (x > clip.left[born] + clip.width + 12)
    travelled = np.array([np.ptp(path[visible[:, n], n, 0]) for n in columns])
    assert on_wall.sum() >= 20
    assert np.count_nonzero(on_wall & (travelled > 15)) <= 5


def test_tracks_end_only_where_their_point_is_hidden_or_leaves(panning_cut):
    tracks = detect_tracks(panning_cut.frames, motion_preference=0.0, **PARAMS)  # no static point let go
    covered = panning_cut.subject
    height, width = covered.shape[1:]
    for t in range(1, 20):  # the first shot
        for column in np.flatnonzero(tracks.visibility[t - 1] & ~tracks.visibility[t]):
            x, y = tracks.path[t - 1, column]
            hidden = covered[t, int(y) - 6:int(y) + 7, int(x) - 6:int(x) + 7].any()
            leaving = min(x, y, width - x, height - y) < 12
            assert hidden or leaving, (t, column, x, y)


def test_points_follow_the_pan(corners_run, panning_cut):
    _, tracks = corners_run
    static = ~panning_cut.subject[0]
    start = tracks.path[0, tracks.visibility[0] & tracks.visibility[10]]
    on_background = static[start[:, 1].astype(int), start[:, 0].astype(int)]
    moved = tracks.path[10, tracks.visibility[0] & tracks.visibility[10]] - start
    np.testing.assert_allclose(np.median(moved[on_background], axis=0), [-15.0, -5.0], atol=0.3)


@pytest.mark.parametrize("size, copy", [((2160, 3840), (1080, 1920)), ((4320, 7680), (1080, 1920)),
                                         ((2161, 3841), (1080, 1920)), ((1440, 2560), (1440, 2560)),
                                         ((3000, 200), (1500, 100))])
def test_large_frames_are_followed_on_a_halved_copy(size, copy):
    gray = np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8)
    image, scale = follow_copy(gray)
    assert image.shape == copy and scale == (size[1] / copy[1], size[0] / copy[0])
    if copy == size:
        assert image is gray
    elif scale == (2.0, 2.0):  # pixel areas averaged: full pixels (2x, 2y)..(2x+1, 2y+1) make copy pixel (x, y)
        blocks = gray.reshape(copy[0], 2, copy[1], 2).mean(axis=(1, 3))
        assert np.abs(image.astype(float) - blocks).max() <= 0.5


def test_large_frames_followed_at_half_size_still_follow_the_pan(panning_cut, monkeypatch):
    """The clip at twice its size, as a 4K shot of a 1080p picture, searched for corners and followed on a copy
    at the clip's own size: the pan is found to a few tenths of a pixel, and tracks hold as long."""
    large = np.stack([cv2.resize(frame, (480, 360), interpolation=cv2.INTER_LINEAR) for frame in panning_cut.frames])
    monkeypatch.setattr(detect, "FOLLOW_MAX_SIDE", 240)
    tracks = track_clip(large, TrackDetector(max_points=40, min_distance=20))
    held = tracks.visibility[0] & tracks.visibility[10]
    start = tracks.path[0, held]
    on_background = ~panning_cut.subject[0][(start[:, 1] / 2).astype(int), (start[:, 0] / 2).astype(int)]
    moved = tracks.path[10, held] - start
    assert on_background.sum() >= 15  # followed at full size: 18 here
    np.testing.assert_allclose(np.median(moved[on_background], axis=0), [-30.0, -10.0], atol=0.3)
    assert measure_tracks(tracks).median_life >= 15


def test_frames_within_the_limit_are_followed_on_themselves(panning_cut, monkeypatch):
    before = track_clip(panning_cut.frames[:12], TrackDetector(**PARAMS))
    monkeypatch.setattr(detect, "FOLLOW_MAX_SIDE", 240)  # the clip's longer side: still followed as it is
    after = track_clip(panning_cut.frames[:12], TrackDetector(**PARAMS))
    np.testing.assert_array_equal(before.path, after.path)
    np.testing.assert_array_equal(before.visibility, after.visibility)


@pytest.mark.parametrize("pan", [(0.0, 0.0), (2.0, 0.5)])
def test_motion_method_puts_points_on_the_moving_subject(pan):
    clip = make_clip(frames=30, pan=pan)
    tracks = detect_tracks(clip.frames, method="motion", **PARAMS)
    assert tracks.visibility.sum(axis=1).min() > 0
    assert on_mask_share(tracks, clip.subject) >= 0.8


@pytest.mark.parametrize("halved", [False, True])
def test_subject_mask_keeps_points_on_the_subject(panning_cut, monkeypatch, halved):
    if halved:  # corners found on a 120x90 copy, the mask reduced with it
        monkeypatch.setattr(detect, "FOLLOW_MAX_SIDE", 120)
    tracks = detect_tracks(panning_cut.frames, subject=panning_cut.subject, **PARAMS)
    assert on_mask_share(tracks, panning_cut.subject) >= 0.95
    assert tracks.visibility.sum(axis=1).min() > 0


def test_motion_preference_moves_points_onto_the_subject(panning_cut):
    shares = [on_mask_share(detect_tracks(panning_cut.frames, motion_preference=preference, **PARAMS),
                            panning_cut.subject) for preference in (0.0, 1.0)]
    assert shares[1] > shares[0] + 0.1


def test_fast_pan_and_flicker_are_not_cuts():
    clip = make_clip(frames=24, pan=(25.0, 3.0), flicker=0.15)
    detector = TrackDetector(**PARAMS)
    track_clip(clip.frames, detector)
    assert detector.cuts == []


def test_grey_shots_of_one_brightness_cut_by_their_structure():
    clip = make_clip(frames=30, cuts=(10, 20), pan=(2.0, 0.5), palettes=GREYS)
    first, second = (colour_histogram(reduced_frame(clip.frames[t])) for t in (9, 10))
    assert np.abs(first - second).sum() < 0.1  # the colours alone cannot tell the shots apart
    cuts = CutDetector()
    assert [t for t, frame in enumerate(clip.frames) if cuts.is_cut(frame)] == [10, 20]


def test_fast_grey_pan_with_flicker_is_not_a_cut():
    clip = make_clip(frames=24, pan=(25.0, 3.0), flicker=0.15, palettes=GREYS)
    cuts = CutDetector()
    assert not any(cuts.is_cut(frame) for frame in clip.frames)


def test_a_still_repeating_picture_is_not_a_cut():
    """Four discs in a row, one every quarter of the frame: phase correlation finds the picture as well moved
    by half the frame, which counted as "nothing left to compare", a cut on every frame of a still shot."""
    rows, cols = np.indices((120, 160)) + 0.5
    frame = np.zeros((120, 160, 3), np.uint8)
    for x in (20.5, 60.5, 100.5, 140.5):
        frame[np.hypot(cols - x, rows - 30.5) <= 9] = 200
    cuts = CutDetector()
    assert not any(cuts.is_cut(frame.copy()) for _ in range(5))


def test_cut_detection_can_be_turned_off(panning_cut):
    detector = TrackDetector(cut_threshold=0.0, **PARAMS)
    track_clip(panning_cut.frames, detector)
    assert detector.cuts == []


def test_occluded_points_come_back_in_their_columns():
    clip = make_clip(frames=24, subject_speed=(0.0, 0.0))
    frames = clip.frames.copy()
    frames[10:13, 100:160, 20:90] = 128  # a grey card covers part of the scene for three frames
    tracks = detect_tracks(frames, fade_frames=0, **PARAMS)
    x, y = tracks.path[9].T
    covered = tracks.visibility[9] & (x > 20) & (x < 90) & (y > 100) & (y < 160)
    assert covered.sum() >= 2
    assert tracks.visibility[13:, covered].all()  # found again with their ids
    assert tracks.visibility[10:13, covered].all()  # and the gap bridged


@pytest.mark.parametrize("flash", [255, 0, "stray"], ids=["white", "black", "stray-frame"])
def test_a_flash_frame_is_not_a_cut_and_tracks_hold_through_it(flash):
    clip = make_clip(frames=30, pan=(1.5, 0.5))
    frames = clip.frames.copy()
    frames[15] = make_clip(frames=1, seed=7, palettes=GREYS).frames[0] if flash == "stray" else flash
    detector = TrackDetector(**PARAMS)
    tracks = track_clip(frames, detector)
    assert detector.cuts == []
    held = tracks.visibility[14] & tracks.visibility[16]
    assert held.sum() >= 0.8 * tracks.visibility[14].sum()  # the same columns on either side
    assert tracks.visibility[15, held].all()  # the flash frame bridged
    reference = track_clip(clip.frames, TrackDetector(**PARAMS))  # no flash: where the points really are
    followed = reference.visibility[14] & reference.visibility[16]
    start, end = reference.path[14, followed], reference.path[16, followed]
    apart = np.hypot(*(tracks.path[14, held][:, None] - start[None]).transpose(2, 0, 1))
    same = apart.min(axis=1) < 0.01  # the same point at frame 14 in both runs
    error = np.hypot(*(tracks.path[16, held][same] - end[apart.argmin(axis=1)[same]]).T)
    assert same.sum() >= 0.8 * held.sum() and np.median(error) < 0.1, (same.sum(), held.sum(), np.median(error))


def test_a_cut_followed_by_a_second_cut_stays_two_cuts():
    clip = make_clip(frames=30, cuts=(10, 11), pan=(1.5, 0.5))  # a one-frame shot between two different shots
    detector = TrackDetector(**PARAMS)
    track_clip(clip.frames, detector)
    assert detector.cuts == [10, 11]


def test_a_cut_detector_alone_withdraws_a_flash_at_the_next_frame():
    """The flash frame is judged a cut when it comes; the frame after it sets ``flash_before`` (the loop of
    :class:`CutDetector`'s docstring), while a real cut's next frame does not."""
    clip = make_clip(frames=30, cuts=(22,), pan=(1.5, 0.5))
    frames = clip.frames.copy()
    frames[10] = 255
    cuts, starts, judged = CutDetector(), [], []
    for index, frame in enumerate(frames):
        if cuts.is_cut(frame):
            starts.append(index)
            judged.append(index)
        elif cuts.flash_before:
            starts.pop()
    assert judged == [10, 22] and starts == [22]


def test_streaming_matches_the_batch(panning_cut):
    batch = detect_tracks(panning_cut.frames, **PARAMS)
    detector = TrackDetector(**PARAMS)
    finished = []
    for frame in panning_cut.frames:
        finished += detector.push(frame)
    finished += detector.finish()
    assert len(finished) == len(panning_cut.frames)
    shown = np.flatnonzero(np.any([f.visible for f in finished[-1:]], axis=0) | np.zeros(detector.track_count, bool))
    used = np.unique(np.concatenate([np.flatnonzero(f.visible) for f in finished]))
    assert len(used) == batch.track_count and len(shown) <= len(used)
    for t, frame in enumerate(finished):
        columns = np.searchsorted(used, np.flatnonzero(frame.visible))
        np.testing.assert_array_equal(np.flatnonzero(batch.visibility[t]), columns)
        np.testing.assert_array_equal(batch.path[t, columns], frame.positions[frame.visible])
        np.testing.assert_array_equal(batch.opacity[t, columns], frame.opacity[frame.visible])
