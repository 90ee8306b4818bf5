"""A video's frames drawn on worker processes: the CPU backend, frames composited in their own 8-bit 4:2:0.

The CPU rasteriser is many small NumPy calls that hold Python's lock, so
frames drawn at once on threads take turns. Worker processes draw truly at
once: each frame's planes are decoded into shared memory
(:class:`SharedFrames`), a worker rasterises the frame's display list and
composites it over them in place, and only the display list and a short
reply cross the pipe.

Workers are this interpreter started afresh (``python -c``), importing this
package under the parent's own module name, so display lists pickle as they
are. Not :mod:`multiprocessing`'s spawn: that runs the host's main script
again in every worker, and ComfyUI's ``main.py`` parses its arguments and
loads every custom node on import. Jobs and replies are pickles on the
worker's standard input and output, so a worker ends when its parent hangs
up or goes away (its standard input closes). A worker that does not start leaves
its frames to the parent's threads (logged); one that dies while drawing
fails the render, since its frame may be half drawn.

Example::

    with draw_processes(CpuRenderer(), frames=240, width=1920, height=1080, held=25) as processes:
        planes = planes_from_frame(decoded, buffers=PlaneBuffers(processes.host_array))
        processes.draw_planes_in_place([display_list], [planes], glow=None)
"""

from __future__ import annotations

import os
import pickle
import queue
import shutil
import subprocess
import sys
import threading
import time
import traceback
from contextlib import contextmanager, suppress
from multiprocessing import resource_tracker
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path

import numpy as np

from ..core.log import LOGGER
from ..core.memory import keep_freed_memory
from ..core.threads import Worker
from ..raster.cpu import CpuRenderer
from .yuv import YuvPlanes, overlay_planes, packed_planes, plane_shapes

PROCESS_MIN_FRAMES = 60
"""Frames a render needs before it draws on processes. Workers start while the parent's threads draw, but
starting them (Python, NumPy and OpenCV in each) slows the render meanwhile. Measured on 16 cores (100-point
track file, x264 veryfast, 2 rounds), fps on threads / on processes: 1080p 30 frames 38-44 / 32-34, 60 frames
28-50 / 48-64, 90 frames 48-51 / 67-68; 4K 15 frames 12 / 11-12, 30 frames 17 / 16, 60 frames 23-26 / 25-26."""

WORKER_START_SECONDS = 60.0
"""How long a worker may take to start before it is ended and its frames go to the parent's threads."""

_POLL = 0.05  # seconds between checks of the stop check and the worker's life while it draws
_CLOSE_SECONDS = 2.0  # how long closing waits for the workers to leave before it ends them
_SHARED_MEMORY = Path("/dev/shm")  # Linux's shared memory, a size-limited file system in containers

_ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""A worker's environment beside its parent's: it draws one frame on one thread, and numerical libraries' own
thread pools there only spin against the other workers and the encoder. Measured on 16 cores (1080p, 240
frames, 100-point track file, 3 rounds): 8 workers' start 8.9-10.4 -> 4.2-4.4 s of CPU (ready in 0.74-0.82 ->
0.55-0.59 s), their CPU a frame 86 -> 56-64 ms (system time 9-11 -> 2 ms)."""

_PACKAGE = __name__.rsplit(".utils.", 1)[0]  # the package's module name here (a host may choose it)
_PACKAGE_FOLDER = str(Path(__file__).resolve().parents[2])

_BOOT = """\
import importlib, pickle, sys, types
setup = pickle.load(sys.stdin.buffer)
sys.path[:] = setup["path"]
package = types.ModuleType(setup["package"])
package.__path__ = [setup["folder"]]
sys.modules[setup["package"]] = package
importlib.import_module(setup["package"] + ".utils.video.processes").serve(setup)
"""
"""A worker's first lines: its setup from standard input, then this package (not its ``__init__``, which
registers nodes for a host) under the parent's module name."""


class WorkerTraceback(Exception):
    """The traceback of an error raised in a worker, chained to that error where the parent raises it."""


