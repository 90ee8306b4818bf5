"""Draw the tracking overlay on a video, streaming frame by frame.

    python examples/overlay_video.py                      # the built-in demo -> overlay_demo.mp4
    python examples/overlay_video.py clip.mp4             # detect points -> clip_overlay.mp4 beside clip.mp4
    python examples/overlay_video.py clip.mp4 --tracks tracks.json -o out.mov
    python examples/overlay_video.py clip.mp4 --layer-only -o overlay.mov   # ProRes 4444 with alpha
    python examples/overlay_video.py clip.mp4 --start-frame 0 --end-frame 100 -o part1.mp4
    python examples/overlay_video.py --size 1920x1080 --frames 60   # dark canvas, synthetic tracks
    python examples/overlay_video.py clip.mp4 --trails --trail-length 20 --trail-color-mode track
    python examples/overlay_video.py clip.mp4 --labels format --label-format "#{id:03d}"   # text labels
    python examples/overlay_video.py clip.mp4 --tracks tracks.json --backend gpu --decoder nvdec  # GPU decode

Without INPUT it renders the built-in procedural demo (glowing dots that are
detected and tracked like any video); with --size, --frames or --tracks and no
INPUT it draws on a plain dark canvas. The output's extension picks its format
(.mp4/.mov H.264 or HEVC, .webm VP9, .gif, a folder ending in / for PNGs); it
keeps the input's size, frame times, orientation and audio, and is written
atomically: it never replaces an input, and an existing file is replaced only
by a complete one. Errors print one line and exit with status 2; SIGINT, SIGTERM
and SIGHUP stop it cleanly (no file written) with status 130, 143 and 129.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import signal
import sys
import time

import av
from tqdm import tqdm
from trackoverlay.utils.core.log import LOGGER
from trackoverlay.utils.core.memory import keep_freed_memory
from trackoverlay.utils.draw.curves import BEND_SIDES, CURVE_KINDS
from trackoverlay.utils.draw.styles import (
    BOX_SHAPES,
    COLOR_MODES,
    PALETTE_MODES,
    DEFAULT_GRADIENT,
    LABEL_PLACEMENTS,
    LABEL_TEXTS,
    LINE_PATTERNS,
    SIZE_MODES,
    BoxStyle,
    LabelStyle,
    LineStyle,
    TrailStyle,
    fit_label_size,
)
from trackoverlay.utils.draw.units import DEFAULT_LOOK, UNITS, look_lengths, pixels_per_unit
from trackoverlay.utils.graph.neighbours import MODES, GraphParams
from trackoverlay.utils.raster.backend import BACKENDS, make_renderer
from trackoverlay.utils.raster.glow import Glow
from trackoverlay.utils.tracks.demo import DemoClip
from trackoverlay.utils.tracks.detect import METHODS, TrackDetector
from trackoverlay.utils.tracks.track_file import load_tracks_json
from trackoverlay.utils.video.budget import Budget
from trackoverlay.utils.video.formats import CODECS
from trackoverlay.utils.video.io import MAX_FPS, X264_PRESETS
from trackoverlay.utils.video.nvcodec import DECODERS, ENCODERS, choose_decoder, nvenc_writes
from trackoverlay.utils.video.paths import is_folder_spelling
from trackoverlay.utils.video.stream import (
    DemoPoints,
    DetectedPoints,
    FrameSource,
    OverlaySpec,
    TrackPoints,
    check_main_output,
    render_video,
)

PROG = "overlay_video.py"
DEMO_NAME = "overlay_demo"
CANVAS_NAME = "overlay_canvas"
CANVAS_SIZE = (1920, 1080)
CANVAS_FRAMES = 90
TRAIL = TrailStyle()  # the trail options' defaults
MAX_FRAMES = 10_000_000  # a frame count or index above this is refused (over 3 days at 30 fps)
MAX_POINTS = 100_000
SIGNAL_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}
if hasattr(signal, "SIGHUP"):
    SIGNAL_STATUS[signal.SIGHUP] = 129


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad command line in one line (exit status 2)."""

    def error(self, message):
        _say(f"{self.prog}: error: {message} (see --help)")
        self.exit(2)


def whole(low: int, high: int):
    """An argparse type: a whole number in ``low..high`` (no 400-digit surprises)."""
    def parse(text: str) -> int:
        if not re.fullmatch(r"\s*[+-]?[0-9]{1,12}\s*", text) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number in {low}..{high:,}, got {text}")
        return int(text)
    return parse


