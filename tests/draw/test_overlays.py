"""Geometry builders: box looks from a BoxStyle (sizes, corners, brackets, opacity)."""

import numpy as np
from trackoverlay.utils.draw.colors import parse_color
from trackoverlay.utils.draw.display_list import Boxes, Polylines
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


def _fields_equal(part, expected) -> None:
    for name in expected.__dataclass_fields__:
        value, wanted = getattr(part, name), getattr(expected, name)
        if wanted is None:
            assert value is None, name
            continue
        assert value.dtype == wanted.dtype and not value.flags.writeable, name
        np.testing.assert_array_equal(value, wanted, err_msg=name)


def test_a_batch_cut_into_parts_equals_each_part_built_and_checked_on_its_own():
    """Polylines and boxes cut at frame bounds (the batch builders' split) are the parts built whole, read-only,
    an empty run is an empty batch, and one run of everything is the batch itself."""
    vertices = np.array([[0, 0], [4, 1], [8, 0], [1, 5], [3, 9], [9, 9], [6, 2], [2, 2]], np.float32)
    offsets = np.array([0, 3, 5, 8])
    fields = {"width": np.array([1.0, 2.0, 3.0]), "color_start": np.tile([1.0, 0.5, 0.0, 0.8], (3, 1)),
              "color_end": np.tile([0.0, 0.5, 1.0, 0.4], (3, 1)), "dash": np.array([[0, 0], [3, 2], [0, 4]]),
              "dash_round": np.array([False, False, True])}
    factors = {"vertex_width": np.linspace(0.5, 1.0, 8), "vertex_alpha": np.linspace(1.0, 0.2, 8)}
    lines = Polylines(vertices, offsets, **fields, **factors)
    first, empty, rest = lines.parts([0, 1, 1, 3])
    _fields_equal(first, Polylines(vertices[:3], offsets[:2], **{k: v[:1] for k, v in fields.items()},
                                   **{k: v[:3] for k, v in factors.items()}))
    _fields_equal(empty, Polylines.empty())
    _fields_equal(rest, Polylines(vertices[3:], offsets[1:] - 3, **{k: v[1:] for k, v in fields.items()},
                                  **{k: v[3:] for k, v in factors.items()}))
    assert lines.parts([0, 3])[0] is lines

    boxes = box_primitives(np.array([[10.0, 10.0], [30.0, 12.0], [50.0, 40.0]]), np.full((3, 2), 8.0), [0, 1, 2],
                           BoxStyle())
    one, none, two = boxes.parts([0, 1, 1, 3])
    _fields_equal(one, Boxes(*(getattr(boxes, name)[:1] for name in boxes.__dataclass_fields__)))
    assert none.count == 0
    _fields_equal(two, Boxes(*(getattr(boxes, name)[1:] for name in boxes.__dataclass_fields__)))
    assert boxes.parts([0, 3])[0] is boxes
