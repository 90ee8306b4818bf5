"""Line and box styles: what the user sets, validated once."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.checks import Range, check_choice, check_range
from .colors import parse_color, parse_gradient
from .curves import BEND_SIDES, CURVE_KINDS

COLOR_MODES = ("single", "track", "speed", "direction", "age")
DEFAULT_GRADIENT = "#00E5FF,#FFD600,#FF1744"
LINE_PATTERNS = ("solid", "dashed", "dotted")
BOX_SHAPES = ("rounded", "brackets")
SIZE_MODES = ("fixed", "track")

# Accepted ranges of the numeric style fields (pixels, or fractions); the node widgets read these too.
LINE_RANGES = {
    "width": Range(0.0, 10_000.0, low_open=True),
    "opacity": Range(0.0, 1.0),
    "dash_length": Range(0.0, 100_000.0, low_open=True),  # 0 passes unless the pattern is dashed
    "gap_length": Range(0.0, 100_000.0, low_open=True),  # 0 passes for solid lines
    "bend": Range(-2.0, 2.0),
    "speed_range": Range(0.0, 100_000.0, low_open=True),
    "age_range": Range(0.0, 10_000_000.0, low_open=True),
}
BOX_RANGES = {
    "size": Range(0.0, 100_000.0),
    "stroke_width": Range(0.0, 10_000.0),
    "opacity": Range(0.0, 1.0),
    "fill_opacity": Range(0.0, 1.0),
    "roundness": Range(0.0, 1.0),
    "bracket_length": Range(0.0, 0.5),
    "speed_range": LINE_RANGES["speed_range"],
    "age_range": LINE_RANGES["age_range"],
}


@dataclass(frozen=True)
class LineStyle:
    """How link lines look.

    ``color_mode='track'`` colours each edge from the track palette (by the
    lower track id, or a gradient between both ends when ``gradient``);
    ``single`` uses ``color``, fading to ``color_end`` when ``gradient``.
    ``speed``, ``direction`` and ``age`` colour each end's track by its
    motion (see :mod:`.motion`) through ``gradient_colors`` (two or more,
    comma-separated), like ``track``: speed in pixels per frame over
    ``speed_range``, age in frames over ``age_range``.
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
    gradient_colors: str = DEFAULT_GRADIENT
    speed_range: float = 20.0
    age_range: float = 90.0

    def __post_init__(self):
        ranges = LINE_RANGES
        check_range("line width", self.width, ranges["width"])
        parse_color(self.color, "line color")
        parse_color(self.color_end, "line color_end")
        check_choice("line color_mode", self.color_mode, COLOR_MODES)
        check_range("line opacity", self.opacity, ranges["opacity"])
        check_choice("line pattern", self.pattern, LINE_PATTERNS)
        check_range("dash length", self.dash_length, ranges["dash_length"]._replace(low_open=self.pattern == "dashed"))
        check_range("gap length", self.gap_length, ranges["gap_length"]._replace(low_open=self.pattern != "solid"))
        check_choice("curve", self.curve, CURVE_KINDS)
        check_range("bend", self.bend, ranges["bend"])
        check_choice("bend side", self.bend_side, BEND_SIDES)
        _check_motion_colors("line", self)


@dataclass(frozen=True)
class BoxStyle:
    """How boxes look.

    ``roundness`` is the corner radius as a fraction of half the shorter side;
    ``bracket_length`` the corner-bracket arm as a fraction of the shorter side.
    ``color_mode`` and the gradient fields work as in :class:`LineStyle` (per box).
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
    gradient_colors: str = DEFAULT_GRADIENT
    speed_range: float = 20.0
    age_range: float = 90.0

    def __post_init__(self):
        ranges = BOX_RANGES
        check_range("box size", self.size, ranges["size"])
        check_choice("box size_mode", self.size_mode, SIZE_MODES)
        check_range("box stroke width", self.stroke_width, ranges["stroke_width"])
        parse_color(self.color, "box color")
        if self.fill_color is not None:
            parse_color(self.fill_color, "box fill_color")
        check_choice("box color_mode", self.color_mode, COLOR_MODES)
        check_range("box opacity", self.opacity, ranges["opacity"])
        check_range("box fill opacity", self.fill_opacity, ranges["fill_opacity"])
        check_range("box roundness", self.roundness, ranges["roundness"])
        check_choice("box shape", self.shape, BOX_SHAPES)
        check_range("box bracket length", self.bracket_length, ranges["bracket_length"])
        _check_motion_colors("box", self)


def _check_motion_colors(what: str, style) -> None:
    """The gradient fields of a line or box style (checked whatever the colour mode, so a bad one never waits)."""
    parse_gradient(style.gradient_colors, f"{what} gradient_colors")
    check_range(f"{what} speed range", style.speed_range, LINE_RANGES["speed_range"])
    check_range(f"{what} age range", style.age_range, LINE_RANGES["age_range"])
