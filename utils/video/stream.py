"""Streaming overlay pipeline: memory independent of clip length, decode / draw / encode overlapped.

::

    frames ─▶ points (detector / track file / demo) ─▶ graph (hysteresis on
    the previous frame's edges) ─▶ display list ─▶ renderer ─▶ writer (+ PNGs, + audio)

Each stage keeps only what the next frame needs (the detector's live points,
the previous frame's edges). Decoding and encoding run on their own threads
(:mod:`.pipeline`) with bounded queues, drawing in the caller's thread into a
small ring of reused frame buffers, so an hour of video streams through like
a second of it. An 8-bit 4:2:0 video going to a yuv420p format never becomes
RGB: the overlay is rasterised in the caller's thread and composited over the
decoder's YUV planes by the encoding thread (:mod:`.yuv`); RGB images are
then made only for a detector.

Frame ranges (``start_frame``/``end_frame``) render part of a shot so parts
made on several machines join without a seam, equal to the whole render bit
for bit: with points that do not depend on the pixels (track files, the
demo) the graph's hysteresis is replayed from frame 0 and the trails' history
over the frames they need (no decoding); with
detection the detector and the graph run on every frame before the range
(decoded, not drawn). A bounded detection warm-up is faster and close, not
equal (see :class:`DetectedPoints`).

Example::

    source = FrameSource.from_video("clip.mp4")
    points = DetectedPoints(TrackDetector(method="motion"))
    render_video(source, points, OverlaySpec(), CpuRenderer(), "clip_overlay.mp4")
"""

from __future__ import annotations

import itertools
import os
import queue
from abc import ABC
from collections import deque
from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Iterable, Iterator

import numpy as np

from ..core.arrays import array_module, to_numpy
from ..core.checks import check_frame_size
from ..core.log import LOGGER
from ..draw.display_list import DisplayList
from ..draw.labels import label_overlay
from ..draw.motion import MOTION_MODES, MotionTracker, motion_colors
from ..draw.overlays import (
    box_overlay,
    link_polylines_frames,
    trail_geometry,
    trail_polylines,
)
from ..draw.styles import BoxStyle, LabelStyle, LineStyle, TrailStyle
from ..graph.neighbours import (
    GraphParams,
    build_edges,
    edge_lengths,
    knn_cpu,
    knn_searched_ahead,
)
from ..raster.glow import Glow
from ..tracks.contract import Tracks
from ..tracks.demo import CANVAS_RGB, DemoClip
from ..tracks.detect import PREPARE_THREADS, TrackDetector, prepare_ahead
from . import paths
from .audio import AudioCopy
from .budget import Budget
from .formats import choose_format
from .io import (
    DecodedFrame,
    PngSequenceWriter,
    VideoFrames,
    VideoWriter,
    iter_video_frames,
    open_video,
    probe_video,
)
from .nvcodec import FrameHandOver, open_frames, open_video_writer, place_frame
from .pipeline import Pipeline, prefetched
from .processes import draw_processes
from .yuv import PlaneBuffers, composite_planes, draw_planes_together

QUEUE_DEPTH = 2
MISSING_AT_END = 2
"""Frames a video read to its end may stop short of its declared end by without being reported as truncated:
an edit list that cuts the last frame, a dropped frame or a rounded duration leave about one out."""
GPU_FRAMES_PER_SCENE = 8
"""Frames of up to 1080p whose overlays the GPU builds and uploads as one scene when it draws a video in YUV.
Per frame, the scene build and upload were most of the Python work that the video's threads take turns at:
on an H100 with a 100-point track file, 1080p went from 197 to 226 fps in one run. Larger frames go one at
a time: their drawing and encoding outweigh that work, and a group holds the encoder back until it is drawn
(4K with glow lost about 7% in groups of 2)."""


def frames_per_draw(renderer, width: int, height: int) -> int:
    """Frames of ``width`` x ``height`` that travel the pipeline's stages together: the GPU's
    :data:`GPU_FRAMES_PER_SCENE` up to 1080p, else one."""
    return GPU_FRAMES_PER_SCENE if renderer.name == "gpu" and width * height <= 1920 * 1080 else 1


def frames_in_flight(renderer, width: int = 0, height: int = 0) -> int:
    """The most decoded frames a render of ``width`` x ``height`` frames (unknown: 0, counting the most)
    with ``renderer`` holds at once (three queues and three stages of :func:`frames_per_draw` frames each,
    and the drawing stage's 2 x the frames the renderer draws at once); the memory budget counts on it."""
    return (3 * QUEUE_DEPTH + 3) * frames_per_draw(renderer, width, height) + 2 * renderer.frames_at_once


_YUV_COMPOSITE = True  # False draws every video in RGB (the reference the YUV path is tested against)


@dataclass(frozen=True)
class FramePoints:
    """One frame's tracked points; index ``n`` is track column ``n``.

    Attributes:
        positions: float32 [N, 2] pixel x, y (hidden points may hold anything, NaN included).
        visible: bool [N].
        sizes: float32 [N, 2] box width, height per point, or None.
        opacity: float32 [N] 0..1 per point (births and deaths fade), or None (all 1).
        texts: one string per point, its track's own text (for labels), or None.
        shot_start: whether a new shot starts at this frame (a scene cut: trails of earlier frames end).
    """

    positions: np.ndarray
    visible: np.ndarray
    sizes: np.ndarray | None = None
    opacity: np.ndarray | None = None
    texts: tuple | None = None
    shot_start: bool = False

    def __post_init__(self):
        count = len(self.visible)
        if np.shape(self.positions) != (count, 2):
            raise ValueError(f"points: positions must have shape [{count}, 2] (one per visibility flag), "
                             f"got {list(np.shape(self.positions))}")
        if self.sizes is not None and np.shape(self.sizes) != (count, 2):
            raise ValueError(f"points: sizes must have shape [{count}, 2], got {list(np.shape(self.sizes))}")
        if self.opacity is not None and np.shape(self.opacity) != (count,):
            raise ValueError(f"points: opacity must have shape [{count}], got {list(np.shape(self.opacity))}")
        if self.texts is not None and len(self.texts) != count:
            raise ValueError(f"points: texts must hold {count} strings (one per point), got {len(self.texts)}")


