"""Tapered and fading polylines (per-vertex width and alpha factors) on every backend.

The coverage model: the polyline's nearest segment gives the pixel's foot on
it; the width and alpha factors are interpolated linearly between that
segment's two vertices at the foot (coverage = clamp(0.5 - (distance -
width(foot) / 2), 0, 1), times alpha(foot)). Closed-form checks hold to 1e-5,
the brute-force reference (coverage_reference.py) to 1e-4, and factors of 1
reproduce the untapered picture bit for bit.
"""

import dataclasses

import numpy as np
import pytest
from coverage_reference import dense, pixel_centres, random_display_list, reference_layer
from scenes import SCENES, flat_frame, polylines
from trackoverlay.utils.draw.display_list import DisplayList, Polylines

MODEL_TOLERANCE = 1e-5
REFERENCE_TOLERANCE = 1e-4


def tapered(path, width, vertex_width=None, vertex_alpha=None, color=(1, 1, 1, 1)) -> Polylines:
    """One polyline through ``path`` with per-vertex factors."""
    return dataclasses.replace(polylines([path], width=width, color=color), vertex_width=vertex_width,
                               vertex_alpha=vertex_alpha)


def layer_alpha(renderer, lines, height=48, width=64):
    return dense(renderer.rasterize(DisplayList((lines,)), height, width))[1]


def tapered_segment_model(x, y, p0, p1, width, factor0, factor1):
    """Coverage of one tapered segment at pixel centres (float64)."""
    delta = np.subtract(p1, p0, dtype=np.float64)
    length = np.hypot(*delta)
    tangent = delta / length
    along = (x - p0[0]) * tangent[0] + (y - p0[1]) * tangent[1]
    across = (x - p0[0]) * tangent[1] - (y - p0[1]) * tangent[0]
    foot = np.clip(along, 0.0, length)
    distance = np.hypot(across, along - foot)
    half_width = width / 2 * (factor0 + (factor1 - factor0) * foot / length)
    return np.clip(0.5 - (distance - half_width), 0.0, 1.0)


@pytest.mark.parametrize("p0, p1, factors", [
    ((10.5, 20.5), (50.5, 20.5), (1.0, 0.25)),   # horizontal, narrowing
    ((8.3, 6.1), (52.7, 39.4), (0.1, 1.6)),      # diagonal, widening past the line's width
    ((30.2, 4.4), (33.9, 44.0), (0.0, 1.0)),     # steep, from nothing
])
def test_tapered_segment_coverage_is_the_model_on_every_pixel(renderer, p0, p1, factors):
    alpha = layer_alpha(renderer, tapered([p0, p1], 7.0, vertex_width=factors))
    expected = tapered_segment_model(*pixel_centres(48, 64), p0, p1, 7.0, *factors)
    np.testing.assert_allclose(alpha, expected, rtol=0, atol=MODEL_TOLERANCE)


@pytest.mark.parametrize("row, expected", [(20, 1.0), (21, 1.0), (22, 0.75), (23, 0.0), (18, 0.75), (17, 0.0)])
def test_tapered_segment_at_known_pixels(renderer, row, expected):
    """Width 6 narrowing to half over 40 px: at the middle (column 30) the half width is 2.25 px."""
    alpha = layer_alpha(renderer, tapered([(10.5, 20.5), (50.5, 20.5)], 6.0, vertex_width=[1.0, 0.5]))
    assert alpha[row, 30] == pytest.approx(expected, abs=MODEL_TOLERANCE)
    assert alpha[20, 11] == 1.0 and alpha[23, 11] == pytest.approx(0.5 - (3.0 - 2.9625), abs=MODEL_TOLERANCE)


def test_alpha_fades_linearly_along_the_arc(renderer):
    """Alpha factors 1, 0.5, 0 at arc 0, 20 and 60: the centre row carries 0.8 x the interpolated factor."""
    lines = tapered([(4.5, 24.5), (24.5, 24.5), (64.5, 24.5)], 3.0, vertex_alpha=[1.0, 0.5, 0.0],
                    color=(0.2, 0.6, 1.0, 0.8))
    color, alpha = dense(renderer.rasterize(DisplayList((lines,)), 48, 64))
    arc = np.arange(5, 60) + 0.5 - 4.5
    factor = np.where(arc <= 20, 1.0 - 0.5 * arc / 20, 0.5 - 0.5 * (arc - 20) / 40)
    np.testing.assert_allclose(alpha[24, 5:60], 0.8 * factor, rtol=0, atol=MODEL_TOLERANCE)
    np.testing.assert_allclose(color[24, 5:60], 0.8 * factor[:, None] * [0.2, 0.6, 1.0], rtol=0, atol=MODEL_TOLERANCE)
    assert alpha[24, 24] == pytest.approx(0.8 * 0.5, abs=MODEL_TOLERANCE)  # the middle vertex


@pytest.mark.parametrize("seed", range(4))
def test_tapered_lines_match_the_bruteforce_reference(renderer, seed):
    display_list = random_display_list(seed, tapered=True)
    color, alpha = dense(renderer.rasterize(display_list, 72, 96))
    ref_color, ref_alpha = reference_layer(display_list, 72, 96)
    assert np.count_nonzero(ref_alpha > 0) > 0.15 * ref_alpha.size
    assert np.abs(alpha - ref_alpha).max() <= REFERENCE_TOLERANCE
    assert np.abs(color - ref_color).max() <= REFERENCE_TOLERANCE


def with_unit_factors(display_list: DisplayList) -> DisplayList:
    """``display_list`` with every polyline's width and alpha factors given as 1."""
    return DisplayList(tuple(
        dataclasses.replace(layer, vertex_width=np.ones(len(layer.vertices)), vertex_alpha=np.ones(len(layer.vertices)))
        if isinstance(layer, Polylines) and layer.vertex_width is None else layer for layer in display_list.layers))


LINE_SCENES = [name for name in sorted(SCENES) if name != "trails"
               and any(isinstance(layer, Polylines) for layer in SCENES[name]()[1].layers)]


@pytest.mark.parametrize("name", LINE_SCENES)
def test_factors_of_one_draw_the_untapered_picture_bit_for_bit(renderer, name):
    frame, display_list = SCENES[name]()
    ones = with_unit_factors(display_list)
    np.testing.assert_array_equal(renderer.render(frame, ones), renderer.render(frame, display_list))


def test_tapered_and_plain_polylines_in_one_list(renderer):
    """A list mixing factored and plain layers draws each as it would alone."""
    plain = polylines([[(4.5, 10.5), (60.5, 10.5)]], width=3.0, color=(1, 0, 0, 1))
    thin = tapered([(4.5, 30.5), (60.5, 30.5)], 6.0, vertex_width=[1.0, 0.0], vertex_alpha=[1.0, 0.2])
    frame = flat_frame(48, 64, (0.1, 0.1, 0.1))
    both = renderer.render(frame, DisplayList((plain, thin)))
    np.testing.assert_array_equal(both[:20], renderer.render(frame, DisplayList((plain,)))[:20])
    np.testing.assert_array_equal(both[20:], renderer.render(frame, DisplayList((thin,)))[20:])
