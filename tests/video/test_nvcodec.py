"""NVDEC/NVENC through PyNvVideoCodec, run against a stand-in library (tests/fake_nvcodec.py) on any machine.

NumPy arrays stand in for GPU memory. The real library and GPU are tested in
test_nvcodec_gpu.py.
"""

import importlib.util
import logging
import os
import re
import sys
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from fake_nvcodec import NVENC_ERROR, forget_probes, install, nv12_frames
from trackoverlay.utils.core.log import LOGGER
from trackoverlay.utils.tracks.contract import Tracks
from trackoverlay.utils.tracks.track_file import save_tracks_json
from trackoverlay.utils.video.audio import AudioCopy
from trackoverlay.utils.video.io import Bt709Converter, VideoFrames, VideoWriter, iter_video_frames
from trackoverlay.utils.video.nvcodec import (
    NvdecFrames,
    NvencWriter,
    choose_decoder,
    nv12_to_rgb,
    nvenc_writes,
    open_frames,
    open_video_writer,
    pack_yuv420,
    probe_nvdec,
    rgb_to_yuv420,
)
from video_clips import colour_frame, decoded, frame_times, make_video, streams

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "overlay_video.py"
PYAV_MATCH = 3  # levels: exact NV12 -> RGB here against FFmpeg's fast converter (PyAV's frames), 1-3 levels low


@pytest.fixture(autouse=True)
def fresh_probes():
    """Each test finds the library anew, and leaves nothing cached behind."""
    forget_probes()
    yield
    forget_probes()


@pytest.fixture
def fake(monkeypatch):
    return install(monkeypatch)


@pytest.fixture
def absent(monkeypatch):
    """PyNvVideoCodec cannot be imported (as on a machine without the extra)."""
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """10 colourful 64x48 H.264 frames at 25 fps, with B-frames (presentation order differs from decode order)."""
    return make_video(tmp_path_factory.mktemp("nvdec") / "colour.mp4", frames=10, picture=colour_frame)


def pyav_frames(path, start=0):
    frames = iter_video_frames(path, start)  # held: dropping it closes the file
    return list(frames.timed())


def assert_frames_match(ours, theirs, tolerance=PYAV_MATCH):
    assert [(item.index, item.time) for item in ours] == [(item.index, item.time) for item in theirs]
    for mine, reference in zip(ours, theirs):
        difference = np.abs(np.asarray(mine.image, np.int16) - reference.image)
        assert difference.max() <= tolerance, f"frame {mine.index}: off by up to {difference.max()}"


# -- detection ----------------------------------------------------------------------------------------------------

def test_a_missing_library_is_the_reason_and_logged_once(absent, caplog):
    with caplog.at_level(logging.INFO, logger="trackoverlay"):
        assert probe_nvdec() == (False, "PyNvVideoCodec is not installed (pip install 'track-overlay[nvcodec]')")
        assert probe_nvdec()[0] is False
    assert [record.getMessage() for record in caplog.records] == [
        "NVDEC is not used: PyNvVideoCodec is not installed (pip install 'track-overlay[nvcodec]')"]


def test_nvdec_is_found_by_starting_an_h264_decoder(fake):
    assert probe_nvdec() == (True, "PyNvVideoCodec 2.2.4-fake")
    assert fake.calls == [("CreateDecoder", {"gpuid": 0, "codec": "h264", "usedevicememory": True})]


def test_nvdec_needs_a_gpu(monkeypatch):
    fake = install(monkeypatch, gpu=False)
    assert probe_nvdec() == (False, "CuPy found no CUDA device")
    assert fake.calls == []


def test_a_decoder_that_does_not_start_is_the_reason(fake):
    fake.fail_probe = "cuvidCreateDecoder failed\nmore advice"
    assert probe_nvdec() == (False, "NVDEC cannot start a decoder (PyNvVCException: cuvidCreateDecoder failed)")


@pytest.mark.parametrize("requested, gpu_renderer, host_pixels, expected", [
    ("cpu", True, False, ("cpu", "requested")),
    ("auto", False, False, ("cpu", "the CPU renderer draws on host frames")),
    ("auto", True, True, ("cpu", "point detection reads the frames on the host")),
    ("auto", True, False, ("nvdec", "decodes into GPU memory with PyNvVideoCodec 2.2.4-fake")),
    ("nvdec", False, True, ("nvdec", "requested")),
])
def test_decoder_choice(fake, requested, gpu_renderer, host_pixels, expected):
    assert choose_decoder(requested, gpu_renderer=gpu_renderer, host_pixels=host_pixels) == expected