class PointSource(ABC):
    """Where each frame's points come from: ``source(index, frame) -> FramePoints``, or, for sources
    that look ahead, :meth:`pairs`.

    ``needs_frames`` is False when the points do not depend on the pixels
    (``frame`` may then be None, e.g. to replay the graph before a frame range).
    """

    needs_frames = False
    warmup: int | None = None

    def __call__(self, index: int, frame: np.ndarray | None) -> FramePoints:
        """The points of frame ``index`` (called once per frame, in order)."""
        raise NotImplementedError

    def pairs(self, frames: Iterable[np.ndarray]) -> Iterator[tuple[np.ndarray, FramePoints]]:
        """Each frame with its points, in order (frames are pulled only as far as needed)."""
        for index, frame in enumerate(frames):
            yield frame, self(index, frame)

    def finish(self, frames: int, limited: bool) -> None:
        """Called after the last frame; ``frames`` = index of the last frame + 1 (``limited``: a limit stopped it)."""

    def check_frame_size(self, width: int, height: int) -> None:
        """Refuse, before the render, frames of another size than the points belong to."""

    def most_points(self) -> int | None:
        """The most points any frame can have, when known before the render."""
        return None

    def frames_held(self) -> int:
        """Frames the source holds at once beyond the pipeline's own (for the memory budget)."""
        return 0

    def busiest(self, start: int, stop: int | None, count: int) -> list:
        """Up to ``count`` frame indices in ``start .. stop - 1`` with the most points (known before the render)."""
        return []


class DetectedPoints(PointSource):
    """Points found and followed in the frames themselves by a :class:`TrackDetector`.

    The detector looks ``detector.lookahead`` frames ahead (to fade and to drop
    short tracks), so that many frames are held here until their points are known.

    For a frame range the detector first sees the frames before it: all of
    them (``warmup`` None: the part then equals the whole-shot render bit for
    bit), or the last ``warmup`` ones (faster; the detector starts fresh there,
    so its points differ from the whole-shot detector's: on the tests' clip of
    drifting dots with 15 frames of warm-up, at least 3 of 4 points lie within
    1 px of the whole render's and the point count is within 2; track ids, and
    so ``color_mode='track'`` colours, differ).
    """

    needs_frames = True

    def __init__(self, detector: TrackDetector, warmup: int | None = None):
        if warmup is not None and (isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0):
            raise ValueError(f"warmup must be None (every earlier frame) or a whole number of frames >= 0, "
                             f"got {warmup!r}")
        self.detector = detector
        self.warmup = warmup
        self.frames_with_points = 0

    def _points(self, done) -> FramePoints:
        self.frames_with_points += bool(np.any(done.visible))
        return FramePoints(done.positions, done.visible, opacity=done.opacity, shot_start=done.shot_start)

    def pairs(self, frames):
        held = deque()

        def unmasked():
            for frame in frames:
                held.append(frame)
                yield frame, None

        # frames prepared on threads of their own, stopped here on an error (not when the generator is collected)
        with closing(prepare_ahead(self.detector, unmasked())) as prepared_frames:
            for prepared in prepared_frames:
                for done in self.detector.push_prepared(prepared):
                    yield held.popleft(), self._points(done)
        for done in self.detector.finish():
            yield held.popleft(), self._points(done)

    def finish(self, frames, limited):
        LOGGER.info("detection started %d track(s) over the frames it saw", self.detector.track_count)
        if self.frames_with_points == 0:
            LOGGER.warning("detection (method %s) found no point to draw in any frame: the video comes out with no "
                           "overlay; raise the sensitivity, or try another method (motion takes only what moves "
                           "against the camera)", self.detector.method)

    def most_points(self):
        return self.detector.max_tracks or None

    def frames_held(self):  # waiting for their points, being prepared, decoded ahead
        return self.detector.lookahead + 2 * PREPARE_THREADS + QUEUE_DEPTH


class TrackPoints(PointSource):
    """Points read from :class:`Tracks`: one track frame per video frame, or one for all."""

    def __init__(self, tracks: Tracks, name: str = "the tracks"):
        if tracks.frame_count == 0:
            raise ValueError(f"{name} have no frames; give tracks with at least one frame")
        self.tracks = tracks
        self.name = name

    def _mismatch(self, frames: str) -> ValueError:
        count = self.tracks.frame_count
        return ValueError(f"{self.name} have {count} frames but the video has {frames}; give one track "
                          f"frame per video frame (or one for all), or limit the video to {count} frames")

    def __call__(self, index, frame):
        tracks = self.tracks
        if index >= tracks.frame_count > 1:
            raise self._mismatch("more")
        t = index if tracks.frame_count > 1 else 0
        sizes = None if tracks.size is None else tracks.size[t]
        opacity = None if tracks.opacity is None else tracks.opacity[t]
        return FramePoints(tracks.path[t], tracks.visibility[t], sizes, opacity, tracks.text, t in tracks.cuts)

    def finish(self, frames, limited):
        if frames < self.tracks.frame_count and self.tracks.frame_count > 1 and not limited:
            raise self._mismatch(f"only {frames}")

    def check_frame_size(self, width, height):
        check_frame_size(self.tracks.frame_size, width, height, self.name, "the video")

    def most_points(self):
        return int(self.tracks.visibility.sum(axis=1).max(initial=0))

    def busiest(self, start, stop, count):
        if self.tracks.frame_count == 1:
            return [start]
        visible = self.tracks.visibility[start:stop].sum(axis=1)
        return sorted(start + int(t) for t in np.argsort(-visible, kind="stable")[:count])


