"""Make the README's pictures: the demo in the full look, and one crop per look.

    python examples/readme_pictures.py            # writes docs/demo.jpg and docs/look_*.jpg

Each picture is a frame of the built-in demo drawn by the command line
(``overlay_video.py``) with the options listed in ``LOOKS``, so the pictures
show exactly what those options draw.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2

CLI = Path(__file__).resolve().parent / "overlay_video.py"
DOCS = Path(__file__).resolve().parent.parent / "docs"
FRAME = 59  # the demo's frame shown: the trails have grown by then
CROP = (slice(40, 400), slice(200, 840))  # rows, columns of the 1280x720 frame in the look crops
LOOKS = {
    "demo": ["--look", "full"],
    "look_plain": ["--look", "plain"],
    "look_trails": ["--look", "plain", "--trails", "--trail-color-mode", "track", "--trail-width", "0.5"],
    "look_labels": ["--look", "plain", "--labels", "format", "--label-format", "#{id:02d} {x:.0f},{y:.0f}"],
    "look_glow": ["--look", "plain", "--glow-strength", "3"],
    "look_delaunay": ["--look", "plain", "--graph-mode", "delaunay", "--max-length", "20"],
    "look_mst": ["--look", "plain", "--graph-mode", "mst"],
    "look_speed": ["--look", "plain", "--color-mode", "speed", "--trails", "--trail-color-mode", "single"],
}


def render_frame(options: list, folder: Path) -> Path:
    """The demo's frame ``FRAME`` drawn with ``options``, as a PNG in ``folder``."""
    command = [sys.executable, str(CLI), "--max-frames", str(FRAME + 1), "--png-dir", str(folder / "frames"),
               "-o", str(folder / "clip.mp4"), *options]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return folder / "frames" / f"frame_{FRAME:06d}.png"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DOCS, help="folder for the pictures (default: docs/)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, options in LOOKS.items():
        with tempfile.TemporaryDirectory() as folder:
            image = cv2.imread(str(render_frame(options, Path(folder))))
        picture = cv2.resize(image, (800, 450), interpolation=cv2.INTER_AREA) if name == "demo" else image[CROP]
        cv2.imwrite(str(args.out / f"{name}.jpg"), picture, [cv2.IMWRITE_JPEG_QUALITY, 88])
        print(f"{name}: {' '.join(options)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
