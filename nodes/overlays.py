"""Overlay builders: TRACKS -> TRACK_OVERLAY (link lines, boxes, trails), and merging overlays."""

from __future__ import annotations

import numpy as np
from comfy_api.latest import io

from ..utils.draw.curves import BEND_SIDES, CURVE_KINDS
from ..utils.draw.display_list import DisplayList, merge_sequences
from ..utils.draw.motion import still_colors
from ..utils.draw.overlays import (
    box_overlay,
    box_primitives,
    link_overlay,
    trail_overlay,
)
from ..utils.draw.styles import (
    BOX_RANGES,
    BOX_SHAPES,
    COLOR_MODES,
    LINE_PATTERNS,
    LINE_RANGES,
    PALETTE_MODES,
    SIZE_MODES,
    TRAIL_RANGES,
    TRAIL_SMOOTHING_FRAMES,
    BoxStyle,
    LineStyle,
    TrailStyle,
)
from ..utils.graph.neighbours import GRAPH_RANGES, MODES, GraphParams
from .adapters import (
    bounding_boxes,
    engine_params,
    for_frames,
    overlay_inputs,
    overlay_list,
)
from .widgets import (
    DRAW_CATEGORY,
    OVERLAY_OUT,
    BoundingBoxes,
    Overlay,
    boolean,
    color,
    combo,
    defaults,
    float_input,
    int_input,
    reference_input,
    text,
    tracks_input,
    units_input,
)

_GRAPH = defaults(GraphParams)
_LINE = defaults(LineStyle)
_BOX = defaults(BoxStyle)
_TRAIL = defaults(TrailStyle)
_SIZE = ", in 'units'"
# Widgets whose value is a length, multiplied by the pixels per unit.
SCALED_GRAPH = ("radius", "max_length", "delta_y_cap")
SCALED_LINE = ("width", "dash_length", "gap_length", "speed_range")
SCALED_BOX = ("size", "stroke_width", "speed_range")
SCALED_TRAIL = ("width",)
_COLOR_MODE_TIP = ("speed, direction, age: each track's speed (pixels a frame), direction of motion or age (frames "
                   "since it appeared) through 'gradient_colors'.")


def motion_color_widgets(defaults_of: dict, limits: dict) -> list:
    """The gradient widgets of the motion colour modes (after the inputs of saved workflows, so optional)."""
    return [
        text("gradient_colors", defaults_of["gradient_colors"], "Colours for color_mode speed, direction or age: two "
             "or more hex colours separated by commas, evenly spaced (speed and age run from the first to the last; "
             "direction goes round them, 0 degrees = moving right, 90 = up).", optional=True),
        float_input("speed_range", defaults_of["speed_range"], limits["speed_range"], "Speed (per frame" + _SIZE +
                    ") that reaches the last gradient colour (color_mode speed).", optional=True),
        float_input("age_range", defaults_of["age_range"], limits["age_range"], "Age in frames that reaches the "
                    "last gradient colour (color_mode age).", step=1.0, optional=True),
    ]


def required_and_optional(widgets: list) -> tuple:
    """``widgets`` split into the required ones and the optional ones (declared after the saved inputs)."""
    return [item for item in widgets if not item.optional], [item for item in widgets if item.optional]


def graph_widgets() -> list:
    """The neighbour-graph widgets (one per GraphParams field)."""
    limits = GRAPH_RANGES
    return [
        combo("mode", MODES, _GRAPH["mode"], "knn: each point links to its k nearest; radius: every pair closer "
              "than 'radius'; delaunay: the Delaunay triangulation (a mesh of triangles); mst: the minimum "
              "spanning tree (the shortest links that join every point, no loops). The caps and hysteresis "
              "below apply to all."),
        int_input("k", _GRAPH["k"], limits["k"], "Neighbours per point (knn mode)."),
        float_input("radius", _GRAPH["radius"], limits["radius"], "Link distance in radius mode" + _SIZE + "."),
        float_input("max_length", _GRAPH["max_length"], limits["max_length"],
                    "Drop links longer than this" + _SIZE + "; 0 = no limit."),
        float_input("delta_y_cap", _GRAPH["delta_y_cap"], limits["delta_y_cap"],
                    "Drop links whose ends differ in height by more than this" + _SIZE + "; 0 = no limit."),
        int_input("degree_cap", _GRAPH["degree_cap"], limits["degree_cap"],
                  "At most this many links per point; 0 = no limit."),
        float_input("hysteresis", _GRAPH["hysteresis"], limits["hysteresis"],
                    "How strongly last frame's links are kept (less flicker), from 0 (off) up to, not "
                    "including, 1.", step=0.05),
    ]