class DemoPoints(PointSource):
    """The demo clip's true dot positions (every dot visible)."""

    def __init__(self, clip: DemoClip):
        self.clip = clip

    def __call__(self, index, frame):
        return FramePoints(self.clip.positions(index), np.ones(self.clip.dots, bool))

    def most_points(self):
        return self.clip.dots

    def busiest(self, start, stop, count):
        return [start]


@dataclass(frozen=True)
class OverlaySpec:
    """What to draw: the neighbour graph's links (``lines``), boxes, motion trails and text labels (None
    skips a part), and their ``glow``."""

    graph: GraphParams = field(default_factory=GraphParams)
    lines: LineStyle | None = field(default_factory=LineStyle)
    boxes: BoxStyle | None = field(default_factory=BoxStyle)
    trails: TrailStyle | None = None
    labels: LabelStyle | None = None
    glow: Glow = field(default_factory=Glow)

    @property
    def draws(self) -> bool:
        """Whether any part is drawn (else the frames pass through as decoded)."""
        return any(part is not None for part in (self.lines, self.boxes, self.trails, self.labels))


class TrailHistory:
    """The last ``frames`` frames' points of every track column, in a ring of constant size.

    Columns seen for the first time are hidden in the frames before, as are
    frames before the first one pushed and, from a frame that starts a shot,
    every frame before it; so :meth:`window` holds what the batch trail builder
    sees of those frames.
    """

    def __init__(self, frames: int):
        self.frames = frames
        self.path = np.full((frames, 0, 2), np.nan, np.float32)
        self.visible = np.zeros((frames, 0), bool)
        self.opacity = np.ones((frames, 0), np.float32)
        self.pushed = 0

    def push(self, points: FramePoints) -> None:
        """Add the newest frame's points (the oldest frame drops out)."""
        count = len(points.visible)
        extra = count - self.visible.shape[1]
        if extra > 0:
            self.path = np.concatenate([self.path, np.full((self.frames, extra, 2), np.nan, np.float32)], axis=1)
            self.visible = np.concatenate([self.visible, np.zeros((self.frames, extra), bool)], axis=1)
            self.opacity = np.concatenate([self.opacity, np.ones((self.frames, extra), np.float32)], axis=1)
        if points.shot_start:
            self.visible[:] = False
        slot = self.pushed % self.frames
        self.path[slot] = np.nan
        self.path[slot, :count] = points.positions
        self.visible[slot] = False
        self.visible[slot, :count] = points.visible
        self.opacity[slot] = 1.0
        if points.opacity is not None:
            self.opacity[slot, :count] = points.opacity
        self.pushed += 1

    def window(self) -> tuple:
        """(path [frames, N, 2], visibility [frames, N], opacity [frames, N]), oldest frame first."""
        order = (np.arange(self.frames) + self.pushed) % self.frames
        return self.path[order], self.visible[order], self.opacity[order]


