"""Line, box, trail and label styles: what the user sets, validated once."""

from __future__ import annotations

import string
from dataclasses import dataclass

from ..core.checks import Range, check_choice, check_range
from ..core.log import LOGGER
from .colors import parse_color, parse_gradient
from .curves import BEND_SIDES, CURVE_KINDS

PALETTE_MODES = ("single", "track")
"""Colour modes of trails and labels: one colour, or a palette colour per track."""
COLOR_MODES = PALETTE_MODES + ("speed", "direction", "age")
DEFAULT_GRADIENT = "#00E5FF,#FFD600,#FF1744"
LINE_PATTERNS = ("solid", "dashed", "dotted")
BOX_SHAPES = ("rounded", "brackets")
SIZE_MODES = ("fixed", "track")
LABEL_TEXTS = ("id", "coordinates", "format", "track_text")
LABEL_PLACEMENTS = ("top_left", "top_right", "bottom_left", "bottom_right", "above", "below", "left", "right",
                    "center")
LABEL_FIELDS = {"id": 0, "x": 0.0, "y": 0.0, "w": 0.0, "h": 0.0, "frame": 0, "text": ""}
"""The fields a label format may use, with a value of each one's type: track id, point x and y, box width
and height (pixels), frame index, and the track's own text."""

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
TRAIL_RANGES = {
    "length": Range(2, 240),
    "width": Range(0.0, 10_000.0, low_open=True),
    "taper": Range(0.0, 1.0),
    "fade": Range(0.0, 10.0, low_open=True),
    "smoothing": Range(0.0, 1.0),
    "opacity": Range(0.0, 1.0),
}
TRAIL_SMOOTHING_FRAMES = 8
"""Half the averaging window, in frames, at ``smoothing`` 1 (a window of 17 frames)."""
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
LABEL_RANGES = {
    "size": Range(1.0, 512.0),
    "opacity": Range(0.0, 1.0),
    "plate_opacity": Range(0.0, 1.0),
    "plate_padding": Range(0.0, 1_000.0),
    "plate_roundness": Range(0.0, 1.0),
    "plate_stroke": Range(0.0, 1_000.0),
    "margin": Range(-10_000.0, 10_000.0),
    "offset_x": Range(-100_000.0, 100_000.0),
    "offset_y": Range(-100_000.0, 100_000.0),
    "box_size": Range(0.0, 100_000.0),
}


def fit_label_size(pixels: float, relative: bool, height: int) -> float:
    """A label size of ``pixels``; one relative to the frame's ``height`` (``relative``) is kept inside the
    drawable range, ``LABEL_RANGES['size']``, with a warning, so that a very small or very large frame still
    gets labels. A size given in pixels is kept as it is (:class:`LabelStyle` refuses it out of range)."""
    limits = LABEL_RANGES["size"]
    fitted = min(max(pixels, limits.low), limits.high)
    if not relative or fitted == pixels:
        return pixels
    LOGGER.warning("label size %.2f px (relative to the %d px frame height) is outside the font's %g..%g px; "
                   "labels are drawn at %g px", pixels, height, limits.low, limits.high, fitted)
    return fitted


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


@dataclass(frozen=True)
class TrailStyle:
    """How motion trails look: each point's last ``length`` positions as one line.

    The line is ``width`` wide at the point (the head) and narrows linearly to
    ``(1 - taper) * width`` at the tail; its alpha falls from 1 at the head to 0
    at the tail as ``(1 - age / (length - 1)) ** fade`` (1 = linear, larger
    fades sooner). ``smoothing`` 0..1 averages each position over a centred
    window of up to ``2 * TRAIL_SMOOTHING_FRAMES + 1`` frames against jitter.
    ``color_mode='track'`` colours each trail from the track palette.
    """

    length: int = 30
    width: float = 3.0
    taper: float = 0.8
    fade: float = 1.0
    smoothing: float = 0.3
    color: str = "#FFFFFF"
    color_mode: str = "single"
    opacity: float = 0.8

    def __post_init__(self):
        ranges = TRAIL_RANGES
        check_range("trail length (frames)", self.length, ranges["length"], integer=True)
        check_range("trail width", self.width, ranges["width"])
        check_range("trail taper", self.taper, ranges["taper"])
        check_range("trail fade", self.fade, ranges["fade"])
        check_range("trail smoothing", self.smoothing, ranges["smoothing"])
        parse_color(self.color, "trail color")
        check_choice("trail color_mode", self.color_mode, PALETTE_MODES)
        check_range("trail opacity", self.opacity, ranges["opacity"])

    @property
    def smoothing_frames(self) -> int:
        """Half the averaging window in frames (0: no smoothing)."""
        return round(self.smoothing * TRAIL_SMOOTHING_FRAMES)


