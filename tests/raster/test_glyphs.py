"""Glyph quads on every backend: the atlas sampled exactly as the coverage model says.

Each test takes the ``renderer`` fixture (CPU, and GPU where CuPy can use
one). A float64 brute-force reference of the sampling rule (every pixel
centre, bilinear in texel coordinates, zero outside the quad and the atlas)
is compared with the engine (float32) to 1e-5 on alpha and colour; on the
pixel grid the coverage is the texel itself, exactly.
"""

import numpy as np
import pytest
from coverage_reference import dense
from scenes import boxes, flat_frame
from trackoverlay.utils.draw.display_list import DisplayList, GlyphAtlas, Glyphs
from trackoverlay.utils.raster.gpu import HostLayers

TOLERANCE = 1e-5

ATLAS = GlyphAtlas(np.array([
    [0, 0, 0, 0, 0, 0],
    [0, 255, 128, 0, 40, 0],
    [0, 64, 200, 10, 255, 0],
    [0, 0, 90, 255, 17, 0],
    [0, 0, 0, 0, 0, 0],
], np.uint8))


def glyphs(origins, sizes, texels, colors, atlas=ATLAS) -> Glyphs:
    count = len(origins)
    return Glyphs(np.float32(origins), np.broadcast_to(np.float32(sizes), (count, 2)),
                  np.broadcast_to(np.float32(texels), (count, 2)), np.broadcast_to(np.float32(colors), (count, 4)),
                  atlas)


def reference_alpha(layer: Glyphs, height: int, width: int) -> np.ndarray:
    """Coverage x colour alpha of one glyph layer, each pixel by the rule in float64 (glyphs composited over)."""
    y, x = np.mgrid[0:height, 0:width] + 0.5
    alpha = np.zeros((height, width))
    coverage = layer.atlas.coverage.astype(np.float64)
    padded = np.pad(coverage, 1)  # texels outside the atlas are 0

    def texel(i, j):
        inside = (i >= -1) & (i <= coverage.shape[1]) & (j >= -1) & (j <= coverage.shape[0])
        return np.where(inside, padded[np.clip(j + 1, 0, padded.shape[0] - 1), np.clip(i + 1, 0, padded.shape[1] - 1)],
                        0.0)

    for (ox, oy), (w, h), (u, v), color in zip(layer.origin, layer.size, layer.texel, layer.color):
        s = x - ox + u - 0.5
        t = y - oy + v - 0.5
        i, j = np.floor(s).astype(int), np.floor(t).astype(int)
        fs, ft = s - i, t - j
        value = ((1 - fs) * (1 - ft) * texel(i, j) + fs * (1 - ft) * texel(i + 1, j)
                 + (1 - fs) * ft * texel(i, j + 1) + fs * ft * texel(i + 1, j + 1)) / 255.0
        inside = (x >= ox) & (x < ox + w) & (y >= oy) & (y < oy + h)
        a = np.where(inside, value * color[3], 0.0)
        alpha = a + alpha * (1 - a)
    return alpha


def test_on_the_pixel_grid_coverage_is_the_texel(renderer):
    layer = glyphs([(10, 20)], (6, 5), (0, 0), (1, 1, 1, 1))
    color, alpha = dense(renderer.rasterize(DisplayList((layer,)), 40, 32))
    expected = np.zeros((40, 32), np.float32)
    expected[20:25, 10:16] = ATLAS.coverage / np.float32(255)
    np.testing.assert_array_equal(alpha, expected)
    np.testing.assert_array_equal(color[..., 0], expected)