def finite(text: str) -> float:
    """An argparse type: a finite decimal number (no nan, inf or overflow)."""
    try:
        value = float(text) if re.fullmatch(r"\s*[+-]?[0-9._eE+-]{1,40}\s*", text) else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def size_type(text: str) -> tuple[int, int]:
    """``"1920x1080"`` -> (1920, 1080)."""
    match = re.fullmatch(r"\s*([0-9]{1,6})\s*[xX]\s*([0-9]{1,6})\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; write WIDTHxHEIGHT, e.g. 1920x1080")
    return int(match[1]), int(match[2])


def add_io_options(parser) -> None:
    parser.add_argument("input", nargs="?", help="video file to overlay (omit for the built-in demo)")
    parser.add_argument("-o", "--output", metavar="OUT", help="file to write; its extension picks the format: "
                        ".mp4 or .mov (H.264, or HEVC with --codec hevc), .webm (VP9), .gif, or a new folder "
                        f"ending in / for PNGs (default: INPUT_overlay.mp4 beside INPUT, {DEMO_NAME}.mp4 for the "
                        f"demo, {CANVAS_NAME}.mp4 for a canvas; _layer.mov with --layer-only)")
    parser.add_argument("--layer-only", action="store_true", help="write the overlay alone with straight alpha, "
                        "for compositing: .mov (ProRes 4444), .webm (VP9) or a folder ending in / (RGBA PNGs)")
    parser.add_argument("--codec", choices=CODECS, default="h264", help=".mp4/.mov video codec "
                        "(default: %(default)s)")
    parser.add_argument("--no-audio", action="store_true", help="drop the input's audio (default: keep it, "
                        "copied when the format allows, else re-encoded)")
    parser.add_argument("--tracks", metavar="FILE.json", help="draw these tracks (this pack's tracks JSON) "
                        "instead of detecting points")
    parser.add_argument("--backend", choices=BACKENDS, default="auto", help="renderer, and where detection "
                        "follows points; auto = GPU when CuPy can use one, else CPU (default: %(default)s)")
    parser.add_argument("--decoder", choices=DECODERS, default="auto", help="who decodes INPUT: nvdec = the GPU's "
                        "video decoder, frames straight into GPU memory (needs the nvcodec extra, PyNvVideoCodec); "
                        "cpu = PyAV. auto = nvdec when the GPU renderer draws, no points are detected (detection "
                        "reads the frames on the host), NVENC encodes the output (x264 takes host frames, drawn "
                        "faster in PyAV's YUV) and NVDEC is there, else cpu; files NVDEC does not take "
                        "(10-bit, 4:2:2/4:4:4, odd sizes, interlaced) decode on the CPU (default: %(default)s)")
    parser.add_argument("--encoder", choices=ENCODERS, default="auto", help="who encodes .mp4/.mov: nvenc = the "
                        "GPU's video encoder (nvcodec extra; consumer GPUs have it, H100/H200 do not); cpu = "
                        "x264/x265. auto = nvenc where it starts, else cpu, the reason logged (default: %(default)s)")
    parser.add_argument("--png-dir", metavar="DIR", help="also write every frame as DIR/frame_000000.png, ... "
                        "(DIR must be new or empty)")
    parser.add_argument("--start-frame", type=whole(0, MAX_FRAMES), default=0, metavar="N", help="first frame "
                        "to render (0-based; default: %(default)s)")
    parser.add_argument("--end-frame", type=whole(1, MAX_FRAMES), metavar="N", help="render up to frame N - 1; "
                        "parts N0..N1 and N1..N2 join without a seam (default: the end)")
    parser.add_argument("--max-frames", type=whole(1, MAX_FRAMES), metavar="N", help="stop after N frames")
    parser.add_argument("--warmup-frames", type=whole(0, MAX_FRAMES), metavar="N", help="with detection and "
                        "--start-frame: let the detector see only the N frames before the range (faster, close "
                        "but not equal to the whole render; default: every earlier frame, exact)")
    parser.add_argument("--memory-limit", type=finite, metavar="GB", help="refuse a render whose estimated "
                        "memory exceeds this (default: half the memory the system reports as available)")
    parser.add_argument("--crf", type=whole(0, 51), default=18, metavar="N", help="quality 0..51, lower is "
                        "better (default: %(default)s)")
    parser.add_argument("--preset", choices=X264_PRESETS, default="medium", metavar="PRESET", help="encoder speed: "
                        f"{', '.join(X264_PRESETS)}; faster makes bigger files (default: %(default)s)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    canvas = parser.add_argument_group("blank canvas (no INPUT; any of these, or --tracks, selects it)")
    canvas.add_argument("--size", type=size_type, metavar="WxH", help=f"canvas size (default: the size of the "
                        f"frames the tracks were found on, else {CANVAS_SIZE[0]}x{CANVAS_SIZE[1]})")
    canvas.add_argument("--frames", type=whole(0, MAX_FRAMES), metavar="N", help="canvas length (default: the "
                        f"tracks' frame count, else {CANVAS_FRAMES})")
    canvas.add_argument("--fps", type=finite, help=f"canvas frame rate, up to {MAX_FPS} (default: 30)")


def add_detect_options(parser) -> None:
    group = parser.add_argument_group("point detection (when no --tracks)")
    group.add_argument("--detect-method", choices=METHODS, help="default: bright for the demo, else corners")
    group.add_argument("--max-points", type=whole(1, MAX_POINTS), default=100, metavar="N", help="most points tracked at once "
                       "(default: %(default)s)")
    group.add_argument("--min-distance", type=finite, metavar="PX", help="spacing of new points (default: 20; "
                       "the demo: its own)")
    group.add_argument("--sensitivity", type=finite, default=0.5, metavar="F", help="0..1, higher finds more "
                       "(default: %(default)s)")
    group.add_argument("--redetect-interval", type=whole(1, MAX_FRAMES), default=5, metavar="N", help="look for new points "
                       "every N frames (default: %(default)s)")


def add_graph_options(parser) -> None:
    group = parser.add_argument_group("links (neighbour graph)")
    group.add_argument("--graph-mode", choices=MODES, default="knn", help="knn: k nearest; radius: all "
                       "within --radius; delaunay: the Delaunay triangulation; mst: the minimum spanning tree "
                       "(default: %(default)s)")
    group.add_argument("--k", type=whole(1, MAX_POINTS), default=3, metavar="N", help="neighbours per point (default: "
                       "%(default)s)")
    group.add_argument("--radius", type=finite, metavar="SIZE", help="link distance in radius mode "
                       f"(default: {look('radius')})")
    group.add_argument("--max-length", type=finite, metavar="SIZE", help="drop longer links; 0 = no cap "
                       "(default: 0)")
    group.add_argument("--delta-y-cap", type=finite, metavar="SIZE", help="drop links rising or falling more; "
                       "0 = no cap (default: 0)")
    group.add_argument("--degree-cap", type=whole(0, MAX_POINTS), default=0, metavar="N", help="most links per point; 0 = no "
                       "cap (default: %(default)s)")
    group.add_argument("--hysteresis", type=finite, default=0.25, metavar="F", help="0..1 (below 1): existing "
                       "links may be this much longer before they switch, against flicker (default: %(default)s)")


def add_style_options(parser) -> None:
    parser.add_argument("--units", choices=("percent", "pixels"), default="percent", help="unit of every SIZE "
                        "option: percent of the frame height (one look at any resolution) or pixels (default: "
                        "%(default)s)")
    parser.add_argument("--look", choices=("plain", "full"), help="plain: links and boxes; full: also motion "
                        "trails, id labels and glow (each still set by its own options) (default: full for the "
                        "built-in demo, else plain)")
    lines = parser.add_argument_group("line style")
    lines.add_argument("--no-lines", action="store_true", help="draw no links")
    lines.add_argument("--line-width", type=finite, metavar="SIZE", help=f"(default: {look('line_width')})")
    lines.add_argument("--line-color", default="#FFFFFF", metavar="HEX", help="#RRGGBB or #RRGGBBAA "
                       "(default: %(default)s)")
    lines.add_argument("--line-color-end", default="#00E5FF", metavar="HEX", help="gradient end colour "
                       "(default: %(default)s)")
    lines.add_argument("--gradient", action="store_true", help="fade each link from its start to its end colour")
    lines.add_argument("--line-opacity", type=finite, default=0.65, metavar="F", help="0..1 (default: %(default)s)")
    lines.add_argument("--pattern", choices=LINE_PATTERNS, default="solid", help="(default: %(default)s)")
    lines.add_argument("--dash-length", type=finite, metavar="SIZE", help=f"(default: {look('dash_length')})")
    lines.add_argument("--gap-length", type=finite, metavar="SIZE", help=f"(default: {look('gap_length')})")
    lines.add_argument("--curve", choices=CURVE_KINDS, default="quadratic", help="(default: %(default)s)")
    lines.add_argument("--bend", type=finite, default=0.2, metavar="F", help="-2..2, how far curves bow, as a "
                       "fraction of the link's length (default: %(default)s)")
    lines.add_argument("--bend-side", choices=BEND_SIDES, default="alternate", help="(default: %(default)s)")
    lines.add_argument("--color-mode", choices=COLOR_MODES, default="single", help="one colour, a palette "
                       "colour per track, or each track's speed, direction of motion or age through "
                       "--gradient-colors, for lines and boxes; trails and labels take single or track "
                       "(default: %(default)s)")
    lines.add_argument("--gradient-colors", default=DEFAULT_GRADIENT, metavar="HEX,HEX,...", help="two or more "
                       "colours, evenly spaced, for --color-mode speed, direction (round the colours: 0 degrees = "
                       "moving right, 90 = up) and age (default: %(default)s)")
    lines.add_argument("--speed-range", type=finite, metavar="SIZE", help="speed per frame that reaches the last "
                       f"gradient colour (default: {look('speed_range')} per frame)")
    lines.add_argument("--age-range", type=finite, default=90.0, metavar="FRAMES", help="age that reaches the "
                       "last gradient colour (default: %(default)s)")
    boxes = parser.add_argument_group("box style")
    boxes.add_argument("--no-boxes", action="store_true", help="draw no boxes")
    boxes.add_argument("--box-size", type=finite, metavar="SIZE", help="width and height "
                       f"(default: {look('box_size')})")
    boxes.add_argument("--box-size-mode", choices=SIZE_MODES, default="fixed", help="track: sizes from the "
                       "tracks file (default: %(default)s)")
    boxes.add_argument("--box-stroke", type=finite, metavar="SIZE", help="outline width; 0 = none "
                       f"(default: {look('box_stroke')})")
    boxes.add_argument("--box-color", default="#FFFFFF", metavar="HEX", help="(default: %(default)s)")
    boxes.add_argument("--box-opacity", type=finite, default=0.9, metavar="F", help="0..1 (default: %(default)s)")
    boxes.add_argument("--fill-opacity", type=finite, default=0.12, metavar="F", help="0..1, 0 = hollow "
                       "(default: %(default)s)")
    boxes.add_argument("--fill-color", metavar="HEX", help="(default: the outline colour)")
    boxes.add_argument("--roundness", type=finite, default=0.35, metavar="F", help="0..1, corner radius as a "
                       "fraction of half the shorter side (default: %(default)s)")
    boxes.add_argument("--box-shape", choices=BOX_SHAPES, default="rounded", help="(default: %(default)s)")
    boxes.add_argument("--bracket-length", type=finite, default=0.25, metavar="F", help="0..0.5, bracket arm "
                       "as a fraction of the shorter side (default: %(default)s)")
    trails = parser.add_argument_group("motion trails (the --trail-* options need --trails)")
    trails.add_argument("--trails", action="store_true", help="draw each point's recent path as a line that "
                        "narrows and fades toward its tail, under the links and boxes")
    trails.add_argument("--trail-length", type=whole(2, 240), metavar="N", help="frames of history per trail; a "
                        f"track that ends leaves its trail fading out over as many (default: {TRAIL.length})")
    trails.add_argument("--trail-width", type=finite, metavar="SIZE", help="width at the point "
                        f"(default: {look('trail_width')})")
    trails.add_argument("--trail-taper", type=finite, metavar="F", help="0..1, how much the trail narrows toward "
                        f"its tail, 1 = to nothing (default: {TRAIL.taper:g})")
    trails.add_argument("--trail-fade", type=finite, metavar="F", help="above 0, up to 10: opacity falls to 0 at "
                        f"the tail as (1 - age / length) ^ F; 1 = linear (default: {TRAIL.fade:g})")
    trails.add_argument("--trail-smoothing", type=finite, metavar="F", help="0..1, averages each position over up "
                        f"to 17 frames against jitter (default: {TRAIL.smoothing:g})")
    trails.add_argument("--trail-color", metavar="HEX", help=f"(default: {TRAIL.color})")
    trails.add_argument("--trail-color-mode", choices=PALETTE_MODES, help="one colour, or a palette colour per "
                        "track (default: --color-mode's)")
    trails.add_argument("--trail-opacity", type=finite, metavar="F", help=f"0..1 (default: {TRAIL.opacity:g})")


def add_label_options(parser) -> None:
    labels = parser.add_argument_group("labels (text beside every point)")
    labels.add_argument("--labels", choices=("none",) + LABEL_TEXTS, help="what each label says: the track id, "
                        "its coordinates, --label-format, or the track file's own text per track (default: none, "
                        "or format when --label-format is given)")
    labels.add_argument("--label-format", metavar="FMT", help="Python format string over {id}, {x}, {y}, {w}, "
                        "{h}, {frame} and {text}, e.g. '#{id:03d}' or '{x:.0f},{y:.0f}'")
    labels.add_argument("--label-size", type=finite, metavar="SIZE", help="font size (em) "
                        f"(default: {look('label_size')})")
    labels.add_argument("--label-font", metavar="FILE", help=".ttf or .otf font file (default: the bundled "
                        "DejaVu Sans)")
    labels.add_argument("--label-color", default="#FFFFFF", metavar="HEX", help="(default: %(default)s)")
    labels.add_argument("--label-color-mode", choices=PALETTE_MODES, default="single", help="one colour, or a "
                        "palette colour per track (default: %(default)s)")
    labels.add_argument("--label-opacity", type=finite, default=1.0, metavar="F", help="0..1 (default: "
                        "%(default)s)")
    labels.add_argument("--label-plate", default="#000000", metavar="HEX", help="colour of the plate behind "
                        "the text (default: %(default)s)")
    labels.add_argument("--label-plate-opacity", type=finite, default=0.55, metavar="F", help="0..1, 0 = no "
                        "plate (default: %(default)s)")
    labels.add_argument("--label-padding", type=finite, metavar="SIZE", help="room around the text inside the "
                        f"plate (default: {look('label_padding')})")
    labels.add_argument("--label-outline", type=finite, metavar="SIZE", help="plate outline width; 0 = none "
                        "(default: 0)")
    labels.add_argument("--label-outline-color", default="#FFFFFF", metavar="HEX", help="(default: %(default)s)")
    labels.add_argument("--label-placement", choices=LABEL_PLACEMENTS, default="top_left", help="where around "
                        "the box the label sits; labels never leave the frame (default: %(default)s)")
    labels.add_argument("--label-margin", type=finite, metavar="SIZE", help="gap between the box and the label "
                        f"(default: {look('label_margin')})")
    labels.add_argument("--label-offset", type=finite, nargs=2, default=(0.0, 0.0), metavar=("DX", "DY"),
                        help="extra shift right and down, in the --units of SIZE (default: 0 0)")
    glow = parser.add_argument_group("glow (a soft blurred halo under lines and boxes)")
    glow.add_argument("--glow-strength", type=finite, metavar="F", help="0..20, the halo's weight; "
                      f"0 = no glow (default: 0, or {FULL_LOOK_GLOW:g} with --look full)")
    glow.add_argument("--glow-radius", type=finite, metavar="SIZE", help="how far the halo reaches (the blur's "
                      f"sigma is a third of it; default: {look('glow_radius')})")


def _say(line: str) -> None:
    """One line to stderr; a closed or full stderr is ignored (never a traceback)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass


class QuietHandler(logging.StreamHandler):
    """Log lines to a stream, above any progress bar; a stream that fails (closed pipe, full disk) goes quiet."""

    def emit(self, record) -> None:
        if self.stream is None:
            return
        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 - whatever the stream raised, logging must not
            self.stream = None

    def handleError(self, record) -> None:
        self.stream = None


class ProgressBar:
    """A tqdm bar that appears with the first drawn frame (so early errors print alone) and is gone at the end.

    The run's last line is then the one summary line. A bar whose stream fails stops drawing, silently.
    """

    def __init__(self, total: int | None):
        self.total = total
        self.bar = None
        self.broken = sys.stderr is None

    def __call__(self, done: int) -> None:
        if self.broken:
            return
        try:
            if self.bar is None:
                self.bar = tqdm(total=self.total, unit="frame", dynamic_ncols=True, leave=False, file=sys.stderr)
            self.bar.update(done - self.bar.n)
        except (OSError, ValueError):
            self.broken = True

    def close(self) -> None:
        if self.bar is not None:
            try:
                self.bar.close()
            except (OSError, ValueError):
                pass


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description="Draw tracking-overlay boxes and neighbour links on a video, "
                           "streaming frame by frame. Without INPUT: the built-in demo.")
    for add in (add_io_options, add_detect_options, add_graph_options, add_style_options, add_label_options):
        add(parser)
    return parser


def look(name: str) -> str:
    """A default length as the help shows it."""
    return f"{DEFAULT_LOOK[name]:g}%% of the frame height"


def overlay_spec(args, height: int) -> OverlaySpec:
    """Graph and styles from the options for a frame ``height`` pixels tall (they validate themselves)."""
    size = look_lengths(height, UNITS[0] if args.units == "pixels" else UNITS[1],
                        **{name: getattr(args, name) for name in ("radius", "max_length", "delta_y_cap",
                                                                  "line_width", "dash_length", "gap_length",
                                                                  "box_size", "box_stroke", "trail_width",
                                                                  "glow_radius", "speed_range")})
    motion = {"gradient_colors": args.gradient_colors, "speed_range": size["speed_range"],
              "age_range": args.age_range}
    graph = GraphParams(mode=args.graph_mode, k=args.k, radius=size["radius"], max_length=size["max_length"],
                        delta_y_cap=size["delta_y_cap"], degree_cap=args.degree_cap, hysteresis=args.hysteresis)
    lines = None if args.no_lines else LineStyle(
        width=size["line_width"], color=args.line_color, color_end=args.line_color_end,
        color_mode=args.color_mode, gradient=args.gradient, opacity=args.line_opacity, pattern=args.pattern,
        dash_length=size["dash_length"], gap_length=size["gap_length"], curve=args.curve, bend=args.bend,
        bend_side=args.bend_side, **motion)
    boxes = None if args.no_boxes else BoxStyle(
        size=size["box_size"], size_mode=args.box_size_mode, stroke_width=size["box_stroke"], color=args.box_color,
        color_mode=args.color_mode, opacity=args.box_opacity, fill_opacity=args.fill_opacity,
        fill_color=args.fill_color, roundness=args.roundness, shape=args.box_shape,
        bracket_length=args.bracket_length, **motion)
    return OverlaySpec(graph, lines, boxes, trails=trail_style(args, size["trail_width"]),
                       labels=label_style(args, height, boxes),
                       glow=Glow(radius=size["glow_radius"], strength=args.glow_strength or 0.0))


TRAIL_OPTIONS = ("length", "taper", "fade", "smoothing", "color", "color_mode", "opacity")


def trail_style(args, width: float) -> TrailStyle | None:
    """The trails' style from the --trail-* options (None without --trails; the options need it)."""
    given = {name: getattr(args, f"trail_{name}") for name in TRAIL_OPTIONS + ("width",)
             if getattr(args, f"trail_{name}") is not None}
    if not args.trails:
        if given:
            raise ValueError(f"--trail-{next(iter(given)).replace('_', '-')} needs --trails (trails are off "
                             "unless asked for)")
        return None
    values = {name: given[name] for name in TRAIL_OPTIONS if name in given}
    values.setdefault("color_mode", args.color_mode if args.color_mode in PALETTE_MODES else "single")
    return TrailStyle(width=width, **values)


def label_style(args, height: int, boxes: BoxStyle | None) -> LabelStyle | None:
    """The labels' style from the options (None: no labels), placed around the boxes drawn (or the points)."""
    text = args.labels or ("format" if args.label_format is not None else "none")
    if text == "none":
        return None
    units = UNITS[0] if args.units == "pixels" else UNITS[1]
    size = look_lengths(height, units, **{name: getattr(args, name) for name in ("label_size", "label_padding",
                                                                               "label_margin", "label_outline")})
    scale = pixels_per_unit(units, height)
    return LabelStyle(
        text=text, format="{id}" if args.label_format is None else args.label_format,
        size=fit_label_size(size["label_size"], units == UNITS[1] or args.label_size is None, height),
        font=args.label_font or "", color=args.label_color, color_mode=args.label_color_mode,
        opacity=args.label_opacity, plate_color=args.label_plate, plate_opacity=args.label_plate_opacity,
        plate_padding=size["label_padding"], plate_stroke=size["label_outline"],
        plate_stroke_color=args.label_outline_color, placement=args.label_placement, margin=size["label_margin"],
        offset_x=args.label_offset[0] * scale, offset_y=args.label_offset[1] * scale,
        box_size=0.0 if boxes is None else boxes.size + boxes.stroke_width,
        box_size_mode="fixed" if boxes is None else boxes.size_mode)


def input_mode(args, tracks) -> str:
    """"video" with INPUT, "canvas" with canvas options or tracks but no INPUT, else "demo"."""
    canvas_options = [name for name in ("size", "frames", "fps") if getattr(args, name) is not None]
    if args.input is not None:
        if canvas_options:
            raise ValueError(f"--{canvas_options[0]} is for the blank canvas only; a video keeps its own "
                             "size, length and frame rate")
        return "video"
    return "canvas" if canvas_options or tracks is not None else "demo"


def default_output(args, mode: str) -> str:
    """``INPUT_overlay.mp4`` beside INPUT (``_layer.mov`` for the layer), or a demo/canvas name here."""
    suffix, extension = ("_layer", ".mov") if args.layer_only else ("_overlay", ".mp4")
    if mode == "video":
        folder, name = os.path.split(args.input)
        return os.path.join(folder, os.path.splitext(name)[0] + suffix + extension)
    stem = CANVAS_NAME if mode == "canvas" else DEMO_NAME
    return stem + ("_layer" if args.layer_only else "") + extension


def open_source(args, mode: str, tracks) -> FrameSource:
    """The frames to draw on."""
    if mode == "video":
        return FrameSource.from_video(args.input)
    if mode == "canvas":
        width, height = args.size or (tracks is not None and tracks.frame_size) or CANVAS_SIZE
        frames = args.frames
        if frames is None:
            frames = tracks.frame_count if tracks is not None and tracks.frame_count > 1 else CANVAS_FRAMES
        clip = DemoClip(width, height, frames, 30 if args.fps is None else args.fps)
        return FrameSource.from_demo(clip, canvas=True)
    return FrameSource.from_demo(DemoClip())


def point_source(args, mode: str, source: FrameSource, tracks):
    """Tracks from the file, the canvas's synthetic tracks, or detection in the frames."""
    if tracks is not None:
        return TrackPoints(tracks, name=f"tracks in {args.tracks}")
    if mode == "canvas":
        return DemoPoints(source.clip)
    chosen = {"method": args.detect_method, "min_distance": args.min_distance}
    defaults = source.clip.detect_params() if mode == "demo" else {}
    params = {**defaults, **{name: value for name, value in chosen.items() if value is not None}}
    return DetectedPoints(TrackDetector(args.max_points, sensitivity=args.sensitivity,
                                        redetect_interval=args.redetect_interval, backend=args.backend, **params),
                          warmup=args.warmup_frames)


def pick_decoder(args, mode: str, backend: str, points, source: FrameSource, output: str) -> str:
    """The decoder of INPUT, resolved to "nvdec" or "cpu" and logged with its reason."""
    if mode != "video":
        if args.decoder == "nvdec":
            raise ValueError("--decoder nvdec decodes a video INPUT; the demo and the canvas are drawn, not decoded")
        return "cpu"
    decoder, reason = choose_decoder(
        args.decoder, gpu_renderer=backend == "gpu", host_pixels=points.needs_frames,
        host_encoder=lambda: nvenc_writes(output, args.encoder, source.width, source.height,
                                          layer_only=args.layer_only, codec=args.codec))
    LOGGER.info("decoder: %s (%s)", decoder, reason)
    return decoder


def memory_budget(gigabytes: float | None) -> Budget:
    """The memory the render may use: ``gigabytes``, or the default share of what is available."""
    if gigabytes is None:
        return Budget()
    if gigabytes <= 0:
        raise ValueError(f"--memory-limit must be > 0 GB, got {gigabytes:g}")
    return Budget(int(gigabytes * 1e9))


def expected_frames(args, source: FrameSource) -> int | None:
    """How many frames the render should draw, for the progress bar (None: unknown)."""
    stops = [value for value in (source.frame_count or None, args.end_frame,
                                 None if args.max_frames is None else args.start_frame + args.max_frames)
             if value is not None]
    return max(0, min(stops) - args.start_frame) if stops else None


FULL_LOOK_GLOW = 1.5
"""Glow strength of ``--look full`` (unless --glow-strength is given)."""
FULL_LOOK_TRAIL_COLOR = "#00E5FF"
"""Trail colour of ``--look full`` (unless --trail-color is given): apart from the white links."""


def apply_look(args, mode: str) -> None:
    """``--look full`` (the demo's default) adds trails, id labels and glow where the options leave them unset."""
    look = args.look or ("full" if mode == "demo" else "plain")
    if look == "full":
        args.trails = True
        if args.trail_color is None:
            args.trail_color = FULL_LOOK_TRAIL_COLOR
        if args.labels is None and args.label_format is None:
            args.labels = "id"
        if args.glow_strength is None:
            args.glow_strength = FULL_LOOK_GLOW


def run(args) -> tuple[int, str]:
    """Render as the options say; returns the number of frames written and the output."""
    tracks = None if args.tracks is None else load_tracks_json(args.tracks)
    if args.labels == "track_text" and (tracks is None or tracks.text is None):
        raise ValueError("--labels track_text needs a track file whose tracks carry text: give --tracks with a "
                         "'text' list (one string per track), or pick another --labels")
    mode = input_mode(args, tracks)
    apply_look(args, mode)
    output = args.output if args.output is not None else default_output(args, mode)
    # an output that cannot be written is told before any work (the writers check it again when they open it)
    check_main_output(output, [args.input, args.tracks], args.layer_only, args.codec)
    source = open_source(args, mode, tracks)
    renderer = None
    try:
        spec = overlay_spec(args, source.height)
        points = point_source(args, mode, source, tracks)
        renderer, info = make_renderer(args.backend)
        source.decoder = pick_decoder(args, mode, info.selected, points, source, output)
    except BaseException:
        source.close()
        if renderer is not None:
            renderer.close()
        raise
    LOGGER.info("renderer: %s", info.selected)
    LOGGER.debug("backend:\n%s", info.describe())
    what = "PNG sequence" if is_folder_spelling(output) else "video"
    LOGGER.info("%s: %dx%d at %.3g fps -> %s %s%s", args.input or mode, source.width, source.height,
                float(source.fps), what, output, " (overlay only, straight alpha)" if args.layer_only else "")
    bar = ProgressBar(expected_frames(args, source))
    try:
        count = render_video(source, points, spec, renderer, output, png_dir=args.png_dir,
                             max_frames=args.max_frames, crf=args.crf, preset=args.preset, progress=bar,
                             start_frame=args.start_frame, end_frame=args.end_frame, layer_only=args.layer_only,
                             codec=args.codec, audio=not args.no_audio, inputs=[args.tracks],
                             budget=memory_budget(args.memory_limit), encoder=args.encoder)
    finally:
        bar.close()
        renderer.close()
    return count, output


class Stopped(BaseException):
    """A termination signal (SIGTERM, SIGHUP) raised where the program is, like Ctrl-C's KeyboardInterrupt."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def install_signal_handlers() -> None:
    """SIGINT, SIGTERM and SIGHUP stop the run through the same clean-up; a second signal is ignored."""
    received = []

    def stop(signum, frame):
        if received:
            return
        received.append(signum)
        raise KeyboardInterrupt if signum == signal.SIGINT else Stopped(signum)

    for signum in SIGNAL_STATUS:
        signal.signal(signum, stop)


def setup_logging(verbose: bool) -> None:
    """Log lines to stdout (stderr carries the progress bar and errors only)."""
    for old in [h for h in LOGGER.handlers if isinstance(h, QuietHandler)]:
        LOGGER.removeHandler(old)
    handler = QuietHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.DEBUG if verbose else logging.INFO)
    LOGGER.propagate = False


def flush_streams() -> None:
    """Flush stdout/stderr now; if they are closed or full, point them at /dev/null so exit stays quiet."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
            except (OSError, ValueError):
                pass


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose)
    started = time.monotonic()
    if __name__ == "__main__":
        install_signal_handlers()
    keep_freed_memory()  # this process is the CLI's own
    try:
        count, output = run(args)
    except (ValueError, TypeError, OSError, RuntimeError, MemoryError, av.error.FFmpegError) as error:
        _say(f"{PROG}: error: {' '.join(str(error).split())}")
        return 2
    except KeyboardInterrupt:
        _say(f"{PROG}: interrupted (SIGINT); no video was written")
        return SIGNAL_STATUS[signal.SIGINT]
    except Stopped as stop:
        _say(f"{PROG}: stopped by {signal.Signals(stop.signum).name}; no video was written")
        return SIGNAL_STATUS[stop.signum]
    finally:
        flush_streams()
    seconds = time.monotonic() - started
    LOGGER.info("wrote %d frames to %s in %.1f s (%.1f frames/s)", count, output, seconds, count / max(seconds, 1e-9))
    flush_streams()
    return 0


if __name__ == "__main__":
    sys.exit(main())
