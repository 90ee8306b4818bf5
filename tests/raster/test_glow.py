"""Glow: the off switch, exact halo values, bounds, the sparse glow layer and bad input, on every backend.

Tolerance: the CPU matches closed-form halos to 1e-5 (float32 arithmetic).
The GPU keeps the dense layer and its row blur in half precision (11
significant bits) and must match the same values, and the CPU's pictures,
within 2/255 per channel, the renderers' parity bound (``PARITY``).
"""

import math

import numpy as np
import pytest
from scenes import PARITY, SCENES, assert_parity, boxes, flat_frame, polylines, textured_frame
from trackoverlay.utils.draw.display_list import DisplayList
from trackoverlay.utils.raster.batch import render_batch, render_layers
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.raster.glow import Glow, gaussian_weights, glow_layer
from trackoverlay.utils.raster.layer import SparseLayer, blend_pixels

CPU_TOLERANCE = 1e-5
TOLERANCE = {"cpu": CPU_TOLERANCE, "gpu": PARITY}


def gaussian(radius: float) -> np.ndarray:
    """The expected weights, written out here: exp(-x^2 / (2 sigma^2)) normalised, sigma = radius / 3, |x| <= ceil(radius)."""
    reach = math.ceil(radius)
    offsets = np.arange(-reach, reach + 1, dtype=np.float64)
    weights = np.exp(-offsets**2 / (2 * (radius / 3) ** 2))
    return weights / weights.sum()


# ------------------------------------------------------------------ the off switch


@pytest.mark.parametrize("glow", [None, Glow(), Glow(radius=5.0, strength=0.0), Glow(radius=0.0, strength=3.0)],
                         ids=["none", "default", "strength-0", "radius-0"])
@pytest.mark.parametrize("scene", ["seed_scene", "float32_frame"])
def test_glow_that_is_off_is_bit_identical_to_no_glow(renderer, scene, glow):
    frame, display_list = SCENES[scene]()
    np.testing.assert_array_equal(renderer.render(frame, display_list, glow=glow), renderer.render(frame, display_list))
    for with_glow, without in zip(renderer.render_layer(display_list, *frame.shape[:2], glow=glow),
                                  renderer.render_layer(display_list, *frame.shape[:2]), strict=True):
        np.testing.assert_array_equal(with_glow, without)


def test_glow_layer_is_the_layer_itself_when_off_or_empty():
    layer = SparseLayer(4, 5, np.array([7]), np.full((3, 1), 0.5, np.float32), np.ones(1, np.float32))
    assert glow_layer(layer, None) is layer and glow_layer(layer, Glow(radius=3.0)) is layer
    empty = SparseLayer.empty(4, 5)
    assert glow_layer(empty, Glow(radius=3.0, strength=1.0)) is empty


# ------------------------------------------------------------------ exact values


def test_gaussian_weights_are_the_normalised_gaussian():
    for radius in (0.4, 3.0, 6.5, 32.4):
        weights = gaussian_weights(radius)
        assert weights.dtype == np.float32 and len(weights) == 2 * math.ceil(radius) + 1
        np.testing.assert_allclose(weights, gaussian(radius), rtol=1e-6, atol=1e-9)
        np.testing.assert_array_equal(weights, weights[::-1])
    np.testing.assert_array_equal(gaussian_weights(0.0), [1.0])


COLOR = np.array([1.0, 0.5, 0.25])
LINE_ALPHA = 0.8


def line_scene(height=40, width=80):
    """A 1 px line filling pixel row 20 from edge to edge (alpha 0.8) on a black float32 frame."""
    line = polylines([[(-20, 20.5), (width + 20, 20.5)]], width=1.0, color=(*COLOR, LINE_ALPHA))
    return np.zeros((height, width, 3), np.float32), DisplayList((line,))