# --------------------------------------------------------------------------------------------- parent side


class SharedFrames:
    """Host memory in named shared memory blocks that workers open: an allocator for
    :class:`~.yuv.PlaneBuffers`, which finds a frame's block and offset again (:meth:`locate`)."""

    def __init__(self):
        self._blocks: list[tuple[int, SharedMemory]] = []  # (address of the first byte, block)

    def allocate(self, nbytes: int) -> np.ndarray:
        """A new uint8 array of ``nbytes`` in a block of its own."""
        block = _Block(create=True, size=max(1, nbytes))
        array = np.frombuffer(block.buf, np.uint8, count=nbytes)
        self._blocks.append((array.ctypes.data, block))
        return array

    def locate(self, planes: YuvPlanes) -> tuple[str, int] | None:
        """(block name, byte offset) of ``planes`` packed in one of these blocks, else None."""
        packed = planes.packed()
        if packed is None:
            return None
        address = packed.ctypes.data
        for start, block in self._blocks:
            if start <= address and address + packed.size <= start + block.size:
                return block.name, address - start
        return None

    def close(self) -> None:
        """Free the blocks: their names now, their memory once nothing holds a frame made in them."""
        for _, block in self._blocks:
            with suppress(FileNotFoundError):
                block.unlink()
        _HELD.extend(block for _, block in self._blocks)
        self._blocks.clear()
        _HELD[:] = [block for block in _HELD if not block.closed()]


class _Block(SharedMemory):
    """A shared memory block that frames may outlive (a caller holding the last one): it is closed once they
    are gone, at a later :meth:`SharedFrames.close` or at exit."""

    def closed(self) -> bool:
        """Close the block if nothing holds its memory; whether it is closed."""
        try:
            self.close()
        except BufferError:
            return False
        return True

    def __del__(self):
        self.closed()


_HELD: list[_Block] = []  # blocks whose memory was still held when they were freed


class _DrawingProcess:
    """One worker process, started at once. Jobs go down its standard input and replies come back up its
    standard output, read by a thread of its own (the parent's threads draw frames themselves until the worker
    says it is ready)."""

    def __init__(self):
        setup = {"path": list(sys.path), "package": _PACKAGE, "folder": _PACKAGE_FOLDER}
        flags = getattr(subprocess, "CREATE_NO_WINDOW", 0)  # no console window per worker on Windows
        self.process = subprocess.Popen([sys.executable, "-c", _BOOT], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, creationflags=flags,
                                        env={**os.environ, **_ONE_THREAD})
        self.failure: Exception | None = None
        self._leaving = False
        self._ready = threading.Event()
        self._replies: queue.SimpleQueue = queue.SimpleQueue()
        self._send(setup)
        self._reader = Worker(self._read, "draw-process")

    def _send(self, item) -> None:
        pickle.dump(item, self.process.stdin, pickle.HIGHEST_PROTOCOL)
        self.process.stdin.flush()

    def _read(self) -> None:
        """Wait for the worker to say it is ready (at most :data:`WORKER_START_SECONDS`; a failure is logged and
        kept in :attr:`failure`), then hand its replies on until it leaves."""
        timer = threading.Timer(WORKER_START_SECONDS, self.process.kill)
        timer.start()
        try:
            pickle.load(self.process.stdout)
        except Exception:  # noqa: BLE001 - it left (or was ended) before it was ready
            self.failure = RuntimeError(f"it exited with code {self.process.wait()} before it was ready")
            if not self._leaving:
                LOGGER.warning("a drawing process did not start (%s); its frames are drawn on threads",
                               self.failure)
        finally:
            timer.cancel()
            self._ready.set()
        while self.failure is None:
            try:
                self._replies.put(pickle.load(self.process.stdout))
            except Exception:  # noqa: BLE001 - it left
                break
        self._replies.put(_LEFT)
        self.process.stdout.close()

    @property
    def ready(self) -> bool:
        """Whether the worker is done starting (ready, or failed)."""
        return self._ready.is_set()

    @property
    def usable(self) -> bool:
        """Whether the worker can be asked to draw: ready, running, and nobody hung up."""
        return self.ready and self.failure is None and not self._leaving and self.process.poll() is None

    def draw(self, job: tuple, stop_check) -> None:
        """Have the worker draw ``job``; raises what the worker raised, or ``stop_check``'s error (then the
        worker is ended), or a :class:`RuntimeError` when the worker dies."""
        try:
            self._send(job)
        except OSError:
            pass  # it is gone: its reader says so
        while True:
            try:
                reply = self._replies.get(timeout=_POLL)
                break
            except queue.Empty:
                if stop_check is None:
                    continue
                try:
                    stop_check()
                except BaseException:
                    self._leaving = True
                    self.process.kill()  # the frame it draws is not wanted
                    raise
        if reply is _LEFT:
            raise RuntimeError(f"a drawing process (pid {self.process.pid}) ended with exit code "
                               f"{self.process.wait()} while it drew a frame; the video was not written")
        if reply is not None:
            error, text = reply
            raise error from WorkerTraceback(text)

    def hang_up(self) -> None:
        """Tell the worker to leave (it does after the frame it draws)."""
        self._leaving = True
        with suppress(OSError):
            self.process.stdin.close()

    def wait(self, seconds: float) -> None:
        """Wait at most ``seconds`` for the worker to leave, then end it."""
        try:
            self.process.wait(max(0.0, seconds))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join()  # it ends with the process's output