class OverlayBuilder:
    """Turns each frame's points into a display list (trails under links under boxes, labels on top).

    The graph is built per frame with the previous frame's edges (pairs of
    track columns) as ``previous``, so hysteresis works across the stream;
    trails come from a :class:`TrailHistory` of the frames they need, and
    equal the batch builder's (``trail_overlay``); colours by motion or age
    keep the previous positions and each column's first frame
    (:class:`~..draw.motion.MotionTracker`). Call it once per frame, in
    order (or :meth:`advance` for frames that are not drawn). With a
    :class:`Budget`, a frame whose graph or drawing would need more memory
    than is available raises ``MemoryBudgetError`` first.
    With ``frame_size`` (width, height) labels stay inside the frame.
    """

    def __init__(self, spec: OverlaySpec, budget: Budget | None = None, frame_size: tuple | None = None):
        self.spec = spec
        self.budget = budget
        self.frame_size = frame_size
        self.edges = None
        trails = spec.trails
        self.history = None if trails is None else TrailHistory(trails.length + trails.smoothing_frames)
        styles = [style for style in (spec.lines, spec.boxes) if style is not None]
        self.motion = MotionTracker() if any(style.color_mode in MOTION_MODES for style in styles) else None

    @property
    def needs_history(self) -> bool:
        """Whether a frame's picture depends on every frame before it (hysteresis, colours by motion or age)."""
        return (self.spec.lines is not None and self.spec.graph.hysteresis > 0) or self.motion is not None

    @staticmethod
    def _usable(points: FramePoints):
        """(float32 positions, which points are visible at a finite position) of a frame."""
        positions = np.asarray(points.positions, np.float32)
        return positions, np.asarray(points.visible, bool) & np.isfinite(positions).all(axis=1)

    def _graph(self, points: FramePoints, positions, valid, where: str, knn=knn_cpu) -> None:
        if self.spec.lines is not None:
            if self.budget is not None:
                graph = self.spec.graph
                self.budget.check_points(int(valid.sum()), graph.k if graph.mode == "knn" else 8, where)
            self.edges, _ = build_edges(positions, self.spec.graph, knn=knn, valid=valid,
                                        previous=None if points.shot_start else self.edges)

    def advance(self, points: FramePoints) -> None:
        """Update the graph's, the trails' and the motion's memory with a frame that is not drawn (before a
        frame range)."""
        positions, valid = self._usable(points)
        if self.spec.lines is not None and self.spec.graph.hysteresis > 0:
            self._graph(points, positions, valid, "a frame before the range")
        if self.history is not None:
            self.history.push(points)
        self._motion(points, positions, valid)

    def replay_start(self, start: int) -> int:
        """The first frame to :meth:`advance` through before drawing from frame ``start``."""
        if self.needs_history:
            return 0
        return start if self.history is None else max(0, start - self.history.frames)

    def _motion(self, points: FramePoints, positions, valid):
        """This frame's motion (and the tracker's memory of it), or None without motion colours."""
        return None if self.motion is None else self.motion(positions, valid, points.shot_start)

    def _check_budget(self, points: FramePoints, positions, valid, where: str) -> None:
        lines, boxes = self.spec.lines, self.spec.boxes
        if self.budget is None:
            return
        side, count = 0.0, int(valid.sum())
        if boxes is not None:
            side = boxes.size
            if boxes.size_mode == "track" and points.sizes is not None:
                side = float(np.max(np.nan_to_num(np.asarray(points.sizes)[valid]), initial=side))
            side += boxes.stroke_width
        links = 0 if lines is None else len(self.edges)
        width = 0.0 if lines is None else lines.width
        if links:  # every link is at most the points' bounding-box diagonal: skip measuring when that fits
            spread = np.ptp(positions[valid], axis=0) if count else np.zeros(2)
            if self.budget.fits(self.budget.draw_bytes(links * float(np.hypot(*spread)), links, width,
                                                       count if boxes is not None else 0, side)):
                return
        lengths = [] if lines is None else edge_lengths(np.nan_to_num(positions), self.edges)
        self.budget.check_draw(lengths, width, 0 if boxes is None else count, side, where)

    def check(self, points: FramePoints, index: int) -> None:
        """Raise ``MemoryBudgetError`` if drawing this frame would exceed the budget (the graph's memory is kept)."""
        previous = self.edges
        try:
            positions, valid = self._usable(points)
            self._graph(points, positions, valid, f"frame {index}")
            self._check_budget(points, positions, valid, f"frame {index}")
        finally:
            self.edges = previous

    def __call__(self, points: FramePoints, index: int | None = None) -> DisplayList:
        return self.group([points], [index])[0]

    def group(self, frames: list, indices: list | None = None) -> list:
        """The display lists of consecutive frames' points (``indices``: their frame numbers, for messages), equal
        to calling the builder on each in turn. The graph, the trails and the labels go frame by frame (each
        frame's graph needs the one before); the links and the boxes of all the frames are built at once, since
        NumPy calls on a frame's few hundred values cost mostly their own overhead."""
        indices = [None] * len(frames) if indices is None else indices
        lines, boxes = self.spec.lines, self.spec.boxes
        count = max((len(points.visible) for points in frames), default=0)
        path = np.full((len(frames), count, 2), np.nan, np.float32)  # each frame's points, padded to one width
        valid = np.zeros((len(frames), count), bool)
        opacity = sizes = None
        if any(points.opacity is not None for points in frames):
            opacity = np.ones((len(frames), count), np.float32)  # x 1.0 leaves a frame without fades as it is
        if any(points.sizes is not None for points in frames):
            sizes = np.full((len(frames), count, 2), np.nan, np.float32)  # NaN: the style's size
        line_colors, box_colors = (np.zeros((len(frames), count, 4), np.float32) if style is not None and
                                   style.color_mode in MOTION_MODES else None for style in (lines, boxes))
        edges, below, above = [], [], []  # the trails under the links, the labels over the boxes
        usable = [self._usable(points) for points in frames]
        for t, (positions, visible) in enumerate(usable):
            path[t, :len(visible)], valid[t, :len(visible)] = positions, visible
        searched = None if lines is None or len(frames) < 2 else knn_searched_ahead(path, valid, self.spec.graph)
        for t, (points, index) in enumerate(zip(frames, indices)):
            where = "a frame" if index is None else f"frame {index}"
            positions, visible = usable[t]
            self._graph(points, positions, visible, where, knn_cpu if searched is None else searched[t])
            self._check_budget(points, positions, visible, where)
            motion = self._motion(points, positions, visible)
            columns = len(visible)
            if points.opacity is not None:
                opacity[t, :columns] = points.opacity
            if points.sizes is not None:
                sizes[t, :columns] = points.sizes
            for padded, style in ((line_colors, lines), (box_colors, boxes)):
                if padded is not None:
                    padded[t, :columns] = motion_colors(style, motion)
            edges.append(self.edges)
            below.append(self._trails(points))
            above.append(self._labels(points, positions, visible))
        links = [None] * len(frames) if lines is None else link_polylines_frames(
            np.nan_to_num(path), edges, lines, opacity, line_colors)
        framed = [DisplayList()] * len(frames) if boxes is None else box_overlay(
            path, valid, boxes, sizes, opacity, box_colors)
        return [trails + (DisplayList() if polylines is None else DisplayList((polylines,))) + frame_boxes + labels
                for trails, polylines, frame_boxes, labels in zip(below, links, framed, above)]

    def _labels(self, points: FramePoints, positions, visible) -> DisplayList:
        """This frame's labels, or an empty list without labels."""
        if self.spec.labels is None:
            return DisplayList()
        sizes = None if points.sizes is None else np.asarray(points.sizes, np.float32)[None]
        opacity = None if points.opacity is None else np.asarray(points.opacity, np.float32)[None]
        return label_overlay(positions[None], visible[None], self.spec.labels, points.texts, sizes, opacity,
                             self.frame_size)[0]

    def _trails(self, points: FramePoints) -> DisplayList:
        """This frame's trails (after adding it to the history), or an empty list without trails."""
        if self.history is None:
            return DisplayList()
        self.history.push(points)
        path, visible, fades = self.history.window()
        _, trails = trail_geometry(path, visible, self.spec.trails, fades, frames=[self.history.frames - 1])
        return DisplayList((trail_polylines(trails, slice(0, len(trails["width"]))),))


