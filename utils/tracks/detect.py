"""Detect and follow feature points through a clip (CPU, OpenCV).

Per frame, :class:`TrackDetector`:

1. checks for a scene cut (:mod:`.cuts`); a cut ends every track and the
   cut frame itself is seeded afresh, so no track crosses a cut. A flash
   frame (one frame that breaks into a shot, e.g. white) is skipped: no
   point is seen on it, and points are followed from the frame before it
   to the frame after it, so tracks hold (the finisher bridges the gap);
2. measures the camera's motion and what moves besides it (:mod:`.motion`);
3. follows live points by pyramidal Lucas-Kanade flow (started where the
   camera motion takes them, checked forward-backward; frames larger than
   ``FOLLOW_MAX_SIDE`` are followed, and searched for corners, at half
   size or a quarter), or, for bright
   spots (:mod:`.spots`), by matching each spot to the track whose motion predicts it (spots
   whose glows touch are split at their cores; a track whose spot has merged
   with another's keeps its own motion through the crossing, and lost tracks
   compete for the spots, looking farther each frame, so crossing dots keep
   their ids when they part); a
   point that fails (but not one that left the frame) waits to be found
   again for ``REACQUIRE_FRAMES`` frames, moving on at its last speed. A
   point that sat still and is pulled onto moving pixels (something passing
   in front of it) is hidden there, not dragged along, and is taken back only
   by a point off moving pixels;
4. detects new points every ``redetect_interval`` frames (bright spots:
   every frame, as they are found anyway), on a shot's first frame, and
   whenever fewer than ``REFILL_SHARE`` of ``max_points`` are live. New
   points go only where none are (``min_distance`` from live ones); one that
   appears near a lost point takes that point's column back, so ids survive
   occlusions and tracker slips, and a point lost less than
   ``BRIDGE_FRAMES`` ago keeps its slot. Points on moving pixels come first
   and may replace static ones (``motion_preference``); method ``motion``
   takes only points that move themselves, and lets tracks that stop moving
   go. A ``subject`` mask limits points to a region (detections inside it;
   tracks that leave it end);
5. hands the raw tracks to :class:`.finish.TrackFinisher`, which drops
   tracks shorter than ``min_track_length``, bridges short gaps and fades
   births and deaths over ``fade_frames``.

Motion at a frame is measured toward the next frame, so results come out a
little after the frames go in (:attr:`TrackDetector.lookahead`). What a frame
needs alone (:meth:`TrackDetector.prepare`) can run ahead of its turn on
other threads (:func:`prepare_ahead`), with the same tracks bit for bit.
:func:`detect_tracks` runs it over a batch and returns :class:`Tracks`.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import cv2
import numpy as np
from scipy.spatial import cKDTree

from ..core.arrays import to_numpy, unit_to_uint8
from ..core.checks import Range, check_choice, check_range
from ..core.log import LOGGER
from ..core.threads import ordered_ahead
from ..raster.backend import select_backend
from .contract import Tracks, fill_hidden, host_array
from .cuts import CUT_THRESHOLD_RANGE, DEFAULT_CUT_THRESHOLD, CutDetector
from .finish import (
    BRIDGE_FRAMES,
    FADE_FRAMES_RANGE,
    MIN_TRACK_LENGTH_RANGE,
    TrackFinisher,
    TrackFrame,
)
from .motion import MOVING_LEVEL, MotionFrame, motion_between, reduced
from .spots import Spots

METHODS = ("corners", "blobs", "bright", "motion")
# Accepted ranges of the numeric detection parameters; the node widgets read these too.
DETECT_RANGES = {
    "max_points": Range(1),
    "min_distance": Range(0.0),
    "sensitivity": Range(0.0, 1.0),
    "redetect_interval": Range(1),
    "point_size": Range(0.0),
    "max_tracks": Range(0),  # 0 = no limit; otherwise at least max_points
    "min_track_length": MIN_TRACK_LENGTH_RANGE,  # checked by TrackFinisher
    "fade_frames": FADE_FRAMES_RANGE,  # checked by TrackFinisher
    "motion_preference": Range(0.0, 1.0),
    "cut_threshold": CUT_THRESHOLD_RANGE,  # checked by CutDetector
}

REFILL_SHARE = 0.9
"""Detection runs early whenever fewer than this share of ``max_points`` is live."""
REACQUIRE_FRAMES = 30
"""Frames a lost point waits to be found again (then its column takes the new point)."""
STILL_SPEED = 0.25
"""Pixels per frame: method ``motion`` lets a track go once its own motion falls below this."""
DEFAULT_MIN_TRACK_LENGTH = 8
DEFAULT_FADE_FRAMES = 6

_LK_WINDOW = 21  # pixels: the patch Lucas-Kanade follows
CORNER_REFERENCE = 0.05
"""Shi-Tomasi strength a frame's strongest corner counts as at least, when corners are kept relative to it: a
frame without texture (a blank wall, a blurred frame, a fade) then finds none on its compression noise. Real
footage measured 0.02-0.27 for its strongest corner and 0.0009 and up for its 100th; blank and blurred clips
0.00005-0.0004 for their strongest."""
_LK_TEST_WINDOW = 9  # pixels: the smaller patch that tells whether a new point itself moves (method motion)
_LK_PARAMS = dict(maxLevel=3, criteria=(cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 30, 0.01),
                  minEigThreshold=1e-4)
_SUBPIX_HALF_WINDOW = 5  # pixels: new corners are refined in a window 2 x this + 1 wide (less on tiny frames)
_FB_MAX_ERROR = 1.0  # pixels of the image followed: forward-backward round trip must come home this close
FOLLOW_MAX_SIDE = 2560
"""Lucas-Kanade follows live points, and new corners are found, on a copy of the frame halved until its longer
side is at most this many pixels: a 4K frame is worked on at 1920x1080, its 21-pixel patch then covering as
much of the picture as on a 1080p frame, and its corners those of the picture, not of its grain. At full 4K,
following (the one step that waits for the frame before) took ~20 ms a frame, and corners ~50 ms."""
_STILL_MEMORY = 0.5  # weight of the newest frame in a track's running motion
SETTLED_FRAMES = 8
"""Frames in a row a point must not move on its own (under ``STILL_SPEED``) before moving pixels that pull it
away count as passing in front of it (:func:`_pulled_away`); a camera motion measured on moving content can
make a moving point look still for a few frames."""
_SPOT_REACH = 6.0  # pixels: least distance a bright-spot track looks for its spot (or min_distance / 2)
_LOST_REACH_GROWTH = 0.5  # a lost bright-spot track looks this much farther (x its reach) each frame it stays lost
_LOST_REACH_MOST = 4.0  # ... up to this many times its reach
PREPARE_THREADS = max(1, min(8, (os.cpu_count() or 2) // 2))
"""Threads preparing frames ahead of the detector (:func:`prepare_ahead`; OpenCV runs outside Python's lock):
half the cores, at most 8 (on 16 cores 8 beat 4 and 1 at 1080p, with x264 encoding beside them)."""
PREPARE_OPENCV_THREADS = 2
"""Most threads of OpenCV's own pool while frames are prepared ahead (:func:`opencv_pool_held`; every OpenCV
call of the process meanwhile). Its workers spin between the many short calls of the preparing threads and
took cores from them and from x264: on an H100 machine (16 cores) the CLI with detection went from 72 to 80 fps
at 1080p and from 39 to 46 at 4K (median of 3 rounds), with a third less CPU time a frame; 1 and 4 threads did
no better."""
_pool_lock = threading.Lock()
_pool_holds = {"count": 0, "before": 0}  # open holds of OpenCV's pool, and its thread count before the first


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


def _uint8(frame: np.ndarray) -> np.ndarray:
    """uint8 RGB of one uint8 or 0..1 float frame."""
    if frame.dtype == np.uint8:
        return np.ascontiguousarray(frame)
    return unit_to_uint8(frame)


def subject_masks(subject, frames: int, height: int, width: int) -> np.ndarray:
    """bool [B, H, W] from a MASK batch (bools, 0..1 floats or 0..255 uint8) for ``frames`` frames of H x W.

    One mask serves every frame. A mask of another size with the frames' aspect
    ratio is resized; any other shape is an error naming the fix.
    """
    array = host_array(subject, "subject")
    shape = list(np.shape(subject))
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3 or 0 in array.shape:
        raise ValueError(f"subject must be a MASK [B, H, W] (or [H, W]), got shape {shape}")
    if array.dtype == bool:
        array = array.astype(np.uint8)
    elif array.dtype == np.uint8:
        array = (array > 127).astype(np.uint8)
    elif np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating):
        array = (np.nan_to_num(array) > 0.5).astype(np.uint8)
    else:
        raise TypeError(f"subject must hold bools or numbers, got dtype {array.dtype}")
    if len(array) not in (1, frames):
        raise ValueError(f"subject has {len(array)} masks but there are {frames} frames; give one mask per "
                         "frame, or one for all")
    if not array.any():
        raise ValueError(f"subject masks are all empty ({array.shape[2]}x{array.shape[1]}, no value over 0.5), so "
                         "no point could be tracked; give masks that mark the subject (Load Image's mask of an "
                         "image without alpha is an empty 64x64 one), or leave subject unset")
    if array.shape[1:] != (height, width):
        mask_aspect, frame_aspect = array.shape[2] / array.shape[1], width / height
        if abs(mask_aspect / frame_aspect - 1.0) > 0.01:
            raise ValueError(f"subject masks are {array.shape[2]}x{array.shape[1]} but the frames are "
                             f"{width}x{height}; give masks of the frames' size (or at least their aspect ratio)")
        LOGGER.info("subject masks resized from %dx%d to the frames' %dx%d", array.shape[2], array.shape[1],
                    width, height)
        array = np.stack([cv2.resize(mask, (width, height), interpolation=cv2.INTER_NEAREST) for mask in array])
    return array.astype(bool)


@dataclass
class _Lost:
    """Tracks lost by the follower, waiting to be found again: column ids, predicted points
    (OpenCV convention), last frame-to-frame moves, the frame they were lost in and whether they had
    settled (a settled point is taken back only by a candidate off moving pixels)."""

    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    points: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.float32))
    steps: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.float32))
    since: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    settled: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    frame: int = 0  # the frame the points are predicted for

    def select(self, keep: np.ndarray) -> None:
        """Keep only the entries where ``keep`` is true."""
        self.ids, self.points, self.steps, self.since, self.settled = (
            self.ids[keep], self.points[keep], self.steps[keep], self.since[keep], self.settled[keep])

    def advance(self, frame: int) -> None:
        """On to ``frame``: entries older than ``REACQUIRE_FRAMES`` go, the rest move on at their last speed."""
        self.select(frame - self.since <= REACQUIRE_FRAMES)
        self.points = self.points + (frame - self.frame) * self.steps
        self.frame = frame

    def add(self, ids: np.ndarray, points: np.ndarray, steps: np.ndarray, frame: int, settled: np.ndarray) -> None:
        self.ids = np.concatenate([self.ids, ids])
        self.points = np.concatenate([self.points, points]).astype(np.float32)
        self.steps = np.concatenate([self.steps, steps]).astype(np.float32)
        self.since = np.concatenate([self.since, np.full(len(ids), frame)])
        self.settled = np.concatenate([self.settled, settled])
        self.frame = frame


def _rank(count: int) -> np.ndarray:
    """1 for the first of ``count`` candidates (strongest) down to just above 0 for the last."""
    return 1.0 - np.arange(count, dtype=np.float64) / max(count, 1)


def _in_region(points: np.ndarray, region: np.ndarray | None) -> np.ndarray:
    """bool [n]: which points (OpenCV pixel centres) lie on a nonzero pixel of ``region``."""
    if region is None:
        return np.ones(len(points), bool)
    height, width = region.shape
    x = np.clip(np.rint(points[:, 0]).astype(np.int64), 0, width - 1)
    y = np.clip(np.rint(points[:, 1]).astype(np.int64), 0, height - 1)
    return region[y, x] > 0


def _corner_candidates(gray, sensitivity, min_distance, region):
    """Shi-Tomasi corners, strongest first, stronger than ``quality`` (0.1 strict .. 0.001 sensitive) times the
    frame's strongest or :data:`CORNER_REFERENCE`, whichever is larger. One search at the level relative to the
    strongest finds both: corners are kept strongest first, each at ``min_distance`` from those kept before it,
    so a higher level keeps a prefix of the same list (a second search cost ~45 ms a 1080p frame, 2 cores)."""
    quality = 0.1 ** (1.0 + 2.0 * sensitivity)
    corners, strengths = cv2.goodFeaturesToTrackWithQuality(gray, 0, quality, max(min_distance, 1.0), region,
                                                            blockSize=3)
    if corners is None:
        return np.zeros((0, 2), np.float32)
    return corners.reshape(-1, 2)[strengths.ravel() > quality * CORNER_REFERENCE]


def _blob_candidates(gray, sensitivity, min_distance, region):
    """OpenCV blobs of either polarity, largest first."""
    params = cv2.SimpleBlobDetector_Params()
    params.filterByColor = False
    params.minArea = 4.0 + 60.0 * (1.0 - sensitivity)
    params.maxArea = float(gray.size)
    if params.maxArea < params.minArea:  # a frame smaller than the smallest blob
        return np.zeros((0, 2), np.float32)
    params.minConvexity = 0.8
    params.minDistBetweenBlobs = max(min_distance, 1.0)
    keypoints = cv2.SimpleBlobDetector_create(params).detect(gray)
    points = np.array([kp.pt for kp in keypoints], np.float32).reshape(-1, 2)
    order = np.argsort([-kp.size for kp in keypoints], kind="stable")
    points = points[order]
    return points[_in_region(points, region)]


class _Candidates(NamedTuple):
    """New-point candidates (OpenCV convention, in the order found), which of them move, the order to take
    them in (best first), and a k-d tree over them: searched around the few live and lost points, not from
    every candidate."""

    points: np.ndarray
    moving: np.ndarray
    order: np.ndarray
    tree: cKDTree

    @classmethod
    def of(cls, points: np.ndarray, moving: np.ndarray, order: np.ndarray | None = None,
           tree: cKDTree | None = None) -> _Candidates:
        """Candidates taken as found (``order`` None); their tree is built here unless given."""
        return cls(points, moving, np.arange(len(points)) if order is None else order,
                   cKDTree(points) if tree is None else tree)

    def _near(self, points: np.ndarray, reach: float) -> np.ndarray:
        """Sorted indices of the candidates within ``reach`` of any of ``points`` (and a hair beyond)."""
        if len(points) == 0 or len(self.points) == 0:
            return np.zeros(0, np.int64)
        lists = self.tree.query_ball_point(points, reach * (1 + 1e-6) + 1e-6)
        return np.unique(np.fromiter(itertools.chain.from_iterable(lists), np.int64))

    def away_from(self, points: np.ndarray, distance: float) -> np.ndarray:
        """bool [n]: candidates at least ``distance`` from every one of ``points``."""
        away = np.ones(len(self.points), bool)
        near = self._near(points, distance)
        if len(near):
            nearest, _ = cKDTree(points).query(self.points[near], k=1)
            away[near] = nearest >= distance
        return away

    def nearest(self, points: np.ndarray, reach: float, among: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``points``, the distance to its nearest candidate ``among`` (a mask) closer than ``reach``
        and that candidate's index (inf and n where there is none)."""
        near = self._near(points, reach)
        near = near[among[near]]
        if len(near) == 0:
            return np.full(len(points), np.inf), np.full(len(points), len(self.points))
        distance, index = cKDTree(self.points[near]).query(points, k=1, distance_upper_bound=reach)
        return distance, np.where(np.isfinite(distance), near[np.minimum(index, len(near) - 1)], len(self.points))