@pytest.mark.parametrize("origin", [(7.25, 3.5), (10.6, 11.1), (0.8, 0.3), (-1.4, 20.75)])
def test_off_the_grid_coverage_is_the_bilinear_sample_on_every_pixel(renderer, origin):
    layer = glyphs([origin], (5, 4), (0.5, 0.75), (0.2, 0.6, 1.0, 0.8))
    color, alpha = dense(renderer.rasterize(DisplayList((layer,)), 32, 24))
    want = reference_alpha(layer, 32, 24)
    assert np.count_nonzero(want) > 8
    np.testing.assert_allclose(alpha, want, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(color, want[..., None] * np.float32([0.2, 0.6, 1.0]), rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize("x, y, expected", [
    (10, 6, 0 * 0.25 + 255 * 0.75),    # s = 0.75: 1/4 of texel (0, 1), 3/4 of (1, 1)
    (11, 6, 255 * 0.25 + 128 * 0.75),  # s = 1.75: 1/4 of (1, 1), 3/4 of (2, 1)
    (12, 6, 128 * 0.25 + 0 * 0.75),    # s = 2.75: 1/4 of (2, 1), 3/4 of (3, 1)
])
def test_a_quarter_texel_shift_mixes_neighbours(renderer, x, y, expected):
    """Quad at x = 9.25 over the atlas row 1: pixel centre x + 0.5 samples s = x + 0.5 - 9.25 - 0.5."""
    layer = glyphs([(9.25, 5)], (6, 5), (0, 0), (1, 1, 1, 1))
    _, alpha = dense(renderer.rasterize(DisplayList((layer,)), 16, 24))
    assert alpha[y, x] == pytest.approx(expected / 255, abs=TOLERANCE)


def test_nothing_outside_the_quad_even_where_the_atlas_has_coverage(renderer):
    """A 2x2 quad over texels (1, 1)..(2, 2): its neighbours in the atlas do not leak into the frame."""
    layer = glyphs([(4, 4)], (2, 2), (1, 1), (1, 1, 1, 1))
    _, alpha = dense(renderer.rasterize(DisplayList((layer,)), 12, 12))
    expected = np.zeros((12, 12), np.float32)
    expected[4:6, 4:6] = ATLAS.coverage[1:3, 1:3] / np.float32(255)
    np.testing.assert_array_equal(alpha, expected)


def test_quads_clipped_by_the_frame_edges(renderer):
    layer = glyphs([(-3, -2), (29, 13)], (6, 5), (0, 0), (1, 1, 1, 1))
    _, alpha = dense(renderer.rasterize(DisplayList((layer,)), 16, 32))
    np.testing.assert_allclose(alpha, reference_alpha(layer, 16, 32), rtol=0, atol=TOLERANCE)
    assert alpha[0, 0] == pytest.approx(10 / 255)  # pixel (0, 0) is quad pixel (3, 2): texel (3, 2)


def test_overlapping_glyphs_composite_in_order_over_a_box(renderer):
    """Box, then two glyphs: the later glyph is on top (premultiplied "over")."""
    under = boxes([[8, 8]], [[8, 8]], fill_color=(0, 0, 1, 1))
    top = glyphs([(2, 2), (3, 3)], (6, 5), (0, 0), [(1, 0, 0, 0.5), (0, 1, 0, 1.0)])
    frame = flat_frame(16, 16, (0, 0, 0), np.float32)
    out = renderer.render(frame, DisplayList((under, top)))
    # Pixel (4, 4): the first glyph samples texel (2, 2) = 200, the second texel (1, 1) = 255 (opaque green).
    np.testing.assert_allclose(out[4, 4], [0, 1, 0], atol=TOLERANCE)
    # Pixel (3, 3): first glyph texel (1, 1) = 255 at alpha 0.5, second glyph texel (0, 0) = 0.
    np.testing.assert_allclose(out[3, 3], [0.5, 0, 0.5], atol=TOLERANCE)


def test_frame_stays_untouched_where_coverage_is_zero(renderer):
    frame = flat_frame(12, 12, (0.3, 0.4, 0.5))
    layer = glyphs([(1, 1)], (6, 5), (0, 0), (1, 1, 1, 1))
    out = renderer.render(frame, DisplayList((layer,)))
    covered = np.zeros((12, 12), bool)
    covered[1:6, 1:7] = ATLAS.coverage > 0
    np.testing.assert_array_equal(out[~covered], frame[~covered])
    assert np.all(out[covered].astype(int) >= frame[covered].astype(int))


# ------------------------------------------------------------- the layer itself


def test_glyph_layer_checks_its_input():
    with pytest.raises(ValueError, match="glyph texels must lie inside the 6x5 atlas"):
        glyphs([(0, 0)], (4, 4), (3, 0), (1, 1, 1, 1))
    with pytest.raises(ValueError, match="glyph sizes must be >= 0"):
        glyphs([(0, 0)], (-1, 4), (0, 0), (1, 1, 1, 1))
    with pytest.raises(ValueError, match="glyph color must be RGBA values in 0..1"):
        glyphs([(0, 0)], (1, 1), (0, 0), (2, 1, 1, 1))
    with pytest.raises(TypeError, match="GlyphAtlas"):
        Glyphs(np.zeros((1, 2)), np.ones((1, 2)), np.zeros((1, 2)), np.ones((1, 4)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match=r"glyph atlas coverage must have shape \[H, W\]"):
        GlyphAtlas(np.zeros((2, 2, 2)))


def test_atlas_is_a_read_only_copy_with_its_own_key():
    source = np.full((2, 3), 9, np.uint8)
    first, second = GlyphAtlas(source), GlyphAtlas(source)
    source[:] = 0
    assert first.coverage.sum() == 9 * 6 and not first.coverage.flags.writeable
    assert first.key != second.key


def test_gpu_scene_gathers_each_atlas_once_and_indexes_it():
    """The host side of the GPU scene (no GPU needed): kind 2 runs, one table row per glyph, atlas indices."""
    other = GlyphAtlas(np.ones((3, 3), np.uint8))
    a = glyphs([(0, 0), (5, 5)], (2, 2), (0, 0), (1, 1, 1, 1))
    b = glyphs([(1, 1)], (2, 2), (0, 0), (1, 0, 0, 1), atlas=other)
    lists = [DisplayList((a, boxes([[4, 4]], [[2, 2]]), b)), DisplayList((b, a))]
    layers = HostLayers.gather(lists)
    assert [atlas.key for atlas in layers.atlases] == [ATLAS.key, other.key]
    np.testing.assert_array_equal(layers.glyphs["glyph_atlas"], [0, 0, 1, 1, 0, 0])
    np.testing.assert_array_equal(layers.runs, [[0, 2, 0, 2], [0, 1, 0, 1], [0, 2, 2, 1], [1, 2, 3, 1],
                                                [1, 2, 4, 2]])
    np.testing.assert_array_equal(layers.glyphs["glyph_origin"], [[0, 0], [5, 5], [1, 1], [1, 1], [0, 0], [5, 5]])
    assert layers.glyphs["glyph_color"].shape == (6, 4) and layers.glyphs["glyph_atlas"].dtype == np.int32


@pytest.mark.gpu
def test_gpu_batch_of_two_atlases_matches_cpu_and_uploads_each_atlas_once(cpu_renderer, monkeypatch):
    """Frames whose labels use two fonts sizes (two atlases) in one scene; a second render reuses the uploads."""
    from scenes import assert_parity, textured_frame
    from trackoverlay.utils.draw.labels import label_overlay
    from trackoverlay.utils.draw.styles import LabelStyle
    from trackoverlay.utils.raster import gpu as gpu_module
    from trackoverlay.utils.raster.gpu import GpuRenderer

    path = np.float32([[[20, 20], [70, 50]], [[24, 22], [66, 48]]])
    visible = np.ones((2, 2), bool)
    small = label_overlay(path, visible, LabelStyle(size=11, text="coordinates"), bounds=(96, 64))
    large = label_overlay(path, visible, LabelStyle(size=23, placement="below", opacity=0.7), bounds=(96, 64))
    overlays = [small[0] + large[0], large[1] + small[1]]
    frames = np.stack([textured_frame(64, 96)] * 2)
    uploads = []
    real = gpu_module.device_atlas
    monkeypatch.setattr(gpu_module, "device_atlas", lambda atlas: uploads.append(atlas.key) or real(atlas))
    renderer = GpuRenderer(workers=1)
    try:
        for _ in range(2):
            out = renderer.render_frames(frames, overlays, np.empty_like(frames))
            for index in range(2):
                assert_parity(out[index], cpu_renderer.render(frames[index], overlays[index]))
    finally:
        renderer.close()
    assert sorted(uploads) == sorted({layer.atlas.key for layer in overlays[0].layers if isinstance(layer, Glyphs)})
