"""Following points on the GPU: the same pyramids as OpenCV bit for bit, the same points to float rounding, and
the CPU taking over when the GPU fails (GPU tests marked ``gpu``)."""

import cv2
import numpy as np
import pytest
from synthetic import make_clip
from trackoverlay.utils.tracks import detect
from trackoverlay.utils.tracks.detect import (
    TrackDetector,
    opencv_round_trip,
    track_clip,
)

PARAMS = {"max_points": 60, "min_distance": 8}


def textured(width: int, height: int, seed: int) -> np.ndarray:
    noise = np.random.default_rng(seed).random((height, width)) * 255
    return cv2.GaussianBlur(noise.astype(np.uint8), (0, 0), 2)


def shifted(image: np.ndarray, dx: float, dy: float) -> np.ndarray:
    return cv2.warpAffine(image, np.float32([[1, 0, dx], [0, 1, dy]]), image.shape[::-1],
                          borderMode=cv2.BORDER_REFLECT_101)


@pytest.mark.gpu
@pytest.mark.parametrize("width,height", [(1920, 1080), (641, 359), (64, 48), (8, 6)])
def test_pyramids_and_derivatives_are_opencvs_bit_for_bit(width, height):
    flow = detect.gpu_flow()
    image = textured(width, height, width)
    pyramid = flow.pyramid(image)
    top, theirs = cv2.buildOpticalFlowPyramid(image, (flow.window, flow.window), flow.max_level)
    assert len(pyramid.sizes) == top + 1
    offsets = pyramid.offsets.get()
    for level, (w, h) in enumerate(pyramid.sizes):
        ours = slice(offsets[level], offsets[level] + w * h)
        np.testing.assert_array_equal(pyramid.image[ours].get().reshape(h, w), theirs[2 * level])
        np.testing.assert_array_equal(pyramid.derivative[ours].get().reshape(h, w, 2), theirs[2 * level + 1])


@pytest.mark.gpu
@pytest.mark.parametrize("width,height,count", [(1920, 1080, 500), (320, 180, 200), (40, 30, 20)])
def test_round_trip_matches_opencv(width, height, count):
    rng = np.random.default_rng(count)
    before = textured(width, height, 1)
    after = shifted(before, 3.3, -1.7)
    points = (rng.random((count, 2)) * [width + 40, height + 40] - 20).astype(np.float32)  # some off the frame
    guess = points + rng.normal(0, 2, points.shape).astype(np.float32)
    ours = detect.gpu_flow().round_trip(before, after, points, guess)
    theirs = opencv_round_trip(before, after, points, guess)
    for status_ours, status_theirs in (ours[1], theirs[1]), (ours[3], theirs[3]):
        np.testing.assert_array_equal(status_ours, status_theirs)
    both = (theirs[1] == 1) & (theirs[3] == 1)
    assert both.sum() > 0.8 * count * (width * height) / ((width + 40) * (height + 40))
    for position_ours, position_theirs in (ours[0], theirs[0]), (ours[2], theirs[2]):
        np.testing.assert_allclose(position_ours[both], position_theirs[both], atol=5e-3)  # 1e-3 measured


@pytest.mark.gpu
def test_one_flow_follows_any_sequence_of_frames_counts_and_sizes_as_opencv():
    """The captured graphs and kept pyramids serve every call: frames followed into and then from, a frame
    followed from again after two others (a flash skipped), counts on both sides of a graph's capacity, a
    change of size and back; the caller's points are left as they were."""
    flow, rng = detect.gpu_flow(), np.random.default_rng(7)
    large = [textured(320, 180, 1)]
    large += [shifted(large[0], 1.5 * step, -0.8 * step) for step in (1, 2, 3)]
    small = [textured(64, 48, 2), shifted(textured(64, 48, 2), 1.2, 0.6)]
    calls = [(large, 0, 1, 5), (large, 1, 2, 70), (large, 0, 2, 64), (large, 2, 3, 65), (small, 0, 1, 3),
             (large, 1, 2, 130), (large, 2, 3, 1)]
    for frames, before, after, count in calls:
        height, width = frames[0].shape
        points = (rng.random((count, 2)) * [width, height]).astype(np.float32)
        guess = points + rng.normal(0, 1, points.shape).astype(np.float32)
        given = points.copy(), guess.copy()
        ours = flow.round_trip(frames[before], frames[after], points, guess)
        theirs = opencv_round_trip(frames[before], frames[after], points, guess)
        np.testing.assert_array_equal(points, given[0])
        np.testing.assert_array_equal(guess, given[1])
        assert [len(part) for part in ours] == [count] * 4
        for status_ours, status_theirs in (ours[1], theirs[1]), (ours[3], theirs[3]):
            np.testing.assert_array_equal(status_ours, status_theirs)
        both = (theirs[1] == 1) & (theirs[3] == 1)
        assert both.mean() > 0.5
        for position_ours, position_theirs in (ours[0], theirs[0]), (ours[2], theirs[2]):
            np.testing.assert_allclose(position_ours[both], position_theirs[both], atol=5e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["corners", "motion"])
def test_tracks_followed_on_the_gpu_match_the_cpus(method):
    clip = make_clip(frames=30, pan=(2.0, 0.7))
    cpu = track_clip(clip.frames, TrackDetector(method=method, backend="cpu", **PARAMS))
    gpu_detector = TrackDetector(method=method, backend="gpu", **PARAMS)
    assert gpu_detector.follows_on == "gpu"
    gpu = track_clip(clip.frames, gpu_detector)
    assert gpu.track_count == cpu.track_count
    np.testing.assert_array_equal(gpu.visibility, cpu.visibility)
    # float rounding can end an iteration one step (< 0.01 px) apart; over 30 frames 0.008 px was seen
    np.testing.assert_allclose(gpu.path[gpu.visibility], cpu.path[cpu.visibility], atol=0.02)


def test_a_gpu_failure_mid_clip_hands_the_points_to_the_cpu(caplog):
    class FailingFlow:
        calls = 0

        def round_trip(self, *args):
            FailingFlow.calls += 1
            raise RuntimeError("cudaErrorLaunchFailure")

    clip = make_clip(frames=12, pan=(2.0, 0.7))
    cpu = track_clip(clip.frames, TrackDetector(backend="cpu", **PARAMS))
    detector = TrackDetector(backend="cpu", **PARAMS)
    detector._flow = FailingFlow()
    assert detector.follows_on == "gpu"
    taken_over = track_clip(clip.frames, detector)
    assert FailingFlow.calls == 1 and detector.follows_on == "cpu"
    assert "following points on the GPU failed (RuntimeError: cudaErrorLaunchFailure); the CPU follows them " \
           "from frame 1 on" in caplog.text
    np.testing.assert_array_equal(taken_over.path, cpu.path)


def test_bright_spots_are_matched_on_the_cpu_whatever_the_backend():
    assert TrackDetector(method="bright", backend="auto").follows_on == "cpu"
