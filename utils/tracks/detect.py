"""Detect and follow feature points through an image batch (CPU, OpenCV).

Points are detected on the first frame and re-detected every
``redetect_interval`` frames to fill free slots; between detections they are
followed by pyramidal Lucas-Kanade optical flow with a forward-backward check.
A point keeps its column while it stays visible; a lost point never comes
back (a later detection at the same place gets a new column).
:class:`TrackDetector` does this one frame at a time (for streaming);
:func:`detect_tracks` runs it over a batch.
"""

from __future__ import annotations

import cv2
import numpy as np
from scipy.spatial import cKDTree

from ..core.arrays import to_numpy
from ..core.checks import Range, check_choice, check_range
from .contract import Tracks, fill_hidden

METHODS = ("corners", "blobs", "bright")
# Accepted ranges of the numeric detection parameters; the node widgets read these too.
DETECT_RANGES = {
    "max_points": Range(1),
    "min_distance": Range(0.0),
    "sensitivity": Range(0.0, 1.0),
    "redetect_interval": Range(1),
    "point_size": Range(0.0),
}

_LK_PARAMS = dict(winSize=(21, 21), maxLevel=3,
                  criteria=(cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 30, 0.01))
_FB_MAX_ERROR = 1.0  # pixels: forward-backward round trip must come home this close


def _check_frames(frames) -> np.ndarray:
    """RGB [B, H, W, 3] uint8 or float frames (a view of the input, never a copy)."""
    array = to_numpy(frames)
    shape = list(array.shape)
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4 or array.shape[-1] != 3:
        raise ValueError(f"frames must be RGB images [B, H, W, 3] or [H, W, 3], got shape {shape}")
    if array.dtype != np.uint8 and not np.issubdtype(array.dtype, np.floating):
        raise TypeError(f"frames must be uint8 (0..255) or float (0..1), got dtype {array.dtype}")
    return array


def _gray(frame: np.ndarray) -> np.ndarray:
    """uint8 [H, W] gray from one uint8 or 0..1 float RGB frame."""
    if frame.dtype != np.uint8:
        frame = (np.clip(np.nan_to_num(frame), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2GRAY)


def _select(points: np.ndarray, scores: np.ndarray, live: np.ndarray, min_distance: float,
            limit: int) -> np.ndarray:
    """Up to ``limit`` strongest points at least ``min_distance`` from live points and each other."""
    if len(live) and len(points):
        nearest, _ = cKDTree(live).query(points, k=1)
        keep = nearest >= min_distance
        points, scores = points[keep], scores[keep]
    chosen = np.zeros((limit, 2), np.float32)
    count = 0
    for index in np.argsort(-scores, kind="stable"):
        if count == limit:
            break
        if count and np.min(np.hypot(*(chosen[:count] - points[index]).T)) < min_distance:
            continue
        chosen[count] = points[index]
        count += 1
    return chosen[:count]


def _detect_corners(gray, sensitivity, min_distance, live, limit):
    """Shi-Tomasi corners, refined to sub-pixel accuracy."""
    quality = 0.1 ** (1.0 + 2.0 * sensitivity)  # 0.1 (strict) .. 0.001 (sensitive)
    corners = cv2.goodFeaturesToTrack(gray, maxCorners=0, qualityLevel=quality,
                                      minDistance=max(min_distance, 1.0), blockSize=3)
    if corners is None:
        return np.zeros((0, 2), np.float32)
    corners = corners.reshape(-1, 2)
    chosen = _select(corners, -np.arange(len(corners), dtype=np.float32), live, min_distance, limit)
    if len(chosen) == 0:
        return chosen
    criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 20, 0.03)
    return cv2.cornerSubPix(gray, chosen.reshape(-1, 1, 2), (5, 5), (-1, -1), criteria).reshape(-1, 2)


def _detect_blobs(gray, sensitivity, min_distance, live, limit):
    """OpenCV blobs of either polarity, largest first."""
    params = cv2.SimpleBlobDetector_Params()
    params.filterByColor = False
    params.minArea = 4.0 + 60.0 * (1.0 - sensitivity)
    params.maxArea = float(gray.size)
    params.minConvexity = 0.8
    params.minDistBetweenBlobs = max(min_distance, 1.0)
    keypoints = cv2.SimpleBlobDetector_create(params).detect(gray)
    points = np.array([kp.pt for kp in keypoints], np.float32).reshape(-1, 2)
    sizes = np.array([kp.size for kp in keypoints], np.float32)
    return _select(points, sizes, live, min_distance, limit)


