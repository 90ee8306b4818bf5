"""The overlay composited in the video's own YUV: the formula, who owns the planes, colour tags, and the
YUV path against the RGB path it replaces for 8-bit 4:2:0 video."""

import dataclasses
import logging

import av
import numpy as np
import pytest
from trackoverlay.utils.draw.styles import BoxStyle, LineStyle
from trackoverlay.utils.graph.neighbours import GraphParams
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.raster.fallback import FallbackRenderer
from trackoverlay.utils.raster.glow import Glow
from trackoverlay.utils.raster.renderer import FramesHalfWritten
from trackoverlay.utils.tracks.contract import Tracks
from trackoverlay.utils.tracks.detect import TrackDetector
from trackoverlay.utils.video import io as video_io
from trackoverlay.utils.video import stream
from trackoverlay.utils.video.io import VideoWriter, iter_video_frames, probe_video
from trackoverlay.utils.video.stream import (
    DetectedPoints,
    FrameSource,
    OverlaySpec,
    TrackPoints,
    render_video,
)
from trackoverlay.utils.video.yuv import (
    PlaneBuffers,
    YuvPlanes,
    composite_planes,
    overlay_planes,
    planar_layer,
    plane_shapes,
    planes_from_frame,
    yuv_coefficients,
)
from video_clips import make_video

SPEC = OverlaySpec(GraphParams(k=2), LineStyle(width=2.0, color="#E08050", curve="straight"),
                   BoxStyle(size=14, stroke_width=2.0, fill_opacity=0.3, color="#50C090"))