@dataclass(eq=False)
class PreparedFrame:
    """A frame's own share of the detector's work (:meth:`TrackDetector.prepare`), which needs no other frame
    and can run ahead of the frame's turn, on another thread.

    ``motion_in`` (the previous frame's motion toward this one) and ``cut_distances`` (its cut sample's
    distances to this one's) come from :meth:`TrackDetector.link` when frames are prepared ahead, else they are
    measured at the frame's turn; ``candidates`` (new points) are found ahead for frames whose index makes
    detection due (methods corners and blobs), at their turn otherwise, each time with a k-d tree over them (so
    that the serial step only searches around the few live and lost points). ``shot_start`` and ``flash`` are
    decided at the frame's turn (``flash`` at the next frame's).
    """

    index: int
    gray: np.ndarray
    small: np.ndarray  # gray reduced for motion measurement (:func:`.motion.reduced`)
    scale: float  # full pixels per reduced pixel
    follow: np.ndarray  # gray as live points are followed on it (:func:`follow_copy`)
    follow_scale: tuple  # full pixels per pixel of ``follow``, across and down
    cut_sample: tuple | None  # the cut detector's sample (None with cut detection off)
    subject: np.ndarray | None  # bool [H, W]: new points only here
    near_subject: np.ndarray | None  # bool [H, W]: tracks end once they leave this (the subject, grown)
    spots: Spots | None  # method bright
    candidates: np.ndarray | None = None
    candidate_tree: cKDTree | None = None  # over ``candidates``, built with them
    motion_in: MotionFrame | None = None
    cut_distances: tuple | None = None  # from the previous frame's cut sample (:meth:`.CutDetector.distances`)
    shot_start: bool = False
    flash: bool = False  # a flash frame (:mod:`.cuts`): skipped, no point seen on it