def test_auto_decodes_on_the_cpu_for_an_encoder_of_host_frames(fake):
    """Without NVENC for the output the frames go back to the host for x264: PyAV's YUV planes are faster
    than NVDEC's RGB there. The encoder is asked about only when the other rules leave NVDEC."""
    assert choose_decoder("auto", gpu_renderer=True, host_pixels=False, host_encoder=lambda: "no NVENC") == (
        "cpu", "the encoder takes host frames (no NVENC)")
    assert choose_decoder("nvdec", gpu_renderer=True, host_pixels=False, host_encoder=lambda: "no NVENC") == (
        "nvdec", "requested")

    def not_asked():
        raise AssertionError("the encoder was probed for nothing")

    assert choose_decoder("auto", gpu_renderer=True, host_pixels=True, host_encoder=not_asked)[0] == "cpu"
    assert choose_decoder("auto", gpu_renderer=False, host_pixels=False, host_encoder=not_asked)[0] == "cpu"


def test_whether_nvenc_writes_an_output(fake, tmp_path):
    assert nvenc_writes(tmp_path / "out.mp4", "auto", 64, 48) == ""
    assert [call[1] for call in fake.calls if call[0] == "CreateEncoder"] == [(256, 256, "NV12", False)]
    assert nvenc_writes(tmp_path / "out.mp4", "cpu", 64, 48) == "encoder 'cpu' requested"
    assert nvenc_writes(f"{tmp_path}/frames/", "auto", 64, 48) == "a PNG sequence"
    assert nvenc_writes(tmp_path / "out.mov", "auto", 64, 48, layer_only=True) == \
        "the overlay alone has alpha, which H.264/HEVC lack"
    assert re.fullmatch(r"NVENC writes H\.264/HEVC in \.mp4/\.mov, and .*out\.webm is .*",
                        nvenc_writes(tmp_path / "out.webm", "auto", 64, 48))
    assert nvenc_writes(tmp_path / "out.mp4", "auto", 65, 48) == \
        "NVENC takes even frame sizes, and the frames are 65x48"
    assert sum(call[0] == "CreateEncoder" for call in fake.calls) == 1
    assert list(tmp_path.iterdir()) == []


def test_a_gpu_without_nvenc_is_probed_once_for_decoder_and_writer(fake, tmp_path):
    """The decoder's probe finds NVENC missing; the writer then falls back without starting it again."""
    fake.fail_encoder = NVENC_ERROR
    reason = ("NVENC cannot start (PyNvVCException: PyNvEncoder constructor failed: NVENC error 2 "
              "(NV_ENC_ERR_NO_ENCODE_DEVICE))")
    assert nvenc_writes(tmp_path / "out.mp4", "auto", 64, 48) == reason
    writer = open_video_writer(tmp_path / "out.mp4", "auto", 64, 48, fps=25)
    writer.abort()
    assert type(writer) is VideoWriter and sum(call[0] == "CreateEncoder" for call in fake.calls) == 1


def test_a_gpu_whose_encoder_caps_cannot_be_read_has_no_nvenc(fake, tmp_path):
    """PyNvVideoCodec 2.2 on an H100 fails reading the encoder's capabilities, with no error code: that GPU
    has no NVENC either, and is not asked again."""
    fake.fail_encoder = "PyNvEncoderCaps : "
    assert nvenc_writes(tmp_path / "out.mp4", "auto", 64, 48) == \
        "NVENC cannot start (PyNvVCException: PyNvEncoderCaps :)"
    open_video_writer(tmp_path / "out.mp4", "auto", 64, 48, fps=25).abort()
    assert sum(call[0] == "CreateEncoder" for call in fake.calls) == 1


def test_nvenc_writes_nothing_without_the_library(absent, tmp_path):
    assert nvenc_writes(tmp_path / "out.mp4", "auto", 64, 48) == \
        "PyNvVideoCodec is not installed (pip install 'track-overlay[nvcodec]')"


