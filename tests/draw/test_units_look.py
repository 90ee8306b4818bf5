"""Sizes relative to the frame: the default look scales with the frame height, given sizes keep their unit."""

import pytest
from trackoverlay.utils.draw.units import DEFAULT_LOOK, UNITS, look_lengths, pixels_per_unit


def test_default_look_scales_with_frame_height():
    small = look_lengths(360, box_size=None, line_width=None)
    large = look_lengths(2160, box_size=None, line_width=None)
    assert small == {"box_size": DEFAULT_LOOK["box_size"] * 3.6, "line_width": DEFAULT_LOOK["line_width"] * 3.6}
    assert large["box_size"] == pytest.approx(6 * small["box_size"])


def test_given_sizes_keep_their_unit():
    assert look_lengths(720, UNITS[0], box_size=22.0, radius=None) == {"box_size": 22.0,
                                                                      "radius": DEFAULT_LOOK["radius"] * 7.2}
    assert look_lengths(1080, UNITS[1], box_size=2.0)["box_size"] == pytest.approx(21.6)
    assert pixels_per_unit(UNITS[0], 4320) == 1.0 and pixels_per_unit(UNITS[1], 4320) == 43.2


@pytest.mark.parametrize("call, words", [
    (lambda: look_lengths(720, box_size=-1.0), ["box size (% of frame height) must be a number in [0, inf]", "got -1"]),
    (lambda: look_lengths(720, wiggle=1.0), ["wiggle", "box_size"]),
    (lambda: pixels_per_unit("inches", 720), ["'inches'", "pixels"]),
])
def test_bad_lengths(call, words):
    with pytest.raises(ValueError) as caught:
        call()
    for word in words:
        assert word in str(caught.value)
