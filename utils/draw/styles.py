"""Line and box styles: what the user sets, validated once."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.checks import check_choice, check_number
from .colors import parse_color
from .curves import BEND_SIDES, CURVE_KINDS

COLOR_MODES = ("single", "track")
LINE_PATTERNS = ("solid", "dashed", "dotted")
BOX_SHAPES = ("rounded", "brackets")
SIZE_MODES = ("fixed", "track")


@dataclass(frozen=True)
class LineStyle:
    """How link lines look.

    ``color_mode='track'`` colours each edge from the track palette (by the
    lower track id, or a gradient between both ends when ``gradient``);
    ``single`` uses ``color``, fading to ``color_end`` when ``gradient``.
    """

    width: float = 2.0
    color: str = "#FFFFFF"
    color_end: str = "#00E5FF"
    color_mode: str = "single"
    gradient: bool = False
    opacity: float = 1.0
    pattern: str = "solid"
    dash_length: float = 12.0
    gap_length: float = 8.0
    curve: str = "quadratic"
    bend: float = 0.3
    bend_side: str = "alternate"

    def __post_init__(self):
        check_number("line width", self.width, 0.0, 10_000.0, low_open=True)
        parse_color(self.color, "line color")
        parse_color(self.color_end, "line color_end")
        check_choice("line color_mode", self.color_mode, COLOR_MODES)
        check_number("line opacity", self.opacity, 0.0, 1.0)
        check_choice("line pattern", self.pattern, LINE_PATTERNS)
        check_number("dash length", self.dash_length, 0.0, 100_000.0, low_open=self.pattern == "dashed")
        check_number("gap length", self.gap_length, 0.0, 100_000.0, low_open=self.pattern != "solid")
        check_choice("curve", self.curve, CURVE_KINDS)
        check_number("bend", self.bend, -2.0, 2.0)
        check_choice("bend side", self.bend_side, BEND_SIDES)


@dataclass(frozen=True)
class BoxStyle:
    """How boxes look.

    ``roundness`` is the corner radius as a fraction of half the shorter side;
    ``bracket_length`` the corner-bracket arm as a fraction of the shorter side.
    """

    size: float = 40.0
    size_mode: str = "fixed"
    stroke_width: float = 2.0
    color: str = "#FFFFFF"
    color_mode: str = "single"
    opacity: float = 1.0
    fill_opacity: float = 0.2
    fill_color: str | None = None
    roundness: float = 0.3
    shape: str = "rounded"
    bracket_length: float = 0.25

    def __post_init__(self):
        check_number("box size", self.size, 0.0, 100_000.0)
        check_choice("box size_mode", self.size_mode, SIZE_MODES)
        check_number("box stroke width", self.stroke_width, 0.0, 10_000.0)
        parse_color(self.color, "box color")
        if self.fill_color is not None:
            parse_color(self.fill_color, "box fill_color")
        check_choice("box color_mode", self.color_mode, COLOR_MODES)
        check_number("box opacity", self.opacity, 0.0, 1.0)
        check_number("box fill opacity", self.fill_opacity, 0.0, 1.0)
        check_number("box roundness", self.roundness, 0.0, 1.0)
        check_choice("box shape", self.shape, BOX_SHAPES)
        check_number("box bracket length", self.bracket_length, 0.0, 0.5)
