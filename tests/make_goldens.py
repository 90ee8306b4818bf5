"""Regenerate the golden images of tests/test_golden.py (the only way to write them).

Usage, from the repository root:

    python tests/make_goldens.py            # rewrite every tests/golden/<scene>.png
    python tests/make_goldens.py seed_scene # rewrite only the named scenes

Each scene of tests/scenes.py is rendered with the CPU renderer and saved as
an 8-bit RGB PNG (float32 results rounded to nearest). Only regenerate after
an intended change of the picture, and look at the new images before
committing them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
from scenes import RENDER_OPTIONS, SCENES
from trackoverlay.utils.raster.cpu import CpuRenderer

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def to_uint8(frame: np.ndarray) -> np.ndarray:
    """A rendered frame as uint8 RGB (float32 frames rounded to nearest)."""
    if frame.dtype == np.uint8:
        return frame
    return np.round(np.clip(frame, 0.0, 1.0) * 255).astype(np.uint8)


def render_scene(name: str, renderer: CpuRenderer) -> np.ndarray:
    """Scene ``name`` drawn over its frame with its render options (the frame's dtype is kept)."""
    frame, display_list = SCENES[name]()
    return renderer.render(frame, display_list, **RENDER_OPTIONS.get(name, {}))


def write_golden(path: Path, image: np.ndarray) -> int:
    """Write uint8 RGB ``image`` as a maximally compressed PNG; returns its size in bytes."""
    ok, data = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    if not ok:
        raise RuntimeError(f"could not encode {path}")
    path.write_bytes(data.tobytes())
    return len(data)


def main(names: list[str]) -> None:
    unknown = sorted(set(names) - set(SCENES))
    if unknown:
        raise SystemExit(f"unknown scene(s) {', '.join(unknown)}; known: {', '.join(SCENES)}")
    GOLDEN_DIR.mkdir(exist_ok=True)
    renderer = CpuRenderer()
    for name in names or SCENES:
        size = write_golden(GOLDEN_DIR / f"{name}.png", to_uint8(render_scene(name, renderer)))
        print(f"{name}.png: {size} bytes")
    renderer.close()


if __name__ == "__main__":
    main(sys.argv[1:])
