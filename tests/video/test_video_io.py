"""Video in and out: probe, streaming decode, atomic H.264 writer, PNG."""

import logging
import os
import stat
import itertools
import types
from fractions import Fraction

import av
import cv2
import numpy as np
import pytest
from trackoverlay.utils.video.io import VideoWriter, iter_video_frames, open_video, probe_video, write_png
from video_clips import make_video


def gradient_frame(index, height=48, width=64):
    """A smooth frame whose brightness rises with ``index`` (compresses well)."""
    frame = np.zeros((height, width, 3), np.uint8)
    frame[..., 0] = np.linspace(0, 200, width, dtype=np.uint8)[None, :]
    frame[..., 1] = 20 + 10 * index
    frame[..., 2] = 128
    return frame


def write_clip(path, count=8, height=48, width=64, fps=24):
    frames = [gradient_frame(i, height, width) for i in range(count)]
    with VideoWriter(path, fps=fps, crf=12) as writer:
        for frame in frames:
            writer.write(frame)
    return frames


def test_write_read_round_trip(tmp_path):
    target = tmp_path / "clip.mp4"
    frames = write_clip(target)
    assert target.is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["clip.mp4"]  # no temp file left
    info = probe_video(target)
    assert (info.width, info.height, info.frame_count) == (64, 48, 8)
    assert info.fps == 24
    decoded = list(iter_video_frames(target))
    assert len(decoded) == 8
    for original, back in zip(frames, decoded):
        assert back.shape == (48, 64, 3) and back.dtype == np.uint8
        assert abs(float(back.mean()) - float(original.mean())) < 2.0


def test_input_frames_not_modified(tmp_path):
    frame = gradient_frame(0, 25, 33)
    before = frame.copy()
    with VideoWriter(tmp_path / "odd.mp4") as writer:
        writer.write(frame)
    np.testing.assert_array_equal(frame, before)


def test_odd_size_is_padded_to_even(tmp_path):
    target = tmp_path / "odd.mp4"
    write_clip(target, count=3, height=25, width=33)
    info = probe_video(target)
    assert (info.width, info.height) == (34, 26)
    first = next(iter_video_frames(target))
    assert first.shape == (26, 34, 3)


def test_fractional_fps(tmp_path):
    target = tmp_path / "ntsc.mp4"
    write_clip(target, count=4, fps=30000 / 1001)
    assert float(probe_video(target).fps) == pytest.approx(29.97, abs=0.01)


@pytest.mark.parametrize("interrupt", [RuntimeError("boom"), KeyboardInterrupt()])
def test_interrupted_writer_leaves_no_file(tmp_path, interrupt):
    target = tmp_path / "broken.mp4"
    with pytest.raises(type(interrupt)):
        with VideoWriter(target) as writer:
            writer.write(gradient_frame(0))
            writer.write(gradient_frame(1))
            raise interrupt
    assert list(tmp_path.iterdir()) == []


def test_abort_and_empty_writer_leave_no_file(tmp_path):
    target = tmp_path / "never.mp4"
    writer = VideoWriter(target)
    writer.write(gradient_frame(0))
    writer.abort()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="no frames"):
        with VideoWriter(target):
            pass
    assert list(tmp_path.iterdir()) == []


def test_existing_file_is_replaced_only_on_success(tmp_path):
    target = tmp_path / "out.mp4"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with VideoWriter(target) as writer:
            writer.write(gradient_frame(0))
            raise RuntimeError
    assert target.read_bytes() == b"old"
    write_clip(target, count=2)
    assert probe_video(target).frame_count == 2


def test_unwritable_output_fails_at_open(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="missing"):
        VideoWriter(tmp_path / "missing" / "out.mp4")
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        VideoWriter(tmp_path)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", refuse)  # folder modes do not stop root
    with pytest.raises(PermissionError, match=r"out.mp4.*not writable.*Permission denied"):
        VideoWriter(tmp_path / "out.mp4")


def test_finished_video_permissions_follow_the_umask(tmp_path):
    target = tmp_path / "shared.mp4"
    previous = os.umask(0o022)
    try:
        with VideoWriter(target) as writer:
            writer.write(np.zeros((16, 16, 3), np.uint8))
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644


def test_bad_frames_and_parameters(tmp_path):
    target = tmp_path / "bad.mp4"
    for kwargs, word in (({"fps": 0}, "fps"), ({"fps": "fast"}, "fps"), ({"crf": 60}, "crf")):
        with pytest.raises(ValueError, match=word):
            VideoWriter(target, **kwargs)
    with VideoWriter(target) as writer:
        with pytest.raises(ValueError, match=r"uint8 RGB.*float32"):
            writer.write(np.zeros((8, 8, 3), np.float32))
        with pytest.raises(ValueError, match=r"\[8, 8, 4\]"):
            writer.write(np.zeros((8, 8, 4), np.uint8))
        writer.write(gradient_frame(0))
        with pytest.raises(ValueError, match="first frame"):
            writer.write(gradient_frame(1, 32, 32))
    with pytest.raises(ValueError, match="closed"):
        writer.write(gradient_frame(0))


