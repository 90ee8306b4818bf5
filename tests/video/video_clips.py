"""Small videos made with PyAV for the video tests: any size, codec, rotation, frame times, audio or alpha.

Every frame carries its own index (a bright column at x = 3 * index, wrapping,
and a grey level of 40 + 9 * index in its top-left 4x4 corner), so tests can
tell which input frame an output frame came from.
"""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np

CORNER = 4


def index_frame(index: int, width: int, height: int, alpha: bool = False) -> np.ndarray:
    """The uint8 frame that marks ``index`` (RGB, or RGBA with alpha falling from left to right)."""
    frame = np.full((height, width, 3), 60, np.uint8)
    frame[:, (3 * index) % width] = 230
    frame[:CORNER, :CORNER] = (40 + 9 * index) % 256
    if not alpha:
        return frame
    ramp = np.linspace(255, 0, width).astype(np.uint8)
    return np.dstack([frame, np.broadcast_to(ramp, (height, width))])


def colour_frame(index: int, width: int, height: int, alpha: bool = False) -> np.ndarray:
    """Smooth red/green ramps, blue rising with ``index``, and a saturated square moving 2 px a frame (RGB)."""
    y, x = np.mgrid[0:height, 0:width]
    frame = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1),
                      np.full_like(x, (40 + 25 * index) % 256)], axis=-1).astype(np.uint8)
    side = max(4, min(width, height) // 4)
    left, top = (2 * index) % max(1, width - side), height // 3
    frame[top:top + side, left:left + side] = (230, 40, 90)
    return frame


def frame_index(frame: np.ndarray) -> int:
    """The index :func:`index_frame` marked (from the corner's grey level; frames < 24)."""
    return int(round((float(frame[:CORNER, :CORNER, :3].mean()) - 40) / 9))


def make_video(path, frames: int = 8, width: int = 64, height: int = 48, fps: int = 25, codec: str = "libx264",
               pix_fmt: str = "yuv420p", container: str | None = None, times=None, rotation: int | None = None,
               audio: str | None = None, channels: str = "5.1", audio_seconds: float | None = None,
               options: dict | None = None, alpha: bool = False, picture=index_frame):
    """Write a test video; returns ``path``.

    ``times`` (seconds per frame) makes a variable-frame-rate clip; ``rotation``
    adds a display matrix (counter-clockwise degrees); ``audio`` (an encoder
    such as "aac" or "pcm_s16le") adds a 440 Hz tone in ``channels`` lasting
    ``audio_seconds`` (default: the video's length). ``picture(index, width,
    height, alpha)`` draws each frame (default: :func:`index_frame`).
    """
    output = av.open(str(path), "w", format=container)
    stream = output.add_stream(codec, rate=fps, options=options or {})
    stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
    base = Fraction(1, 1000) if times is not None else Fraction(1, fps)
    stream.codec_context.time_base = base
    if rotation is not None:
        stream.set_display_rotation(rotation)
    sound = None
    if audio is not None:
        sound = output.add_stream(audio, rate=48000, layout=channels)
    output.start_encoding()  # writes the header, so a clip of 0 frames is still a file
    for index in range(frames):
        image = av.VideoFrame.from_ndarray(picture(index, width, height, alpha), format="rgba" if alpha
                                           else "rgb24")
        image.pts = round(Fraction(times[index]) / base) if times is not None else index
        image.time_base = base
        output.mux(stream.encode(image))
    output.mux(stream.encode(None))
    if sound is not None:
        seconds = (times[-1] + 1 / fps if times is not None else frames / fps) if audio_seconds is None \
            else audio_seconds
        _tone(output, sound, seconds)
    output.close()
    return path


def _tone(output, stream, seconds: float) -> None:
    rate, block = 48000, 1024
    count = len(stream.codec_context.layout.channels)
    total = int(round(seconds * rate))
    for start in range(0, total, block):
        size = min(block, total - start)
        t = (np.arange(start, start + size) / rate).astype(np.float32)
        samples = np.tile(0.2 * np.sin(2 * np.pi * 440 * t), (count, 1)).astype(np.float32)
        frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout=stream.codec_context.layout)
        frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
        output.mux(stream.encode(frame))
    output.mux(stream.encode(None))


def streams(path) -> dict:
    """What a file holds: per stream type, (codec name, pix_fmt or channel count, duration in seconds)."""
    result = {}
    with av.open(str(path)) as container:
        for stream in container.streams:
            context = stream.codec_context
            if stream.duration is not None:
                seconds = float(stream.duration * stream.time_base)
            else:
                seconds = None
            detail = context.pix_fmt if stream.type == "video" else (
                len(context.layout.channels) if stream.type == "audio" else None)
            result.setdefault(stream.type, (context.name, detail, seconds))
    return result


def decoded(path, codec: str | None = None, fmt: str = "rgb24"):
    """Every frame of the first video stream as arrays (``codec`` forces a decoder, e.g. libvpx-vp9 for alpha)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        if codec is None:
            frames = list(container.decode(stream))
        else:
            context = av.CodecContext.create(codec, "r")
            context.extradata = stream.codec_context.extradata
            frames = [frame for packet in container.demux(stream) for frame in context.decode(packet)]
        return [frame.to_ndarray(format=fmt) for frame in frames]


def frame_times(path) -> list:
    """Presentation times (seconds) of the first video stream's frames."""
    with av.open(str(path)) as container:
        return sorted(float(frame.time) for frame in container.decode(video=0))


def audio_seconds(path) -> float:
    """The decoded length of the first audio stream in seconds (samples / rate)."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return samples / stream.codec_context.sample_rate


def video_seconds(path) -> float:
    """Last frame time plus one frame duration (average rate) of the first video stream."""
    times = frame_times(path)
    with av.open(str(path)) as container:
        rate = container.streams.video[0].average_rate
    return times[-1] + 1 / float(rate)