_LEFT = object()  # a reply that says the worker left


class DrawProcesses:
    """Draws frames over planes in shared memory on ``renderer.frames_at_once`` worker processes.

    ``host_array`` gives the frames' memory (:class:`SharedFrames`);
    :meth:`draw_planes_in_place` draws and composites frames in place, from
    as many threads at once as there are workers. Frames a worker could not
    take (it did not start, or the planes are not in shared memory) are drawn
    here by ``renderer``.
    """

    def __init__(self, renderer: CpuRenderer):
        self.frames_at_once = renderer.frames_at_once
        self._stop_check = renderer.stop_check
        self._renderer = renderer.one_band()
        self._frames = SharedFrames()
        self._workers: list[_DrawingProcess] = []
        self._slots: queue.SimpleQueue = queue.SimpleQueue()  # a worker, or None: draw here
        for _ in range(self.frames_at_once):
            try:
                self._workers.append(_DrawingProcess())
                self._slots.put(self._workers[-1])
            except OSError as error:
                LOGGER.warning("a drawing process could not be started (%s); its frames are drawn on threads",
                               error)
                self._slots.put(None)

    def host_array(self, nbytes: int) -> np.ndarray:
        """Frame memory the workers can draw in."""
        return self._frames.allocate(nbytes)

    def draw_planes_in_place(self, display_lists: list, planes: list, glow=None) -> int:
        """Draw each of ``display_lists`` (over its ``glow``) over its ``planes`` in place; returns how many
        were drawn (all)."""
        for display_list, picture in zip(display_lists, planes):
            self._draw(display_list, picture, glow)
        return len(display_lists)

    def _draw(self, display_list, picture: YuvPlanes, glow) -> None:
        place = self._frames.locate(picture)
        worker = self._slots.get()
        try:
            if worker is not None and worker.usable and place is not None:
                worker.draw((display_list, glow, *place, picture.height, picture.width, picture.colorspace,
                             picture.full_range), self._stop_check)
            else:  # no worker here, or it is still starting
                overlay_planes(self._renderer, display_list, picture, glow)
        finally:  # a worker that failed to start or left is not asked again
            self._slots.put(worker if worker is not None and (worker.usable or not worker.ready) else None)

    def close(self) -> None:
        """End the workers (side by side) and free the frames' shared memory."""
        for worker in self._workers:
            worker.hang_up()
        deadline = time.monotonic() + _CLOSE_SECONDS
        for worker in self._workers:
            worker.wait(deadline - time.monotonic())
        self._frames.close()