def _detect_bright(gray, sensitivity, min_distance, live, limit):
    """Bright spots at their intensity-weighted centroids, brightest mass first."""
    level = round(255.0 * (0.9 - 0.6 * sensitivity))  # 230 (strict) .. 77 (sensitive)
    count, labels = cv2.connectedComponents((gray > level).astype(np.uint8), connectivity=8)
    inside = np.flatnonzero(labels)
    label = labels.ravel()[inside]
    weight = gray.ravel()[inside].astype(np.float64)
    rows, cols = np.divmod(inside, gray.shape[1])
    mass = np.bincount(label, weight, count)[1:]
    x = np.bincount(label, weight * cols, count)[1:] / mass
    y = np.bincount(label, weight * rows, count)[1:] / mass
    points = np.stack([x, y], axis=1).astype(np.float32)
    return _select(points, mass.astype(np.float32), live, min_distance, limit)


_DETECTORS = {"corners": _detect_corners, "blobs": _detect_blobs, "bright": _detect_bright}


def _follow(previous: np.ndarray, current: np.ndarray, points: np.ndarray):
    """LK-tracked positions and a mask of points that passed every check."""
    if len(points) == 0:
        return points, np.zeros(0, bool)
    start = points.reshape(-1, 1, 2)
    forward, status_f, _ = cv2.calcOpticalFlowPyrLK(previous, current, start, None, **_LK_PARAMS)
    back, status_b, _ = cv2.calcOpticalFlowPyrLK(current, previous, forward, None, **_LK_PARAMS)
    forward, back = forward.reshape(-1, 2), back.reshape(-1, 2)
    height, width = current.shape
    ok = (status_f.ravel() == 1) & (status_b.ravel() == 1)
    ok &= np.hypot(*(back - points).T) < _FB_MAX_ERROR
    ok &= (forward[:, 0] >= -0.5) & (forward[:, 0] <= width - 0.5)
    ok &= (forward[:, 1] >= -0.5) & (forward[:, 1] <= height - 0.5)
    return forward, ok


def _check_params(max_points, min_distance, sensitivity, method, redetect_interval, max_tracks) -> None:
    check_choice("method", method, METHODS)
    check_range("max_points", max_points, DETECT_RANGES["max_points"], integer=True)
    check_range("min_distance (pixels)", min_distance, DETECT_RANGES["min_distance"])
    check_range("sensitivity", sensitivity, DETECT_RANGES["sensitivity"])
    check_range("redetect_interval (frames)", redetect_interval, DETECT_RANGES["redetect_interval"], integer=True)
    if max_tracks is not None:
        check_range("max_tracks (at least max_points)", max_tracks, Range(max_points), integer=True)