def test_decoder_choice_without_nvdec(absent):
    assert choose_decoder("auto", gpu_renderer=True, host_pixels=False) == (
        "cpu", "PyNvVideoCodec is not installed (pip install 'track-overlay[nvcodec]')")
    with pytest.raises(RuntimeError, match=r"decoder 'nvdec' was requested but PyNvVideoCodec is not installed.*"
                                           r"choose decoder 'cpu'"):
        choose_decoder("nvdec", gpu_renderer=True, host_pixels=False)
    with pytest.raises(ValueError, match="decoder 'gpu' is not one of auto, nvdec, cpu"):
        choose_decoder("gpu", gpu_renderer=True, host_pixels=False)


# -- colour -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("matrix, full_range", [("itu709", False), ("itu601", False), ("itu709", True),
                                                ("bt2020", False)])
def test_nv12_to_rgb_matches_ffmpeg(matrix, full_range):
    rng = np.random.default_rng(5)
    planes = rng.integers(0, 256, (72, 64), dtype=np.uint8)  # any Y, Cb, Cr: out-of-gamut values clip alike
    picture = av.VideoFrame.from_ndarray(planes, format="yuvj420p" if full_range else "yuv420p")
    reference = picture.to_ndarray(format="rgb24", src_colorspace=matrix,
                                   src_color_range="JPEG" if full_range else "MPEG")
    chroma = np.stack(planes[48:].reshape(2, 24, 32), axis=-1)
    ours = nv12_to_rgb(planes[:48], chroma, matrix, full_range)
    assert ours.dtype == np.uint8 and ours.shape == (48, 64, 3)
    assert np.abs(ours.astype(np.int16) - reference).max() <= PYAV_MATCH


def test_rgb_to_yuv420_matches_the_x264_path():
    rgb = colour_frame(3, 96, 64)
    luma, cb, cr = rgb_to_yuv420(rgb)
    converter = Bt709Converter(64, 96, workers=1)
    reference = converter.convert(rgb)
    converter.close()
    ours = pack_yuv420((luma, cb, cr), np.empty_like(reference), interleaved=False)
    assert np.abs(ours.astype(np.int16) - reference).max() <= 1


def test_nv12_round_trip_and_layout():
    rgb = colour_frame(0, 256, 192)  # ramps of about one level a pixel, and a square at rows 64..111
    planes = rgb_to_yuv420(rgb, "itu601")
    nv12 = pack_yuv420(planes, np.empty((288, 256), np.uint8), interleaved=True)
    chroma = nv12[192:].reshape(96, 128, 2)
    assert np.array_equal(nv12[:192], planes[0])
    assert np.array_equal(chroma[..., 0], planes[1]) and np.array_equal(chroma[..., 1], planes[2])
    back = nv12_to_rgb(nv12[:192], chroma, "itu601")
    smooth = np.ones((192, 256), bool)
    smooth[64:112, :] = False  # the square's rows: chroma is shared across its edges
    assert np.abs(back.astype(np.int16) - rgb)[smooth].max() <= 3


# -- decoding -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rotation", [None, 90, 180])
def test_nvdec_frames_match_pyav(fake, tmp_path, rotation):
    path = make_video(tmp_path / "turned.mp4", frames=10, picture=colour_frame, rotation=rotation)
    frames = NvdecFrames(path)
    ours = list(frames.timed())
    assert_frames_match(ours, pyav_frames(path))
    assert frames.stats.read == 10 and not frames.stats.ended_early
    assert all(isinstance(item.image, np.ndarray) and item.image.flags.c_contiguous for item in ours)
    simple = [call for call in fake.calls if call[0] == "SimpleDecoder"]
    assert simple == [("SimpleDecoder", os.fspath(path), {"gpu_id": 0, "use_device_memory": True,
                                                           "output_color_type": "native"})]
    frames.close()


def test_frames_are_copied_out_of_the_decoders_buffers(fake, clip):
    frames = NvdecFrames(clip, batch=3)  # the fake reuses 3 buffers, as NVDEC does
    planes = list(frames.planes())
    stored = sorted(nv12_frames(clip), key=lambda frame: frame[1])
    assert len(planes) == len(stored) == 10
    for item, (nv12, _), reference in zip(planes, stored, pyav_frames(clip)):  # intact after the buffers refilled
        assert np.array_equal(item.luma, nv12[:48])
        assert np.array_equal(item.chroma, nv12[48:].reshape(24, 32, 2))
        assert (item.index, item.time) == (reference.index, reference.time)
        assert (item.matrix, item.full_range) == ("smpte170m", False)  # untagged, under 720 lines: BT.601 (SMPTE 170M)
    assert [call[1] for call in fake.calls if call[0] == "get_batch_frames"] == [3, 3, 3, 1]