def test_missing_empty_and_non_video_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.mp4"):
        probe_video(tmp_path / "nope.mp4")
    with pytest.raises(FileNotFoundError, match="nope.mp4"):
        iter_video_frames(tmp_path / "nope.mp4")
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="empty.mp4.*empty"):
        probe_video(empty)
    text = tmp_path / "notes.mp4"
    text.write_text("not a video")
    with pytest.raises(ValueError, match="notes.mp4 is not a readable video"):
        iter_video_frames(text)
    with pytest.raises(ValueError, match="not a file"):
        probe_video(tmp_path)


def test_file_without_video_stream(tmp_path):
    target = tmp_path / "audio.wav"
    container = av.open(str(target), "w")
    stream = container.add_stream("pcm_s16le", rate=8000)
    frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
    frame.sample_rate = 8000
    container.mux(stream.encode(frame))
    container.mux(stream.encode(None))
    container.close()
    with pytest.raises(ValueError, match="audio.wav has no video stream"):
        probe_video(target)


def test_truncated_file_is_rejected(tmp_path):
    target = tmp_path / "cut.mp4"
    write_clip(target)
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])  # the index (moov) is at the end: unreadable
    with pytest.raises(ValueError, match="cut.mp4 is not a readable video"):
        probe_video(target)


def _streamable_clip(path, count=30):
    """An MP4 with its index first (faststart), noisy frames so each packet is large."""
    rng = np.random.default_rng(0)
    container = av.open(str(path), "w", format="mp4", options={"movflags": "faststart"})
    stream = container.add_stream("libx264", rate=24)
    stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
    for index in range(count):
        frame = av.VideoFrame.from_ndarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8), format="rgb24")
        frame.pts = index
        container.mux(stream.encode(frame))
    container.mux(stream.encode(None))
    container.close()


def test_truncated_streamable_file_yields_what_is_there(tmp_path):
    target = tmp_path / "cut.mp4"
    _streamable_clip(target)
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    frames = list(iter_video_frames(target))
    assert 0 < len(frames) < 30
    assert all(frame.shape == (48, 64, 3) for frame in frames)


def test_corrupt_middle_does_not_crash(tmp_path):
    target = tmp_path / "corrupt.mp4"
    _streamable_clip(target)
    data = bytearray(target.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 2000] = bytes(2000)
    target.write_bytes(bytes(data))
    frames = list(iter_video_frames(target))
    assert 0 < len(frames) <= 30
    assert all(frame.shape == (48, 64, 3) for frame in frames)


class _Frame:
    format = types.SimpleNamespace(name="rgb24")
    rotation, pts, dts, time_base = 0, None, None, None

    def __init__(self, value, fail=False):
        self.value, self.fail = value, fail

    def to_ndarray(self, format, **options):
        if self.fail:
            raise ValueError("unsupported")
        return np.full((2, 2, 3), self.value, np.uint8)


class _Packet:
    def __init__(self, frames=(), error=None):
        self.frames, self.error = list(frames), error

    def decode(self):
        if self.error:
            raise self.error
        return self.frames


class _Container:
    format = types.SimpleNamespace(name="mp4")

    def __init__(self, packets):
        self.packets = packets

    def demux(self, stream):
        return iter(self.packets)


def _decoded(packets):
    """Images from the decoder loop over fake packets, and its counts."""
    from trackoverlay.utils.video.io import DecodeStats, _decode

    stats = DecodeStats()
    return [item.image for item in _decode(_Container(packets), None, "clip.mp4", 0, stats)], stats


def test_bad_frames_mid_stream_are_logged_and_skipped(caplog):
    bad = av.error.InvalidDataError(1094995529, "Invalid data found when processing input")
    packets = [_Packet([_Frame(0)]), _Packet(error=bad), _Packet([_Frame(2), _Frame(3, fail=True)]),
               _Packet([_Frame(4)])]
    with caplog.at_level(logging.WARNING, logger="trackoverlay"):
        images, stats = _decoded(packets)
    assert [int(frame[0, 0, 0]) for frame in images] == [0, 2, 4]
    assert (stats.read, stats.failed, stats.ended_early) == (3, 2, False)
    assert "clip.mp4: frame 1 failed to decode" in caplog.text
    assert "clip.mp4: frame 3 failed to convert" in caplog.text


