"""The demo clip: deterministic frames, dots drawn where ``positions`` says (pixel centres at +0.5)."""

import numpy as np
import pytest
from trackoverlay.utils.tracks.demo import CANVAS_RGB, DemoClip


def test_demo_clip_is_deterministic_and_dots_glow_where_they_are(demo_clip):
    again = DemoClip(width=160, height=96, frame_count=8, fps=12, dots=6, seed=3)
    np.testing.assert_array_equal(demo_clip.frame(5), again.frame(5))
    assert not np.array_equal(demo_clip.frame(5), DemoClip(160, 96, 8, 12, 6, seed=4).frame(5))
    for t in (0, 7):
        frame, positions = demo_clip.frame(t), demo_clip.positions(t)
        assert frame.shape == (96, 160, 3) and frame.dtype == np.uint8
        assert ((positions > 0) & (positions < [160, 96])).all()
        for x, y in positions:
            assert frame[int(y), int(x)].min() > 200  # a bright core at every true position
    assert np.median(demo_clip.frame(0)) < 40  # a dark background
    canvas = next(demo_clip.canvas_frames())
    assert canvas.shape == (96, 160, 3) and (canvas == CANVAS_RGB).all()


@pytest.mark.parametrize("kwargs, words", [
    ({"width": 8}, "frame width must be 16..16384"),
    ({"height": 20000}, "frame height must be 16..16384"),
    ({"frame_count": 0}, "frame count must be >= 1"),
    ({"fps": 0}, "fps must be > 0"),
    ({"dots": -1}, "dot count must be >= 0"),
])
def test_demo_clip_rejects_bad_settings(kwargs, words):
    with pytest.raises(ValueError, match=words):
        DemoClip(**kwargs)


def test_dots_are_centred_on_their_positions():
    """Each dot's brightness centroid (pixel centres at +0.5) lies within 0.25 px of its true position.

    Drawing the dots half a pixel off (centres taken at integers) moves every centroid by 0.5 px.
    """
    clip = DemoClip(width=400, height=400, frame_count=1, dots=8, seed=5)  # 1.5..2.4 px dots, 3.75..6 px glow
    gray = clip.frame(0).astype(np.float64).mean(axis=2)
    reach = 7
    for x, y in clip.positions(0):
        left, top = int(x) - reach, int(y) - reach
        weight = np.maximum(gray[top:top + 2 * reach + 1, left:left + 2 * reach + 1] - 150.0, 0.0)
        rows, cols = np.mgrid[top:top + 2 * reach + 1, left:left + 2 * reach + 1] + 0.5
        centroid = np.array([(weight * cols).sum(), (weight * rows).sum()]) / weight.sum()
        assert np.abs(centroid - (x, y)).max() < 0.25, (x, y, centroid)
