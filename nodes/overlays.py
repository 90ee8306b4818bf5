"""Overlay builders: TRACKS -> TRACK_OVERLAY (link lines, boxes), and merging overlays."""

from __future__ import annotations

import numpy as np

from ..utils.core.checks import broadcast_length
from ..utils.draw.curves import BEND_SIDES, CURVE_KINDS
from ..utils.draw.display_list import DisplayList, merge_sequences
from ..utils.draw.overlays import box_overlay, box_primitives, link_overlay
from ..utils.draw.styles import BOX_SHAPES, COLOR_MODES, LINE_PATTERNS, SIZE_MODES, BoxStyle, LineStyle
from ..utils.graph.neighbours import MODES, GraphParams
from ..utils.tracks.contract import normalize_tracks
from .adapters import bounding_boxes, engine_params, overlay_list, unit_scale
from .widgets import (
    CATEGORY,
    OVERLAY,
    boolean,
    color,
    combo,
    defaults,
    float_input,
    int_input,
    reference_input,
    socket,
    units_input,
)

_GRAPH = defaults(GraphParams)
_LINE = defaults(LineStyle)
_BOX = defaults(BoxStyle)
_SIZE = ", in 'units'"
_OVERLAY_OUT = "One display list per frame; connect to Render (or Merge)."


def _tracks_input() -> tuple:
    return socket("TRACKS", "The tracks to draw (from Detect Tracks, Tracks From Mask/JSON, or core nodes).")


class LineLinks:
    """Lines or curves linking every tracked point to its nearest neighbours."""

    DISPLAY_NAME = "Line Links"
    DESCRIPTION = ("Links every visible tracked point to its nearest neighbours (k nearest, or all within a "
                   "radius) with anti-aliased lines or Bezier curves; hysteresis keeps links from flickering.")
    CATEGORY = CATEGORY
    RETURN_TYPES = (OVERLAY,)
    RETURN_NAMES = ("overlay",)
    OUTPUT_TOOLTIPS = (_OVERLAY_OUT,)
    FUNCTION = "build"
    SCALED_GRAPH = ("radius", "max_length", "delta_y_cap")
    SCALED_LINE = ("width", "dash_length", "gap_length")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "tracks": _tracks_input(),
            "mode": combo(MODES, _GRAPH["mode"], "knn: each point links to its k nearest; radius: every "
                          "pair closer than 'radius'."),
            "k": int_input(_GRAPH["k"], 1, 64, "Neighbours per point (knn mode)."),
            "radius": float_input(_GRAPH["radius"], 0.01, 100_000.0, "Link distance in radius mode" + _SIZE + "."),
            "max_length": float_input(_GRAPH["max_length"], 0.0, 100_000.0,
                                      "Drop links longer than this" + _SIZE + "; 0 = no limit."),
            "delta_y_cap": float_input(_GRAPH["delta_y_cap"], 0.0, 100_000.0,
                                       "Drop links whose ends differ in height by more than this" + _SIZE
                                       + "; 0 = no limit."),
            "degree_cap": int_input(_GRAPH["degree_cap"], 0, 64, "At most this many links per point; 0 = no limit."),
            "hysteresis": float_input(_GRAPH["hysteresis"], 0.0, 0.99,
                                      "0..0.99: how strongly last frame's links are kept (less flicker); 0 = off.",
                                      step=0.05),
            "units": units_input(),
            "width": float_input(_LINE["width"], 0.01, 1000.0, "Line width" + _SIZE + "."),
            "color": color(_LINE["color"], "Line colour (color_mode single)."),
            "color_end": color(_LINE["color_end"], "Colour at the far end when gradient is on (color_mode single)."),
            "color_mode": combo(COLOR_MODES, _LINE["color_mode"],
                                "single: the colours above; track: a palette colour per track."),
            "gradient": boolean(_LINE["gradient"], "Fade each link from its start colour to its end colour."),
            "opacity": float_input(_LINE["opacity"], 0.0, 1.0, "Line opacity, 0..1.", step=0.05),
            "pattern": combo(LINE_PATTERNS, _LINE["pattern"], "solid, dashed or dotted lines."),
            "dash_length": float_input(_LINE["dash_length"], 0.0, 100_000.0, "Dash length (dashed)" + _SIZE + "."),
            "gap_length": float_input(_LINE["gap_length"], 0.0, 100_000.0,
                                      "Gap between dashes or dots" + _SIZE + "."),
            "curve": combo(CURVE_KINDS, _LINE["curve"], "Shape of each link: straight, or a Bezier curve."),
            "bend": float_input(_LINE["bend"], -2.0, 2.0, "How far curves bow out, as a fraction of the link "
                                "length (negative bends the other way).", step=0.05),
            "bend_side": combo(BEND_SIDES, _LINE["bend_side"], "Which side curves bow to."),
        }, "optional": {
            "reference": reference_input(),
        }}

    def build(self, tracks, units, reference=None, **widgets):
        scale = unit_scale(units, reference)
        params = engine_params(GraphParams, widgets, scale, self.SCALED_GRAPH)
        style = engine_params(LineStyle, widgets, scale, self.SCALED_LINE)
        tracks = normalize_tracks(tracks)
        return (link_overlay(tracks.path, tracks.visibility, params, style),)