def _shared_memory_short(nbytes: int) -> str | None:
    """Why ``nbytes`` of shared memory cannot be had (Linux's ``/dev/shm`` is too small), or None."""
    if not _SHARED_MEMORY.is_dir():
        return None
    free = shutil.disk_usage(_SHARED_MEMORY).free
    if free >= nbytes:
        return None
    return (f"{_SHARED_MEMORY} has {free >> 20} MiB free and the frames in flight need {nbytes >> 20} MiB "
            "(a container's default is 64 MiB: raise it with docker run --shm-size)")


@contextmanager
def draw_processes(renderer, frames: int | None, width: int, height: int, held: int):
    """:class:`DrawProcesses` for a render of ``frames`` (None: unknown) 4:2:0 frames of ``width`` x ``height``,
    ``held`` of them in memory at once, with ``renderer``, closed after the block; or None where drawing stays
    on ``renderer``'s threads: another renderer, one frame at a time, fewer frames than
    :data:`PROCESS_MIN_FRAMES`, too little shared memory (logged)."""
    if not isinstance(renderer, CpuRenderer) or renderer.frames_at_once < 2 or (
            frames is not None and frames < PROCESS_MIN_FRAMES):
        yield None
        return
    short = _shared_memory_short(held * width * height * 3 // 2)
    if short is not None:
        LOGGER.warning("drawing on threads, not on processes: %s", short)
        yield None
        return
    processes = DrawProcesses(renderer)
    LOGGER.info("drawing on %d processes", processes.frames_at_once)
    try:
        yield processes
    finally:
        processes.close()


# --------------------------------------------------------------------------------------------- worker side


def _attach(name: str) -> SharedMemory:
    """The parent's block ``name``; the parent alone tracks and frees it."""
    if sys.version_info >= (3, 13):
        return SharedMemory(name, track=False)
    register = resource_tracker.register  # before 3.13 opening a block registers it to be freed at exit
    resource_tracker.register = lambda *_: None
    try:
        return SharedMemory(name)
    finally:
        resource_tracker.register = register


def _sendable(error: BaseException) -> tuple:
    """(``error``, its traceback) as the parent can receive it (a :class:`RuntimeError` of its text where
    ``error`` does not pickle)."""
    text = "".join(traceback.format_exception(error))
    try:
        pickle.dumps(error)
    except Exception:  # noqa: BLE001 - any pickling failure
        error = RuntimeError(f"{type(error).__name__}: {error}")
    return error, text


def _draw_job(job: tuple, renderer: CpuRenderer, blocks: dict) -> None:
    """Draw one job: a display list over the planes at an offset in one of the parent's blocks, in place."""
    display_list, glow, name, offset, height, width, colorspace, full_range = job
    if name not in blocks:
        blocks[name] = _attach(name)
    flat = np.frombuffer(blocks[name].buf, np.uint8, count=height * width * 3 // 2, offset=offset)
    y, u, v = packed_planes(flat, plane_shapes(height, width))
    overlay_planes(renderer, display_list, YuvPlanes(y, u, v, colorspace, full_range), glow)


def serve(setup: dict) -> None:
    """A worker's life: say it is ready, then draw the jobs that come down standard input until it closes (the
    parent hung up or went away), each reply going up standard output."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray output goes to standard error, not the replies
    keep_freed_memory()
    renderer = CpuRenderer(workers=1)
    blocks: dict[str, SharedMemory] = {}
    reply = None  # the first says it is ready
    try:
        while True:
            pickle.dump(reply, replies, pickle.HIGHEST_PROTOCOL)
            replies.flush()
            try:
                job = pickle.load(sys.stdin.buffer)
            except EOFError:
                break
            try:
                _draw_job(job, renderer, blocks)
                reply = None
            except Exception as error:  # noqa: BLE001 - raised in the parent
                reply = _sendable(error)
    except BrokenPipeError:
        pass  # the parent went away while this worker drew
    for block in blocks.values():
        block.close()
