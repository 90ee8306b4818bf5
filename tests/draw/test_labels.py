"""Text labels: the font atlas and layout, label strings and formats, placement on screen, fades, styles."""

import logging
import shutil

import numpy as np
import pytest
from trackoverlay.utils.draw.display_list import Boxes, DisplayList, Glyphs
from trackoverlay.utils.draw.glyphs import DEFAULT_FONT, FontAtlas, font_atlas
from trackoverlay.utils.draw.labels import label_overlay, label_strings
from trackoverlay.utils.draw.styles import (
    LABEL_PLACEMENTS,
    LabelStyle,
    check_label_format,
)
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.raster.layer import layer_to_rgba

WIDTH, HEIGHT = 160, 90


def one_frame(points, **style):
    """Layers (plate Boxes or None, Glyphs) of labels at ``points`` [N, 2] in one frame."""
    points = np.asarray(points, np.float32).reshape(1, -1, 2)
    overlay = label_overlay(points, np.ones(points.shape[:2], bool), LabelStyle(**style), bounds=(WIDTH, HEIGHT))
    layers = overlay[0].layers
    plates = next((layer for layer in layers if isinstance(layer, Boxes)), None)
    return plates, next(layer for layer in layers if isinstance(layer, Glyphs))


# ------------------------------------------------------------------ the atlas


def test_layout_follows_the_fonts_advances_on_whole_pixels():
    fonts = font_atlas("", 12)
    one, two = fonts.layout("0"), fonts.layout("00")
    assert two.count == 2 * one.count == 2
    advance = two.offset[1, 0] - two.offset[0, 0]
    assert advance == one.extent[0] == two.extent[0] / 2 > 0  # DejaVu digits are equal width
    assert fonts.layout("0\n0").extent[1] == one.extent[1] + fonts.line_height
    for run in (one, two):
        assert np.all(run.offset == np.round(run.offset)) and np.all(run.texel == np.round(run.texel))


def test_glyph_quads_hold_the_fonts_coverage_antialiased():
    fonts = font_atlas("", 12)
    run = fonts.layout("A")
    atlas = fonts.atlas()
    (u, v), (w, h) = run.texel[0].astype(int), run.size[0].astype(int)
    quad = atlas.coverage[v:v + h, u:u + w]
    assert quad[0].max() == quad[-1].max() == quad[:, 0].max() == quad[:, -1].max() == 0  # the zero ring
    assert quad.max() == 255 and np.any((quad > 0) & (quad < 255))  # solid and anti-aliased texels
    ring = atlas.coverage[v - 1:v + h + 1, u - 1:u + w + 1]
    assert ring[0].max() == ring[-1].max() == ring[:, 0].max() == ring[:, -1].max() == 0  # no neighbour leaks


def test_new_glyphs_grow_the_atlas_and_keep_old_texels():
    fonts = FontAtlas(DEFAULT_FONT, 17)
    old = fonts.layout("Track 42")
    before = fonts.atlas()
    assert fonts.atlas() is before  # no new glyph, no new snapshot
    cyrillic = "".join(map(chr, range(0x410, 0x450)))
    run = fonts.layout(cyrillic)  # not in the ASCII the atlas starts with; they need new shelves
    after = fonts.atlas()
    assert after.key != before.key and after.coverage.shape[0] > before.coverage.shape[0]
    for (u, v), (w, h) in zip(old.texel.astype(int), old.size.astype(int)):  # quads laid out before still fit
        np.testing.assert_array_equal(after.coverage[v:v + h, u:u + w], before.coverage[v:v + h, u:u + w])
    assert run.count == 64


def test_non_latin_text_renders_from_the_bundled_font():
    for text in ("Ωμέγα", "Жук", "Ǆ ß Ø"):
        _, glyphs = one_frame([[80, 45]], text="format", format=text, size=16, plate_opacity=0.0)
        assert glyphs.count == len(text.replace(" ", ""))
        _, alpha = layer_to_rgba(CpuRenderer(workers=1).rasterize(DisplayList((glyphs,)), HEIGHT, WIDTH))
        assert np.count_nonzero(alpha > 0.5) > 20, text


def test_a_missing_glyph_is_logged_once_and_drawn_as_notdef(caplog):
    fonts = FontAtlas(DEFAULT_FONT, 13)
    with caplog.at_level(logging.WARNING, logger="trackoverlay"):
        run = fonts.layout("a\u4e01b")
        fonts.layout("\u4e01\u4e01")
    warnings = [record.getMessage() for record in caplog.records if "U+4E01" in record.getMessage()]
    assert len(warnings) == 1 and ".notdef" in warnings[0] and "DejaVuSans.ttf" in warnings[0]
    assert run.count == 3  # the box stands in for the missing character


