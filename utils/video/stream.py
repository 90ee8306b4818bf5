"""Streaming overlay pipeline: one frame at a time, in memory independent of clip length.

::

    frames ─▶ points (detector / track file / demo) ─▶ graph (hysteresis on
    the previous frame's edges) ─▶ display list ─▶ renderer ─▶ writer (+ PNGs)

Each stage keeps only what the next frame needs (the detector's live points,
the previous frame's edges), and frames are pulled from the source lazily,
so an hour of video streams through like a second of it.

Example::

    source = FrameSource.from_video("clip.mp4")
    points = DetectedPoints(TrackDetector(method="motion"))
    render_video(source, points, OverlaySpec(), CpuRenderer(), "clip_overlay.mp4")
"""

from __future__ import annotations

import itertools
import os
from abc import ABC
from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Iterable, Iterator

import numpy as np

from ..core.log import LOGGER
from ..draw.display_list import DisplayList
from ..draw.overlays import box_overlay, link_polylines
from ..draw.styles import BoxStyle, LineStyle
from ..graph.neighbours import GraphParams, build_edges
from ..tracks.contract import Tracks
from ..tracks.demo import DemoClip
from ..tracks.detect import TrackDetector
from .io import VideoWriter, iter_video_frames, probe_video, write_png


@dataclass(frozen=True)
class FramePoints:
    """One frame's tracked points; index ``n`` is track column ``n``.

    Attributes:
        positions: float32 [N, 2] pixel x, y (hidden points may hold anything, NaN included).
        visible: bool [N].
        sizes: float32 [N, 2] box width, height per point, or None.
        opacity: float32 [N] 0..1 per point (births and deaths fade), or None (all 1).
    """

    positions: np.ndarray
    visible: np.ndarray
    sizes: np.ndarray | None = None
    opacity: np.ndarray | None = None

    def __post_init__(self):
        count = len(self.visible)
        if np.shape(self.positions) != (count, 2):
            raise ValueError(f"points: positions must have shape [{count}, 2] (one per visibility flag), "
                             f"got {list(np.shape(self.positions))}")
        if self.sizes is not None and np.shape(self.sizes) != (count, 2):
            raise ValueError(f"points: sizes must have shape [{count}, 2], got {list(np.shape(self.sizes))}")
        if self.opacity is not None and np.shape(self.opacity) != (count,):
            raise ValueError(f"points: opacity must have shape [{count}], got {list(np.shape(self.opacity))}")


class PointSource(ABC):
    """Where each frame's points come from: ``source(index, frame) -> FramePoints``, or, for sources
    that look ahead, :meth:`pairs`."""

    def __call__(self, index: int, frame: np.ndarray) -> FramePoints:
        """The points of frame ``index`` (called once per frame, in order)."""
        raise NotImplementedError

    def pairs(self, frames: Iterable[np.ndarray]) -> Iterator[tuple[np.ndarray, FramePoints]]:
        """Each frame with its points, in order (frames are pulled only as far as needed)."""
        for index, frame in enumerate(frames):
            yield frame, self(index, frame)

    def finish(self, frames: int, limited: bool) -> None:
        """Called after the last frame (``limited``: a frame limit stopped the stream)."""


class DetectedPoints(PointSource):
    """Points found and followed in the frames themselves by a :class:`TrackDetector`.

    The detector looks ``detector.lookahead`` frames ahead (to fade and to drop
    short tracks), so that many frames are held here until their points are known.
    """

    def __init__(self, detector: TrackDetector):
        self.detector = detector

    def pairs(self, frames):
        held = deque()
        for frame in frames:
            held.append(frame)
            for done in self.detector.push(frame):
                yield held.popleft(), FramePoints(done.positions, done.visible, opacity=done.opacity)
        for done in self.detector.finish():
            yield held.popleft(), FramePoints(done.positions, done.visible, opacity=done.opacity)

    def finish(self, frames, limited):
        LOGGER.info("detection started %d track(s) over %d frame(s)", self.detector.track_count, frames)


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
        return FramePoints(tracks.path[t], tracks.visibility[t], sizes, opacity)

    def finish(self, frames, limited):
        if frames < self.tracks.frame_count and self.tracks.frame_count > 1 and not limited:
            raise self._mismatch(f"only {frames}")


class DemoPoints(PointSource):
    """The demo clip's true dot positions (every dot visible)."""

    def __init__(self, clip: DemoClip):
        self.clip = clip

    def __call__(self, index, frame):
        return FramePoints(self.clip.positions(index), np.ones(self.clip.dots, bool))


@dataclass(frozen=True)
class OverlaySpec:
    """What to draw: the neighbour graph's links (``lines``) and boxes; None skips a part."""

    graph: GraphParams = field(default_factory=GraphParams)
    lines: LineStyle | None = field(default_factory=LineStyle)
    boxes: BoxStyle | None = field(default_factory=BoxStyle)


