"""Small deterministic render scenes shared by the golden and backend-parity tests.

``SCENES`` maps a scene name to a callable returning ``(frame, display_list)``:
a fresh frame (uint8 or float32 ``[H, W, 3]``, 64x48 .. 160x120 pixels) and
the :class:`DisplayList` to draw over it. Every call builds new arrays from
fixed seeds, so callers may do anything with them.

``RENDER_OPTIONS`` holds the render keywords (a glow) of the scenes that
need them: render a scene with ``renderer.render(frame, display_list,
**RENDER_OPTIONS.get(name, {}))``.

``polylines`` and ``boxes`` build primitive batches from plain numbers for
hand-written tests.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from functools import lru_cache
from pathlib import Path

import numpy as np
from trackoverlay.utils.draw.display_list import Boxes, DisplayList, Polylines
from trackoverlay.utils.draw.labels import label_overlay
from trackoverlay.utils.draw.overlays import box_overlay, box_primitives, link_overlay, link_polylines, trail_overlay
from trackoverlay.utils.draw.styles import BoxStyle, LabelStyle, LineStyle, TrailStyle
from trackoverlay.utils.graph.neighbours import GraphParams, build_edges
from trackoverlay.utils.raster.glow import Glow
from trackoverlay.utils.tracks.demo import CANVAS_RGB, DemoClip
from trackoverlay.utils.video.stream import FramePoints, OverlayBuilder

CLI_PATH = Path(__file__).resolve().parents[1] / "examples" / "overlay_video.py"


def polylines(paths, width=1.0, color=(1, 1, 1, 1), color_end=None, dash=(0.0, 0.0),
              dash_round=False) -> Polylines:
    """A batch of polylines (one per vertex list in ``paths``) sharing one style."""
    count = len(paths)
    vertices = np.concatenate([np.asarray(p, np.float32).reshape(-1, 2) for p in paths])
    offsets = np.r_[0, np.cumsum([len(p) for p in paths])]
    start = np.tile(np.asarray(color, np.float32), (count, 1))
    end = start if color_end is None else np.tile(np.asarray(color_end, np.float32), (count, 1))
    return Polylines(vertices, offsets, np.full(count, width, np.float32), start, end,
                     np.tile(np.asarray(dash, np.float32), (count, 1)), np.full(count, dash_round))


def boxes(centers, half_sizes, radius=0.0, stroke_width=0.0, stroke_color=(1, 1, 1, 1),
          fill_color=(0, 0, 0, 0), bracket=0.0) -> Boxes:
    """A batch of boxes at ``centers`` [Q, 2] with ``half_sizes`` [Q, 2]; scalars broadcast."""
    centers = np.asarray(centers, np.float32).reshape(-1, 2)
    count = len(centers)

    def per_box(value, tail=()):
        return np.broadcast_to(np.asarray(value, np.float32), (count,) + tail)

    return Boxes(centers, per_box(half_sizes, (2,)), per_box(radius), per_box(stroke_width),
                 per_box(stroke_color, (4,)), per_box(fill_color, (4,)), per_box(bracket))


def _as_frame(rgb: np.ndarray, dtype) -> np.ndarray:
    """A new ``dtype`` frame from float RGB in 0..1 (uint8: rounded to nearest)."""
    return np.round(rgb * 255).astype(np.uint8) if dtype == np.uint8 else rgb.astype(np.float32)


def flat_frame(height, width, rgb, dtype=np.uint8) -> np.ndarray:
    """A frame of one colour (``rgb`` in 0..1)."""
    return _as_frame(np.broadcast_to(np.asarray(rgb, np.float32), (height, width, 3)), dtype)


def textured_frame(height, width, dtype=np.uint8) -> np.ndarray:
    """A smooth, footage-like frame: colour ramps and soft blobs (compresses well as PNG)."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    u, v = x / width, y / height
    blobs = 0.5 + 0.5 * np.sin(6.0 * u + 1.3) * np.cos(5.0 * v - 0.4)
    frame = np.stack([0.15 + 0.35 * u * blobs, 0.12 + 0.3 * v, 0.2 + 0.25 * blobs], axis=-1)
    return _as_frame(frame, dtype)


def random_points(count, height, width, seed, margin=6.0) -> np.ndarray:
    """``count`` float32 points uniform inside the canvas, ``margin`` px from its border."""
    rng = np.random.default_rng(seed)
    return rng.uniform((margin, margin), (width - margin, height - margin), (count, 2)).astype(np.float32)


def knn_links(points, style: LineStyle, k=3) -> Polylines:
    """Curves of ``style`` linking each point to its ``k`` nearest neighbours."""
    edges, _ = build_edges(points, GraphParams(mode="knn", k=k))
    return link_polylines(points, np.arange(len(points)), edges, style)


