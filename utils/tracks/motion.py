"""What moves in a frame once the camera's own motion is taken out.

:func:`camera_motion` fits a similarity transform (shift, rotation, zoom) to
Lucas-Kanade flow of a grid of points over the previous frame, robustly
(RANSAC), so that the background's motion, pan and shake included, is what
it finds while a moving subject is an outlier. :func:`measure_motion` warps
the other frame back by that transform and measures what is left: how much
each pixel differs from where the camera motion says it went, in units of
the frame's noise. Both work on a reduced copy of the frame (at most
``WORK_SIZE`` pixels on the longer side), so they cost about the same at
640 px and at 8K.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

WORK_SIZE = 640
"""Pixels: longer side of the reduced frames motion is measured on."""

MOVING_LEVEL = 4.0
"""A pixel moves when its compensated difference exceeds this many noise levels."""

_MIN_DIFFERENCE = 6.0  # gray levels: below this no difference counts, however clean the frame
_GRID_POINTS = 300
_LK = dict(winSize=(15, 15), maxLevel=3, criteria=(cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 20, 0.03))


@dataclass(frozen=True)
class MotionFrame:
    """One frame's motion, measured against another frame (usually the next).

    Attributes:
        matrix: float64 [2, 3] camera motion in full-frame pixels (OpenCV
            convention): a background point p of this frame is at
            ``matrix @ [p, 1]`` in the other frame.
        moving: float32 [h, w] compensated difference in noise levels, on this
            frame's reduced grid; > ``MOVING_LEVEL`` means moving.
        scale: full-frame pixels per reduced pixel.
    """

    matrix: np.ndarray
    moving: np.ndarray
    scale: float

    def moving_mask(self, shape: tuple) -> np.ndarray:
        """bool [H, W]: the moving pixels at full size ``shape`` = (H, W)."""
        mask = (self.moving > MOVING_LEVEL).astype(np.uint8)
        return cv2.resize(mask, (shape[1], shape[0]), interpolation=cv2.INTER_NEAREST).astype(bool)

    def level_at(self, points: np.ndarray) -> np.ndarray:
        """float32 [n]: the motion level (noise units) at full-frame points [n, 2] (OpenCV pixel centres)."""
        if len(points) == 0:
            return np.zeros(0, np.float32)
        height, width = self.moving.shape
        cells = np.floor((points + 0.5) / self.scale).astype(np.int64)
        x = np.clip(cells[:, 0], 0, width - 1)
        y = np.clip(cells[:, 1], 0, height - 1)
        return self.moving[y, x]


def reduced(gray: np.ndarray) -> tuple[np.ndarray, float]:
    """(gray at most ``WORK_SIZE`` pixels on its longer side, full pixels per reduced pixel)."""
    scale = max(1.0, max(gray.shape) / WORK_SIZE)
    if scale == 1.0:
        return gray, 1.0
    size = (max(1, round(gray.shape[1] / scale)), max(1, round(gray.shape[0] / scale)))
    return cv2.resize(gray, size, interpolation=cv2.INTER_AREA), scale


def _grid(height: int, width: int) -> np.ndarray:
    """float32 [n, 1, 2]: about ``_GRID_POINTS`` points on a regular grid over the frame, 8 px from its edges."""
    step = max(4.0, np.sqrt(height * width / _GRID_POINTS))
    xs = np.arange(8.0, width - 8.0, step) if width > 16 else np.array([width / 2.0])
    ys = np.arange(8.0, height - 8.0, step) if height > 16 else np.array([height / 2.0])
    return np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 1, 2).astype(np.float32)


def camera_motion(previous: np.ndarray, current: np.ndarray) -> np.ndarray:
    """float64 [2, 3] similarity transform of the background from ``previous`` to ``current``.

    Both are reduced uint8 gray frames of one size; the result is in their
    pixels. Lucas-Kanade flow of a regular grid (points on flat areas fail
    and drop out), fitted by RANSAC. Identity when too few points follow.
    """
    identity = np.eye(2, 3)
    grid = _grid(*previous.shape)
    moved, status, _ = cv2.calcOpticalFlowPyrLK(previous, current, grid, None, **_LK)
    good = status.ravel() == 1
    if np.count_nonzero(good) < 8:
        return identity
    matrix, _ = cv2.estimateAffinePartial2D(grid[good], moved[good], method=cv2.RANSAC,
                                            ransacReprojThreshold=1.0, maxIters=500, confidence=0.99,
                                            refineIters=5)
    return identity if matrix is None else matrix


def _noise_level(difference: np.ndarray) -> float:
    """Robust noise level of a difference image: 1.4826 x its median (a Gaussian's sigma), at least 1."""
    return max(1.0, 1.4826 * float(np.median(difference[::4])))  # every 4th pixel: as good, cheaper


def measure_motion(gray: np.ndarray, other: np.ndarray) -> MotionFrame:
    """Camera motion from ``gray`` to ``other`` and the pixels of ``gray`` that move besides it.

    Both are full-size uint8 gray frames of one size (``other`` is usually the next frame).
    """
    small, scale = reduced(gray)
    return motion_between(small, reduced(other)[0], scale)


def motion_between(small: np.ndarray, small_other: np.ndarray, scale: float) -> MotionFrame:
    """:func:`measure_motion` of two frames already :func:`reduced` (``scale``: full pixels per reduced pixel)."""
    matrix = camera_motion(small, small_other)
    height, width = small.shape
    back = cv2.WARP_INVERSE_MAP | cv2.INTER_LINEAR  # sample ``other`` where each pixel of ``gray`` went
    warped = cv2.warpAffine(small_other.astype(np.float32), matrix, (width, height), flags=back,
                            borderMode=cv2.BORDER_REPLICATE)
    covered = cv2.warpAffine(np.ones((height, width), np.uint8), matrix, (width, height),
                             flags=cv2.WARP_INVERSE_MAP | cv2.INTER_NEAREST, borderValue=0).astype(bool)
    target = small.astype(np.float32)
    gain = float(target[covered].mean() / max(warped[covered].mean(), 1.0)) if covered.any() else 1.0
    difference = cv2.GaussianBlur(np.abs(target - gain * warped), (5, 5), 0)
    noise = _noise_level(difference[covered]) if covered.any() else 1.0
    level = difference / max(noise, _MIN_DIFFERENCE / MOVING_LEVEL)
    level[~covered] = 0.0
    full = matrix.copy()
    full[:, 2] *= scale
    return MotionFrame(full, level.astype(np.float32), scale)