def test_nvdec_starts_at_a_frame(fake, clip):
    frames = NvdecFrames(clip, start=6)
    assert_frames_match(list(frames.timed()), pyav_frames(clip, 6))
    assert ("seek_to_index", 6) in fake.calls


def test_full_range_frames(fake, tmp_path):
    path = make_video(tmp_path / "full.mp4", frames=3, picture=colour_frame, pix_fmt="yuvj420p")
    item = next(NvdecFrames(path).planes())
    assert item.full_range is True
    assert_frames_match(list(NvdecFrames(path).timed()), pyav_frames(path))


UNFIT = [
    pytest.param(dict(pix_fmt="yuv444p"), "its frames are yuv444p; the NVDEC path takes 8-bit 4:2:0", id="444"),
    pytest.param(dict(pix_fmt="yuv420p10le"), "its frames are yuv420p10le", id="10-bit"),
    pytest.param(dict(codec="libvpx-vp9", width=66, height=49, container="webm"),
                 "its frames are 66x49; the NVDEC path takes even sizes", id="odd-size"),
    pytest.param(dict(options={"x264-params": "interlaced=1"}), "its frames are interlaced", id="interlaced"),
    pytest.param(dict(codec="ffv1", container="matroska"), "its video is ffv1, which the NVDEC path does not "
                 "decode", id="ffv1"),
]


@pytest.mark.parametrize("kind, reason", UNFIT)
def test_files_nvdec_does_not_take_decode_with_pyav(fake, tmp_path, caplog, kind, reason):
    path = make_video(tmp_path / "clip.mkv", frames=3, **kind)
    with caplog.at_level(logging.INFO, logger="trackoverlay"):
        frames = open_frames(path, 0, "nvdec")
    assert isinstance(frames, VideoFrames)
    assert f"clip.mkv: PyAV decodes it: {reason}" in caplog.text
    assert len(list(frames)) == 3
    assert not [call for call in fake.calls if call[0] == "SimpleDecoder"]


@pytest.mark.parametrize("knob, value, reason", [
    ("fail_decoder", "no decode session\nadvice", "PyNvVCException: no decode session"),
    ("pts_shift", 10**7, r"NVDEC's frame 0 is at [0-9.]+ s but PyAV's is at 0 s"),  # far beyond a start delay
])
def test_nvdec_problems_at_the_start_decode_with_pyav(fake, clip, caplog, knob, value, reason):
    setattr(fake, knob, value)
    with caplog.at_level(logging.INFO, logger="trackoverlay"):
        frames = open_frames(clip, 0, "nvdec")
    assert isinstance(frames, VideoFrames)
    assert re.search(f"PyAV decodes it: {reason}", caplog.text), caplog.text
    assert_frames_match(list(frames.timed()), pyav_frames(clip), tolerance=0)


def test_a_constant_start_delay_in_nvdecs_times_is_taken_out(fake, clip):
    """NVDEC's demuxer leaves out an edit list's start delay: its times sit a constant shift off PyAV's."""
    fake.pts_shift = -2 * 512
    frames = NvdecFrames(clip)
    ours = list(frames.timed())
    assert [item.time for item in ours] == [item.time for item in pyav_frames(clip)]
    frames.close()


@pytest.mark.parametrize("start", [0, 2])
def test_nvdec_frames_take_the_files_variable_frame_times(fake, tmp_path, start):
    """On a variable frame rate NVDEC's own times drift off the file's (on an H100, a frame at 1.9 s came back at
    1.0 s): the frames take the file's times, as PyAV's do."""
    times = [0.0, 0.04, 0.5, 0.52, 1.9, 3.27]
    path = make_video(tmp_path / "vfr.mp4", frames=6, times=times, picture=colour_frame)
    fake.pts_given = list(range(6))  # steady ticks, nothing like the file's
    frames = NvdecFrames(path, start)
    ours = [item.time for item in frames.timed()]
    frames.close()
    assert ours == [item.time for item in pyav_frames(path, start)]
    assert np.allclose([float(time) for time in ours], times[start:], atol=1e-3)


