"""A procedural demo clip: glowing dots drifting over a dark textured background.

Everything is computed from a seed, frame by frame, so the demo needs no
binary assets, is identical on every machine and streams in constant memory.
The dots' true positions are known, so the same generator also feeds
synthetic tracks (the CLI's blank-canvas mode and the tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterator

import cv2
import numpy as np

from ..core.arrays import unit_to_uint8
from ..core.checks import Range
from .contract import Tracks

CANVAS_RGB = (14, 16, 22)  # the blank canvas: a dark blue-grey
_GLOW_TINTS = np.array([[0.55, 0.90, 1.00], [1.00, 0.80, 0.55], [0.80, 1.00, 0.85], [1.00, 1.00, 1.00]],
                       np.float32)
_PAN_REACH = 24.0  # background drift in pixels at 720p (a slow loop, so memory is clip-independent)
_PAN_PERIOD = 9.0  # seconds per drift loop
# Accepted ranges of the clip's numeric fields; the node widgets read these too.
DEMO_RANGES = {
    "width": Range(16, 16384),
    "height": Range(16, 16384),
    "frame_count": Range(1),
    "fps": Range(0.0, low_open=True),
    "dots": Range(0),
    "seed": Range(0),
}


@dataclass(frozen=True)
class DemoClip:
    """A deterministic clip of ``dots`` glowing dots on smooth looping paths.

    Sizes, speeds and glow scale with the frame's shorter side (720 = the
    reference), so any size looks alike.

    Example:
        >>> clip = DemoClip(width=320, height=180, frame_count=2)
        >>> [frame.shape for frame in clip.frames()]
        [(180, 320, 3), (180, 320, 3)]
    """

    width: int = 1280
    height: int = 720
    frame_count: int = 90
    fps: float = 30
    dots: int = 60
    seed: int = 0

    def __post_init__(self):
        for name in ("width", "height"):
            low, high = DEMO_RANGES[name][:2]
            if not low <= getattr(self, name) <= high:
                raise ValueError(f"frame {name} must be {low}..{high} pixels, got {getattr(self, name)}")
        if self.frame_count < DEMO_RANGES["frame_count"].low:
            raise ValueError(f"frame count must be >= {DEMO_RANGES['frame_count'].low}, got {self.frame_count}")
        if not self.fps > DEMO_RANGES["fps"].low:
            raise ValueError(f"fps must be > {DEMO_RANGES['fps'].low:g}, got {self.fps}")
        if self.dots < DEMO_RANGES["dots"].low:
            raise ValueError(f"dot count must be >= {DEMO_RANGES['dots'].low}, got {self.dots}")
        if self.seed < DEMO_RANGES["seed"].low:
            raise ValueError(f"seed must be >= {DEMO_RANGES['seed'].low}, got {self.seed}")

    @property
    def scale(self) -> float:
        """Pixels per reference pixel (1.0 at 720p)."""
        return min(self.width, self.height) / 720.0

    @cached_property
    def _paths(self) -> dict:
        """Per-dot centre, amplitude, frequency (Hz) and phase of two sine terms per axis."""
        rng = np.random.default_rng(self.seed)
        size = np.array([self.width, self.height], np.float64)
        amplitude = rng.uniform(0.03, 0.12, (self.dots, 2, 2)) * min(size) * np.array([1.0, 0.35])[:, None]
        reach = amplitude.sum(axis=1) + 12.0 * self.scale
        return {
            "center": rng.uniform(reach, size - reach),
            "amplitude": amplitude,
            "frequency": rng.uniform(0.08, 0.3, (self.dots, 2, 2)) * np.array([1.0, 2.3])[:, None],
            "phase": rng.uniform(0.0, 2.0 * np.pi, (self.dots, 2, 2)),
            "radius": np.maximum(rng.uniform(2.5, 4.5, self.dots) * self.scale, 1.5),
            "tint": _GLOW_TINTS[rng.integers(0, len(_GLOW_TINTS), self.dots)],
        }

    def detect_params(self) -> dict:
        """:class:`~.detect.TrackDetector` settings that keep a box on every dot: bright spots, spaced
        closer than the dots ever pass each other but for a true overlap."""
        return {"method": "bright", "min_distance": 8.0 * self.scale}

    def positions(self, index: int) -> np.ndarray:
        """Float32 [dots, 2] dot centres (x, y) in pixels at frame ``index``."""
        paths = self._paths
        seconds = index / self.fps
        waves = paths["amplitude"] * np.sin(2.0 * np.pi * paths["frequency"] * seconds + paths["phase"])
        return (paths["center"] + waves.sum(axis=1)).astype(np.float32)

    @cached_property
    def _texture(self) -> np.ndarray:
        """Float32 [H + m, W + m, 3] dark multi-scale noise, larger than the frame for panning."""
        rng = np.random.default_rng(self.seed + 1)
        margin = 2 * int(np.ceil(_PAN_REACH * self.scale)) + 2
        height, width = self.height + margin, self.width + margin
        gray = np.zeros((height, width), np.float32)
        for cells, weight in ((6, 0.5), (24, 0.3), (96, 0.15), (384, 0.05)):
            noise = rng.random((max(2, cells * height // width), cells)).astype(np.float32)
            gray += weight * cv2.resize(noise, (width, height), interpolation=cv2.INTER_CUBIC)
        rows, cols = np.ogrid[-1.0:1.0:height * 1j, -1.0:1.0:width * 1j]
        vignette = 1.0 - 0.45 * (rows ** 2 + cols ** 2) / 2.0
        level = np.clip(gray, 0.0, 1.0) * vignette.astype(np.float32)
        tint = np.array([0.09, 0.11, 0.16], np.float32)
        return level[..., None] * tint + np.array([0.02, 0.022, 0.03], np.float32)

    def _background(self, index: int) -> np.ndarray:
        """Float32 [H, W, 3] texture window at frame ``index`` (a slow looping drift)."""
        angle = 2.0 * np.pi * index / (self.fps * _PAN_PERIOD)
        reach = _PAN_REACH * self.scale
        shift_x, shift_y = reach * (1.0 + np.sin(angle)), reach * (1.0 + 0.6 * np.sin(2.0 * angle))
        matrix = np.float32([[1, 0, -shift_x], [0, 1, -shift_y]])
        return cv2.warpAffine(self._texture, matrix, (self.width, self.height), flags=cv2.INTER_LINEAR)

    def _add_dot(self, image: np.ndarray, center: np.ndarray, radius: float, tint: np.ndarray) -> None:
        """Add one dot (anti-aliased core + gaussian glow) to ``image`` in place."""
        sigma = 2.5 * radius
        reach = int(np.ceil(3.0 * sigma))
        x0, y0 = (int(np.floor(c)) - reach for c in center)
        xs = slice(max(x0, 0), min(x0 + 2 * reach + 1, self.width))
        ys = slice(max(y0, 0), min(y0 + 2 * reach + 1, self.height))
        if xs.start >= xs.stop or ys.start >= ys.stop:
            return
        rows, cols = np.ogrid[ys, xs]
        distance = np.hypot(cols + 0.5 - center[0], rows + 0.5 - center[1]).astype(np.float32)
        core = np.clip(radius + 0.5 - distance, 0.0, 1.0)
        glow = 0.35 * np.exp(-0.5 * (distance / sigma) ** 2)
        patch = image[ys, xs]
        patch += glow[..., None] * tint + core[..., None] * (1.0 - patch)

    def frame(self, index: int) -> np.ndarray:
        """Uint8 RGB [H, W, 3] demo frame ``index``."""
        image = self._background(index)
        paths = self._paths
        for center, radius, tint in zip(self.positions(index), paths["radius"], paths["tint"]):
            self._add_dot(image, center, radius, tint)
        return unit_to_uint8(image)

    def frames(self) -> Iterator[np.ndarray]:
        """The demo frames, generated one at a time."""
        return (self.frame(index) for index in range(self.frame_count))

    def canvas_frames(self) -> Iterator[np.ndarray]:
        """Plain dark frames of the clip's size and length (a fresh array each)."""
        return (np.full((self.height, self.width, 3), CANVAS_RGB, np.uint8) for _ in range(self.frame_count))

    def tracks(self) -> Tracks:
        """The dots' true positions as tracks: one column per dot, visible in every frame."""
        path = np.stack([self.positions(index) for index in range(self.frame_count)])
        return Tracks(path, np.ones(path.shape[:2], bool), frame_size=(self.width, self.height), name="demo tracks")

    def audio(self, sample_rate: int = 44_100) -> np.ndarray:
        """Float32 [2, S] stereo sound as long as the clip: a soft 220 Hz hum and an 880 Hz blip each second."""
        if not isinstance(sample_rate, int) or sample_rate < 1:
            raise ValueError(f"sample_rate must be a positive integer, got {sample_rate!r}")
        seconds = np.arange(round(self.frame_count / self.fps * sample_rate)) / sample_rate
        hum = 0.08 * np.sin(2.0 * np.pi * 220.0 * seconds)
        blip = 0.25 * np.sin(2.0 * np.pi * 880.0 * seconds) * np.exp(-30.0 * (seconds % 1.0))
        return np.stack([hum + blip, hum + 0.6 * blip]).astype(np.float32)
