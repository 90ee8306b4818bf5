"""NVDEC decoding and NVENC encoding through PyNvVideoCodec, an optional extra found at run time (like CuPy).

With NVDEC a video is decoded straight into GPU memory (NV12) and turned into
RGB there, so the GPU renderer draws on it with no host copy of the input.
With NVENC the drawn frames become NV12 on the GPU and are encoded there; only
the compressed packets come back, muxed by PyAV with the input's audio. A
frame crosses the bus only where it must: x264 takes host I420 planes (made on
the GPU, half the bytes of RGB), PNGs and point detection take RGB, each
downloaded once into a pinned buffer kept between frames.

All of it is optional. Without PyNvVideoCodec or a GPU, or for a file the
NVDEC path does not take (8-bit 4:2:0, even size, progressive, a codec NVDEC
decodes), PyAV decodes; where NVENC is missing (data-centre GPUs such as the
H100 have NVDEC but no NVENC) or cannot start, x264 encodes. Each fallback
logs its reason at INFO.

Example::

    frames = open_frames("clip.mp4", decoder="nvdec")   # NvdecFrames, or PyAV's VideoFrames
    for item in frames.timed():                          # item.image: CuPy uint8 RGB [H, W, 3]
        ...
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Iterator, NamedTuple

import av
import numpy as np

from ..core.arrays import array_module, to_numpy
from ..core.cuda import pinned_array
from ..core.log import LOGGER
from ..raster.backend import probe_gpu
from .formats import choose_format
from .io import (
    DecodedFrame,
    DecodeStats,
    PngSequenceWriter,
    VideoWriter,
    iter_video_frames,
    presentation_times,
    probe_video,
    source_matrix,
    start_timestamp,
    yuv_rows,
)
from .paths import is_folder_spelling

DECODERS = ("auto", "nvdec", "cpu")
ENCODERS = ("auto", "nvenc", "cpu")
NVDEC_CODECS = frozenset({"h264", "hevc", "av1", "vp8", "vp9", "mpeg1video", "mpeg2video", "mpeg4", "vc1"})
NVDEC_PIXEL_FORMATS = frozenset({"yuv420p", "yuvj420p"})  # 8-bit 4:2:0: NV12 out of NVDEC
INSTALL_HINT = "pip install 'track-overlay[nvcodec]'"
_BATCH = 4  # frames per NVDEC call; each is copied out before the next call reuses the decoder's buffers
_NVENC_PRESETS = {"ultrafast": "P1", "superfast": "P1", "veryfast": "P2", "faster": "P3", "fast": "P4",
                  "medium": "P5", "slow": "P6", "slower": "P7", "veryslow": "P7"}
_KEY_PICTURES = frozenset({2, 3})  # NV_ENC_PIC_TYPE_I and _IDR
_GOP = 250  # frames between NVENC keyframes (x264's default)


class NvcodecUnavailable(RuntimeError):
    """NVDEC or NVENC cannot do this work here; the message says why (the fallbacks log it)."""


def _describe(error: BaseException) -> str:
    """``Type: first line of the message`` (PyNvVideoCodec's messages run to pages of advice)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


@functools.lru_cache(maxsize=1)
def _library():
    """(the PyNvVideoCodec module, "") when it loads and CuPy can use a GPU, else (None, the reason)."""
    chatter = logging.getLogger("PyNvVideoCodec")  # its import logs driver versions, and pages of advice on failure
    muted, chatter.disabled = chatter.disabled, True
    try:
        import PyNvVideoCodec as nvc
    except ModuleNotFoundError as error:
        if error.name != "PyNvVideoCodec":
            return None, f"PyNvVideoCodec does not load ({_describe(error)})"
        return None, f"PyNvVideoCodec is not installed ({INSTALL_HINT})"
    except Exception as error:  # noqa: BLE001 - a broken install or a driver without NVDEC/NVENC raises anything
        return None, f"PyNvVideoCodec does not load ({_describe(error)})"
    finally:
        chatter.disabled = muted
    usable, facts = probe_gpu()
    if not usable:
        return None, str(facts)
    return nvc, ""


_NO_ENCODER = ("NV_ENC_ERR_NO_ENCODE_DEVICE", "NV_ENC_ERR_UNSUPPORTED_DEVICE", "PyNvEncoderCaps")
"""NVENC's errors for a GPU without the encoder (data-centre GPUs): a start that fails so is not tried again.
PyNvVideoCodec 2.2 on an H100 fails its query of the encoder's capabilities ("PyNvEncoderCaps : ")."""
_nvenc_absent: dict = {}  # codec -> why this process's GPU has no NVENC (a failed start costs about 0.4 s)


def _gpu_arrays():
    """The array module of GPU frames (CuPy)."""
    import cupy

    return cupy


@contextlib.contextmanager
def _cuda_context_kept():
    """Keep this thread's current CUDA context across a PyNvVideoCodec call.

    Creating a decoder or an encoder may make a context of PyNvVideoCodec's
    own current, and a failed NVENC start leaves it so; CuPy's streams and
    memory then raise CUDA_ERROR_INVALID_HANDLE. The context current before
    the call is made current again after it.
    """
    try:
        from cupy.cuda import driver
    except ImportError:
        yield
        return
    before = driver.ctxGetCurrent()
    try:
        yield
    finally:
        if driver.ctxGetCurrent() != before:
            driver.ctxSetCurrent(before)


@functools.lru_cache(maxsize=1)
def probe_nvdec() -> tuple[bool, str]:
    """(True, what decodes) when NVDEC can decode into GPU memory here, else (False, the reason, logged once)."""
    nvc, reason = _library()
    if nvc is not None:
        try:
            with _cuda_context_kept():
                nvc.CreateDecoder(gpuid=0, codec=nvc.cudaVideoCodec.H264, usedevicememory=True)
            return True, f"PyNvVideoCodec {getattr(nvc, '__version__', '')}".strip()
        except Exception as error:  # noqa: BLE001 - PyNvVideoCodec's errors have no common base
            reason = f"NVDEC cannot start a decoder ({_describe(error)})"
    LOGGER.info("NVDEC is not used: %s", reason)
    return False, reason


def choose_decoder(requested: str = "auto", *, gpu_renderer: bool, host_pixels: bool,
                   host_encoder: Callable[[], str] = str) -> tuple[str, str]:
    """Resolve ``auto``/``nvdec``/``cpu`` to ``"nvdec"`` or ``"cpu"``, with the reason.

    ``auto`` takes NVDEC when it is there, the GPU renderer draws, nothing
    reads the pixels on the host (point detection does) and NVENC encodes
    (``host_encoder()``, asked only then, says why the encoder would take
    host frames, or "": see :func:`nvenc_writes`): the frames then never
    leave the GPU. When they go back to the host for x264 anyway, decoding
    on the CPU into YUV planes is faster (H100, 1080p with a 100-point track
    file: 126 against 84 fps). ``nvdec`` raises ``RuntimeError`` with the
    reason and the fix when NVDEC is not there.
    """
    if requested not in DECODERS:
        raise ValueError(f"decoder {requested!r} is not one of {', '.join(DECODERS)}")
    if requested == "cpu":
        return "cpu", "requested"
    if requested == "auto" and not gpu_renderer:
        return "cpu", "the CPU renderer draws on host frames"
    if requested == "auto" and host_pixels:
        return "cpu", "point detection reads the frames on the host"
    if requested == "auto" and (why := host_encoder()):
        return "cpu", f"the encoder takes host frames ({why})"
    available, facts = probe_nvdec()
    if available:
        return "nvdec", "requested" if requested == "nvdec" else f"decodes into GPU memory with {facts}"
    if requested == "nvdec":
        raise RuntimeError(f"decoder 'nvdec' was requested but {facts}. NVDEC needs an NVIDIA GPU, CuPy and the "
                           "nvcodec extra; choose decoder 'cpu' where they are missing.")
    return "cpu", facts


# -- colour: NV12 <-> RGB, written once for NumPy and CuPy -------------------------------------------------------

@functools.lru_cache(maxsize=16)
def _from_yuv(matrix: str, full_range: bool) -> tuple:
    """(offsets [3], rows [3, 3]) that make RGB of Y, Cb, Cr: RGB = rows @ (YCbCr - offsets)."""
    rows = yuv_rows(matrix, full_range).astype(np.float64)
    return tuple(rows[:, 3].tolist()), np.linalg.inv(rows[:, :3]).tolist()


def nv12_to_rgb(luma, chroma, matrix: str = "itu709", full_range: bool = False):
    """uint8 RGB [H, W, 3] of NV12 planes (NumPy or CuPy): luma [H, W] and interleaved Cb, Cr [H/2, W/2, 2].

    Each chroma sample covers its 2x2 block, as in FFmpeg's own conversion.
    Values are rounded exactly; FFmpeg's fast converter (PyAV's frames,
    :func:`~.io.frame_to_rgb`) runs 1 to 3 levels lower on colours.
    """
    xp = array_module(luma)
    height, width = luma.shape
    offsets, rows = _from_yuv(matrix, full_range)
    y = (luma.astype(xp.float32) - offsets[0]).reshape(height // 2, 2, width // 2, 2)
    cb = (chroma[..., 0].astype(xp.float32) - offsets[1])[:, None, :, None]
    cr = (chroma[..., 1].astype(xp.float32) - offsets[2])[:, None, :, None]
    rgb = xp.empty((height, width, 3), xp.uint8)
    for channel, (from_y, from_cb, from_cr) in enumerate(rows):
        value = y * from_y + cb * from_cb + cr * from_cr
        rgb[..., channel] = xp.clip(xp.rint(value), 0, 255).reshape(height, width)
    return rgb


def rgb_to_yuv420(rgb, matrix: str = "itu709"):
    """Limited-range uint8 planes (Y [H, W], Cb [H/2, W/2], Cr [H/2, W/2]) of RGB [H, W, 3] of even size.

    NumPy or CuPy. Chroma comes from each 2x2 block's mean, as
    :class:`~.io.Bt709Converter` makes it (within 1 level).
    """
    xp = array_module(rgb)
    height, width = rgb.shape[:2]
    rows = yuv_rows(matrix)
    values = rgb.astype(xp.float32)
    half = values.reshape(height // 2, 2, width // 2, 2, 3).mean(axis=(1, 3))

    def plane(source, row):
        mixed = source[..., 0] * float(row[0]) + source[..., 1] * float(row[1]) + source[..., 2] * float(row[2])
        return xp.clip(xp.rint(mixed + float(row[3])), 0, 255).astype(xp.uint8)

    return plane(values, rows[0]), plane(half, rows[1]), plane(half, rows[2])


def pack_yuv420(planes, out, interleaved: bool):
    """``planes`` (Y, Cb, Cr) into ``out`` uint8 [H * 3 / 2, W]: NV12 (``interleaved`` CbCr) or I420 (Cb then Cr)."""
    luma, cb, cr = planes
    height, width = luma.shape
    out[:height] = luma
    chroma = out[height:].reshape((height // 2, width // 2, 2) if interleaved else (2, height // 2, width // 2))
    if interleaved:
        chroma[..., 0], chroma[..., 1] = cb, cr
    else:
        chroma[0], chroma[1] = cb, cr
    return out


def _lane(xp):
    """A CUDA stream of our own (non-blocking, so our copies overlap the renderer's), or None for NumPy."""
    return None if xp is np else xp.cuda.Stream(non_blocking=True)


@contextlib.contextmanager
def _on(lane):
    """Run the block's GPU work on ``lane`` and wait for it (frames then cross threads finished)."""
    if lane is None:
        yield
        return
    with lane:
        yield
    lane.synchronize()


# -- NVDEC ------------------------------------------------------------------------------------------------------

_MAX_TIME_SHIFT = Fraction(1)
"""Seconds NVDEC's frame times may sit off PyAV's (an edit list's start delay) before the NVDEC path is refused."""


class DevicePlanes(NamedTuple):
    """One upright NV12 frame on the GPU: luma [H, W], interleaved chroma [H/2, W/2, 2], its index and time
    (seconds), and the YUV matrix and range that make it RGB (see :func:`nv12_to_rgb`)."""

    luma: object
    chroma: object
    index: int
    time: Fraction
    matrix: str
    full_range: bool

    def rgb(self):
        """uint8 RGB [H, W, 3] in the planes' array module."""
        return nv12_to_rgb(self.luma, self.chroma, self.matrix, self.full_range)


@dataclass(frozen=True)
class _Layout:
    """What PyAV says of the frames NVDEC will decode: coded size, turns to show them upright, colour, clock."""

    width: int
    height: int
    turns: int
    matrix: str
    full_range: bool
    time_base: Fraction
    first_pts: int


def _inspect(path: str, start: int) -> _Layout:
    """The frames' layout from PyAV (one frame decoded); NvcodecUnavailable when the NVDEC path does not take them."""
    info = probe_video(path)
    with av.open(path) as container:
        stream = container.streams.video[0]
        codec = stream.codec_context.name
        if codec not in NVDEC_CODECS:
            raise NvcodecUnavailable(f"its video is {codec}, which the NVDEC path does not decode")
        try:
            frame = next(container.decode(stream))
        except (StopIteration, av.error.FFmpegError):
            raise NvcodecUnavailable("its first frame does not decode") from None
    if frame.format.name not in NVDEC_PIXEL_FORMATS:
        raise NvcodecUnavailable(f"its frames are {frame.format.name}; the NVDEC path takes 8-bit 4:2:0")
    if frame.width % 2 or frame.height % 2:
        raise NvcodecUnavailable(f"its frames are {frame.width}x{frame.height}; the NVDEC path takes even sizes")
    if frame.interlaced_frame:
        raise NvcodecUnavailable("its frames are interlaced (NVDEC would deinterlace them)")
    first = frame.pts
    if start:
        with av.open(path) as container:
            first = start_timestamp(container, container.streams.video[0], start)
    if first is None or info.time_base is None:
        raise NvcodecUnavailable("its frames have no timestamps")
    return _Layout(frame.width, frame.height, info.rotation // 90, source_matrix(frame), frame.color_range == 2,
                   info.time_base, first)


class NvdecFrames:
    """Frames of one file decoded by NVDEC into GPU memory, from frame ``start`` on, in presentation order.

    Used like :class:`~.io.VideoFrames`: :meth:`timed` yields
    :class:`~.io.DecodedFrame` whose image is upright uint8 RGB on the GPU;
    :meth:`planes` yields the upright NV12 planes instead
    (:class:`DevicePlanes`), for work done in YUV. Frames keep their own
    timestamps and the rotation PyAV reports. ``stats`` counts frames;
    :meth:`close` releases the decoder.

    The first frames are decoded here, and their layout and timestamps checked
    against PyAV's: a file the NVDEC path does not take raises
    :class:`NvcodecUnavailable` (use :func:`open_frames` to fall back). If NVDEC
    fails later, :meth:`timed` logs a warning and PyAV decodes the rest (frames
    on the host from there).
    """

    def __init__(self, path, start: int = 0, batch: int = _BATCH):
        self.path = os.fspath(path)
        self.start = start
        self._decoded = DecodeStats()
        self._frames: Iterator[DevicePlanes] = iter(())
        self._rest = None  # PyAV's frames after an NVDEC failure
        self._decoder = None
        self._shift = Fraction(0)
        self._times = presentation_times(self.path, start)  # opens the file when first asked
        nvc, reason = _library()
        if nvc is None:
            raise NvcodecUnavailable(reason)
        self._layout = layout = _inspect(self.path, start)
        self._xp = _gpu_arrays()
        self._lane = _lane(self._xp)
        self._batch = batch
        try:
            with _cuda_context_kept():
                self._decoder = nvc.SimpleDecoder(self.path, gpu_id=0, use_device_memory=True,
                                                  output_color_type=nvc.OutputColorType.NATIVE)
            self._count = len(self._decoder)
            if start:
                if start >= self._count:
                    raise NvcodecUnavailable(f"NVDEC counts {self._count} frames, so no frame {start}")
                self._decoder.seek_to_index(start)
            self._next = start
            self._held = deque(self._decode_batch())
            if not self._held:
                raise NvcodecUnavailable("NVDEC decoded no frame")
            # NVDEC's demuxer leaves out the container's edit list (the start delay B-frames add), so its
            # times can sit a constant shift off PyAV's: measured on the first frame, taken out of every frame
            self._shift = layout.first_pts * layout.time_base - self._held[0].time
            if abs(self._shift) > _MAX_TIME_SHIFT:
                raise NvcodecUnavailable(f"NVDEC's frame {start} is at {float(self._held[0].time):.6g} s but "
                                         f"PyAV's is at {float(self._held[0].time + self._shift):.6g} s")
            self._held = deque(self._retimed(self._held))
        except BaseException:
            self.close()
            raise
        self._frames = self._iterate()

    def _decode_batch(self) -> list[DevicePlanes]:
        """The next frames, copied (upright) out of the decoder's buffers."""
        wanted = min(self._batch, self._count - self._next)
        if wanted <= 0:
            return []
        with _cuda_context_kept():
            frames = self._decoder.get_batch_frames(wanted)
        xp, layout = self._xp, self._layout
        arrays = [(xp.from_dlpack(frame), int(frame.getPTS())) for frame in frames]
        if xp is not np:
            xp.cuda.Device().synchronize()  # the decoder works on its own stream: its frames must be finished
        planes = []
        with _on(self._lane):
            for nv12, pts in arrays:
                planes.append(self._upright(nv12, self._next + len(planes), pts * layout.time_base))
        if len(frames) < wanted:
            self._decoded.ended_early = True
        self._next += len(planes)
        return planes

    def _retimed(self, frames: list) -> list:
        """``frames`` at the file's own times (NVDEC's drift off them on a variable frame rate); where the file
        has no more timestamps, at NVDEC's shifted onto PyAV's."""
        return [planes._replace(time=next(self._times, planes.time + self._shift)) for planes in frames]

    def _upright(self, nv12, index: int, time: Fraction) -> DevicePlanes:
        xp, layout = self._xp, self._layout
        height, width = layout.height, layout.width
        if nv12.ndim == 3 and nv12.shape[2] == 1:
            nv12 = nv12[..., 0]
        if nv12.dtype != xp.uint8 or nv12.shape != (height * 3 // 2, width):
            raise NvcodecUnavailable(f"NVDEC gave a {nv12.dtype} {list(nv12.shape)} frame, not NV12 "
                                     f"[{height * 3 // 2}, {width}]")
        chroma = nv12[height:].reshape(height // 2, width // 2, 2)
        return DevicePlanes(xp.array(xp.rot90(nv12[:height], layout.turns), order="C"),
                            xp.array(xp.rot90(chroma, layout.turns), order="C"), index, time, layout.matrix,
                            layout.full_range)

    def _iterate(self) -> Iterator[DevicePlanes]:
        while self._held:
            while self._held:
                self._decoded.read += 1
                yield self._held.popleft()
            self._held.extend(self._retimed(self._decode_batch()))

    def planes(self) -> Iterator[DevicePlanes]:
        """The remaining frames as upright NV12 planes on the GPU (an NVDEC failure is raised, not replaced)."""
        return self._frames

    def timed(self) -> Iterator[DecodedFrame]:
        """The remaining frames as upright uint8 RGB on the GPU, with their index and time."""
        index = self.start
        try:
            for item in self._frames:
                index = item.index
                with _on(self._lane):
                    image = item.rgb()
                yield DecodedFrame(image, item.index, item.time)
                index += 1
        except Exception as error:  # noqa: BLE001 - NVDEC's errors have no common base; PyAV takes over
            LOGGER.warning("%s: NVDEC failed at frame %d (%s); PyAV decodes the rest", self.path, index,
                           _describe(error))
            self._release()
            self._rest = iter_video_frames(self.path, index)
            yield from self._rest.timed()

    @property
    def stats(self) -> DecodeStats:
        """Frames read (and, after a fallback, PyAV's failures and early end)."""
        if self._rest is None:
            return self._decoded
        rest = self._rest.stats
        return DecodeStats(self._decoded.read + rest.read, rest.failed, rest.ended_early)

    def _release(self) -> None:
        self._decoder = None
        self._held = deque()
        self._times.close()

    def close(self) -> None:
        """Stop decoding and release the decoder (safe to call more than once)."""
        close = getattr(self._frames, "close", None)
        if close is not None:
            close()
        self._release()
        if self._rest is not None:
            self._rest.close()


def open_frames(path, start: int = 0, decoder: str = "cpu"):
    """Decoded frames of ``path`` from frame ``start``: :class:`NvdecFrames` when ``decoder`` is ``"nvdec"`` and
    the NVDEC path takes the file, else PyAV's :class:`~.io.VideoFrames` (the reason logged).

    ``decoder`` is a resolved choice (see :func:`choose_decoder`).
    """
    if decoder not in ("nvdec", "cpu"):
        raise ValueError(f"decoder {decoder!r} must be 'nvdec' or 'cpu' here (choose_decoder resolves 'auto')")
    if decoder == "nvdec":
        try:
            return NvdecFrames(path, start)
        except NvcodecUnavailable as why:
            reason = str(why)
        except Exception as error:  # noqa: BLE001 - PyNvVideoCodec's errors have no common base
            reason = _describe(error)
        LOGGER.info("%s: PyAV decodes it: %s", os.fspath(path), reason)
    return iter_video_frames(path, start)


# -- NVENC ------------------------------------------------------------------------------------------------------

def _address(array) -> int:
    """The address of an array's first byte (device for CuPy, host for NumPy)."""
    interface = getattr(array, "__cuda_array_interface__", None) or array.__array_interface__
    return int(interface["data"][0])


class _Plane:
    """One plane of a frame, shown through the CUDA array interface."""

    def __init__(self, shape: tuple, strides: tuple, address: int):
        self.__cuda_array_interface__ = {"shape": shape, "strides": strides, "data": (address, False),
                                         "typestr": "|u1", "version": 3}


class Nv12Surface:
    """An NV12 frame in one contiguous GPU buffer (Y, then interleaved CbCr), shown to NVENC as its two planes."""

    def __init__(self, xp, height: int, width: int):
        self.buffer = xp.empty((height * 3 // 2, width), xp.uint8)
        self.height, self.width = height, width

    def cuda(self) -> list:
        """The planes, Y [H, W, 1] then CbCr [H/2, W/2, 2], the second right after the first (as NVENC wants)."""
        height, width, base = self.height, self.width, _address(self.buffer)
        return [_Plane((height, width, 1), (width, 1, 1), base),
                _Plane((height // 2, width // 2, 2), (width, 2, 1), base + height * width)]


class NvencWriter(VideoWriter):
    """H.264/HEVC encoded by NVENC from RGB frames on the GPU (host frames are uploaded once); a
    :class:`~.io.VideoWriter` in everything else (checked target, audio, frame times, atomic commit).

    Frames become limited-range NV12 on the GPU, BT.709 from 720 lines up and
    BT.601 below: what players assume of untagged video, which this is (NVENC
    writes no colour tags here). Only the compressed packets come back to be
    muxed. Quality: ``crf`` is NVENC's constant-quality target (``cq``), and
    x264's ``preset`` names map to P1 (fastest) .. P7. There are no B-frames,
    so packets come in presentation order.

    Raises :class:`NvcodecUnavailable` (nothing left behind, ``audio``
    untouched) when NVENC cannot write this output; :func:`open_video_writer`
    then falls back to x264.
    """

    device_input = True

    def __init__(self, path, width: int, height: int, fps=30, crf: int = 18, preset: str = "medium", *,
                 codec: str = "h264", inputs=(), audio=None, time_base: Fraction | None = None):
        nvc = _nvenc_library(path, width, height, codec)
        super().__init__(path, fps, crf, preset, codec=codec, inputs=inputs, audio=audio, time_base=time_base)
        self._codec = codec
        self._frame_shape = (height, width, 3)
        self._matrix = "itu709" if height >= 720 else "itu601"
        self._xp = None
        self._lane = None
        self._surface = None
        self._picture = nvc.NV_ENC_PIC_PARAMS
        options = {"codec": codec, "preset": _NVENC_PRESETS[preset], "tuning_info": "high_quality", "rc": "vbr",
                   "cq": str(crf), "bitrate": "0", "maxbitrate": "0", "bf": "0", "gop": str(_GOP),
                   "idrperiod": str(_GOP), "repeatspspps": "1", "fps": str(max(1, round(self._rate))),
                   "gpu_id": "0"}
        try:
            with _cuda_context_kept():
                self._encoder = nvc.CreateEncoder(width, height, "NV12", False, **options)
        except BaseException as error:  # PyNvVideoCodec's errors have no common base; an interrupt lands here too
            self._audio = None  # the caller's, untouched: the fallback writer (or the caller) takes it
            self.abort()
            if not isinstance(error, Exception):
                raise
            raise NvcodecUnavailable(_failed_start(codec, error)) from error

    def write(self, frame, time: Fraction | float | None = None) -> None:
        """Append one uint8 RGB [H, W, 3] frame (CuPy, or NumPy: uploaded) shown at ``time`` seconds."""
        self._check_open()
        shape = tuple(getattr(frame, "shape", ()))
        if getattr(frame, "dtype", None) != np.uint8 or shape != self._frame_shape:
            raise ValueError(f"frame {self.frame_count} for {self.label} must be a uint8 RGB array "
                             f"{list(self._frame_shape)} (the size NVENC was opened for), got "
                             f"{getattr(frame, 'dtype', type(frame).__name__)} {list(shape)}")
        self._append(shape[:2], time, lambda: frame)

    def _start(self, height: int, width: int, planes=None) -> None:
        self._stream = self._container.add_mux_stream(self._codec, rate=self._rate, width=width, height=height,
                                                      time_base=self._time_base)
        if self._audio is not None:
            self._audio.attach(self._container, self.format, self._origin)

    def _encode(self, frame, pts: int) -> None:
        if self._surface is None:
            self._xp = _gpu_arrays()
            self._lane = _lane(self._xp)
            self._surface = Nv12Surface(self._xp, *self._frame_shape[:2])
        with _on(self._lane):
            pack_yuv420(rgb_to_yuv420(self._xp.asarray(frame), self._matrix), self._surface.buffer,
                        interleaved=True)
        picture = self._picture()
        picture.inputTimeStamp = pts
        self._mux_packets(self._encoder.Encode(self._surface, picture))

    def _mux_packets(self, packets) -> None:
        for encoded in packets:
            packet = av.Packet(bytes(encoded["data"]))
            packet.stream = self._stream  # before the time base: attaching a stream resets it
            packet.time_base = self._time_base
            packet.pts = packet.dts = int(encoded["timestamp"])
            packet.is_keyframe = int(encoded["picture_type"]) in _KEY_PICTURES
            self._container.mux(packet)

    def _flush(self) -> None:
        self._mux_packets(self._encoder.EndEncode())
        self._encoder = None

    def _release(self) -> None:
        self._encoder = None
        super()._release()


def _nvenc_library(path, width: int, height: int, codec: str):
    """PyNvVideoCodec, when NVENC may write ``path`` (H.264/HEVC in .mp4/.mov, an even size, a GPU not known to
    lack NVENC); else raise :class:`NvcodecUnavailable` with the reason."""
    nvc, reason = _library()
    if nvc is None:
        raise NvcodecUnavailable(reason)
    try:
        fmt = choose_format(path, False, codec)
    except ValueError as error:  # the x264 writer reports it, after the checks of the path itself
        raise NvcodecUnavailable(str(error)) from None
    if fmt.codec not in ("libx264", "libx265"):
        raise NvcodecUnavailable(f"NVENC writes H.264/HEVC in .mp4/.mov, and {os.fspath(path)} is {fmt.name}")
    if width % 2 or height % 2:
        raise NvcodecUnavailable(f"NVENC takes even frame sizes, and the frames are {width}x{height}")
    if not hasattr(av.container.OutputContainer, "add_mux_stream"):
        raise NvcodecUnavailable(f"PyAV {av.__version__} cannot mux encoded packets (no add_mux_stream)")
    if codec in _nvenc_absent:
        raise NvcodecUnavailable(_nvenc_absent[codec])
    return nvc


def _failed_start(codec: str, error: Exception) -> str:
    """The reason NVENC did not start; a GPU without the encoder is remembered for this process."""
    reason = f"NVENC cannot start ({_describe(error)})"
    if any(code in str(error) for code in _NO_ENCODER):
        _nvenc_absent[codec] = reason
    return reason


def nvenc_writes(path, encoder: str, width: int, height: int, *, layer_only: bool = False,
                 codec: str = "h264") -> str:
    """Why :func:`open_video_writer` would give ``path`` a writer of host frames, or "" when NVENC would encode
    it. ``auto`` starts a small encoder to find out (a GPU without NVENC is found out once per process, as the
    writer does)."""
    if encoder == "cpu":
        return "encoder 'cpu' requested"
    if is_folder_spelling(os.fspath(path)):
        return "a PNG sequence"
    if layer_only:
        return "the overlay alone has alpha, which H.264/HEVC lack"
    try:
        nvc = _nvenc_library(path, width, height, codec)
        with _cuda_context_kept():
            nvc.CreateEncoder(256, 256, "NV12", False, codec=codec, gpu_id="0")
    except NvcodecUnavailable as why:
        return str(why)
    except Exception as error:  # noqa: BLE001 - PyNvVideoCodec's errors have no common base
        return _failed_start(codec, error)
    return ""


def open_video_writer(path, encoder: str = "cpu", width: int = 0, height: int = 0, *, layer_only: bool = False,
                      **options) -> VideoWriter:
    """The writer of a video output: :class:`NvencWriter` for ``encoder`` ``"auto"`` or ``"nvenc"`` where NVENC
    can write it, else a :class:`~.io.VideoWriter` (x264, x265, VP9, ...), the reason logged (at INFO where
    PyNvVideoCodec and a GPU are there, else at DEBUG).

    ``width``/``height`` are the frames' size; ``options`` go to the writer
    (``fps``, ``crf``, ``preset``, ``codec``, ``inputs``, ``audio``,
    ``time_base``). ``"nvenc"`` raises ``RuntimeError`` with the reason when
    NVENC cannot write this output.
    """
    if encoder not in ENCODERS:
        raise ValueError(f"encoder {encoder!r} is not one of {', '.join(ENCODERS)}")
    if encoder == "nvenc" and layer_only:
        raise ValueError("encoder 'nvenc' writes H.264/HEVC, which has no alpha; the overlay alone (layer only) is "
                         "written as ProRes 4444 or VP9. Choose encoder 'auto' or 'cpu'.")
    if encoder != "cpu" and not layer_only:
        try:
            writer = NvencWriter(path, width, height, **options)
            LOGGER.info("encoder: NVENC %s", writer.format.name)
            return writer
        except NvcodecUnavailable as why:
            if encoder == "nvenc":
                raise RuntimeError(f"encoder 'nvenc' was requested but {why}. Choose encoder 'cpu' (x264).") \
                    from None
            writer = VideoWriter(path, layer_only=layer_only, **options)
            present = _library()[0] is not None  # without the extra or a GPU there is nothing to report
            LOGGER.log(logging.INFO if present else logging.DEBUG, "encoder: %s on the CPU, not NVENC: %s",
                       writer.format.codec, why)
            return writer
    return VideoWriter(path, layer_only=layer_only, **options)


# -- the render's seams -----------------------------------------------------------------------------------------

def place_frame(image, renderer, device_writer: bool = False):
    """``image`` where ``renderer`` draws it: on the GPU when the GPU renderer draws and the frame is there already
    or the video writer takes GPU frames (a host frame is then uploaded once), else on the host."""
    if getattr(renderer, "name", "") == "gpu" and (device_writer or array_module(image) is not np):
        return _gpu_arrays().asarray(image)
    return to_numpy(image)


class FrameHandOver:
    """Gives a drawn frame to each writer in the form it takes, bringing a GPU frame to the host once per form.

    Host frames go as they are, and so do GPU frames to writers that take
    them (NVENC). A video writer that takes I420 planes gets them made on the
    GPU (half the bytes of RGB); other writers (PNG sequences, GIF, odd
    sizes) get the RGB frame. Downloads land in pinned host buffers kept
    between frames (writers copy what they are given before they return).
    """

    def __init__(self, writers):
        self.writers = list(writers)
        self._pinned = {}
        self._lane = None

    def __call__(self, frame, index: int, time) -> None:
        on_gpu = array_module(frame) is not np
        rgb = None
        for writer in self.writers:
            stamp = index if isinstance(writer, PngSequenceWriter) else time
            if not on_gpu or getattr(writer, "device_input", False):
                writer.write(frame, stamp)
            elif isinstance(writer, VideoWriter) and writer.takes_planes(*frame.shape[:2]):
                writer.write_planes(self._download("planes", frame, True), stamp)
            else:
                rgb = self._download("rgb", frame, False) if rgb is None else rgb
                writer.write(rgb, stamp)

    def _download(self, key: str, frame, planes: bool) -> np.ndarray:
        xp = array_module(frame)
        height, width = frame.shape[:2]
        if self._lane is None:
            self._lane = _lane(xp)
        with _on(self._lane):
            source = pack_yuv420(rgb_to_yuv420(frame), xp.empty((height * 3 // 2, width), xp.uint8),
                                 interleaved=False) if planes else frame
            host = self._pinned.get(key)
            if host is None or host.shape != source.shape:
                host = pinned_array(source.shape)
                self._pinned[key] = host
            source.get(out=host)
        return host
