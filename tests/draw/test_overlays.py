"""Geometry builders: box looks from a BoxStyle (sizes, corners, brackets, opacity)."""

import numpy as np
from trackoverlay.utils.draw.colors import parse_color
from trackoverlay.utils.draw.overlays import box_primitives
from trackoverlay.utils.draw.styles import BoxStyle


def test_box_opacity_scales_stroke_and_fill_alpha():
    """Stroke alpha = colour alpha x opacity; fill alpha = colour alpha x fill opacity x opacity."""
    style = BoxStyle(color="#FF000080", opacity=0.5, fill_opacity=0.4)
    boxes = box_primitives(np.array([[10.0, 10.0]]), np.array([[8.0, 6.0]]), [0], style)
    alpha = parse_color("#FF000080")[3]
    np.testing.assert_allclose(boxes.stroke_color, [[1, 0, 0, alpha * 0.5]], rtol=1e-6)
    np.testing.assert_allclose(boxes.fill_color, [[1, 0, 0, alpha * 0.4 * 0.5]], rtol=1e-6)
    framed = box_primitives(np.array([[10.0, 10.0]]), np.array([[8.0, 6.0]]), [0],
                            BoxStyle(fill_color="#00FF00", opacity=0.5, fill_opacity=0.4))
    np.testing.assert_allclose(framed.fill_color, [[0, 1, 0, 0.2]], rtol=1e-6)


def test_box_size_roundness_and_bracket_are_fractions_of_the_box():
    """Half-size = size / 2; corner radius = roundness x shorter half-side; bracket arm = length x shorter side."""
    style = BoxStyle(roundness=0.5, shape="brackets", bracket_length=0.25)
    boxes = box_primitives(np.array([[10.0, 10.0]]), np.array([[40.0, 24.0]]), [0], style)
    np.testing.assert_array_equal(boxes.half_size, [[20, 12]])
    np.testing.assert_array_equal(boxes.radius, [6])
    np.testing.assert_array_equal(boxes.bracket, [6])