def follow_copy(gray: np.ndarray) -> tuple[np.ndarray, tuple]:
    """``gray`` halved (pixel areas averaged) until its longer side is at most ``FOLLOW_MAX_SIDE``, and the full
    pixels per pixel of the copy, across and down ((1, 1): ``gray`` itself)."""
    image = gray
    while max(image.shape) > FOLLOW_MAX_SIDE:
        image = cv2.resize(image, (max(1, image.shape[1] // 2), max(1, image.shape[0] // 2)),
                           interpolation=cv2.INTER_AREA)
    return image, (gray.shape[1] / image.shape[1], gray.shape[0] / image.shape[0])


def _on_copy(points: np.ndarray, scale: tuple) -> np.ndarray:
    """Frame positions (OpenCV pixel centres) as positions on a copy ``scale`` times smaller, float32."""
    return ((points + 0.5) / np.asarray(scale, np.float32) - 0.5).astype(np.float32)


def _on_frame(points: np.ndarray, scale: tuple) -> np.ndarray:
    """Positions on a copy ``scale`` times smaller as frame positions (the inverse of :func:`_on_copy`)."""
    return ((points + 0.5) * np.asarray(scale, np.float32) - 0.5).astype(np.float32)


def opencv_round_trip(previous: np.ndarray, current: np.ndarray, points: np.ndarray, guess: np.ndarray,
                      window: int = _LK_WINDOW):
    """Points (float32 [n, 2]) followed by OpenCV's pyramidal Lucas-Kanade from gray ``previous`` into
    ``current`` starting at ``guess`` (a patch ``window`` pixels square), then back starting at ``points``:
    (forward, status forward, back, status back), a status 1 where the point was followed."""
    params = dict(winSize=(window, window), flags=cv2.OPTFLOW_USE_INITIAL_FLOW, **_LK_PARAMS)
    start = np.ascontiguousarray(points.reshape(-1, 1, 2), np.float32)
    forward, status_forward, _ = cv2.calcOpticalFlowPyrLK(previous, current, start,
                                                          guess.reshape(-1, 1, 2).astype(np.float32), **params)
    back, status_back, _ = cv2.calcOpticalFlowPyrLK(current, previous, forward, start.copy(), **params)
    return forward.reshape(-1, 2), status_forward.ravel(), back.reshape(-1, 2), status_back.ravel()


def gpu_flow():
    """A :class:`.flow_gpu.GpuFlow` that follows as :func:`opencv_round_trip` does with the default window."""
    from .flow_gpu import GpuFlow

    _, iterations, epsilon = _LK_PARAMS["criteria"]
    return GpuFlow(_LK_WINDOW, _LK_PARAMS["maxLevel"], iterations, epsilon, _LK_PARAMS["minEigThreshold"])


def _pulled_away(settled: np.ndarray, own: np.ndarray, points: np.ndarray, motion: MotionFrame | None
                 ) -> np.ndarray:
    """bool [n]: points that were ``settled`` (still for ``SETTLED_FRAMES``) and now moved on their own by over
    twice ``STILL_SPEED`` (``own``, pixels per frame, camera motion taken out) onto moving pixels: something
    passing in front dragged them along (a person walking past a wall's corners). Such a point is hidden, not
    moved: it waits in the lost pool, where it was, to be found again once the view clears."""
    if motion is None:
        return np.zeros(len(points), bool)
    pulled = settled & (own > 2 * STILL_SPEED)
    pulled[pulled] = motion.level_at(points[pulled]) > MOVING_LEVEL
    return pulled


def _follow(previous: np.ndarray, current: np.ndarray, points: np.ndarray, guess: np.ndarray,
            window: int = _LK_WINDOW, scale: tuple = (1, 1), flow=None):
    """LK-tracked positions from gray ``previous`` into ``current`` (starting from ``guess``, a patch
    ``window`` pixels square) and a mask of points that passed every check. Points are in full pixels;
    ``scale`` is full pixels per pixel of the two images (pixel centres kept in place). ``flow`` (a
    :func:`gpu_flow`, for the default window) follows on the GPU; None: OpenCV."""
    if len(points) == 0:
        return points, np.zeros(0, bool)
    scaled = scale != (1, 1)
    if scaled:
        points, guess = _on_copy(points, scale), _on_copy(guess, scale)
    points = np.ascontiguousarray(points, np.float32)
    if flow is None:
        forward, status_f, back, status_b = opencv_round_trip(previous, current, points, guess, window)
    else:
        forward, status_f, back, status_b = flow.round_trip(previous, current, points, guess)
    height, width = current.shape
    ok = (status_f == 1) & (status_b == 1)
    ok &= np.hypot(*(back - points).T) < _FB_MAX_ERROR
    ok &= (forward[:, 0] >= -0.5) & (forward[:, 0] <= width - 0.5)
    ok &= (forward[:, 1] >= -0.5) & (forward[:, 1] <= height - 0.5)
    if scaled:
        forward = _on_frame(forward, scale)
    return forward, ok


def _check_params(max_points, min_distance, sensitivity, method, redetect_interval, max_tracks,
                  motion_preference) -> None:
    check_choice("method", method, METHODS)
    check_range("max_points", max_points, DETECT_RANGES["max_points"], integer=True)
    check_range("min_distance (pixels)", min_distance, DETECT_RANGES["min_distance"])
    check_range("sensitivity", sensitivity, DETECT_RANGES["sensitivity"])
    check_range("redetect_interval (frames)", redetect_interval, DETECT_RANGES["redetect_interval"], integer=True)
    check_range("max_tracks (0 = no limit)", max_tracks, DETECT_RANGES["max_tracks"], integer=True)
    if max_tracks:
        check_range("max_tracks (0 = no limit, else at least max_points)", max_tracks, Range(max_points),
                    integer=True)
    check_range("motion_preference", motion_preference, DETECT_RANGES["motion_preference"])


class TrackDetector:
    """Detection, following and finishing, one frame at a time (see the module docstring).

    Feed frames with :meth:`push` and call :meth:`finish` after the last one;
    both return the finished :class:`~.finish.TrackFrame` objects that are
    ready, in frame order, each ``lookahead`` frames after its frame went in.
    A video of any length streams through in constant memory (the frames in
    flight, and a few numbers per track column ever started).

    Args:
        max_points: most points live at once.
        min_distance: pixels between new points, and from new points to live ones.
        sensitivity: 0..1; higher finds weaker corners, smaller blobs, dimmer spots.
        method: "corners" (Shi-Tomasi), "blobs" (OpenCV blob detector, bright or
            dark), "bright" (bright spots at their centroids, re-centred every
            frame) or "motion" (corners on what moves, camera motion taken out).
        redetect_interval: look for new points at least every this many frames.
        max_tracks: most track columns in the clip, 0 = no limit. When it is
            reached no new track starts (a warning is logged and
            :attr:`limit_frame` says where).
        min_track_length: tracks seen in fewer frames are not shown.
        fade_frames: births and deaths fade over this many frames (0 = pop).
        motion_preference: 0..1; > 0 puts candidates on moving pixels first,
            and lets static tracks go (fading out) for moving candidates that
            find no room, as long as at least (1 - preference) x ``max_points``
            static tracks stay; 0 = no preference.
        cut_threshold: 0..1 colour-histogram distance that makes a scene cut
            (see :mod:`.cuts`); 0 = no cut detection.
        backend: where points are followed: "cpu" (OpenCV), "gpu" (CuPy, the
            same arithmetic: positions agree with the CPU's to about 0.001 px)
            or "auto" (the GPU when CuPy can use one). Method "bright" follows
            spots, not patches, and always runs on the CPU.

    Example::

        detector = TrackDetector(method="motion")
        for frame in frames:
            for finished in detector.push(frame):
                draw(finished.positions[finished.visible])
        for finished in detector.finish():
            draw(finished.positions[finished.visible])
    """

    def __init__(self, max_points: int = 100, min_distance: float = 20.0, sensitivity: float = 0.5,
                 method: str = "corners", redetect_interval: int = 5, max_tracks: int = 0,
                 min_track_length: int = DEFAULT_MIN_TRACK_LENGTH, fade_frames: int = DEFAULT_FADE_FRAMES,
                 motion_preference: float = 0.5, cut_threshold: float = DEFAULT_CUT_THRESHOLD,
                 backend: str = "auto"):
        _check_params(max_points, min_distance, sensitivity, method, redetect_interval, max_tracks,
                      motion_preference)
        self._flow = gpu_flow() if method != "bright" and select_backend(backend).selected == "gpu" else None
        self.max_points, self.min_distance, self.sensitivity = max_points, min_distance, sensitivity
        self.method, self.redetect_interval, self.max_tracks = method, redetect_interval, max_tracks
        self.motion_preference = motion_preference
        self._cuts = CutDetector(cut_threshold)
        self._finisher = TrackFinisher(min_track_length, fade_frames, BRIDGE_FRAMES)
        self._positions = np.zeros((0, 2), np.float32)  # our pixel convention, last known per column
        self._spot_mass = np.zeros(0)  # method bright: per column, its spot's mass when last seen alone (0 unknown)
        self._live_ids = np.zeros(0, np.int64)
        self._live_points = np.zeros((0, 2), np.float32)  # OpenCV convention (centres on integers)
        self._live_speed = np.zeros(0, np.float32)  # running own motion, pixels per frame
        self._live_settled = np.zeros(0, np.int64)  # frames in a row each has not moved on its own
        self._live_step = np.zeros((0, 2), np.float32)  # last frame-to-frame move
        self._lost = _Lost()
        self._pending: PreparedFrame | None = None
        self._previous: PreparedFrame | None = None  # the last processed frame
        self._camera: np.ndarray | None = None  # camera motion from the last processed frame to the next
        self._starved = False  # the last detection ran out of candidates
        self.frame_index = 0
        self.cuts: list[int] = []
        self.limit_frame: int | None = None

    @property
    def track_count(self) -> int:
        """Columns started so far."""
        return len(self._positions)

    @property
    def lookahead(self) -> int:
        """Frames between a frame going in and its tracks coming out."""
        return 1 + self._finisher.lookahead

    def push(self, frame, subject=None) -> list[TrackFrame]:
        """Add the next RGB frame [H, W, 3] (uint8, or float in 0..1) and, optionally, its subject
        mask (bool [H, W]); returns the frames whose tracks are now finished."""
        return self.push_prepared(self.prepare(frame, subject))

    def prepare(self, frame, subject=None, index: int | None = None) -> PreparedFrame:
        """The work on frame ``index`` (default: the next one) that needs no other frame: its gray and reduced
        copies, the cut detector's sample, bright spots, subject masks, and new-point candidates when its
        index makes detection due. Thread-safe, so frames can be prepared ahead (:func:`prepare_ahead`)."""
        index = self.frame_index if index is None else index
        array = _check_frames(frame)
        if len(array) != 1:
            raise ValueError(f"push takes one frame [H, W, 3], got shape {list(array.shape)}")
        rgb = _uint8(array[0])
        gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
        mask = near = None
        if subject is not None:
            if np.shape(subject) != gray.shape:
                raise ValueError(f"subject mask of frame {index} has shape {list(np.shape(subject))}, "
                                 f"expected {list(gray.shape)} (the frame's height and width)")
            mask = np.asarray(subject, bool)
            reach = max(3, round(0.01 * max(gray.shape)))
            near = cv2.dilate(mask.astype(np.uint8), np.ones((2 * reach + 1,) * 2, np.uint8)).astype(bool)
        small, scale = reduced(gray)
        spots = Spots.find(gray, self.sensitivity) if self.method == "bright" else None
        follow, follow_scale = follow_copy(gray) if self.method != "bright" else (gray, (1, 1))
        prepared = PreparedFrame(index, gray, small, scale, follow, follow_scale, self._cuts.sample(rgb), mask,
                                 near, spots)
        if index % self.redetect_interval == 0 and self.method in ("corners", "blobs"):
            prepared.candidates = self._find_candidates(prepared)
            prepared.candidate_tree = cKDTree(prepared.candidates)
        return prepared

    @staticmethod
    def link(earlier: PreparedFrame, later: PreparedFrame) -> None:
        """Measure consecutive frames' motion (``earlier`` toward ``later``) into ``later.motion_in``, and their
        cut samples' distances into ``later.cut_distances``, ahead of their turn; thread-safe. Frames of
        different sizes are left to :meth:`push_prepared`'s error."""
        if earlier.small.shape == later.small.shape:
            later.motion_in = motion_between(earlier.small, later.small, earlier.scale)
            if earlier.cut_sample is not None and later.cut_sample is not None:
                later.cut_distances = CutDetector.distances(earlier.cut_sample, later.cut_sample)

    @property
    def frame_size(self) -> tuple | None:
        """(width, height) of the frames pushed so far (None before the first)."""
        frame = self._pending or self._previous
        return None if frame is None else frame.gray.shape[::-1]

    def push_prepared(self, frame: PreparedFrame) -> list[TrackFrame]:
        """:meth:`push` of a frame from :meth:`prepare`; frames come in order."""
        if frame.index != self.frame_index:
            raise ValueError(f"frame {frame.index} was pushed as frame {self.frame_index}; push prepared frames "
                             "in the order they were prepared")
        earlier = self._pending or self._previous
        if earlier is not None and frame.gray.shape != earlier.gray.shape:
            height, width = earlier.gray.shape
            raise ValueError(f"frame {frame.index} is {frame.gray.shape[1]}x{frame.gray.shape[0]} but earlier "
                             f"frames are {width}x{height}; all frames must have one size")
        cut = self._cuts.is_cut_sampled(frame.cut_sample, frame.cut_distances)
        if cut:
            self.cuts.append(frame.index)
        if self._cuts.flash_before:  # the pending frame was a flash, not a cut
            self._pending.shot_start, self._pending.flash = False, True
            self.cuts.remove(self._pending.index)
        frame.shot_start = frame.index == 0 or cut
        self.frame_index += 1
        done = [] if self._pending is None else self._advance(frame)
        self._pending = frame
        return done

    def finish(self) -> list[TrackFrame]:
        """The tracks of the frames still held; call once, after the last frame."""
        done = [] if self._pending is None else self._advance(None)
        self._pending = None
        return done + self._finisher.finish()

    def _advance(self, following: PreparedFrame | None) -> list[TrackFrame]:
        """Track the pending frame, now that the frame after it (or the clip's end) is known."""
        frame = self._pending
        if frame.flash:  # nothing is seen on it; the next frame is followed from the frame before it
            self._camera = None
            return self._finisher.push(self._positions.copy(), np.zeros(self.track_count, bool), False)
        ahead = following is not None and not following.shot_start
        if ahead:
            motion = following.motion_in
            if motion is None:
                motion = motion_between(frame.small, following.small, frame.scale)
        elif not frame.shot_start:  # the shot ends: what moved coming in
            motion = motion_between(frame.small, self._previous.small, frame.scale)
        else:
            motion = None
        positions, visible = self._track(frame, following, motion)
        self._camera = motion.matrix if ahead else None
        self._previous = frame
        return self._finisher.push(positions, visible, frame.shot_start)

    def _track(self, frame: PreparedFrame, following: PreparedFrame | None, motion: MotionFrame | None):
        """Follow, detect; the frame's raw positions (our convention) and visibility per column."""
        spots = frame.spots
        if frame.shot_start:
            self._end_all()
        else:
            self._follow_live(frame, spots, motion)
        live = len(self._live_ids)
        due = (frame.shot_start or frame.index % self.redetect_interval == 0 or spots is not None  # found anyway
               or (live < REFILL_SHARE * self.max_points and not self._starved))
        if due and (live < self.max_points or self.motion_preference > 0):
            self._detect(frame, following, motion, spots)
        self._positions[self._live_ids] = self._live_points + 0.5  # OpenCV's pixel centres are integers
        visible = np.zeros(self.track_count, bool)
        visible[self._live_ids] = True
        return self._positions.copy(), visible

    def _end_all(self) -> None:
        """A new shot: every track ends, none waits to be found again."""
        self._live_ids, self._live_points = np.zeros(0, np.int64), np.zeros((0, 2), np.float32)
        self._live_speed, self._live_step = np.zeros(0, np.float32), np.zeros((0, 2), np.float32)
        self._live_settled = np.zeros(0, np.int64)
        self._lost = _Lost()

    def _carry(self, points: np.ndarray) -> np.ndarray:
        """Points moved by the camera motion into the frame being tracked."""
        if self._camera is None or len(points) == 0:
            return points.copy()
        return (points @ self._camera[:, :2].T + self._camera[:, 2]).astype(np.float32)

    def _follow_live(self, frame: PreparedFrame, spots: Spots | None, motion: MotionFrame | None) -> None:
        """Move live points into ``frame``; the ones that fail wait in the lost pool, and so do settled ones
        pulled onto moving pixels (:func:`_pulled_away`)."""
        gap = frame.index - self._previous.index  # 2 after a flash frame
        settled = self._live_settled >= SETTLED_FRAMES
        guess = self._carry(self._live_points)
        self._lost.advance(frame.index)
        merged = np.zeros(len(self._live_ids), bool)
        ahead = self._live_points + gap * self._live_step
        back = None  # lost tracks whose spots were found: ids, points, steps
        if spots is not None:
            reach = max(_SPOT_REACH, 0.5 * self.min_distance)
            unknown = ~self._live_step.any(axis=1)  # just born: its motion is not known yet
            lost_reach = np.where(self._lost.steps.any(axis=1), reach, 2 * reach)
            lost_reach *= np.minimum(1 + _LOST_REACH_GROWTH * (frame.index - self._lost.since), _LOST_REACH_MOST)
            followed = spots.follow(ahead, self._live_points, np.where(unknown, 2 * reach, reach),
                                    self._spot_mass[self._live_ids], self._lost.points, lost_reach)
            seen_alone = followed.mass > 0
            self._spot_mass[np.concatenate([self._live_ids, self._lost.ids])[seen_alone]] = followed.mass[seen_alone]
            merged = followed.merged
            points, ok = followed.positions[:len(ahead)], followed.matched[:len(ahead)]
            found, found_points = followed.matched[len(ahead):], followed.positions[len(ahead):]
            found &= _in_region(found_points, frame.near_subject)
            back = (self._lost.ids[found], found_points[found], self._lost.steps[found])
            self._lost.select(~found)
        else:
            points, ok = self._follow_patches(frame, guess)
        if frame.near_subject is not None:
            ok &= _in_region(points, frame.near_subject)
        own = np.hypot(*(points - guess).T) / gap
        if spots is None:  # a bright spot is matched by its predicted motion instead
            ok &= ~_pulled_away(ok & settled, own, points, motion)
        self._live_speed = ((1 - _STILL_MEMORY) * self._live_speed + _STILL_MEMORY * own).astype(np.float32)
        still = ok & (self._live_speed < STILL_SPEED) if self.method == "motion" else np.zeros(len(ok), bool)
        height, width = frame.gray.shape
        lost = ~ok & (ahead[:, 0] >= -0.5) & (ahead[:, 0] <= width - 0.5)  # gone out of frame: not waited for
        lost &= (ahead[:, 1] >= -0.5) & (ahead[:, 1] <= height - 0.5)
        self._lost.add(self._live_ids[lost], ahead[lost], self._live_step[lost], frame.index, settled[lost])
        kept = ok & ~still
        step = np.where(merged[:, None], self._live_step, (points - self._live_points) / gap)  # merged: as before
        self._live_step = step[kept].astype(np.float32)
        self._live_ids, self._live_points = self._live_ids[kept], points[kept].astype(np.float32)
        self._live_speed = self._live_speed[kept]
        self._live_settled = np.select([own < STILL_SPEED, own <= 2 * STILL_SPEED],  # a creep keeps the count
                                       [self._live_settled + 1, self._live_settled], 0)[kept]
        if back is not None:  # lost spots found again: live once more, moving on as they did
            self._add_live(*back)

    def _follow_patches(self, frame: PreparedFrame, guess: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:func:`_follow` of the live points into ``frame``, on the GPU where :attr:`follows_on` says so."""
        if self._flow is not None:
            try:
                return _follow(self._previous.follow, frame.follow, self._live_points, guess,
                               scale=frame.follow_scale, flow=self._flow)
            except Exception as error:  # noqa: BLE001 - a CUDA failure mid-clip: the CPU follows from here
                LOGGER.warning("following points on the GPU failed (%s: %s); the CPU follows them from frame %d on",
                               type(error).__name__, error, frame.index)
                self._flow = None
        return _follow(self._previous.follow, frame.follow, self._live_points, guess, scale=frame.follow_scale)

    @property
    def follows_on(self) -> str:
        """Where live points are followed: "gpu" or "cpu"."""
        return "cpu" if self._flow is None else "gpu"

    def _moving(self, points: np.ndarray, frame: PreparedFrame, following: PreparedFrame | None,
                motion: MotionFrame | None) -> np.ndarray:
        """bool [n]: candidates on moving pixels (camera motion taken out); for method ``motion`` they
        must also move themselves, by at least twice ``STILL_SPEED`` on the way to the next frame
        (where it is known), seen through a small patch so that a static point beside a moving
        edge does not pass."""
        if motion is None or len(points) == 0:
            return np.zeros(len(points), bool)
        moving = motion.level_at(points) > MOVING_LEVEL
        if self.method != "motion" or following is None or following.shot_start or not moving.any():
            return moving
        start = points[moving]
        carried = (start @ motion.matrix[:, :2].T + motion.matrix[:, 2]).astype(np.float32)
        ahead, ok = _follow(frame.gray, following.gray, start, carried, _LK_TEST_WINDOW)
        moving[moving] = ok & (np.hypot(*(ahead - carried).T) >= 2 * STILL_SPEED)
        return moving

    def _candidates(self, frame: PreparedFrame, following: PreparedFrame | None, motion: MotionFrame | None,
                    spots: Spots | None) -> _Candidates:
        """New-point candidates of the method inside the subject (OpenCV convention), which of them move, and
        the order to take them in."""
        region = None if frame.subject is None else frame.subject.astype(np.uint8)
        if self.method == "motion":
            if motion is None:
                return _Candidates.of(np.zeros((0, 2), np.float32), np.zeros(0, bool))
            moving = motion.moving_mask(frame.gray.shape).astype(np.uint8)
            region = moving if region is None else region & moving
        tree = None
        if self.method == "bright":
            points = spots.candidates()
            points = points[_in_region(points, region)]
        elif self.method == "motion":
            points = _corner_candidates(frame.gray, self.sensitivity, self.min_distance, region)
        elif frame.candidates is not None:
            points, tree = frame.candidates, frame.candidate_tree
        else:
            points = self._find_candidates(frame)
        points = np.asarray(points, np.float32)
        if self.method != "motion" and self.motion_preference == 0:
            return _Candidates.of(points, np.zeros(len(points), bool), tree=tree)
        moving = self._moving(points, frame, following, motion)
        if self.method == "motion":
            return _Candidates.of(points[moving], moving[moving])
        order = np.argsort(-(_rank(len(points)) + 2.0 * moving), kind="stable")
        return _Candidates.of(points, moving, order, tree)

    def _find_candidates(self, frame: PreparedFrame) -> np.ndarray:
        """Method corners' or blobs' candidates in ``frame`` (inside its subject), best first. Corners are found
        on the copy that points are followed on (:func:`follow_copy`), blobs on the frame itself."""
        region = None if frame.subject is None else frame.subject.astype(np.uint8)
        if self.method == "blobs":
            return _blob_candidates(frame.gray, self.sensitivity, self.min_distance, region)
        image, scale = frame.follow, frame.follow_scale
        if scale == (1, 1):
            return _corner_candidates(image, self.sensitivity, self.min_distance, region)
        reduced_region = None if region is None else \
            cv2.resize(region, image.shape[::-1], interpolation=cv2.INTER_AREA)  # any subject pixel counts
        corners = _corner_candidates(image, self.sensitivity, self.min_distance / max(scale), reduced_region)
        corners = _on_frame(corners, scale)
        return corners[_in_region(corners, region)]

    def _make_room(self, moving: np.ndarray, room: int) -> int:
        """Let static tracks go for moving candidates that find no room (``moving``: bool, one per free
        candidate), as ``motion_preference`` allows (static tracks keep at least (1 - preference) x
        ``max_points``); returns the new room."""
        waiting = int(np.count_nonzero(moving)) - room
        still = np.flatnonzero(self._live_speed < STILL_SPEED)
        spare = len(still) - int(np.ceil((1.0 - self.motion_preference) * self.max_points))
        release = min(waiting, spare)
        if release <= 0:
            return room
        gone = still[np.argsort(self._live_speed[still], kind="stable")[:release]]
        keep = np.ones(len(self._live_ids), bool)
        keep[gone] = False
        self._live_ids, self._live_points = self._live_ids[keep], self._live_points[keep]
        self._live_speed, self._live_step = self._live_speed[keep], self._live_step[keep]
        self._live_settled = self._live_settled[keep]
        return room + release

    def _detect(self, frame: PreparedFrame, following: PreparedFrame | None, motion: MotionFrame | None,
                spots: Spots | None) -> None:
        """Add points where none are: lost tracks found again first, then new tracks (moving ones
        before static ones when ``motion_preference`` > 0)."""
        room = self.max_points - len(self._live_ids)
        found = self._candidates(frame, following, motion, spots)
        free = found.away_from(self._live_points, self.min_distance)
        if self.method != "motion" and self.motion_preference > 0:
            before = room
            room = self._make_room(found.moving[free], room)
            if room != before:  # static tracks let go: candidates near them are free now
                free = found.away_from(self._live_points, self.min_distance)
        if room <= 0:
            return
        candidates = found.points
        chosen = np.zeros(len(candidates), bool)
        owner = np.full(len(candidates), -1, np.int64)
        taken = 0
        lost = self._lost
        if len(lost.ids) and free.any():
            distance, index = found.nearest(lost.points, max(2.0, 0.5 * self.min_distance), free)
            if motion is not None and spots is None:  # a settled point is found on itself, not on what passes
                near = np.isfinite(distance)
                moving = np.zeros(len(distance), bool)
                moving[near] = motion.level_at(candidates[index[near]]) > MOVING_LEVEL
                distance[lost.settled & moving] = np.inf
            for entry in np.argsort(distance, kind="stable"):
                if taken == room or not np.isfinite(distance[entry]):
                    break
                if chosen[index[entry]] or self._crowded(candidates, chosen, index[entry]):
                    continue
                chosen[index[entry]] = True
                owner[index[entry]] = lost.ids[entry]
                taken += 1
        waiting = (frame.index - lost.since < BRIDGE_FRAMES) & ~np.isin(lost.ids, owner)  # just lost: slot kept
        room -= np.count_nonzero(waiting)
        for candidate in found.order[free[found.order]]:
            if taken >= room:
                break
            if chosen[candidate] or self._crowded(candidates, chosen, candidate):
                continue
            chosen[candidate] = True
            taken += 1
        self._starved = taken < room
        picked = found.order[chosen[found.order]]  # best first
        found_again = owner[picked] >= 0
        back = owner[picked][found_again]
        if len(back):
            self._lost.select(~np.isin(self._lost.ids, back))
        fresh = candidates[picked][~found_again]
        if self.max_tracks and self.track_count + len(fresh) > self.max_tracks:
            allowed = self.max_tracks - self.track_count
            if self.limit_frame is None:
                self.limit_frame = frame.index
                LOGGER.warning("max_tracks=%d reached at frame %d: no new tracks start after it (raise "
                               "max_tracks, or set it to 0 for no limit)", self.max_tracks, frame.index)
            fresh = fresh[:allowed]
        half_window = min(_SUBPIX_HALF_WINDOW, (min(frame.gray.shape) - 5) // 2)  # OpenCV's limit on small frames
        if len(fresh) and self.method in ("corners", "motion") and half_window >= 1:
            criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 20, 0.03)
            fresh = cv2.cornerSubPix(frame.gray, fresh.reshape(-1, 1, 2).copy(), (half_window, half_window),
                                     (-1, -1), criteria).reshape(-1, 2)
        start = self.track_count
        self._positions = np.concatenate([self._positions, np.zeros((len(fresh), 2), np.float32)])
        self._spot_mass = np.concatenate([self._spot_mass, np.zeros(len(fresh))])
        self._add_live(np.concatenate([back, np.arange(start, start + len(fresh))]),
                       np.concatenate([candidates[picked][found_again], fresh]),
                       np.zeros((len(back) + len(fresh), 2)))

    def _add_live(self, ids: np.ndarray, points: np.ndarray, steps: np.ndarray) -> None:
        """Tracks ``ids`` live at ``points`` (OpenCV convention), last moved by ``steps``; they count as moving
        for their first frames."""
        self._live_ids = np.concatenate([self._live_ids, ids])
        self._live_points = np.concatenate([self._live_points, points]).astype(np.float32)
        self._live_speed = np.concatenate([self._live_speed, np.full(len(ids), 4 * STILL_SPEED, np.float32)])
        self._live_settled = np.concatenate([self._live_settled, np.zeros(len(ids), np.int64)])
        self._live_step = np.concatenate([self._live_step, steps]).astype(np.float32)

    def _crowded(self, candidates: np.ndarray, chosen: np.ndarray, index: int) -> bool:
        """Whether candidate ``index`` is closer than ``min_distance`` to an already chosen one."""
        if not chosen.any() or self.min_distance <= 0:
            return False
        return bool(np.min(np.hypot(*(candidates[chosen] - candidates[index]).T)) < self.min_distance)


def track_clip(frames, detector: TrackDetector, point_size: float = 16.0, subject=None) -> Tracks:
    """Run ``detector`` over ``frames`` (a batch, or any iterable of frames) and return :class:`Tracks`.

    ``subject``: optional MASK batch (see :func:`subject_masks`) limiting where
    points go. ``point_size`` is written to ``track_size`` (box width and
    height, pixels). Only columns shown at least once are kept (renumbered in
    order); hidden slots hold the track's nearest shown position.
    """
    check_range("point_size (pixels)", point_size, DETECT_RANGES["point_size"])
    if isinstance(frames, np.ndarray) or hasattr(frames, "shape"):
        frames = _check_frames(frames)
    masks = None
    if subject is not None:
        if not hasattr(frames, "shape"):
            raise TypeError("a subject mask needs the frames as one batch [B, H, W, 3]")
        masks = subject_masks(subject, *frames.shape[:3])
    finished: list[TrackFrame] = []
    with_masks = ((frame, None if masks is None else masks[index if len(masks) > 1 else 0])
                  for index, frame in enumerate(frames))
    for prepared in prepare_ahead(detector, with_masks):
        finished += _compact(detector.push_prepared(prepared))
    finished += _compact(detector.finish())
    if detector.method == "motion" and len(finished) == 1:
        raise ValueError("method 'motion' finds points that move between frames, and one frame has no motion; "
                         "give several frames, or pick corners, blobs or bright for a single image")
    count = detector.track_count
    path = np.zeros((len(finished), count, 2), np.float32)
    visible = np.zeros((len(finished), count), bool)
    opacity = np.zeros((len(finished), count), np.float32)
    for t, (columns, points, alpha) in enumerate(finished):
        path[t, columns], visible[t, columns], opacity[t, columns] = points, True, alpha
    used = np.flatnonzero(visible.any(axis=0))
    visible, opacity = visible[:, used], opacity[:, used]
    path = fill_hidden(path[:, used], visible)
    LOGGER.info("tracked %d frame(s): %d track(s) shown of %d followed, %d scene cut(s)%s", len(finished),
                len(used), count, len(detector.cuts),
                f" at frame(s) {', '.join(map(str, detector.cuts))}" if detector.cuts else "")
    return Tracks(path, visible, np.full(path.shape, point_size, np.float32), opacity=opacity,
                  frame_size=detector.frame_size, cuts=detector.cuts, name="detected tracks")


def prepare_ahead(detector: TrackDetector, frames: Iterable[tuple], threads: int = PREPARE_THREADS
                  ) -> Iterator[PreparedFrame]:
    """``detector.prepare`` of each (frame, subject mask or None) of ``frames``, consecutive frames linked
    (:meth:`TrackDetector.link`), on ``threads`` threads ahead of the caller; yields them in order for
    :meth:`TrackDetector.push_prepared`. At most 2 x ``threads`` frames are in flight. An error preparing a
    frame is raised at its turn; the threads are stopped when the caller stops early. Meanwhile OpenCV's own
    pool is held to :data:`PREPARE_OPENCV_THREADS` (:func:`opencv_pool_held`).

    Example::

        for prepared in prepare_ahead(detector, ((frame, None) for frame in frames)):
            finished += detector.push_prepared(prepared)
    """
    def work(frame, subject, index: int, before: Future | None, own: Future) -> PreparedFrame:
        try:
            prepared = detector.prepare(frame, subject, index)
        except BaseException as error:
            own.set_exception(error)
            raise
        own.set_result(prepared)  # the next frame links to it now, not once this frame is linked too
        if before is not None and before.exception() is None:  # a failed frame raises at its own turn
            TrackDetector.link(before.result(), prepared)
        return prepared

    def jobs():
        before = None  # the frame before's own preparation (started before this one: jobs start in order)
        for index, (frame, subject) in enumerate(frames, detector.frame_index):
            own = Future()
            yield lambda frame=frame, subject=subject, index=index, before=before, own=own: work(
                frame, subject, index, before, own)
            before = own

    with opencv_pool_held(PREPARE_OPENCV_THREADS):
        yield from ordered_ahead(jobs(), threads, "detect")


@contextmanager
def opencv_pool_held(threads: int):
    """OpenCV's own thread pool held to at most ``threads`` while the block runs (the setting is the process's;
    OpenCV's count from before the first of overlapping holds is restored when the last one ends)."""
    with _pool_lock:
        if _pool_holds["count"] == 0:
            _pool_holds["before"] = cv2.getNumThreads()
            cv2.setNumThreads(min(threads, _pool_holds["before"]))
        _pool_holds["count"] += 1
    try:
        yield
    finally:
        with _pool_lock:
            _pool_holds["count"] -= 1
            if _pool_holds["count"] == 0:
                cv2.setNumThreads(_pool_holds["before"])


def _compact(frames: list[TrackFrame]) -> list[tuple]:
    """(shown columns, their positions, their opacity) per finished frame."""
    return [(np.flatnonzero(f.visible), f.positions[f.visible], f.opacity[f.visible]) for f in frames]


def detect_tracks(frames, point_size: float = 16.0, subject=None, **params) -> Tracks:
    """Detect points in ``frames`` and follow them; returns :class:`Tracks` with ``track_opacity``.

    Args:
        frames: RGB [B, H, W, 3] (or one [H, W, 3]) as uint8 or float in 0..1
            (NumPy, or torch on the CPU).
        point_size: box width and height written to ``track_size``, in pixels.
        subject: optional MASK [B, H, W] or [H, W]: points only there.
        **params: :class:`TrackDetector`'s parameters (its defaults otherwise).

    Deterministic. Frame by frame, this is :class:`TrackDetector`.
    """
    return track_clip(frames, TrackDetector(**params), point_size, subject)
