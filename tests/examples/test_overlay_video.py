"""examples/overlay_video.py, run as users run it: demo, canvas, video + PNGs, tracks, Ctrl-C and an error."""

import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
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


def test_trails_on_a_canvas(tmp_path):
    """--trails draws red trails behind the canvas's moving dots; without it the canvas stays bare."""
    common = ("--size", "160x90", "--frames", 12, "--no-lines", "--no-boxes", "--units", "pixels")
    result = run_cli(*common, "--trails", "--trail-length", 10, "--trail-width", 2, "--trail-color", "#FF0000",
                     "--trail-opacity", 1, "--trail-smoothing", 0.5, "-o", "trails/", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert run_cli(*common, "-o", "bare/", cwd=tmp_path).returncode == 0
    first, last = (cv2.imread(str(tmp_path / "trails" / f"frame_{i:06d}.png")).astype(int) for i in (0, 11))
    bare = cv2.imread(str(tmp_path / "bare" / "frame_000011.png")).astype(int)
    np.testing.assert_array_equal(first, bare)  # one position per track: no trail yet
    drawn = np.any(last != bare, axis=-1)
    assert np.count_nonzero(drawn) > 150
    blue, green, red = np.moveaxis(last[drawn] - bare[drawn], -1, 0)  # BGR: red rises, the rest falls
    assert np.all(red > 0) and np.all(green <= 0) and np.all(blue <= 0) and last[drawn][:, 2].max() > 200


def test_video_with_png_dir_keeps_size_rate_and_count(tmp_path, demo_clip_file):
    (tmp_path / "shot").mkdir()
    clip = tmp_path / "shot" / "dots.mp4"
    clip.write_bytes(demo_clip_file.read_bytes())
    result = run_cli(clip, "--png-dir", "frames", "--detect-method", "bright", "--min-distance", 6,
                     "--box-shape", "brackets", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert size_rate_count(tmp_path / "shot" / "dots_overlay.mp4") == (160, 96, 12, 8)  # beside the input
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


def test_a_canvas_takes_the_size_of_the_frames_the_tracks_were_found_on(tmp_path):
    path = np.tile(np.array([[[20.0, 20.0], [70.0, 40.0]]], np.float32), (3, 1, 1))
    save_tracks_json(Tracks(path, np.ones((3, 2), bool), frame_size=(96, 64)), tmp_path / "tracks.json")
    result = run_cli("--tracks", "tracks.json", "-o", "out.mp4", "--backend", "cpu", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    width, height, _, count = size_rate_count(tmp_path / "out.mp4")
    assert (width, height, count) == (96, 64, 3)


def test_labels_from_the_track_files_text(tmp_path):
    """Red text above each point (nothing else drawn), the right-hand one kept inside the 160x90 canvas."""
    path = np.tile(np.array([[[40.0, 50.0], [155.0, 50.0]]], np.float32), (2, 1, 1))
    save_tracks_json(Tracks(path, np.ones((2, 2), bool), text=["Car", "Bus"]), tmp_path / "tracks.json")
    result = run_cli("--tracks", "tracks.json", "--size", "160x90", "-o", "labels.mp4", "--png-dir", "png",
                     "--backend", "cpu", "--no-lines", "--no-boxes", "--labels", "track_text", "--units", "pixels",
                     "--label-size", 14, "--label-color", "#FF0000", "--label-plate-opacity", 0,
                     "--label-placement", "above", "--label-margin", 3, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    image = cv2.imread(str(tmp_path / "png" / "frame_000001.png"))[..., ::-1].astype(int)
    red = (image[..., 0] > 150) & (image[..., 1] < 80)
    rows, columns = np.nonzero(red)
    assert rows.max() < 50 - 3 and rows.min() > 20  # above the points, one line of 14 px text
    assert {int(c) // 80 for c in columns} == {0, 1}  # both labels
    assert columns.max() <= 159 and np.count_nonzero(red[:, 120:]) > 20  # the right one fits the frame
    assert np.any((image[..., 0] > 60) & (image[..., 0] < 150))  # anti-aliased edges
def test_glow_options_reach_the_spec_and_the_frames(tmp_path):
    from scenes import overlay_video_cli
    from trackoverlay.utils.raster.glow import Glow

    cli = overlay_video_cli()
    spec = lambda *args: cli.overlay_spec(cli.build_parser().parse_args(list(args)), 1080).glow  # noqa: E731
    assert spec().radius == pytest.approx(16.2) and not spec().enabled  # 1.5 % of 1080 px, off
    assert spec("--glow-strength", "2").strength == 2.0 and spec("--glow-strength", "2").enabled
    assert spec("--glow-strength", "2", "--glow-radius", "10", "--units", "pixels") == Glow(radius=10.0, strength=2.0)
    lit = {}
    for name, extra in (("plain", []), ("glow", ["--glow-strength", 3])):
        result = run_cli("--size", "160x90", "--frames", 1, "-o", f"{name}/", "--backend", "cpu", *extra, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        lit[name] = np.count_nonzero(cv2.imread(str(tmp_path / name / "frame_000000.png")).max(axis=2) > 60)
    assert lit["glow"] > 1.3 * lit["plain"]  # the halo lights pixels around every line and box


def test_motion_colour_options_reach_both_styles():
    from scenes import overlay_video_cli

    cli = overlay_video_cli()
    args = cli.build_parser().parse_args(["--color-mode", "direction", "--gradient-colors", "#FF0000,#0000FF",
                                          "--speed-range", "1", "--age-range", "30"])
    spec = cli.overlay_spec(args, 1080)
    for style in (spec.lines, spec.boxes):
        assert (style.color_mode, style.gradient_colors, style.age_range) == ("direction", "#FF0000,#0000FF", 30.0)
        assert style.speed_range == pytest.approx(10.8)  # 1 % of 1080 px per frame
    assert cli.overlay_spec(cli.build_parser().parse_args([]), 1000).lines.speed_range == pytest.approx(20.0)


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
    assert "interrupted (SIGINT); no video was written" in stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, words", [
    (["{text}"], ["notes.mp4", "not a readable video"]),
])
def test_errors_print_one_line_and_exit_2(tmp_path, demo_clip_file, args, words):
    """An error through a real process; test_overlay_video_errors.py runs every error case in-process."""
    (tmp_path / "notes.mp4").write_text("not a video")
    args = [a.format(clip=demo_clip_file, text=tmp_path / "notes.mp4") for a in args]
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("overlay_video.py: error: "), result.stderr
    for word in words:
        assert word in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.mp4"]  # no output, no temp file


def test_the_demo_shows_the_full_look_and_a_file_the_plain_one():
    from scenes import overlay_video_cli

    cli = overlay_video_cli()
    parse = cli.build_parser().parse_args
    demo = parse([])
    cli.apply_look(demo, "demo")
    spec = cli.overlay_spec(demo, 720)
    assert spec.trails is not None and spec.labels is not None and spec.glow.enabled
    assert spec.trails.color == cli.FULL_LOOK_TRAIL_COLOR and spec.labels.text == "id"
    plain = parse([])
    cli.apply_look(plain, "video")
    spec = cli.overlay_spec(plain, 720)
    assert spec.trails is None and spec.labels is None and not spec.glow.enabled
    chosen = parse(["--look", "full", "--glow-strength", "0", "--labels", "coordinates", "--trail-color", "#FF0000"])
    cli.apply_look(chosen, "video")
    spec = cli.overlay_spec(chosen, 720)
    assert not spec.glow.enabled and spec.labels.text == "coordinates" and spec.trails.color == "#FF0000"
    tiny = parse(["--look", "full"])  # the default 1.7 % label is 0.82 px on a 48 px frame: drawn at 1 px
    cli.apply_look(tiny, "video")
    assert cli.overlay_spec(tiny, 48).labels.size == 1.0
    with pytest.raises(ValueError, match=r"label size must be a number in \[1, 512\], got 0.5"):
        cli.overlay_spec(parse(["--labels", "id", "--units", "pixels", "--label-size", "0.5"]), 48)