class TrackDetector:
    """Incremental detection and following, one frame at a time.

    Same parameters and results as :func:`detect_tracks` (``max_tracks=None``
    means no column cap), but frames are fed one by one, so a video of any
    length streams through in constant memory (apart from two floats per
    track column ever started).

    Example::

        detector = TrackDetector(method="bright")
        for frame in frames:
            positions, visible = detector.update(frame)
    """

    def __init__(self, max_points: int = 100, min_distance: float = 20.0, sensitivity: float = 0.5,
                 method: str = "corners", redetect_interval: int = 5, max_tracks: int | None = None):
        _check_params(max_points, min_distance, sensitivity, method, redetect_interval, max_tracks)
        self.max_points, self.min_distance, self.sensitivity = max_points, min_distance, sensitivity
        self.redetect_interval, self.max_tracks = redetect_interval, max_tracks
        self._detector = _DETECTORS[method]
        self._positions = np.zeros((0, 2), np.float32)  # our pixel convention, last known per column
        self._live_ids = np.zeros(0, np.int64)
        self._live_points = np.zeros((0, 2), np.float32)  # OpenCV convention (centres on integers)
        self._previous = None
        self.frame_index = 0

    @property
    def track_count(self) -> int:
        """Columns started so far."""
        return len(self._positions)

    def _room(self) -> int:
        """How many new tracks may start now."""
        room = self.max_points - len(self._live_ids)
        if self.max_tracks is not None:
            room = min(room, self.max_tracks - self.track_count)
        return room

    def _gray(self, frame) -> np.ndarray:
        """Gray of one RGB frame, checked against the first frame's size."""
        array = _check_frames(frame)
        if len(array) != 1:
            raise ValueError(f"update takes one frame [H, W, 3], got shape {list(array.shape)}")
        gray = _gray(array[0])
        if self._previous is not None and gray.shape != self._previous.shape:
            raise ValueError(f"frame {self.frame_index} is {gray.shape[1]}x{gray.shape[0]} but earlier frames "
                             f"are {self._previous.shape[1]}x{self._previous.shape[0]}; all frames must "
                             "have one size")
        return gray

    def update(self, frame) -> tuple[np.ndarray, np.ndarray]:
        """Follow live points into ``frame`` (RGB [H, W, 3]) and maybe detect new ones.

        Returns ``(positions, visible)``: float32 ``[N_total, 2]`` (a copy; hidden
        columns hold their last known position) and bool ``[N_total]``, where
        ``N_total`` counts every column started so far. Columns are only ever
        appended, so column ``n`` is the same track in every frame.
        """
        gray = self._gray(frame)
        if self._previous is not None:
            points, ok = _follow(self._previous, gray, self._live_points)
            self._live_ids, self._live_points = self._live_ids[ok], points[ok]
        self._previous = gray
        room = self._room()
        if self.frame_index % self.redetect_interval == 0 and room > 0:
            fresh = self._detector(gray, self.sensitivity, self.min_distance, self._live_points, room)
            start = self.track_count
            self._live_ids = np.concatenate([self._live_ids, np.arange(start, start + len(fresh))])
            self._live_points = np.concatenate([self._live_points, fresh]).astype(np.float32)
            self._positions = np.concatenate([self._positions, np.zeros((len(fresh), 2), np.float32)])
        self._positions[self._live_ids] = self._live_points + 0.5  # OpenCV's pixel centres are integers
        visible = np.zeros(self.track_count, bool)
        visible[self._live_ids] = True
        self.frame_index += 1
        return self._positions.copy(), visible


def detect_tracks(frames, max_points: int = 100, min_distance: float = 20.0, sensitivity: float = 0.5,
                  method: str = "corners", redetect_interval: int = 5, point_size: float = 16.0,
                  max_tracks: int | None = None) -> Tracks:
    """Detect points in ``frames`` and follow them; returns :class:`Tracks`.

    Args:
        frames: RGB [B, H, W, 3] (or one [H, W, 3]) as uint8 or float in 0..1
            (NumPy, or torch on the CPU).
        max_points: most points visible at once.
        min_distance: new points keep this many pixels from live points and each other.
        sensitivity: 0..1; higher finds weaker corners, smaller blobs, dimmer spots.
        method: "corners" (Shi-Tomasi), "blobs" (OpenCV blob detector, bright or
            dark) or "bright" (bright spots, intensity-weighted centroids).
        redetect_interval: detect new points every this many frames (1 = every frame).
        point_size: box width and height written to ``track_size``, in pixels.
        max_tracks: most columns in the clip (default ``4 * max_points``); once
            reached, no new tracks start.

    Invisible slots hold the track's nearest known position. Deterministic.
    Frame by frame, this is :class:`TrackDetector`.
    """
    max_tracks = 4 * max_points if max_tracks is None else max_tracks
    if not point_size >= DETECT_RANGES["point_size"].low:
        raise ValueError(f"point_size must be >= {DETECT_RANGES['point_size'].low:g} pixels, got {point_size}")
    detector = TrackDetector(max_points, min_distance, sensitivity, method, redetect_interval, max_tracks)
    frames = _check_frames(frames)
    path = np.zeros((len(frames), max_tracks, 2), np.float32)
    visible = np.zeros((len(frames), max_tracks), bool)
    for t, frame in enumerate(frames):
        positions, flags = detector.update(frame)
        path[t, :len(positions)] = positions
        visible[t, :len(flags)] = flags
    used = detector.track_count
    visible = visible[:, :used]
    path = fill_hidden(path[:, :used], visible)
    size = np.full(path.shape, point_size, np.float32)
    return Tracks(path, visible, size, name="detected tracks")
