"""Streaming video in and out with PyAV (one frame in memory at a time), and PNG out.

Reading keeps what the file says: frames come upright (the display matrix's
rotation applied), with their own timestamps (variable frame rates survive),
from any frame on (frame-accurate seeking), and a file that ends early or has
damaged frames is reported (frames read vs declared). Writing picks the format
from the output's extension (:mod:`.formats`), copies the input's audio
(:mod:`.audio`), and never destroys a file (:mod:`.paths`).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterator, NamedTuple

import av
import cv2
import numpy as np

from ..core.arrays import to_numpy
from ..core.checks import Range
from ..core.log import LOGGER
from . import paths
from .audio import AudioCopy
from .formats import OutputFormat, choose_format
from .yuv import (
    PLANAR_FORMATS,
    PlaneBuffers,
    YuvPlanes,
    is_full_range,
    matrix_tag,
    planes_from_frame,
    yuv_coefficients,
)

X264_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")
_VP9_SPEED = dict(zip(X264_PRESETS, (8, 7, 6, 5, 4, 3, 2, 1, 0)))  # libvpx cpu-used per x264 preset
MAX_FPS = 100_000  # frames per second: high-speed cameras reach tens of thousands
MAX_SIDE = 16384  # pixels: the largest frame side read or written (larger is refused, not attempted)
_SCAN_KEYFRAMES = 2  # keyframes past the wanted frame scanned before its timestamp is trusted (open GOPs)
CRF_RANGE = Range(0, 51)  # x264 quality: lower is better
GIF_LEAST_DELAY = 2
"""Centiseconds: the shortest delay between GIF frames. Browsers and most players hold a frame with a delay of 0 or
1 cs for 10 cs, so a 60 fps GIF would stutter; a frame due sooner after the last one kept is left out."""


@dataclass(frozen=True)
class VideoInfo:
    """What a video file says about itself.

    ``width``/``height`` are the displayed size (after rotation); ``rotation`` is
    the counter-clockwise turn (degrees, a multiple of 90) applied to the coded
    frames to show them upright. ``frame_count`` is the container's count
    (``counted``) or an estimate from duration x fps (0 when neither is known);
    ``fps`` is the average rate, 0 when unknown. ``audio`` names the first audio
    stream's codec, or is None; ``time_base`` is the unit of the frames' timestamps. ``pix_fmt`` is the
    first frame's decoded pixel format (None if no frame decodes). ``end_time`` is when the stream says it
    ends, in seconds on its frames' clock (:func:`declared_end`; None if unknown).
    """

    width: int
    height: int
    fps: Fraction
    frame_count: int
    rotation: int = 0
    counted: bool = True
    audio: str | None = None
    time_base: Fraction | None = None
    pix_fmt: str | None = None
    end_time: Fraction | None = None

    @property
    def planar(self) -> bool:
        """Whether the frames decode to 8-bit 4:2:0 YUV of an even size (composited as they are)."""
        return self.pix_fmt in PLANAR_FORMATS and not self.width % 2 and not self.height % 2


def _open_video(path) -> tuple:
    """Open ``path`` for reading: (container, first video stream), or a clear error."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"video file {path} does not exist")
    if not os.path.isfile(path):
        raise ValueError(f"video path {path} is not a file")
    if os.path.getsize(path) == 0:
        raise ValueError(f"video file {path} is empty")
    try:
        container = av.open(path, "r")
    except av.error.FFmpegError as error:
        raise ValueError(f"{path} is not a readable video ({error.strerror or error})") from None
    if not container.streams.video:
        audio = " (it holds only audio)" if container.streams.audio else ""
        container.close()
        raise ValueError(f"{path} has no video stream{audio}")
    stream = container.streams.video[0]
    width, height = stream.codec_context.width, stream.codec_context.height
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
        container.close()
        raise ValueError(f"{path} is {width}x{height}; frames from 1x1 to {MAX_SIDE}x{MAX_SIDE} are supported")
    return container, stream


def _first_frame(stream):
    """``stream``'s first decoded frame, or None."""
    try:
        for frame in stream.container.decode(stream):
            return frame
    except av.error.FFmpegError:
        pass
    return None


def _quarter_turns(rotation) -> int:
    """Quarter turns (0..3) of a display-matrix rotation; other angles are ignored with a warning."""
    turns, rest = divmod(round(rotation or 0), 90)
    if rest:
        LOGGER.warning("video rotation of %s degrees is not a multiple of 90; frames are used as stored", rotation)
        return 0
    return turns % 4


def _tag_seconds(text: str | None) -> Fraction | None:
    """Seconds of a Matroska ``DURATION`` tag ("HH:MM:SS.nnnnnnnnn"), None if absent or unreadable."""
    try:
        hours, minutes, seconds = (text or "").split(":")
        return (int(hours) * 60 + int(minutes)) * 60 + Fraction(seconds)
    except ValueError:
        return None


def declared_end(container, stream) -> tuple[Fraction, Fraction | None]:
    """When ``stream`` says it starts and ends, in seconds on its frames' clock: its own duration, else its
    ``DURATION`` tag (Matroska), else the file's (which clips cut from a longer file may still carry: a
    20 s MKV said 1347 s). The end is None when nothing states a length."""
    base = Fraction(stream.time_base) if stream.time_base else None
    if base is not None and stream.start_time is not None:
        start = stream.start_time * base
    else:
        start = Fraction(container.start_time or 0, av.time_base)
    if base is not None and stream.duration:
        return start, start + stream.duration * base
    tagged = _tag_seconds(stream.metadata.get("DURATION"))
    if tagged is not None:
        return start, start + tagged
    return start, (Fraction(container.duration, av.time_base) + start) if container.duration else None