def check_label_format(template: str) -> None:
    """Raise ``ValueError`` unless ``template`` is a format string over :data:`LABEL_FIELDS` alone."""
    example = "e.g. '{id:03d}' or '{x:.0f},{y:.0f}'"
    if not isinstance(template, str):
        raise TypeError(f"label format must be text, {example}; got {type(template).__name__}")
    try:
        fields = [(name, spec) for _, name, spec, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as error:
        raise ValueError(f"label format {template!r} is not a format string ({error}); write fields in braces, "
                         f"{example}, and double literal braces ({{{{ and }}}})") from None
    known = ", ".join(LABEL_FIELDS)
    for name, spec in fields:
        if name not in LABEL_FIELDS:
            raise ValueError(f"label format {template!r} uses {{{name}}}; the fields are {known} ({example})")
        if "{" in spec:
            raise ValueError(f"label format {template!r}: {{{name}:{spec}}} nests a field; give the format "
                             "spec literally")
    try:
        template.format(**LABEL_FIELDS)
    except (ValueError, TypeError) as error:
        raise ValueError(f"label format {template!r} does not fit its fields ({error}); id and frame are whole "
                         f"numbers, x, y, w and h decimals, text is text ({example})") from None


@dataclass(frozen=True)
class LabelStyle:
    """How text labels look and where they sit.

    ``text`` picks what each label says: the track ``id``, its ``coordinates``,
    ``format`` (a Python format string over :data:`LABEL_FIELDS`, e.g.
    ``{id:03d}``), or the track's own text (``track_text``). ``size`` is the
    font's pixel size (em); ``font`` a font file, empty for the bundled DejaVu
    Sans. Labels sit at ``placement`` around a box of ``box_size`` (or the
    track's own size with ``box_size_mode='track'``), ``margin`` pixels away
    from it and shifted by ``offset_x``/``offset_y``. The plate is a rounded
    box behind the text, ``plate_padding`` pixels (rounded to whole pixels)
    around it, with an optional outline ``plate_stroke`` wide.
    """

    text: str = "id"
    format: str = "{id}"
    size: float = 12.0
    font: str = ""
    color: str = "#FFFFFF"
    color_mode: str = "single"
    opacity: float = 1.0
    plate_color: str = "#000000"
    plate_opacity: float = 0.55
    plate_padding: float = 3.0
    plate_roundness: float = 0.3
    plate_stroke: float = 0.0
    plate_stroke_color: str = "#FFFFFF"
    placement: str = "top_left"
    margin: float = 4.0
    offset_x: float = 0.0
    offset_y: float = 0.0
    box_size: float = 40.0
    box_size_mode: str = "fixed"

    def __post_init__(self):
        from .glyphs import check_font

        ranges = LABEL_RANGES
        check_choice("label text", self.text, LABEL_TEXTS)
        if self.text == "format":
            check_label_format(self.format)
        for name in ("size", "opacity", "plate_opacity", "plate_padding", "plate_roundness", "plate_stroke",
                     "margin", "offset_x", "offset_y", "box_size"):
            check_range(f"label {name.replace('_', ' ')}", getattr(self, name), ranges[name])
        for name in ("color", "plate_color", "plate_stroke_color"):
            parse_color(getattr(self, name), f"label {name}")
        check_choice("label color_mode", self.color_mode, PALETTE_MODES)
        check_choice("label placement", self.placement, LABEL_PLACEMENTS)
        check_choice("label box_size_mode", self.box_size_mode, SIZE_MODES)
        check_font(self.font)

    @property
    def template(self) -> str:
        """The format string every label is made with."""
        return {"id": "{id}", "coordinates": "{x:.0f}, {y:.0f}", "track_text": "{text}"}.get(self.text, self.format)
