"""Red team for the video edges: hostile outputs, odd inputs, signals, streams, formats, audio, ranges, budgets.

Every case runs ``examples/overlay_video.py`` as a user would (in-process for
speed, as a subprocess where signals, closed streams, file-size limits or
concurrency matter) on videos made here with PyAV (:mod:`video_clips`), and
asserts the exact outcome: exit status, the one error line, the files left in
the folder, and that every input's bytes are unchanged.

| cases                                                                  | outcome                                                                |
|------------------------------------------------------------------------|------------------------------------------------------------------------|
| -o = input as clip.mp4, ./, ../dir/, absolute, //, symlink, symlinked folder, hard link; -o = --tracks file; -o = input given through a symlink | exit 2 "... is the input ..."; input bytes unchanged; no file added |
| -o FIFO, /dev/null, symlink to /dev/null                               | exit 2 "is a FIFO / a character device ... refusing to replace it"; the node is still there |
| -o existing folder (no /), non-empty folder/, --png-dir holding the input | exit 2 "it is a folder ... trailing /" / "is not empty"           |
| -o symlink to another file; -o dangling symlink                        | written through: the link stays a link, its target is the new video   |
| -o ''; -o newdir/; 250-byte name; 256-byte name                        | exit 2 "output path is empty"; PNG sequence in newdir; works; exit 2 "File name too long", nothing left |
| read-only output folder (chattr +i as root, chmod as a user)           | exit 2 "folder ... is not writable"; nothing written                  |
| disk full: RLIMIT_FSIZE (real EFBIG), ENOSPC raised by the writer      | exit 2 "File too large" / "No space left on device"; old output kept, no temp file |
| a render failing at its last check with an existing output             | old output bytes kept                                                  |
| .mp4 .mov .MP4 .webm .gif DIR/, --codec hevc; .avi, no extension       | h264/h264(mov)/hevc(hvc1)/vp9/gif/PNGs probed by PyAV; exit 2 listing the choices |
| --layer-only .mov / .webm / DIR/; .mp4, .gif                           | ProRes 4444 (alpha matches render_layer within 1/255), VP9 alpha (same), RGBA PNG (exact); exit 2 "cannot hold an alpha channel" |
| 5.1 AAC in; --max-frames; frame range; --no-audio; .webm; .gif; PCM in MOV -> MP4 | audio copied (6 ch), cut to the video within one frame; none; Opus; dropped with a warning; AAC |
| PCM with no channel layout (camera AVI, MKV) -> .mp4 / .webm; 9 unnamed channels | AAC / Opus in the standard layout (mono, stereo); exit 2 naming the audio and --no-audio |
| Opus WebM / FLAC MKV -> .mov, --layer-only; -> .mp4; a muxer refusing a listed codec; a failing audio mux | AAC; copied; AAC; ValueError naming the audio and --no-audio (disk errors unchanged) |
| 0-frame, 1-frame, 1x1, 33x25, 8K, VFR, 10-bit, rotated 90/-90/180, RGBA input, audio-only, text | exit 2 "no frames"; 1 frame; 2x2 (PNG: 1x1); 34x26 (PNG/VP9: 33x25); 7680x4320; same frame times; colours kept; upright; alpha ignored; exit 2 "no video stream (it holds only audio)"; exit 2 |
| truncated (index first), truncated (index last), bit-flipped           | exit 0 + warning "read N of the M frames it declares", N frames out; exit 2 "not a readable video"; exit 0, damaged frames warned |
| track file declaring 2^31 frames / 6.5 M tracks in 100 bytes; radius mode over the memory limit | exit 2 naming the shape; exit 2 "needs about N GB ... limit" before any output |
| --fps inf/nan/1e999/0/5000, 401-digit --frames, full-width digits, --line-width nan, colours #+f+f+f / # f f f / full-width, 401-digit / 5000-digit / bool / "12" / 100 000-deep JSON coordinates | exit 2, one line naming the option or key |
| SIGINT, SIGTERM, SIGHUP mid-render                                     | exit 130 / 143 / 129, one line, no file (an existing output is kept)  |
| stdout closed, stdout /dev/full, stderr closed                         | exit 0, video written, no traceback                                   |
| two writers to one output                                              | both exit 0; one complete video; no temporary file                    |
| frame ranges, tracks from a file (hysteresis on)                       | halves equal the whole render bit for bit (PNG); a render without the replay differs |
| frame ranges, detection (warm-up on every earlier frame, the default)  | halves equal the whole render bit for bit (PNG)                       |
| frame ranges, detection with --warmup-frames 15                        | >= 3/4 of the points within 1 px of the whole render's, count within 2 |
| default output; progress                                               | INPUT_overlay.mp4 beside INPUT; one final "wrote N frames" line, the bar cleared |
"""

import dataclasses
import errno
import hashlib
import importlib.util
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
from trackoverlay.utils.draw.styles import BoxStyle, LineStyle
from trackoverlay.utils.graph.neighbours import GraphParams
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.tracks.contract import Tracks
from trackoverlay.utils.tracks.demo import DemoClip
from trackoverlay.utils.tracks.detect import TrackDetector
from trackoverlay.utils.tracks.track_file import save_tracks_json
from trackoverlay.utils.video.audio import AudioCopy
from trackoverlay.utils.video.formats import choose_format
from trackoverlay.utils.video.io import VideoWriter, flatten_layer, probe_video
from trackoverlay.utils.video.stream import (
    DetectedPoints,
    FrameSource,
    OverlayBuilder,
    OverlaySpec,
    TrackPoints,
    render_video,
)
from video_clips import (
    audio_seconds,
    decoded,
    frame_index,
    frame_times,
    index_frame,
    make_video,
    streams,
)

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "overlay_video.py"
PROG = "overlay_video.py: "
FPS = 25
FRAME = 1 / FPS


# ------------------------------------------------------------------ helpers


@pytest.fixture(scope="module")
def cli():
    """The CLI loaded as a module: ``main`` runs in-process (fast)."""
    spec = importlib.util.spec_from_file_location("overlay_video_redteam", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Result:
    def __init__(self, code, out, err):
        self.code, self.out, self.err = code, out, err
        self.errors = [line for line in err.splitlines() if line.startswith(PROG)]

    @property
    def error(self) -> str:
        assert len(self.errors) == 1, self.err
        return self.errors[0]


@pytest.fixture
def run(cli, capsys, monkeypatch):
    """``run(folder, *args)``: the CLI in ``folder``; a Result with the exit status and captured output."""
    def call(folder, *args):
        monkeypatch.chdir(folder)
        try:
            code = cli.main([str(arg) for arg in args])
        except SystemExit as exit_:  # argparse
            code = exit_.code
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)
    return call


def subprocess_cli(folder, *args, **options):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, str(SCRIPT), *map(str, args)], cwd=folder, env=env, **options)


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def listing(folder) -> list:
    return sorted(os.listdir(folder))


def no_temp_files(folder) -> bool:
    return not [name for name in os.listdir(folder) if name.endswith(".part")]


