"""TrackFinisher: short tracks dropped, gaps bridged, fades, shots, and its look-ahead."""

import numpy as np
import pytest
from trackoverlay.utils.tracks.finish import TrackFinisher


def finish(visible, positions=None, cuts=(), **params):
    """Run a finisher over raw visibility [T, N] (positions [T, N, 2], default x = frame index);
    returns (visible, opacity, positions) stacked over frames."""
    visible = np.asarray(visible, bool)
    frames, count = visible.shape
    if positions is None:
        positions = np.zeros((frames, count, 2), np.float32)
        positions[..., 0] = np.arange(frames)[:, None]
    finisher = TrackFinisher(**params)
    done = []
    for t in range(frames):
        done += finisher.push(positions[t], visible[t], t in cuts)
    done += finisher.finish()
    assert len(done) == frames
    return (np.stack([f.visible for f in done]), np.stack([f.opacity for f in done]),
            np.stack([f.positions for f in done]))


def run(frames, start, stop):
    """One column visible in frames start..stop-1 of ``frames``."""
    visible = np.zeros((frames, 1), bool)
    visible[start:stop] = True
    return visible


def test_births_and_deaths_fade_inside_a_shot():
    visible, opacity, _ = finish(run(20, 5, 15), fade_frames=3)
    np.testing.assert_array_equal(visible[:, 0], run(20, 5, 15)[:, 0])
    expected = np.zeros(20, np.float32)
    expected[5:15] = [1 / 4, 2 / 4, 3 / 4, 1, 1, 1, 1, 3 / 4, 2 / 4, 1 / 4]
    np.testing.assert_allclose(opacity[:, 0], expected, atol=1e-6)


def test_tracks_seeded_on_a_shot_start_or_cut_off_by_its_end_do_not_fade():
    _, opacity, _ = finish(run(12, 0, 12), fade_frames=4)
    np.testing.assert_array_equal(opacity[:, 0], np.ones(12))
    visible = np.zeros((12, 2), bool)
    visible[2:6, 0] = True  # born mid-shot, cut off by the cut at 6
    visible[6:12, 1] = True  # seeded on the cut frame, runs to the clip's end
    _, opacity, _ = finish(visible, cuts=(6,), fade_frames=2)
    np.testing.assert_allclose(opacity[2:6, 0], [1 / 3, 2 / 3, 1, 1], atol=1e-6)
    np.testing.assert_array_equal(opacity[6:, 1], np.ones(6))


def test_no_fade_means_full_opacity():
    _, opacity, _ = finish(run(10, 3, 7), fade_frames=0)
    np.testing.assert_array_equal(opacity[:, 0], run(10, 3, 7)[:, 0].astype(np.float32))


@pytest.mark.parametrize("length, shown", [(2, False), (3, True)])
def test_short_tracks_are_hidden(length, shown):
    visible, opacity, _ = finish(run(10, 4, 4 + length), min_track_length=3)
    assert visible[:, 0].any() == shown
    assert (opacity[:, 0] > 0).any() == shown


def test_a_whole_short_shot_is_shown():
    visible = np.zeros((9, 1), bool)
    visible[3:5] = True  # the shot of frames 3-4, between cuts at 3 and 5
    shown, _, _ = finish(visible, cuts=(3, 5), min_track_length=4)
    np.testing.assert_array_equal(shown[:, 0], visible[:, 0])


def test_short_gaps_are_bridged_with_interpolated_positions():
    visible = run(12, 0, 12)
    visible[5:7] = False  # lost for two frames, then found again
    positions = np.zeros((12, 1, 2), np.float32)
    positions[:, 0, 0] = np.arange(12) * 3.0
    positions[5:7, 0] = 99.0  # what the detector holds meanwhile: not used
    shown, opacity, path = finish(visible, positions, bridge_frames=2, fade_frames=2)
    assert shown[:, 0].all() and (opacity[:, 0] == 1).all()
    np.testing.assert_allclose(path[:, 0, 0], np.arange(12) * 3.0, atol=1e-5)
    shown, opacity, _ = finish(visible, positions, bridge_frames=1, fade_frames=2)
    np.testing.assert_array_equal(shown[:, 0], visible[:, 0])  # too long a gap: two runs, each fading
    np.testing.assert_allclose(opacity[3:9, 0], [2 / 3, 1 / 3, 0, 0, 1 / 3, 2 / 3], atol=1e-6)


def test_no_gap_is_bridged_across_a_cut():
    visible = run(10, 0, 10)
    visible[4:6] = False
    shown, _, _ = finish(visible, cuts=(5,), bridge_frames=3)
    np.testing.assert_array_equal(shown[:, 0], visible[:, 0])


def test_columns_may_appear_later_and_results_wait_for_the_lookahead():
    finisher = TrackFinisher(min_track_length=3, fade_frames=2, bridge_frames=2)
    assert finisher.lookahead == 4
    out = []
    for t in range(8):
        count = 1 if t < 3 else 2  # a second column starts at frame 3
        done = finisher.push(np.zeros((count, 2)), np.ones(count, bool), t == 0)
        assert len(done) == (1 if t >= finisher.lookahead else 0)
        out += done
    out += finisher.finish()
    assert [len(frame.visible) for frame in out] == [2] * 8  # every frame sized to the columns known
    np.testing.assert_array_equal([frame.visible[1] for frame in out], [0, 0, 0, 1, 1, 1, 1, 1])
    assert [frame.shot_start for frame in out] == [True] + [False] * 7


@pytest.mark.parametrize("params, word", [({"min_track_length": 0}, "min_track_length"),
                                          ({"fade_frames": -1}, "fade_frames"),
                                          ({"bridge_frames": -1}, "bridge_frames")])
def test_bad_parameters(params, word):
    with pytest.raises(ValueError, match=word):
        TrackFinisher(**params)
