"""A stand-in for PyNvVideoCodec, so the NVDEC/NVENC paths run on machines without NVIDIA's video engines.

NumPy arrays stand in for GPU memory. The decoder decodes with PyAV and hands
out NV12 frames (through DLPack, with their timestamps) as NVDEC does: coded
orientation, Y then interleaved CbCr. The encoder reads the NV12 planes it is
shown through the CUDA array interface, from their addresses as NVENC would,
records them, and encodes them with libx264 into Annex B packets. ``calls``
records every call; the ``fail_*`` and ``pts_shift`` knobs make it misbehave.

Use :func:`install` (monkeypatch) to put it in ``sys.modules`` and route the
NVDEC/NVENC code to NumPy.
"""

from __future__ import annotations

import ctypes
import sys
import types
from fractions import Fraction

import av
import numpy as np

NVENC_ERROR = "PyNvEncoder constructor failed: NVENC error 2 (NV_ENC_ERR_NO_ENCODE_DEVICE)"


class PyNvVCException(Exception):
    """PyNvVideoCodec's error type."""


class FakeLibrary(types.ModuleType):
    """The module: SimpleDecoder, CreateDecoder, CreateEncoder and the enums the code uses."""

    def __init__(self):
        super().__init__("PyNvVideoCodec")
        self.__version__ = "2.2.4-fake"
        self.calls = []
        self.fail_probe = None  # an error message for CreateDecoder
        self.fail_decoder = None  # ... for SimpleDecoder
        self.fail_encoder = None  # ... for CreateEncoder (or an exception it raises, say KeyboardInterrupt)
        self.fail_after = None  # SimpleDecoder raises once this many frames were handed out
        self.pts_shift = 0  # added to every frame's timestamp
        self.pts_given = None  # timestamps handed out instead of the file's (the real ones drift on a variable rate)
        self.encoded = []  # (NV12 [H*3/2, W], inputTimeStamp) per Encode call
        self.PyNvVCException = PyNvVCException
        self.OutputColorType = types.SimpleNamespace(NATIVE="native", RGB="rgb", RGBP="rgbp")
        self.cudaVideoCodec = types.SimpleNamespace(H264="h264", HEVC="hevc")
        self.NV_ENC_PIC_PARAMS = types.SimpleNamespace
        self.SimpleDecoder = lambda *args, **kwargs: FakeSimpleDecoder(self, *args, **kwargs)

    def CreateDecoder(self, **kwargs):  # noqa: N802 - the library's name
        self.calls.append(("CreateDecoder", kwargs))
        if self.fail_probe:
            raise PyNvVCException(self.fail_probe)
        return object()

    def CreateEncoder(self, width, height, fmt, cpu_input, **options):  # noqa: N802 - the library's name
        self.calls.append(("CreateEncoder", (width, height, fmt, cpu_input), options))
        if isinstance(self.fail_encoder, BaseException):
            raise self.fail_encoder
        if self.fail_encoder:
            raise PyNvVCException(self.fail_encoder)
        return FakeEncoder(self, width, height, options)


class FakeFrame:
    """A decoded frame: NV12 through DLPack, and its timestamp."""

    def __init__(self, nv12: np.ndarray, pts: int):
        self._nv12 = nv12
        self._pts = pts

    def __dlpack__(self, stream=None, **kwargs):
        return self._nv12.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._nv12.__dlpack_device__()

    def getPTS(self):  # noqa: N802 - the library's name
        return self._pts