def frames_in(path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """8 frames 64x48 at 25 fps (index-marked) with 1.5 s of 5.1 AAC: the sound outlasts the picture."""
    return make_video(tmp_path_factory.mktemp("clip") / "clip.mp4", frames=8, audio="aac", audio_seconds=1.5)


@pytest.fixture
def shot(tmp_path, clip) -> Path:
    """A private copy of ``clip`` in ``tmp_path/shot/``."""
    (tmp_path / "shot").mkdir()
    target = tmp_path / "shot" / "clip.mp4"
    shutil.copyfile(clip, target)
    return target


def track_file(path, frames=8, points=((20.0, 20.0), (44.0, 30.0))) -> Path:
    """A track file with fixed points."""
    positions = np.tile(np.array(points, np.float32)[None], (frames, 1, 1))
    save_tracks_json(Tracks(positions, np.ones(positions.shape[:2], bool)), path)
    return path


BOXES = ("--no-lines", "--box-stroke", "3", "--fill-opacity", "0", "--box-color", "#FF0000")


# ---------------------------------------------------------- never destroy a file


@pytest.mark.parametrize("spelling", ["clip.mp4", "./clip.mp4", "../shot/clip.mp4", "{abs}", ".//clip.mp4",
                                      "link.mp4", "../linkdir/clip.mp4", "hard.mp4"])
def test_output_resolving_to_the_input_is_refused(run, shot, spelling):
    folder = shot.parent
    os.symlink("clip.mp4", folder / "link.mp4")
    os.symlink(folder, folder.parent / "linkdir")
    os.link(shot, folder / "hard.mp4")
    before, files = digest(shot), listing(folder)
    result = run(folder, "clip.mp4", "-o", spelling.format(abs=shot), "--tracks", track_file(folder.parent / "t.json"))
    assert result.code == 2
    assert re.fullmatch(rf"{PROG}error: cannot write video .*: it is the input .*clip\.mp4; writing it would "
                        r"destroy the input\. Choose another output name", result.error), result.error
    assert digest(shot) == before and listing(folder) == files


def test_output_equal_to_the_track_file_is_refused(run, shot):
    tracks = track_file(shot.parent / "tracks.json")
    before = digest(tracks)
    result = run(shot.parent, "clip.mp4", "--tracks", "tracks.json", "-o", "./tracks.json")
    assert result.code == 2 and "is the input tracks.json" in result.error
    assert digest(tracks) == before


def test_input_given_through_a_symlink_is_still_protected(run, shot):
    os.symlink(shot, shot.parent / "alias.mp4")
    before = digest(shot)
    result = run(shot.parent, "alias.mp4", "-o", "clip.mp4", "--no-lines")
    assert result.code == 2 and "is the input alias.mp4" in result.error
    assert digest(shot) == before


def test_png_folder_holding_the_input_is_refused(run, shot):
    before = digest(shot)
    result = run(shot.parent, "clip.mp4", "-o", "../out.mp4", "--png-dir", ".")
    assert result.code == 2 and "cannot write PNG folder ./: the folder is not empty" in result.error, result.error
    assert digest(shot) == before and listing(shot.parent) == ["clip.mp4"]


@pytest.mark.parametrize("kind", ["fifo", "devnull", "link-to-devnull"])
def test_outputs_that_are_not_regular_files_are_refused(run, shot, kind):
    folder = shot.parent
    target = {"fifo": folder / "out.mp4", "devnull": Path("/dev/null"), "link-to-devnull": folder / "null.mp4"}[kind]
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "link-to-devnull":
        os.symlink("/dev/null", target)
    result = run(folder, "clip.mp4", "-o", target, "--no-lines")
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    assert result.code == 2
    assert result.error.endswith(f"it is {what}, not a regular file; refusing to replace it"), result.error
    assert (os.path.exists("/dev/null") and os.stat("/dev/null").st_mode & 0o170000 == 0o020000)
    if kind == "fifo":
        assert os.stat(target).st_mode & 0o170000 == 0o010000  # still a FIFO
    assert no_temp_files(folder)


def test_existing_folder_outputs(run, shot):
    folder = shot.parent
    (folder / "frames").mkdir()
    (folder / "frames" / "keep.txt").write_text("mine")
    result = run(folder, "clip.mp4", "-o", "frames", "--no-lines")
    assert result.code == 2 and result.error.endswith("it is a folder; give a file name, or add a trailing / to "
                                                      "write a PNG sequence into it (it must be empty)")
    result = run(folder, "clip.mp4", "-o", "frames/", "--no-lines")
    assert result.code == 2 and "cannot write output frames/: the folder is not empty" in result.error
    assert (folder / "frames" / "keep.txt").read_text() == "mine" and listing(folder / "frames") == ["keep.txt"]


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_symlink_given_as_output_is_written_through(run, shot, tmp_path, dangling):
    target = tmp_path / "renders" / "real.mp4"
    target.parent.mkdir()
    if not dangling:
        target.write_bytes(b"old render")
    os.symlink(target, shot.parent / "link.mp4")
    result = run(shot.parent, "clip.mp4", "-o", "link.mp4", "--tracks", track_file(tmp_path / "t.json"))
    assert result.code == 0, result.err
    assert os.path.islink(shot.parent / "link.mp4") and os.readlink(shot.parent / "link.mp4") == str(target)
    assert frames_in(target) == 8
    assert listing(target.parent) == ["real.mp4"] and no_temp_files(shot.parent)


def test_empty_output_name_and_new_folder_output(run, shot, tmp_path):
    tracks = track_file(tmp_path / "t.json")
    result = run(shot.parent, "clip.mp4", "-o", "", "--tracks", tracks)
    assert result.code == 2 and result.error == f"{PROG}error: output path is empty; give a file name such as " \
                                                "out.mp4 (or a folder ending in / for a PNG sequence)"
    assert listing(shot.parent) == ["clip.mp4"]
    result = run(shot.parent, "clip.mp4", "-o", "newdir/", "--tracks", tracks)
    assert result.code == 0, result.err
    assert listing(shot.parent / "newdir") == [f"frame_{i:06d}.png" for i in range(8)]
    assert cv2.imread(str(shot.parent / "newdir" / "frame_000007.png")).shape == (48, 64, 3)


def test_long_output_names(run, shot, tmp_path):
    tracks = track_file(tmp_path / "t.json")
    longest = "x" * 246 + ".mp4"  # 250 bytes: legal, and its temporary name must fit too
    result = run(shot.parent, "clip.mp4", "-o", longest, "--tracks", tracks)
    assert result.code == 0, result.err
    assert frames_in(shot.parent / longest) == 8
    too_long = "y" * 252 + ".mp4"
    result = run(shot.parent, "clip.mp4", "-o", too_long, "--tracks", tracks)
    assert result.code == 2 and "File name too long" in result.error
    assert listing(shot.parent) == sorted(["clip.mp4", longest])


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder nobody can write into, not even root (chattr +i), or a user's chmod 555 folder."""
    folder = tmp_path / "locked"
    folder.mkdir()
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("root here and chattr +i is not available on this file system")
        yield folder
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    else:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)


def test_read_only_output_folder(run, shot, read_only_folder):
    result = run(shot.parent, "clip.mp4", "-o", read_only_folder / "out.mp4", "--no-lines")
    assert result.code == 2
    assert re.fullmatch(rf"{PROG}error: cannot write video .*out\.mp4: folder .*locked is not writable "
                        r"\((Operation not permitted|Permission denied)\)", result.error), result.error
    assert listing(read_only_folder) == []