def _video_info(container, stream, first) -> VideoInfo:
    """What ``container`` says of ``stream``, with rotation and pixel format from its ``first`` frame (or None)."""
    fps = stream.average_rate or stream.guessed_rate or Fraction(0)
    count, counted = stream.frames, True
    if stream.average_rate and stream.guessed_rate:
        ticks = Fraction(stream.average_rate) / Fraction(stream.guessed_rate)  # header counts per frame shown
        if ticks > 1 and ticks.denominator == 1:  # e.g. an H.264 AVI whose header counts half frames
            fps, count = Fraction(stream.guessed_rate), round(count / ticks)
    start, end = declared_end(container, stream)
    if not count and fps:
        counted = False
        count = 0 if end is None else round((end - start) * fps)
    audio = container.streams.audio[0].codec_context.name if container.streams.audio else None
    rotation = 0 if first is None else _quarter_turns(first.rotation) * 90
    width, height = stream.codec_context.width, stream.codec_context.height
    if rotation % 180:
        width, height = height, width
    time_base = Fraction(stream.time_base) if stream.time_base else None
    return VideoInfo(width, height, Fraction(fps), int(count), rotation, counted, audio, time_base,
                     None if first is None else first.format.name, end)


def probe_video(path) -> VideoInfo:
    """Size (upright), frame rate, (estimated) frame count, rotation and audio of a video file."""
    container, stream = _open_video(path)
    with container:
        return _video_info(container, stream, _first_frame(stream))


class DecodedFrame(NamedTuple):
    """One upright frame: uint8 RGB [H, W, 3] (``image``) and/or its YUV planes (``planes``; None unless
    asked for), its index in the video and its time in seconds (None if unknown)."""

    image: np.ndarray | None
    index: int
    time: Fraction | None
    planes: YuvPlanes | None = None


_HDR_TRANSFERS = {16: "PQ", 18: "HLG"}  # transfer characteristics (ITU-T H.273) of HDR video


_SWSCALE_MATRIX = {1: "itu709", 5: "itu601", 6: "smpte170m", 7: "smpte240m", 9: "bt2020", 10: "bt2020"}


def source_matrix(frame) -> str:
    """The YUV->RGB matrix of ``frame``: its tag, else BT.709 from 720 lines up and BT.601 below (as players do)."""
    return _SWSCALE_MATRIX[matrix_tag(frame.colorspace, frame.height)]


def frame_to_rgb(frame) -> np.ndarray:
    """A decoded frame as upright uint8 RGB [H, W, 3] (its colour matrix and range honoured)."""
    if frame.format.name in ("rgb24", "rgba", "bgr24", "bgra", "gbrp", "pal8") or frame.format.name.startswith("gray"):
        image = frame.to_ndarray(format="rgb24")
    else:
        image = frame.to_ndarray(format="rgb24", src_colorspace=source_matrix(frame),
                                 src_color_range="JPEG" if is_full_range(frame) else "MPEG")
    turns = _quarter_turns(frame.rotation)
    return np.ascontiguousarray(np.rot90(image, turns)) if turns else image


_MADE_UP_PTS = {"avi"}
"""Containers that store no presentation times: FFmpeg makes pts up from the packets' order, and H.264
B-frames, put back in order by the decoder, carry them shuffled (the output then stuttered)."""


class _FrameStamps:
    """Decoded frames' presentation stamps, in their time base: each frame's pts, unless pts are made up
    (``pts_made_up``, :data:`_MADE_UP_PTS`) or have gone backwards more often than the decode stamps (dts) so
    far; then its dts. Frames come out of the decoder in presentation order, so true stamps rise. (FFmpeg's
    own best-effort stamp counts the same.) A frame without a dts when pts are not trusted (the decoder's
    last ones) comes one step after the last."""

    def __init__(self, pts_made_up: bool = False):
        self._pts_made_up = pts_made_up
        self._last = {"pts": None, "dts": None, "stamp": None}
        self._backwards = {"pts": 0, "dts": 0}
        self._step = None

    def __call__(self, frame) -> int | None:
        for kind in ("pts", "dts"):
            stamp = getattr(frame, kind)
            if stamp is not None:
                self._backwards[kind] += self._last[kind] is not None and stamp <= self._last[kind]
                self._last[kind] = stamp
        trusted = not self._pts_made_up and self._backwards["pts"] <= self._backwards["dts"]
        if frame.pts is not None and (trusted or frame.dts is None and self._step is None):
            stamp = frame.pts
        elif frame.dts is not None:
            stamp = frame.dts
        else:
            stamp = None if self._step is None else self._last["stamp"] + self._step
        if stamp is not None and self._last["stamp"] is not None:
            self._step = stamp - self._last["stamp"]
        self._last["stamp"] = stamp
        return stamp


def _frame_time(frame, stamp: int | None) -> Fraction | None:
    """``frame``'s time in seconds from its ``stamp`` (:class:`_FrameStamps`), None if unknown."""
    if stamp is None or frame.time_base is None:
        return None
    return stamp * Fraction(frame.time_base)


