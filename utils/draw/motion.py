"""Colours by motion or age: each track's speed, direction and age, through a gradient.

- **speed**: pixels moved since the previous frame, ``|p[t] - p[t-1]|``; 0
  where the track was not visible in both frames (its first frame, and the
  first frame after a gap) and on a shot's first frame (a scene cut: the
  move from the shot before is no motion).
- **direction**: the angle of that move in degrees, 0..360: 0 = right,
  90 = up on the screen (counter-clockwise; image rows grow downward); 0
  where the track did not move.
- **age**: frames since the track (its column) was first visible, hidden
  frames included; 0 before that.

Whole track sets (:func:`track_motion`, NumPy or CuPy, every frame at once)
and streams (:class:`MotionTracker`, frame by frame) run the same arithmetic
(:func:`motion_between`), so a streamed frame gets the batch's colours.
Speed is divided by the style's ``speed_range`` and age by its
``age_range`` (both clamped to the gradient's last colour); direction goes
round the gradient, which closes back on its first colour at 360 degrees.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .colors import parse_gradient, sample_gradient

MOTION_MODES = ("speed", "direction", "age")


class Motion(NamedTuple):
    """float32 speed (pixels per frame), direction (degrees) and age (frames), one per track (and frame)."""

    speed: object
    direction: object
    age: object


def motion_between(previous, previous_visible, current, current_visible, xp=np):
    """``(speed, direction)`` of the moves ``previous`` -> ``current`` (positions [..., 2], flags [...])."""
    moving = previous_visible & current_visible
    delta = xp.where(moving[..., None], current - previous, 0.0).astype(xp.float32)
    speed = xp.sqrt(delta[..., 0] * delta[..., 0] + delta[..., 1] * delta[..., 1])
    direction = xp.mod(xp.degrees(xp.arctan2(-delta[..., 1], delta[..., 0])), 360.0)
    return speed.astype(xp.float32), direction.astype(xp.float32)


def _usable(xp, positions, visible):
    """Positions as float32 with hidden slots set to 0 (they may hold NaN or inf)."""
    return xp.where(visible[..., None], xp.asarray(positions, dtype=xp.float32), 0.0).astype(xp.float32)


def track_motion(path, visible, xp=np, cuts=()) -> Motion:
    """Every track's motion in every frame: ``path`` float [T, N, 2], ``visible`` bool [T, N] -> [T, N] each;
    ``cuts``: the frames that start a shot."""
    visible = xp.asarray(visible, dtype=bool)
    path = _usable(xp, path, visible)
    before = xp.concatenate([path[:1], path[:-1]])
    seen_before = xp.concatenate([xp.zeros_like(visible[:1]), visible[:-1]])
    starts = [cut for cut in cuts if 0 < cut < len(visible)]
    if starts:  # a move into a shot's first frame is the cut, not motion
        seen_before[xp.asarray(starts)] = False
    speed, direction = motion_between(before, seen_before, path, visible, xp)
    shown = visible.astype(xp.int32)
    first = xp.argmax(shown, axis=0)
    frame = xp.arange(visible.shape[0])[:, None]
    age = xp.where(xp.cumsum(shown, axis=0) > 0, frame - first[None], 0).astype(xp.float32)
    return Motion(speed, direction, age)


class MotionTracker:
    """A stream's memory of motion: last frame's positions and flags, and the frame each column first showed.

    Call it once per frame, in order, from the stream's first frame (frames that are not drawn included).
    """

    def __init__(self):
        self.frame = 0
        self.positions = np.zeros((0, 2), np.float32)
        self.visible = np.zeros(0, bool)
        self.first = np.zeros(0, np.int64)

    def __call__(self, positions, visible, shot_start: bool = False) -> Motion:
        """This frame's motion per column (positions float [N, 2], visible bool [N]; ``shot_start``: a scene cut
        comes before it); remembers the frame."""
        visible = np.asarray(visible, bool)
        count = len(visible)
        if count > len(self.visible):  # new columns: never seen yet
            grow = count - len(self.visible)
            self.positions = np.concatenate([self.positions, np.zeros((grow, 2), np.float32)])
            self.visible = np.concatenate([self.visible, np.zeros(grow, bool)])
            self.first = np.concatenate([self.first, np.full(grow, -1, np.int64)])
        positions = _usable(np, positions, visible)
        seen_before = np.zeros(count, bool) if shot_start else self.visible[:count]
        speed, direction = motion_between(self.positions[:count], seen_before, positions, visible)
        first = self.first[:count]
        first[visible & (first < 0)] = self.frame
        age = np.where(first >= 0, self.frame - first, 0).astype(np.float32)
        self.positions[:count] = positions
        self.visible[:count] = visible
        self.visible[count:] = False
        self.frame += 1
        return Motion(speed, direction, age)


def motion_colors(style, motion: Motion, xp=np):
    """RGBA float32 [..., 4] per track from ``style.color_mode`` (one of :data:`MOTION_MODES`) and its gradient."""
    stops = parse_gradient(style.gradient_colors)
    if style.color_mode == "speed":
        return sample_gradient(stops, motion.speed / np.float32(style.speed_range), xp=xp)
    if style.color_mode == "direction":
        return sample_gradient(stops, motion.direction / np.float32(360.0), cyclic=True, xp=xp)
    if style.color_mode == "age":
        return sample_gradient(stops, motion.age / np.float32(style.age_range), xp=xp)
    raise ValueError(f"color_mode {style.color_mode!r} is not one of {', '.join(MOTION_MODES)}")


def still_colors(style, count: int):
    """RGBA [count, 4] of tracks that do not move and are new (speed, direction and age 0), for boxes without a
    history (e.g. given bounding boxes); None when ``style`` does not colour by motion."""
    if style.color_mode not in MOTION_MODES:
        return None
    zeros = np.zeros(count, np.float32)
    return motion_colors(style, Motion(zeros, zeros, zeros))