def test_a_user_font_file_is_used(tmp_path):
    copy = tmp_path / "My Font.ttf"
    shutil.copy(DEFAULT_FONT, copy)
    fonts = font_atlas(str(copy), 12)
    assert fonts.path == copy.resolve()
    np.testing.assert_array_equal(fonts.layout("Track").offset, font_atlas("", 12).layout("Track").offset)


@pytest.mark.parametrize("make, words", [
    (lambda tmp: tmp / "nowhere.ttf", ["nowhere.ttf", "does not exist", "leave it empty"]),
    (lambda tmp: tmp, ["does not exist or is not a file"]),
    (lambda tmp: (tmp / "notes.ttf").write_text("not a font") and tmp / "notes.ttf",
     ["notes.ttf", "is not a font FreeType can read", ".ttf or .otf"]),
])
def test_bad_user_fonts_are_refused_with_the_fix(tmp_path, make, words):
    with pytest.raises(ValueError) as error:
        LabelStyle(font=str(make(tmp_path)))
    for word in words:
        assert word in str(error.value)


# ----------------------------------------------------------- strings and formats


def test_label_strings_fill_every_field():
    columns, frames = np.array([7, 2]), np.array([3, 3])
    points = np.float32([[12.4, 33.6], [1.0, 2.0]])
    sizes = np.float32([[20, 10], [4, 4]])
    texts = ["", "", "car", "", "", "", "", "bus"]
    assert label_strings("#{id:03d} {x:.0f},{y:.0f} {w:g}x{h:g} f{frame} {text}", columns, frames, points, sizes,
                         texts) == ["#007 12,34 20x10 f3 bus", "#002 1,2 4x4 f3 car"]
    assert label_strings("{id}", columns, frames, points, sizes) == ["7", "2"]


@pytest.mark.parametrize("template, words", [
    ("{nope}", ["{nope}", "the fields are id, x, y, w, h, frame, text"]),
    ("{}", ["uses {}", "the fields are"]),
    ("{0}", ["uses {0}"]),
    ("{id.real}", ["uses {id.real}"]),
    ("{x", ["is not a format string", "double literal braces"]),
    ("{text:d}", ["does not fit its fields", "text is text"]),
    ("{id:.2q}", ["does not fit its fields"]),
    ("{x:{w}}", ["nests a field"]),
])
def test_bad_formats_are_refused_up_front(template, words):
    with pytest.raises(ValueError) as error:
        LabelStyle(text="format", format=template)
    for word in words:
        assert word in str(error.value)


def test_good_formats_pass_and_other_texts_ignore_the_format():
    for template in ("{id:03d}", "{x:.0f},{y:.0f}", "ID {id} ({text!r})", "{{braces}} {frame}"):
        check_label_format(template)
    LabelStyle(text="id", format="{nope}")  # only text 'format' reads it


def test_track_text_needs_texts_and_empty_texts_draw_nothing():
    points, visible = np.float32([[[20, 20], [60, 40]]]), np.ones((1, 2), bool)
    with pytest.raises(ValueError, match="needs text per track"):
        label_overlay(points, visible, LabelStyle(text="track_text"))
    with pytest.raises(ValueError, match="label texts has 3 entries but the tracks have 2"):
        label_overlay(points, visible, LabelStyle(text="track_text"), texts=["a", "b", "c"])
    (frame,) = label_overlay(points, visible, LabelStyle(text="track_text"), texts=["", "Zed"])
    plates, glyphs = frame.layers
    assert plates.count == 1 and glyphs.count == 3


# ----------------------------------------------------------------- placement


def test_every_placement_sits_where_it_says():
    """A 20 px box at (80, 45), margin 4, no padding: the label's block against the box's sides."""
    fonts = font_atlas("", 12)
    width, height = fonts.layout("7").extent
    for placement in LABEL_PLACEMENTS:
        plates, _ = one_frame([[80, 45]], placement=placement, box_size=20, margin=4, plate_padding=0)
        (cx, cy), (hw, hh) = plates.center[0], plates.half_size[0]
        left, top, right, bottom = cx - hw, cy - hh, cx + hw, cy + hh
        assert (right - left, bottom - top) == (width, height)
        want_x = {"left": right == 80 - 10 - 4, "right": left == 80 + 10 + 4, "top_left": left == 70,
                  "bottom_left": left == 70, "top_right": right == 90, "bottom_right": right == 90}
        want_y = {"above": bottom == 45 - 14, "top_left": bottom == 31, "top_right": bottom == 31,
                  "below": top == 45 + 14, "bottom_left": top == 59, "bottom_right": top == 59}
        centred_x = abs((left + right) / 2 - 80) <= 0.5
        centred_y = abs((top + bottom) / 2 - 45) <= 0.5
        assert want_x.get(placement, centred_x), placement
        assert want_y.get(placement, centred_y), placement