def test_halo_beside_a_line_is_the_gaussian_at_that_distance(renderer):
    frame, display_list = line_scene()
    glow = Glow(radius=6.0, strength=1.5)
    weights = gaussian(6.0)  # reach 6: rows 14..26 glow, nothing beyond
    alpha = np.zeros(40)
    for k in range(-6, 7):
        alpha[20 + k] = glow.strength * LINE_ALPHA * weights[6 + k]
    alpha[20] = LINE_ALPHA + (1 - LINE_ALPHA) * alpha[20]  # the line over its own halo
    middle = slice(6, 74)  # columns whose row blur sees only the line (not the frame's edge)
    out = renderer.render(frame, display_list, glow=glow)  # black frame: out = premultiplied colour
    tolerance = TOLERANCE[renderer.name]
    np.testing.assert_allclose(out[:, middle], (alpha[:, None] * COLOR)[:, None].repeat(68, axis=1), rtol=0,
                               atol=tolerance)
    _, layer_alpha = renderer.render_layer(display_list, 40, 80, glow=glow)
    np.testing.assert_allclose(layer_alpha[:, middle], np.repeat(alpha[:, None], 68, axis=1), rtol=0, atol=tolerance)
    assert not layer_alpha[:14].any() and not layer_alpha[27:].any()  # exactly nothing past the reach


def test_halo_at_the_frame_edge_sees_nothing_beyond_it(renderer):
    _, display_list = line_scene()
    glow = Glow(radius=6.0, strength=1.5)
    weights = gaussian(6.0)
    _, alpha = renderer.render_layer(display_list, 40, 80, glow=glow)
    inside = weights[6:].sum()  # at column 0 the row blur only finds the line's pixels at columns 0..6
    for k in (1, 3, 6):
        assert alpha[20 + k, 0] == pytest.approx(glow.strength * LINE_ALPHA * weights[6 + k] * inside,
                                                 abs=TOLERANCE[renderer.name])
        assert alpha[20 + k, 79] == pytest.approx(alpha[20 + k, 0], abs=TOLERANCE[renderer.name])


def test_glow_of_one_dot_is_the_outer_product_and_keeps_its_energy():
    width, height, dot = 30, 40, (15, 20)  # x, y
    layer = SparseLayer(height, width, np.array([dot[1] * width + dot[0]]),
                        np.array([[0.5], [0.25], [0.1]], np.float32), np.array([0.5], np.float32))
    glow = Glow(radius=4.5, strength=1.2)
    result = glow_layer(layer, glow)
    weights = gaussian(4.5)  # reach 5
    expected = np.zeros((height, width))
    expected[15:26, 10:21] = glow.strength * 0.5 * np.outer(weights, weights)
    expected[dot[1], dot[0]] = 0.5 + 0.5 * expected[dot[1], dot[0]]
    got = np.zeros(height * width)
    got[result.pixels] = result.alpha
    np.testing.assert_allclose(got.reshape(height, width), expected, atol=CPU_TOLERANCE)
    assert len(result.pixels) == 11 * 11 and np.all(np.diff(result.pixels) > 0)
    # every halo pixel carries the dot's colour: premultiplied colour / alpha is constant outside the dot
    halo = result.pixels != layer.pixels[0]
    np.testing.assert_allclose(result.color[:, halo] / result.alpha[halo],
                               np.broadcast_to([[1.0], [0.5], [0.2]], (3, 120)), rtol=1e-5)
    # energy: the halo holds strength x the dot's alpha, less what the dot covers of its own halo
    w0 = weights[5] ** 2
    assert result.alpha.sum() == pytest.approx(0.5 + glow.strength * 0.5 * (1 - w0) + 0.5 * glow.strength * 0.5 * w0,
                                               abs=1e-5)


def test_glow_of_a_dot_in_the_corner_loses_what_falls_outside():
    layer = SparseLayer(20, 20, np.array([0]), np.array([[0.0], [0.0], [1.0]], np.float32),
                        np.array([1.0], np.float32))
    result = glow_layer(layer, Glow(radius=3.0, strength=0.5))
    weights = gaussian(3.0)
    inside = weights[3:].sum()  # in each direction, the centre and the side within the frame
    halo = 0.5 * (inside**2 - weights[3] ** 2)  # all in-frame weights but the dot's own (hidden under it)
    assert result.alpha.sum() == pytest.approx(1.0 + halo, abs=1e-5)
    assert set(result.pixels) == {y * 20 + x for y in range(4) for x in range(4)}