def test_disk_full_for_real_keeps_the_old_output(shot):
    """A file-size limit makes the kernel refuse the write (EFBIG) as a full disk would (ENOSPC)."""
    old = shot.parent / "out.mp4"
    old.write_bytes(b"the previous render")

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))

    process = subprocess_cli(shot.parent, "--size", "320x180", "--frames", "60", "--crf", "0", "--preset",
                             "ultrafast", "-o", "out.mp4", preexec_fn=limit, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    out, err = process.communicate(timeout=120)
    errors = [line for line in err.splitlines() if line.startswith(PROG)]
    assert process.returncode == 2 and len(errors) == 1 and "File too large" in errors[0], err
    assert "Traceback" not in err
    assert old.read_bytes() == b"the previous render" and listing(shot.parent) == ["clip.mp4", "out.mp4"]


def test_disk_full_mid_render_keeps_the_old_output(run, shot, tmp_path, monkeypatch):
    old = shot.parent / "out.mp4"
    old.write_bytes(b"the previous render")
    append = VideoWriter._append  # every frame passes here, as RGB, planes or on the GPU

    def full_disk(self, *args, **kwargs):
        if self.frame_count == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        append(self, *args, **kwargs)

    monkeypatch.setattr(VideoWriter, "_append", full_disk)
    result = run(shot.parent, "clip.mp4", "-o", "out.mp4", "--tracks", track_file(tmp_path / "t.json"))
    assert result.code == 2 and result.error == f"{PROG}error: [Errno {errno.ENOSPC}] No space left on device"
    assert old.read_bytes() == b"the previous render" and listing(shot.parent) == ["clip.mp4", "out.mp4"]


def test_failed_render_keeps_the_existing_output(run, shot, tmp_path):
    old = shot.parent / "out.mp4"
    old.write_bytes(b"the previous render")
    short = track_file(tmp_path / "short.json", frames=12)  # more track frames than video frames: fails at the end
    result = run(shot.parent, "clip.mp4", "-o", "out.mp4", "--tracks", short)
    assert result.code == 2 and "have 12 frames but the video has only 8" in result.error
    assert old.read_bytes() == b"the previous render" and listing(shot.parent) == ["clip.mp4", "out.mp4"]


# ------------------------------------------------------------------ formats


@pytest.mark.parametrize("output, codec_args, expected", [
    ("out.mp4", (), ("mp4", "h264")),
    ("out.MP4", (), ("mp4", "h264")),
    ("out.mov", (), ("mov", "h264")),
    ("out.mp4", ("--codec", "hevc"), ("mp4", "hevc")),
    ("out.webm", (), ("webm", "vp9")),
    ("out.gif", (), ("gif", "gif")),
])
def test_formats_by_extension(run, shot, tmp_path, output, codec_args, expected):
    result = run(shot.parent, "clip.mp4", "-o", output, *codec_args, "--tracks", track_file(tmp_path / "t.json"))
    assert result.code == 0, result.err
    with av.open(str(shot.parent / output)) as container:
        names = container.format.name.split(",")
        stream = container.streams.video[0]
        assert expected[0] in names and stream.codec_context.name == expected[1]
        if expected[1] == "hevc":
            assert stream.codec_context.codec_tag == "hvc1"  # plays in Apple's players
    assert frames_in(shot.parent / output) == 8


@pytest.mark.parametrize("output, named", [("out.avi", "extension '.avi'"), ("out", "no extension")])
def test_unknown_extensions_list_the_choices(run, shot, output, named):
    result = run(shot.parent, "clip.mp4", "-o", output, "--no-lines")
    assert result.code == 2
    assert result.error == (f"{PROG}error: output {output} has {named}; write video as .mp4 or .mov (H.264, or HEVC "
                            "with codec hevc), .webm (VP9), .gif, or a folder ending in / (PNG sequence)")
    assert result.out == ""  # told before the input is opened: nothing else is printed
    assert listing(shot.parent) == ["clip.mp4"]


LAYER_STYLE = ("--units", "pixels", "--no-lines", "--box-size", "20", "--box-stroke", "3", "--fill-opacity",
               "0.4", "--box-color", "#FF8000", "--box-opacity", "0.8", "--roundness", "0.5")


LAYER_SPEC = OverlaySpec(GraphParams(k=3, hysteresis=0.25), None,
                         BoxStyle(size=20.0, stroke_width=3.0, fill_opacity=0.4, color="#FF8000", opacity=0.8,
                                  roundness=0.5))  # what LAYER_STYLE asks of the CLI


def layer_of(renderer, tracks_path):
    """``renderer``'s own layer (straight RGB, alpha) for frame 0 of the layer tests, in 0..255."""
    from trackoverlay.utils.tracks.track_file import load_tracks_json

    points = TrackPoints(load_tracks_json(tracks_path))
    rgb, alpha = renderer.render_layer(OverlayBuilder(LAYER_SPEC)(points(0, None)), 48, 64)
    renderer.close()
    return rgb * 255.0, alpha * 255.0


def expected_layer(tracks_path):
    return layer_of(CpuRenderer(workers=1), tracks_path)


@pytest.mark.parametrize("output, decoder, alpha_format", [
    ("layer.mov", None, "yuva444p12le"), ("layer.webm", "libvpx-vp9", "yuva420p"), ("layer/", None, "png")])
def test_layer_only_alpha_matches_the_renderers_layer(run, shot, tmp_path, output, decoder, alpha_format):
    tracks = track_file(tmp_path / "t.json")
    result = run(shot.parent, "clip.mp4", "--layer-only", "-o", output, "--tracks", tracks, *LAYER_STYLE)
    assert result.code == 0, result.err
    rgb, alpha = expected_layer(tracks)
    if output.endswith("/"):
        first = cv2.cvtColor(cv2.imread(str(shot.parent / "layer" / "frame_000000.png"), cv2.IMREAD_UNCHANGED),
                             cv2.COLOR_BGRA2RGBA)
        tolerance_alpha, tolerance_rgb = 0, 0.5  # lossless: the render rounded to 8 bits
    else:
        assert streams(shot.parent / output)["video"][1] in ("yuv420p", alpha_format)  # VP9 alpha is side data
        first = decoded(shot.parent / output, decoder, "rgba")[0]
        tolerance_alpha, tolerance_rgb = 1, 24.0  # alpha within 1/255; colour through 4:2:0 / 4:4:4 YUV
    assert first.shape == (48, 64, 4)
    assert np.abs(first[..., 3].astype(int) - np.round(alpha)).max() <= tolerance_alpha  # vs the 8-bit render
    opaque = alpha > 128  # straight colour: the overlay's own colour wherever it is mostly there
    assert opaque.sum() > 50
    assert np.abs(first[..., :3][opaque] - rgb[opaque]).max() <= tolerance_rgb
    assert np.abs(rgb[opaque] - (255, 128, 0)).max() <= 1  # not premultiplied
    assert (first[..., 3][alpha == 0] == 0).all()


@pytest.mark.parametrize("output", ["layer.mp4", "layer.gif"])
def test_layer_only_refuses_formats_without_alpha(run, shot, output):
    result = run(shot.parent, "clip.mp4", "--layer-only", "-o", output, "--no-lines")
    assert result.code == 2 and "(it cannot hold an alpha channel); write the overlay alone (layer only) as .mov " \
                                "(ProRes 4444 with alpha), .webm (VP9 with alpha) or a folder ending in / (PNG " \
                                "sequence with alpha)" in result.error
    assert listing(shot.parent) == ["clip.mp4"]


# ------------------------------------------------------------------ audio


@pytest.mark.parametrize("args, frames, audio", [
    ((), 8, ("aac", 6)),
    (("--max-frames", "5"), 5, ("aac", 6)),
    (("--start-frame", "2", "--end-frame", "6"), 4, ("aac", 6)),
    (("-o", "out.webm"), 8, ("opus", 6)),
    (("--layer-only",), 8, ("aac", 6)),
    (("--no-audio",), 8, None),
    (("-o", "out.gif"), 8, None),
])
def test_audio_is_kept_in_step_with_the_frames(run, shot, tmp_path, args, frames, audio):
    tracks = track_file(tmp_path / "t.json")
    result = run(shot.parent, "clip.mp4", "--tracks", tracks, *args)
    assert result.code == 0, result.err
    output = next(shot.parent / name for name in os.listdir(shot.parent) if name != "clip.mp4")
    found = streams(output)
    assert frames_in(output) == frames
    if audio is None:
        assert "audio" not in found
        if "out.gif" in args:
            assert "WARNING: clip.mp4: audio (aac) not kept: GIF outputs have no sound" in result.out
        return
    assert found["audio"][:2] == audio
    assert abs(audio_seconds(output) - frames * FRAME) <= FRAME  # the sound ends with the picture


@pytest.mark.parametrize("args, warned", [((), True), (("--no-audio",), False)])
def test_a_png_folder_says_the_sound_is_not_kept(run, shot, tmp_path, args, warned):
    result = run(shot.parent, "clip.mp4", "--tracks", track_file(tmp_path / "t.json"), "-o", "frames/", *args)
    assert result.code == 0, result.err
    assert len(os.listdir(shot.parent / "frames")) == 8
    assert ("WARNING: clip.mp4: audio not kept: PNG folders have no sound" in result.out) == warned


def test_pcm_audio_in_mov_is_reencoded_for_mp4(run, tmp_path):
    source = make_video(tmp_path / "pcm.mov", frames=10, container="mov", audio="pcm_s16le", channels="stereo")
    result = run(tmp_path, "pcm.mov", "-o", "out.mp4", "--tracks", track_file(tmp_path / "t.json", frames=10))
    assert result.code == 0, result.err
    assert "INFO: audio (pcm_s16le) re-encoded to aac" in result.out
    assert streams(tmp_path / "out.mp4")["audio"][:2] == ("aac", 2)
    assert abs(audio_seconds(tmp_path / "out.mp4") - 10 * FRAME) <= FRAME
    assert source.exists()


def voice_clip(path, audio: str, channels: str = "stereo") -> Path:
    """16 frames 64x48 with 1 s of ``audio``: MJPEG for .avi (a camera's file), VP9 for .webm, else H.264."""
    video = {".avi": ("mjpeg", "yuvj420p", None), ".webm": ("libvpx-vp9", "yuv420p", {"cpu-used": "8",
                                                                                      "deadline": "realtime"})}
    codec, pix_fmt, options = video.get(path.suffix, ("libx264", "yuv420p", None))
    return make_video(path, frames=16, codec=codec, pix_fmt=pix_fmt, options=options, audio=audio,
                      channels=channels, audio_seconds=1.0)


@pytest.mark.parametrize("name, channels, output, encoder, audio", [
    ("cam.avi", "stereo", "out.mp4", "aac", ("aac", 2)),
    ("cam.mkv", "mono", "out.mp4", "aac", ("aac", 1)),
    ("cam.avi", "stereo", "out.webm", "libopus", ("opus", 2)),
])
def test_pcm_without_a_channel_layout_is_reencoded(run, tmp_path, name, channels, output, encoder, audio):
    """Cameras' AVIs and MKVs name no PCM layout ("2 channels"): the encoder gets the standard one."""
    voice_clip(tmp_path / name, "pcm_s16le", channels)
    with av.open(str(tmp_path / name)) as container:  # the case at hand: PyAV reads no named layout
        assert container.streams.audio[0].codec_context.layout.name == f"{audio[1]} channels"
    result = run(tmp_path, name, "-o", output, "--tracks", track_file(tmp_path / "t.json", frames=16))
    assert result.code == 0, result.err
    assert f"INFO: audio (pcm_s16le) re-encoded to {encoder}" in result.out
    assert streams(tmp_path / output)["audio"][:2] == audio
    assert abs(audio_seconds(tmp_path / output) - 16 * FRAME) <= FRAME


def nine_channel_clip(path) -> Path:
    """16 frames 64x48 with 1 s of silent 9-channel PCM in MKV, which keeps only the channel count (packed
    samples: PyAV fills at most 8 planes)."""
    with av.open(str(path), "w") as output:
        video = output.add_stream("libx264", rate=FPS)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        sound = output.add_stream("pcm_s16le", rate=48000, layout="0x1ff")
        for index in range(16):
            image = av.VideoFrame.from_ndarray(index_frame(index, 64, 48), format="rgb24")
            image.pts = index
            output.mux(video.encode(image))
        output.mux(video.encode(None))
        silence = av.AudioFrame.from_ndarray(np.zeros((1, 48000 * 9), np.int16), format="s16", layout="0x1ff")
        silence.sample_rate, silence.pts = 48000, 0
        output.mux(sound.encode(silence))
        output.mux(sound.encode(None))
    return path


def test_pcm_with_channels_in_no_known_layout_names_the_audio(run, tmp_path):
    nine_channel_clip(tmp_path / "cam.mkv")
    with av.open(str(tmp_path / "cam.mkv")) as container:
        assert container.streams.audio[0].codec_context.layout.name == "9 channels"
    tracks = track_file(tmp_path / "t.json", frames=16)
    result = run(tmp_path, "cam.mkv", "-o", "out.mp4", "--tracks", tracks)
    assert result.code == 2 and result.error == (
        f"{PROG}error: cam.mkv: its audio (pcm_s16le) has 9 channels in no known layout, which aac for H.264 MP4 "
        "cannot take; leave the sound out to write the video (--no-audio; keep_audio off in the node)")
    assert listing(tmp_path) == ["cam.mkv", "t.json"]
    assert run(tmp_path, "cam.mkv", "-o", "out.mp4", "--tracks", tracks, "--no-audio").code == 0


@pytest.mark.parametrize("name, audio, args, output, expected, slack", [
    ("voice.webm", "libopus", ("--layer-only",), "voice_layer.mov", "aac", FRAME),  # ProRes 4444 by default
    ("voice.webm", "libopus", ("-o", "out.mov"), "out.mov", "aac", FRAME),
    ("voice.mkv", "flac", ("-o", "out.mov"), "out.mov", "aac", FRAME),
    ("voice.webm", "libopus", ("-o", "out.mp4"), "out.mp4", "opus", FRAME),  # MP4 takes both as they are
    ("voice.mkv", "flac", ("-o", "out.mp4"), "out.mp4", "flac", 0.1),  # cut at a packet: 4608 samples
])
def test_opus_and_flac_audio_into_mov_and_mp4(run, tmp_path, name, audio, args, output, expected, slack):
    voice_clip(tmp_path / name, audio)
    result = run(tmp_path, name, "--tracks", track_file(tmp_path / "t.json", frames=16), *args)
    assert result.code == 0, result.err
    codec = "opus" if audio == "libopus" else audio
    assert f"INFO: audio ({codec}) {'copied' if expected == codec else 're-encoded to aac'}" in result.out
    assert streams(tmp_path / output)["audio"][:2] == (expected, 2)
    assert abs(audio_seconds(tmp_path / output) - 16 * FRAME) <= slack


def test_audio_the_muxer_refuses_is_reencoded_though_listed(tmp_path):
    """A codec listed as copied but refused by this FFmpeg's muxer is re-encoded, not a broken header."""
    source = voice_clip(tmp_path / "voice.webm", "libopus")
    fmt = dataclasses.replace(choose_format("out.mov", layer_only=True), audio_copy=frozenset({"opus"}))
    sound = AudioCopy(source)
    with av.open(str(tmp_path / "out.mov"), "w", format="mov") as output:
        sound.attach(output, fmt)
        sound.finish(Fraction(1, 2))
        sound.close()
    assert sound.mode == "re-encoded to aac"
    assert streams(tmp_path / "out.mov")["audio"][:2] == ("aac", 2)


class _RefusingMux:
    """An output container whose ``mux`` raises ``error``; everything else is ``container``'s."""

    def __init__(self, container, error):
        self._container, self._error = container, error

    def __getattr__(self, name):
        return getattr(self._container, name)

    def mux(self, packets):
        raise self._error


@pytest.mark.parametrize("error", [av.error.ArgumentError(errno.EINVAL, "Invalid argument"),
                                   av.error.OSError(errno.ENOSPC, "No space left on device")])
def test_a_failing_audio_mux_names_the_audio(tmp_path, error):
    source = voice_clip(tmp_path / "cam.avi", "pcm_s16le")
    sound = AudioCopy(source)
    with av.open(str(tmp_path / "out.mp4"), "w") as output:
        sound.attach(_RefusingMux(output, error), choose_format("out.mp4"))
        with pytest.raises(Exception) as raised:
            sound.finish(Fraction(1, 2))
        sound.close()
    if isinstance(error, OSError):  # a full disk is not the sound's fault: told as it is
        assert raised.value is error
        return
    assert isinstance(raised.value, ValueError) and str(raised.value) == (
        f"{source}: writing its audio (pcm_s16le, re-encoded to aac) to the output failed: Invalid argument; leave "
        "the sound out to write the video (--no-audio; keep_audio off in the node)")


# ------------------------------------------------------------------ odd inputs


def test_a_high_speed_camera_clip_keeps_its_frame_times(run, tmp_path):
    make_video(tmp_path / "fast.mp4", frames=6, fps=1200)
    result = run(tmp_path, "fast.mp4", "-o", "out.mp4", "--tracks", track_file(tmp_path / "t.json", frames=6))
    assert result.code == 0, result.err
    with av.open(str(tmp_path / "fast.mp4")) as source, av.open(str(tmp_path / "out.mp4")) as output:
        times = [[frame.time for frame in container.decode(video=0)] for container in (source, output)]
    assert len(times[1]) == 6
    np.testing.assert_allclose(times[1], times[0], atol=1e-6)


def test_zero_and_one_frame_videos(run, tmp_path):
    make_video(tmp_path / "none.avi", frames=0, codec="mpeg4", container="avi")  # MP4 drops an empty stream
    result = run(tmp_path, "none.avi", "-o", "a.mp4", "--no-lines")
    assert result.code == 2 and result.error == f"{PROG}error: the input has no frames; nothing to render"
    make_video(tmp_path / "one.mp4", frames=1)
    result = run(tmp_path, "one.mp4", "-o", "b.mp4", "--no-lines")
    assert result.code == 0 and frames_in(tmp_path / "b.mp4") == 1
    assert listing(tmp_path) == ["b.mp4", "none.avi", "one.mp4"]


@pytest.mark.parametrize("size, output, expected", [
    ((1, 1), "out.mp4", (2, 2)), ((1, 1), "png/", (1, 1)), ((33, 25), "out.mp4", (34, 26)),
    ((33, 25), "out.webm", (33, 25)), ((33, 25), "png/", (33, 25))])
def test_tiny_and_odd_sizes(run, tmp_path, size, output, expected):
    make_video(tmp_path / "in.mov", frames=3, width=size[0], height=size[1], codec="png", pix_fmt="rgb24",
               container="mov")
    result = run(tmp_path, "in.mov", "-o", output, "--no-lines", "--box-size", "2")
    assert result.code == 0, result.err
    if output.endswith("/"):
        images = [cv2.imread(str(tmp_path / "png" / name)) for name in listing(tmp_path / "png")]
    else:
        images = decoded(tmp_path / output)
    assert len(images) == 3 and all(image.shape[:2] == (expected[1], expected[0]) for image in images)


def test_8k_canvas(run, tmp_path):
    result = run(tmp_path, "--size", "7680x4320", "--frames", "2", "--preset", "ultrafast", "-o", "8k.mp4")
    assert result.code == 0, result.err
    with av.open(str(tmp_path / "8k.mp4")) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.width, stream.codec_context.height) == (7680, 4320)
    assert frames_in(tmp_path / "8k.mp4") == 2


