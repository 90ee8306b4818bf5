"""Measure how good the tracks of a clip are: the numbers behind a stable overlay.

    python examples/track_quality.py                          # the built-in demo, detected as the CLI does
    python examples/track_quality.py clip.mp4                 # any video, Detect Tracks' defaults
    python examples/track_quality.py clip.mp4 --method motion --max-points 60
    python examples/track_quality.py clip.mp4 --tracks tracks.json --mask-dir masks/ --cuts 49,101
    python examples/track_quality.py clip.mp4 --subject-dir masks/ --mask-dir masks/
    python examples/track_quality.py clip.mp4 --json quality.json

For the clip's tracks (detected with ``detect_tracks``, whose every option is
an option here, defaulting as in Detect Tracks, or for the demo as in
overlay_video.py, with --subject-dir as its subject masks, or read from
--tracks) it prints:

  tracks started     tracks visible in at least one frame
  one-frame share    share of them visible in a single frame (popping)
  median life        median frames a track is visible
  frames w/o point   frames where nothing would be drawn
  mean live points   points visible per frame, on average
  count swing        median range of the live count within each redetection window
  on moving pixels   share of visible points on pixels that move: the ground-truth
                     masks of --mask-dir (PNG per frame, nonzero = moving), or else
                     pixels that change once the camera's motion is taken out
  detect ms/frame    detection time per frame (when detecting)

With --cuts (first frame of each new shot) it also prints the frames without
a point next to each cut and the tracks seen on both sides of a cut. On the
demo it also checks the last frame against the dots' true positions: boxes
farther than --near pixels from every dot, and dots with no box that near;
and over the whole clip, how often a dot's track id changes while the dot is
clear of the others (twice --near from any), and how often such a dot has no
box within --near pixels.
"""

from __future__ import annotations

import argparse
import glob
import inspect
import json
import os
import sys
import time

import cv2
import numpy as np
from trackoverlay.utils.tracks.demo import DemoClip
from trackoverlay.utils.tracks.detect import TrackDetector, detect_tracks
from trackoverlay.utils.tracks.motion import measure_motion
from trackoverlay.utils.tracks.quality import identity_changes, measure_tracks
from trackoverlay.utils.tracks.track_file import load_tracks_json
from trackoverlay.utils.video.io import iter_video_frames

PARAMETERS = [*inspect.signature(TrackDetector).parameters.items(),
              *inspect.signature(detect_tracks).parameters.items()]
