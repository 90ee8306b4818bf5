"""examples/overlay_video.py: run as users run it (demo, canvas, video + PNGs, tracks, Ctrl-C), and every error path.

The error cases run ``main`` in-process (fast); one of them also runs as a
subprocess, to check the exit status and the single stderr line end to end.
"""

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from bad_videos import truncated_copy, write_empty_video
from trackoverlay.utils.tracks.contract import Tracks
from trackoverlay.utils.tracks.track_file import save_tracks_json
from trackoverlay.utils.video.io import probe_video

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "overlay_video.py"


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def size_rate_count(path):
    info = probe_video(path)
    return info.width, info.height, info.fps, info.frame_count


def test_no_arguments_render_the_demo(tmp_path):
    result = run_cli("--max-frames", 3, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["overlay_demo.mp4"]
    assert size_rate_count(tmp_path / "overlay_demo.mp4") == (1280, 720, 30, 3)
    assert "wrote 3 frames" in result.stdout


def test_blank_canvas(tmp_path):
    result = run_cli("--size", "160x90", "--frames", 5, "--fps", 25, "-o", "canvas.mp4", "--png-dir", "png",
                     "--color-mode", "track", "--curve", "s_curve", "--pattern", "dashed", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert size_rate_count(tmp_path / "canvas.mp4") == (160, 90, 25, 5)
    first = cv2.imread(str(tmp_path / "png" / "frame_000000.png"))
    assert first.shape == (90, 160, 3)
    assert np.count_nonzero(first.max(axis=2) > 100) > 200  # boxes and links drawn on the dark canvas


def test_video_with_png_dir_keeps_size_rate_and_count(tmp_path, demo_clip_file):
    result = run_cli(demo_clip_file, "--png-dir", "frames", "--detect-method", "bright", "--min-distance", 6,
                     "--box-shape", "brackets", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert size_rate_count(tmp_path / "dots_overlay.mp4") == (160, 96, 12, 8)
    pngs = sorted((tmp_path / "frames").iterdir())
    assert [p.name for p in pngs] == [f"frame_{i:06d}.png" for i in range(8)]
    assert cv2.imread(str(pngs[-1])).shape == (96, 160, 3)


def test_tracks_file_and_frame_limit(tmp_path, demo_clip_file):
    path = np.tile(np.array([[[20.0, 20.0], [70.0, 40.0]]], np.float32), (8, 1, 1))
    save_tracks_json(Tracks(path, np.ones((8, 2), bool)), tmp_path / "tracks.json")
    result = run_cli(demo_clip_file, "--tracks", "tracks.json", "--max-frames", 4, "-o", "out.mp4",
                     "--backend", "cpu", "--no-lines", "--box-color", "#FF0000", "--fill-opacity", 0, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert size_rate_count(tmp_path / "out.mp4") == (160, 96, 12, 4)


def test_ctrl_c_leaves_no_file(tmp_path):
    process = subprocess.Popen([sys.executable, str(SCRIPT), "--size", "640x360", "--frames", "2000"],
                               cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".overlay_canvas.mp4.*.part")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.glob(".overlay_canvas.mp4.*.part")), "the video was never started"
    time.sleep(0.3)  # a few frames into the video
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted; no video was written" in stderr
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------- errors


@pytest.fixture(scope="module")
def cli():
    """examples/overlay_video.py loaded as a module (its ``main`` runs in-process: fast)."""
    spec = importlib.util.spec_from_file_location("overlay_video_cli", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def error_inputs(folder: Path, clip: Path) -> dict:
    """The files the error cases name: a readable clip, a text file, an empty and a cut video, two track files."""
    (folder / "notes.mp4").write_text("not a video")
    save_tracks_json(Tracks(np.full((3, 1, 2), 20.0, np.float32), np.ones((3, 1), bool)), folder / "short.json")
    (folder / "v2.json").write_text('{"format": "trackoverlay.tracks", "version": 2}', encoding="utf-8")
    return {"clip": clip, "text": folder / "notes.mp4", "empty": write_empty_video(folder / "empty.avi"),
            "cut": truncated_copy(clip, folder / "cut.mp4"), "short": folder / "short.json", "v2": folder / "v2.json",
            "proc": "/proc/out.mp4", "dir": folder}


ERRORS = [
    pytest.param(["missing.mp4"], r"missing\.mp4 does not exist", id="missing-video"),
    pytest.param(["{text}"], r"notes\.mp4 is not a readable video", id="text-file-video"),
    pytest.param(["{cut}"], r"cut\.mp4 is not a readable video", id="truncated-video"),
    pytest.param(["{empty}", "-o", "out.mp4"], r"the input has no frames; nothing to render", id="empty-video"),
    pytest.param(["{clip}", "--tracks", "nowhere.json"], r"nowhere\.json does not exist", id="missing-tracks"),
    pytest.param(["{clip}", "--tracks", "{text}"], r"notes\.mp4 is not valid JSON", id="tracks-not-json"),
    pytest.param(["{clip}", "--tracks", "{v2}"], r"v2\.json has format version 2; this pack reads version 1",
                 id="tracks-version-2"),
    pytest.param(["{clip}", "--tracks", "{short}", "-o", "out.mp4"],
                 r"tracks in .*short\.json have 3 frames but the video has more", id="tracks-shorter-than-video"),
    pytest.param(["{clip}", "-o", "no/such/dir/out.mp4"], r"no/such/dir does not exist", id="output-folder-missing"),
    pytest.param(["{clip}", "-o", "{proc}"], r"folder /proc is not writable", id="unwritable-output",
                 marks=pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")),
    pytest.param(["{clip}", "-o", "{dir}"], r"cannot write video .*: it is a folder", id="output-is-a-folder"),
    pytest.param(["{clip}", "--size", "64x64"], r"--size is for the blank canvas only", id="size-with-a-video"),
    pytest.param(["--size", "big"], r"--size.*'big'.*WIDTHxHEIGHT", id="size-not-wxh"),
    pytest.param(["--frames", "0"], r"frame count must be >= 1, got 0", id="frames-0"),
    pytest.param(["--max-frames", "0"], r"max_frames.*got 0", id="max-frames-0"),
    pytest.param(["--k", "0"], r"k must be an integer in \[1, inf\), got 0", id="k-0"),
    pytest.param(["--hysteresis", "1"], r"hysteresis must be a number in \[0\.0, 1\.0\), got 1", id="hysteresis-1"),
    pytest.param(["--line-width", "-1"], r"line width must be in \(0\.0, 10000\.0\], got -1", id="line-width"),
    pytest.param(["--line-color", "red"], r"line color 'red' is not a colour", id="line-colour-name"),
    pytest.param(["--roundness", "2"], r"box roundness must be in \[0\.0, 1\.0\], got 2", id="roundness-2"),
    pytest.param(["--curve", "wiggly"], r"argument --curve: invalid choice: 'wiggly'", id="curve-unknown"),
]


@pytest.mark.parametrize("args, message", ERRORS)
def test_cli_errors_exit_2_with_one_line_and_no_file(cli, demo_clip_file, tmp_path, monkeypatch, capsys, args,
                                                     message):
    monkeypatch.chdir(tmp_path)
    inputs = error_inputs(tmp_path, demo_clip_file)
    argv = [arg.format(**inputs) for arg in args]
    files = {path: path.read_bytes() for path in map(Path, inputs.values()) if path.is_file()}
    before = sorted(os.listdir(tmp_path))
    try:
        code = cli.main(argv)
    except SystemExit as exit_:  # argparse errors
        code = exit_.code
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("overlay_video.py:")]
    assert code == 2
    assert len(errors) == 1 and errors[0].startswith("overlay_video.py: error: ")  # beside any progress bar
    assert re.search(message, errors[0]), errors[0]
    assert sorted(os.listdir(tmp_path)) == before  # no output, no temporary file
    assert all(path.read_bytes() == data for path, data in files.items())  # the inputs are untouched


def test_errors_print_one_line_and_exit_2(tmp_path):
    """The same contract through a real process: exit status 2, stderr one line, nothing written."""
    result = run_cli("missing.mp4", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(r"overlay_video\.py: error: .*missing\.mp4 does not exist", lines[0]), \
        result.stderr
    assert list(tmp_path.iterdir()) == []