def start_timestamp(container, stream, start: int) -> int | None:
    """The pts of presentation-order frame ``start`` from a demux-only scan (None when pts are missing).

    Raises ValueError when the video has no frame ``start``.
    """
    stamps, keyframes_after = [], 0
    for packet in container.demux(stream):
        if packet.size == 0:
            continue
        if packet.pts is None:
            return None
        stamps.append(packet.pts)
        if len(stamps) > start and packet.is_keyframe:
            keyframes_after += 1
            if keyframes_after > _SCAN_KEYFRAMES:
                break
    if len(stamps) <= start:
        raise ValueError(f"the video has {len(stamps)} frames; it has no frame {start} to start from")
    return sorted(stamps)[start]


REORDER_DEPTH = 16
"""Frames a decoder may hold back to put them in presentation order (H.264/HEVC hold at most 16)."""


def presentation_times(path, start: int = 0) -> Iterator[Fraction]:
    """The times in seconds of the video's frames from frame ``start`` on, in presentation order, from a
    demux-only pass (the packets' timestamps, as PyAV's decoded frames carry them); ends early at a packet
    without a timestamp. Lazy: close the iterator to close the file."""
    with av.open(os.fspath(path)) as container:
        stream = container.streams.video[0]
        unit = Fraction(stream.time_base)
        waiting, index = [], 0
        for packet in itertools.chain(container.demux(stream), [None]):
            if packet is not None:
                if packet.size == 0 or packet.is_discard:
                    continue
                if packet.pts is None:
                    return
                heapq.heappush(waiting, packet.pts)
            while waiting and (packet is None or len(waiting) > REORDER_DEPTH):
                pts = heapq.heappop(waiting)
                if index >= start:
                    yield pts * unit
                index += 1


@dataclass
class DecodeStats:
    """What a decoder met: frames yielded (``read``), frames skipped as undecodable (``failed``), early end."""

    read: int = 0
    failed: int = 0
    ended_early: bool = False

    @property
    def position(self) -> int:
        """Frames passed so far, good or bad (a skipped frame keeps its number, so later ones keep theirs)."""
        return self.read + self.failed


def _seek(container, stream, start: int) -> int | None:
    """Position the demuxer at or before frame ``start``; the pts to start at (None: count frames from the first
    instead, as where pts are made up (:data:`_MADE_UP_PTS`) and decoded frames are timed otherwise)."""
    if start == 0 or container.format.name in _MADE_UP_PTS:
        return None
    target = start_timestamp(container, stream, start)
    container.seek(0 if target is None else target, stream=stream, backward=True)
    return target


def _rgb_only(frame) -> tuple:
    return frame_to_rgb(frame), None


def _raw_frames(container, stream, path: str, start: int, stats: DecodeStats) -> Iterator[tuple]:
    """FFmpeg's decoded frames from ``start`` on, each with its stamp (:class:`_FrameStamps`); bad packets
    are logged, counted and skipped."""
    target = _seek(container, stream, start)
    to_skip = start if target is None else 0
    stamps = _FrameStamps(container.format.name in _MADE_UP_PTS)
    packets = container.demux(stream)
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            return
        except av.error.FFmpegError as error:
            LOGGER.warning("%s: stopped reading at frame %d: %s", path, start + stats.position, error)
            stats.ended_early = True
            return
        try:
            frames = packet.decode()
        except av.error.FFmpegError as error:
            LOGGER.warning("%s: frame %d failed to decode (%s); skipped", path, start + stats.position, error)
            stats.failed += 1
            continue
        for frame in frames:
            stamp = stamps(frame)
            if target is not None and stamp is not None and stamp < target:
                continue
            if to_skip:
                to_skip -= 1
                continue
            yield frame, stamp


def _decode(container, stream, path: str, start: int, stats: DecodeStats, convert=_rgb_only,
            frames: Iterator | None = None) -> Iterator[DecodedFrame]:
    """Decoded frames from ``start`` on (``frames``: :func:`_raw_frames`' pairs, if already begun), ``convert(frame)`` giving
    (image, planes); bad packets or frames are logged, counted and skipped."""
    for frame, stamp in _raw_frames(container, stream, path, start, stats) if frames is None else frames:
        try:
            image, planes = convert(frame)
        except (av.error.FFmpegError, ValueError) as error:
            LOGGER.warning("%s: frame %d failed to convert (%s); skipped", path, start + stats.position, error)
            stats.failed += 1
            continue
        yield DecodedFrame(image, start + stats.position, _frame_time(frame, stamp), planes)
        stats.read += 1


