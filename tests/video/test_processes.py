"""A video's frames drawn on worker processes: the same video as on threads, workers ended and shared memory
freed after a render, a worker that does not start leaves its frames to threads, one that dies or is stopped
fails the render, and the pack's own module name (a host's choice) reaches the workers."""

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scenes import polylines
from test_yuv import SPEC, decoded_planes, random_tracks, smooth_clip
from trackoverlay.utils.draw.display_list import DisplayList
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.raster.fallback import FallbackRenderer
from trackoverlay.utils.raster.glow import Glow
from trackoverlay.utils.video import processes, stream
from trackoverlay.utils.video.stream import FrameSource, TrackPoints, render_video
from trackoverlay.utils.video.yuv import YuvPlanes, packed_planes

REPO = Path(__file__).resolve().parents[2]
SHM = Path("/dev/shm")
FRAMES, WIDTH, HEIGHT = 12, 160, 96


@pytest.fixture
def started(monkeypatch) -> list:
    """Every worker started while the test runs (ready before the render's first frame: the parent's threads would
    draw a short test clip alone while workers start), and how many frames each was asked to draw."""
    workers, start, draw = [], processes._DrawingProcess.__init__, processes._DrawingProcess.draw

    def starting(self):
        start(self)
        while not self.ready:
            time.sleep(0.01)
        self.asked = 0
        workers.append(self)

    def drawing(self, job, stop_check):
        self.asked += 1
        return draw(self, job, stop_check)

    monkeypatch.setattr(processes._DrawingProcess, "__init__", starting)
    monkeypatch.setattr(processes._DrawingProcess, "draw", drawing)
    return workers


def shared_memory_names() -> set:
    return set(os.listdir(SHM)) if SHM.is_dir() else set()


def render(folder: Path, name: str, renderer=None, frames=FRAMES, spec=SPEC, **options) -> Path:
    """The test clip with random tracks drawn losslessly by ``renderer`` (2 frames at once by default)."""
    clip = folder / "clip.mp4"
    if not clip.exists():
        smooth_clip(clip, frames=frames, width=WIDTH, height=HEIGHT)
    renderer = renderer or CpuRenderer(workers=2, frames_at_once=2)
    output = folder / f"{name}.mp4"
    try:
        render_video(FrameSource.from_video(clip), TrackPoints(random_tracks(frames, 10, WIDTH, HEIGHT, seed=4)),
                     spec, renderer, output, crf=0, preset="ultrafast", **options)
    finally:
        renderer.close()
    return output


def assert_same_video(a: Path, b: Path) -> None:
    planes_a, planes_b = decoded_planes(a), decoded_planes(b)
    assert len(planes_a) == len(planes_b) == FRAMES
    for frame_a, frame_b in zip(planes_a, planes_b):
        for plane_a, plane_b in zip(frame_a, frame_b):
            np.testing.assert_array_equal(plane_a, plane_b)


def test_frames_drawn_on_processes_equal_frames_drawn_on_threads(tmp_path, monkeypatch, started):
    before = shared_memory_names()
    on_threads = render(tmp_path, "threads")  # 12 frames: below PROCESS_MIN_FRAMES
    assert started == []
    monkeypatch.setattr(processes, "PROCESS_MIN_FRAMES", 0)
    on_processes = render(tmp_path, "processes")
    assert len(started) == 2 and sum(worker.asked for worker in started) == FRAMES
    assert_same_video(on_threads, on_processes)
    source = decoded_planes(tmp_path / "clip.mp4")
    assert np.abs(decoded_planes(on_processes)[5][0] - source[5][0]).max() > 50  # drawn
    assert all(worker.process.poll() is not None for worker in started)  # the workers left
    assert shared_memory_names() == before and processes._HELD == []  # the frames' memory is freed


def test_a_render_that_draws_nothing_starts_no_process(tmp_path, monkeypatch, started):
    monkeypatch.setattr(processes, "PROCESS_MIN_FRAMES", 0)
    render(tmp_path, "nothing", spec=dataclasses.replace(SPEC, lines=None, boxes=None))
    assert started == []
    assert_same_video(tmp_path / "clip.mp4", tmp_path / "nothing.mp4")


def test_processes_draw_a_glowing_overlay_in_yuv_as_threads_would(tmp_path, monkeypatch, started):
    glowing = dataclasses.replace(SPEC, glow=Glow(radius=6.0, strength=2.0))
    rule = stream._glow_in_yuv
    monkeypatch.setattr(stream, "_glow_in_yuv", lambda renderer, processes: True)  # threads too, to compare
    on_threads = render(tmp_path, "threads", spec=glowing)
    monkeypatch.setattr(stream, "_glow_in_yuv", rule)
    monkeypatch.setattr(processes, "PROCESS_MIN_FRAMES", 0)
    on_processes = render(tmp_path, "processes", spec=glowing)
    assert sum(worker.asked for worker in started) == FRAMES
    assert_same_video(on_threads, on_processes)