def _bounding_box_overlay(boxes, style: BoxStyle) -> list:
    """Per-frame display lists of a BOUNDING_BOXES value drawn with ``style``."""
    return [DisplayList((box_primitives(centers, sizes, np.arange(len(centers)), style),))
            for centers, sizes in bounding_boxes(boxes)]


class Boxes:
    """Rounded boxes or corner brackets around tracked points (and given bounding boxes)."""

    DISPLAY_NAME = "Boxes"
    DESCRIPTION = ("Draws a rounded box (or corner brackets) around every visible tracked point, and around "
                   "optional bounding boxes, with stroke, fill and corner radius.")
    CATEGORY = CATEGORY
    RETURN_TYPES = (OVERLAY,)
    RETURN_NAMES = ("overlay",)
    OUTPUT_TOOLTIPS = (_OVERLAY_OUT,)
    FUNCTION = "build"
    SCALED = ("size", "stroke_width")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "tracks": _tracks_input(),
            "units": units_input(),
            "size": float_input(_BOX["size"], 0.0, 100_000.0, "Box width and height (size_mode fixed)" + _SIZE + "."),
            "size_mode": combo(SIZE_MODES, _BOX["size_mode"], "fixed: 'size' for every box; track: each "
                               "track's own size in pixels (e.g. a mask region's), 'size' where it has none."),
            "stroke_width": float_input(_BOX["stroke_width"], 0.0, 1000.0, "Outline width" + _SIZE + "; 0 = none."),
            "color": color(_BOX["color"], "Outline colour (color_mode single)."),
            "color_mode": combo(COLOR_MODES, _BOX["color_mode"],
                                "single: 'color'; track: a palette colour per track."),
            "opacity": float_input(_BOX["opacity"], 0.0, 1.0, "Opacity of the whole box, 0..1.", step=0.05),
            "fill_opacity": float_input(_BOX["fill_opacity"], 0.0, 1.0, "Fill opacity, 0..1 (0 = hollow).",
                                        step=0.05),
            "fill_color": color("", "Fill colour; leave empty to fill with the outline colour."),
            "roundness": float_input(_BOX["roundness"], 0.0, 1.0, "Corner radius as a fraction of half the "
                                     "shorter side (0 = square, 1 = pill).", step=0.05),
            "shape": combo(BOX_SHAPES, _BOX["shape"], "rounded: full outline; brackets: corners only."),
            "bracket_length": float_input(_BOX["bracket_length"], 0.0, 0.5, "Bracket arm length as a fraction "
                                          "of the shorter side (shape brackets).", step=0.05),
        }, "optional": {
            "reference": reference_input(),
            "boxes": socket("BOUNDING_BOXES", "Extra boxes to draw: a list of {x, y, width, height} (top-left "
                            "corner, pixels) for one frame, or one such list per frame."),
        }}

    def build(self, tracks, units, fill_color, reference=None, boxes=None, **widgets):
        scale = unit_scale(units, reference)
        style = engine_params(BoxStyle, {**widgets, "fill_color": fill_color.strip() or None}, scale, self.SCALED)
        tracks = normalize_tracks(tracks)
        overlay = box_overlay(tracks.path, tracks.visibility, style, tracks.size)
        if boxes is None:
            return (overlay,)
        extra = _bounding_box_overlay(boxes, style)
        broadcast_length(tracks=len(overlay), boxes=len(extra))
        return (merge_sequences(overlay, extra),)


class Merge:
    """Stacks overlays: later inputs draw on top."""

    DISPLAY_NAME = "Merge Overlays"
    DESCRIPTION = ("Combines up to four overlays into one; b draws over a, c over b, d over c. Overlays of one "
                   "frame repeat over longer ones.")
    CATEGORY = CATEGORY
    RETURN_TYPES = (OVERLAY,)
    RETURN_NAMES = ("overlay",)
    OUTPUT_TOOLTIPS = ("The combined overlay, one display list per frame.",)
    FUNCTION = "merge"

    @classmethod
    def INPUT_TYPES(cls):
        layer = "Overlay drawn over the inputs above it."
        return {"required": {
            "overlay_a": socket(OVERLAY, "Bottom overlay."),
            "overlay_b": socket(OVERLAY, layer),
        }, "optional": {
            "overlay_c": socket(OVERLAY, layer),
            "overlay_d": socket(OVERLAY, layer),
        }}

    def merge(self, overlay_a, overlay_b, overlay_c=None, overlay_d=None):
        given = {name: overlay_list(value, name) for name, value in
                 (("overlay_a", overlay_a), ("overlay_b", overlay_b), ("overlay_c", overlay_c),
                  ("overlay_d", overlay_d)) if value is not None}
        broadcast_length(**{name: len(value) for name, value in given.items()})
        return (merge_sequences(*given.values()),)


NODES = (LineLinks, Boxes, Merge)
