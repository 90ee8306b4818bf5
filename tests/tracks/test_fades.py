"""Fades travel in the data: track_opacity scales boxes and links in the builders, nodes and the stream."""

import cv2
import numpy as np
import pytest
from scenes import cli_look
from trackoverlay.utils.draw.overlays import box_overlay, box_primitives, link_overlay, link_polylines
from trackoverlay.utils.draw.styles import BoxStyle, LineStyle
from trackoverlay.utils.graph.neighbours import GraphParams
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.tracks.demo import CANVAS_RGB
from trackoverlay.utils.video.stream import FramePoints, OverlayBuilder, OverlaySpec

POINTS = np.array([[20.0, 20.0], [60.0, 24.0], [40.0, 50.0]], np.float32)
OPACITY = np.array([1.0, 0.5, 0.25], np.float32)
BOX = BoxStyle(size=10.0, stroke_width=2.0, fill_opacity=0.4, opacity=0.8)
LINE = LineStyle(width=2.0, opacity=0.6, curve="straight")


@pytest.fixture(scope="module")
def renderer():
    cpu = CpuRenderer(workers=1)
    yield cpu
    cpu.close()


def test_box_alpha_is_scaled_by_opacity():
    plain = box_primitives(POINTS, np.full((3, 2), 10.0), np.arange(3), BOX)
    faded = box_primitives(POINTS, np.full((3, 2), 10.0), np.arange(3), BOX, OPACITY)
    np.testing.assert_allclose(faded.stroke_color[:, 3], plain.stroke_color[:, 3] * OPACITY)
    np.testing.assert_allclose(faded.fill_color[:, 3], plain.fill_color[:, 3] * OPACITY)
    np.testing.assert_array_equal(faded.stroke_color[:, :3], plain.stroke_color[:, :3])


def test_link_ends_fade_with_their_points():
    edges = np.array([[1, 0], [2, 1]])  # drawn from the lower track id: (0, 1) and (1, 2)
    faded = link_polylines(POINTS, np.arange(3), edges, LINE, OPACITY)
    np.testing.assert_allclose(faded.color_start[:, 3], [0.6 * 1.0, 0.6 * 0.5])
    np.testing.assert_allclose(faded.color_end[:, 3], [0.6 * 0.5, 0.6 * 0.25])


def test_track_builders_take_opacity_per_frame():
    path = np.stack([POINTS, POINTS + 1.0])
    visible = np.array([[True, True, True], [True, False, True]])
    opacity = np.stack([OPACITY, np.array([0.2, 0.0, 1.0], np.float32)])
    boxes = box_overlay(path, visible, BOX, opacity=opacity)
    np.testing.assert_allclose(boxes[1].layers[0].stroke_color[:, 3], [0.8 * 0.2, 0.8 * 1.0])
    links = link_overlay(path, visible, GraphParams(k=1), LINE, opacity=opacity)
    assert links[1].layers[0].count == 1
    np.testing.assert_allclose(links[1].layers[0].color_start[:, 3], [0.6 * 0.2])


def test_half_faded_box_draws_half_as_strongly(renderer):
    frame = np.zeros((40, 40, 3), np.float32)
    center = np.array([[20.0, 20.0]], np.float32)
    style = BoxStyle(size=16.0, stroke_width=3.0, fill_opacity=0.0, color="#FFFFFF")
    full = renderer.render(frame, box_overlay(center[None], np.ones((1, 1), bool), style)[0])
    half = renderer.render(frame, box_overlay(center[None], np.ones((1, 1), bool), style,
                                              opacity=np.full((1, 1), 0.5, np.float32))[0])
    stroke = full[:, :, 0] > 0.99  # fully covered stroke pixels
    assert stroke.sum() > 20
    np.testing.assert_allclose(half[stroke], 0.5, atol=1e-5)


def test_stream_builder_honours_opacity():
    spec = OverlaySpec(GraphParams(k=1), LINE, BOX)
    faded = OverlayBuilder(spec)(FramePoints(POINTS, np.ones(3, bool), opacity=OPACITY))
    plain = OverlayBuilder(spec)(FramePoints(POINTS, np.ones(3, bool)))
    lines, boxes = faded.layers
    np.testing.assert_allclose(boxes.stroke_color[:, 3], plain.layers[1].stroke_color[:, 3] * OPACITY)
    assert lines.color_start[:, 3].min() < plain.layers[0].color_start[:, 3].min()
    with pytest.raises(ValueError, match=r"opacity must have shape \[3\]"):
        FramePoints(POINTS, np.ones(3, bool), opacity=np.ones(2))


def test_nodes_pass_track_opacity_on():
    torch = pytest.importorskip("torch")
    from fake_comfy import WIDGET_TYPES, install_comfy_api

    install_comfy_api()
    from trackoverlay.nodes.overlays import BoxesNode, LineLinksNode

    def build(node, tracks):
        widgets = {item.id: item.default for item in node.GET_SCHEMA().inputs if issubclass(item.Parent, WIDGET_TYPES)}
        (overlay,) = node.PREPARE_CLASS_CLONE(None).execute(tracks=tracks, **widgets).args
        return overlay

    tracks = {"track_path": torch.from_numpy(POINTS[None].copy()),
              "track_visibility": torch.ones(1, 3, dtype=torch.bool),
              "track_opacity": torch.from_numpy(OPACITY[None].copy())}
    box_alpha = build(BoxesNode, tracks)[0].layers[0].stroke_color[:, 3]
    np.testing.assert_allclose(box_alpha / box_alpha[0], OPACITY)
    links = build(LineLinksNode, tracks)[0].layers[0]
    assert links.color_end[:, 3].min() < links.color_start[:, 3].max()


def test_cli_default_look_is_the_same_at_640x360_and_4k(renderer):
    small = renderer.render(np.full((360, 640, 3), CANVAS_RGB, np.uint8), cli_look(640, 360))
    large = renderer.render(np.full((2160, 3840, 3), CANVAS_RGB, np.uint8), cli_look(3840, 2160))
    reduced = cv2.resize(large, (640, 360), interpolation=cv2.INTER_AREA)
    difference = np.abs(reduced.astype(int) - small.astype(int))
    drawn = np.abs(small.astype(int) - CANVAS_RGB).max(axis=-1) > 8
    assert drawn.mean() > 0.03  # there is an overlay to compare
    assert difference.mean() < 1.0 and np.percentile(difference, 99) < 20