def overlay_frames(frames: Iterable[np.ndarray], points: PointSource, spec: OverlaySpec,
                   renderer) -> Iterator[np.ndarray]:
    """Lazily yield each frame with its overlay drawn (new arrays; inputs are not modified).

    A frame is pulled from ``frames`` only when the next result is asked for.
    """
    builder = None
    for frame, frame_points in points.pairs(frames):
        builder = builder or OverlayBuilder(spec, frame_size=(frame.shape[1], frame.shape[0]))
        yield renderer.render(frame, builder(frame_points), glow=spec.glow)


def layer_rgba(renderer, display_list: DisplayList, height: int, width: int, out: np.ndarray | None = None,
               glow: Glow | None = None):
    """The overlay alone (with its ``glow``) as uint8 RGBA [H, W, 4], straight alpha, from the renderer's
    ``render_layer``."""
    rgb, alpha = renderer.render_layer(display_list, height, width, glow=glow)
    out = np.empty((height, width, 4), np.uint8) if out is None else out
    np.multiply(rgb, 255.0, out=rgb)
    rgb += 0.5
    out[..., :3] = rgb
    out[..., 3] = alpha * np.float32(255.0) + np.float32(0.5)
    return out


@dataclass
class FrameSource:
    """A stream of uint8 RGB frames with its size and rate.

    ``frame_count`` is the (possibly estimated, ``counted`` False) length, 0
    when unknown; ``clip`` is the demo generator behind a demo or canvas
    source; ``path`` the video file behind a video source (it is protected
    from being overwritten, and its audio can be kept); ``planar`` says the
    video decodes to even-sized 8-bit 4:2:0 YUV, which can be drawn on as it
    is (see :mod:`.yuv`); ``audio`` is False when the video is known to have no
    sound (then it is not opened again to look).
    ``decoder`` says who decodes a video: ``"cpu"`` (PyAV) or ``"nvdec"`` (NVDEC,
    into GPU memory, where the file allows: :func:`.nvcodec.open_frames`); set
    it before :meth:`timed` to change it.
    """

    frames: Iterable[np.ndarray]
    width: int
    height: int
    fps: Fraction
    frame_count: int
    clip: DemoClip | None = None
    path: str | None = None
    counted: bool = True
    canvas: bool = False
    time_base: Fraction | None = None
    planar: bool = False
    audio: bool = True
    decoder: str = "cpu"
    end_time: Fraction | None = None  # when a video says it ends (:func:`.io.declared_end`)
    _opened_by: str = field(default="cpu", init=False, repr=False)  # the decoder of the open ``frames``

    @classmethod
    def from_video(cls, path, decoder: str = "cpu") -> "FrameSource":
        """Decode a video file lazily (checked now: a missing or unreadable file raises)."""
        if decoder == "cpu":
            info, frames = open_video(path)
        else:
            info, frames = probe_video(path), None
        if not info.fps:
            if frames is not None:
                frames.close()
            raise ValueError(f"{os.fspath(path)} does not state its frame rate; re-encode it with a fixed fps")
        source = cls(open_frames(path, 0, decoder) if frames is None else frames, info.width, info.height, info.fps,
                     info.frame_count, path=os.fspath(path), counted=info.counted, time_base=info.time_base,
                     planar=info.planar, audio=info.audio is not None, decoder=decoder, end_time=info.end_time)
        source._opened_by = decoder
        return source

    @classmethod
    def from_demo(cls, clip: DemoClip, canvas: bool = False) -> "FrameSource":
        """The demo clip's frames, or (``canvas``) one plain dark frame repeated for its length."""
        frames = _canvas(clip, clip.frame_count) if canvas else clip.frames()
        fps = Fraction(clip.fps).limit_denominator(1_000_000)
        return cls(frames, clip.width, clip.height, fps, clip.frame_count, clip, canvas=canvas)

    def timed(self, start: int = 0, yuv: bool = False, rgb: bool = True,
              buffers: PlaneBuffers | None = None) -> Iterator[DecodedFrame]:
        """Frames from index ``start`` on with their index and time (videos seek; others skip).

        ``yuv`` (a ``planar`` video only) adds each frame's YUV planes, held in
        ``buffers``; without ``rgb`` a video's frames come without their RGB image.
        """
        if self.path is not None:
            stats = getattr(self.frames, "stats", None)
            fresh = start == 0 and self._opened_by == self.decoder and stats is not None and stats.read == 0
            if fresh and isinstance(self.frames, VideoFrames):
                self.frames.outputs(yuv, rgb, buffers)
            elif not fresh:
                self.close()
                self.frames = (iter_video_frames(self.path, start, yuv=yuv, rgb=rgb, buffers=buffers)
                               if self.decoder == "cpu"
                               else open_frames(self.path, start, self.decoder))
                self._opened_by = self.decoder
            return self.frames.timed()
        if yuv:
            raise ValueError("only a video file's frames come as YUV planes")
        skip = start
        if self.clip is not None and start:
            if start >= self.clip.frame_count:
                raise ValueError(f"the video has {self.clip.frame_count} frames; it has no frame {start} to "
                                 "start from")
            self.close()
            count = self.clip.frame_count - start
            self.frames = _canvas(self.clip, count) if self.canvas else (
                self.clip.frame(index) for index in range(start, self.clip.frame_count))
            skip = 0  # the clip's frames now begin at ``start``
        frames = itertools.islice(self.frames, skip, None) if skip else self.frames
        return (DecodedFrame(image, index, Fraction(index) / self.fps) for index, image in enumerate(frames, start))

    def report(self, start: int, drawn: int, to_the_end: bool, last_time: Fraction | None = None) -> None:
        """Warn when a video read to its end (the last frame at ``last_time``) is truncated or damaged: frames
        failed to decode, the file ended early, or its frames stop short of its declared end by more than
        :data:`MISSING_AT_END` frames. Frame counts are a fallback where times are unknown: a container
        counts frames that an edit list cuts or that were dropped, and an estimate from the duration
        misses a variable rate."""
        decoder = getattr(self.frames, "stats", None)
        if decoder is None or not to_the_end or not self.frame_count:
            return
        expected = self.frame_count - start
        if last_time is not None and self.end_time is not None:
            short = last_time + (1 + MISSING_AT_END) / self.fps < self.end_time
        else:
            short = start + drawn + (0 if self.counted else max(1, expected // 100)) < self.frame_count
        if short or decoder.failed or decoder.ended_early:
            damaged = f"; {decoder.failed} frame(s) could not be decoded" if decoder.failed else ""
            stated = "declares" if self.counted else "should have (from its duration)"
            LOGGER.warning("%s: read %d of the %d frames it %s from frame %d%s; the file is truncated or "
                           "damaged, and the output has only the frames that were read", self.path, drawn,
                           expected, stated, start, damaged)

    def close(self) -> None:
        """Close the frame generator now (a video decoder's file with it) rather than when it is collected.

        Use ``contextlib.closing(source)`` where an error may come before :func:`render_video` runs.
        """
        close = getattr(self.frames, "close", None)
        if close is not None:
            close()


def _canvas(clip: DemoClip, count: int) -> Iterator[np.ndarray]:
    """One read-only dark frame of ``clip``'s size, ``count`` times (renderers never write into their input)."""
    frame = np.full((clip.height, clip.width, 3), CANVAS_RGB, np.uint8)
    frame.setflags(write=False)
    return itertools.repeat(frame, count)


@dataclass(frozen=True)
class FrameRange:
    """Frames ``start`` .. ``end`` - 1 of the source (``end`` None: to its end), at most ``limit`` of them."""

    start: int = 0
    end: int | None = None
    limit: int | None = None

    def __post_init__(self):
        for name in ("start", "end", "limit"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
                raise ValueError(f"{name} frame must be a whole number, got {value!r}")
        if self.start < 0:
            raise ValueError(f"start frame must be >= 0, got {self.start}")
        if self.end is not None and self.end <= self.start:
            raise ValueError(f"end frame ({self.end}) must be after the start frame ({self.start}); the range "
                             "is start .. end - 1")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"max_frames must be >= 1, got {self.limit}")

    @property
    def stop(self) -> int | None:
        """The first frame index not rendered (None: the source's end)."""
        stops = [value for value in (self.end, None if self.limit is None else self.start + self.limit)
                 if value is not None]
        return min(stops) if stops else None


def main_output_label(output) -> str:
    """What errors call a render's main output, as its writer does: "output" (a PNG folder) or "video"."""
    return "output" if paths.is_folder_spelling(os.fspath(output)) else "video"


def check_main_output(output, inputs=(), layer_only: bool = False, codec: str = "h264") -> None:
    """Refuse, before any work, a main output that its writer would refuse on opening (the writer checks it
    again): a wrong extension, a folder that is not empty, one of ``inputs``."""
    paths.check_output(output, inputs, what=main_output_label(output))
    choose_format(output, layer_only, codec)


def _open_outputs(output, png_dir, source: FrameSource, inputs, layer_only: bool, codec: str, crf: int,
                  preset: str, audio: bool, encoder: str = "cpu") -> list:
    """The writers of a render (checked against the inputs and each other), main output first."""
    protect = [source.path, *inputs]
    writers = []
    try:
        if paths.is_folder_spelling(os.fspath(output)):
            if encoder == "nvenc":
                raise ValueError(f"encoder 'nvenc' writes .mp4/.mov video, and {os.fspath(output)} is a PNG folder")
            writers.append(PngSequenceWriter(output, layer_only=layer_only, inputs=protect,
                                             what=main_output_label(output)))
            if audio and source.audio:
                LOGGER.warning("%s: audio not kept: PNG folders have no sound", source.path)
        else:
            sound = AudioCopy(source.path) if audio and source.audio and source.path is not None else None
            try:
                writers.append(open_video_writer(output, encoder, source.width, source.height, fps=source.fps,
                                                 crf=crf, preset=preset, layer_only=layer_only, codec=codec,
                                                 inputs=protect, audio=sound, time_base=source.time_base))
            except BaseException:
                if sound is not None:
                    sound.close()
                raise
        if png_dir is not None:
            writers.append(PngSequenceWriter(png_dir, layer_only=layer_only, inputs=protect, what="PNG folder"))
        paths.check_distinct([writer.output for writer in writers])
    except BaseException:
        for writer in writers:
            writer.abort()
        raise
    return writers


def _paired(frames: Iterator[DecodedFrame], points: PointSource) -> Iterator[tuple[DecodedFrame, FramePoints]]:
    """Each decoded frame with its points, in order (a source that looks ahead pulls frames before yielding)."""
    if not points.needs_frames:
        for item in frames:
            yield item, points(item.index, item.image)
        return
    held = deque()
    ahead = prefetched(frames, QUEUE_DEPTH, "decode-ahead")  # decoded while earlier frames' points are found

    def images():
        for item in ahead:
            held.append(item)
            yield to_numpy(item.image)  # detection reads host pixels (a GPU-decoded frame is copied once)

    # on an error or an interrupt the detector and then the decoding thread are stopped here, before the source
    # is closed: left to be collected (an error's traceback keeps them), the thread would still be running the
    # source's generator when render_video closes it
    with closing(ahead), closing(points.pairs(images())) as pairs:
        for _, frame_points in pairs:
            yield held.popleft(), frame_points


def _warm_up(pairs: Iterator[tuple[DecodedFrame, FramePoints]], points: PointSource, builder: OverlayBuilder,
             range_: FrameRange):
    """Bring the points and the graph to the state they have at the range's start; returns the pairs left."""
    if points.needs_frames:
        first = None
        for pair in pairs:
            if pair[0].index >= range_.start:
                first = pair
                break
            builder.advance(pair[1])
        return pairs if first is None else itertools.chain([first], pairs)
    for index in range(builder.replay_start(range_.start), range_.start):
        builder.advance(points(index, None))
    return pairs


def _preflight(points: PointSource, spec: OverlaySpec, budget: Budget, range_: FrameRange) -> None:
    """Refuse, before any output exists, a render whose busiest frames would exceed the memory budget."""
    most = points.most_points()
    if most is not None:
        knn = spec.graph.mode == "knn"
        if spec.lines is not None:
            budget.check_points(most, spec.graph.k if knn else 8, "the busiest frame")
        fewest_links = most * spec.graph.k // 2 if knn and spec.lines is not None else 0  # a lower bound
        budget.check_draw(np.zeros(fewest_links), 0.0 if spec.lines is None else spec.lines.width,
                          0 if spec.boxes is None else most, 0.0 if spec.boxes is None else spec.boxes.size,
                          "the busiest frame")
    if points.needs_frames:
        return
    checker = OverlayBuilder(spec, budget)
    for index in points.busiest(range_.start, range_.stop, 4):
        checker.check(points(index, None), index)


def render_video(source: FrameSource, points: PointSource, spec: OverlaySpec, renderer, output,
                 png_dir=None, max_frames: int | None = None, crf: int = 18, preset: str = "medium",
                 progress: Callable[[int], None] | None = None, *, start_frame: int = 0,
                 end_frame: int | None = None, layer_only: bool = False, codec: str = "h264", audio: bool = True,
                 inputs=(), budget: Budget | None = None, encoder: str = "cpu") -> int:
    """Draw the overlay on frames of ``source`` and write them to ``output``; returns the frames written
    to ``output`` (a GIF leaves out frames due sooner than it can show them).

    ``output``'s extension picks the format (:mod:`.formats`; a trailing ``/``
    writes a PNG sequence folder); ``layer_only`` writes the overlay alone with
    straight alpha instead of the composited frames. The video keeps the
    source's size, frame times and (``audio``) sound, and is written atomically:
    nothing appears under ``output`` unless every frame made it (an exception,
    Ctrl-C included, leaves no file). ``output`` must not resolve to the source
    video or any of ``inputs`` (e.g. the track file). ``start_frame`` ..
    ``end_frame`` - 1 (and at most ``max_frames``) are rendered. With
    ``png_dir`` each frame is also saved as ``frame_000000.png`` and so on
    (numbered by source frame). ``progress(done)`` is called as frames are
    handed to drawing (after each frame, or each group the GPU draws from one
    scene, :func:`frames_per_draw`). The source is closed on return or exception. ``encoder`` ``"auto"`` or
    ``"nvenc"`` encodes H.264/HEVC with NVENC where it can
    (:func:`.nvcodec.open_video_writer`); frames the source decoded into GPU
    memory (``source.decoder``) are drawn there by the GPU renderer.
    """
    try:
        range_ = FrameRange(start_frame, end_frame, max_frames)
        budget = Budget() if budget is None else budget
        held = frames_in_flight(renderer, source.width, source.height) + points.frames_held()
        budget.check_frames(source.width, source.height, held)
        if spec.glow.enabled:
            budget.check_glow(source.width, source.height)
        points.check_frame_size(source.width, source.height)
        _preflight(points, spec, budget, range_)
        writers = _open_outputs(output, png_dir, source, inputs, layer_only, codec, crf, preset, audio, encoder)
        yuv = _can_stay_in_yuv(source, writers, layer_only)
        with draw_processes(renderer, _frames_to_draw(source, range_), source.width, source.height, held) \
                if yuv and spec.draws else nullcontext() as processes:
            planar = yuv and (not spec.glow.enabled or _glow_in_yuv(renderer, processes))
            try:
                count = _render(source, points, spec, renderer, writers, range_, layer_only, budget, progress,
                                planar, processes)
            except BaseException:
                for writer in writers:
                    writer.abort()
                raise
            for writer in writers:
                writer.close()
            source.close()  # its decoder's buffers go before the processes' shared memory they are in
    finally:
        source.close()
    return count - getattr(writers[0], "frames_left_out", 0)  # a GIF leaves out frames due too soon


def _glow_in_yuv(renderer, processes) -> bool:
    """Whether a glowing overlay is drawn faster in YUV than in RGB by ``renderer`` (or its worker
    ``processes``). A halo covers much of the frame: the GPU is faster in YUV (1080p, 100 points: 62 against
    54 fps), and so are worker processes (31 against the threads' 20 at 1080p, about even at 4K), while the
    CPU's threads do better with their dense RGB composite (8.2 against 7.1 fps)."""
    return renderer.name == "gpu" or processes is not None


def _can_stay_in_yuv(source: FrameSource, writers: list, layer_only: bool) -> bool:
    """Whether frames can go from decoder to encoder in their own YUV: a planar video decoded by PyAV into one
    yuv420p video encoded by x264 or libvpx (PNGs, layers, GIFs, odd sizes, other pixel formats, NVDEC's
    frames and NVENC's input on the GPU are drawn in RGB; glow: :func:`_glow_in_yuv`)."""
    return (_YUV_COMPOSITE and source.planar and source.decoder == "cpu" and not layer_only and len(writers) == 1
            and isinstance(writers[0], VideoWriter) and not getattr(writers[0], "device_input", False)
            and writers[0].format.pix_fmt == "yuv420p")


def _grouped(items: Iterable, size: int) -> Iterator[list]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    items = iter(items)
    while group := list(itertools.islice(items, size)):
        yield group


def _before(items: Iterable, stop: int, frame_of: Callable, passed: list) -> Iterator:
    """``items`` while their frame's index is below ``stop``; the time of the first frame at or past it goes to
    ``passed``."""
    for item in items:
        if frame_of(item).index >= stop:
            passed.append(frame_of(item).time)
            return
        yield item


def _frames_to_draw(source: FrameSource, range_: FrameRange) -> int | None:
    """How many frames a render of ``range_`` draws (None: unknown)."""
    ends = [end for end in (range_.stop, source.frame_count or None) if end is not None]
    return max(0, min(ends) - range_.start) if ends else None


def _render(source, points, spec, renderer, writers, range_: FrameRange, layer_only: bool, budget, progress,
            planar: bool, processes) -> int:
    at_once = renderer.frames_at_once
    drawer = processes or (renderer.one_band() if at_once > 1 else renderer)  # frames at once: each in one band
    builder = OverlayBuilder(spec, budget, (source.width, source.height))
    first = range_.start
    if points.needs_frames:
        first = 0 if points.warmup is None else max(0, range_.start - points.warmup)
    # in YUV, RGB images are made only for a detector (drawing and encoding use the planes), and the planes
    # live in reused buffers of the drawer's choosing (page-locked for the GPU, shared with worker processes)
    frames = source.timed(first, yuv=True, rgb=points.needs_frames,
                          buffers=PlaneBuffers((processes or renderer).host_array)) if planar else source.timed(first)
    passed = []  # the time of the first frame after the range, where the output's sound ends
    if range_.stop is not None and not points.needs_frames:
        frames = _before(frames, range_.stop, lambda item: item, passed)
    channels = 4 if layer_only else 3
    device_writer = getattr(writers[0], "device_input", False)
    hand_over = FrameHandOver(writers)
    spare: queue.SimpleQueue = queue.SimpleQueue()  # drawn frames' buffers, back from the encoding thread
    size, last, built, written = [], [range_.start - 1, None], [0], [0]  # last: the index and time built

    def place(item: DecodedFrame):  # (index, time, picture) of a frame checked to be of the first one's size
        image = item.image
        if not (planar or layer_only):
            image = place_frame(image, renderer, device_writer)
        last[:] = item.index, item.time
        shape = (item.planes.height, item.planes.width) if planar else image.shape[:2]
        if not size:
            size.extend(shape)
        elif shape != tuple(size):
            raise ValueError(f"frame {item.index} is {shape[1]}x{shape[0]} but earlier frames are "
                             f"{size[1]}x{size[0]}; all frames must have one size")
        return item.index, item.time, item.planes if planar else image

    def build(pairs: list) -> list:  # the overlays are built here, drawn by the next stage
        placed = [place(item) for item, _ in pairs]
        overlays = builder.group([frame_points for _, frame_points in pairs], [item.index for item, _ in pairs])
        built[0] += len(pairs)
        return [(*frame, display_list) for frame, display_list in zip(placed, overlays)]

    def draw_rgb(built_frame):  # on the GPU, one frame at a time; on the CPU several at once
        index, time, picture, display_list = built_frame
        xp = np if layer_only else array_module(picture)
        try:
            buffer = spare.get_nowait()
        except queue.Empty:
            buffer = None
        if buffer is None or array_module(buffer) is not xp:
            buffer = xp.empty((*size, channels), np.uint8)
        if layer_only:
            drawn = layer_rgba(drawer, display_list, *size, buffer, glow=spec.glow)
        elif xp is not np:  # a GPU frame, drawn where it is
            drawn = drawer.render_frames(picture[None], [display_list], buffer[None], glow=spec.glow)[0]
        else:
            drawn = drawer.render(picture, display_list, out=buffer, glow=spec.glow)
        return index, time, drawn

    def draw(built_frames: list) -> list:
        if not planar:
            return [draw_rgb(built_frame) for built_frame in built_frames]
        # on the GPU in place, the frames from one scene; on the CPU rasterised here, composited by the
        # encoding thread
        layers = draw_planes_together(drawer, [frame[3] for frame in built_frames],
                                      [frame[2] for frame in built_frames], spec.glow)
        return [(index, time, picture, layer) for (index, time, picture, _), layer in zip(built_frames, layers)]

    def write_one(result) -> None:
        index, time, frame = result[:3]
        if planar:
            if result[3] is not None:  # here, so the next frame's rasterising overlaps this one's
                composite_planes(frame, result[3])
            writers[0].write(frame, time)
        else:
            hand_over(frame, index, time)
            spare.put(frame)
        written[0] += 1

    def write(results: list) -> None:
        for result in results:
            write_one(result)

    together = frames_per_draw(renderer, source.width, source.height) if planar else 1
    # closed before the source is: a detector's frames are decoded on a thread of its own (:func:`_paired`)
    with closing(_paired(frames, points)) as paired:
        pairs = _warm_up(paired, points, builder, range_)
        if range_.stop is not None and points.needs_frames:  # a detector looks past the end, as in the whole render
            pairs = _before(pairs, range_.stop, lambda pair: pair[0], passed)
        after = None if progress is None else (lambda _: progress(built[0]))
        Pipeline(QUEUE_DEPTH).run(_grouped(pairs, together), build, write, after, finish=draw,
                                  finish_workers=at_once)
    count = written[0]
    if passed:
        writers[0].ends_at = passed[0]
    if count == 0:
        raise ValueError("the input has no frames; nothing to render" if range_.start == 0 else
                         f"the input has no frames from frame {range_.start}; nothing to render")
    reached = last[0] + 1  # frames skipped as undecodable keep their numbers
    limited = range_.stop is not None and reached >= range_.stop
    points.finish(reached, limited)
    source.report(range_.start, count, not limited, last[1])
    return count
