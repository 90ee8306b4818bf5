"""Motion trails: the builder's vertices, taper, fade, gaps, dead tracks and smoothing; style and
display-list checks on bad input."""

import numpy as np
import pytest
from trackoverlay.utils.draw.colors import TRACK_PALETTE
from trackoverlay.utils.draw.display_list import DisplayList, Polylines
from trackoverlay.utils.draw.overlays import trail_geometry, trail_overlay
from trackoverlay.utils.draw.styles import TrailStyle
from trackoverlay.utils.raster.cpu import CpuRenderer

STEP = np.array([3.0, 1.0], np.float32)  # pixels per frame of the steady tracks


def steady(frames=20, columns=1, start=(10.0, 20.0)):
    """Tracks moving ``STEP`` per frame, 10 px apart vertically; all visible."""
    t = np.arange(frames, dtype=np.float32)[:, None, None]
    offset = np.stack([np.zeros(columns), 10.0 * np.arange(columns)], axis=1)
    path = (np.asarray(start, np.float32) + offset + t * STEP).astype(np.float32)
    return path, np.ones((frames, columns), bool)


def lines_of(display_list: DisplayList) -> list:
    """The polylines of a one-layer display list as [(vertices, vertex_width, vertex_alpha), ...]."""
    if not display_list.layers:
        return []
    (layer,) = display_list.layers
    bounds = zip(layer.offsets[:-1], layer.offsets[1:])
    return [(layer.vertices[a:b], layer.vertex_width[a:b], layer.vertex_alpha[a:b]) for a, b in bounds]


@pytest.fixture(scope="module")
def renderer():
    cpu = CpuRenderer(workers=1)
    yield cpu
    cpu.close()


# ------------------------------------------------------------------ geometry


def test_a_trail_is_the_last_positions_tapered_and_faded():
    path, visible = steady()
    style = TrailStyle(length=6, width=5.0, taper=0.6, fade=2.0, smoothing=1.0, opacity=0.5, color="#FF8000")
    overlay = trail_overlay(path, visible, style)
    assert len(overlay) == 20 and not overlay[0].layers  # one position: nothing to draw
    (vertices, vertex_width, vertex_alpha), = lines_of(overlay[12])
    np.testing.assert_array_equal(vertices, path[7:13, 0])  # a steady line survives the smoothing exactly
    age = np.arange(5, -1, -1) / 5
    np.testing.assert_allclose(vertex_width, 1 - 0.6 * age, rtol=1e-6)
    np.testing.assert_allclose(vertex_alpha, (1 - age) ** 2, rtol=1e-6, atol=1e-7)
    (layer,) = overlay[12].layers
    assert layer.width.tolist() == [5.0] and layer.dash.tolist() == [[0.0, 0.0]]
    np.testing.assert_allclose(layer.color_start, [[1.0, 128 / 255, 0.0, 0.5]], rtol=1e-6)
    np.testing.assert_array_equal(layer.color_end, layer.color_start)
    (young,) = lines_of(overlay[2])  # a young track's trail grows from the head, already tapered by age
    np.testing.assert_array_equal(young[0], path[0:3, 0])
    np.testing.assert_allclose(young[1], [1 - 0.6 * 0.4, 1 - 0.6 * 0.2, 1.0], rtol=1e-6)


def test_track_colours_come_from_the_palette_by_column():
    path, visible = steady(columns=3)
    (layer,) = trail_overlay(path, visible, TrailStyle(length=4, color_mode="track", opacity=0.7))[5].layers
    np.testing.assert_allclose(layer.color_start[:, :3], TRACK_PALETTE[:3])
    np.testing.assert_allclose(layer.color_start[:, 3], 0.7)


def test_track_opacity_scales_each_vertex_by_its_own_frame():
    path, visible = steady(frames=8)
    opacity = np.linspace(0.2, 0.9, 8, dtype=np.float32)[:, None]
    style = TrailStyle(length=4, fade=1.0)
    (_, _, faded), = lines_of(trail_overlay(path, visible, style, opacity)[7])
    (_, _, plain), = lines_of(trail_overlay(path, visible, style)[7])
    np.testing.assert_allclose(faded, plain * opacity[4:8, 0], rtol=1e-6)


