"""NVDEC and NVENC on the GPU with the real PyNvVideoCodec (the nvcodec extra).

Skipped where CuPy has no GPU (conftest) or PyNvVideoCodec is not installed;
where it is installed, NVDEC must work (a failure says why). NVENC tests skip
with the reason where the GPU has no NVENC (H100, H200), and the fallback to
x264 is checked there instead.
"""

import importlib.util
import logging
from pathlib import Path

import av
import numpy as np
import pytest
from fake_nvcodec import forget_probes
from trackoverlay.utils.core.log import LOGGER
from trackoverlay.utils.tracks.contract import Tracks
from trackoverlay.utils.tracks.track_file import save_tracks_json
from trackoverlay.utils.video import nvcodec
from trackoverlay.utils.video.io import VideoWriter, iter_video_frames
from trackoverlay.utils.video.nvcodec import (
    NvcodecUnavailable,
    NvdecFrames,
    NvencWriter,
    nv12_to_rgb,
    open_video_writer,
    probe_nvdec,
    rgb_to_yuv420,
)
from video_clips import colour_frame, decoded, frame_times, make_video

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(importlib.util.find_spec("PyNvVideoCodec") is None,
                                                  reason="PyNvVideoCodec is not installed (the nvcodec extra)")]
SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "overlay_video.py"
PYAV_MATCH = 4  # levels, NVDEC's frames against PyAV's: FFmpeg's fast YUV->RGB runs 1-3 levels low (3 on the
#                CPU in test_nvcodec.py), and float32 on the GPU may round the other way (+1)


@pytest.fixture(scope="module", autouse=True)
def nvdec():
    """NVDEC must start where PyNvVideoCodec is installed; the probes are looked up afresh and forgotten after."""
    forget_probes()
    available, reason = probe_nvdec()
    assert available, f"PyNvVideoCodec is installed but NVDEC does not work: {reason}"
    yield
    forget_probes()


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """H.264 with B-frames: 320x240 (BT.601 when untagged), 1280x720 (BT.709), and 320x240 turned 90 degrees."""
    folder = tmp_path_factory.mktemp("nvdec_gpu")
    return {"sd": make_video(folder / "sd.mp4", frames=12, width=320, height=240, picture=colour_frame),
            "hd": make_video(folder / "hd.mp4", frames=6, width=1280, height=720, picture=colour_frame),
            "turned": make_video(folder / "turned.mp4", frames=12, width=320, height=240, picture=colour_frame,
                                 rotation=90)}


def pyav_frames(path, start=0):
    frames = iter_video_frames(path, start)
    return list(frames.timed())


def compare(ours, theirs, tolerance=PYAV_MATCH):
    """Index, time and pixels of NVDEC's frames against PyAV's, with the worst frame named on failure."""
    import cupy

    assert [(item.index, item.time) for item in ours] == [(item.index, item.time) for item in theirs]
    worst = []
    for mine, reference in zip(ours, theirs):
        assert isinstance(mine.image, cupy.ndarray), f"frame {mine.index} is not in GPU memory: {type(mine.image)}"
        difference = np.abs(cupy.asnumpy(mine.image).astype(np.int16) - reference.image)
        worst.append((int(difference.max()), float(difference.mean()), mine.index))
    assert max(worst)[0] <= tolerance, f"(max, mean, frame) per frame: {worst}"


@pytest.mark.parametrize("name", ["sd", "hd"])
def test_nvdec_decodes_into_gpu_memory_like_pyav(clips, monkeypatch, name):
    def no_pyav(*args, **kwargs):
        raise AssertionError("PyAV was asked to decode frames")

    monkeypatch.setattr(nvcodec, "iter_video_frames", no_pyav)  # every frame comes from NVDEC
    frames = NvdecFrames(clips[name])  # direct: a problem raises here instead of falling back
    ours = list(frames.timed())
    frames.close()
    monkeypatch.undo()
    compare(ours, pyav_frames(clips[name]))
    assert frames.stats.read == len(ours) and not frames.stats.ended_early


def test_nvdec_planes_are_ffmpegs_planes(clips):
    """H.264 decoding is exact, so NVDEC's NV12 must equal FFmpeg's yuv420p bit for bit (this checks the layout)."""
    import cupy

    with av.open(str(clips["sd"])) as container:
        stored = [frame.to_ndarray() for frame in container.decode(video=0)]  # [H * 3 / 2, W] I420, as stored
    frames = NvdecFrames(clips["sd"])
    planes = list(frames.planes())
    frames.close()
    assert len(planes) == len(stored)
    for item, i420 in zip(planes, stored):
        luma, chroma = cupy.asnumpy(item.luma), cupy.asnumpy(item.chroma)
        u, v = i420[240:].reshape(2, 120, 160)
        wrong = (int(np.count_nonzero(luma != i420[:240])), int(np.count_nonzero(chroma[..., 0] != u)),
                 int(np.count_nonzero(chroma[..., 1] != v)))
        assert wrong == (0, 0, 0), f"frame {item.index}: differing Y, Cb, Cr samples {wrong}"
        assert (item.matrix, item.full_range) == ("smpte170m", False)


def test_nvdec_from_a_frame_of_a_turned_video(clips):
    frames = NvdecFrames(clips["turned"], start=5)
    ours = list(frames.timed())
    frames.close()
    assert ours[0].image.shape == (320, 240, 3)
    compare(ours, pyav_frames(clips["turned"], 5))