def test_variable_frame_rate_keeps_the_frame_times(run, tmp_path):
    times = [0.0, 0.04, 0.5, 0.52, 1.9, 3.27]
    make_video(tmp_path / "vfr.mp4", frames=6, times=times)
    result = run(tmp_path, "vfr.mp4", "--tracks", track_file(tmp_path / "t.json", frames=6))
    assert result.code == 0, result.err
    assert np.allclose(frame_times(tmp_path / "vfr_overlay.mp4"), times, atol=1e-3)


@pytest.mark.parametrize("points", ["tracks", "detection"])
def test_a_cut_variable_rate_clip_ends_its_sound_at_the_next_frame(run, tmp_path, points):
    """Frames at 0, 0.04, 0.08, then 1.5 s: cut after 3 frames, the sound ends at 1.5 s (where the source's next
    frame begins), not one average gap after the last frame (0.08 + 0.04)."""
    times = [0.0, 0.04, 0.08, 1.5, 1.54, 1.58]
    make_video(tmp_path / "vfr.mp4", frames=6, times=times, audio="aac", channels="stereo")
    tracks = ("--tracks", track_file(tmp_path / "t.json", frames=6)) if points == "tracks" else ()
    result = run(tmp_path, "vfr.mp4", *tracks, "--max-frames", "3", "-o", "cut.mp4")
    assert result.code == 0, result.err
    assert frames_in(tmp_path / "cut.mp4") == 3
    assert abs(audio_seconds(tmp_path / "cut.mp4") - 1.5) <= 0.03  # within one AAC packet (21 ms)


