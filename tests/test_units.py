"""Size units of the nodes: 'pixels', or '% of frame height' (1 unit = frame height / 100 pixels)."""

import numpy as np
import pytest
from trackoverlay.nodes.adapters import pixels_per_unit, unit_scale
from trackoverlay.nodes.widgets import UNITS
from trackoverlay.utils.draw.display_list import DisplayList
from trackoverlay.utils.draw.overlays import box_primitives
from trackoverlay.utils.draw.styles import BoxStyle

PIXELS, PERCENT = UNITS


@pytest.mark.parametrize("units, height, expected", [
    (PIXELS, 1080, 1.0),
    (PIXELS, 0, 1.0),
    (PERCENT, 1080, 10.8),
    (PERCENT, 720, 7.2),
    (PERCENT, 200, 2.0),
    (PERCENT, 25, 0.25),
])
def test_pixels_per_unit(units, height, expected):
    assert pixels_per_unit(units, height) == pytest.approx(expected, rel=1e-12)


def test_percent_sized_box_spans_that_share_of_the_reference_height(cpu_renderer):
    """A box 10 % of a 200 px tall, 300 px wide frame is 20 px wide: its 1 px outline sits 10 px from its centre."""
    size = 10.0 * unit_scale(PERCENT, (300, 200))
    style = BoxStyle(size=size, stroke_width=1.0, fill_opacity=0.0, roundness=0.0)
    box = box_primitives(np.array([[150.5, 100.5]], np.float32), np.array([[size, size]], np.float32), [0], style)
    _, alpha = cpu_renderer.render_layer(DisplayList((box,)), 200, 300)
    assert np.flatnonzero(alpha[100]).tolist() == [140, 160]  # the left and right outline through the centre row
    assert np.flatnonzero(alpha[:, 150]).tolist() == [90, 110]