def test_open_frames_without_the_library(absent, clip, caplog):
    with caplog.at_level(logging.INFO, logger="trackoverlay"):
        assert isinstance(open_frames(clip, 0, "nvdec"), VideoFrames)
    assert "PyAV decodes it: PyNvVideoCodec is not installed" in caplog.text
    with pytest.raises(ValueError, match="decoder 'auto' must be 'nvdec' or 'cpu' here"):
        open_frames(clip, 0, "auto")


def test_nvdec_failing_midway_hands_over_to_pyav(fake, clip, caplog):
    fake.fail_after = 4
    frames = NvdecFrames(clip)
    with caplog.at_level(logging.WARNING, logger="trackoverlay"):
        ours = list(frames.timed())
    assert_frames_match(ours, pyav_frames(clip))
    assert "colour.mp4: NVDEC failed at frame 4 (PyNvVCException: CUDA error: the decoder stopped); PyAV decodes " \
           "the rest" in caplog.text
    assert frames.stats.read == 10 and frames.stats.failed == 0
    frames.close()


# -- encoding -----------------------------------------------------------------------------------------------------

TIMES = [0, 0.04, 0.1, 0.14, 0.2, 0.32]  # a variable frame rate


@pytest.fixture(scope="module")
def sound_clip(tmp_path_factory):
    return make_video(tmp_path_factory.mktemp("sound") / "sound.mp4", frames=8, audio="aac", picture=colour_frame)


def write_frames(writer):
    frames = [colour_frame(index, 64, 48) for index in range(len(TIMES))]
    for frame, time in zip(frames, TIMES):
        writer.write(frame, time)
    writer.close()
    return frames


@pytest.mark.parametrize("codec, name", [("h264", "h264"), ("hevc", "hevc")])
def test_nvenc_encodes_nv12_and_muxes_its_packets(fake, tmp_path, sound_clip, codec, name):
    out = tmp_path / "out.mp4"
    writer = open_video_writer(out, "auto", 64, 48, fps=25, crf=20, preset="slow", codec=codec,
                               audio=AudioCopy(sound_clip), time_base=Fraction(1, 1000))
    assert isinstance(writer, NvencWriter)
    frames = write_frames(writer)
    create = [call for call in fake.calls if call[0] == "CreateEncoder"]
    assert create[0][1] == (64, 48, "NV12", False)
    assert {key: create[0][2][key] for key in ("codec", "preset", "rc", "cq", "bf")} == {
        "codec": codec, "preset": "P6", "rc": "vbr", "cq": "20", "bf": "0"}
    given = [nv12 for nv12, _ in fake.encoded]
    expected = [pack_yuv420(rgb_to_yuv420(frame, "itu601"), np.empty((72, 64), np.uint8), True) for frame in frames]
    assert all(np.array_equal(a, b) for a, b in zip(given, expected, strict=True))  # BT.601 under 720 lines
    assert [stamp for _, stamp in fake.encoded] == [0, 40, 100, 140, 200, 320]
    assert streams(out)["video"][0] == name and streams(out)["audio"][0] == "aac"
    assert frame_times(out) == pytest.approx(TIMES, abs=1e-3)
    for ours, reference in zip(decoded(out), frames, strict=True):
        assert np.abs(ours.astype(np.int16) - reference).mean() < 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]


def test_nvenc_refuses_frames_of_another_size(fake, tmp_path):
    writer = open_video_writer(tmp_path / "out.mov", "nvenc", 64, 48, fps=25)
    with pytest.raises(ValueError, match=r"must be a uint8 RGB array \[48, 64, 3\] \(the size NVENC was opened "
                                         r"for\), got uint8 \[48, 66, 3\]"):
        writer.write(np.zeros((48, 66, 3), np.uint8))
    writer.abort()
    assert list(tmp_path.iterdir()) == []