def flat_planes(height=8, width=8, luma=100, u=128, v=128, **tags) -> YuvPlanes:
    return YuvPlanes(np.full((height, width), luma, np.uint8), np.full((height // 2, width // 2), u, np.uint8),
                     np.full((height // 2, width // 2), v, np.uint8), **tags)


def layer(pixels, rgb, alpha):
    """Sparse-layer fields: flat pixels, premultiplied colour [3, M] and alpha [M]."""
    alpha = np.asarray(alpha, np.float32)
    return np.asarray(pixels, np.int64), (np.asarray(rgb, np.float32).T * alpha).astype(np.float32), alpha


def over(planes, pixels, rgb, alpha) -> None:
    """Composite straight colours ``rgb`` [M, 3] with ``alpha`` at flat ``pixels`` over ``planes``."""
    composite_planes(planes, planar_layer(*layer(pixels, rgb, alpha), planes))


def decoded_planes(path) -> list:
    """Every frame's (Y, U, V) planes as int arrays."""
    with av.open(str(path)) as container:
        frames = list(container.decode(video=0))
    return [tuple(np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, :p.width].astype(int)
                  for p in frame.planes) for frame in frames]


def render_both(source_path, tracks, tmp_path, renderer, spec=SPEC, points=None) -> dict:
    """The clip rendered losslessly through the YUV path and through the RGB path: {"yuv": out, "rgb": out}."""
    outputs = {}
    for path_name, yuv in (("yuv", True), ("rgb", False)):
        stream._YUV_COMPOSITE = yuv
        try:
            output = tmp_path / f"{path_name}.mp4"
            render_video(FrameSource.from_video(source_path), points() if points else TrackPoints(tracks), spec,
                         renderer, output, crf=0, preset="ultrafast")
            outputs[path_name] = output
        finally:
            stream._YUV_COMPOSITE = True
    return outputs


def random_tracks(frames, count, width, height, seed=0, region=1.0) -> Tracks:
    rng = np.random.default_rng(seed)
    path = (rng.random((frames, count, 2)) * [width * region, height]).astype(np.float32)
    return Tracks(path, np.ones((frames, count), bool))


def smooth_clip(path, frames=4, width=160, height=96, colorspace=1, full_range=False):
    """A smooth, in-gamut clip written from planes with the given colour tags (losslessly)."""
    y, x = np.mgrid[0:height, 0:width]
    with VideoWriter(path, fps=25, crf=0, preset="ultrafast") as writer:
        for index in range(frames):
            luma = (60 + 0.5 * x + 0.4 * y + 2 * index).astype(np.uint8)
            u = np.full((height // 2, width // 2), 118, np.uint8) + (x[::2, ::2] // 16).astype(np.uint8)
            v = np.full((height // 2, width // 2), 136, np.uint8) - (y[::2, ::2] // 16).astype(np.uint8)
            writer.write(YuvPlanes(luma, u, v, colorspace=colorspace, full_range=full_range))
    return path


# ------------------------------------------------------------------ the formula


@pytest.mark.parametrize("full_range, white", [(False, 235), (True, 255)])
def test_opaque_white_gives_peak_luma_and_chroma_takes_the_block_mean(full_range, white):
    planes = flat_planes(luma=100, u=100, v=160, full_range=full_range)
    over(planes, [2 * 8 + 3], [(1.0, 1.0, 1.0)], [1.0])
    expected = np.full((8, 8), 100)
    expected[2, 3] = white
    np.testing.assert_array_equal(planes.y, expected)
    # one opaque white pixel of four: (1 - 1/4) * U + 1/4 * 128
    assert (planes.u[1, 1], planes.v[1, 1]) == (round(0.75 * 100 + 32), round(0.75 * 160 + 32))
    assert (planes.u != 100).sum() == 1 and (planes.v != 160).sum() == 1


def test_half_alpha_gives_the_midpoint():
    planes = flat_planes(luma=101, u=90, v=200)
    block = [0, 1, 8, 9]  # the four pixels of chroma block (0, 0)
    over(planes, block, [(1.0, 1.0, 1.0)] * 4, [0.5] * 4)
    assert planes.y[0, 0] == (101 + 235) // 2 and planes.y[1, 1] == 168
    assert (planes.u[0, 0], planes.v[0, 0]) == ((90 + 128) // 2, (200 + 128) // 2)


def test_zero_alpha_leaves_the_planes_bit_identical_and_inputs_untouched():
    rng = np.random.default_rng(4)
    planes = YuvPlanes(rng.integers(0, 256, (16, 16), dtype=np.uint8), rng.integers(0, 256, (8, 8), dtype=np.uint8),
                       rng.integers(0, 256, (8, 8), dtype=np.uint8))
    before = [plane.copy() for plane in (planes.y, planes.u, planes.v)]
    pixels, color, alpha = layer(np.arange(0, 256, 3), rng.random((86, 3)), np.zeros(86))
    given = [pixels.copy(), color.copy(), alpha.copy()]
    composite_planes(planes, planar_layer(pixels, color, alpha, planes))
    for plane, old in zip((planes.y, planes.u, planes.v), before):
        np.testing.assert_array_equal(plane, old)
    for array, old in zip((pixels, color, alpha), given):
        np.testing.assert_array_equal(array, old)


@pytest.mark.parametrize("colorspace, matrix, full_range", [(1, "itu709", False), (6, "smpte170m", False),
                                                            (5, "itu601", True)])
def test_opaque_colours_match_ffmpegs_own_conversion(colorspace, matrix, full_range):
    """An opaque layer over every pixel gives what FFmpeg's RGB -> YUV gives for that colour (within 1 level)."""
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (200, 50, 30), (90, 160, 220), (255, 255, 255), (0, 0, 0)]
    for colour in colours:
        planes = flat_planes(16, 16, luma=40, u=70, v=180, colorspace=colorspace, full_range=full_range)
        over(planes, np.arange(256), [np.array(colour) / 255.0] * 256, np.ones(256))
        reference = av.VideoFrame.from_ndarray(np.full((16, 16, 3), colour, np.uint8), format="rgb24").reformat(
            format="yuv420p", dst_colorspace=matrix, dst_color_range="JPEG" if full_range else "MPEG")
        for plane, ours in zip(reference.planes, (planes.y, planes.u, planes.v)):
            theirs = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)[:, :plane.width]
            assert np.abs(ours.astype(int) - theirs).max() <= 1, (colour, matrix)


def test_coefficients_map_white_and_black_to_the_range_ends():
    for full_range, (black, white) in ((False, (16, 235)), (True, (0, 255))):
        matrix, offset = yuv_coefficients(1, full_range)
        np.testing.assert_allclose(matrix @ np.ones(3) + offset, [white, 128, 128], atol=1e-3)
        np.testing.assert_allclose(offset, [black, 128, 128])


def test_bad_planes_are_refused():
    with pytest.raises(ValueError, match=r"H, W even and U, V \[H/2, W/2\]"):
        YuvPlanes(np.zeros((7, 8), np.uint8), np.zeros((3, 4), np.uint8), np.zeros((3, 4), np.uint8))
    with pytest.raises(ValueError, match="C-contiguous"):
        YuvPlanes(np.zeros((8, 16), np.uint8)[:, ::2], np.zeros((4, 4), np.uint8), np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="colorspace tag 2"):
        flat_planes(colorspace=2)
    with pytest.raises(ValueError, match="must be uint8"):
        YuvPlanes(np.zeros((8, 8), np.uint16), np.zeros((4, 4), np.uint16), np.zeros((4, 4), np.uint16))


# ------------------------------------------------------------------ decoding and encoding planes


def test_planes_are_copies_never_ffmpegs_buffers(tmp_path):
    clip = make_video(tmp_path / "clip.mp4", frames=2)
    with av.open(str(clip)) as container:
        frame = next(container.decode(video=0))
        buffers = [np.frombuffer(plane, np.uint8) for plane in frame.planes]
        before = [buffer.copy() for buffer in buffers]
        planes = planes_from_frame(frame)
        assert not any(np.shares_memory(ours, buffer) for ours in (planes.y, planes.u, planes.v)
                       for buffer in buffers)
        over(planes, np.arange(48 * 64), [(1.0, 0.5, 0.0)] * (48 * 64), np.ones(48 * 64))
        for buffer, old in zip(buffers, before):
            np.testing.assert_array_equal(buffer, old)
        assert (planes.y != before[0].reshape(48, -1)[:, :64]).all()


def test_plane_buffers_are_reused_only_once_nothing_holds_their_planes():
    """A frame's planes share one buffer; it is handed out again only after every plane (or a view of one)
    is gone, and new memory comes from the given allocator."""
    given = []
    buffers = PlaneBuffers(lambda nbytes: given.append(nbytes) or np.empty(nbytes, np.uint8))
    shapes = [(4, 6), (2, 3), (2, 3)]
    first = buffers.take(shapes)
    assert [plane.shape for plane in first] == shapes and given == [36]
    kept = first[2][1:, 1:]  # a view of the last plane keeps the whole frame's buffer
    del first
    second = buffers.take(shapes)
    assert buffers.allocated == 2 and not np.shares_memory(second[0], kept)
    del kept
    third = buffers.take(shapes)
    assert buffers.allocated == 2 and not any(np.shares_memory(a, b) for a in third for b in second)
    del second
    fourth = buffers.take(shapes)
    assert buffers.allocated == 2 and not np.shares_memory(fourth[0], third[0])


def test_decoded_planes_are_packed_in_one_array(tmp_path):
    """A decoded frame's planes are views of one flat array, Y then U then V (what a GPU copies in one
    transfer); planes in arrays of their own, or cut from a larger array, have none."""
    clip = make_video(tmp_path / "clip.mp4", frames=1)
    with av.open(str(clip)) as container:
        planes = planes_from_frame(next(container.decode(video=0)), buffers=PlaneBuffers())
    packed = planes.packed()
    np.testing.assert_array_equal(packed, np.concatenate([planes.y.ravel(), planes.u.ravel(), planes.v.ravel()]))
    packed[-1] ^= 0xFF
    assert planes.v[-1, -1] == packed[-1]  # the same memory, not a copy
    assert YuvPlanes(planes.y.copy(), planes.u.copy(), planes.v.copy()).packed() is None
    wider = np.zeros(planes.y.size * 2, np.uint8)
    cut = [wider[start:start + plane.size].reshape(plane.shape) for start, plane in
           zip((0, planes.y.size, planes.y.size + planes.u.size), (planes.y, planes.u, planes.v))]
    assert YuvPlanes(*cut).packed() is None


def test_plane_buffers_wait_for_the_encoder_to_let_go_of_wrapped_planes(tmp_path):
    """Planes wrapped for the encoder without a copy (PyAV's DLPack frames) keep their buffer out of reuse
    until FFmpeg's frame is gone, so a later frame never overwrites a picture still being encoded."""
    if not video_io._wraps_planes():
        pytest.skip("this PyAV copies planes into FFmpeg's frame; nothing to wait for")
    clip = make_video(tmp_path / "clip.mp4", frames=2)
    buffers = PlaneBuffers()
    with av.open(str(clip)) as container:
        decoded = list(container.decode(video=0))
    planes = planes_from_frame(decoded[0], buffers=buffers)
    picture = video_io._planes_frame(planes)
    want = picture.to_ndarray().copy()
    del planes
    again = planes_from_frame(decoded[1], buffers=buffers)
    assert buffers.allocated == 2
    np.testing.assert_array_equal(picture.to_ndarray(), want)
    del picture, again
    planes_from_frame(decoded[0], buffers=buffers)
    assert buffers.allocated == 2


def test_a_render_decodes_into_a_few_reused_buffers(tmp_path, cpu_renderer):
    """The YUV path allocates frame memory per frame in flight (the pipeline's queues), not per frame."""
    allocated = []

    class Counting(CpuRenderer):
        def host_array(self, nbytes):
            allocated.append(nbytes)
            return super().host_array(nbytes)

    clip = smooth_clip(tmp_path / "clip.mp4", frames=30)
    renderer = Counting()
    try:
        render_video(FrameSource.from_video(clip), TrackPoints(random_tracks(30, 8, 160, 96)), SPEC, renderer,
                     tmp_path / "out.mp4", crf=0, preset="ultrafast")
    finally:
        renderer.close()
    assert 1 <= len(allocated) <= stream.frames_in_flight(renderer) and set(allocated) == {160 * 96 * 3 // 2}


@pytest.mark.parametrize("wrapped", [True, False], ids=["planes-wrapped", "planes-copied"])
def test_planes_are_encoded_as_they_are(tmp_path, monkeypatch, wrapped):
    """Planes go to the encoder unchanged (lossless x264 gives them back bit for bit), wrapped without a copy
    where PyAV can, copied into FFmpeg's frame where it cannot (older PyAV)."""
    monkeypatch.setattr(video_io, "_wraps_planes", lambda: wrapped)
    rng = np.random.default_rng(8)
    pictures = [YuvPlanes(rng.integers(16, 236, (48, 64), dtype=np.uint8),
                          rng.integers(16, 241, (24, 32), dtype=np.uint8),
                          rng.integers(16, 241, (24, 32), dtype=np.uint8)) for _ in range(3)]
    with VideoWriter(tmp_path / "planes.mp4", crf=0, preset="ultrafast") as writer:
        for planes in pictures:
            writer.write(planes)
    for planes, back in zip(pictures, decoded_planes(tmp_path / "planes.mp4")):
        for plane, decoded in zip((planes.y, planes.u, planes.v), back):
            np.testing.assert_array_equal(decoded, plane)


def test_writer_keeps_the_planes_tags_and_refuses_them_where_rgb_is_needed(tmp_path):
    smooth_clip(tmp_path / "tagged.mp4", colorspace=6, full_range=True)
    with av.open(str(tmp_path / "tagged.mp4")) as container:
        first = next(container.decode(video=0))
        assert (first.colorspace, first.color_range) == (6, 2)
    planes = flat_planes(16, 16)
    for output, layer_only in ((tmp_path / "layer.mov", True), (tmp_path / "frames/", False)):
        writer = VideoWriter(output, layer_only=True) if layer_only else video_io.PngSequenceWriter(output)
        with pytest.raises(ValueError, match="give uint8 RGB frames"):
            writer.write(planes)
        writer.abort()


@pytest.mark.parametrize("audio", [None, "aac"])
def test_a_render_opens_its_input_once_plus_once_for_its_sound(tmp_path, cpu_renderer, monkeypatch, audio):
    """Probing and decoding share one opening of the input (each costs about a frame's decoding)."""
    clip = make_video(tmp_path / "clip.mp4", frames=3, audio=audio)
    opened = []
    real_open = av.open

    def counting_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(av, "open", counting_open)
    render_video(FrameSource.from_video(clip), TrackPoints(random_tracks(3, 4, 64, 48)), SPEC, cpu_renderer,
                 tmp_path / "out.mp4")
    assert opened.count(str(clip)) == (1 if audio is None else 2)


# ------------------------------------------------------------------ the YUV path against the RGB path


def test_yuv_path_matches_the_rgb_path(tmp_path, cpu_renderer):
    """Same clip, same overlay, both paths, lossless: planes within a few levels, untouched pixels exact.

    Measured: luma max 2 / mean 1.05 (the RGB path's round trip through RGB moves every pixel by up to 2),
    chroma max 1, RGB max 6 / mean 1.26 per channel.
    """
    clip = smooth_clip(tmp_path / "clip.mp4")
    tracks = random_tracks(4, 12, 160, 96, region=0.5)  # overlay in the left half (boxes reach x < 90)
    outputs = render_both(clip, tracks, tmp_path, cpu_renderer)
    source = decoded_planes(clip)
    for (ya, ua, va), (yb, ub, vb), (y0, _, _) in zip(decoded_planes(outputs["yuv"]),
                                                      decoded_planes(outputs["rgb"]), source):
        assert np.abs(ya - yb).max() <= 3 and np.abs(ya - yb).mean() <= 1.5
        assert max(np.abs(ua - ub).max(), np.abs(va - vb).max()) <= 2
        np.testing.assert_array_equal(ya[:, 100:], y0[:, 100:])  # no overlay there: the decoder's own pixels
        assert np.abs(ya[:, :90] - y0[:, :90]).max() > 50  # the overlay is there
    rgb_a = np.stack(list(iter_video_frames(outputs["yuv"]))).astype(int)
    rgb_b = np.stack(list(iter_video_frames(outputs["rgb"]))).astype(int)
    difference = np.abs(rgb_a - rgb_b)
    assert difference.mean(axis=(0, 1, 2)).max() <= 1.5 and difference.max() <= 8


def test_frames_drawn_at_once_give_the_video_drawn_a_frame_at_a_time(tmp_path):
    """Both paths, lossless: the CPU drawing several frames at once writes the same video, bit for bit."""
    clip = smooth_clip(tmp_path / "clip.mp4", frames=9)
    tracks = random_tracks(9, 12, 160, 96, seed=3)
    videos = {}
    for at_once in (1, 3):
        renderer = CpuRenderer(workers=3, frames_at_once=at_once)
        folder = tmp_path / f"at-once-{at_once}"
        folder.mkdir()
        try:
            videos[at_once] = render_both(clip, tracks, folder, renderer)
        finally:
            renderer.close()
    for path_name in ("yuv", "rgb"):
        one, many = (decoded_planes(videos[at_once][path_name]) for at_once in (1, 3))
        assert len(one) == len(many) == 9
        for planes_one, planes_many in zip(one, many):
            for a, b in zip(planes_one, planes_many):
                np.testing.assert_array_equal(a, b)
    assert np.abs(decoded_planes(videos[3]["yuv"])[4][0] - decoded_planes(clip)[4][0]).max() > 50  # drawn


def test_glow_in_yuv_matches_the_rgb_path(tmp_path, cpu_renderer, monkeypatch):
    """A glowing overlay composited in the planes (the GPU's and worker processes' choice; the CPU's after a GPU
    failure; the halo is part of the sparse layer): within the bounds of the plain overlay, untouched pixels
    are the decoder's own, and the halo reaches past the boxes."""
    monkeypatch.setattr(stream, "_glow_in_yuv", lambda renderer, processes: True)
    glowing = dataclasses.replace(SPEC, glow=Glow(radius=6.0, strength=2.0))
    clip = smooth_clip(tmp_path / "clip.mp4")
    tracks = random_tracks(4, 12, 160, 96, region=0.5)  # boxes reach x < 90, the halo x < 97
    (tmp_path / "plain").mkdir()
    plain = render_both(clip, tracks, tmp_path / "plain", cpu_renderer)["yuv"]
    outputs = render_both(clip, tracks, tmp_path, cpu_renderer, spec=glowing)
    for (ya, ua, va), (yb, ub, vb), (y0, _, _), (yp, _, _) in zip(
            decoded_planes(outputs["yuv"]), decoded_planes(outputs["rgb"]), decoded_planes(clip),
            decoded_planes(plain)):
        assert np.abs(ya - yb).max() <= 3 and np.abs(ya - yb).mean() <= 1.5
        assert max(np.abs(ua - ub).max(), np.abs(va - vb).max()) <= 2
        np.testing.assert_array_equal(ya[:, 100:], y0[:, 100:])  # the YUV path: the decoder's own pixels
        assert np.count_nonzero(ya != yp) > 0.05 * ya.size  # the halo


def test_the_cpus_threads_draw_glow_in_rgb_its_processes_and_the_gpu_in_yuv(cpu_renderer):
    gpu = FallbackRenderer(HostGpu(cpu_renderer), CpuRenderer)
    assert not stream._glow_in_yuv(cpu_renderer, None) and stream._glow_in_yuv(gpu, None)
    assert stream._glow_in_yuv(cpu_renderer, object())


def test_sd_and_hd_tags_are_honoured(tmp_path, cpu_renderer):
    """An opaque orange box reads back orange from SD (BT.601) and HD (BT.709) clips, tagged or not,
    limited or full range, and the output keeps the matrix and range it was composited in."""
    orange = (255, 128, 0)
    spec = OverlaySpec(GraphParams(), None, BoxStyle(size=20, stroke_width=2.0, fill_opacity=1.0, opacity=1.0,
                                                     color="#FF8000", roundness=0.0))
    clips = {  # name: (clip, expected output tags)
        "SD untagged": (make_video(tmp_path / "sd.mp4", frames=2, width=160, height=96), (6, 1)),
        "HD untagged": (make_video(tmp_path / "hd.mp4", frames=2, width=1280, height=720), (1, 1)),
        "SD tagged BT.709": (smooth_clip(tmp_path / "sd709.mp4", frames=2), (1, 1)),
        "SD full range": (smooth_clip(tmp_path / "sdfull.mp4", frames=2, colorspace=5, full_range=True), (5, 2)),
    }
    for name, (clip, tags) in clips.items():
        info = probe_video(clip)
        centre = np.array([[[info.width / 2, info.height / 2]]] * 2, np.float32)
        output = tmp_path / f"{name}.mp4"
        render_video(FrameSource.from_video(clip), TrackPoints(Tracks(centre, np.ones((2, 1), bool))), spec,
                     cpu_renderer, output, crf=0, preset="ultrafast")
        with av.open(str(output)) as container:
            first = next(container.decode(video=0))
            assert (first.colorspace, first.color_range) == tags, name
        frame = next(iter_video_frames(output))
        y, x = info.height // 2, info.width // 2
        assert np.abs(frame[y - 4:y + 4, x - 4:x + 4].astype(int) - orange).max() <= 3, name


@pytest.mark.parametrize("rotation", [90, 270])
def test_rotated_input_comes_out_upright_like_the_rgb_path(tmp_path, cpu_renderer, rotation):
    """The planes are turned like the RGB frames: a turn the wrong way would differ everywhere."""
    clip = make_video(tmp_path / "turned.mp4", frames=3, width=64, height=48, rotation=rotation)
    tracks = random_tracks(3, 6, 48, 64, seed=2)
    outputs = render_both(clip, tracks, tmp_path, cpu_renderer)
    yuv, rgb = (np.stack(list(iter_video_frames(outputs[name]))).astype(int) for name in ("yuv", "rgb"))
    assert yuv.shape == rgb.shape == (3, 64, 48, 3)
    # measured: mean 1.2, max 12 (at overlay edges: this SD clip is BT.601, which the RGB path turns into BT.709,
    # and edge pixels whose block chroma is far from their own colour clip differently in the two matrices)
    assert np.abs(yuv - rgb).mean() <= 1.5 and np.abs(yuv - rgb).max() <= 16


@pytest.mark.parametrize("kind", ["odd size", "10-bit"])
def test_other_inputs_fall_back_to_the_rgb_path(tmp_path, cpu_renderer, monkeypatch, kind):
    if kind == "odd size":
        clip = make_video(tmp_path / "odd.mkv", frames=3, width=63, height=47, codec="ffv1")
    else:
        clip = make_video(tmp_path / "deep.mp4", frames=3, pix_fmt="yuv420p10le")
    assert not FrameSource.from_video(clip).planar

    def refuse(*args, **kwargs):
        raise AssertionError("the YUV path was taken")

    monkeypatch.setattr(video_io, "planes_from_frame", refuse)
    info = probe_video(clip)
    output = tmp_path / "out.mp4"
    count = render_video(FrameSource.from_video(clip), TrackPoints(random_tracks(3, 5, info.width, info.height)),
                         SPEC, cpu_renderer, output)
    assert count == 3 and probe_video(output).frame_count == 3


def test_detection_sees_the_same_frames_in_both_paths(tmp_path, demo_clip_file, cpu_renderer):
    detectors = []

    def points():
        detectors.append(TrackDetector(method="bright", min_distance=8))
        return DetectedPoints(detectors[-1])

    outputs = render_both(demo_clip_file, None, tmp_path, cpu_renderer, points=points)
    assert detectors[0].track_count == detectors[1].track_count >= 6
    yuv, rgb = (np.stack(list(iter_video_frames(outputs[name]))).astype(int) for name in ("yuv", "rgb"))
    assert np.abs(yuv - rgb).mean() <= 1.5


class HostGpu:
    """A stand-in GPU renderer: it draws planes in place with the CPU renderer's layer. ``fail`` raises at the
    first upload; ``fail_after`` raises after that many frames were drawn."""

    def __init__(self, cpu, fail=False, fail_after=None):
        self.cpu, self.fail, self.fail_after, self.closed = cpu, fail, fail_after, False
        self.uploads, self.drawn = [], 0

    @property
    def calls(self):
        return len(self.uploads)

    def upload_batch(self, display_lists, host_vertices=None):
        self.uploads.append(len(display_lists))
        if self.fail:
            raise RuntimeError("cudaErrorLaunchFailure: unspecified launch failure")
        return display_lists

    def host_array(self, nbytes):
        return self.cpu.host_array(nbytes)

    def draw_planes_each(self, scene, planes, glow=None):
        for frame, picture in enumerate(planes):
            self.draw_planes(scene, picture, glow, frame)
            yield frame

    def draw_planes(self, scene, planes, glow=None, frame=0):
        if self.drawn == self.fail_after:
            raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
        layer = self.cpu.rasterize(scene[frame], planes.height, planes.width, glow=glow)
        composite_planes(planes, planar_layer(layer.pixels, layer.color, layer.alpha, planes))
        self.drawn += 1

    def close(self):
        self.closed = True


def assert_the_fallback_draws_the_cpus_video(tmp_path, gpu, cpu_renderer, frames=4, **options) -> list:
    """Render a small clip of ``frames`` through ``gpu`` (behind the CPU fallback) and with the CPU renderer
    (``options`` go to both renders): the videos are identical. Returns each render's progress calls."""
    clip = smooth_clip(tmp_path / "clip.mp4", frames=frames)
    tracks = random_tracks(frames, 12, 160, 96, seed=3)
    outputs, progress = [], []
    for renderer in (FallbackRenderer(gpu, CpuRenderer), cpu_renderer):
        outputs.append(tmp_path / f"{len(outputs)}.mp4")
        progress.append([])
        render_video(FrameSource.from_video(clip), TrackPoints(tracks), SPEC, renderer, outputs[-1], crf=0,
                     preset="ultrafast", progress=progress[-1].append, **options)
    ours, reference = decoded_planes(outputs[0]), decoded_planes(outputs[1])
    assert len(ours) == len(reference)
    for mine, want in zip(ours, reference):
        for plane, expected in zip(mine, want):
            np.testing.assert_array_equal(plane, expected)
    return progress


@pytest.mark.parametrize("fail", [False, True], ids=["gpu", "gpu-fails"])
def test_the_gpu_renderers_layer_is_used_through_its_fallback(tmp_path, cpu_renderer, fail, caplog):
    """The GPU renderer draws the planes itself, the small clip's 4 frames from one scene; a GPU failure
    finishes the video on the CPU, same frames."""
    gpu = HostGpu(cpu_renderer, fail)
    with caplog.at_level(logging.WARNING, logger="trackoverlay"):
        assert_the_fallback_draws_the_cpus_video(tmp_path, gpu, cpu_renderer)
    assert (gpu.uploads, gpu.drawn, gpu.closed) == (([4], 0, True) if fail else ([4], 4, False))
    assert ("continuing on the CPU" in caplog.text) == fail


def test_a_gpu_failure_inside_a_scene_leaves_the_drawn_frames_to_the_gpu(tmp_path, cpu_renderer):
    """The GPU fails after drawing 2 of the 4 frames of its scene: the CPU draws the other 2, and no frame
    gets the overlay twice (the video equals the CPU's)."""
    gpu = HostGpu(cpu_renderer, fail_after=2)
    assert_the_fallback_draws_the_cpus_video(tmp_path, gpu, cpu_renderer)
    assert (gpu.uploads, gpu.drawn, gpu.closed) == ([4], 2, True)


def test_gpu_scene_groups_follow_the_frame_range_and_the_clips_end(tmp_path, cpu_renderer):
    """Frames 1..12 of a 14-frame clip, drawn by the GPU in groups of 8 (8, then 4): the same video as the
    CPU's frame by frame, with the progress counting frames."""
    gpu = HostGpu(cpu_renderer)
    progress = assert_the_fallback_draws_the_cpus_video(tmp_path, gpu, cpu_renderer, frames=14, start_frame=1,
                                                        end_frame=13)
    assert gpu.uploads == [8, 4] and gpu.drawn == 12
    assert progress == [[8, 12], list(range(1, 13))]


def test_frames_with_nothing_to_draw_are_encoded_as_decoded_without_a_draw(tmp_path, cpu_renderer):
    """Frames whose points are all hidden reach the encoder bit-identical, and no renderer is asked to draw
    them (not in the scene, no raster); frames with points are drawn as before."""
    clip = smooth_clip(tmp_path / "clip.mp4")
    tracks = random_tracks(4, 12, 160, 96, seed=3)
    visible = tracks.visibility.copy()
    visible[1:3] = False
    gpu = HostGpu(cpu_renderer)
    output = tmp_path / "out.mp4"
    render_video(FrameSource.from_video(clip), TrackPoints(Tracks(tracks.path, visible)), SPEC,
                 FallbackRenderer(gpu, CpuRenderer), output, crf=0, preset="ultrafast")
    ours, source = decoded_planes(output), decoded_planes(clip)
    for index in (1, 2):
        for plane, want in zip(ours[index], source[index]):
            np.testing.assert_array_equal(plane, want)
    assert gpu.uploads == [2] and gpu.drawn == 2 and not np.array_equal(ours[0][0], source[0][0])


def test_planes_the_gpu_drew_are_not_held_while_the_video_streams(tmp_path, cpu_renderer, monkeypatch):
    """Frames drawn in place on the GPU go to the encoder and are let go: at most the pipeline's queues'
    worth are alive at any frame (the memory budget counts on it), however long the clip."""
    import gc
    import weakref

    made, alive = [], []
    decode = video_io.planes_from_frame

    def tracked(*args, **kwargs):
        planes = decode(*args, **kwargs)
        made.append(weakref.ref(planes))
        return planes

    class CountingGpu(HostGpu):
        def draw_planes(self, scene, planes, glow=None, frame=0):
            super().draw_planes(scene, planes, glow, frame)
            gc.collect()
            alive.append(sum(ref() is not None for ref in made))

    monkeypatch.setattr(video_io, "planes_from_frame", tracked)
    clip = smooth_clip(tmp_path / "clip.mp4", frames=24)
    renderer = FallbackRenderer(CountingGpu(cpu_renderer), CpuRenderer)
    render_video(FrameSource.from_video(clip), TrackPoints(random_tracks(24, 8, 160, 96)), SPEC, renderer,
                 tmp_path / "out.mp4", crf=0, preset="ultrafast")
    assert len(alive) == 24 and max(alive) <= stream.frames_in_flight(renderer, 160, 96)


# ------------------------------------------------------------------ GPU


@pytest.mark.gpu
def test_gpu_renderer_yuv_video_equals_the_cpu_renderers(tmp_path, cpu_renderer, gpu_renderer):
    clip = smooth_clip(tmp_path / "clip.mp4")
    tracks = random_tracks(4, 12, 160, 96, seed=5)
    results = []
    for renderer in (cpu_renderer, gpu_renderer):
        output = tmp_path / f"{renderer.name}.mp4"
        render_video(FrameSource.from_video(clip), TrackPoints(tracks), SPEC, renderer, output, crf=0,
                     preset="ultrafast")
        results.append(decoded_planes(output))
    for cpu_planes, gpu_planes in zip(*results):
        for cpu_plane, gpu_plane in zip(cpu_planes, gpu_planes):
            assert np.abs(cpu_plane - gpu_plane).max() <= 2


@pytest.mark.gpu
@pytest.mark.parametrize("fails", ["in the composite", "in the copy back"])
def test_a_gpu_failure_in_a_group_falls_back_until_its_frames_are_written_back(tmp_path, cpu_renderer, monkeypatch,
                                                                              fails, caplog):
    """The GPU fails on a group of 4 host frames. Found in the wait after its composite, the host planes are
    as decoded and the CPU draws the video (the CPU's, bit for bit); found while they are copied back, they
    may be half drawn, so the render stops with the reason and leaves no file (a redraw would draw twice)."""
    import cupy
    from trackoverlay.utils.raster import gpu as gpu_module

    class FailingStream(cupy.cuda.Stream):
        passes = None  # waits let through after the composite's launch before one fails

        def synchronize(self):
            if self.passes == 0:
                self.passes = None
                raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")
            if self.passes is not None:
                self.passes -= 1
            super().synchronize()

    renderer = gpu_module.GpuRenderer(workers=2)
    renderer._stream = failing = FailingStream()
    kernel = gpu_module._kernel

    def failing_kernel(name):
        function = kernel(name)
        if not name.startswith("composite_yuv420_tiles"):
            return function

        def launch(*args):
            function(*args)
            failing.passes = 0 if fails == "in the composite" else 1

        return launch

    monkeypatch.setattr(gpu_module, "_kernel", failing_kernel)
    if fails == "in the composite":
        with caplog.at_level(logging.WARNING, logger="trackoverlay"):
            assert_the_fallback_draws_the_cpus_video(tmp_path, renderer, cpu_renderer)
        assert "illegal memory access" in caplog.text and "continuing on the CPU" in caplog.text
        return
    clip = smooth_clip(tmp_path / "clip.mp4", frames=4)
    output = tmp_path / "out.mp4"
    with pytest.raises(FramesHalfWritten, match="copying drawn frames back.*illegal memory access"):
        render_video(FrameSource.from_video(clip), TrackPoints(random_tracks(4, 12, 160, 96, seed=3)), SPEC,
                     FallbackRenderer(renderer, CpuRenderer), output, crf=0, preset="ultrafast")
    assert not output.exists() and list(tmp_path.iterdir()) == [clip]
    renderer.close()


@pytest.mark.gpu
def test_planes_on_the_gpu_are_drawn_there_like_host_planes(cpu_renderer, gpu_renderer):
    import cupy

    tracks = random_tracks(1, 20, 320, 192, seed=6)
    display_list = stream.OverlayBuilder(SPEC)(TrackPoints(tracks)(0, None))
    rng = np.random.default_rng(7)
    host = YuvPlanes(rng.integers(16, 236, (192, 320), dtype=np.uint8),
                     rng.integers(16, 241, (96, 160), dtype=np.uint8), rng.integers(16, 241, (96, 160), dtype=np.uint8))
    device = YuvPlanes(*(cupy.asarray(plane) for plane in (host.y, host.u, host.v)))
    overlay_planes(cpu_renderer, display_list, host)
    overlay_planes(gpu_renderer, display_list, device)
    for ours, theirs in zip((host.y, host.u, host.v), (device.y, device.u, device.v)):
        assert np.abs(ours.astype(int) - theirs.get()).max() <= 2


def frames_to_draw(frames: int, points: int, width: int, height: int, seed: int) -> tuple:
    """The display lists of ``frames`` frames of ``points`` moving points, and random Y, U, V planes (arrays) for
    each frame to draw them over."""
    builder, source = stream.OverlayBuilder(SPEC), TrackPoints(random_tracks(frames, points, width, height, seed=seed))
    rng = np.random.default_rng(seed + 1)
    return ([builder(source(t, None), t) for t in range(frames)],
            [[rng.integers(0, 256, shape, dtype=np.uint8) for shape in plane_shapes(height, width)]
             for _ in range(frames)])


@pytest.mark.gpu
def test_frames_binned_at_once_are_drawn_as_frames_binned_one_at_a_time(gpu_renderer):
    """A scene of several frames is binned once and its frames composited by one launch (host planes: packed
    in one buffer, as decoded, or three arrays) or one by one from their own tiles (planes on the GPU): bit
    for bit the frames drawn one at a time, each with its own overlay (5 frames, 40 moving points)."""
    import cupy

    display_lists, planes = frames_to_draw(5, 40, 322, 194, seed=12)
    buffers = PlaneBuffers()
    together = [YuvPlanes(*buffers.take([plane.shape for plane in frame])) for frame in planes]  # as decoded
    for picture, frame in zip(together, planes):
        for plane, values in zip((picture.y, picture.u, picture.v), frame):
            plane[...] = values
    apart, alone = ([YuvPlanes(*(plane.copy() for plane in frame)) for frame in planes] for _ in range(2))
    on_device = [YuvPlanes(*(cupy.asarray(plane) for plane in frame)) for frame in planes]
    assert together[0].packed() is not None and alone[0].packed() is None  # one copy each way, and three
    for group in (together, apart, on_device):
        assert list(gpu_renderer.draw_planes_each(gpu_renderer.upload_batch(display_lists), group)) == \
            [0, 1, 2, 3, 4]
    for t, picture in enumerate(alone):
        gpu_renderer.draw_planes(gpu_renderer.upload(display_lists[t]), picture)
    for t in range(5):
        for group in (together, apart, on_device):
            for given, want, before in zip(*((p.y, p.u, p.v) for p in (group[t], alone[t])), planes[t]):
                given = cupy.asnumpy(given)
                np.testing.assert_array_equal(given, want)
                assert (given != before).any()


@pytest.mark.gpu
def test_frames_of_different_colour_tags_are_each_drawn_in_their_own_yuv(gpu_renderer):
    """A group whose frames carry different colour matrices or ranges is not composited by one launch (which
    takes one matrix): each frame comes out as when drawn alone."""
    display_lists, planes = frames_to_draw(2, 30, 160, 96, seed=14)
    tags = [(1, False), (6, True)]
    group, alone = ([YuvPlanes(*(plane.copy() for plane in frame), colorspace=colorspace, full_range=full_range)
                     for frame, (colorspace, full_range) in zip(planes, tags)] for _ in range(2))
    assert list(gpu_renderer.draw_planes_each(gpu_renderer.upload_batch(display_lists), group)) == [0, 1]
    for t, picture in enumerate(alone):
        gpu_renderer.draw_planes(gpu_renderer.upload(display_lists[t]), picture)
    for given, want in zip(group, alone):
        for ours, theirs in zip((given.y, given.u, given.v), (want.y, want.u, want.v)):
            np.testing.assert_array_equal(ours, theirs)


@pytest.mark.gpu
@pytest.mark.parametrize("colorspace, full_range", [(1, False), (6, True)], ids=["bt709-tv", "bt601-full"])
def test_the_gpu_kernel_draws_host_planes_like_the_cpu(cpu_renderer, gpu_renderer, colorspace, full_range):
    """The GPU composites host planes in its tile kernel, in place: within one level of the CPU's two steps,
    every plane, on a scene of lines, boxes and their edges at the frame's border."""
    tracks = random_tracks(1, 40, 322, 194, seed=8)
    display_list = stream.OverlayBuilder(SPEC)(TrackPoints(tracks)(0, None))
    rng = np.random.default_rng(9)
    planes = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in ((194, 322), (97, 161), (97, 161))]
    ours, theirs = (YuvPlanes(*(plane.copy() for plane in planes), colorspace=colorspace, full_range=full_range)
                    for _ in range(2))
    overlay_planes(cpu_renderer, display_list, ours)
    overlay_planes(gpu_renderer, display_list, theirs)
    for plane, want, given in zip(planes, (ours.y, ours.u, ours.v), (theirs.y, theirs.u, theirs.v)):
        assert np.abs(want.astype(int) - given).max() <= 1
        assert (want != plane).any()


@pytest.mark.gpu
def test_the_gpu_draws_a_glowing_layer_over_host_planes_like_the_cpu(cpu_renderer, gpu_renderer):
    """With glow the GPU makes its glowing layer planar on the GPU: within two levels of the CPU's."""
    glow = Glow(radius=8.0, strength=2.0)
    tracks = random_tracks(1, 30, 322, 194, seed=10)
    display_list = stream.OverlayBuilder(SPEC)(TrackPoints(tracks)(0, None))
    rng = np.random.default_rng(11)
    planes = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in ((194, 322), (97, 161), (97, 161))]
    ours, theirs, plain = (YuvPlanes(*(plane.copy() for plane in planes)) for _ in range(3))
    overlay_planes(cpu_renderer, display_list, ours, glow)
    overlay_planes(gpu_renderer, display_list, theirs, glow)
    overlay_planes(gpu_renderer, display_list, plain)
    for want, given, without in zip((ours.y, ours.u, ours.v), (theirs.y, theirs.u, theirs.v),
                                    (plain.y, plain.u, plain.v)):
        assert np.abs(want.astype(int) - given).max() <= 2
        assert (given != without).sum() > 0.05 * given.size  # the halo