def test_a_worker_that_does_not_start_leaves_its_frames_to_threads(tmp_path, monkeypatch, started, caplog):
    on_threads = render(tmp_path, "threads")
    monkeypatch.setattr(processes, "PROCESS_MIN_FRAMES", 0)
    monkeypatch.setattr(processes, "_BOOT", "import sys; sys.exit(3)")
    fallen_back = render(tmp_path, "fallen-back")
    assert_same_video(on_threads, fallen_back)
    assert len(started) == 2 and sum(worker.asked for worker in started) == 0
    with caplog.at_level(logging.WARNING, "trackoverlay"):
        failed = processes._DrawingProcess()
        while not failed.ready:
            time.sleep(0.01)
    assert not failed.usable and str(failed.failure) == "it exited with code 3 before it was ready"
    assert "a drawing process did not start (it exited with code 3 before it was ready)" in caplog.text


def test_a_worker_that_cannot_be_launched_leaves_its_frames_to_threads(tmp_path, monkeypatch, caplog):
    on_threads = render(tmp_path, "threads")
    monkeypatch.setattr(processes, "PROCESS_MIN_FRAMES", 0)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with caplog.at_level(logging.WARNING, "trackoverlay"):
        fallen_back = render(tmp_path, "fallen-back")
    assert_same_video(on_threads, fallen_back)
    assert "could not be started" in caplog.text and "no-such-python" in caplog.text


def test_a_worker_that_dies_while_drawing_fails_the_render(tmp_path, monkeypatch, started):
    monkeypatch.setattr(processes, "PROCESS_MIN_FRAMES", 0)
    draw = processes._DrawingProcess.draw

    def dying(self, job, stop_check):
        if sum(worker.asked for worker in started) == 5:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
        return draw(self, job, stop_check)

    monkeypatch.setattr(processes._DrawingProcess, "draw", dying)
    before = shared_memory_names()
    with pytest.raises(RuntimeError, match=r"a drawing process \(pid \d+\) ended with exit code -9 while it drew"):
        render(tmp_path, "died")
    assert not (tmp_path / "died.mp4").exists()
    assert all(worker.process.poll() is not None for worker in started)
    assert shared_memory_names() == before


def started_process() -> processes._DrawingProcess:
    process = processes._DrawingProcess()
    while not process.ready:
        time.sleep(0.01)
    assert process.usable, process.failure
    return process


class Stopped(Exception):
    pass