@pytest.mark.parametrize("point, placement", [
    ((2, 45), "left"), ((158, 45), "right"), ((80, 1), "above"), ((80, 89), "below"),
    ((0, 0), "top_left"), ((160, 90), "bottom_right"), ((-30, 120), "center"),
])
def test_labels_stay_on_screen_at_every_edge(point, placement):
    plates, glyphs = one_frame([point], text="format", format="edge {id}", placement=placement, box_size=30,
                               margin=6)
    low, high = plates.center - plates.half_size, plates.center + plates.half_size
    assert np.all(low >= 0) and np.all(high <= [WIDTH, HEIGHT])
    assert np.all(glyphs.origin >= 0) and np.all(glyphs.origin + glyphs.size <= [WIDTH, HEIGHT])
    assert np.all(glyphs.origin == np.round(glyphs.origin))  # on the pixel grid: crisp


def test_without_bounds_labels_may_leave_the_frame():
    points = np.float32([[[2, 2]]])
    (frame,) = label_overlay(points, np.ones((1, 1), bool), LabelStyle(placement="above"))
    plates = frame.layers[0]
    assert plates.center[0, 1] - plates.half_size[0, 1] < 0


def test_box_size_from_the_tracks():
    points, visible = np.float32([[[80, 45], [30, 45]]]), np.ones((1, 2), bool)
    sizes = np.float32([[[40, 30], [np.nan, np.nan]]])
    style = LabelStyle(box_size_mode="track", box_size=10, placement="right", margin=0, plate_padding=0)
    plates = label_overlay(points, visible, style, sizes=sizes)[0].layers[0]
    left = plates.center[:, 0] - plates.half_size[:, 0]
    np.testing.assert_array_equal(left, [80 + 20, 30 + 5])  # the track's own width, else box_size


def test_hidden_and_lost_points_get_no_label():
    points = np.float32([[[20, 20], [np.nan, 5], [60, 40]]])
    visible = np.array([[True, True, False]])
    plates = label_overlay(points, visible, LabelStyle())[0].layers[0]
    assert plates.count == 1


# ------------------------------------------------------------ colours and fades


def test_fades_scale_text_and_plate_alpha():
    points = np.float32([[[40, 40], [120, 40]]])
    opacity = np.float32([[1.0, 0.25]])
    style = LabelStyle(opacity=0.8, plate_opacity=0.5, plate_stroke=1.0, plate_stroke_color="#FF000080")
    plates, glyphs = label_overlay(points, np.ones((1, 2), bool), style, opacity=opacity)[0].layers
    np.testing.assert_allclose(plates.fill_color[:, 3], [0.5, 0.125])
    np.testing.assert_allclose(plates.stroke_color[:, 3], [128 / 255, 0.25 * 128 / 255], rtol=1e-6)
    per_label = np.unique(glyphs.color[:, 3])
    np.testing.assert_allclose(per_label, [0.2, 0.8])
    _, alpha = layer_to_rgba(CpuRenderer(workers=1).rasterize(DisplayList((glyphs,)), HEIGHT, WIDTH))
    assert alpha[:, :80].max() == pytest.approx(0.8) and alpha[:, 80:].max() == pytest.approx(0.2)


def test_track_colours_and_no_plate():
    plates, glyphs = one_frame([[40, 40], [120, 40]], color_mode="track", plate_opacity=0.0)
    assert plates is None
    assert len({tuple(color) for color in glyphs.color}) == 2


def test_label_style_ranges_and_choices():
    with pytest.raises(ValueError, match=r"label size must be a number in \[1, 512\]"):
        LabelStyle(size=0.5)
    with pytest.raises(ValueError, match="label placement 'middle' is not one of top_left"):
        LabelStyle(placement="middle")
    with pytest.raises(ValueError, match="label text 'name' is not one of id, coordinates, format, track_text"):
        LabelStyle(text="name")
    with pytest.raises(ValueError, match="label plate_color 'black' is not a colour"):
        LabelStyle(plate_color="black")