def test_hidden_frames_break_the_trail_and_are_never_bridged():
    path, visible = steady(frames=16)
    visible[6, 0] = False
    path[6, 0] = np.nan  # a lost tracker's NaN in the hidden frame
    style = TrailStyle(length=8, smoothing=1.0)
    overlay = trail_overlay(path, visible, style)
    pieces = lines_of(overlay[9])
    assert [len(vertices) for vertices, _, _ in pieces] == [4, 3]  # frames 2..5, then 7..9
    np.testing.assert_array_equal(pieces[0][0], path[2:6, 0])
    np.testing.assert_array_equal(pieces[1][0], path[7:10, 0])
    for vertices, _, _ in pieces:  # consecutive vertices are one frame apart: no jump across frame 6
        np.testing.assert_allclose(np.diff(vertices, axis=0), np.broadcast_to(STEP, (len(vertices) - 1, 2)))
    assert [len(v) for v, _, _ in lines_of(overlay[7])] == [6]  # frame 7 alone draws nothing new
    visible[5, 0] = False  # a single visible frame between two hidden ones draws nothing at all
    assert [len(v) for v, _, _ in lines_of(trail_overlay(path, visible, style)[8])] == [4, 2]


def test_a_dead_track_fades_out_within_its_trail_length(renderer):
    path, visible = steady(frames=30)
    visible[12:, 0] = False  # the track ends at frame 11
    style = TrailStyle(length=8, width=4.0, taper=0.5, opacity=1.0)
    overlay = trail_overlay(path, visible, style)
    heads = []
    for t in range(12, 18):
        (vertices, vertex_width, vertex_alpha), = lines_of(overlay[t])
        np.testing.assert_array_equal(vertices[-1], path[11, 0])  # the head stays where the track ended
        assert len(vertices) == 8 - (t - 11)  # the tail catches up
        heads.append((vertex_width[-1], vertex_alpha[-1]))
    assert all(not display_list.layers for display_list in overlay[18:])  # gone within length - 1 frames
    widths, alphas = np.array(heads).T
    assert np.all(np.diff(widths) < 0) and np.all(np.diff(alphas) < 0)
    np.testing.assert_allclose(alphas, 1 - np.arange(1, 7) / 7, rtol=1e-6)
    drawn = [renderer.rasterize(overlay[t], 48, 96).alpha.max(initial=0.0) for t in range(11, 19)]
    assert drawn[0] == 1.0 and np.all(np.diff(drawn) < 0) and drawn[-1] == 0.0


def test_a_cut_ends_every_trail_and_smoothing_never_reaches_across_it():
    path, visible = steady(frames=20, columns=2)
    visible[10:, 0] = False  # track 0 ends at the cut (as detection ends every track there) ...
    path[10:, 1] += np.float32([50.0, 0.0])  # ... and track 1 keeps its column across it, jumping 50 px
    style = TrailStyle(length=6, smoothing=1.0)
    uncut = trail_overlay(path, visible, style)
    assert len(lines_of(uncut[12])) == 2  # without the cut, track 0's trail fades over the new shot
    overlay = trail_overlay(path, visible, style, cuts=(10,))
    np.testing.assert_array_equal(lines_of(overlay[9])[0][0], lines_of(uncut[9])[0][0])  # before it: the same
    assert not overlay[10].layers  # the cut frame: one position of the new shot, nothing to draw
    for t in (11, 12, 15):
        (vertices, _, _), = lines_of(overlay[t])
        np.testing.assert_array_equal(vertices, path[10:t + 1, 1])  # only the new shot, unsmoothed at the cut
    (vertices, _, _), = lines_of(uncut[15])
    assert not np.array_equal(vertices, path[10:16, 1])  # there, frame 10 is averaged with frame 9's jump