def test_colour_conversions_agree_on_gpu_and_cpu():
    import cupy

    rgb = colour_frame(4, 320, 240)
    host = rgb_to_yuv420(rgb)
    device = rgb_to_yuv420(cupy.asarray(rgb))
    for plane, twin in zip(host, device):
        assert np.abs(cupy.asnumpy(twin).astype(np.int16) - plane).max() <= 1
    chroma = np.stack(host[1:], axis=-1)
    back = nv12_to_rgb(cupy.asarray(host[0]), cupy.asarray(chroma), "itu709")
    assert np.abs(cupy.asnumpy(back).astype(np.int16) - nv12_to_rgb(host[0], chroma, "itu709")).max() <= 1


# -- the command line ---------------------------------------------------------------------------------------------

@pytest.fixture
def cli():
    """The script, run in-process; the pack logger's setup (the script's own) is undone afterwards."""
    spec = importlib.util.spec_from_file_location("overlay_video_nvcodec_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    saved = LOGGER.propagate, LOGGER.level, list(LOGGER.handlers)
    yield module
    LOGGER.propagate, LOGGER.level = saved[:2]
    LOGGER.handlers[:] = saved[2]


def test_cli_nvdec_render_matches_the_cpu_decoded_render(clips, cli, tmp_path, capsys):
    import cv2

    path = np.tile(np.array([[[60.0, 50.0], [250.0, 120.0], [140.0, 200.0]]], np.float32), (12, 1, 1))
    save_tracks_json(Tracks(path, np.ones((12, 3), bool)), tmp_path / "tracks.json")
    common = [str(clips["sd"]), "--tracks", str(tmp_path / "tracks.json"), "--backend", "gpu", "--encoder", "cpu",
              "--crf", "0", "--gradient", "--color-mode", "track"]  # lossless x264: only the decoders differ
    for decoder in ("nvdec", "cpu"):
        code = cli.main([*common, "--decoder", decoder, "-o", str(tmp_path / f"{decoder}.mp4"), "--png-dir",
                         str(tmp_path / f"{decoder}_png")])
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"INFO: decoder: {decoder} (requested)" in out, out
        assert "PyAV decodes" not in out and "NVDEC failed" not in out, out  # no fallback, at the start or later
    videos = [decoded(tmp_path / f"{decoder}.mp4") for decoder in ("nvdec", "cpu")]
    assert frame_times(tmp_path / "nvdec.mp4") == frame_times(tmp_path / "cpu.mp4")
    worst = [(int(np.abs(a.astype(np.int16) - b).max()), float(np.abs(a.astype(np.int16) - b).mean()))
             for a, b in zip(*videos, strict=True)]  # through device I420 planes vs the CPU's converter
    assert max(m for m, _ in worst) <= 10 and max(m for _, m in worst) <= 2.0, f"(max, mean) per frame: {worst}"
    for name in sorted(p.name for p in (tmp_path / "cpu_png").iterdir()):  # RGB downloaded once per frame
        ours, theirs = (cv2.imread(str(tmp_path / f"{d}_png" / name)).astype(np.int16) for d in ("nvdec", "cpu"))
        assert np.abs(ours - theirs).max() <= PYAV_MATCH + 1, name  # + 1: blending rounds


# -- NVENC --------------------------------------------------------------------------------------------------------

def test_the_gpu_renderer_survives_nvenc_probing(clips, cli, tmp_path, capsys):
    """--encoder auto tries NVENC first; where it cannot start, the GPU renderer must still draw on the GPU."""
    path = np.tile(np.array([[[60.0, 50.0], [250.0, 120.0]]], np.float32), (12, 1, 1))
    save_tracks_json(Tracks(path, np.ones((12, 2), bool)), tmp_path / "tracks.json")
    for decoder in ("cpu", "nvdec"):
        code = cli.main([str(clips["sd"]), "--tracks", str(tmp_path / "tracks.json"), "--backend", "gpu",
                         "--encoder", "auto", "--decoder", decoder, "-o", str(tmp_path / f"{decoder}.mp4")])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "GPU rendering failed" not in out and "PyAV decodes" not in out, out


def nvenc_or_reason(path):
    try:
        return NvencWriter(path, 320, 240, fps=25), None
    except NvcodecUnavailable as why:
        return None, str(why)


def test_nvenc_encodes_gpu_frames(tmp_path):
    import cupy

    writer, reason = nvenc_or_reason(tmp_path / "out.mp4")
    if writer is None:
        pytest.skip(f"no NVENC here: {reason}")
    frames = [colour_frame(index, 320, 240) for index in range(10)]
    for index, frame in enumerate(frames):
        writer.write(cupy.asarray(frame), index / 25)
    writer.close()
    assert frame_times(tmp_path / "out.mp4") == pytest.approx([index / 25 for index in range(10)], abs=1e-3)
    worst = [float(np.abs(ours.astype(np.int16) - frame).mean())
             for ours, frame in zip(decoded(tmp_path / "out.mp4"), frames, strict=True)]
    assert max(worst) < 3, f"mean difference per frame: {worst}"


def test_without_nvenc_x264_takes_over(tmp_path, caplog):
    writer, reason = nvenc_or_reason(tmp_path / "probe.mp4")
    if writer is not None:
        writer.abort()
        pytest.skip("this GPU has NVENC; the fallback is tested with a stand-in in test_nvcodec.py")
    with caplog.at_level(logging.INFO, logger="trackoverlay"):
        fallback = open_video_writer(tmp_path / "out.mp4", "auto", 320, 240, fps=25)
    assert type(fallback) is VideoWriter
    assert f"encoder: libx264 on the CPU, not NVENC: {reason}" in caplog.text
    fallback.abort()