def test_demuxer_error_ends_stream_with_warning(caplog):
    def packets():
        yield _Packet([_Frame(7)])
        raise av.error.InvalidDataError(1094995529, "Invalid data found when processing input")

    with caplog.at_level(logging.WARNING, logger="trackoverlay"):
        frames, stats = _decoded(packets())
    assert len(frames) == 1 and stats.ended_early
    assert "stopped reading at frame 1" in caplog.text


def test_write_png_round_trip(tmp_path):
    frame = gradient_frame(3)
    target = tmp_path / "frame.png"
    write_png(target, frame)
    back = cv2.cvtColor(cv2.imread(str(target), cv2.IMREAD_UNCHANGED), cv2.COLOR_BGR2RGB)
    np.testing.assert_array_equal(back, frame)
    rgba = np.dstack([frame, np.full(frame.shape[:2], 77, np.uint8)])
    write_png(tmp_path / "alpha.png", rgba)
    back = cv2.cvtColor(cv2.imread(str(tmp_path / "alpha.png"), cv2.IMREAD_UNCHANGED), cv2.COLOR_BGRA2RGBA)
    np.testing.assert_array_equal(back, rgba)
    with pytest.raises(ValueError, match="bad.png"):
        write_png(tmp_path / "bad.png", frame.astype(np.float32))
    with pytest.raises(FileNotFoundError):
        write_png(tmp_path / "missing" / "x.png", frame)


def test_colours_survive_the_round_trip_and_are_tagged_bt709(tmp_path):
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (200, 50, 30), (0, 0, 0), (255, 255, 255), (90, 160, 220)]
    frames = [np.full((32, 48, 3), colour, np.uint8) for colour in colours]
    with VideoWriter(tmp_path / "solid.mp4", crf=0, preset="ultrafast") as writer:
        for frame in frames:
            writer.write(frame)
    with av.open(str(tmp_path / "solid.mp4")) as container:
        first = next(container.decode(video=0))
        assert (first.colorspace, first.color_range) == (1, 1)  # BT.709, limited range
    for frame, back in zip(frames, iter_video_frames(tmp_path / "solid.mp4")):
        assert np.abs(back.astype(int) - frame).max() <= 2, frame[0, 0]


def test_bt709_converter_matches_ffmpeg_within_one_level():
    from trackoverlay.utils.video.io import Bt709Converter

    rng = np.random.default_rng(1)
    smooth = cv2.resize(rng.integers(0, 256, (9, 12, 3), dtype=np.uint8), (96, 64), interpolation=cv2.INTER_CUBIC)
    converter = Bt709Converter(64, 96, workers=3)
    planes = converter.convert(smooth)
    converter.close()
    reference = av.VideoFrame.from_ndarray(smooth, format="rgb24").reformat(
        format="yuv420p", dst_colorspace="itu709", dst_color_range="MPEG").to_ndarray()
    assert np.abs(planes[:64].astype(int) - reference[:64]).max() <= 1  # luma
    assert np.abs(planes[64:].astype(int) - reference[64:]).mean() <= 1.0  # chroma (2x2 averages vs FFmpeg's filter)
    def back(i420):
        return av.VideoFrame.from_ndarray(i420, format="yuv420p").to_ndarray(
            format="rgb24", src_colorspace="itu709", src_color_range="MPEG").astype(int)

    # saturated gradients lose some colour to 4:2:0 either way: no more than through FFmpeg's own converter
    assert np.abs(back(planes) - smooth).mean() <= np.abs(back(reference) - smooth).mean() + 0.5


def test_planes_written_equal_the_frames_they_come_from(tmp_path):
    from trackoverlay.utils.video.io import Bt709Converter

    rng = np.random.default_rng(2)
    frames = [cv2.resize(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8), (96, 64)) for _ in range(3)]
    converter = Bt709Converter(64, 96, workers=1)
    with VideoWriter(tmp_path / "rgb.mp4", fps=25, crf=0) as rgb, VideoWriter(tmp_path / "i420.mp4", fps=25,
                                                                              crf=0) as planes:
        for index, frame in enumerate(frames):
            rgb.write(frame, index / 25)
            planes.write_planes(converter.convert(frame).copy(), index / 25)
    converter.close()
    for ours, theirs in zip(iter_video_frames(tmp_path / "i420.mp4"), iter_video_frames(tmp_path / "rgb.mp4"),
                            strict=True):
        assert np.array_equal(ours, theirs)  # lossless x264 of the same planes


