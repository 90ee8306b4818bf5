"""Draw the tracking overlay on a video, streaming frame by frame.

    python examples/overlay_video.py                      # the built-in demo -> overlay_demo.mp4
    python examples/overlay_video.py clip.mp4 -o out.mp4  # detect points in clip.mp4 and overlay them
    python examples/overlay_video.py clip.mp4 --tracks tracks.json --png-dir frames/
    python examples/overlay_video.py --size 1920x1080 --frames 60   # dark canvas, synthetic tracks

Without INPUT it renders the built-in procedural demo (glowing dots that are
detected and tracked like any video); with --size, --frames or --tracks and no
INPUT it draws on a plain dark canvas. The output is an H.264 MP4 with the
input's size and frame rate, written atomically. Errors print one line and
exit with status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys

import av
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm
from trackoverlay.utils.core.log import LOGGER
from trackoverlay.utils.draw.curves import BEND_SIDES, CURVE_KINDS
from trackoverlay.utils.draw.styles import BOX_SHAPES, COLOR_MODES, LINE_PATTERNS, SIZE_MODES, BoxStyle, LineStyle
from trackoverlay.utils.draw.units import DEFAULT_LOOK, UNITS, look_lengths
from trackoverlay.utils.graph.neighbours import MODES, GraphParams
from trackoverlay.utils.raster.backend import BACKENDS, make_renderer
from trackoverlay.utils.tracks.demo import DemoClip
from trackoverlay.utils.tracks.detect import METHODS, TrackDetector
from trackoverlay.utils.tracks.track_file import load_tracks_json
from trackoverlay.utils.video.io import X264_PRESETS
from trackoverlay.utils.video.stream import (
    DemoPoints,
    DetectedPoints,
    FrameSource,
    OverlaySpec,
    TrackPoints,
    render_video,
)

PROG = "overlay_video.py"
DEMO_OUTPUT = "overlay_demo.mp4"
CANVAS_OUTPUT = "overlay_canvas.mp4"
CANVAS_SIZE = (1920, 1080)
CANVAS_FRAMES = 90


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad command line in one line (exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def size_type(text: str) -> tuple[int, int]:
    """``"1920x1080"`` -> (1920, 1080)."""
    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; write WIDTHxHEIGHT, e.g. 1920x1080")
    return int(match[1]), int(match[2])


def add_io_options(parser) -> None:
    parser.add_argument("input", nargs="?", help="video file to overlay (omit for the built-in demo)")
    parser.add_argument("-o", "--output", metavar="OUT.mp4", help=f"MP4 to write (default: {DEMO_OUTPUT} for the "
                        f"demo, {CANVAS_OUTPUT} for a canvas, INPUT_overlay.mp4 for a video)")
    parser.add_argument("--tracks", metavar="FILE.json", help="draw these tracks (this pack's tracks JSON) "
                        "instead of detecting points")
    parser.add_argument("--backend", choices=BACKENDS, default="auto", help="renderer; auto = GPU when CuPy "
                        "can use one, else CPU (default: %(default)s)")
    parser.add_argument("--png-dir", metavar="DIR", help="also write every frame as DIR/frame_000000.png, ...")
    parser.add_argument("--max-frames", type=int, metavar="N", help="stop after N frames")
    parser.add_argument("--crf", type=int, default=18, metavar="N", help="H.264 quality 0..51, lower is "
                        "better (default: %(default)s)")
    parser.add_argument("--preset", choices=X264_PRESETS, default="medium", metavar="PRESET", help="x264 speed: "
                        f"{', '.join(X264_PRESETS)}; faster makes bigger files (default: %(default)s)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    canvas = parser.add_argument_group("blank canvas (no INPUT; any of these, or --tracks, selects it)")
    canvas.add_argument("--size", type=size_type, metavar="WxH", help=f"canvas size (default: "
                        f"{CANVAS_SIZE[0]}x{CANVAS_SIZE[1]})")
    canvas.add_argument("--frames", type=int, metavar="N", help=f"canvas length (default: the tracks' frame "
                        f"count, else {CANVAS_FRAMES})")
    canvas.add_argument("--fps", type=float, help="canvas frame rate (default: 30)")


def add_detect_options(parser) -> None:
    group = parser.add_argument_group("point detection (when no --tracks)")
    group.add_argument("--detect-method", choices=METHODS, help="default: bright for the demo, else corners")
    group.add_argument("--max-points", type=int, default=100, metavar="N", help="most points tracked at once "
                       "(default: %(default)s)")
    group.add_argument("--min-distance", type=float, metavar="PX", help="spacing of new points (default: 20; "
                       "the demo: its own)")
    group.add_argument("--sensitivity", type=float, default=0.5, metavar="F", help="0..1, higher finds more "
                       "(default: %(default)s)")
    group.add_argument("--redetect-interval", type=int, default=5, metavar="N", help="look for new points "
                       "every N frames (default: %(default)s)")


def add_graph_options(parser) -> None:
    group = parser.add_argument_group("links (neighbour graph)")
    group.add_argument("--graph-mode", choices=MODES, default="knn", help="knn: k nearest; radius: all "
                       "within --radius (default: %(default)s)")
    group.add_argument("--k", type=int, default=3, metavar="N", help="neighbours per point (default: "
                       "%(default)s)")
    group.add_argument("--radius", type=float, metavar="SIZE", help="link distance in radius mode "
                       f"(default: {look('radius')})")
    group.add_argument("--max-length", type=float, metavar="SIZE", help="drop longer links; 0 = no cap "
                       "(default: 0)")
    group.add_argument("--delta-y-cap", type=float, metavar="SIZE", help="drop links rising or falling more; "
                       "0 = no cap (default: 0)")
    group.add_argument("--degree-cap", type=int, default=0, metavar="N", help="most links per point; 0 = no "
                       "cap (default: %(default)s)")
    group.add_argument("--hysteresis", type=float, default=0.25, metavar="F", help="0..1 (below 1): existing "
                       "links may be this much longer before they switch, against flicker (default: %(default)s)")


def add_style_options(parser) -> None:
    parser.add_argument("--units", choices=("percent", "pixels"), default="percent", help="unit of every SIZE "
                        "option: percent of the frame height (one look at any resolution) or pixels (default: "
                        "%(default)s)")
    lines = parser.add_argument_group("line style")
    lines.add_argument("--no-lines", action="store_true", help="draw no links")
    lines.add_argument("--line-width", type=float, metavar="SIZE", help=f"(default: {look('line_width')})")
    lines.add_argument("--line-color", default="#FFFFFF", metavar="HEX", help="#RRGGBB or #RRGGBBAA "
                       "(default: %(default)s)")
    lines.add_argument("--line-color-end", default="#00E5FF", metavar="HEX", help="gradient end colour "
                       "(default: %(default)s)")
    lines.add_argument("--gradient", action="store_true", help="fade each link from its start to its end colour")
    lines.add_argument("--line-opacity", type=float, default=0.65, metavar="F", help="0..1 (default: %(default)s)")
    lines.add_argument("--pattern", choices=LINE_PATTERNS, default="solid", help="(default: %(default)s)")
    lines.add_argument("--dash-length", type=float, metavar="SIZE", help=f"(default: {look('dash_length')})")
    lines.add_argument("--gap-length", type=float, metavar="SIZE", help=f"(default: {look('gap_length')})")
    lines.add_argument("--curve", choices=CURVE_KINDS, default="quadratic", help="(default: %(default)s)")
    lines.add_argument("--bend", type=float, default=0.2, metavar="F", help="-2..2, how far curves bow, as a "
                       "fraction of the link's length (default: %(default)s)")
    lines.add_argument("--bend-side", choices=BEND_SIDES, default="alternate", help="(default: %(default)s)")
    lines.add_argument("--color-mode", choices=COLOR_MODES, default="single", help="one colour, or a palette "
                       "colour per track, for lines and boxes (default: %(default)s)")
    boxes = parser.add_argument_group("box style")
    boxes.add_argument("--no-boxes", action="store_true", help="draw no boxes")
    boxes.add_argument("--box-size", type=float, metavar="SIZE", help="width and height "
                       f"(default: {look('box_size')})")
    boxes.add_argument("--box-size-mode", choices=SIZE_MODES, default="fixed", help="track: sizes from the "
                       "tracks file (default: %(default)s)")
    boxes.add_argument("--box-stroke", type=float, metavar="SIZE", help="outline width; 0 = none "
                       f"(default: {look('box_stroke')})")
    boxes.add_argument("--box-color", default="#FFFFFF", metavar="HEX", help="(default: %(default)s)")
    boxes.add_argument("--box-opacity", type=float, default=0.9, metavar="F", help="0..1 (default: %(default)s)")
    boxes.add_argument("--fill-opacity", type=float, default=0.12, metavar="F", help="0..1, 0 = hollow "
                       "(default: %(default)s)")
    boxes.add_argument("--fill-color", metavar="HEX", help="(default: the outline colour)")
    boxes.add_argument("--roundness", type=float, default=0.35, metavar="F", help="0..1, corner radius as a "
                       "fraction of half the shorter side (default: %(default)s)")
    boxes.add_argument("--box-shape", choices=BOX_SHAPES, default="rounded", help="(default: %(default)s)")
    boxes.add_argument("--bracket-length", type=float, default=0.25, metavar="F", help="0..0.5, bracket arm "
                       "as a fraction of the shorter side (default: %(default)s)")


class LazyBar:
    """A tqdm bar that appears with the first finished frame (so early errors print alone)."""

    def __init__(self, total: int | None):
        self.total = total
        self.bar = None

    def __call__(self, done: int) -> None:
        if self.bar is None:
            self.bar = tqdm(total=self.total, unit="frame", dynamic_ncols=True)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description="Draw tracking-overlay boxes and neighbour links on a video, "
                           "streaming frame by frame. Without INPUT: the built-in demo.")
    for add in (add_io_options, add_detect_options, add_graph_options, add_style_options):
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
                                                                  "box_size", "box_stroke")})
    graph = GraphParams(mode=args.graph_mode, k=args.k, radius=size["radius"], max_length=size["max_length"],
                        delta_y_cap=size["delta_y_cap"], degree_cap=args.degree_cap, hysteresis=args.hysteresis)
    lines = None if args.no_lines else LineStyle(
        width=size["line_width"], color=args.line_color, color_end=args.line_color_end,
        color_mode=args.color_mode, gradient=args.gradient, opacity=args.line_opacity, pattern=args.pattern,
        dash_length=size["dash_length"], gap_length=size["gap_length"], curve=args.curve, bend=args.bend,
        bend_side=args.bend_side)
    boxes = None if args.no_boxes else BoxStyle(
        size=size["box_size"], size_mode=args.box_size_mode, stroke_width=size["box_stroke"], color=args.box_color,
        color_mode=args.color_mode, opacity=args.box_opacity, fill_opacity=args.fill_opacity,
        fill_color=args.fill_color, roundness=args.roundness, shape=args.box_shape,
        bracket_length=args.bracket_length)
    return OverlaySpec(graph, lines, boxes)


def input_mode(args, tracks) -> str:
    """"video" with INPUT, "canvas" with canvas options or tracks but no INPUT, else "demo"."""
    canvas_options = [name for name in ("size", "frames", "fps") if getattr(args, name) is not None]
    if args.input is not None:
        if canvas_options:
            raise ValueError(f"--{canvas_options[0]} is for the blank canvas only; a video keeps its own "
                             "size, length and frame rate")
        return "video"
    return "canvas" if canvas_options or tracks is not None else "demo"


def open_source(args, mode: str, tracks) -> tuple[FrameSource, str]:
    """The frames to draw on and the default output name."""
    if mode == "video":
        stem = os.path.splitext(os.path.basename(args.input))[0]
        return FrameSource.from_video(args.input), f"{stem}_overlay.mp4"
    if mode == "canvas":
        width, height = args.size or CANVAS_SIZE
        frames = args.frames
        if frames is None:
            frames = tracks.frame_count if tracks is not None and tracks.frame_count > 1 else CANVAS_FRAMES
        clip = DemoClip(width, height, frames, 30 if args.fps is None else args.fps)
        return FrameSource.from_demo(clip, canvas=True), CANVAS_OUTPUT
    return FrameSource.from_demo(DemoClip()), DEMO_OUTPUT


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
                                        redetect_interval=args.redetect_interval, **params))


def run(args) -> int:
    """Render as the options say; returns the number of frames written."""
    tracks = None if args.tracks is None else load_tracks_json(args.tracks)
    mode = input_mode(args, tracks)
    source, default_output = open_source(args, mode, tracks)
    try:
        spec = overlay_spec(args, source.height)
        points = point_source(args, mode, source, tracks)
    except BaseException:
        source.close()
        raise
    renderer, info = make_renderer(args.backend)
    LOGGER.info("renderer: %s", info.selected)
    LOGGER.debug("backend:\n%s", info.describe())
    output = args.output or default_output
    total = min(filter(None, (source.frame_count, args.max_frames)), default=None)
    LOGGER.info("%s: %dx%d at %.3g fps -> %s", args.input or mode, source.width, source.height,
                float(source.fps), output)
    bar = LazyBar(total)
    try:
        with logging_redirect_tqdm():
            count = render_video(source, points, spec, renderer, output, png_dir=args.png_dir,
                                 max_frames=args.max_frames, crf=args.crf, preset=args.preset, progress=bar)
    finally:
        bar.close()
    LOGGER.info("wrote %d frames to %s", count, output)
    return count


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, stream=sys.stdout,
                        format="%(levelname)s: %(message)s")  # stderr: progress bar and errors only
    try:
        run(args)
    except (ValueError, TypeError, OSError, RuntimeError, av.error.FFmpegError) as error:
        message = " ".join(str(error).split())
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; no video was written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