class VideoFrames:
    """Decoded frames of one file, in presentation order; owns the open file (see :func:`iter_video_frames`).

    Iterating yields upright uint8 RGB images; :meth:`timed` yields
    :class:`DecodedFrame` (image, index, time, planes) from the same stream:
    with ``yuv`` each carries host copies of its YUV planes (:mod:`.yuv`),
    and without ``rgb`` no RGB image (None; then iterate :meth:`timed`). Unlike a
    generator's, :meth:`close` releases the file even before the first frame
    was pulled, and dropping an unfinished iterator closes it at once. ``stats``
    counts frames read and frames that could not be decoded.
    """

    def __init__(self, container, stream, path: str, start: int = 0, yuv: bool = False, rgb: bool = True,
                 begun: tuple | None = None, buffers: PlaneBuffers | None = None):
        self._container = container
        self.path = path
        self.start = start
        self.stats = DecodeStats() if begun is None else begun[1]
        self._wanted = {}  # shared with the decoder loop (not self: dropping an unfinished iterator closes it)
        self.outputs(yuv, rgb, buffers)
        wanted = self._wanted

        def convert(frame) -> tuple:
            image = frame_to_rgb(frame) if wanted["rgb"] else None
            if not wanted["yuv"]:
                return image, None
            return image, planes_from_frame(frame, _quarter_turns(frame.rotation), wanted["buffers"])

        self._frames = _decode(container, stream, path, start, self.stats, convert, begun and begun[0])

    def outputs(self, yuv: bool = False, rgb: bool = True, buffers: PlaneBuffers | None = None) -> None:
        """Choose what the frames come with (see the class docstring; ``buffers`` holds the planes, default a
        new :class:`~.yuv.PlaneBuffers`); before the first frame only."""
        if not (yuv or rgb):
            raise ValueError("decoded frames need RGB images, YUV planes or both; ask for at least one")
        if self.stats.read:
            raise ValueError("choose what decoded frames come with before the first one is read")
        self._wanted.update(yuv=yuv, rgb=rgb, buffers=PlaneBuffers() if buffers is None else buffers)

    def timed(self) -> Iterator[DecodedFrame]:
        """The remaining frames with their index and time."""
        return self._frames

    def __iter__(self) -> "VideoFrames":
        return self

    def __next__(self) -> np.ndarray:
        try:
            return next(self._frames).image
        except StopIteration:
            self.close()
            raise

    def close(self) -> None:
        """Stop decoding, close the file and let go of the planes' buffers (safe to call more than once)."""
        self._frames.close()
        self._container.close()
        self._wanted.pop("buffers", None)

    __del__ = close  # dropped unfinished: release the file now, as a generator's cleanup would


def iter_video_frames(path, start: int = 0, *, yuv: bool = False, rgb: bool = True,
                      buffers: PlaneBuffers | None = None) -> VideoFrames:
    """Decode ``path`` one frame at a time from frame ``start`` on: upright uint8 RGB [H, W, 3] per frame
    (``yuv``: with the YUV planes too, held in ``buffers``; see :class:`VideoFrames`).

    The file is opened (and checked) at call time; it is closed when the
    iterator is exhausted or closed (started or not). Seeking is
    frame-accurate: frame ``start`` is the one a decode from the beginning
    would have yielded ``start``-th (counting in presentation order).
    """
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ValueError(f"start frame must be a whole number >= 0, got {start!r}")
    container, stream = _open_video(path)
    stream.thread_type = "AUTO"
    return VideoFrames(container, stream, os.fspath(path), start, yuv, rgb, buffers=buffers)


def open_video(path) -> tuple[VideoInfo, VideoFrames]:
    """:func:`probe_video` and :func:`iter_video_frames` from frame 0 with one opening of the file: the
    first frame, decoded for its rotation and pixel format, is the first the frames yield (opening and
    probing a large file costs about one frame's decoding)."""
    container, stream = _open_video(path)
    try:
        stream.thread_type = "AUTO"
        stats = DecodeStats()
        frames = _raw_frames(container, stream, os.fspath(path), 0, stats)
        opening = next(frames, None)
        first = None if opening is None else opening[0]
        info = _video_info(container, stream, first)
    except BaseException:
        container.close()
        raise
    if first is not None and first.color_trc in _HDR_TRANSFERS:
        LOGGER.warning("%s: HDR video (%s transfer): its frames are read and written as SDR, without tone "
                       "mapping, so the output looks flat and pale; convert it to SDR first (e.g. FFmpeg's "
                       "zscale and tonemap filters)", os.fspath(path), _HDR_TRANSFERS[first.color_trc])
    begun = frames if opening is None else itertools.chain([opening], frames)
    return info, VideoFrames(container, stream, os.fspath(path), 0, begun=(begun, stats))


def _check_rate(fps) -> Fraction:
    try:
        rate = Fraction(fps).limit_denominator(1_000_000)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"fps must be a number in (0, {MAX_FPS}], got {fps!r}") from None
    if isinstance(fps, bool) or not 0 < rate <= MAX_FPS:
        raise ValueError(f"fps must be a number in (0, {MAX_FPS}], got {fps}")
    return rate


def _check_frame(frame, label: str, index: int, channels: int) -> None:
    kind = "RGBA" if channels == 4 else "RGB"
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 \
            or frame.shape[2] != channels:
        raise ValueError(f"frame {index} for {label} must be a uint8 {kind} array [H, W, {channels}], got "
                         f"{getattr(frame, 'dtype', type(frame).__name__)} {list(np.shape(frame))}")