def test_smoothing_hides_jitter_and_keeps_the_head_on_the_point():
    """20 steady tracks with 1.5 px of jitter: smoother trails are less rough and nearer the true line."""
    columns, length = 20, 30
    clean, visible = steady(frames=60, columns=columns)
    path = (clean + np.random.default_rng(5).normal(0.0, 1.5, clean.shape)).astype(np.float32)
    normal = np.array([-STEP[1], STEP[0]]) / np.hypot(*STEP)
    rough, off = [], []
    for smoothing in (0.0, 0.25, 0.5, 1.0):
        (layer,) = trail_overlay(path, visible, TrailStyle(length=length, smoothing=smoothing))[-1].layers
        vertices = layer.vertices.reshape(columns, length, 2)
        np.testing.assert_array_equal(vertices[:, -1], path[-1])  # the head sits on the point
        rough.append(float(np.sqrt(np.mean(np.square(np.diff(vertices, 2, axis=1))))))
        across = (vertices - clean[-length:].transpose(1, 0, 2)) @ normal  # distance from the true line
        off.append(float(np.sqrt(np.mean(np.square(across[:, :-8])))))  # where the window is whole
    assert np.all(np.diff(rough) < 0) and np.all(np.diff(off) < 0)
    assert rough[-1] < 0.15 * rough[0]  # second differences of 17-frame means: 0.09 x measured
    assert off[-1] < 0.3 * off[0]  # 1 / sqrt(17) = 0.24 expected


def test_smoothing_never_reads_later_frames_or_across_a_gap():
    rng = np.random.default_rng(2)
    path = (rng.normal(0.0, 2.0, (40, 2, 2)).cumsum(axis=0) + 50).astype(np.float32)
    visible = np.ones((40, 2), bool)
    visible[20, 1] = False
    style = TrailStyle(length=10, smoothing=1.0)
    whole = trail_overlay(path, visible, style)
    for t in (12, 25, 33):  # the clip cut short after frame t draws frame t the same
        cut = trail_overlay(path[:t + 1], visible[:t + 1], style)[t]
        for name in ("vertices", "offsets", "vertex_width", "vertex_alpha"):
            np.testing.assert_array_equal(getattr(cut.layers[0], name), getattr(whole[t].layers[0], name))
    moved = path.copy()
    moved[:20, 1] += 40.0  # track 1 before its gap: its trail after the gap must not change
    after = trail_overlay(moved, visible, style)[31]
    np.testing.assert_array_equal(after.layers[0].vertices, whole[31].layers[0].vertices)


def test_trails_of_a_frame_alone_equal_those_of_the_whole_clip():
    """The frames a trail reads: frame t needs only t - length - smoothing_frames + 1 .. t."""
    rng = np.random.default_rng(3)
    path = (rng.normal(0.0, 2.0, (50, 5, 2)).cumsum(axis=0) + 80).astype(np.float32)
    visible = rng.random((50, 5)) > 0.1
    style = TrailStyle(length=12, smoothing=0.75)
    frame, fields = trail_geometry(path, visible, style)
    history = style.length + style.smoothing_frames
    window_frame, window = trail_geometry(path[45 - history + 1:46], visible[45 - history + 1:46], style,
                                          frames=[history - 1])
    lines = np.flatnonzero(frame == 45)
    vertices = slice(fields["offsets"][lines[0]], fields["offsets"][lines[-1] + 1])
    np.testing.assert_array_equal(window["vertices"], fields["vertices"][vertices])
    np.testing.assert_array_equal(window["vertex_alpha"], fields["vertex_alpha"][vertices])
    assert window_frame.tolist() == [history - 1] * len(lines)


def test_empty_tracks_and_inputs_left_untouched():
    style = TrailStyle()
    assert trail_overlay(np.zeros((3, 0, 2), np.float32), np.zeros((3, 0), bool), style) == [DisplayList()] * 3
    assert trail_overlay(np.zeros((0, 4, 2), np.float32), np.zeros((0, 4), bool), style) == []
    path, visible = steady(frames=10, columns=2)
    path[4, 1] = 1e9  # far outside: hidden, like NaN
    before = path.copy(), visible.copy()
    overlay = trail_overlay(path, visible, TrailStyle(length=5))
    np.testing.assert_array_equal(path, before[0])
    np.testing.assert_array_equal(visible, before[1])
    assert np.diff(overlay[4].layers[0].offsets).tolist() == [5, 4]  # track 1 hidden at frame 4: its trail ends
    assert np.diff(overlay[6].layers[0].offsets).tolist() == [5, 2, 2]  # and a new one starts after


