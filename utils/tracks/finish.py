"""Finishing raw tracks for display: short tracks dropped, short gaps bridged, births and deaths faded.

The detector's raw output says, frame by frame, which track columns were
followed. :class:`TrackFinisher` turns it into what an overlay should draw:

* a gap of at most ``bridge_frames`` frames inside one track (it was lost,
  then found again nearby) is bridged: visible, its position interpolated;
* a run of fewer than ``min_track_length`` frames is hidden, unless it fills
  its whole (short) shot;
* a run fades in over its first ``fade_frames`` frames and out over its
  last ones (opacity k / (fade_frames + 1)), except where it starts or ends
  with its shot: tracks seeded on a shot's first frame appear at full
  opacity, and tracks cut off by a scene cut or the clip's end vanish with
  the shot rather than fading over the next one.

Each rule needs a bounded look ahead, so the finisher holds ``lookahead``
frames back; fed frame by frame it gives exactly the result it gives on a
whole clip, in constant memory.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..core.checks import Range, check_range

MIN_TRACK_LENGTH_RANGE = Range(1)
FADE_FRAMES_RANGE = Range(0)
BRIDGE_FRAMES = 5
"""Longest gap, in frames, bridged inside one track."""


@dataclass(frozen=True)
class TrackFrame:
    """One finished frame of tracks; index ``n`` is track column ``n``.

    Attributes:
        positions: float32 [N, 2] pixel x, y (hidden columns hold a last known position).
        visible: bool [N].
        opacity: float32 [N], 0..1 (0 where hidden).
        shot_start: whether this frame starts a shot (the clip's first frame or a cut).
    """

    positions: np.ndarray
    visible: np.ndarray
    opacity: np.ndarray
    shot_start: bool


@dataclass
class _Raw:
    positions: np.ndarray
    visible: np.ndarray
    shot_start: bool


def _grown(array: np.ndarray, count: int, fill) -> np.ndarray:
    """``array`` extended along its first axis to ``count`` entries of ``fill``."""
    if len(array) >= count:
        return array
    extra = np.full((count - len(array),) + array.shape[1:], fill, array.dtype)
    return np.concatenate([array, extra])


class TrackFinisher:
    """Feed raw frames with :meth:`push`, in order; finished frames come out ``lookahead`` frames later.

    Call :meth:`finish` after the last frame for the frames still held.
    """

    def __init__(self, min_track_length: int = 1, fade_frames: int = 0, bridge_frames: int = BRIDGE_FRAMES):
        check_range("min_track_length (frames)", min_track_length, MIN_TRACK_LENGTH_RANGE, integer=True)
        check_range("fade_frames (0 = no fade)", fade_frames, FADE_FRAMES_RANGE, integer=True)
        if bridge_frames < 0:
            raise ValueError(f"bridge_frames must be >= 0, got {bridge_frames}")
        self.min_track_length, self.fade_frames, self.bridge_frames = min_track_length, fade_frames, bridge_frames
        # a gap must be seen whole from the frame before it, and fades and lengths need the gaps after them
        self.lookahead = max(fade_frames, min_track_length - 1, 1) + bridge_frames
        self._window: deque[_Raw] = deque()
        self._frame = 0  # index of the next frame to emit
        self._seen_frame = np.zeros(0, np.int64)  # last frame the column was followed in this shot, -1: none
        self._seen_position = np.zeros((0, 2), np.float32)
        self._run_start = np.zeros(0, np.int64)  # first frame of the column's current run, -1: not on
        self._run_shown = np.zeros(0, bool)
        self._run_from_shot_start = np.zeros(0, bool)
        self._shot_begin = 0

    def push(self, positions: np.ndarray, visible: np.ndarray, shot_start: bool) -> list[TrackFrame]:
        """Add the next raw frame: positions [N, 2], visible [N] (N never shrinks); returns finished frames."""
        self._window.append(_Raw(np.asarray(positions, np.float32), np.asarray(visible, bool), bool(shot_start)))
        done = []
        while len(self._window) > self.lookahead:
            done.append(self._emit(clip_ends=False))
        return done

    def finish(self) -> list[TrackFrame]:
        """The frames still held (the clip has ended)."""
        done = []
        while self._window:
            done.append(self._emit(clip_ends=True))
        return done

    def _grow(self, count: int) -> None:
        self._seen_frame = _grown(self._seen_frame, count, -1)
        self._seen_position = _grown(self._seen_position, count, 0.0)
        self._run_start = _grown(self._run_start, count, -1)
        self._run_shown = _grown(self._run_shown, count, False)
        self._run_from_shot_start = _grown(self._run_from_shot_start, count, False)

    def _window_arrays(self, count: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """Visibility [E+1, N] and positions [E+1, N, 2] of the held frames up to the shot's end,
        and whether that end is the shot's last frame (a cut or the clip's end follows)."""
        frames = list(self._window)
        end = next((i for i in range(1, len(frames)) if frames[i].shot_start), None)
        shot_ends = end is not None
        frames = frames if end is None else frames[:end]
        visible = np.zeros((len(frames), count), bool)
        positions = np.zeros((len(frames), count, 2), np.float32)
        for index, raw in enumerate(frames):
            visible[index, :len(raw.visible)] = raw.visible
            positions[index, :len(raw.visible)] = raw.positions
        return visible, positions, shot_ends

    def _emit(self, clip_ends: bool) -> TrackFrame:
        count = len(self._window[-1].visible)
        self._grow(count)
        t = self._frame
        head = self._window[0]
        if head.shot_start or t == 0:
            self._seen_frame[:] = -1
            self._run_start[:] = -1
            self._shot_begin = t
        visible, positions, shot_ends = self._window_arrays(count)
        shot_ends = shot_ends or clip_ends
        last = len(visible) - 1
        offsets = np.arange(len(visible))[:, None]
        # next followed offset at or after each offset (len(visible) = none in the window)
        next_seen = np.minimum.accumulate(np.where(visible, offsets, len(visible))[::-1], axis=0)[::-1]
        # last followed offset before each offset (negative: before the window, ``never``: not in this shot)
        never = -(10 ** 9)
        seen_before = np.where(self._seen_frame >= 0, self._seen_frame - t, never)
        followed_so_far = np.maximum.accumulate(np.where(visible, offsets, never), axis=0)
        seen = np.maximum(np.concatenate([seen_before[None], followed_so_far[:-1]]), seen_before)
        # on[i]: followed, or inside a gap of at most bridge_frames frames between two followed frames
        on = visible | ((next_seen <= last) & (next_seen - seen - 1 <= self.bridge_frames))
        off = ~on
        off_ahead = off.any(axis=0)
        run_length = np.where(off_ahead, np.argmax(off, axis=0), len(visible))  # frames on from t
        now = on[0]
        starting = now & (self._run_start < 0)
        if starting.any():
            from_shot_start = t == self._shot_begin
            whole_shot = ~off_ahead & shot_ends & from_shot_start
            self._run_start[starting] = t
            self._run_from_shot_start[starting] = from_shot_start
            self._run_shown[starting] = ((run_length >= self.min_track_length) | whole_shot)[starting]
        self._run_start[~now] = -1
        shown = now & self._run_shown
        ramp = np.float32(self.fade_frames + 1)
        fade_in = np.where(self._run_from_shot_start, 1.0, (t - self._run_start + 1) / ramp)
        fade_out = np.where(off_ahead, run_length / ramp, 1.0)
        opacity = np.where(shown, np.clip(np.minimum(fade_in, fade_out), 0.0, 1.0), 0.0).astype(np.float32)
        result = positions[0].copy()
        bridged = now & ~visible[0]
        if bridged.any():
            ahead = next_seen[0, bridged]
            known = self._seen_frame[bridged]
            share = ((t - known) / (t + ahead - known)).astype(np.float32)[:, None]
            target = positions[ahead, np.flatnonzero(bridged)]
            result[bridged] = self._seen_position[bridged] + share * (target - self._seen_position[bridged])
        self._seen_frame[visible[0]] = t
        self._seen_position[visible[0]] = positions[0, visible[0]]
        self._window.popleft()
        self._frame += 1
        return TrackFrame(result, shown, opacity, head.shot_start or t == 0)