class _Writer:
    """Shared life cycle of the writers: a checked target, a temporary twin, commit on close, discard on abort."""

    format: OutputFormat

    def __init__(self, path, inputs, what: str):
        self.output = paths.check_output(path, inputs, what=what)
        self.path = self.output.target
        self.label = f"{what} {self.output.given}"
        self.frame_count = 0
        self.closed = False
        self.ends_at: Fraction | None = None
        """Where the video ends on the source's clock when the frames stop before the source does (the time of
        the first frame left out): the sound is cut there. None: one frame's length after the last frame."""
        self._size = None
        self._temp = None

    @property
    def channels(self) -> int:
        return 4 if self.format.alpha else 3

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback) -> bool:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"{self.label} is closed")

    def _accept(self, frame) -> None:
        self._check_open()
        if isinstance(frame, YuvPlanes):
            if self.format.pix_fmt != "yuv420p":
                raise ValueError(f"frame {self.frame_count} for {self.label} is YUV planes, but {self.format.name} "
                                 "is not written from yuv420p; give uint8 RGB frames")
            size = (frame.height, frame.width)
        else:
            _check_frame(frame, self.label, self.frame_count, self.channels)
            size = frame.shape[:2]
        self._accept_size(size)

    def _accept_size(self, size: tuple) -> None:
        """Check a frame of ``size`` (H, W) against the first frame's (which sets it)."""
        if self._size is None:
            self._size = tuple(size)
        elif tuple(size) != tuple(self._size):
            raise ValueError(f"frame {self.frame_count} is {size[1]}x{size[0]} but {self.label} is "
                             f"{self._size[1]}x{self._size[0]} (set by its first frame)")

    def _finish(self) -> None:
        """Complete the temporary file (subclasses)."""

    def close(self) -> None:
        """Finish and move the output into place. Raises if no frame was written."""
        if self.closed:
            return
        if self.frame_count == 0:
            self.abort()
            raise ValueError(f"no frames were written to {self.output.given}; nothing saved")
        try:
            self._finish()
            paths.commit(self._temp, self.path)
        except BaseException:
            self.abort()
            raise
        self.closed = True

    def _release(self) -> None:
        """Close open handles before the temporary output is removed (subclasses)."""

    def abort(self) -> None:
        """Discard the output: close and delete the temporary file or folder."""
        self.closed = True
        self._release()
        if self._temp is not None:
            paths.discard(self._temp)