class OverlayBuilder:
    """Turns each frame's points into a display list (links under boxes).

    The graph is built per frame with the previous frame's edges (pairs of
    track columns) as ``previous``, so hysteresis works across the stream.
    Call it once per frame, in order.
    """

    def __init__(self, spec: OverlaySpec):
        self.spec = spec
        self.edges = None

    def __call__(self, points: FramePoints) -> DisplayList:
        positions = np.asarray(points.positions, np.float32)
        valid = np.asarray(points.visible, bool) & np.isfinite(positions).all(axis=1)
        opacity = None if points.opacity is None else np.asarray(points.opacity, np.float32)
        result = DisplayList()
        if self.spec.lines is not None:
            self.edges, _ = build_edges(positions, self.spec.graph, valid=valid, previous=self.edges)
            ids = np.arange(len(valid))
            result += DisplayList((link_polylines(np.nan_to_num(positions), ids, self.edges, self.spec.lines,
                                                  opacity),))
        if self.spec.boxes is not None:
            sizes = None if points.sizes is None else np.asarray(points.sizes, np.float32)[None]
            result += box_overlay(positions[None], valid[None], self.spec.boxes, sizes,
                                  None if opacity is None else opacity[None])[0]
        return result


def overlay_frames(frames: Iterable[np.ndarray], points: PointSource, spec: OverlaySpec,
                   renderer) -> Iterator[np.ndarray]:
    """Lazily yield each frame with its overlay drawn (new arrays; inputs are not modified).

    A frame is pulled from ``frames`` only when the next result is asked for.
    """
    builder = OverlayBuilder(spec)
    for frame, frame_points in points.pairs(frames):
        yield renderer.render(frame, builder(frame_points))


@dataclass(frozen=True)
class FrameSource:
    """A stream of uint8 RGB frames with its size and rate.

    ``frame_count`` is the (possibly estimated) length, 0 when unknown; ``clip``
    is the demo generator behind a demo or canvas source, else None.
    """

    frames: Iterable[np.ndarray]
    width: int
    height: int
    fps: Fraction
    frame_count: int
    clip: DemoClip | None = None

    @classmethod
    def from_video(cls, path) -> "FrameSource":
        """Decode a video file lazily (checked now: a missing or unreadable file raises)."""
        info = probe_video(path)
        if not info.fps:
            raise ValueError(f"{os.fspath(path)} does not state its frame rate; re-encode it with a fixed fps")
        return cls(iter_video_frames(path), info.width, info.height, info.fps, info.frame_count)

    @classmethod
    def from_demo(cls, clip: DemoClip, canvas: bool = False) -> "FrameSource":
        """The demo clip's frames, or (``canvas``) plain dark frames of its size and length."""
        frames = clip.canvas_frames() if canvas else clip.frames()
        fps = Fraction(clip.fps).limit_denominator(1_000_000)
        return cls(frames, clip.width, clip.height, fps, clip.frame_count, clip)

    def close(self) -> None:
        """Close the frame generator now (a video decoder's file with it) rather than when it is collected.

        Use ``contextlib.closing(source)`` where an error may come before :func:`render_video` runs.
        """
        close = getattr(self.frames, "close", None)
        if close is not None:
            close()


def _png_folder(png_dir) -> str:
    """``png_dir`` created if needed; a clear error when it cannot be a folder."""
    png_dir = os.fspath(png_dir)
    if os.path.exists(png_dir) and not os.path.isdir(png_dir):
        raise NotADirectoryError(f"PNG folder {png_dir} exists and is not a folder; choose another --png-dir")
    try:
        os.makedirs(png_dir, exist_ok=True)
    except OSError as error:
        raise PermissionError(f"cannot create PNG folder {png_dir} ({error.strerror})") from None
    return png_dir


def render_video(source: FrameSource, points: PointSource, spec: OverlaySpec, renderer, output,
                 png_dir=None, max_frames: int | None = None, crf: int = 18, preset: str = "medium",
                 progress: Callable[[int], None] | None = None) -> int:
    """Draw the overlay on every frame of ``source`` and write an H.264 MP4 to ``output``.

    The video keeps the source's size and frame rate and is written
    atomically (nothing appears under ``output`` unless every frame made it;
    an exception, Ctrl-C included, leaves no file). The source's frame
    generator is closed on return or exception (a video decoder's file with
    it), also when ``max_frames`` stops early. With ``png_dir`` each
    frame is also saved as ``frame_000000.png`` and so on. ``progress(done)``
    is called after every frame. Returns the number of frames written.
    """
    try:
        if max_frames is not None and max_frames < 1:
            raise ValueError(f"max_frames must be >= 1, got {max_frames}")
        folder = None if png_dir is None else _png_folder(png_dir)
        frames = source.frames if max_frames is None else itertools.islice(source.frames, max_frames)
        with VideoWriter(output, fps=source.fps, crf=crf, preset=preset) as writer:
            for index, image in enumerate(overlay_frames(frames, points, spec, renderer)):
                writer.write(image)
                if folder is not None:
                    write_png(os.path.join(folder, f"frame_{index:06d}.png"), image)
                if progress is not None:
                    progress(index + 1)
            if writer.frame_count == 0:
                raise ValueError("the input has no frames; nothing to render")
            points.finish(writer.frame_count, limited=writer.frame_count == max_frames)
    finally:
        source.close()
    return writer.frame_count