def test_ten_bit_input_keeps_its_colours(run, tmp_path):
    make_video(tmp_path / "deep.mp4", frames=3, pix_fmt="yuv420p10le", options={"crf": "0"})
    result = run(tmp_path, "deep.mp4", "-o", "png/", "--no-lines", "--no-boxes")
    assert result.code == 0, result.err
    for index in range(3):
        image = cv2.cvtColor(cv2.imread(str(tmp_path / "png" / f"frame_{index:06d}.png")), cv2.COLOR_BGR2RGB)
        assert np.abs(image.astype(int) - index_frame(index, 64, 48)).mean() < 2.0


@pytest.mark.parametrize("rotation, corner", [(90, (-1, 0)), (-90, (0, -1)), (180, (-1, -1))])
def test_rotated_clip_comes_out_upright(run, tmp_path, rotation, corner):
    """The index corner (top-left when stored) lands where the display matrix puts it."""
    make_video(tmp_path / "phone.mp4", frames=2, rotation=rotation, options={"crf": "0"})
    result = run(tmp_path, "phone.mp4", "-o", "png/", "--no-lines", "--no-boxes")
    assert result.code == 0, result.err
    image = cv2.imread(str(tmp_path / "png" / "frame_000001.png"))
    assert image.shape[:2] == ((64, 48) if rotation % 180 else (48, 64))
    rows = slice(0, 4) if corner[0] == 0 else slice(-4, None)
    cols = slice(0, 4) if corner[1] == 0 else slice(-4, None)
    assert abs(float(image[rows, cols].mean()) - (40 + 9)) < 4  # frame 1's grey corner, upright
    # ffmpeg's own auto-rotation (rotation counter-clockwise, PyAV's sign) agrees
    turned = np.rot90(index_frame(1, 64, 48), rotation // 90)
    assert np.abs(cv2.cvtColor(image, cv2.COLOR_BGR2RGB).astype(int) - turned).mean() < 3


def test_rgba_input_is_drawn_on_its_colour(run, tmp_path):
    make_video(tmp_path / "alpha.mov", frames=2, codec="png", pix_fmt="rgba", container="mov", alpha=True)
    result = run(tmp_path, "alpha.mov", "-o", "png/", "--no-lines", "--no-boxes")
    assert result.code == 0, result.err
    image = cv2.cvtColor(cv2.imread(str(tmp_path / "png" / "frame_000000.png")), cv2.COLOR_BGR2RGB)
    np.testing.assert_array_equal(image, index_frame(0, 64, 48))  # the alpha channel is not applied


def test_audio_only_and_text_inputs(run, tmp_path):
    container = av.open(str(tmp_path / "song.m4a"), "w", format="mp4")
    stream = container.add_stream("aac", rate=48000, layout="stereo")
    silence = av.AudioFrame.from_ndarray(np.zeros((2, 1024), np.float32), format="fltp", layout="stereo")
    silence.sample_rate = 48000
    container.mux(stream.encode(silence))
    container.mux(stream.encode(None))
    container.close()
    result = run(tmp_path, "song.m4a", "--no-lines")
    assert result.code == 2 and result.error.endswith("song.m4a has no video stream (it holds only audio)")
    (tmp_path / "notes.mp4").write_text("not a video")
    result = run(tmp_path, "notes.mp4", "--no-lines")
    assert result.code == 2 and "notes.mp4 is not a readable video" in result.error
    assert listing(tmp_path) == ["notes.mp4", "song.m4a"]


def test_truncated_input_is_reported(run, tmp_path):
    make_video(tmp_path / "full.mp4", frames=24, options={"crf": "0"}, container="mp4")
    with av.open(str(tmp_path / "full.mp4")) as container:
        assert container.streams.video[0].frames == 24
    data = (tmp_path / "full.mp4").read_bytes()
    (tmp_path / "index_last.mp4").write_bytes(data[: len(data) // 2])
    result = run(tmp_path, "index_last.mp4", "--no-lines")
    assert result.code == 2 and "index_last.mp4 is not a readable video" in result.error
    fast = make_video(tmp_path / "index_first.mp4", frames=24, options={"crf": "0"}, container="mp4")
    _faststart(fast)
    data = fast.read_bytes()
    fast.write_bytes(data[: len(data) * 2 // 3])
    result = run(tmp_path, "index_first.mp4", "-o", "cut.mp4", "--no-lines")
    assert result.code == 0, result.err
    match = re.search(r"WARNING: index_first\.mp4: read (\d+) of the 24 frames it declares from frame 0; the file is "
                      r"truncated or damaged, and the output has only the frames that were read", result.out)
    assert match, result.out
    assert 0 < int(match[1]) < 24 and frames_in(tmp_path / "cut.mp4") == int(match[1])


def _avi_with_a_dropped_frame(path) -> Path:
    """An MPEG-4 AVI of 9 frame slots at 25 fps whose fifth frame was dropped: 9 declared, 8 decode."""
    with av.open(str(path), "w") as output:
        stream = output.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 25)
        for slot in (0, 1, 2, 3, 5, 6, 7, 8):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 20 * slot, np.uint8), format="rgb24")
            frame.pts, frame.time_base = slot, Fraction(1, 25)
            output.mux(stream.encode(frame))
        output.mux(stream.encode(None))
    return path


def _mkv_claiming_to_be_longer(path) -> Path:
    """A 24-frame MKV (0.96 s) whose file header says 1346.6 s, as clips cut from a longer file may; its video
    stream's DURATION tag is right."""
    make_video(path, frames=24, container="matroska")
    data = path.read_bytes()
    at = data.index(b"\x44\x89\x88") + 3  # the segment's Duration element: an 8-byte float, in ms
    path.write_bytes(data[:at] + struct.pack(">d", 1346637.0) + data[at + 8:])
    with av.open(str(path)) as container:
        assert container.duration == 1346637000 and container.streams.video[0].metadata["DURATION"] == \
            "00:00:00.960000000"
    return path


@pytest.mark.parametrize("make", [_avi_with_a_dropped_frame, _mkv_claiming_to_be_longer])
def test_whole_inputs_whose_counts_or_headers_say_more_are_not_called_truncated(run, tmp_path, make):
    """A dropped frame the container still counts, or a file header longer than the stream's own length, used
    to give "read 8 of the 9 frames it declares ... truncated or damaged" (and for the MKV a progress total of
    32287 frames). The frames reach the stream's declared end, so no warning; the MKV counts 24 frames."""
    source = make(tmp_path / ("in.avi" if make is _avi_with_a_dropped_frame else "in.mkv"))
    result = run(tmp_path, source.name, "-o", "out.mp4", "--no-lines")
    assert result.code == 0, result.err
    assert "truncated" not in result.out + result.err
    assert frames_in(tmp_path / "out.mp4") == (8 if source.suffix == ".avi" else 24)
    if source.suffix == ".mkv":
        info = probe_video(source)
        assert (info.frame_count, info.counted, info.end_time) == (24, False, Fraction(24, 25))


def _faststart(path) -> None:
    """Rewrite an MP4 with its index first (as streamable files are), in place."""
    with av.open(str(path)) as source:
        target = av.open(str(path) + ".tmp", "w", format="mp4", options={"movflags": "faststart"})
        stream = target.add_stream_from_template(source.streams.video[0])
        for packet in source.demux(source.streams.video[0]):
            if packet.size:
                packet.stream = stream
                target.mux(packet)
        target.close()
    os.replace(str(path) + ".tmp", path)


def test_bit_flipped_input_does_not_crash(run, tmp_path):
    make_video(tmp_path / "good.mkv", frames=24, container="matroska", width=96, height=64)
    data = bytearray((tmp_path / "good.mkv").read_bytes())
    rng = np.random.default_rng(5)
    for position in rng.integers(len(data) // 3, len(data), 40):
        data[position] ^= 0xFF
    (tmp_path / "flipped.mkv").write_bytes(bytes(data))
    result = run(tmp_path, "flipped.mkv", "-o", "out.mp4", "--no-lines")
    assert "Traceback" not in result.err
    if result.code == 0:  # damage in the picture: frames decoded anyway or skipped, each skip warned
        count = frames_in(tmp_path / "out.mp4")
        assert 0 < count <= 24
        assert count == 24 or "WARNING: flipped.mkv:" in result.out
    else:
        assert result.code == 2 and len(result.errors) == 1
        assert listing(tmp_path) == ["flipped.mkv", "good.mkv"]


# ------------------------------------------------------------------ bounded, validated inputs


def test_track_file_declaring_more_than_it_holds(run, tmp_path):
    (tmp_path / "huge.json").write_text('{"format":"trackoverlay.tracks","version":1,"frames":2147483648,'
                                        '"tracks":0,"path":[],"visible":[]}')
    started = time.monotonic()
    result = run(tmp_path, "--tracks", "huge.json", "-o", "out.mp4")
    assert time.monotonic() - started < 10
    assert result.code == 2 and "'path' has shape [0], expected [2147483648, 0, 2]" in result.error
    (tmp_path / "wide.json").write_text('{"format":"trackoverlay.tracks","version":1,"frames":1,'
                                        '"tracks":6500000,"path":[[[1,2],[3,4]]],"visible":[[1,1]]}')
    result = run(tmp_path, "--tracks", "wide.json", "-o", "out.mp4")
    assert result.code == 2 and "'path' has shape [1, 2, 2], expected [1, 6500000, 2]" in result.error
    assert listing(tmp_path) == ["huge.json", "wide.json"]


def test_radius_mode_over_the_memory_limit_is_refused_before_any_work(run, tmp_path):
    rng = np.random.default_rng(0)
    positions = (rng.random((1, 4000, 2)) * [1920, 1080]).astype(np.float32)
    save_tracks_json(Tracks(positions, np.ones((1, 4000), bool)), tmp_path / "dense.json")
    result = run(tmp_path, "--tracks", "dense.json", "--size", "1920x1080", "--frames", "3", "--graph-mode",
                 "radius", "-o", "out.mp4", "--memory-limit", "2")
    assert result.code == 2
    assert re.fullmatch(rf"{PROG}error: frame 0: drawing [\d,]+ links and 4,000 boxes needs about [\d.]+ GB of "
                        r"memory but the limit is 2\.0 GB; link fewer points .*", result.error), result.error
    assert listing(tmp_path) == ["dense.json"]


@pytest.mark.parametrize("args, words", [
    (["--size", "64x48", "--fps", "inf"], "argument --fps: must be a finite number, got inf"),
    (["--size", "64x48", "--fps", "nan"], "argument --fps: must be a finite number, got nan"),
    (["--size", "64x48", "--fps", "1e999"], "argument --fps: must be a finite number, got 1e999"),
    (["--size", "64x48", "--fps", "0"], "fps must be > 0, got 0.0"),
    (["--size", "64x48", "--fps", "200000", "-o", "o.mp4"], "fps must be a number in (0, 100000], got 200000"),
    (["--frames", "9" * 401], "argument --frames: must be a whole number in 0..10,000,000"),
    (["--frames", "１２"], "argument --frames: must be a whole number in 0..10,000,000, got １２"),
    (["--size", "１９２０x1080"], "argument --size: '１９２０x1080' is not a size"),
    (["--size", "64x48", "--line-width", "nan"], "argument --line-width: must be a finite number, got nan"),
    (["--size", "64x48", "--max-points", "1" + "0" * 400], "argument --max-points: must be a whole number"),
    (["--size", "64x48", "--line-color", "#+f+f+f"], "line color '#+f+f+f' is not a colour"),
    (["--size", "64x48", "--box-color", "# f f f"], "box color '# f f f' is not a colour"),
    (["--size", "64x48", "--box-color", "#ＦＦＦＦＦＦ"], "box color '#ＦＦＦＦＦＦ' is not a colour"),
    (["--size", "64x48", "--start-frame", "-1"], "argument --start-frame: must be a whole number in 0..10,000,000"),
    (["--size", "64x48", "--frames", "4", "--start-frame", "9"], "the video has 4 frames; it has no frame 9"),
    (["--size", "64x48", "--start-frame", "5", "--end-frame", "5"], "end frame (5) must be after the start frame"),
    (["--size", "64x48", "--memory-limit", "-1"], "--memory-limit must be > 0 GB, got -1"),
])
def test_bad_numbers_give_one_line(run, tmp_path, args, words):
    result = run(tmp_path, *args)
    assert result.code == 2 and words in result.error, result.err
    assert listing(tmp_path) == []


@pytest.mark.parametrize("coordinate, words", [
    ("1" + "0" * 400, "'path' holds a number too large for a float"),
    ("1" + "0" * 5000, "is not valid JSON (Exceeds the limit (4300 digits)"),
    ("true", "'path' must be nested lists of numbers of shape [1, 1, 2]; found bool"),
    ('"12"', "'path' must be nested lists of numbers of shape [1, 1, 2]; found str"),
])
def test_bad_track_coordinates_give_one_line(run, tmp_path, coordinate, words):
    (tmp_path / "t.json").write_text('{"format":"trackoverlay.tracks","version":1,"frames":1,"tracks":1,'
                                     f'"path":[[[{coordinate},5]]],"visible":[[1]]}}')
    result = run(tmp_path, "--tracks", "t.json", "--size", "64x48", "-o", "o.mp4")
    assert result.code == 2 and words in result.error, result.error
    assert listing(tmp_path) == ["t.json"]


def test_deeply_nested_track_json_gives_one_line(run, tmp_path):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    result = run(tmp_path, "--tracks", "deep.json", "-o", "o.mp4")
    assert result.code == 2 and result.error.endswith("deep.json is not valid JSON (nested too deeply)")


# ------------------------------------------------------------------ signals and streams


@pytest.mark.parametrize("signum, status, name", [
    (signal.SIGINT, 130, "interrupted (SIGINT)"), (signal.SIGTERM, 143, "stopped by SIGTERM"),
    (signal.SIGHUP, 129, "stopped by SIGHUP")])
def test_signals_mid_render_leave_no_file(tmp_path, signum, status, name):
    old = tmp_path / "out.mp4"
    old.write_bytes(b"the previous render")
    process = subprocess_cli(tmp_path, "--size", "640x360", "--frames", "3000", "-o", "out.mp4",
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".out.mp4.*.part")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.glob(".out.mp4.*.part")), "the video was never started"
    time.sleep(0.5)  # a few frames in
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    errors = [line for line in err.splitlines() if line.startswith(PROG)]
    assert process.returncode == status, err
    assert errors == [f"{PROG}{name}; no video was written"] and "Traceback" not in err
    assert listing(tmp_path) == ["out.mp4"] and old.read_bytes() == b"the previous render"


@pytest.mark.parametrize("stream", ["stdout-closed-pipe", "stdout-dev-full", "stderr-closed"])
def test_closed_or_full_streams(tmp_path, stream):
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    if stream == "stdout-dev-full":
        options["stdout"] = open("/dev/full", "w")  # noqa: SIM115 - closed below
    if stream == "stderr-closed":
        options = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL, "preexec_fn": lambda: os.close(2)}
    process = subprocess_cli(tmp_path, "--size", "160x90", "--frames", "20", "-o", "out.mp4", **options)
    if stream == "stdout-closed-pipe":
        process.stdout.close()  # like `| head -c 0`: the reader is gone before the first line
    out, err = process.communicate(timeout=120)
    if stream == "stdout-dev-full":
        options["stdout"].close()
    assert process.returncode == 0
    assert err is None or (b"Traceback" not in err and b"Logging error" not in err and b"Exception" not in err), err
    assert frames_in(tmp_path / "out.mp4") == 20 and listing(tmp_path) == ["out.mp4"]


def test_errors_with_stderr_closed_still_exit_2(tmp_path):
    process = subprocess_cli(tmp_path, "missing.mp4", stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             preexec_fn=lambda: os.close(2))
    process.communicate(timeout=60)
    assert process.returncode == 2 and listing(tmp_path) == []


def test_two_writers_to_one_output(tmp_path):
    processes = [subprocess_cli(tmp_path, "--size", "160x90", "--frames", "40", "-o", "out.mp4",
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(2)]
    results = [process.communicate(timeout=120) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], results
    assert listing(tmp_path) == ["out.mp4"] and frames_in(tmp_path / "out.mp4") == 40


# ------------------------------------------------------------------ frame ranges


def sticky_tracks(path, frames=12, switch=6) -> Path:
    """Tracks where hysteresis matters at ``switch``: a sticky link beats a slightly nearer newcomer.

    Point 4 appears at ``switch``; with the graph's memory, point 2 keeps its link to point 0 (20 px) over
    the newcomer (19 px); a graph starting at ``switch`` links 2 to 4 instead.
    """
    points = np.array([[0, 0], [10, 0], [0, 20], [0, 42], [0, 39]], np.float32) + [30, 6]
    positions = np.tile(points[None], (frames, 1, 1))
    visible = np.ones((frames, 5), bool)
    visible[:switch, 4] = False
    save_tracks_json(Tracks(positions, visible), path)
    return path


def png_frames(folder) -> dict:
    return {name: cv2.imread(str(folder / name), cv2.IMREAD_UNCHANGED) for name in listing(folder)}


def test_track_file_ranges_join_bit_exact(run, tmp_path):
    make_video(tmp_path / "shot.mp4", frames=12, width=96, height=64)
    tracks = sticky_tracks(tmp_path / "t.json")
    style = ("--tracks", tracks, "--units", "pixels", "--k", "1", "--hysteresis", "0.5", "--curve", "straight",
             "--line-width", "2", "--line-opacity", "1", "--box-size", "6")
    assert run(tmp_path, "shot.mp4", "-o", "whole/", *style).code == 0
    assert run(tmp_path, "shot.mp4", "-o", "a/", "--end-frame", "6", *style).code == 0
    assert run(tmp_path, "shot.mp4", "-o", "b/", "--start-frame", "6", *style).code == 0
    whole, joined = png_frames(tmp_path / "whole"), {**png_frames(tmp_path / "a"), **png_frames(tmp_path / "b")}
    assert list(whole) == list(joined) == [f"frame_{i:06d}.png" for i in range(12)]
    for name in whole:
        np.testing.assert_array_equal(joined[name], whole[name], err_msg=name)
    # without the graph's memory, frame 6 would be drawn differently: the replay is what makes them equal
    sticky_tracks(tmp_path / "late.json", frames=6, switch=0)
    fresh = ("--tracks", tmp_path / "late.json") + style[2:]
    assert run(tmp_path, "shot.mp4", "-o", "fresh/", "--end-frame", "6", *fresh).code == 0
    assert not np.array_equal(png_frames(tmp_path / "fresh")["frame_000000.png"][..., :3],
                              np.asarray(whole["frame_000006.png"])[..., :3])


PIXEL_LOOK = ("--units", "pixels", "--line-width", "1.5", "--box-size", "22", "--box-stroke", "1.5")


def test_video_parts_start_at_zero_and_add_up(run, shot, tmp_path):
    tracks = track_file(tmp_path / "t.json")
    assert run(shot.parent, "clip.mp4", "-o", "a.mp4", "--end-frame", "3", "--tracks", tracks, *PIXEL_LOOK).code == 0
    assert run(shot.parent, "clip.mp4", "-o", "b.mp4", "--start-frame", "3", "--tracks", tracks, *PIXEL_LOOK).code == 0
    assert np.allclose(frame_times(shot.parent / "a.mp4"), np.arange(3) * FRAME)
    assert np.allclose(frame_times(shot.parent / "b.mp4"), np.arange(5) * FRAME)
    assert [frame_index(frame) for frame in decoded(shot.parent / "b.mp4")] == [3, 4, 5, 6, 7]
    assert abs(audio_seconds(shot.parent / "b.mp4") - 5 * FRAME) <= FRAME


@pytest.fixture(scope="module")
def dots(tmp_path_factory) -> Path:
    """40 frames of 12 drifting glowing dots, 160x96, losslessly encoded."""
    path = tmp_path_factory.mktemp("dots") / "dots.mp4"
    with VideoWriter(path, fps=25, crf=0, preset="ultrafast") as writer:
        for frame in DemoClip(160, 96, 40, fps=25, dots=12, seed=4).frames():
            writer.write(frame)
    return path


DETECT = ("--detect-method", "bright", "--min-distance", "6", "--max-points", "30", "--k", "2",
          "--redetect-interval", "5", "--box-size", "8")


def test_detection_ranges_join_bit_exact(run, dots, tmp_path):
    """By default a part's detector sees every frame before its range: the parts equal the whole render."""
    shutil.copyfile(dots, tmp_path / "dots.mp4")
    assert run(tmp_path, "dots.mp4", "-o", "whole/", *DETECT).code == 0
    assert run(tmp_path, "dots.mp4", "-o", "a/", "--end-frame", "20", *DETECT).code == 0
    assert run(tmp_path, "dots.mp4", "-o", "b/", "--start-frame", "20", *DETECT).code == 0
    whole, joined = png_frames(tmp_path / "whole"), {**png_frames(tmp_path / "a"), **png_frames(tmp_path / "b")}
    assert list(whole) == list(joined) and len(whole) == 40
    for name in whole:
        np.testing.assert_array_equal(joined[name], whole[name], err_msg=name)


class RecordedPoints(DetectedPoints):
    """Detection that remembers each frame's visible points."""

    def __init__(self, warmup=None, first=0):
        super().__init__(TrackDetector(max_points=30, min_distance=6, method="bright", redetect_interval=5), warmup)
        self.first = first  # the index of the first frame the render hands over
        self.seen = {}

    def pairs(self, frames):
        for index, (frame, points) in enumerate(super().pairs(frames), self.first):
            self.seen[index] = points.positions[points.visible]
            yield frame, points


def test_bounded_detection_warmup_stays_within_its_tolerance(dots, tmp_path):
    """--warmup-frames 15: the stated tolerance (see DetectedPoints), measured on the drifting dots."""
    renderer = CpuRenderer(workers=1)
    spec = OverlaySpec(GraphParams(k=2), LineStyle(), BoxStyle(size=8))
    whole, part = RecordedPoints(), RecordedPoints(warmup=15, first=5)
    render_video(FrameSource.from_video(dots), whole, spec, renderer, tmp_path / "whole.mp4")
    render_video(FrameSource.from_video(dots), part, spec, renderer, tmp_path / "part.mp4", start_frame=20)
    renderer.close()
    assert len(part.seen) == 35 and frames_in(tmp_path / "part.mp4") == 20
    for index in range(20, 40):
        mine, reference = part.seen[index], whole.seen[index]
        distance = np.hypot(*(reference[:, None] - mine[None]).transpose(2, 0, 1))
        assert (distance.min(axis=1) <= 1.0).mean() >= 0.75, index
        assert abs(len(mine) - len(reference)) <= 2, index


# ------------------------------------------------------------------ defaults and progress


def test_default_output_beside_the_input_and_one_final_line(run, shot, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run(elsewhere, shot, "--tracks", track_file(tmp_path / "t.json"))
    assert result.code == 0, result.err
    assert listing(shot.parent) == ["clip.mp4", "clip_overlay.mp4"] and listing(elsewhere) == []
    lines = result.out.strip().splitlines()
    assert re.fullmatch(r"INFO: wrote 8 frames to .*shot/clip_overlay\.mp4 in [\d.]+ s \([\d.]+ frames/s\)", lines[-1])
    assert sum("wrote" in line for line in lines) == 1
    assert result.err.rstrip(" ").endswith("\r")  # the progress bar cleared itself: no second final line


def test_the_final_line_counts_the_frames_a_gif_kept(run, tmp_path):
    """At 60 fps a GIF keeps 8 of 12 frames (at least 2 cs apart): the last line says 8."""
    result = run(tmp_path, "--size", "64x48", "--frames", "12", "--fps", "60", "-o", "fast.gif")
    assert result.code == 0, result.err
    assert frames_in(tmp_path / "fast.gif") == 8
    assert re.match(r"INFO: wrote 8 frames to fast\.gif in ", result.out.strip().splitlines()[-1])


# ------------------------------------------------------------------ the Overlay Video node


@pytest.fixture
def comfy_temp(tmp_path, monkeypatch):
    """Stand-in ComfyUI modules for the Overlay Video node; returns its temp folder."""
    import types

    from fake_comfy import install_progress_bar

    temp = tmp_path / "temp"
    paths = types.ModuleType("folder_paths")
    paths.get_temp_directory = lambda: str(temp)
    paths.get_output_directory = lambda: str(tmp_path / "output")
    paths.get_save_image_path = lambda prefix, root: (os.path.join(root, os.path.dirname(prefix)),
                                                      os.path.basename(prefix), 1, "", prefix)
    install_progress_bar(monkeypatch)
    monkeypatch.setitem(sys.modules, "folder_paths", paths)
    return temp


def run_video_node(clip, **inputs):
    from fake_comfy import WIDGET_TYPES, install_comfy_api

    install_comfy_api()
    from trackoverlay.nodes.video import OverlayVideoNode

    widgets = {item.id: item.default for item in OverlayVideoNode.GET_SCHEMA().inputs
               if issubclass(item.Parent, WIDGET_TYPES)}
    widgets.update(backend="cpu", detect_method="bright", draw_lines=False, **inputs)

    class FileVideo:
        def get_stream_source(self):
            return str(clip)

    (video,) = OverlayVideoNode.execute(video=FileVideo(), **widgets).args
    return Path(video.get_stream_source())


@pytest.mark.parametrize("with_tracks", [False, True])
def test_video_node_draws_only_a_trimmed_videos_frames(comfy_temp, tmp_path, with_tracks):
    """Core Video Slice (start 0.2 s, 0.2 s long, at 25 fps) keeps source frames 5..9: the output has those 5
    frames, in order, and tracks of the trimmed frames (5 of them) fit it."""
    from fake_comfy import WIDGET_TYPES, install_comfy_api

    install_comfy_api()
    from comfy_api.latest import InputImpl
    from trackoverlay.nodes.video import OverlayVideoNode

    source = make_video(tmp_path / "clip.mp4", frames=16, options={"crf": "0"})
    widgets = {item.id: item.default for item in OverlayVideoNode.GET_SCHEMA().inputs
               if issubclass(item.Parent, WIDGET_TYPES)}
    widgets.update(backend="cpu", draw_lines=False, draw_boxes=False)
    tracks = None
    if with_tracks:
        tracks = {"track_path": np.zeros((5, 1, 2), np.float32), "track_visibility": np.ones((5, 1), bool)}
    video = InputImpl.VideoFromFile(str(source), start_time=0.2, duration=0.2)
    (output,) = OverlayVideoNode.execute(video=video, tracks=tracks, **widgets).args
    with av.open(output.get_stream_source()) as container:
        indices = [frame_index(frame.to_ndarray(format="rgb24")) for frame in container.decode(video=0)]
    assert indices == [5, 6, 7, 8, 9]


def test_video_node_keeps_the_audio(comfy_temp, clip):
    output = run_video_node(clip)
    assert output.name.endswith(".mp4") and streams(output)["audio"][:2] == ("aac", 6)
    assert abs(audio_seconds(output) - 8 * FRAME) <= FRAME
    assert "audio" not in streams(run_video_node(clip, keep_audio=False))


@pytest.mark.parametrize("name, audio, layer_only, suffix", [
    ("cam.avi", "pcm_s16le", False, ".mp4"),  # PCM with no channel layout
    ("voice.webm", "libopus", True, ".mov"),  # Opus into ProRes 4444
])
def test_video_node_keeps_pcm_and_opus_audio(comfy_temp, tmp_path, name, audio, layer_only, suffix):
    output = run_video_node(voice_clip(tmp_path / name, audio), layer_only=layer_only)
    assert output.suffix == suffix and streams(output)["audio"][:2] == ("aac", 2)
    assert abs(audio_seconds(output) - 16 * FRAME) <= FRAME


def test_video_node_layer_only_saves_prores_with_alpha(comfy_temp, clip, tmp_path):
    output = run_video_node(clip, layer_only=True)
    assert output == comfy_temp.parent / "output" / "TrackOverlay" / "layer_00001_.mov"
    assert streams(output)["video"][:2] == ("prores", "yuva444p12le")
    assert frames_in(output) == 8 and streams(output)["audio"][:2] == ("aac", 6)
    flat = tmp_path / "over_black.mp4"  # what Save Video stores: the layer over black, with its sound
    assert flatten_layer(output, flat) == 8
    assert streams(flat)["video"][:2] == ("h264", "yuv420p") and streams(flat)["audio"][:2] == ("aac", 6)
    assert abs(audio_seconds(flat) - audio_seconds(output)) <= FRAME


@pytest.mark.gpu
def test_gpu_layer_only_alpha_matches_both_renderers(run, shot, tmp_path):
    """The GPU backend writes the layer it rasterises (same render_layer API) and it matches the CPU's."""
    from trackoverlay.utils.raster.gpu import GpuRenderer

    tracks = track_file(tmp_path / "t.json")
    result = run(shot.parent, "clip.mp4", "--backend", "gpu", "--layer-only", "-o", "layer/", "--tracks", tracks,
                 *LAYER_STYLE)
    assert result.code == 0, result.err
    written = cv2.cvtColor(cv2.imread(str(shot.parent / "layer" / "frame_000000.png"), cv2.IMREAD_UNCHANGED),
                           cv2.COLOR_BGRA2RGBA)[..., 3].astype(int)
    for renderer in (GpuRenderer(), CpuRenderer(workers=1)):
        _, alpha = layer_of(renderer, tracks)
        assert np.abs(written - np.round(alpha)).max() <= 1, renderer.name