def test_a_saturated_halo_is_capped_at_alpha_one_and_the_layer_stays_on_top(renderer):
    box_color = (0.2, 0.6, 1.0)
    display_list = DisplayList((boxes([[30, 25]], [[10, 8]], fill_color=(*box_color, 1.0)),))
    glow = Glow(radius=10.0, strength=20.0)
    rgb, alpha = renderer.render_layer(display_list, 50, 60, glow=glow)
    tolerance = TOLERANCE[renderer.name]
    assert alpha.max() <= 1.0 + 1e-6 and rgb.max() <= 1.0 + 1e-6
    np.testing.assert_allclose(rgb[18:32, 21:39], np.broadcast_to(box_color, (14, 18, 3)), atol=tolerance)
    np.testing.assert_allclose(alpha[25, 41:44], 1.0, atol=tolerance)  # 1..3 px outside the box: capped
    seen = alpha > 0.02
    np.testing.assert_allclose(rgb[seen], np.broadcast_to(box_color, rgb[seen].shape), atol=0.01)
    assert alpha[25, 49] > 0 and alpha[25, 50] == 0 and alpha[0, 0] == 0  # the box ends at column 39; reach 10


def test_glow_never_lowers_the_layer_and_keeps_premultiplied_colours_valid():
    frame, display_list = SCENES["glow_lines"]()
    renderer = CpuRenderer(workers=1)
    layer = renderer.rasterize(display_list, *frame.shape[:2])
    glowing = glow_layer(layer, Glow(radius=6.0, strength=4.0))
    assert np.all(np.diff(glowing.pixels) > 0) and np.isin(layer.pixels, glowing.pixels).all()
    assert np.all(glowing.alpha[np.searchsorted(glowing.pixels, layer.pixels)] >= layer.alpha - 1e-7)
    assert glowing.alpha.max() <= 1.0 + 1e-6 and np.all(glowing.color <= glowing.alpha + 1e-6)
    assert glowing.color.min() >= 0.0 and len(glowing.pixels) > 2 * len(layer.pixels)


# ------------------------------------------------------------------ the sparse glow layer composites like render


@pytest.mark.parametrize("scene", ["glow_lines", "glow_saturated"])
def test_the_sparse_glow_layer_composites_like_render(cpu_renderer, scene):
    from scenes import RENDER_OPTIONS

    frame, display_list = SCENES[scene]()
    glow = RENDER_OPTIONS[scene]["glow"]
    out = frame.copy()
    blend_pixels(out, glow_layer(cpu_renderer.rasterize(display_list, *frame.shape[:2]), glow))
    np.testing.assert_array_equal(out, cpu_renderer.render(frame, display_list, glow=glow))
    np.testing.assert_array_equal(out, cpu_renderer.render(frame, display_list, glow=glow, out=np.empty_like(frame)))


def test_batches_and_layers_carry_the_glow(renderer):
    frame, display_list = SCENES["glow_lines"]()
    glow = Glow(radius=5.0, strength=2.0)
    frames = np.stack([frame, frame[::-1].copy()])
    batch = render_batch(frames, [display_list, DisplayList()], renderer, with_layer=True, glow=glow)
    for index in range(2):
        single = [display_list, DisplayList()][index]
        np.testing.assert_array_equal(batch.frames[index], renderer.render(frames[index], single, glow=glow))
        rgb, alpha = renderer.render_layer(single, *frame.shape[:2], glow=glow)
        np.testing.assert_array_equal(batch.layer_alpha[index], alpha)
        np.testing.assert_array_equal(batch.layer_rgb[index], rgb)
    rgb, alpha = render_layers([display_list], 2, *frame.shape[:2], renderer, glow=glow)
    np.testing.assert_array_equal(alpha[1], batch.layer_alpha[0])
    np.testing.assert_array_equal(batch.frames[1], frames[1])  # an empty overlay glows nowhere


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("options, message", [
    ({"radius": -1.0}, r"glow radius \(pixels\) must be a number in \[0, 1000\], got -1"),
    ({"radius": 1000.5}, r"glow radius \(pixels\) must be a number in \[0, 1000\], got 1000.5"),
    ({"radius": float("nan")}, r"glow radius \(pixels\) must be a number"),
    ({"radius": "3"}, r"glow radius \(pixels\) must be a number in \[0, 1000\], got '3'"),
    ({"strength": 20.5}, r"glow strength must be a number in \[0, 20\], got 20.5"),
    ({"strength": True}, r"glow strength must be a number in \[0, 20\], got True"),
])
def test_bad_glow_settings_are_refused_with_their_range(options, message):
    with pytest.raises(ValueError, match=message):
        Glow(**options)


