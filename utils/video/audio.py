"""The input's sound, carried into the output in step with the rendered frames.

The first audio stream of the input is copied packet for packet when the
output container takes its codec (:mod:`.formats` lists them, and the muxer
must write a header with it), else decoded and re-encoded (AAC for MP4/MOV,
Opus for WebM) in a channel layout the encoder takes: the input's own, the
standard one for its channel count where the file names none (PCM in AVI or
MKV), else a stereo downmix. Only the span of the rendered frames is kept:
``origin`` (the first rendered frame's time) becomes time 0, and sound after
the last frame's end is dropped, so ``--max-frames`` and frame ranges keep
sync. Copied audio is cut at packet boundaries (AAC: 1024 samples, 21 ms at
48 kHz) with one packet of pre-roll before the start (the decoder's priming);
re-encoded audio is cut to the sample.
"""

from __future__ import annotations

import contextlib
import io
import os
from fractions import Fraction

import av
import numpy as np

from ..core.log import LOGGER

_LEAVE_OUT = "leave the sound out to write the video (--no-audio; keep_audio off in the node)"


class AudioCopy:
    """The first audio stream of ``path`` (nothing if it has none), from the video's first frame on.

    Use: :meth:`attach` to an output container before its first packet, then
    :meth:`advance` after each video frame, :meth:`finish` with the video's end
    time, and :meth:`close` (also safe after errors).
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self.origin = Fraction(0)
        self._input = av.open(self.path, "r")
        streams = self._input.streams.audio
        self._source = streams[0] if streams else None
        self._output = None
        self._container = None
        self._packets = None
        self._pending = None
        self._copy = False
        self._samples = 0
        self.codec = None if self._source is None else self._source.codec_context.codec.canonical_name
        self.mode = "none"

    @property
    def present(self) -> bool:
        return self._source is not None

    def attach(self, container, fmt, origin: Fraction = Fraction(0)) -> None:
        """Add the audio stream to ``container`` (an output of format ``fmt``), copying when it can.

        ``origin`` (seconds on the input's clock) becomes the output's time 0.
        """
        self.origin = Fraction(origin)
        if self._source is None:
            return
        if fmt.audio_encoder is None:
            LOGGER.warning("%s: audio (%s) not kept: %s outputs have no sound", self.path, self.codec, fmt.name)
            return
        source = self._source
        if self.codec in fmt.audio_copy and _muxer_takes(fmt.container, source):
            self._output = container.add_stream_from_template(source)
            self._copy, self.mode = True, "copied"
        else:
            rates = av.Codec(fmt.audio_encoder, "w").audio_rates
            rate = source.codec_context.sample_rate or 48000
            if rates and rate not in rates:
                rate = 48000
            layout = self._encoder_layout(fmt, rate)
            self._output = container.add_stream(fmt.audio_encoder, rate=rate, layout=layout)
            self._output.codec_context.time_base = Fraction(1, rate)
            self.mode = f"re-encoded to {self._output.codec_context.name}"
        self._container = container
        if self.origin > 0:
            self._input.seek(int(self.origin / source.time_base), stream=source, backward=True)
        self._packets = self._input.demux(source)
        LOGGER.info("audio (%s) %s", self.codec, self.mode)

    def _encoder_layout(self, fmt, rate: int) -> av.AudioLayout:
        """The first layout ``fmt``'s audio encoder opens with: the source's own, the standard one for its
        channel count (when the source names none, or the encoder refuses its own), else stereo (a downmix)."""
        own = self._source.codec_context.layout
        named = all(channel.name != "NONE" for channel in own.channels)
        try:
            standard = av.AudioLayout(f"{own.nb_channels}c")  # FFmpeg's default, as its resampler reads them
        except ValueError:
            standard = None
        if not named and standard is None:
            raise ValueError(f"{self.path}: its audio ({self.codec}) has {own.nb_channels} channels in no known "
                             f"layout, which {fmt.audio_encoder} for {fmt.name} cannot take; {_LEAVE_OUT}")
        candidates = [own] if named else []
        candidates += [layout for layout in (standard, av.AudioLayout("stereo")) if layout is not None]
        for layout in candidates:
            if _encoder_opens(fmt.audio_encoder, layout, rate):
                if layout.nb_channels != own.nb_channels:
                    LOGGER.warning("%s: audio (%s, %s) downmixed to %s: %s takes no %d-channel layout", self.path,
                                   self.codec, own.name, layout.name, fmt.audio_encoder, own.nb_channels)
                return layout
        raise ValueError(f"{self.path}: its audio ({self.codec}, {own.name}, {rate} Hz) cannot be re-encoded "
                         f"with {fmt.audio_encoder} for {fmt.name}; {_LEAVE_OUT}")

    @contextlib.contextmanager
    def _writing(self):
        """FFmpeg's errors inside as ValueErrors naming the sound and the fix (file system errors stay as they are)."""
        try:
            yield
        except av.error.FFmpegError as error:
            if isinstance(error, OSError):
                raise
            raise ValueError(f"{self.path}: writing its audio ({self.codec}, {self.mode}) to the output failed: "
                             f"{error.strerror or error}; {_LEAVE_OUT}") from error

    def _next_packet(self):
        if self._pending is not None:
            packet, self._pending = self._pending, None
            return packet
        try:
            for packet in self._packets:
                if packet.size and packet.pts is not None:
                    return packet
        except av.error.FFmpegError as error:
            LOGGER.warning("%s: audio stopped early: %s", self.path, error)
        return None

    def advance(self, until: Fraction, final: bool = False) -> None:
        """Mux the sound that ends by ``until`` seconds (output time); ``final``: all that starts before it."""
        if self._output is None:
            return
        base = Fraction(self._source.time_base)
        while True:
            packet = self._next_packet()
            if packet is None:
                return
            start = packet.pts * base - self.origin
            if start >= until or (not final and start + (packet.duration or 0) * base > until):
                self._pending = packet
                return
            if self._copy:
                self._mux_copy(packet, start, base)
            else:
                self._encode(packet, until if final else None)

    def _mux_copy(self, packet, start: Fraction, base: Fraction) -> None:
        length = (packet.duration or 0) * base
        if start + 2 * length <= 0:  # before the origin (one packet of pre-roll is kept)
            return
        shift = round(self.origin / base)
        packet.pts -= shift
        if packet.dts is not None:
            packet.dts -= shift
        packet.stream = self._output
        with self._writing():
            self._container.mux(packet)

    def _encode(self, packet, end: Fraction | None) -> None:
        try:
            frames = packet.decode()
        except av.error.FFmpegError as error:
            LOGGER.warning("%s: an audio packet failed to decode (%s); skipped", self.path, error)
            return
        for frame in frames:
            self._encode_frame(frame, end)

    def _encode_frame(self, frame, end: Fraction | None) -> None:
        rate = frame.sample_rate
        if frame.pts is None or frame.time_base is None:
            start = Fraction(self._samples, rate)
        else:
            start = frame.pts * Fraction(frame.time_base) - self.origin
        first = max(0, round(-start * rate))
        last = frame.samples if end is None else min(frame.samples, round((end - start) * rate))
        if last <= first:
            return
        if first or last < frame.samples:
            samples = frame.to_ndarray()
            planar = frame.format.is_planar
            part = samples[:, first:last] if planar else samples[:, first * len(frame.layout.channels):
                                                                  last * len(frame.layout.channels)]
            trimmed = av.AudioFrame.from_ndarray(np.ascontiguousarray(part), format=frame.format.name,
                                                 layout=frame.layout)
            trimmed.sample_rate = rate
            frame = trimmed
        pts = max(self._samples, round(start * rate) + first)  # keeps gaps, never goes back
        frame.pts, frame.time_base = pts, Fraction(1, rate)
        self._samples = pts + last - first
        with self._writing():
            self._container.mux(self._output.encode(frame))

    def finish(self, end: Fraction) -> None:
        """Mux the rest of the sound up to ``end`` seconds (the video's end) and flush the encoder."""
        if self._output is None:
            return
        self.advance(end, final=True)
        if not self._copy:
            with self._writing():
                self._container.mux(self._output.encode(None))

    def close(self) -> None:
        """Close the input file (safe to call more than once)."""
        self._input.close()


def _muxer_takes(container_format: str, source) -> bool:
    """Whether FFmpeg's ``container_format`` muxer writes a header holding a copy of the audio stream ``source``."""
    probe = av.open(io.BytesIO(), "w", format=container_format)
    try:
        probe.add_stream_from_template(source)
        probe.start_encoding()
    except (av.error.FFmpegError, ValueError):
        return False
    finally:
        probe.close()
    return True


def _encoder_opens(encoder: str, layout: av.AudioLayout, rate: int) -> bool:
    """Whether the audio ``encoder`` opens for ``layout`` at ``rate`` Hz."""
    context = av.CodecContext.create(encoder, "w")
    context.layout, context.sample_rate = layout, rate
    context.format = context.codec.audio_formats[0]
    context.time_base = Fraction(1, rate)
    try:
        context.open()
    except av.error.FFmpegError:
        return False
    return True
