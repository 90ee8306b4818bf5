"""examples/overlay_video.py's error paths, run in-process (``main``): exit status 2, one line, nothing written.

One of them also runs as a real process in test_overlay_video.py.
"""

import importlib.util
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from bad_videos import truncated_copy, write_empty_video
from fake_nvcodec import forget_probes
from trackoverlay.utils.tracks.contract import Tracks
from trackoverlay.utils.tracks.track_file import save_tracks_json

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "overlay_video.py"


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
    save_tracks_json(Tracks(np.full((1, 1, 2), 20.0, np.float32), np.ones((1, 1), bool), frame_size=(640, 360)),
                     folder / "hd.json")
    return {"hd": folder / "hd.json", "clip": clip, "text": folder / "notes.mp4", "empty": write_empty_video(folder / "empty.avi"),
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
    pytest.param(["{clip}", "--tracks", "{hd}", "-o", "out.mp4"],
                 r"tracks in .*hd\.json belong to 640x360 frames but the video is 160x96", id="tracks-of-another-size"),
    pytest.param(["{clip}", "-o", "no/such/dir/out.mp4"], r"no/such/dir does not exist", id="output-folder-missing"),
    pytest.param(["{clip}", "-o", "{proc}"], r"folder /proc is not writable", id="unwritable-output",
                 marks=pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")),
    pytest.param(["{clip}", "-o", "{dir}"], r"cannot write video .*: it is a folder", id="output-is-a-folder"),
    pytest.param(["{clip}", "--size", "64x64"], r"--size is for the blank canvas only", id="size-with-a-video"),
    pytest.param(["--size", "big"], r"--size.*'big'.*WIDTHxHEIGHT", id="size-not-wxh"),
    pytest.param(["--frames", "0"], r"frame count must be >= 1, got 0", id="frames-0"),
    pytest.param(["--max-frames", "0"], r"--max-frames: must be a whole number in 1\.\.[0-9,]+, got 0", id="max-frames-0"),
    pytest.param(["--k", "0"], r"--k: must be a whole number in 1\.\.100,000, got 0", id="k-0"),
    pytest.param(["--hysteresis", "1"], r"hysteresis must be a number in \[0, 1\), got 1", id="hysteresis-1"),
    pytest.param(["--line-width", "-1"], r"line width \(% of frame height\) must be a number in \[0, inf\], got -1",
                 id="line-width"),
    pytest.param(["--line-color", "red"], r"line color 'red' is not a colour", id="line-colour-name"),
    pytest.param(["--roundness", "2"], r"box roundness must be a number in \[0, 1\], got 2", id="roundness-2"),
    pytest.param(["--curve", "wiggly"], r"argument --curve: invalid choice: 'wiggly'", id="curve-unknown"),
    pytest.param(["--look", "plain", "--trail-length", "20"], r"--trail-length needs --trails",
                 id="trail-option-without-trails"),
    pytest.param(["--trails", "--trail-length", "1"], r"--trail-length: must be a whole number in 2\.\.240, got 1",
                 id="trail-length-1"),
    pytest.param(["--trails", "--trail-taper", "2"], r"trail taper must be a number in \[0, 1\], got 2",
                 id="trail-taper-2"),
    pytest.param(["--trails", "--trail-fade", "0"], r"trail fade must be a number in \(0, 10\], got 0",
                 id="trail-fade-0"),
    pytest.param(["--trails", "--trail-width", "0", "--units", "pixels"],
                 r"trail width must be a number in \(0, 10000\], got 0", id="trail-width-0"),
    pytest.param(["--trails", "--trail-color", "#12"], r"trail color '#12' is not a colour", id="trail-colour"),
    pytest.param(["--label-format", "{{nope}}"], r"label format '\{nope\}' uses \{nope\}; the fields are id",
                 id="label-format-field"),
    pytest.param(["--labels", "id", "--label-font", "nowhere.ttf"], r"label font 'nowhere\.ttf' does not exist",
                 id="label-font-missing"),
    pytest.param(["--labels", "id", "--label-font", "{text}"], r"notes\.mp4' is not a font FreeType can read",
                 id="label-font-not-a-font"),
    pytest.param(["{clip}", "--labels", "track_text"], r"--labels track_text needs a track file whose tracks "
                 "carry text", id="label-track-text-without-text"),
    pytest.param(["--labels", "id", "--label-size", "0.01", "--units", "pixels"],
                 r"label size must be a number in \[1, 512\], got 0\.01", id="label-size"),
    pytest.param(["--graph-mode", "voronoi"], r"--graph-mode: invalid choice: 'voronoi' \(choose from '?knn'?, "
                 r"'?radius'?, '?delaunay'?, '?mst'?\)", id="graph-mode-unknown"),
    pytest.param(["--color-mode", "age", "--gradient-colors", "#FF0000"],
                 r"line gradient_colors '#FF0000' must name at least 2 colours", id="gradient-one-colour"),
    pytest.param(["--age-range", "0"], r"line age range must be a number in \(0, 1e\+07\], got 0", id="age-range-0"),
    pytest.param(["--glow-strength", "25"], r"glow strength must be a number in \[0, 20\], got 25", id="glow-strength"),
    pytest.param(["--glow-strength", "1", "--glow-radius", "-2"],
                 r"glow radius \(% of frame height\) must be a number in \[0, inf\], got -2", id="glow-radius"),
    pytest.param(["{clip}", "--decoder", "nvdec"], r"decoder 'nvdec' was requested but PyNvVideoCodec is not "
                 r"installed", id="nvdec-missing"),
    pytest.param(["--decoder", "nvdec"], r"--decoder nvdec decodes a video INPUT", id="nvdec-for-the-demo"),
    pytest.param(["{clip}", "--decoder", "gpu"], r"argument --decoder: invalid choice: 'gpu'", id="decoder-unknown"),
    pytest.param(["{clip}", "--encoder", "nvenc", "-o", "out.mp4"], r"encoder 'nvenc' was requested but "
                 r"PyNvVideoCodec is not installed", id="nvenc-missing"),
    pytest.param(["{clip}", "--encoder", "nvenc", "-o", "frames/"], r"encoder 'nvenc' writes \.mp4/\.mov video, "
                 r"and frames/ is a PNG folder", id="nvenc-for-pngs"),
    pytest.param(["{clip}", "--encoder", "nvenc", "--layer-only", "-o", "layer.mov"], r"encoder 'nvenc' writes "
                 r"H\.264/HEVC, which has no alpha", id="nvenc-for-the-layer"),
]


@pytest.fixture
def no_nvcodec(monkeypatch):
    """PyNvVideoCodec absent, whatever this machine has, so the NVDEC/NVENC errors read the same everywhere."""
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)
    forget_probes()
    yield
    forget_probes()


@pytest.mark.parametrize("args, message", ERRORS)
def test_cli_errors_exit_2_with_one_line_and_no_file(cli, demo_clip_file, tmp_path, monkeypatch, capsys, no_nvcodec,
                                                     args, message):
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