class VideoWriter(_Writer):
    """Video file writer in the format of ``path``'s extension (:mod:`.formats`); a context manager.

    ``write(frame, time)`` takes uint8 RGB [H, W, 3] frames (RGBA [H, W, 4] for
    the alpha formats of ``layer_only``), or, for the yuv420p formats,
    :class:`~.yuv.YuvPlanes` encoded as they are, and optional times in
    seconds from the video's start (default ``index / fps``), so variable
    frame rates are kept. The first frame fixes the size; 4:2:0 H.264/HEVC
    need even sizes, so odd RGB frames are padded by one edge row/column
    there. RGB colours are written as BT.709 (tagged); planes keep their own
    colour matrix, range, primaries and transfer tags (set by the first
    frame). ``audio`` (an :class:`~.audio.AudioCopy`) adds the input's sound,
    muxed in step with the frames.

    Nothing is written under ``path`` until :meth:`close` succeeds: frames go to
    a short hidden temporary file beside it, renamed over ``path`` at the end; an
    exception inside ``with`` (KeyboardInterrupt included) or :meth:`abort`
    removes it. ``path`` is checked at construction: it must not be one of
    ``inputs``, a folder, FIFO or device (see :func:`.paths.check_output`).
    """

    def __init__(self, path, fps=30, crf: int = 18, preset: str = "medium", *, layer_only: bool = False,
                 codec: str = "h264", inputs=(), audio=None, time_base: Fraction | None = None):
        self._rate = _check_rate(fps)
        low, high = int(CRF_RANGE.low), int(CRF_RANGE.high)
        if isinstance(crf, bool) or not isinstance(crf, (int, np.integer)) or not low <= crf <= high:
            raise ValueError(f"crf must be a whole number in {low}..{high} (lower is better quality), got {crf!r}")
        if preset not in X264_PRESETS:
            raise ValueError(f"preset {preset!r} is not an x264 preset; use one of {', '.join(X264_PRESETS)}")
        super().__init__(path, inputs, "video")
        self.format = fmt = choose_format(path, layer_only, codec)
        if fmt.container is None:
            raise ValueError(f"{self.output.given} names a folder; PNG sequences are written by PngSequenceWriter")
        self._time_base = Fraction(1, 100) if fmt.codec == "gif" else (time_base or 1 / self._rate)
        self._options = self._encoder_options(int(crf), preset)
        self._temp = paths.create_temp_file(self.path, self.label)
        try:
            self._container = av.open(self._temp, "w", format=fmt.container)
        except BaseException:
            paths.discard(self._temp)
            raise
        self._audio = audio
        self._stream = None
        self._padding = (0, 0)
        self._last_pts = -1
        self._palette = None
        self.frames_left_out = 0  # GIF frames due too soon after the last one (``GIF_LEAST_DELAY``)
        self._padded = None
        self._yuv = None
        self._origin = Fraction(0)
        self.end_time = Fraction(0)

    def _encoder_options(self, crf: int, preset: str) -> dict:
        options = dict(self.format.options)
        if self.format.codec in ("libx264", "libx265"):
            options.update(crf=str(crf), preset=preset)
        elif self.format.codec == "libvpx-vp9":
            options.update({"cpu-used": str(_VP9_SPEED[preset]), "deadline": "good"})
            if "lossless" not in options:
                options["crf"] = str(crf)
        return options

    def _start(self, height: int, width: int, planes: YuvPlanes | None = None) -> None:
        fmt = self.format
        self._padding = (height % 2, width % 2) if fmt.even else (0, 0)
        if any(self._padding):
            LOGGER.info("%s: %dx%d is odd; padding to %dx%d for %s", self.output.given, width, height,
                        width + self._padding[1], height + self._padding[0], fmt.pix_fmt)
        stream = self._container.add_stream(fmt.codec, rate=self._rate, options=self._options)
        stream.width = width + self._padding[1]
        stream.height = height + self._padding[0]
        stream.pix_fmt = fmt.pix_fmt
        stream.time_base = self._time_base
        stream.codec_context.time_base = self._time_base
        if fmt.codec_tag:
            stream.codec_context.codec_tag = fmt.codec_tag
        if fmt.codec == "libvpx-vp9":
            stream.codec_context.thread_count = os.cpu_count() or 1
        if fmt.codec == "libx264":  # PyAV asks for slice threads; x264's frame threads are much faster
            stream.codec_context.thread_type = "FRAME"
        if fmt.pix_fmt.startswith("yuv"):
            context = stream.codec_context
            context.colorspace, context.color_range = 1, 1  # BT.709, limited range
            context.color_primaries, context.color_trc = 1, 1
            if planes is not None:  # the source's own tags, so its colours are read back unchanged
                context.colorspace, context.color_range = planes.colorspace, 2 if planes.full_range else 1
                context.color_primaries, context.color_trc = planes.primaries, planes.transfer
        if fmt.codec == "gif":
            self._palette = _GifPalette(stream.width, stream.height, self._time_base)
        self._stream = stream
        if self._audio is not None:
            self._audio.attach(self._container, fmt, self._origin)

    def _video_frame(self, frame):
        """``frame`` as the encoder's pixel format; the caller's array is not kept once this returns
        (planes excepted: they are wrapped without a copy and kept until the encoder lets go)."""
        if isinstance(frame, YuvPlanes):
            return _planes_frame(frame)
        if any(self._padding):
            frame = self._pad(frame)
        layout = "rgba" if self.format.alpha else "rgb24"
        if self.takes_planes(*frame.shape[:2]):
            if self._yuv is None:
                self._yuv = Bt709Converter(*frame.shape[:2])
            # the encoders used here copy the picture in encode(), so one buffer serves every frame
            return av.VideoFrame.from_numpy_buffer(self._yuv.convert(frame), format="yuv420p")
        if not self.format.pix_fmt.startswith("yuv"):
            return av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format=layout)
        # converted straight from the caller's memory (no copy); the converted frame is FFmpeg's own
        image = av.VideoFrame.from_numpy_buffer(np.ascontiguousarray(frame), format=layout)
        return image.reformat(format=self.format.pix_fmt, dst_colorspace="itu709", dst_color_range="MPEG")

    def _pad(self, frame: np.ndarray) -> np.ndarray:
        """``frame`` with its last row/column repeated to an even size, in a buffer kept between frames."""
        height, width = frame.shape[:2]
        if self._padded is None:
            self._padded = np.empty((height + self._padding[0], width + self._padding[1], frame.shape[2]), np.uint8)
        padded = self._padded
        padded[:height, :width] = frame
        padded[:height, width:] = frame[:, -1:]
        padded[height:] = padded[height - 1:height]
        return padded

    def write(self, frame, time: Fraction | float | None = None) -> None:
        """Append one frame (RGB array or :class:`~.yuv.YuvPlanes`) shown at ``time`` seconds on the source's
        clock (default: frame index / fps).

        The first frame's time is the video's start (time 0), also for the audio.
        """
        self._accept(frame)
        self._append(self._size, time, lambda: self._video_frame(frame), frame if isinstance(frame, YuvPlanes) else None)

    def takes_planes(self, height: int, width: int) -> bool:
        """Whether :meth:`write_planes` takes frames of this size (I420 outputs, rows that pack, no padding)."""
        return self.format.pix_fmt == "yuv420p" and not height % 4 and not width % 2

    def write_planes(self, planes: np.ndarray, time: Fraction | float | None = None) -> None:
        """Append one frame given as I420 planes, as :meth:`write` would after converting it.

        ``planes`` is uint8 [H * 3 / 2, W]: Y, then U and V [H/2, W/2] row-packed,
        limited-range BT.709 (what :class:`Bt709Converter` makes); see :meth:`takes_planes`.
        """
        self._check_open()
        shape = getattr(planes, "shape", ())
        if not isinstance(planes, np.ndarray) or planes.dtype != np.uint8 or len(shape) != 2 or shape[0] % 3 \
                or not self.takes_planes(shape[0] * 2 // 3, shape[1]):
            raise ValueError(f"frame {self.frame_count} for {self.label} must be uint8 I420 planes [H * 3 / 2, W] "
                             f"with H a multiple of 4 and W even ({self.format.name}), got "
                             f"{getattr(planes, 'dtype', type(planes).__name__)} {list(shape)}")
        size = (shape[0] * 2 // 3, shape[1])
        self._accept_size(size)
        self._append(size, time, lambda: av.VideoFrame.from_numpy_buffer(planes, format="yuv420p"))

    def _append(self, size: tuple, time, picture, planes: YuvPlanes | None = None) -> None:
        """Time and encode one frame of ``size`` (H, W); ``picture()`` makes what :meth:`_encode` takes
        (the first frame's ``planes``, if it is given as planes, set the output's colour tags)."""
        if self._stream is None:
            self._origin = Fraction(0) if time is None else Fraction(time)
            self._start(*size, planes)
        seconds = Fraction(self.frame_count) / self._rate if time is None else Fraction(time) - self._origin
        pts = max(round(seconds / self._time_base), self._last_pts + 1)
        if self.format.codec == "gif" and self.frame_count and pts < self._last_pts + GIF_LEAST_DELAY:
            self._leave_out(seconds)
            return
        self._last_pts = pts
        self._encode(picture(), pts)
        self.frame_count += 1
        self.end_time = pts * self._time_base
        if self._audio is not None:
            self._audio.advance(self.end_time)

    def _leave_out(self, seconds: Fraction) -> None:
        """Skip a GIF frame due less than ``GIF_LEAST_DELAY`` after the last one kept (warned once)."""
        if not self.frames_left_out:
            LOGGER.warning("%s: a GIF shows at most %d frames a second (players hold shorter delays for 1/10 s), so "
                           "frames due sooner after the last one are left out, from %.3f s on; write .mp4 or .webm "
                           "to keep every frame", self.label, 100 // GIF_LEAST_DELAY, float(seconds))
        self.frames_left_out += 1
        self.frame_count += 1

    def _encode(self, image, pts: int) -> None:
        """Encode and mux one converted frame at ``pts`` (in the output's time base)."""
        image.pts, image.time_base = pts, self._time_base
        for encoded in (self._palette.apply(image) if self._palette else (image,)):
            self._container.mux(self._stream.encode(encoded))

    def _flush(self) -> None:
        """Mux what the encoder still holds."""
        if self._palette is not None:
            for image in self._palette.flush():
                self._container.mux(self._stream.encode(image))
        self._container.mux(self._stream.encode(None))

    def _finish(self) -> None:
        self._flush()
        if self._audio is not None:
            end = self.end_time + self._frame_duration() if self.ends_at is None else \
                max(self.end_time, Fraction(self.ends_at) - self._origin)
            self._audio.finish(end)
            self._audio.close()
        self._container.close()
        if self._yuv is not None:
            self._yuv.close()

    def _frame_duration(self) -> Fraction:
        return self.end_time / max(self.frame_count - 1, 1) if self.frame_count > 1 else 1 / self._rate

    def _release(self) -> None:
        if self._yuv is not None:
            self._yuv.close()
        if self._audio is not None:
            self._audio.close()
        try:
            self._container.close()
        except (av.error.FFmpegError, OSError) as error:
            LOGGER.debug("%s: closing an aborted video failed: %s", self.output.given, error)


@functools.cache
def _wraps_planes() -> bool:
    """Whether this PyAV wraps yuv420p planes held elsewhere (``VideoFrame.from_dlpack``, PyAV 17+)."""
    try:
        av.VideoFrame.from_dlpack([np.zeros((2, 2), np.uint8)] + [np.zeros((1, 1), np.uint8)] * 2, format="yuv420p")
    except (AttributeError, NotImplementedError, TypeError, ValueError):
        return False
    return True


def _planes_frame(planes: YuvPlanes):
    """A yuv420p ``av.VideoFrame`` of host copies of ``planes``: wrapped as they are where PyAV can (FFmpeg
    keeps them alive until the encoder, which copies the picture, lets go), else copied into FFmpeg's own."""
    arrays = [np.ascontiguousarray(to_numpy(plane)) for plane in (planes.y, planes.u, planes.v)]
    if _wraps_planes():
        return av.VideoFrame.from_dlpack(arrays, format="yuv420p")
    image = av.VideoFrame(planes.width, planes.height, "yuv420p")
    for array, plane in zip(arrays, image.planes):
        rows, width = array.shape
        np.frombuffer(plane, np.uint8).reshape(rows, -1)[:, :width] = array
    return image


def yuv_rows(matrix: str = "itu709", full_range: bool = False) -> np.ndarray:
    """float32 [3, 4]: RGB (0..255) -> Y, Cb, Cr (rows) of ``matrix`` (a name :func:`source_matrix` gives),
    with the offsets in column 3; limited range (Y 16..235, chroma 16..240) unless ``full_range``."""
    tag = next(tag for tag, name in _SWSCALE_MATRIX.items() if name == matrix)
    rows, offset = yuv_coefficients(tag, full_range)
    return np.hstack([rows / 255.0, offset[:, None]]).astype(np.float32)


class Bt709Converter:
    """RGB -> I420 (yuv420p, limited-range BT.709) into buffers kept between frames.

    The height must be a multiple of 4 and the width even, so the chroma planes
    pack into whole rows of the [H * 3 / 2, W] array FFmpeg takes.

    OpenCV does the arithmetic (SIMD) on row bands in parallel threads: luma
    from the full rows, chroma from the rows averaged over 2x2 blocks (the same
    as averaging the chroma, the transform being linear). FFmpeg's converter
    reads it back within 1 level. Call :meth:`close` to stop the threads.
    """

    ROWS = yuv_rows()

    def __init__(self, height: int, width: int, workers: int | None = None):
        self.height, self.width = height, width
        self.planes = np.empty((height * 3 // 2, width), np.uint8)
        self._yuv = np.empty((height, width, 3), np.uint8)
        self._half = np.empty((height // 2, width // 2, 3), np.uint8)
        self._half_yuv = np.empty((height // 2, width // 2, 3), np.uint8)
        quarter = self.planes[height:].reshape(2, height // 2, width // 2)
        self._luma, self._u, self._v = self.planes[:height], quarter[0], quarter[1]
        count = max(1, min(workers or os.cpu_count() or 1, height // 16))
        edges = np.linspace(0, height // 2, count + 1).astype(int) * 2  # even rows: whole chroma rows per band
        self._bands = [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]
        self._pool = ThreadPoolExecutor(len(self._bands), thread_name_prefix="trackoverlay-yuv") \
            if len(self._bands) > 1 else None

    def _band(self, rgb: np.ndarray, rows: tuple) -> None:
        lo, hi = rows
        half = slice(lo // 2, hi // 2)
        cv2.transform(rgb[lo:hi], self.ROWS, dst=self._yuv[lo:hi])
        cv2.extractChannel(self._yuv[lo:hi], 0, dst=self._luma[lo:hi])
        cv2.resize(rgb[lo:hi], (self.width // 2, (hi - lo) // 2), dst=self._half[half], interpolation=cv2.INTER_AREA)
        cv2.transform(self._half[half], self.ROWS, dst=self._half_yuv[half])
        cv2.extractChannel(self._half_yuv[half], 1, dst=self._u[half])
        cv2.extractChannel(self._half_yuv[half], 2, dst=self._v[half])

    def convert(self, rgb: np.ndarray) -> np.ndarray:
        """The I420 planes of uint8 RGB [H, W, 3] ``rgb``: Y [H, W], then U and V [H/2, W/2] each, row-packed."""
        if self._pool is None:
            self._band(rgb, self._bands[0])
        else:
            list(self._pool.map(lambda rows: self._band(rgb, rows), self._bands))
        return self.planes

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def flatten_layer(layer, output, crf: int = 18, preset: str = "veryfast") -> int:
    """Write the overlay layer ``layer`` (a video with alpha, such as ``layer_only``'s ProRes 4444) to ``output``
    as the layer premultiplied over black, in ``output``'s format, with its frame times and sound; returns the
    frames written. For containers that cannot hold the layer's codec or its alpha (MP4, WebM)."""
    with closing(AudioCopy(layer)) as sound, av.open(os.fspath(layer)) as container:
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate or 30
        with VideoWriter(output, fps=rate, crf=crf, preset=preset, inputs=(layer,), time_base=stream.time_base,
                         audio=sound if sound.present else None) as writer:
            for frame in container.decode(stream):
                rgba = frame.to_ndarray(format="rgba").astype(np.uint16)
                writer.write(((rgba[..., :3] * rgba[..., 3:] + 127) // 255).astype(np.uint8),
                             None if frame.pts is None else frame.pts * stream.time_base)
            return writer.frame_count


class _GifPalette:
    """A palette per frame (FFmpeg palettegen + paletteuse), so GIF colours stay close to the frames'."""

    def __init__(self, width: int, height: int, time_base: Fraction):
        graph = av.filter.Graph()
        source = graph.add_buffer(width=width, height=height, format="rgb24", time_base=time_base)
        split = graph.add("split")
        generate = graph.add("palettegen", "stats_mode=single:reserve_transparent=0")
        use = graph.add("paletteuse", "new=1:dither=sierra2_4a")
        sink = graph.add("buffersink")
        source.link_to(split)
        split.link_to(generate, 0, 0)
        split.link_to(use, 1, 0)
        generate.link_to(use, 0, 1)
        use.link_to(sink)
        graph.configure()
        self._graph = graph

    def _pull(self) -> list:
        frames = []
        while True:
            try:
                frames.append(self._graph.pull())
            except (av.error.BlockingIOError, av.error.EOFError):
                return frames

    def apply(self, image) -> list:
        self._graph.push(image)
        return self._pull()

    def flush(self) -> list:
        self._graph.push(None)
        return self._pull()


class PngSequenceWriter(_Writer):
    """A folder of ``frame_000000.png``, ... (RGB, or RGBA for ``layer_only``), written atomically.

    ``path`` names the folder (a trailing ``/``); it must be new or empty. The
    files are written into a hidden temporary folder beside it, renamed onto
    ``path`` only when :meth:`close` succeeds. Files are numbered by the frame
    index given to :meth:`write` (the source's frame number), so parts of a shot
    rendered separately keep their numbers.
    """

    def __init__(self, path, *, layer_only: bool = False, inputs=(), what: str = "PNG sequence"):
        path = os.fspath(path)
        if not paths.is_folder_spelling(path):
            path += os.sep
        super().__init__(path, inputs, what)
        self.format = choose_format(path, layer_only)
        self._temp = paths.create_temp_folder(self.path, self.label)

    def write(self, frame: np.ndarray, index: int | None = None) -> None:
        """Write one frame as ``frame_<index>.png`` (default: frames written so far)."""
        self._accept(frame)
        number = self.frame_count if index is None else index
        write_png(os.path.join(self._temp, f"frame_{number:06d}.png"), frame)
        self.frame_count += 1


def write_png(path, frame: np.ndarray) -> None:
    """Write a uint8 RGB [H, W, 3] or RGBA [H, W, 4] frame as PNG."""
    path = os.fspath(path)
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 \
            or frame.shape[2] not in (3, 4):
        raise ValueError(f"PNG frame for {path} must be uint8 [H, W, 3] or [H, W, 4], got "
                         f"{getattr(frame, 'dtype', type(frame).__name__)} {list(np.shape(frame))}")
    code = cv2.COLOR_RGB2BGR if frame.shape[2] == 3 else cv2.COLOR_RGBA2BGRA
    ok, data = cv2.imencode(".png", cv2.cvtColor(np.ascontiguousarray(frame), code))
    if not ok:
        raise ValueError(f"could not encode PNG for {path}")
    with open(path, "wb") as handle:
        handle.write(data.tobytes())
