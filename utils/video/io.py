"""Streaming video in and out with PyAV (one frame in memory at a time), and PNG out."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Iterator

import av
import cv2
import numpy as np

from ..core.checks import Range
from ..core.log import LOGGER

X264_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")
CRF_RANGE = Range(0, 51)  # x264 quality: lower is better


@dataclass(frozen=True)
class VideoInfo:
    """What a video file says about itself.

    ``frame_count`` is the container's count, or an estimate from duration x fps
    when it has none (0 when neither is known); ``fps`` is 0 when unknown.
    """

    width: int
    height: int
    fps: Fraction
    frame_count: int


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
        container.close()
        raise ValueError(f"{path} has no video stream")
    return container, container.streams.video[0]


def probe_video(path) -> VideoInfo:
    """Size, frame rate and (estimated) frame count of a video file."""
    container, stream = _open_video(path)
    with container:
        fps = stream.average_rate or stream.guessed_rate or Fraction(0)
        count = stream.frames
        if not count and fps:
            if stream.duration is not None and stream.time_base is not None:
                seconds = stream.duration * stream.time_base
            else:
                seconds = (container.duration or 0) / av.time_base
            count = round(seconds * fps)
        return VideoInfo(stream.codec_context.width, stream.codec_context.height, Fraction(fps), int(count))


def _decoded_frames(packets: Iterable, path: str) -> Iterator[np.ndarray]:
    """RGB uint8 frames from demuxed packets; bad frames are logged and skipped.

    A packet that fails to decode counts as one frame (its index, in decode
    order, is logged); a demuxer error ends the stream with a warning.
    """
    index = 0
    packets = iter(packets)
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            return
        except av.error.FFmpegError as error:
            LOGGER.warning("%s: stopped reading after frame %d: %s", path, index, error)
            return
        try:
            frames = packet.decode()
        except av.error.FFmpegError as error:
            LOGGER.warning("%s: frame %d failed to decode (%s); skipped", path, index, error)
            index += 1
            continue
        for frame in frames:
            try:
                image = frame.to_ndarray(format="rgb24")
            except (av.error.FFmpegError, ValueError) as error:
                LOGGER.warning("%s: frame %d failed to convert (%s); skipped", path, index, error)
            else:
                yield image
            index += 1


class VideoFrames:
    """An iterator of decoded frames that owns the open file (see :func:`iter_video_frames`).

    Unlike a generator's, :meth:`close` releases the file even before the first frame was pulled.
    """

    def __init__(self, container, stream, path: str):
        self._container = container
        self._frames = _decoded_frames(container.demux(stream), path)

    def __iter__(self) -> "VideoFrames":
        return self

    def __next__(self) -> np.ndarray:
        try:
            return next(self._frames)
        except StopIteration:
            self.close()
            raise

    def close(self) -> None:
        """Stop decoding and close the file (safe to call more than once)."""
        self._frames.close()
        self._container.close()

    __del__ = close  # dropped unfinished: release the file now, as a generator's cleanup would


def iter_video_frames(path) -> VideoFrames:
    """Decode ``path`` one frame at a time: uint8 RGB [H, W, 3] per frame.

    The file is opened (and checked) at call time; it is closed when the
    iterator is exhausted or closed (started or not).
    """
    container, stream = _open_video(path)
    stream.thread_type = "AUTO"
    return VideoFrames(container, stream, os.fspath(path))


def _create_part_file(folder: str, name: str) -> str:
    """Create an empty ``.NAME.XXXXXXXX.part`` file in ``folder`` (permissions follow the umask)."""
    while True:
        path = os.path.join(folder or ".", f".{name}.{secrets.token_hex(4)}.part")
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            return path
        except FileExistsError:
            continue


class VideoWriter:
    """H.264 (libx264, yuv420p) MP4 writer; a context manager.

    The first frame fixes the size. yuv420p needs even sizes, so odd widths or
    heights are padded by one row/column repeating the edge (the file is then
    one pixel larger). Frames go to a temporary file beside ``path``, renamed to
    ``path`` only when :meth:`close` succeeds; on an exception (KeyboardInterrupt
    included) inside ``with``, or :meth:`abort`, the temporary file is removed
    and nothing exists under ``path``. The folder is checked at construction.
    """

    def __init__(self, path, fps=30, crf: int = 18, preset: str = "medium"):
        self.path = os.path.abspath(os.fspath(path))
        try:
            self._rate = Fraction(fps).limit_denominator(1_000_000)
        except (TypeError, ValueError):
            raise ValueError(f"fps must be a number > 0, got {fps!r}") from None
        if self._rate <= 0:
            raise ValueError(f"fps must be > 0, got {fps!r}")
        if not CRF_RANGE.low <= crf <= CRF_RANGE.high:
            raise ValueError(f"crf must lie in {CRF_RANGE.low}..{CRF_RANGE.high} (lower is better quality), got {crf}")
        if preset not in X264_PRESETS:
            raise ValueError(f"preset {preset!r} is not an x264 preset; use one of {', '.join(X264_PRESETS)}")
        folder, name = os.path.split(self.path)
        if os.path.isdir(self.path):
            raise IsADirectoryError(f"cannot write video {self.path}: it is a folder")
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"cannot write video {self.path}: folder {folder} does not exist")
        try:
            self._temp = _create_part_file(folder, name)
        except OSError as error:
            raise PermissionError(f"cannot write video {self.path}: folder {folder} is not writable "
                                  f"({error.strerror})") from None
        self._options = {"crf": str(crf), "preset": preset}
        try:
            self._container = av.open(self._temp, "w", format="mp4")
        except BaseException:
            os.remove(self._temp)
            raise
        self._stream = None
        self._size = None
        self._padding = (0, 0)
        self.frame_count = 0
        self.closed = False

    def __enter__(self) -> "VideoWriter":
        return self

    def __exit__(self, exc_type, exc, traceback) -> bool:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    def _start(self, height: int, width: int) -> None:
        self._size = (height, width)
        self._padding = (height % 2, width % 2)
        if any(self._padding):
            LOGGER.info("%s: %dx%d is odd; padding to %dx%d for yuv420p", self.path, width, height,
                        width + self._padding[1], height + self._padding[0])
        stream = self._container.add_stream("libx264", rate=self._rate, options=self._options)
        stream.width = width + self._padding[1]
        stream.height = height + self._padding[0]
        stream.pix_fmt = "yuv420p"
        self._stream = stream

    def write(self, frame: np.ndarray) -> None:
        """Append one uint8 RGB [H, W, 3] frame."""
        if self.closed:
            raise ValueError(f"video writer for {self.path} is closed")
        if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 \
                or frame.shape[2] != 3:
            raise ValueError(f"frame {self.frame_count} for {self.path} must be a uint8 RGB array "
                             f"[H, W, 3], got {getattr(frame, 'dtype', type(frame).__name__)} "
                             f"{list(np.shape(frame))}")
        if self._stream is None:
            self._start(*frame.shape[:2])
        elif frame.shape[:2] != self._size:
            raise ValueError(f"frame {self.frame_count} is {frame.shape[1]}x{frame.shape[0]} but video "
                             f"{self.path} is {self._size[1]}x{self._size[0]} (set by its first frame)")
        if any(self._padding):
            frame = np.pad(frame, ((0, self._padding[0]), (0, self._padding[1]), (0, 0)), mode="edge")
        video_frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
        video_frame.pts = self.frame_count
        video_frame.time_base = 1 / self._rate
        self._container.mux(self._stream.encode(video_frame))
        self.frame_count += 1

    def close(self) -> None:
        """Finish the file and move it to ``path``. Raises if no frame was written."""
        if self.closed:
            return
        if self.frame_count == 0:
            self.abort()
            raise ValueError(f"no frames were written to {self.path}; nothing saved")
        try:
            self._container.mux(self._stream.encode(None))
            self._container.close()
            os.replace(self._temp, self.path)
        except BaseException:
            self.abort()
            raise
        self.closed = True

    def abort(self) -> None:
        """Discard the video: close and delete the temporary file."""
        self.closed = True
        try:
            self._container.close()
        except (av.error.FFmpegError, OSError) as error:
            LOGGER.debug("%s: closing an aborted video failed: %s", self.path, error)
        if os.path.exists(self._temp):
            os.remove(self._temp)


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