def knn_straight():
    """Straight 1.5 px kNN links (k=3) on a flat dark frame."""
    points = random_points(14, 90, 120, seed=1)
    style = LineStyle(width=1.5, color="#FFFFFF", opacity=0.9, curve="straight")
    return flat_frame(90, 120, (0.08, 0.1, 0.14)), DisplayList((knn_links(points, style),))


def bezier_curves():
    """Quadratic (cyan), cubic (orange) and s-curve (green) links between the same pairs."""
    starts = np.array([[10, 8], [12, 34], [10, 60]], np.float32)
    ends = starts + np.array([[96, 8], [100, -6], [98, 4]], np.float32)
    points = np.concatenate([starts, ends])
    edges = np.array([[0, 3], [1, 4], [2, 5]])
    layers = tuple(link_polylines(points, np.arange(6), edges,
                                  LineStyle(width=2.0, color=color, curve=curve, bend=0.25, bend_side="left"))
                   for curve, color in (("quadratic", "#00E5FF"), ("cubic", "#FF8A00"), ("s_curve", "#76FF03")))
    return flat_frame(90, 120, (0.05, 0.05, 0.08)), DisplayList(layers)


def dashed_dotted():
    """Dashed quadratic kNN curves under dotted straight ones."""
    points = random_points(10, 90, 120, seed=3)
    dashed = LineStyle(width=2.0, color="#FFD600", pattern="dashed", dash_length=6, gap_length=4,
                       curve="quadratic", bend=0.2)
    dotted = LineStyle(width=3.0, color="#FF4081", pattern="dotted", gap_length=6, curve="straight")
    return flat_frame(90, 120, (0.1, 0.1, 0.1)), DisplayList((knn_links(points, dashed),
                                                              knn_links(points, dotted, k=1)))


def track_gradient():
    """3 px quadratic links coloured by track, fading between the two tracks' colours."""
    points = random_points(12, 90, 120, seed=4)
    style = LineStyle(width=3.0, color_mode="track", gradient=True, curve="quadratic", bend=0.3)
    return flat_frame(90, 120, (0.12, 0.12, 0.12)), DisplayList((knn_links(points, style, k=2),))


def rounded_boxes():
    """Filled rounded boxes of several sizes and roundness, two cut by the frame's border."""
    centers = np.array([[20, 20], [58, 24], [100, 30], [30, 68], [80, 70], [117, 80], [2, 45]], np.float32)
    sizes = np.array([[24, 18], [30, 30], [20, 40], [36, 22], [26, 26], [24, 20], [18, 30]], np.float32)
    layers = tuple(box_primitives(centers[part], sizes[part], np.arange(7)[part],
                                  BoxStyle(stroke_width=2.0, roundness=roundness, fill_opacity=0.35, color_mode=mode))
                   for part, roundness, mode in ((slice(0, 4), 0.5, "track"), (slice(4, 7), 1.0, "single")))
    return flat_frame(90, 120, (0.15, 0.17, 0.2)), DisplayList(layers)


def corner_brackets():
    """Corner-bracket boxes with a faint fill, thin and thick strokes."""
    centers = np.array([[22, 22], [60, 24], [98, 22], [22, 64], [60, 66], [98, 64]], np.float32)
    thin = box_primitives(centers[:3], np.full((3, 2), 22, np.float32), np.arange(3),
                          BoxStyle(shape="brackets", stroke_width=1.0, fill_opacity=0.1, bracket_length=0.25))
    thick = box_primitives(centers[3:], np.array([[26, 18], [18, 26], [30, 30]], np.float32), np.arange(3, 6),
                           BoxStyle(shape="brackets", stroke_width=3.0, fill_opacity=0.0, roundness=0.4,
                                    color_mode="track", bracket_length=0.3))
    return flat_frame(90, 120, (0.2, 0.2, 0.22)), DisplayList((thin, thick))


def seed_scene():
    """The product look in miniature: kNN curves under boxes on a textured frame."""
    points = random_points(12, 90, 120, seed=7, margin=8)
    ids = np.arange(len(points))
    lines = knn_links(points, LineStyle(width=1.5, color_mode="track", gradient=True, opacity=0.85,
                                        curve="quadratic", bend=0.25))
    sizes = np.random.default_rng(8).uniform(7, 14, (len(points), 2)).astype(np.float32)
    marks = box_primitives(points, sizes, ids, BoxStyle(stroke_width=1.5, roundness=0.35, fill_opacity=0.2))
    return textured_frame(90, 120), DisplayList((lines, marks))


