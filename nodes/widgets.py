"""Declarations shared by the nodes: categories, the pack's socket types, and widget builders (V3 ``io``).

Number widgets take their bounds from the engine's own :class:`~..utils.core.checks.Range`,
so a widget never offers a value the engine refuses.
"""

from __future__ import annotations

import inspect
import math

from comfy_api.latest import io

from ..utils.core.checks import Range
from ..utils.draw.units import UNITS
from ..utils.raster.backend import BACKENDS

CATEGORY = "Track Overlay"
TRACKS_CATEGORY = f"{CATEGORY}/Tracks"
DRAW_CATEGORY = f"{CATEGORY}/Draw"
RENDER_CATEGORY = f"{CATEGORY}/Render"
VIDEO_CATEGORY = f"{CATEGORY}/Video"

# The pack's own socket types, declared once.
Overlay = io.Custom("TRACK_OVERLAY")
BoundingBoxes = io.Custom("BOUNDING_BOXES")

# Widgets need finite bounds: where the engine sets no upper bound, a widget stops here.
WIDGET_CEILING = 1_000_000
# An open end (excluded by the engine) is replaced by the nearest value a widget can show.
FLOAT_STEP_INSIDE = 0.001
OVERLAY_OUT = "One display list per frame; connect to Render Overlay, Render Layer or Merge Overlays."
TRACKS_OUT = ("Tracks: track_path [T, N, 2] pixels and track_visibility [T, N] (core ComfyUI TRACKS), "
              "plus box sizes where known.")


def defaults(function) -> dict:
    """Default argument values of a function or dataclass, so widgets share the engine's defaults."""
    return {name: parameter.default for name, parameter in inspect.signature(function).parameters.items()
            if parameter.default is not inspect.Parameter.empty}


def _bounds(limits: Range, inside: float) -> tuple:
    """(min, max) a widget may offer within ``limits``; ``inside`` steps in from an open end."""
    low = limits.low + inside if limits.low_open else limits.low
    high = WIDGET_CEILING if math.isinf(limits.high) else limits.high - inside if limits.high_open else limits.high
    return low, high


def int_input(name: str, default: int, limits: Range, tooltip: str, step: int = 1, **options):
    """An INT widget bounded by the engine's ``limits`` (a ``step`` of 2 keeps values even from an even min)."""
    low, high = _bounds(limits, 1)
    return io.Int.Input(name, default=default, min=int(low), max=int(high), step=step, tooltip=tooltip, **options)


def float_input(name: str, default: float, limits: Range, tooltip: str, step: float = 0.1, **options):
    """A FLOAT widget bounded by the engine's ``limits``; keeps three decimals (fine percentages survive)."""
    low, high = _bounds(limits, FLOAT_STEP_INSIDE)
    return io.Float.Input(name, default=default, min=float(low), max=float(high), step=step, round=FLOAT_STEP_INSIDE,
                          tooltip=tooltip, **options)


def combo(name: str, options, default: str, tooltip: str, **extra):
    """A drop-down of ``options``."""
    return io.Combo.Input(name, options=list(options), default=default, tooltip=tooltip, **extra)


def boolean(name: str, default: bool, tooltip: str, **options):
    """A toggle."""
    return io.Boolean.Input(name, default=default, tooltip=tooltip, **options)


def text(name: str, default: str, tooltip: str, multiline: bool = False, **options):
    """A STRING widget."""
    return io.String.Input(name, default=default, multiline=multiline, tooltip=tooltip, **options)


def color(name: str, default: str, tooltip: str):
    """A hex colour typed as text."""
    return text(name, default, f"{tooltip} Hex #RRGGBB or #RRGGBBAA, e.g. #00E5FF.")


def units_input():
    """The ``units`` choice of the overlay nodes."""
    return combo("units", UNITS, UNITS[0], "Unit of the widths, lengths and sizes below: pixels, or percent of "
                 "the frame height, so the look survives a change of resolution (the height of 'reference', or of the "
                 "frames the tracks were found on when they carry it, as this pack's track nodes' do).")


def reference_input():
    """The optional image that gives '% of frame height' its scale."""
    return io.Image.Input("reference", optional=True, tooltip="The frames the overlay will be drawn on; only "
                          "their size is used: their height turns '% of frame height' sizes into pixels, and "
                          "Render refuses frames of another size. Not needed for tracks that carry their frame "
                          "size (this pack's track nodes').")


def tracks_input(name: str = "tracks", tooltip: str | None = None, optional: bool = False):
    """A TRACKS socket (the core type)."""
    return io.Tracks.Input(name, optional=optional, tooltip=tooltip or "The tracks to draw (from Detect Tracks, "
                           "Tracks From Mask/JSON, Demo Clip, or core nodes such as Generate Tracks).")


def backend_input(**options):
    return combo("backend", BACKENDS, BACKENDS[0], "auto: the GPU when CuPy can use one, else the CPU; cpu or "
                 "gpu force one (gpu fails with the reason when no GPU is usable).", **options)
