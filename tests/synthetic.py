"""Synthetic clips with known motion, known cuts and known moving pixels (ground truth for tracking tests).

:func:`make_clip` renders shots of a corner-rich static texture (the
"foliage") seen by a camera that pans at a known speed, with a textured
square (the "subject") moving over it at a known speed; each shot has its
own palette, so the shots differ as a cut does. It returns the frames, the
subject's mask per frame and the cut frames. :func:`passer_clip` renders a
still wall with marks and a textured figure walking across in front of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

PALETTES = (((0.15, 0.35, 0.10), (0.55, 0.80, 0.30)),  # greens
            ((0.45, 0.15, 0.10), (0.95, 0.70, 0.40)),  # warm browns
            ((0.10, 0.15, 0.45), (0.40, 0.70, 0.95)))  # blues


def texture(height: int, width: int, seed: int, palette) -> np.ndarray:
    """float32 RGB [H, W, 3]: blocky noise at two scales in a two-colour palette (corners everywhere)."""
    rng = np.random.default_rng(seed)
    level = np.zeros((height, width), np.float32)
    for cells, weight in ((8, 0.5), (3, 0.5)):
        small = rng.random((height // cells + 1, width // cells + 1)).astype(np.float32)
        level += weight * cv2.resize(small, (small.shape[1] * cells, small.shape[0] * cells),
                                     interpolation=cv2.INTER_NEAREST)[:height, :width]
    level = cv2.GaussianBlur(level, (0, 0), 0.8)
    low, high = (np.asarray(c, np.float32) for c in palette)
    return low + level[..., None] * (high - low)


@dataclass(frozen=True)
class Clip:
    """frames uint8 [T, H, W, 3], subject masks bool [T, H, W], cut frames (first frame of each new shot)."""

    frames: np.ndarray
    subject: np.ndarray
    cuts: tuple


GREYS = (((0.3, 0.3, 0.3), (0.7, 0.7, 0.7)),)  # every shot the same grey: only the structure changes


def make_clip(frames: int = 40, width: int = 240, height: int = 180, cuts=(), pan=(0.0, 0.0),
              subject_speed=(3.0, 1.0), subject_size: int = 56, flicker: float = 0.0, seed: int = 0,
              palettes=PALETTES) -> Clip:
    """Shots split at ``cuts``; the camera pans ``pan`` px/frame (the background moves the other way),
    the subject moves ``subject_speed`` px/frame on screen; ``flicker`` is a relative brightness swing;
    shot ``i`` is drawn in ``palettes[i % len(palettes)]``."""
    bounds = [0, *cuts, frames]
    margin = int(np.ceil(max(abs(pan[0]), abs(pan[1])) * frames)) + 4
    video = np.zeros((frames, height, width, 3), np.uint8)
    masks = np.zeros((frames, height, width), bool)
    for shot, (first, stop) in enumerate(zip(bounds[:-1], bounds[1:])):
        palette = palettes[shot % len(palettes)]
        background = texture(height + 2 * margin, width + 2 * margin, seed + 10 * shot, palette)
        skin = texture(subject_size, subject_size, seed + 10 * shot + 5, palettes[(shot + 1) % len(palettes)])
        for t in range(first, stop):
            step = t - first
            shift = np.array(pan) * step
            view = np.float32([[1, 0, -(margin + shift[0])], [0, 1, -(margin + shift[1])]])
            frame = cv2.warpAffine(background, view, (width, height), flags=cv2.INTER_LINEAR)
            x, y = (np.array([width * 0.25, height * 0.3]) + np.array(subject_speed) * step).astype(int)
            inside = frame[max(y, 0):y + subject_size, max(x, 0):x + subject_size]
            inside[:] = skin[max(-y, 0):max(-y, 0) + inside.shape[0], max(-x, 0):max(-x, 0) + inside.shape[1]]
            masks[t, max(y, 0):y + subject_size, max(x, 0):x + subject_size] = True
            frame *= 1.0 + flicker * np.sin(2.1 * t)
            video[t] = np.clip(frame * 255.0 + 0.5, 0, 255).astype(np.uint8)
    return Clip(video, masks, tuple(cuts))


def on_mask_share(tracks, masks: np.ndarray, reach: int = 2) -> float:
    """Share of visible points within ``reach`` pixels of their frame's mask."""
    kernel = np.ones((2 * reach + 1, 2 * reach + 1), np.uint8)
    hits = total = 0
    for t in range(tracks.frame_count):
        points = tracks.path[t, tracks.visibility[t]]
        near = cv2.dilate(masks[t].astype(np.uint8), kernel).astype(bool)
        xy = np.clip(np.floor(points).astype(int), 0, [masks.shape[2] - 1, masks.shape[1] - 1])
        hits += int(near[xy[:, 1], xy[:, 0]].sum())
        total += len(points)
    return hits / max(total, 1)


@dataclass(frozen=True)
class Passer:
    """frames uint8 [T, H, W, 3]; the figure covers columns ``left[t] .. left[t] + width - 1`` of frame ``t``."""

    frames: np.ndarray
    left: np.ndarray
    width: int


def passer_clip(frames: int = 100, width: int = 320, height: int = 200, speed: float = 4.0, mark: float = 100.0,
                figure_width: int = 70) -> Passer:
    """A still light wall (grey 200, grain of 2 levels) with twelve dark squares of grey ``mark`` (corners that
    never move), and a figure with a smooth texture, as tall as most of the frame, walking across from left to
    right at ``speed`` px/frame in front of it (a person walking past: the wall's corners must stay put)."""
    rng = np.random.default_rng(3)
    wall = np.full((height, width), 200.0, np.float32)
    for index in range(12):
        x, y = 30 + (index % 6) * 45, 60 + (index // 6) * 70
        wall[y:y + 12, x:x + 12] = mark
    wall += rng.normal(0.0, 2.0, wall.shape).astype(np.float32)
    skin = cv2.resize(np.random.default_rng(9).random((25, 12)).astype(np.float32), (figure_width, height),
                      interpolation=cv2.INTER_CUBIC) * 120.0 + 100.0
    left = np.round(-figure_width - 10 + speed * np.arange(frames)).astype(int)
    video = np.zeros((frames, height, width, 3), np.uint8)
    for t in range(frames):
        image = wall.copy()
        first, stop = max(left[t], 0), min(left[t] + figure_width, width)
        if stop > first:
            image[20:190, first:stop] = skin[20:190, first - left[t]:stop - left[t]]
        video[t] = np.clip(image + 0.5, 0, 255).astype(np.uint8)[..., None]
    return Passer(video, left, figure_width)