@pytest.mark.gpu
def test_trails_built_on_cupy_equal_the_numpy_build():
    import cupy

    rng = np.random.default_rng(4)
    path = (rng.normal(0.0, 2.0, (40, 30, 2)).cumsum(axis=0) + 100).astype(np.float32)
    visible = rng.random((40, 30)) > 0.1
    opacity = rng.random((40, 30)).astype(np.float32)
    style = TrailStyle(length=15, smoothing=0.5, fade=1.7, color_mode="track")
    frame, fields = trail_geometry(path, visible, style, opacity, cuts=(9, 25))
    device_frame, device = trail_geometry(cupy.asarray(path), cupy.asarray(visible), style, cupy.asarray(opacity),
                                          cuts=(9, 25), xp=cupy)
    np.testing.assert_array_equal(device_frame.get(), frame)
    for name, values in fields.items():
        if values.dtype.kind == "f":  # float32 powers may differ in the last bit
            np.testing.assert_allclose(device[name].get(), values, rtol=1e-6, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(device[name].get(), values, err_msg=name)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("field, value, words", [
    ("length", 1, "trail length (frames) must be a whole number in [2, 240], got 1"),
    ("length", 241, "got 241"),
    ("length", 12.5, "must be a whole number"),
    ("width", 0.0, "trail width must be a number in (0, 10000]"),
    ("taper", 1.5, "trail taper must be a number in [0, 1]"),
    ("fade", 0.0, "trail fade must be a number in (0, 10]"),
    ("smoothing", -0.1, "trail smoothing must be a number in [0, 1]"),
    ("opacity", float("nan"), "trail opacity"),
    ("color", "#12", "trail color '#12' is not a colour"),
    ("color_mode", "rainbow", "trail color_mode 'rainbow' is not one of single, track"),
])
def test_bad_trail_styles_name_the_field(field, value, words):
    with pytest.raises(ValueError) as caught:
        TrailStyle(**{field: value})
    assert words in str(caught.value)


def two_vertex_line(**factors) -> Polylines:
    return Polylines([[0, 0], [10, 0]], [0, 2], [2.0], [[1, 1, 1, 1]], [[1, 1, 1, 1]], [[0, 0]], [False], **factors)


@pytest.mark.parametrize("factors, words", [
    ({"vertex_width": [1.0]}, "polyline vertex_width has 1 rows, expected 2 (one per vertex)"),
    ({"vertex_width": [1.0, -0.5]}, "polyline vertex_width must hold values in 0..inf"),
    ({"vertex_width": [[1.0, 1.0]]}, "polyline vertex_width must have shape [N]"),
    ({"vertex_alpha": [0.5, 1.5]}, "polyline vertex_alpha must hold values in 0..1"),
    ({"vertex_alpha": [np.nan, 1.0]}, "polyline vertex_alpha holds 1 NaN/inf value(s)"),
])
def test_bad_vertex_factors_name_the_field(factors, words):
    with pytest.raises(ValueError) as caught:
        two_vertex_line(**factors)
    assert words in str(caught.value)


def test_vertex_factors_are_copied_read_only_and_counted():
    width, alpha = np.array([1.0, 0.5], np.float32), np.array([1.0, 0.0], np.float32)
    lines = two_vertex_line(vertex_width=width, vertex_alpha=alpha)
    width[0] = 7.0
    assert lines.vertex_width.tolist() == [1.0, 0.5] and not lines.vertex_width.flags.writeable
    assert width.flags.writeable
    plain = two_vertex_line()
    assert plain.vertex_width is None and plain.vertex_alpha is None
    assert DisplayList((lines,)).nbytes == DisplayList((plain,)).nbytes + 16
