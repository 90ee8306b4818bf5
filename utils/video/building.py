"""A video's overlays built on a worker process of their own, for the GPU renderer.

When the GPU draws, the host's share of a frame is Python work on threads
that take turns at Python's lock: decoding, building the overlay (the graph,
curves and boxes: a few hundred small NumPy calls), uploading and encoding.
Building is the largest part, so a render on the GPU hands it to a worker
process (:class:`~.processes.WorkerProcess`): each group of frames' points
goes down, their display lists come back (tens of kilobytes a frame, taken
apart in a tenth of a millisecond). Until the worker is ready the overlays
are built here; then the builder, its memory of earlier frames (the graph's
edges, trails, motion) included, moves to the worker, which goes on from
there: the display lists are the same wherever they are built. A worker that
does not start leaves the building here (logged); one that dies or fails
fails the render, as the state it held is gone.

Measured on the GPU test machine (16 cores, 1080p, 600 frames, 100-point
track file): the render took 5.37 / 5.85 ms a frame building here and
4.63 / 4.98 ms with every overlay built beforehand and taken apart at its
turn (two rounds).

Example::

    with built_apart(OverlayBuilder(spec), renderer, frames=600) as builder:
        display_lists = builder.group(points_of_eight_frames, indices)
"""

from __future__ import annotations

from contextlib import contextmanager

from ..core.log import LOGGER
from .processes import PROCESS_MIN_FRAMES, WorkerProcess, serve_jobs


class BuildingProcess:
    """Builds display lists like the :class:`~.stream.OverlayBuilder` it is given (:meth:`group`,
    :meth:`advance`), here until its worker is ready, then on the worker."""

    def __init__(self, builder, stop_check=None):
        self._builder = builder  # None once it has moved to the worker
        self._stop_check = stop_check
        self._worker = WorkerProcess(".utils.video.building", "building", "the overlays are built here")

    def _on_worker(self) -> bool:
        """Whether the worker builds (the builder moves there as soon as the worker is ready)."""
        if self._builder is not None and self._worker.ready and self._worker.usable:
            self._worker.ask(("take", self._builder), self._stop_check)
            self._builder = None
        return self._builder is None

    def replay_start(self, start: int) -> int:
        """See :meth:`~.stream.OverlayBuilder.replay_start` (called before any frame)."""
        return self._builder.replay_start(start)

    def advance(self, points) -> None:
        """See :meth:`~.stream.OverlayBuilder.advance`."""
        if self._on_worker():
            self._worker.ask(("advance", points), self._stop_check)
        else:
            self._builder.advance(points)

    def group(self, frames: list, indices: list | None = None) -> list:
        """See :meth:`~.stream.OverlayBuilder.group`."""
        if self._on_worker():
            return self._worker.ask(("group", frames, indices), self._stop_check)
        return self._builder.group(frames, indices)

    def close(self) -> None:
        """End the worker."""
        self._worker.hang_up()
        self._worker.wait(2.0)


def builds_apart(renderer, frames: int | None) -> bool:
    """Whether a render of ``frames`` (None: unknown) by ``renderer`` builds its overlays on a process: with
    the GPU renderer (on the CPU, drawing sets the pace), for :data:`~.processes.PROCESS_MIN_FRAMES` frames or
    more (starting the worker costs about as much as it saves on shorter renders)."""
    return getattr(renderer, "name", None) == "gpu" and (frames is None or frames >= PROCESS_MIN_FRAMES)


@contextmanager
def built_apart(builder, renderer, frames: int | None):
    """``builder``, or a :class:`BuildingProcess` that builds like it where :func:`builds_apart` says so for a
    render of ``frames`` by ``renderer``, closed after the block."""
    if not builds_apart(renderer, frames):
        yield builder
        return
    try:
        apart = BuildingProcess(builder, getattr(renderer, "stop_check", None))
    except OSError as error:
        LOGGER.warning("a building process could not be started (%s); the overlays are built here", error)
        yield builder
        return
    LOGGER.info("building the overlays on a process")
    try:
        yield apart
    finally:
        apart.close()


def serve(setup: dict) -> None:
    """A building worker: takes the parent's builder, then builds (or advances through) the frames it is sent."""
    held = []

    def do(job):
        kind, *details = job
        if kind == "take":
            held[:] = details
            return None
        if kind == "advance":
            return held[0].advance(*details)
        return held[0].group(*details)

    serve_jobs(do)