def line_widgets() -> list:
    """The line-style widgets (one per LineStyle field)."""
    limits = LINE_RANGES
    return [
        float_input("width", _LINE["width"], limits["width"], "Line width" + _SIZE + "."),
        color("color", _LINE["color"], "Line colour (color_mode single)."),
        color("color_end", _LINE["color_end"], "Colour at the far end when gradient is on (color_mode single)."),
        combo("color_mode", COLOR_MODES, _LINE["color_mode"],
              "single: the colours above; track: a palette colour per track; " + _COLOR_MODE_TIP),
        boolean("gradient", _LINE["gradient"], "Fade each link from its start colour to its end colour."),
        float_input("opacity", _LINE["opacity"], limits["opacity"], "Line opacity, 0..1.", step=0.05),
        combo("pattern", LINE_PATTERNS, _LINE["pattern"], "solid, dashed or dotted lines."),
        float_input("dash_length", _LINE["dash_length"], limits["dash_length"],
                    "Dash length (dashed)" + _SIZE + "."),
        float_input("gap_length", _LINE["gap_length"], limits["gap_length"],
                    "Gap between dashes or dots" + _SIZE + "."),
        combo("curve", CURVE_KINDS, _LINE["curve"], "Shape of each link: straight, or a Bezier curve."),
        float_input("bend", _LINE["bend"], limits["bend"], "How far curves bow out, as a fraction of the link "
                    "length (negative bends the other way).", step=0.05),
        combo("bend_side", BEND_SIDES, _LINE["bend_side"], "Which side curves bow to."),
        *motion_color_widgets(_LINE, limits),
    ]


def box_widgets() -> list:
    """The box-style widgets (one per BoxStyle field; an empty fill_color means the outline colour)."""
    limits = BOX_RANGES
    return [
        float_input("size", _BOX["size"], limits["size"], "Box width and height (size_mode fixed)" + _SIZE + "."),
        combo("size_mode", SIZE_MODES, _BOX["size_mode"], "fixed: 'size' for every box; track: each track's own "
              "size in pixels (e.g. a mask region's), 'size' where it has none."),
        float_input("stroke_width", _BOX["stroke_width"], limits["stroke_width"],
                    "Outline width" + _SIZE + "; 0 = none."),
        color("color", _BOX["color"], "Outline colour (color_mode single)."),
        combo("color_mode", COLOR_MODES, _BOX["color_mode"], "single: 'color'; track: a palette colour per track; "
              + _COLOR_MODE_TIP),
        float_input("opacity", _BOX["opacity"], limits["opacity"], "Opacity of the whole box, 0..1.", step=0.05),
        float_input("fill_opacity", _BOX["fill_opacity"], limits["fill_opacity"], "Fill opacity, 0..1 (0 = hollow).",
                    step=0.05),
        color("fill_color", "", "Fill colour; leave empty to fill with the outline colour."),
        float_input("roundness", _BOX["roundness"], limits["roundness"], "Corner radius as a fraction of half "
                    "the shorter side (0 = square, 1 = pill).", step=0.05),
        combo("shape", BOX_SHAPES, _BOX["shape"], "rounded: full outline; brackets: corners only."),
        float_input("bracket_length", _BOX["bracket_length"], limits["bracket_length"], "Bracket arm length as a "
                    "fraction of the shorter side (shape brackets).", step=0.05),
        *motion_color_widgets(_BOX, limits),
    ]