def test_a_glow_that_is_not_a_glow_is_refused(renderer):
    frame, display_list = SCENES["glow_lines"]()
    with pytest.raises(TypeError, match="glow must be a Glow"):
        renderer.render(frame, display_list, glow=3.0)
    with pytest.raises(TypeError, match="glow must be a Glow"):
        render_batch(frame[None], [display_list], renderer, glow={"radius": 3.0})


# ------------------------------------------------------------------ GPU only


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("chunk_frames", [1, 3])
def test_gpu_glow_batches_match_the_cpu_on_host_and_device_frames(cpu_renderer, gpu_renderer, monkeypatch, dtype,
                                                                    chunk_frames):
    import cupy
    from trackoverlay.utils.raster import gpu as gpu_module

    glow = Glow(radius=7.0, strength=3.0)
    rng = np.random.default_rng(31)
    scenes = [SCENES[name]()[1] for name in ("glow_lines", "seed_scene", "knn_straight", "rounded_boxes")]
    frames = rng.integers(0, 256, (4, 90, 120, 3), dtype=np.uint8)
    frames = frames if dtype == np.uint8 else (frames / 255).astype(np.float32)
    monkeypatch.setattr(gpu_module, "HOST_CHUNK_BYTES", frames[0].nbytes * chunk_frames)
    monkeypatch.setattr(gpu_module, "DEVICE_CHUNK_BYTES", frames[0].nbytes * chunk_frames)
    want = render_batch(frames, scenes, cpu_renderer, with_layer=True, glow=glow)
    host = render_batch(frames, scenes, gpu_renderer, with_layer=True, glow=glow)
    assert_parity(host.frames, want.frames)
    assert np.abs(host.layer_alpha - want.layer_alpha).max() <= PARITY
    premultiplied = [batch.layer_rgb * batch.layer_alpha[..., None] for batch in (host, want)]
    assert np.abs(premultiplied[0] - premultiplied[1]).max() <= PARITY
    device = render_batch(cupy.asarray(frames), scenes, gpu_renderer, glow=glow).frames
    assert_parity(device.get(), want.frames)
    repeated = render_batch(frames[:1], scenes[:1] * 3, gpu_renderer, glow=glow).frames  # one frame under all
    assert_parity(repeated, np.repeat(want.frames[:1], 3, axis=0))


@pytest.mark.gpu
def test_gpu_glow_at_the_largest_radius_matches_the_cpu(cpu_renderer, gpu_renderer):
    """Radius 1000: the row pass's shared memory holds 256 + 2000 pixels and 2001 weights (44 KB)."""
    frame = textured_frame(60, 1300)
    display_list = DisplayList((polylines([[(10, 30), (1290, 25)]], width=6.0, color=(1, 0.8, 0.2, 1)),))
    glow = Glow(radius=1000.0, strength=20.0)
    assert_parity(gpu_renderer.render(frame, display_list, glow=glow),
                  cpu_renderer.render(frame, display_list, glow=glow))


@pytest.mark.gpu
def test_gpu_glow_redraws_a_resident_frame_whose_keys_overflowed(cpu_renderer):
    import cupy
    from trackoverlay.utils.raster.gpu import GpuRenderer

    frame, display_list = SCENES["glow_lines"]()
    glow = Glow(radius=6.0, strength=2.5)
    renderer = GpuRenderer(workers=1)
    renderer._capacity = 8  # the unchecked binning overflows; the frame is drawn again
    try:
        got = renderer.render_device(cupy.asarray(frame), renderer.upload(display_list), glow=glow).get()
    finally:
        renderer.close()
    assert renderer._capacity > 8
    assert_parity(got, cpu_renderer.render(frame, display_list, glow=glow))


@pytest.mark.gpu
def test_gpu_glow_on_an_empty_scene_leaves_the_frame(gpu_renderer):
    frame = flat_frame(50, 70, (0.2, 0.4, 0.6))
    np.testing.assert_array_equal(gpu_renderer.render(frame, DisplayList(), glow=Glow(radius=5.0, strength=3.0)),
                                  frame)