DETECT_DEFAULTS = {name: parameter.default for name, parameter in PARAMETERS
                   if parameter.default is not inspect.Parameter.empty
                   and isinstance(parameter.default, (bool, int, float, str))}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="track_quality.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("input", nargs="?", help="video file (omit for the built-in demo)")
    parser.add_argument("--tracks", metavar="FILE.json", help="measure these tracks instead of detecting")
    parser.add_argument("--frames", type=int, metavar="N", help="only the first N frames")
    parser.add_argument("--mask-dir", metavar="DIR", help="ground-truth moving-pixel masks, one PNG per frame "
                        "in name order")
    parser.add_argument("--subject-dir", metavar="DIR", help="detect only inside these masks (PNG per frame "
                        "in name order), as Detect Tracks' subject input")
    parser.add_argument("--cuts", metavar="C1,C2", help="first frame of each new shot (ground truth)")
    parser.add_argument("--window", type=int, metavar="N", help="redetection window of the count swing "
                        "(default: --redetect-interval)")
    parser.add_argument("--near", type=float, default=6.0, metavar="PX", help="demo: a box is on a dot within "
                        "this distance (default: %(default)s)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    group = parser.add_argument_group("detection (detect_tracks options; defaults as in Detect Tracks)")
    for name, default in DETECT_DEFAULTS.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            group.add_argument(flag, type=lambda text: text.lower() in ("1", "true", "yes", "on"),
                               default=default, metavar="BOOL", help=f"(default: {default})")
        else:
            group.add_argument(flag, type=type(default), default=default, help=f"(default: {default})")
    return parser


def clip_frames(args):
    """(frame iterator factory, demo clip or None)."""
    if args.input is None:
        clip = DemoClip(frame_count=args.frames or DemoClip.frame_count)
        return clip.frames, clip

    def frames():
        for index, frame in enumerate(iter_video_frames(args.input)):
            if args.frames is not None and index >= args.frames:
                break
            yield frame
    return frames, None


def estimated_moving(frames):
    """Per frame: pixels that change once camera motion is compensated (None for the first frame)."""
    previous = None
    for frame in frames:
        gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        yield None if previous is None else measure_motion(gray, previous).moving_mask(gray.shape)
        previous = gray


def mask_files(folder: str):
    """Masks, one PNG per frame in name order (nonzero = inside)."""
    names = sorted(glob.glob(os.path.join(folder, "*.png")))
    if not names:
        raise SystemExit(f"track_quality.py: error: no PNG masks in {folder}")
    for name in names:
        yield cv2.imread(name, cv2.IMREAD_GRAYSCALE) > 0


def cut_report(tracks, cuts: list) -> dict:
    """Frames without a visible point next to each cut, and tracks visible on both sides of one."""
    shown = tracks.visibility if tracks.opacity is None else tracks.visibility & (tracks.opacity > 0)
    live = shown.sum(axis=1)
    bounds = [0] + cuts + [tracks.frame_count]
    shot_of = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
    crossing = sum(len(np.unique(shot_of[shown[:, n]])) > 1 for n in range(tracks.track_count))
    empty = {cut: [int(t) for t in range(max(0, cut - 3), min(len(live), cut + 4)) if live[t] == 0] for cut in cuts}
    return {"empty frames near cuts": empty, "tracks crossing a cut": int(crossing)}


def demo_report(tracks, clip: DemoClip, near: float) -> dict:
    """Boxes off every dot and dots without a box on the last frame; id changes and dots missed over the clip."""
    changes, missed = identity_changes(tracks, clip.tracks().path, near, 2 * near)
    whole = {"id changes (dots clear of others)": changes, "clear dot-frames without a box": missed}
    t = tracks.frame_count - 1
    shown = tracks.visibility[t] if tracks.opacity is None else tracks.visibility[t] & (tracks.opacity[t] > 0)
    boxes = tracks.path[t, shown]
    dots = clip.positions(t)
    if len(boxes) == 0:
        return {"frame": t, "boxes": 0, f"boxes > {near:g} px from a dot": 0, "dots without a box": len(dots),
                **whole}
    distance = np.hypot(*(boxes[:, None, :] - dots[None, :, :]).transpose(2, 0, 1))
    return {"frame": t, "boxes": int(len(boxes)),
            f"boxes > {near:g} px from a dot": int(np.sum(distance.min(1) > near)),
            "dots without a box": int(np.sum(distance.min(0) > near)), **whole}


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.input is None:  # the demo tracks with its own settings, unless told otherwise
        parser.set_defaults(**DemoClip().detect_params())
        args = parser.parse_args(argv)
    frames, clip = clip_frames(args)
    detect_ms = None
    if args.tracks:
        tracks = load_tracks_json(args.tracks)
    else:
        options = {name: getattr(args, name) for name in DETECT_DEFAULTS}
        decoded = np.stack(list(frames()))
        subject = None
        if args.subject_dir:
            subject = np.stack(list(mask_files(args.subject_dir)))[:len(decoded)]
        start = time.perf_counter()
        tracks = detect_tracks(decoded, subject=subject, **options)
        detect_ms = (time.perf_counter() - start) * 1000 / max(1, len(decoded))
    moving = mask_files(args.mask_dir) if args.mask_dir else estimated_moving(frames())
    window = args.window or getattr(args, "redetect_interval", 5)
    quality = measure_tracks(tracks, moving=moving, window=window, reach=2)
    figures = {
        "tracks started": quality.tracks_started,
        "one-frame share": f"{quality.one_frame_share:.1%}",
        "median life": f"{quality.median_life:g}",
        "frames w/o point": f"{quality.empty_frames} of {quality.frames}",
        "mean live points": f"{quality.mean_live:.1f}",
        "count swing": f"{quality.count_swing:g}",
        "on moving pixels": "n/a" if quality.moving_share is None else f"{quality.moving_share:.1%}",
    }
    if detect_ms is not None:
        figures["detect ms/frame"] = f"{detect_ms:.1f}"
    extra = {}
    if args.cuts:
        extra.update(cut_report(tracks, [int(c) for c in args.cuts.split(",") if c.strip()]))
    if clip is not None and not args.tracks:
        extra.update(demo_report(tracks, clip, args.near))
    width = max(len(key) for key in list(figures) + list(extra))
    print(f"{args.input or 'demo'}: {quality.frames} frames, {tracks.track_count} columns")
    for key, value in {**figures, **extra}.items():
        print(f"  {key:<{width}}  {value}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"input": args.input or "demo", **quality.as_dict(), "detect_ms_per_frame": detect_ms,
                       **{key: value for key, value in extra.items()}}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
