"""Soak test: render many 1080p frames in one process and watch memory for growth.

    python examples/soak.py                               # 10 000 frames, auto backend, no encoding
    python examples/soak.py --backend gpu --frames 2000
    python examples/soak.py --backend cpu --frames 600 --encode soak.mp4 --every 100
    python examples/soak.py --backend gpu --canvas        # overlay work only: plain dark frames

The frames are the built-in demo clip at 1920x1080 (regenerated every frame),
its true dot positions are the tracks, and the overlay (kNN links + boxes) is
built and rendered frame by frame as in the streaming pipeline. Every
``--every`` frames it samples the host RSS (VmRSS in /proc/self/status) and, on
the GPU, CuPy's memory pool (used / held bytes) and the device's free / total
memory (cudaMemGetInfo). It prints one table row per sample, then the start,
end and max of each column and the growth after the first interval (warm-up).
"""

from __future__ import annotations

import argparse
import sys
import time

from trackoverlay.utils.raster.backend import BACKENDS, make_renderer
from trackoverlay.utils.tracks.demo import DemoClip
from trackoverlay.utils.video.stream import DemoPoints, FrameSource, OverlaySpec, overlay_frames, render_video

WIDTH, HEIGHT = 1920, 1080
MIB = 2 ** 20


def host_rss_mib() -> float:
    """This process's resident set size (VmRSS) in MiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("/proc/self/status has no VmRSS line (Linux only)")


def gpu_memory_mib() -> dict:
    """CuPy pool used / held and device free / total memory, in MiB."""
    import cupy

    pool = cupy.get_default_memory_pool()
    free, total = cupy.cuda.runtime.memGetInfo()
    return {"pool used": pool.used_bytes() / MIB, "pool held": pool.total_bytes() / MIB,
            "dev free": free / MIB, "dev total": total / MIB}


class Sampler:
    """Collects one row of memory figures every ``every`` frames and prints it."""

    def __init__(self, every: int, gpu: bool):
        self.every, self.gpu = every, gpu
        self.rows = []
        self.started = self.last_time = time.perf_counter()
        self.last_frame = 0

    def __call__(self, done: int, force: bool = False) -> None:
        """Record a row when ``done`` frames is a multiple of ``every`` (or ``force``)."""
        if done % self.every and not force or self.rows and self.rows[-1]["frame"] == done:
            return
        now = time.perf_counter()
        fps = (done - self.last_frame) / (now - self.last_time) if done > self.last_frame else 0.0
        row = {"frame": done, "seconds": now - self.started, "fps": fps, "rss": host_rss_mib()}
        if self.gpu:
            row.update(gpu_memory_mib())
        self.last_time, self.last_frame = now, done
        self.rows.append(row)
        self.print_row(row)

    def columns(self) -> list:
        return list(self.rows[0]) if self.rows else []

    def print_row(self, row: dict) -> None:
        if len(self.rows) == 1:
            print("  ".join(f"{name:>10}" for name in row), flush=True)
        print("  ".join(f"{value:>10.1f}" if isinstance(value, float) else f"{value:>10}"
                        for value in row.values()), flush=True)

    def summary(self) -> str:
        """Start, end, max per memory column, and the growth after the first interval (MiB)."""
        memory = [name for name in self.columns() if name not in ("frame", "seconds", "fps")]
        lines = [f"{'':>24}" + "".join(f"{name:>12}" for name in memory)]
        warm = self.rows[1] if len(self.rows) > 2 else self.rows[0]
        figures = {"start (frame 0)": self.rows[0], f"after warm-up (frame {warm['frame']})": warm,
                   "end": self.rows[-1],
                   "max": {name: max(row[name] for row in self.rows) for name in memory},
                   "end - after warm-up": {name: self.rows[-1][name] - warm[name] for name in memory}}
        for label, row in figures.items():
            lines.append(f"{label:>24}" + "".join(f"{row[name]:>12.1f}" for name in memory))
        return "\n".join(lines)


def run(args) -> Sampler:
    """Render ``args.frames`` frames, sampling memory; returns the sampler with its rows."""
    clip = DemoClip(WIDTH, HEIGHT, args.frames, fps=30, dots=args.dots)
    source, points = FrameSource.from_demo(clip, canvas=args.canvas), DemoPoints(clip)
    renderer, info = make_renderer(args.backend)
    print(f"soak: {args.frames} frames of {WIDTH}x{HEIGHT}, {args.dots} points, renderer {info.selected}, "
          f"{'encoding to ' + args.encode if args.encode else 'no encoding'}; memory in MiB", flush=True)
    sampler = Sampler(args.every, info.selected == "gpu")
    sampler(0)
    try:
        if args.encode:
            render_video(source, points, OverlaySpec(), renderer, args.encode, preset="veryfast",
                         progress=sampler)
        else:
            for index, _ in enumerate(overlay_frames(source.frames, points, OverlaySpec(), renderer)):
                sampler(index + 1)
    finally:
        renderer.close()
    sampler(args.frames, force=True)
    return sampler


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=10_000, help="frames to render (default: %(default)s)")
    parser.add_argument("--backend", choices=BACKENDS, default="auto", help="(default: %(default)s)")
    parser.add_argument("--every", type=int, default=500, metavar="N", help="sample every N frames "
                        "(default: %(default)s)")
    parser.add_argument("--dots", type=int, default=60, help="tracked points (default: %(default)s)")
    parser.add_argument("--encode", metavar="OUT.mp4", help="also encode the frames (x264 veryfast)")
    parser.add_argument("--canvas", action="store_true", help="draw on plain dark frames instead of the demo's "
                        "textured ones (skips the costly background synthesis; the overlay is the same)")
    args = parser.parse_args(argv)
    if args.frames < 1 or args.every < 1:
        parser.error("--frames and --every must be >= 1")
    sampler = run(args)
    print(sampler.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
