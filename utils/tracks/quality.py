"""How good a set of tracks is, in numbers a person can read.

:func:`measure_tracks` reports what makes an overlay look stable or jumpy:
how many tracks start, how many live a single frame, how long they live,
frames left without any point, how much the live count swings from one
redetection cycle to the next, and (given a map of moving pixels per frame)
the share of points that sit on something that moves. Against known true
positions, :func:`identity_changes` counts how often a point's track changes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable

import cv2
import numpy as np
from scipy.optimize import linear_sum_assignment

from .contract import Tracks, normalize_tracks


@dataclass(frozen=True)
class TrackQuality:
    """Quality figures of one track set (see :func:`measure_tracks`).

    Attributes:
        frames: frame count T.
        tracks_started: tracks visible in at least one frame.
        one_frame_share: share of those visible in exactly one frame (0..1).
        median_life: median number of frames a track is visible.
        empty_frames: frames with no visible point.
        mean_live: mean number of visible points per frame.
        count_swing: median, over windows of ``window`` frames, of the live count's
            range (max - min) in the window: the jump around each redetection.
        moving_share: share of visible points on moving pixels (0..1), or None
            when no moving-pixel maps were given.
    """

    frames: int
    tracks_started: int
    one_frame_share: float
    median_life: float
    empty_frames: int
    mean_live: float
    count_swing: float
    moving_share: float | None = None

    def as_dict(self) -> dict:
        """The figures as a plain dict (for JSON)."""
        return asdict(self)


def _shown(tracks: Tracks) -> np.ndarray:
    """bool [T, N]: visible slots (with an opacity above 0 where the tracks carry one)."""
    shown = tracks.visibility.copy()
    if tracks.opacity is not None:
        shown &= tracks.opacity > 0
    return shown


def moving_share(tracks: Tracks, moving: Iterable[np.ndarray], reach: int = 0) -> float | None:
    """Share of visible points that lie on a moving pixel of their frame.

    ``moving`` yields one bool map [H, W] per frame (None for a frame without a
    verdict, e.g. the first). A point counts as moving when a moving pixel lies
    within ``reach`` pixels of it. Returns None when no point was judged.
    """
    shown = _shown(tracks)
    hits = judged = 0
    kernel = np.ones((2 * reach + 1, 2 * reach + 1), np.uint8) if reach > 0 else None
    for t, mask in enumerate(moving):
        if t >= tracks.frame_count:
            break
        if mask is None:
            continue
        mask = np.asarray(mask, bool)
        if kernel is not None:
            mask = cv2.dilate(mask.astype(np.uint8), kernel).astype(bool)
        columns = np.flatnonzero(shown[t])
        if not len(columns):
            continue
        height, width = mask.shape
        xy = np.floor(tracks.path[t, columns]).astype(np.int64)
        inside = (xy[:, 0] >= 0) & (xy[:, 0] < width) & (xy[:, 1] >= 0) & (xy[:, 1] < height)
        hits += int(np.count_nonzero(mask[xy[inside, 1], xy[inside, 0]]))
        judged += len(columns)
    return hits / judged if judged else None


def measure_tracks(tracks, moving: Iterable[np.ndarray] | None = None, window: int = 5,
                   reach: int = 0) -> TrackQuality:
    """Quality figures of ``tracks`` (a :class:`Tracks` or TRACKS dict).

    ``window`` is the redetection interval the count swing is measured over;
    ``moving`` and ``reach`` feed :func:`moving_share`. Points hidden by an
    opacity of 0 count as not visible.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1 frame, got {window}")
    tracks = normalize_tracks(tracks)
    shown = _shown(tracks)
    life = shown.sum(axis=0)
    started = life[life > 0]
    live = shown.sum(axis=1)
    swings = [int(np.ptp(live[start:start + window])) for start in range(0, len(live), window)]
    return TrackQuality(
        frames=tracks.frame_count,
        tracks_started=len(started),
        one_frame_share=float(np.mean(started == 1)) if len(started) else 0.0,
        median_life=float(np.median(started)) if len(started) else 0.0,
        empty_frames=int(np.count_nonzero(live == 0)),
        mean_live=float(live.mean()) if len(live) else 0.0,
        count_swing=float(np.median(swings)) if swings else 0.0,
        moving_share=None if moving is None else moving_share(tracks, moving, reach),
    )


def identity_changes(tracks, truth: np.ndarray, near: float, apart: float) -> tuple[int, int]:
    """How well tracks keep to known points ``truth`` (float [T, M, 2] pixel x, y): frame by frame, the true
    points are matched one to one to visible tracks (least total distance, pairs at most ``near`` pixels apart).
    Returns (changes, missed): times a point's track differs from its track the last time it was judged, and
    judgements with no track on the point. A point is judged only in frames where it lies more than ``apart``
    pixels from every other true point (where two overlap, either track is right)."""
    tracks = normalize_tracks(tracks)
    shown = _shown(tracks)
    owner = np.full(truth.shape[1], -1)
    changes = missed = 0
    for index in range(min(tracks.frame_count, len(truth))):
        points = truth[index]
        columns = np.flatnonzero(shown[index])
        distance = np.hypot(*(points[:, None] - tracks.path[index, columns][None]).transpose(2, 0, 1))
        found = np.full(len(points), -1)
        rows, matched = linear_sum_assignment(distance)
        close = distance[rows, matched] <= near
        found[rows[close]] = columns[matched[close]]
        between = np.hypot(*(points[:, None] - points[None]).transpose(2, 0, 1))
        np.fill_diagonal(between, np.inf)
        judged = between.min(axis=1, initial=np.inf) > apart
        missed += int(np.count_nonzero(judged & (found < 0)))
        seen = judged & (found >= 0)
        changes += int(np.count_nonzero(seen & (owner >= 0) & (owner != found)))
        owner[seen] = found[seen]
    return changes, missed