def test_nvenc_that_does_not_start_falls_back_to_x264(fake, tmp_path, sound_clip, caplog):
    fake.fail_encoder = NVENC_ERROR
    sound = AudioCopy(sound_clip)
    with caplog.at_level(logging.INFO, logger="trackoverlay"):
        writer = open_video_writer(tmp_path / "out.mp4", "auto", 64, 48, fps=25, audio=sound)
    assert type(writer) is VideoWriter
    assert ("encoder: libx264 on the CPU, not NVENC: NVENC cannot start (PyNvVCException: PyNvEncoder constructor "
            "failed: NVENC error 2 (NV_ENC_ERR_NO_ENCODE_DEVICE))") in caplog.text
    write_frames(writer)
    assert streams(tmp_path / "out.mp4")["audio"][0] == "aac"  # the sound survived the failed attempt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.mp4"]


def test_a_gpu_without_nvenc_is_tried_once_per_process(fake, tmp_path, caplog):
    """A GPU that has no encoder (NV_ENC_ERR_NO_ENCODE_DEVICE, as on H100s) costs one failed start, not one a
    render; other start failures (say, a consumer card's sessions all busy) are tried again next time."""
    fake.fail_encoder = NVENC_ERROR
    with caplog.at_level(logging.INFO, logger="trackoverlay"):
        for name in ("a.mp4", "b.mp4"):
            open_video_writer(tmp_path / name, "auto", 64, 48, fps=25).abort()
    assert sum(call[0] == "CreateEncoder" for call in fake.calls) == 1
    assert caplog.text.count("not NVENC: NVENC cannot start (PyNvVCException: PyNvEncoder constructor failed: "
                             "NVENC error 2 (NV_ENC_ERR_NO_ENCODE_DEVICE))") == 2
    with pytest.raises(RuntimeError, match=r"encoder 'nvenc' was requested but NVENC cannot start"):
        open_video_writer(tmp_path / "c.mp4", "nvenc", 64, 48, fps=25)
    forget_probes()
    fake.fail_encoder = "PyNvEncoder constructor failed: NVENC error 10 (NV_ENC_ERR_ENCODER_BUSY)"
    for name in ("d.mp4", "e.mp4"):
        open_video_writer(tmp_path / name, "auto", 64, 48, fps=25).abort()
    assert sum(call[0] == "CreateEncoder" for call in fake.calls) == 3
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_while_nvenc_starts_leaves_no_file(fake, tmp_path, sound_clip):
    """NVENC takes ~0.4 s to refuse on a GPU without it: Ctrl-C then lands inside its start."""
    fake.fail_encoder = KeyboardInterrupt()
    sound = AudioCopy(sound_clip)
    with pytest.raises(KeyboardInterrupt):
        open_video_writer(tmp_path / "out.mp4", "auto", 64, 48, fps=25, audio=sound)
    sound.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("output, words", [
    ("", "output path is empty"),
    ("frames", "it is a folder"),
    ("/dev/null", "it is a character device"),
    ("tracks.json", "it is the input"),
])
def test_outputs_are_checked_alike_with_nvenc_there(fake, tmp_path, monkeypatch, output, words):
    """The output's own checks come first whether or not NVENC could write it (its format is checked after)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "frames").mkdir()
    (tmp_path / "tracks.json").write_text("{}")
    errors = []
    for encoder in ("auto", "cpu"):
        with pytest.raises((ValueError, OSError)) as error:
            open_video_writer(output, encoder, 64, 48, fps=25, inputs=[tmp_path / "tracks.json"])
        errors.append(str(error.value))
    assert errors[0] == errors[1] and words in errors[0], errors
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frames", "tracks.json"]


def test_without_the_extra_x264_is_chosen_quietly(absent, tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger="trackoverlay"):
        writer = open_video_writer(tmp_path / "out.mp4", "auto", 64, 48, fps=25)
    writer.abort()
    assert type(writer) is VideoWriter
    assert [(record.levelno, record.getMessage()) for record in caplog.records] == [
        (logging.DEBUG, "encoder: libx264 on the CPU, not NVENC: PyNvVideoCodec is not installed "
                        "(pip install 'track-overlay[nvcodec]')")]


def test_nvenc_requested_but_not_starting_is_an_error(fake, tmp_path):
    fake.fail_encoder = NVENC_ERROR
    with pytest.raises(RuntimeError, match=r"encoder 'nvenc' was requested but NVENC cannot start \(PyNvVCException: "
                                           r"PyNvEncoder constructor failed: NVENC error 2.*Choose encoder 'cpu'"):
        open_video_writer(tmp_path / "out.mp4", "nvenc", 64, 48, fps=25)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name, size, layer_only, reason", [
    ("out.webm", (64, 48), False, "NVENC writes H.264/HEVC in .mp4/.mov, and {path} is VP9 WebM"),
    ("out.mp4", (63, 48), False, "NVENC takes even frame sizes, and the frames are 63x48"),
    ("out.mov", (64, 48), True, None),
])
def test_outputs_nvenc_does_not_write(fake, tmp_path, caplog, name, size, layer_only, reason):
    path = tmp_path / name
    with caplog.at_level(logging.INFO, logger="trackoverlay"):
        writer = open_video_writer(path, "auto", *size, fps=25, layer_only=layer_only)
    assert type(writer) is VideoWriter
    writer.abort()
    if reason is None:
        assert "NVENC" not in caplog.text
    else:
        assert reason.format(path=path) in caplog.text
        with pytest.raises(RuntimeError, match="encoder 'nvenc' was requested but NVENC"):
            open_video_writer(path, "nvenc", *size, fps=25)
    assert not [call for call in fake.calls if call[0] == "CreateEncoder"]


# -- the command line ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("overlay_video_nvcodec", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cli(script):
    """The script, run in-process; the pack logger's setup (the script's own) is undone afterwards."""
    saved = LOGGER.propagate, LOGGER.level, list(LOGGER.handlers)
    yield script
    LOGGER.propagate, LOGGER.level = saved[:2]
    LOGGER.handlers[:] = saved[2]


@pytest.fixture
def tracks_file(tmp_path):
    path = np.tile(np.array([[[12.0, 10.0], [50.0, 30.0]]], np.float32), (10, 1, 1))
    save_tracks_json(Tracks(path, np.ones((10, 2), bool)), tmp_path / "tracks.json")
    return tmp_path / "tracks.json"


def test_cli_decodes_with_nvdec_and_encodes_with_nvenc(fake, cli, clip, tracks_file, tmp_path, capsys):
    args = [clip, "--tracks", tracks_file, "--backend", "cpu", "--no-lines", "--box-color", "#FF0000"]
    assert cli.main([*map(str, args), "--decoder", "nvdec", "--encoder", "nvenc", "-o", str(tmp_path / "gpu.mp4")]) == 0
    out = capsys.readouterr().out
    assert "INFO: decoder: nvdec (requested)" in out and "INFO: encoder: NVENC H.264 MP4" in out
    assert len(fake.encoded) == 10 and any(call[0] == "SimpleDecoder" for call in fake.calls)
    assert cli.main([*map(str, args), "--decoder", "cpu", "--encoder", "cpu", "-o", str(tmp_path / "cpu.mp4")]) == 0
    for ours, reference in zip(decoded(tmp_path / "gpu.mp4"), decoded(tmp_path / "cpu.mp4"), strict=True):
        assert np.abs(ours.astype(np.int16) - reference).mean() < 4  # two encoders of one picture


def test_cli_auto_decodes_on_the_cpu_for_the_cpu_renderer(fake, cli, clip, tracks_file, tmp_path, capsys):
    args = [clip, "--tracks", tracks_file, "--backend", "cpu", "-o", tmp_path / "out.mp4"]
    assert cli.main(list(map(str, args))) == 0
    out = capsys.readouterr().out
    assert "INFO: decoder: cpu (the CPU renderer draws on host frames)" in out
    assert "INFO: encoder: NVENC H.264 MP4" in out  # NVENC takes host frames too (uploaded once)
    assert not [call for call in fake.calls if call[0] == "SimpleDecoder"]


def test_cli_nvenc_error_2_is_one_line(fake, cli, clip, tmp_path, monkeypatch, capsys):
    fake.fail_encoder = NVENC_ERROR
    monkeypatch.chdir(tmp_path)
    assert cli.main([str(clip), "--encoder", "nvenc", "-o", "out.mp4", "--max-frames", "2"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors == ["overlay_video.py: error: encoder 'nvenc' was requested but NVENC cannot start (PyNvVCException: "
                      "PyNvEncoder constructor failed: NVENC error 2 (NV_ENC_ERR_NO_ENCODE_DEVICE)). Choose encoder "
                      "'cpu' (x264)."]
    assert list(tmp_path.iterdir()) == []