@pytest.mark.parametrize("name, planes, message", [
    ("a.mp4", np.zeros((64, 96), np.uint8), r"I420 planes \[H \* 3 / 2, W\] .*got uint8 \[64, 96\]"),  # not 3/2 H
    ("a.mp4", np.zeros((75, 96), np.uint8), r"H a multiple of 4 and W even"),  # H = 50 does not pack
    ("a.mp4", np.zeros((96, 96, 3), np.uint8), r"got uint8 \[96, 96, 3\]"),
    ("a.gif", np.zeros((96, 96), np.uint8), r"\(GIF\)"),
])
def test_write_planes_refuses_what_it_cannot_take(tmp_path, name, planes, message):
    writer = VideoWriter(tmp_path / name, fps=25)
    with pytest.raises(ValueError, match=message):
        writer.write_planes(planes)
    writer.abort()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("transfer, tag, name", [("arib-std-b67", "hlg", "HLG"), ("smpte2084", "pq", "PQ")])
def test_hdr_video_is_read_with_a_warning(tmp_path, caplog, transfer, tag, name):
    """HDR frames are read as they are stored (no tone mapping), so the output would look pale: say so."""
    path = make_video(tmp_path / f"{tag}.mp4", frames=2, options={
        "x264-params": f"colorprim=bt2020:transfer={transfer}:colormatrix=bt2020nc"})
    plain = make_video(tmp_path / "sdr.mp4", frames=2)
    with caplog.at_level(logging.WARNING, logger="trackoverlay"):
        for clip in (path, plain):
            _, frames = open_video(clip)
            assert len(list(frames)) == 2
    assert caplog.text.count("HDR video") == 1
    assert f"{tag}.mp4: HDR video ({name} transfer)" in caplog.text and "tone mapping" in caplog.text


def _gif_delays(path) -> list:
    with av.open(str(path)) as container:
        return [(packet.pts, packet.duration) for packet in container.demux(video=0) if packet.size]


@pytest.mark.parametrize("fps, kept", [(30, list(range(12))), (60, [0, 1, 3, 4, 6, 7, 9, 10])])
def test_gif_frames_are_at_least_two_centiseconds_apart(tmp_path, caplog, fps, kept):
    """Players hold a GIF frame with a 0 or 1 cs delay for 10 cs: a 60 fps GIF would stutter, so frames due
    less than 2 cs after the last one kept are left out, with a warning; the kept ones stay on time."""
    with caplog.at_level(logging.WARNING, logger="trackoverlay"), VideoWriter(tmp_path / "a.gif", fps=fps) as writer:
        for index in range(12):
            writer.write(gradient_frame(index))
    delays = _gif_delays(tmp_path / "a.gif")
    assert [pts for pts, _ in delays] == [round(100 * index / fps) for index in kept]
    assert min(duration for _, duration in delays) >= 2
    assert writer.frames_left_out == 12 - len(kept)
    assert ("a GIF shows at most 50 frames a second" in caplog.text) == (fps == 60)
    assert caplog.text.count("GIF shows") <= 1


def bar_avi(path, count=40, ticks_per_frame=1, fps=25):
    """An H.264 AVI with B-frames (x264's defaults) of a white bar moving 3 px a frame, its time base
    ``ticks_per_frame`` ticks a frame (FFmpeg muxed H.264 AVIs at two: their headers count half frames)."""
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 160, 96, "yuv420p"
        stream.time_base = stream.codec_context.time_base = Fraction(1, fps * ticks_per_frame)
        for index in range(count):
            image = np.zeros((96, 160, 3), np.uint8)
            image[:, 3 * index:3 * index + 8] = 255
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts, frame.time_base = ticks_per_frame * index, stream.time_base
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))


@pytest.mark.parametrize("ticks_per_frame", [1, 2])
def test_an_avi_with_b_frames_is_timed_and_counted_by_its_frames(tmp_path, ticks_per_frame):
    """An AVI stores no presentation times, and FFmpeg hands H.264 B-frames made-up ones, shuffled (the
    output stuttered: frames shown 20 to 80 ms at 25 fps). Frames are timed by their decode stamps there:
    every step is 1/25 s, in order, and seeking gives a full decode's frame. A header counting half frames
    (FFmpeg's H.264 AVIs) gives the shown rate and count (it said 50 fps and 80 frames, and a read of 40 was
    reported as a truncated file)."""
    path = tmp_path / "bars.avi"
    bar_avi(path, ticks_per_frame=ticks_per_frame)
    with av.open(str(path)) as container:
        assert any(b < a for a, b in itertools.pairwise(f.pts for f in container.decode(video=0)))  # shuffled
    info = probe_video(path)
    assert (info.fps, info.frame_count) == (25, 40)
    video = iter_video_frames(path)
    frames = list(video.timed())
    assert len(frames) == 40
    assert set(np.diff([f.time for f in frames])) == {Fraction(1, 25)}
    assert [int(np.argmax(f.image[48, :, 1] > 128)) for f in frames] == [3 * i for i in range(40)]
    for start in (1, 7, 30):
        video = iter_video_frames(path, start)
        first = next(video.timed())
        assert first.index == start
        np.testing.assert_array_equal(first.image, frames[start].image)
