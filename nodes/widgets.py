"""Input declarations shared by the nodes (ComfyUI V1 ``INPUT_TYPES`` entries)."""

from __future__ import annotations

import inspect

from ..utils.draw.units import UNITS
from ..utils.raster.backend import BACKENDS

CATEGORY = "Track Overlay"
OVERLAY = "TRACK_OVERLAY"


def defaults(function) -> dict:
    """Default argument values of a function or dataclass, so widgets share the engine's defaults."""
    return {name: parameter.default for name, parameter in inspect.signature(function).parameters.items()
            if parameter.default is not inspect.Parameter.empty}


def int_input(default: int, minimum: int, maximum: int, tooltip: str) -> tuple:
    """An INT widget."""
    return ("INT", {"default": default, "min": minimum, "max": maximum, "step": 1, "tooltip": tooltip})


def float_input(default: float, minimum: float, maximum: float, tooltip: str, step: float = 0.1) -> tuple:
    """A FLOAT widget that keeps three decimals (fine percentages survive the frontend's rounding)."""
    return ("FLOAT", {"default": default, "min": minimum, "max": maximum, "step": step, "round": 0.001,
                      "tooltip": tooltip})


def combo(options, default: str, tooltip: str) -> tuple:
    """A drop-down of ``options``."""
    return (list(options), {"default": default, "tooltip": tooltip})


def boolean(default: bool, tooltip: str) -> tuple:
    """A toggle."""
    return ("BOOLEAN", {"default": default, "tooltip": tooltip})


def text(default: str, tooltip: str, multiline: bool = False) -> tuple:
    """A STRING widget."""
    return ("STRING", {"default": default, "multiline": multiline, "tooltip": tooltip})


def color(default: str, tooltip: str) -> tuple:
    """A hex colour typed as text."""
    return text(default, f"{tooltip} Hex #RRGGBB or #RRGGBBAA, e.g. #00E5FF.")


def socket(kind: str, tooltip: str) -> tuple:
    """A linked (non-widget) input of type ``kind``."""
    return (kind, {"tooltip": tooltip})


def units_input() -> tuple:
    """The ``units`` choice of the overlay nodes."""
    return combo(UNITS, UNITS[0], "Unit of the widths, lengths and sizes below: pixels, or percent of the "
                 "reference image's height, so the look survives a change of resolution (needs 'reference').")


def reference_input() -> tuple:
    """The optional image that gives '% of frame height' its scale."""
    return socket("IMAGE", "The frames the overlay will be drawn on; only their height is used, to turn "
                  "'% of frame height' sizes into pixels.")


def backend_input() -> tuple:
    return combo(BACKENDS, BACKENDS[0], "auto: the GPU when CuPy can use one, else the CPU; cpu or gpu "
                 "force one (gpu fails with the reason when no GPU is usable).")
