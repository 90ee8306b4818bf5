"""The Labels node: TRACKS -> TRACK_OVERLAY of a text label beside every tracked point."""

from __future__ import annotations

from comfy_api.latest import io

from ..utils.draw.labels import label_overlay
from ..utils.draw.styles import (
    LABEL_FIELDS,
    LABEL_PLACEMENTS,
    LABEL_RANGES,
    LABEL_TEXTS,
    PALETTE_MODES,
    SIZE_MODES,
    LabelStyle,
    fit_label_size,
)
from ..utils.draw.units import UNITS
from .adapters import engine_params, for_frames, input_path, overlay_inputs
from .widgets import (
    DRAW_CATEGORY,
    OVERLAY_OUT,
    Overlay,
    color,
    combo,
    defaults,
    float_input,
    text,
    tracks_input,
    units_input,
)

_LABEL = defaults(LabelStyle)
_SIZE = ", in 'units'"
# Widgets whose value is a length, multiplied by the pixels per unit (and the size, by fit_label_size).
SCALED_LABEL = ("plate_padding", "plate_stroke", "margin", "offset_x", "offset_y", "box_size")


def label_widgets() -> list:
    """The label-style widgets (one per LabelStyle field)."""
    limits = LABEL_RANGES
    return [
        combo("text", LABEL_TEXTS, _LABEL["text"], "What each label says: the track id, its coordinates, the "
              "'format' below, or the track's own text (track_text, from a track file's 'text' list)."),
        text("format", _LABEL["format"], "Python format string (text 'format') over the fields "
             f"{', '.join('{' + name + '}' for name in LABEL_FIELDS)}, e.g. 'ID {{id:03d}}' or "
             "'{x:.0f},{y:.0f}'."),
        float_input("size", _LABEL["size"], limits["size"], "Font size (em)" + _SIZE + "; glyphs are drawn "
                    "from the font at this size, rounded to whole pixels.", step=0.1),
        text("font", _LABEL["font"], "A .ttf or .otf font file (relative paths: ComfyUI's input folder); empty "
             "for the bundled DejaVu Sans, which covers Latin, Greek and Cyrillic."),
        color("color", _LABEL["color"], "Text colour (color_mode single)."),
        combo("color_mode", PALETTE_MODES, _LABEL["color_mode"], "single: 'color'; track: a palette colour per "
              "track."),
        float_input("opacity", _LABEL["opacity"], limits["opacity"], "Text opacity, 0..1.", step=0.05),
        color("plate_color", _LABEL["plate_color"], "Colour of the plate behind the text."),
        float_input("plate_opacity", _LABEL["plate_opacity"], limits["plate_opacity"], "Plate opacity, 0..1 "
                    "(0 = no plate).", step=0.05),
        float_input("plate_padding", _LABEL["plate_padding"], limits["plate_padding"],
                    "Room between the text and the plate's edge" + _SIZE + ".", step=0.1),
        float_input("plate_roundness", _LABEL["plate_roundness"], limits["plate_roundness"], "Plate corner radius "
                    "as a fraction of half its height (0 = square, 1 = pill).", step=0.05),
        float_input("plate_stroke", _LABEL["plate_stroke"], limits["plate_stroke"],
                    "Plate outline width" + _SIZE + "; 0 = none."),
        color("plate_stroke_color", _LABEL["plate_stroke_color"], "Plate outline colour."),
        combo("placement", LABEL_PLACEMENTS, _LABEL["placement"], "Where the label sits around the box: over one "
              "of its corners, beside one of its sides, or centred on the point. Labels never leave the "
              "frame when its size is known ('reference' connected, or tracks that carry it)."),
        float_input("margin", _LABEL["margin"], limits["margin"], "Gap between the box and the label" + _SIZE
                    + " (negative overlaps the box).", step=0.1),
        float_input("offset_x", _LABEL["offset_x"], limits["offset_x"], "Extra shift to the right" + _SIZE + ".",
                    step=0.1),
        float_input("offset_y", _LABEL["offset_y"], limits["offset_y"], "Extra shift down" + _SIZE + ".",
                    step=0.1),
        float_input("box_size", _LABEL["box_size"], limits["box_size"], "Size of the box the label is placed "
                    "around (box_size_mode fixed)" + _SIZE + "; match the Boxes node's size.", step=0.1),
        combo("box_size_mode", SIZE_MODES, _LABEL["box_size_mode"], "fixed: 'box_size'; track: each track's "
              "own box size, 'box_size' where it has none."),
    ]


class LabelsNode(io.ComfyNode):
    """A text label (id, coordinates, a format or the track's own text) beside every tracked point."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="TrackOverlayLabels",
            display_name="Labels",
            category=DRAW_CATEGORY,
            search_aliases=["text labels", "track id", "coordinates", "tracking overlay", "hud text", "captions",
                            "annotate points"],
            description="Writes a label beside every visible tracked point: its track id, its coordinates, a "
                        "format string, or the track's own text, in a real font (crisp at any size), with an "
                        "optional rounded plate behind it, placed around the point's box and kept inside the "
                        "frame.",
            inputs=[
                tracks_input(), units_input(), *label_widgets(),
                io.Image.Input("reference", optional=True, tooltip="The frames the labels will be drawn on: "
                               "labels are kept inside them, and '% of frame height' takes their height."),
            ],
            outputs=[Overlay.Output("overlay", tooltip=OVERLAY_OUT)],
        )

    @classmethod
    def execute(cls, tracks, units, reference=None, **widgets) -> io.NodeOutput:
        font = widgets["font"].strip()
        tracks, bounds, scale = overlay_inputs(tracks, units, reference)
        relative = units == UNITS[1]
        size = fit_label_size(widgets["size"] * scale, relative, bounds[1] if relative else 0)
        style = engine_params(LabelStyle, {**widgets, "size": size, "font": input_path(font) if font else ""},
                              scale, SCALED_LABEL)
        return io.NodeOutput(for_frames(label_overlay(tracks.path, tracks.visibility, style, tracks.text, tracks.size,
                                                      tracks.opacity, bounds), bounds))


NODES = (LabelsNode,)