def trail_widgets() -> list:
    """The trail-style widgets (one per TrailStyle field)."""
    limits = TRAIL_RANGES
    window = 2 * TRAIL_SMOOTHING_FRAMES + 1
    return [
        int_input("length", _TRAIL["length"], limits["length"], "Trail length in frames: how many past positions "
                  "each trail shows. A track that ends leaves its trail fading out over this many frames."),
        float_input("width", _TRAIL["width"], limits["width"], "Trail width at the point" + _SIZE + "."),
        float_input("taper", _TRAIL["taper"], limits["taper"], "How much the trail narrows toward its tail: 0 = "
                    "the same width throughout, 1 = down to nothing.", step=0.05),
        float_input("fade", _TRAIL["fade"], limits["fade"], "Fade curve: opacity falls from the point to 0 at the "
                    "tail as (1 - age / length) ^ fade; 1 = linear, above 1 fades sooner, below 1 later."),
        float_input("smoothing", _TRAIL["smoothing"], limits["smoothing"], "Hides tracking jitter: each position "
                    f"is averaged with its neighbours in time, 0 = raw, 1 = over {window} frames (centred, so the "
                    "trail stays on straight paths and its head on the point).", step=0.05),
        color("color", _TRAIL["color"], "Trail colour (color_mode single)."),
        combo("color_mode", PALETTE_MODES, _TRAIL["color_mode"], "single: 'color'; track: a palette colour per "
              "track."),
        float_input("opacity", _TRAIL["opacity"], limits["opacity"], "Trail opacity at the point, 0..1.", step=0.05),
    ]


def box_style(widgets: dict, scale: float) -> BoxStyle:
    """The BoxStyle of the box widgets (lengths x ``scale``; an empty fill colour means the outline colour)."""
    values = {**widgets, "fill_color": widgets["fill_color"].strip() or None}
    return engine_params(BoxStyle, values, scale, SCALED_BOX)


class LineLinksNode(io.ComfyNode):
    """Lines or curves linking every tracked point to its nearest neighbours."""

    @classmethod
    def define_schema(cls):
        lines, line_extras = required_and_optional(line_widgets())
        return io.Schema(
            node_id="TrackOverlayLineLinks",
            display_name="Line Links",
            category=DRAW_CATEGORY,
            search_aliases=["plexus", "tracking overlay", "connect points", "knn lines", "constellation",
                            "network lines", "bezier links", "delaunay", "triangulation", "spanning tree"],
            description="Links every visible tracked point to its nearest neighbours (k nearest, all within "
                        "a radius, a Delaunay triangulation or a minimum spanning tree) with anti-aliased lines or "
                        "Bezier curves; hysteresis keeps links from flickering.",
            inputs=[tracks_input(), *graph_widgets(), units_input(), *lines, reference_input(), *line_extras],
            outputs=[Overlay.Output("overlay", tooltip=OVERLAY_OUT)],
        )

    @classmethod
    def execute(cls, tracks, units, reference=None, **widgets) -> io.NodeOutput:
        tracks, frame_size, scale = overlay_inputs(tracks, units, reference)
        params = engine_params(GraphParams, widgets, scale, SCALED_GRAPH)
        style = engine_params(LineStyle, widgets, scale, SCALED_LINE)
        overlay = link_overlay(tracks.path, tracks.visibility, params, style, opacity=tracks.opacity,
                               cuts=tracks.cuts)
        return io.NodeOutput(for_frames(overlay, frame_size))


def _bounding_box_overlay(boxes, style: BoxStyle) -> list:
    """Per-frame display lists of a BOUNDING_BOXES value drawn with ``style`` (still, for the motion colours)."""
    return [DisplayList((box_primitives(centers, sizes, np.arange(len(centers)), style,
                                        point_colors=still_colors(style, len(centers))),))
            for centers, sizes in bounding_boxes(boxes)]


