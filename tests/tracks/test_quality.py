"""Track quality figures: exact on hand-made tracks, and examples/track_quality.py on a synthetic clip
with known motion and a known cut."""

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from synthetic import make_clip
from trackoverlay.utils.tracks.contract import Tracks
from trackoverlay.utils.tracks.quality import (
    identity_changes,
    measure_tracks,
    moving_share,
)
from trackoverlay.utils.video.io import VideoWriter

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "track_quality.py"


def hand_made() -> Tracks:
    visible = np.zeros((10, 3), bool)
    visible[0:7, 0] = True  # lives 7 frames
    visible[3, 1] = True  # one frame
    visible[5:9, 2] = True  # 4 frames; frame 9 has no point
    path = np.zeros((10, 3, 2), np.float32)
    path[..., 0] = np.arange(3) * 10 + 1  # columns at x = 1, 11, 21
    path[..., 1] = 1
    return Tracks(path, visible)


def test_figures_of_hand_made_tracks():
    quality = measure_tracks(hand_made(), window=5)
    assert (quality.frames, quality.tracks_started, quality.empty_frames) == (10, 3, 1)
    assert quality.one_frame_share == pytest.approx(1 / 3)
    assert quality.median_life == 4
    assert quality.mean_live == pytest.approx(12 / 10)
    assert quality.count_swing == pytest.approx(1.5)  # live [1 1 1 2 1 | 2 2 1 1 0]: ranges 1 and 2
    assert quality.moving_share is None


def test_zero_opacity_counts_as_hidden():
    tracks = hand_made()
    opacity = np.ones((10, 3), np.float32)
    opacity[3, 1] = 0.0
    faded = Tracks(tracks.path, tracks.visibility, opacity=opacity)
    assert measure_tracks(faded).tracks_started == 2


def test_moving_share_counts_points_on_moving_pixels():
    masks = np.zeros((10, 4, 30), bool)
    masks[:, :, 0:5] = True  # column 0's pixel moves in every frame
    assert moving_share(hand_made(), masks) == pytest.approx(7 / 12)
    masks[:5] = False
    masks[:5, :, 20:] = True  # frames 0-4: only column 2's pixels (not visible then)
    assert moving_share(hand_made(), iter([None] + list(masks[1:]))) == pytest.approx(2 / 11)
    with pytest.raises(ValueError, match="window"):
        measure_tracks(hand_made(), window=0)


@pytest.fixture(scope="module")
def clip_files(tmp_path_factory):
    """A 30-frame clip with a cut at 15, its subject masks as PNGs."""
    folder = tmp_path_factory.mktemp("quality")
    clip = make_clip(frames=30, cuts=(15,), pan=(1.0, 0.0))
    with VideoWriter(folder / "clip.mp4", fps=25, crf=12) as writer:
        for frame in clip.frames:
            writer.write(frame)
    (folder / "masks").mkdir()
    for index, mask in enumerate(clip.subject):
        cv2.imwrite(str(folder / "masks" / f"{index:04d}.png"), mask.astype(np.uint8) * 255)
    return folder


def run_script(*args, cwd):
    result = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], cwd=cwd, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_script_reports_a_clip_against_its_ground_truth(clip_files):
    output = run_script("clip.mp4", "--method", "motion", "--max-points", 30, "--min-distance", 8,
                        "--mask-dir", "masks", "--cuts", 15, "--json", "q.json", cwd=clip_files)
    for words in ("tracks started", "one-frame share", "median life", "frames w/o point", "count swing",
                  "on moving pixels", "detect ms/frame", "tracks crossing a cut"):
        assert words in output
    report = json.loads((clip_files / "q.json").read_text())
    assert report["frames"] == 30 and report["empty_frames"] == 0
    assert report["moving_share"] >= 0.8  # the motion method: points on the moving subject
    assert report["tracks crossing a cut"] == 0 and report["empty frames near cuts"] == {"15": []}
    assert report["one_frame_share"] == 0.0


def test_script_estimates_moving_pixels_without_ground_truth(clip_files):
    run_script("clip.mp4", "--max-points", 30, "--min-distance", 8, "--motion-preference", 0,
               "--json", "static.json", cwd=clip_files)
    run_script("clip.mp4", "--max-points", 30, "--min-distance", 8, "--method", "motion",
               "--json", "moving.json", cwd=clip_files)
    static = json.loads((clip_files / "static.json").read_text())["moving_share"]
    moving = json.loads((clip_files / "moving.json").read_text())["moving_share"]
    assert moving > 0.6 and moving > static + 0.3


def test_identity_changes_count_swaps_and_misses_where_points_are_apart():
    truth = np.zeros((6, 2, 2), np.float32)
    truth[:, 0] = [[10 + 4 * t, 50] for t in range(6)]
    truth[:, 1] = [[40 - 2 * t, 52] for t in range(6)]  # 12, 6.3 and 2 px apart at frames 3-5
    path = truth.copy()
    path[4:] = path[4:, ::-1]  # the tracks swap at frame 4
    visible = np.ones((6, 2), bool)
    visible[1, 1] = False  # point 1 missed at frame 1
    tracks = Tracks(path, visible)
    assert identity_changes(tracks, truth, near=1.0, apart=7.0) == (0, 1)  # frames 4-5 not judged: too close
    assert identity_changes(tracks, truth, near=1.0, apart=1.0) == (2, 1)  # judged there: both swapped
