"""Check that streaming memory does not depend on the clip's length.

    python examples/memory_check.py                       # 300 and 3000 frames of 1080p
    python examples/memory_check.py --frames 100 1000 --size 1280x720 --workdir /tmp/memcheck
    python examples/memory_check.py --batch --frames 300             # the IMAGE batch through Render

For each length it writes a demo clip of that many frames (the built-in
glowing-dots demo, x264 veryfast; kept in --workdir and reused next time),
then renders it with the streaming CLI (examples/overlay_video.py: decode,
detect, link, draw, encode with x264 veryfast) in a child process, and
reports the child's peak RSS (its own ru_maxrss from wait4, so one run's
peak never hides another's), its frames per second (wall clock, start-up
included) and the output as probed (frame count, size, file size).

Exit status 1 when the peaks differ by more than --tolerance (default 10%)
or an output does not have the input's frame count and size.

With ``--batch`` it checks the ComfyUI path instead: a child process builds a
float32 IMAGE batch of each length (a torch tensor, as ComfyUI hands it),
runs Line Links + Boxes + Merge + Render on it as the nodes call the engine,
and reports the memory it asked for beyond its start-up (peak RSS minus the
RSS before the batch existed) against the input batch plus the output batch.
Exit status 1 when that exceeds input + output by more than --tolerance.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trackoverlay.utils.tracks.demo import DemoClip
from trackoverlay.utils.video.io import VideoWriter, probe_video

CLI = Path(__file__).resolve().parent / "overlay_video.py"
PRESET = "veryfast"


def parse_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size {text!r} must look like 1920x1080") from None
    return width, height


def demo_video(folder: Path, width: int, height: int, frames: int) -> Path:
    """The demo clip as an MP4 in ``folder`` (written once, atomically, then reused)."""
    path = folder / f"demo_{width}x{height}_{frames}.mp4"
    if not path.exists():
        started = time.perf_counter()
        with VideoWriter(path, fps=30, crf=20, preset=PRESET) as writer:
            for frame in DemoClip(width, height, frames, fps=30).frames():
                writer.write(frame)
        print(f"wrote {path.name} in {time.perf_counter() - started:.0f} s", flush=True)
    return path


def render_in_child(source: Path, output: Path, backend: str) -> tuple[float, float, str]:
    """Run the streaming CLI on ``source``: (peak RSS in MiB, wall seconds, stderr tail)."""
    command = [sys.executable, str(CLI), str(source), "-o", str(output), "--backend", backend,
               "--preset", PRESET, "--detect-method", "bright"]
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as errors:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        errors.seek(0)
        tail = errors.read()[-2000:]
    if child.returncode != 0:
        raise RuntimeError(f"{CLI.name} failed with status {child.returncode}:\n{tail}")
    return usage.ru_maxrss / 1024, seconds, tail  # ru_maxrss is in KiB on Linux


def check(frames: int, args) -> dict:
    """Render a clip of ``frames`` frames and measure it; one table row."""
    source = demo_video(args.workdir, *args.size, frames)
    output = args.workdir / f"overlay_{frames}.mp4"
    peak, seconds, _ = render_in_child(source, output, args.backend)
    info = probe_video(output)
    row = {"frames": frames, "peak_rss_mib": peak, "fps": frames / seconds, "out_frames": info.frame_count,
           "out_size": f"{info.width}x{info.height}", "out_mib": output.stat().st_size / 2 ** 20,
           "ok": info.frame_count == frames and (info.width, info.height) == tuple(args.size)}
    if not args.keep:
        output.unlink()
    return row


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def batch_child(frames: int, width: int, height: int, backend: str) -> dict:
    """In this process: the node chain on a float32 batch; its memory beyond start-up, in MiB."""
    from benchmark import chain_inputs, node_chain  # beside this script

    try:
        import torch  # noqa: F401  (the host's, loaded before the batch exists, as in ComfyUI)
    except ImportError:
        pass
    node_chain(*chain_inputs(100, 64, 64, 1), backend)  # warm: libraries and thread pools loaded
    started = _rss_mib()
    path, visibility, batch = chain_inputs(100, width, height, frames)
    chain = node_chain(path, visibility, batch, backend)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    frame_mib = batch[0].numel() * batch.element_size() / 2 ** 20 if hasattr(batch, "numel") else batch[0].nbytes / 2 ** 20
    return {"frames": frames, "input_mib": frame_mib * frames, "output_mib": frame_mib * frames,
            "extra_mib": peak - started, "seconds": chain["chain"]}


def check_batch(frames: int, args) -> dict:
    """Run :func:`batch_child` in a child process (its own peak); one table row."""
    command = [sys.executable, __file__, "--child-batch", str(frames), "--size", f"{args.size[0]}x{args.size[1]}",
               "--backend", args.backend]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"the batch child failed with status {result.returncode}:\n{result.stderr[-2000:]}")
    row = json.loads(result.stdout.strip().splitlines()[-1])
    row["ratio"] = row["extra_mib"] / (row["input_mib"] + row["output_mib"])
    return row


def print_batch_table(rows: list) -> None:
    print(f"{'frames':>7} {'input MiB':>10} {'output MiB':>11} {'asked MiB':>10} {'asked/(in+out)':>15} "
          f"{'seconds':>8}")
    for row in rows:
        print(f"{row['frames']:>7} {row['input_mib']:>10.0f} {row['output_mib']:>11.0f} {row['extra_mib']:>10.0f} "
              f"{row['ratio']:>15.3f} {row['seconds']:>8.1f}")


def print_table(rows: list) -> None:
    print(f"{'frames':>8} {'peak RSS MiB':>13} {'fps':>7} {'out frames':>11} {'out size':>10} {'out MiB':>8} "
          f"{'verified':>9}")
    for row in rows:
        print(f"{row['frames']:>8} {row['peak_rss_mib']:>13.1f} {row['fps']:>7.2f} {row['out_frames']:>11} "
              f"{row['out_size']:>10} {row['out_mib']:>8.1f} {'yes' if row['ok'] else 'NO':>9}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, nargs="+", default=[300, 3000], metavar="N",
                        help="clip lengths to check (default: 300 3000)")
    parser.add_argument("--size", type=parse_size, default=(1920, 1080), metavar="WxH",
                        help="frame size (default: 1920x1080)")
    parser.add_argument("--backend", choices=("auto", "cpu", "gpu"), default="cpu", help="(default: %(default)s)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "trackoverlay_memcheck",
                        help="where the clips and outputs go (default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the overlay outputs")
    parser.add_argument("--tolerance", type=float, default=0.10, help="largest allowed relative spread of "
                        "the peaks, or (--batch) excess over input + output (default: %(default)s)")
    parser.add_argument("--batch", action="store_true", help="check an IMAGE batch through Render instead of "
                        "the streaming CLI")
    parser.add_argument("--child-batch", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_batch is not None:
        print(json.dumps(batch_child(args.child_batch, *args.size, args.backend)))
        return 0
    if min(args.frames) < 1:
        parser.error("--frames must be >= 1")
    if args.batch:
        rows = [check_batch(frames, args) for frames in args.frames]
        print_batch_table(rows)
        return 0 if all(row["ratio"] <= 1 + args.tolerance for row in rows) else 1
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for frames in args.frames:
        rows.append(check(frames, args))
        print_table(rows[-1:])  # progress while the longer runs go
    print()
    print_table(rows)
    peaks = [row["peak_rss_mib"] for row in rows]
    spread = (max(peaks) - min(peaks)) / min(peaks)
    print(f"peak RSS spread: {spread:.1%} (tolerance {args.tolerance:.0%})")
    return 0 if spread <= args.tolerance and all(row["ok"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