def float32_frame():
    """Overlapping semi-transparent lines and boxes on a float32 frame."""
    lines = polylines([[(4, 8), (60, 40)], [(6, 40), (60, 6)]], width=5.0,
                      color=(1.0, 0.2, 0.1, 0.6), color_end=(0.1, 0.4, 1.0, 0.6))
    marks = boxes([[22, 24], [44, 20]], [[14, 10], [12, 14]], radius=5.0, stroke_width=2.0,
                  stroke_color=(1, 1, 1, 0.7), fill_color=(0.0, 1.0, 0.6, 0.3))
    return textured_frame(48, 64, np.float32), DisplayList((lines, marks))


def fading_tracks():
    """Tracks mid-fade (track_opacity 1/4 .. 1): boxes fade, links fade toward a fading end."""
    points = random_points(10, 90, 120, seed=11, margin=10)[None]
    visible = np.ones((1, 10), bool)
    opacity = np.array([[1, 1, 0.25, 1, 0.5, 1, 0.75, 1, 1, 0.25]], np.float32)
    lines = link_overlay(points, visible, GraphParams(k=2), LineStyle(width=2.0, color="#00E5FF", curve="straight"),
                         opacity=opacity)[0]
    marks = box_overlay(points, visible, BoxStyle(size=14, stroke_width=1.5, fill_opacity=0.3), opacity=opacity)[0]
    return textured_frame(90, 120), lines + marks


def trail_tracks(frames=40):
    """Six tracks over ``frames`` frames on a 120x90 canvas: three circling, one wavy (hidden in frames
    33-34), one straight that ends at frame 35, one jittery straight one; track_opacity fades track 2."""
    t = np.arange(frames, dtype=np.float64)[:, None]
    angle = 0.12 * t + np.array([0.0, 2.1, 4.2])
    circling = np.stack([60 + 30 * np.cos(angle), 45 + 28 * np.sin(angle)], axis=-1)
    wavy = np.stack([5 + 2.5 * t[:, 0], 14 + 6 * np.sin(0.4 * t[:, 0])], axis=-1)
    straight = np.stack([118 - 2.0 * t[:, 0], 84 - 1.2 * t[:, 0]], axis=-1)
    jitter = np.random.default_rng(12).normal(0.0, 0.8, (frames, 2))
    shaky = np.stack([10 + 1.8 * t[:, 0], 80 - 0.9 * t[:, 0]], axis=-1) + jitter
    path = np.concatenate([circling, wavy[:, None], straight[:, None], shaky[:, None]], axis=1).astype(np.float32)
    visible = np.ones(path.shape[:2], bool)
    visible[33:35, 3] = False
    visible[36:, 4] = False
    opacity = np.ones(path.shape[:2], np.float32)
    opacity[:, 2] = np.linspace(1.0, 0.3, frames)
    return path, visible, opacity


def trails():
    """The last frame of :func:`trail_tracks`' trails (16 frames, tapered, eased fade, smoothed), track colours."""
    path, visible, opacity = trail_tracks()
    style = TrailStyle(length=16, width=4.0, taper=0.8, fade=1.5, smoothing=0.5, color_mode="track", opacity=0.9)
    return textured_frame(90, 120), trail_overlay(path, visible, style, opacity)[-1]
def labels_12px():
    """12 px labels (DejaVu Sans) in every placement around boxes, on plates, with Greek and Cyrillic,
    three of them pushed back inside the frame at its edges."""
    points = np.array([[[30, 30], [88, 26], [26, 70], [84, 66], [3, 4], [117, 88]]], np.float32)
    visible = np.ones((1, 6), bool)
    marks = box_overlay(points, visible, BoxStyle(size=14, stroke_width=1.0, fill_opacity=0.0))[0]
    layers = marks
    for columns, placement, template in (((0, 4), "top_left", "#{id:02d}"), ((1, 5), "bottom_right", "{x:.0f},{y:.0f}"),
                                         ((2,), "below", "Ωμέγα"), ((3,), "right", "Жук")):
        shown = np.zeros_like(visible)
        shown[0, list(columns)] = True
        style = LabelStyle(text="format", format=template, size=12, box_size=14, margin=2, placement=placement,
                           plate_padding=2, color_mode="track" if placement == "below" else "single")
        layers = layers + label_overlay(points, shown, style, bounds=(120, 90))[0]
    return textured_frame(90, 120), layers


def labels_40px():
    """40 px glyphs: a plated label with an outline, and the same glyphs off the pixel grid (bilinear samples)."""
    points = np.array([[[56, 34]]], np.float32)
    style = LabelStyle(text="format", format="Ag7ж", size=40, color="#FFD600", plate_stroke=1.5,
                       plate_stroke_color="#00E5FF", placement="center")
    label = label_overlay(points, np.ones((1, 1), bool), style, bounds=(160, 120))[0]
    plate, glyphs = label.layers
    moved = dataclasses.replace(glyphs, origin=glyphs.origin + np.float32([9.37, 52.61]),
                                color=np.tile(np.float32([1.0, 0.3, 0.5, 0.8]), (glyphs.count, 1)))
    return flat_frame(120, 160, (0.1, 0.12, 0.16)), DisplayList((plate, glyphs, moved))