def shared_planes(frames: processes.SharedFrames, height: int, width: int) -> YuvPlanes:
    flat = frames.allocate(height * width * 3 // 2)
    flat[:] = 128
    return YuvPlanes(*packed_planes(flat, [(height, width)] + [(height // 2, width // 2)] * 2))


def job(planes: YuvPlanes, frames: processes.SharedFrames, display_list: DisplayList) -> tuple:
    return (display_list, None, *frames.locate(planes), planes.height, planes.width, planes.colorspace,
            planes.full_range)


def test_a_worker_raises_the_errors_of_its_jobs_with_their_traceback_and_goes_on():
    frames = processes.SharedFrames()
    worker = started_process()
    try:
        planes = shared_planes(frames, HEIGHT, WIDTH)
        lines = DisplayList((polylines([[(10, 10), (150, 80)]], width=4.0),))
        missing = ("no-such-block", *job(planes, frames, lines)[3:])
        with pytest.raises(FileNotFoundError) as raised:
            worker.draw(job(planes, frames, lines)[:2] + missing, None)
        assert isinstance(raised.value.__cause__, processes.WorkerTraceback)
        assert "_attach" in str(raised.value.__cause__)
        worker.draw(job(planes, frames, lines), None)  # the worker goes on
        assert planes.y[45, 80] == 235 and planes.y[80, 10] == 128  # white on the line, untouched beside it
    finally:
        worker.hang_up()
        worker.wait(10)
        frames.close()


def test_a_stop_while_a_worker_draws_ends_that_worker():
    frames = processes.SharedFrames()
    worker = started_process()
    try:
        planes = shared_planes(frames, 2160, 3840)
        rng = np.random.default_rng(0)
        wide = DisplayList((polylines(list(rng.random((400, 2, 2)) * [3840, 2160]), width=300.0),))

        def stop():
            raise Stopped

        with pytest.raises(Stopped):
            worker.draw(job(planes, frames, wide), stop)
        assert not worker.usable
        worker.process.wait(30)  # it left without finishing the frame
    finally:
        worker.hang_up()
        worker.wait(10)
        frames.close()


def test_a_worker_leaves_cleanly_when_its_parent_hangs_up():
    worker = started_process()
    worker.hang_up()
    assert worker.process.wait(30) == 0
    worker.wait(0)


ORPHANED = """
import sys, time
from trackoverlay.utils.video import processes
worker = processes._DrawingProcess()
while not worker.ready:
    time.sleep(0.01)
print(worker.process.pid, flush=True)
time.sleep(600)
"""


def running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie nobody has reaped yet does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def test_a_worker_leaves_when_its_parent_goes_away():
    parent = subprocess.Popen([sys.executable, "-c", ORPHANED], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    for _ in range(600):  # its standard input closes with the parent: it leaves
        if not running(worker):
            return
        time.sleep(0.05)
    os.kill(worker, signal.SIGKILL)
    pytest.fail("the worker outlived its parent by 30 s")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads a worker's environment from /proc (Linux)")
def test_workers_run_numerical_libraries_on_one_thread_and_keep_the_rest_of_the_environment(monkeypatch):
    """A worker draws one frame on one thread: BLAS and OpenMP pools there would only spin against the other
    workers (on 16 cores they doubled the workers' start CPU and added 40% to their CPU a frame)."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "16")
    monkeypatch.setenv("TRACKOVERLAY_TEST_PASSED_ON", "yes")
    drawer = processes.DrawProcesses(CpuRenderer(workers=2, frames_at_once=2))
    try:
        for worker in drawer._workers:
            environment = dict(item.split("=", 1) for item in Path(f"/proc/{worker.process.pid}/environ")
                               .read_text().split("\0") if "=" in item)
            pools = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
            assert [environment.get(name) for name in pools] == ["1"] * len(pools)
            assert environment["TRACKOVERLAY_TEST_PASSED_ON"] == "yes"
    finally:
        drawer.close()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "16"  # the parent's own is left as it was


def test_a_worker_loads_no_opencv_until_a_frame_glows():
    """A worker imports what drawing needs and not OpenCV, whose import and thread pool cost each worker's start
    (on 16 cores, 8 workers drew a 240-frame 1080p render at 96 fps with it loaded, 108-112 without)."""
    code = ("import sys, types; package = types.ModuleType('trackoverlay_probe'); package.__path__ = [sys.argv[1]]; "
            "sys.modules['trackoverlay_probe'] = package; import trackoverlay_probe.utils.video.processes; "
            "print('cv2' in sys.modules)")
    loaded = subprocess.run([sys.executable, "-c", code, str(REPO)], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"


def test_processes_draw_only_long_cpu_renders_with_room_in_shared_memory(monkeypatch, caplog):
    def chosen(renderer, frames, width=1920, height=1080, held=25):
        with processes.draw_processes(renderer, frames, width, height, held) as drawer:
            return drawer is not None

    renderer = CpuRenderer(workers=2, frames_at_once=2)
    minimum = processes.PROCESS_MIN_FRAMES
    assert chosen(renderer, minimum) and chosen(renderer, None)  # unknown length: a video may be long
    assert not chosen(renderer, minimum - 1)
    assert not chosen(CpuRenderer(workers=2, frames_at_once=1), None)  # one frame at a time: nothing to share
    assert not chosen(FallbackRenderer(object(), CpuRenderer), None)
    if SHM.is_dir():
        monkeypatch.setattr(processes.shutil, "disk_usage", lambda path: SimpleNamespace(free=64 << 20))
        with caplog.at_level(logging.WARNING, "trackoverlay"):
            assert not chosen(renderer, None)
        assert "has 64 MiB free and the frames in flight need 74 MiB" in caplog.text and "--shm-size" in caplog.text
    renderer.close()


WORKERS_UNDER_A_HOSTS_NAME = """
import importlib.util, json, sys, time
name = sys.argv[1]
spec = importlib.util.spec_from_file_location(name, sys.argv[2] + "/__init__.py", submodule_search_locations=[sys.argv[2]])
module = importlib.util.module_from_spec(spec)
sys.modules[name] = module
spec.loader.exec_module(module)
from importlib import import_module
processes = import_module(name + ".utils.video.processes")
yuv = import_module(name + ".utils.video.yuv")
display_list = import_module(name + ".utils.draw.display_list")
Polylines = display_list.Polylines
import numpy as np
frames = processes.SharedFrames()
flat = frames.allocate(96 * 160 * 3 // 2)
flat[:] = 128
planes = yuv.YuvPlanes(*yuv.packed_planes(flat, [(96, 160), (48, 80), (48, 80)]))
line = Polylines(np.array([[10, 10], [150, 80]], np.float32), np.array([0, 2]), np.array([4.0], np.float32),
                 np.ones((1, 4), np.float32), np.ones((1, 4), np.float32), np.zeros((1, 2), np.float32),
                 np.zeros(1, bool))
worker = processes._DrawingProcess()
while not worker.ready:
    time.sleep(0.01)
worker.draw((display_list.DisplayList((line,)), None, *frames.locate(planes), 96, 160, 1, False), None)
print(json.dumps({"module": type(line).__module__, "drawn": int(planes.y[45, 80])}))
worker.hang_up()
worker.wait(10)
frames.close()
"""


def test_workers_import_the_pack_under_the_name_its_host_gave_it(tmp_path):
    """ComfyUI imports a custom node under its folder's path (dots replaced); display lists pickle by that name."""
    name = str(tmp_path / "custom_nodes" / "track_overlay_x_pack")
    result = subprocess.run([sys.executable, "-c", WORKERS_UNDER_A_HOSTS_NAME, name, str(REPO)], capture_output=True,
                            text=True, cwd="/", timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply == {"module": name + ".utils.draw.display_list", "drawn": 235}