class BoxesNode(io.ComfyNode):
    """Rounded boxes or corner brackets around tracked points (and given bounding boxes)."""

    @classmethod
    def define_schema(cls):
        boxes, box_extras = required_and_optional(box_widgets())
        return io.Schema(
            node_id="TrackOverlayBoxes",
            display_name="Boxes",
            category=DRAW_CATEGORY,
            search_aliases=["tracking overlay", "tracking boxes", "bounding box", "corner brackets", "hud boxes",
                            "target boxes"],
            description="Draws a rounded box (or corner brackets) around every visible tracked point, and "
                        "around optional bounding boxes, with stroke, fill and corner radius.",
            inputs=[
                tracks_input(), units_input(), *boxes, reference_input(),
                BoundingBoxes.Input("boxes", optional=True, tooltip="Extra boxes to draw: a list of {x, y, "
                                    "width, height} (top-left corner, pixels) for one frame, or one such list "
                                    "per frame (still boxes: the motion colour modes give them the first "
                                    "gradient colour).",
                                    # a socket: newer frontends draw a widget for the core BOUNDING_BOXES
                                    # type, which would take one of the saved widget values
                                    extra_dict={"forceInput": True}),
                *box_extras,
            ],
            outputs=[Overlay.Output("overlay", tooltip=OVERLAY_OUT)],
        )

    @classmethod
    def execute(cls, tracks, units, reference=None, boxes=None, **widgets) -> io.NodeOutput:
        tracks, frame_size, scale = overlay_inputs(tracks, units, reference)
        style = box_style(widgets, scale)
        overlay = for_frames(box_overlay(tracks.path, tracks.visibility, style, tracks.size, tracks.opacity,
                                         cuts=tracks.cuts), frame_size)
        if boxes is None:
            return io.NodeOutput(overlay)
        extra = _bounding_box_overlay(boxes, style)
        return io.NodeOutput(merge_sequences(overlay, extra, names=("tracks", "boxes")))


class TrailsNode(io.ComfyNode):
    """Motion trails: each tracked point's recent path as a tapering, fading line."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="TrackOverlayTrails",
            display_name="Trails",
            category=DRAW_CATEGORY,
            search_aliases=["motion trails", "tracking overlay", "comet tails", "point trails", "tracers",
                            "motion history", "path history"],
            description="Draws each visible tracked point's last positions as a smoothed line that narrows and "
                        "fades toward its tail; hidden frames break a trail, a track that ends leaves its "
                        "trail fading out, and a scene cut ends every trail.",
            inputs=[tracks_input(), units_input(), *trail_widgets(), reference_input()],
            outputs=[Overlay.Output("overlay", tooltip=OVERLAY_OUT)],
        )

    @classmethod
    def execute(cls, tracks, units, reference=None, **widgets) -> io.NodeOutput:
        tracks, frame_size, scale = overlay_inputs(tracks, units, reference)
        style = engine_params(TrailStyle, widgets, scale, SCALED_TRAIL)
        overlay = trail_overlay(tracks.path, tracks.visibility, style, tracks.opacity, tracks.cuts)
        return io.NodeOutput(for_frames(overlay, frame_size))


class MergeOverlaysNode(io.ComfyNode):
    """Stacks overlays: later inputs draw on top."""

    @classmethod
    def define_schema(cls):
        layer = "Overlay drawn over the inputs above it."
        return io.Schema(
            node_id="TrackOverlayMerge",
            display_name="Merge Overlays",
            category=DRAW_CATEGORY,
            search_aliases=["combine overlays", "stack overlays", "layer overlays"],
            description="Combines up to four overlays into one; b draws over a, c over b, d over c. Overlays "
                        "of one frame repeat over longer ones.",
            inputs=[
                Overlay.Input("overlay_a", tooltip="Bottom overlay."),
                Overlay.Input("overlay_b", tooltip=layer),
                Overlay.Input("overlay_c", optional=True, tooltip=layer),
                Overlay.Input("overlay_d", optional=True, tooltip=layer),
            ],
            outputs=[Overlay.Output("overlay", tooltip="The combined overlay, one display list per frame.")],
        )

    @classmethod
    def execute(cls, overlay_a, overlay_b, overlay_c=None, overlay_d=None) -> io.NodeOutput:
        given = {name: overlay_list(value, name) for name, value in
                 (("overlay_a", overlay_a), ("overlay_b", overlay_b), ("overlay_c", overlay_c),
                  ("overlay_d", overlay_d)) if value is not None}
        return io.NodeOutput(merge_sequences(*given.values(), names=tuple(given)))


NODES = (LineLinksNode, BoxesNode, TrailsNode, MergeOverlaysNode)