@lru_cache(maxsize=1)
def overlay_video_cli():
    """examples/overlay_video.py as a module."""
    spec = importlib.util.spec_from_file_location("overlay_video_cli", CLI_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cli_look(width: int, height: int) -> DisplayList:
    """The CLI's default look (no size options) over its blank canvas's dots, at ``width`` x ``height``."""
    cli = overlay_video_cli()
    spec = cli.overlay_spec(cli.build_parser().parse_args(["--size", f"{width}x{height}"]), height)
    clip = DemoClip(width, height, frame_count=1)
    return OverlayBuilder(spec)(FramePoints(clip.positions(0), np.ones(clip.dots, bool)))


def shifted(display_list: DisplayList, x: float, y: float) -> DisplayList:
    """``display_list`` moved by (-x, -y): what a crop whose corner is at (x, y) shows."""
    offset = np.array([x, y], np.float32)
    return DisplayList(tuple(
        dataclasses.replace(layer, vertices=layer.vertices - offset) if isinstance(layer, Polylines)
        else dataclasses.replace(layer, center=layer.center - offset) for layer in display_list.layers))


def cli_look_640x360():
    """The CLI's default look at 640x360: a 160x120 crop of the canvas."""
    return flat_frame(120, 160, np.array(CANVAS_RGB) / 255.0), shifted(cli_look(640, 360), 240, 120)


def cli_look_3840x2160():
    """The CLI's default look at 4K: a 160x120 crop around the dot nearest the centre (sizes relative to
    the frame as at 640x360, so one box fills much of it)."""
    dots = DemoClip(3840, 2160, frame_count=1).positions(0)
    x, y = dots[np.argmin(np.hypot(*(dots - [1920, 1080]).T))]
    return flat_frame(120, 160, np.array(CANVAS_RGB) / 255.0), shifted(cli_look(3840, 2160), x - 80, y - 60)


def glow_lines():
    """Track-coloured curves and hollow boxes on a dark frame, glowing (radius 6 px, strength 2.5)."""
    points = random_points(12, 90, 120, seed=12, margin=10)
    lines = knn_links(points, LineStyle(width=1.5, color_mode="track", opacity=0.9, curve="quadratic", bend=0.25), k=2)
    marks = box_primitives(points, np.full((12, 2), 9, np.float32), np.arange(12),
                           BoxStyle(stroke_width=1.0, fill_opacity=0.0, roundness=0.4))
    return flat_frame(90, 120, (0.03, 0.03, 0.06)), DisplayList((lines, marks))


def glow_saturated():
    """A thick line from beyond the border and a filled box on a float32 frame, glowing so hard (strength 8)
    that the halo's alpha is capped at 1 near them, and reaching the frame's border."""
    lines = polylines([[(-5, 10), (70, 40)]], width=4.0, color=(1.0, 0.3, 0.1, 1.0))
    marks = boxes([[48, 14]], [[10, 8]], radius=3.0, fill_color=(0.2, 0.6, 1.0, 0.9))
    return textured_frame(48, 64, np.float32), DisplayList((lines, marks))


SCENES = {function.__name__: function for function in (
    knn_straight, bezier_curves, dashed_dotted, track_gradient, rounded_boxes, corner_brackets,
    seed_scene, float32_frame, fading_tracks, cli_look_640x360, cli_look_3840x2160, trails, labels_12px,
    labels_40px, glow_lines, glow_saturated)}
RENDER_OPTIONS = {"glow_lines": {"glow": Glow(radius=6.0, strength=2.5)},
                  "glow_saturated": {"glow": Glow(radius=8.0, strength=8.0)}}


PARITY = 2 / 255
"""Largest difference per channel allowed between the GPU and CPU pictures."""


def as_dtype(frame, dtype):
    """A uint8 test frame as it is, or as float32 in 0..1."""
    return frame if dtype == np.uint8 else (frame / 255).astype(np.float32)


def assert_parity(got, want):
    """max |GPU - CPU| <= 2/255 per channel, for uint8 or float32 frames."""
    scale = 255 if want.dtype == np.uint8 else 1
    worst = np.abs(np.asarray(got, np.float32) - np.asarray(want, np.float32)).max() / scale
    assert worst <= PARITY, f"max |GPU - CPU| = {worst * 255:.2f}/255"
