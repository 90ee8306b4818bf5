"""Work run ahead of its consumer on a thread pool, handed back in order, threads waited for through
interrupts, and a gate for work too big to share the machine."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager, nullcontext


def wait_out(block: Callable[[], object]) -> None:
    """Call ``block`` (a wait for threads already told to stop) until it returns, even when an interrupt (Ctrl-C, a
    signal handler's exception) comes meanwhile: that is raised once the wait is over, so no thread is left
    running what the caller closes next.

    Example::

        stop.set()
        wait_out(worker.ended.wait)
    """
    interrupt = None
    while True:
        try:
            block()
            break
        except BaseException as error:  # noqa: BLE001 - raised once the threads are gone
            interrupt = interrupt or error
    if interrupt is not None:
        raise interrupt


class Worker(threading.Thread):
    """A daemon thread ``trackoverlay-{name}`` that runs ``body``, started at once; ``ended`` is set when
    ``body`` is done, for waits an interrupt may cut short (:func:`join_all`).

    Example::

        worker = Worker(lambda: encode(frames), "encode")
        worker.ended.wait()
    """

    def __init__(self, body: Callable[[], None], name: str):
        super().__init__(name=f"trackoverlay-{name}", daemon=True)
        self._body = body
        self.ended = threading.Event()
        self.start()

    def run(self) -> None:
        try:
            self._body()
        finally:
            del self._body  # as Thread.run drops its target
            self.ended.set()


def join_all(workers: Iterable[Worker]) -> None:
    """Wait for ``workers`` (already told to stop) to end, through interrupts (:func:`wait_out`). Their events
    are waited on, not ``Thread.join``: a join that an interrupt cuts short takes a running thread for ended
    (Python 3.11), and later joins return at once."""
    workers = list(workers)

    def join():
        for worker in workers:
            worker.ended.wait()
            worker.join()

    wait_out(join)


def ordered_ahead(jobs: Iterable[Callable[[], object]], workers: int, name: str) -> Iterator:
    """The results of ``jobs`` run on ``workers`` threads (``trackoverlay-{name}``), up to 2 x ``workers`` ahead
    of the caller, in the jobs' order; jobs start in that order too (a job may wait on work its predecessor
    publishes, which has then started). An error is raised at its job's turn; closing the iterator (or an
    error) cancels the jobs not started and waits for the running ones (:func:`wait_out`).

    Example::

        for layer in ordered_ahead((lambda f=f: rasterize(f) for f in frames), 4, "raster"):
            write(layer)
    """
    pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix=f"trackoverlay-{name}")
    waiting: deque = deque()
    try:
        for job in jobs:
            waiting.append(pool.submit(job))
            if len(waiting) >= 2 * max(1, workers):
                yield waiting[0].result()  # left in ``waiting`` until done with, so the clean-up waits for it
                waiting.popleft()
        while waiting:
            yield waiting[0].result()
            waiting.popleft()
    finally:
        pool.shutdown(wait=False)
        running = [future for future in waiting if not future.cancel()]  # the others never start
        wait_out(lambda: wait(running))  # not the pool's joins (see :func:`join_all`)
        pool.shutdown()  # its threads are idle now and end at once


class SharedGate:
    """Lets ``count`` jobs run at once, each holding a share, or one job alone, holding every share (work
    whose memory would not fit beside the others').

    Example::

        with gate.share(alone=frame_is_huge):
            draw(frame)
    """

    def __init__(self, count: int):
        self.count = max(1, count)
        self._shares = threading.Semaphore(self.count)
        self._alone = threading.Lock()  # one job gathers every share at a time (two would deadlock)

    @contextmanager
    def share(self, alone: bool = False):
        """Hold one share (or, ``alone``, all of them, once the running jobs let go) while the block runs."""
        taken = self.count if alone else 1
        with self._alone if alone else nullcontext():
            for _ in range(taken):
                self._shares.acquire()
        try:
            yield
        finally:
            self._shares.release(taken)