def nv12_frames(path) -> list:
    """(NV12 [H*3/2, W], pts) of every frame of ``path``, as stored (not rotated), from PyAV's yuv420p."""
    frames = []
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            if frame.format.name not in ("yuv420p", "yuvj420p"):
                raise PyNvVCException(f"{frame.format.name} is not decoded to NV12")
            i420 = frame.to_ndarray()  # the planes as stored (full range stays full range)
            height, width = frame.height, frame.width
            chroma = i420[height:].reshape(2, height // 2, width // 2)
            nv12 = np.vstack([i420[:height], np.stack(chroma, axis=-1).reshape(height // 2, width)])
            frames.append((nv12, frame.pts))
    return frames


class FakeSimpleDecoder:
    """SimpleDecoder: sequential batches from an index, ``len`` = the frame count."""

    def __init__(self, library, path, gpu_id=0, use_device_memory=True, output_color_type=None, **kwargs):
        library.calls.append(("SimpleDecoder", path, {"gpu_id": gpu_id, "use_device_memory": use_device_memory,
                                                       "output_color_type": output_color_type, **kwargs}))
        if library.fail_decoder:
            raise PyNvVCException(library.fail_decoder)
        self._library = library
        self._frames = nv12_frames(path)
        self._position = 0
        self._handed = 0
        self._surfaces = {}  # NVDEC reuses its output buffers from one call to the next; so does this

    def __len__(self):
        return len(self._frames)

    def seek_to_index(self, index):
        self._library.calls.append(("seek_to_index", index))
        self._position = index

    def get_batch_frames(self, count):
        self._library.calls.append(("get_batch_frames", count))
        fail = self._library.fail_after
        if fail is not None and self._handed >= fail:
            raise PyNvVCException("CUDA error: the decoder stopped")
        batch = self._frames[self._position:self._position + count]
        self._position += len(batch)
        self._handed += len(batch)
        frames = []
        given = self._library.pts_given
        for slot, (nv12, pts) in enumerate(batch):
            surface = self._surfaces.setdefault(slot, np.empty_like(nv12))
            surface[...] = nv12
            if given is not None:
                pts = given[self._position - len(batch) + slot]
            frames.append(FakeFrame(surface, pts + self._library.pts_shift))
        return frames


def _read_plane(interface: dict) -> np.ndarray:
    """The bytes a CUDA-array-interface dict describes, read from its address (host memory here)."""
    shape, strides = interface["shape"], interface["strides"]
    span = sum((size - 1) * stride for size, stride in zip(shape, strides)) + 1
    memory = (ctypes.c_uint8 * span).from_address(interface["data"][0])
    return np.lib.stride_tricks.as_strided(np.frombuffer(memory, np.uint8), shape, strides).copy()


class FakeEncoder:
    """NVENC: NV12 planes in (read from their addresses), H.264 Annex B packets out, with their timestamps."""

    def __init__(self, library, width, height, options):
        self._library = library
        self.width, self.height = width, height
        hevc = options.get("codec") == "hevc"
        self._codec = av.CodecContext.create("libx265" if hevc else "libx264", "w")
        self._codec.width, self._codec.height, self._codec.pix_fmt = width, height, "yuv420p"
        self._codec.time_base = Fraction(1, 1_000_000)
        self._codec.options = {"crf": options.get("cq", "18"), "preset": "ultrafast",
                               **({"x265-params": "bframes=0:log-level=error"} if hevc else {"bf": "0"})}

    def Encode(self, surface, picture):  # noqa: N802 - the library's name
        luma, chroma = (plane.__cuda_array_interface__ for plane in surface.cuda())
        assert luma["shape"] == (self.height, self.width, 1) and chroma["shape"] == (self.height // 2,
                                                                                     self.width // 2, 2)
        assert chroma["data"][0] == luma["data"][0] + self.height * self.width, "CbCr must follow Y"
        y, uv = _read_plane(luma)[..., 0], _read_plane(chroma)
        self._library.encoded.append((np.vstack([y, uv.reshape(self.height // 2, self.width)]),
                                      picture.inputTimeStamp))
        i420 = np.vstack([y, uv[..., 0].reshape(-1, self.width), uv[..., 1].reshape(-1, self.width)])
        frame = av.VideoFrame.from_ndarray(i420, format="yuv420p")
        frame.pts = picture.inputTimeStamp
        return self._packets(self._codec.encode(frame))

    def EndEncode(self):  # noqa: N802 - the library's name
        self._library.calls.append(("EndEncode",))
        return self._packets(self._codec.encode(None))

    @staticmethod
    def _packets(packets) -> list:
        return [{"data": bytes(packet), "timestamp": packet.pts, "picture_type": 3 if packet.is_keyframe else 0}
                for packet in packets]


def install(monkeypatch, gpu: bool = True) -> FakeLibrary:
    """Put a fresh fake library in ``sys.modules``; NumPy stands in for CuPy, and ``gpu`` says whether one is usable.

    Clear the module's caches around the test (see ``forget_probes``).
    """
    from trackoverlay.utils.video import nvcodec

    library = FakeLibrary()
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", library)
    monkeypatch.setattr(nvcodec, "_gpu_arrays", lambda: np)
    monkeypatch.setattr(nvcodec, "probe_gpu", lambda: (True, {"device": "fake"}) if gpu else
                        (False, "CuPy found no CUDA device"))
    forget_probes()
    return library


def forget_probes() -> None:
    """Forget what the NVDEC/NVENC code found (it looks once per process)."""
    from trackoverlay.utils.video import nvcodec

    nvcodec._library.cache_clear()
    nvcodec.probe_nvdec.cache_clear()
    nvcodec._nvenc_absent.clear()
