"""Work run ahead of its consumer on a thread pool, handed back in order, and a gate for work too big to
share the machine."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext


def ordered_ahead(jobs: Iterable[Callable[[Future | None], object]], workers: int, name: str) -> Iterator:
    """The results of ``jobs`` run on ``workers`` threads (``trackoverlay-{name}``), up to 2 x ``workers`` ahead
    of the caller, in the jobs' order. Each job is called with the future of the job before it (None for the
    first), for work that needs its predecessor's result. An error is raised at its job's turn; closing the
    iterator cancels the jobs not started and waits for the running ones.

    Example::

        for layer in ordered_ahead((lambda _, f=f: rasterize(f) for f in frames), 4, "raster"):
            write(layer)
    """
    pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix=f"trackoverlay-{name}")
    waiting: deque = deque()
    try:
        earlier = None
        for job in jobs:
            earlier = pool.submit(job, earlier)
            waiting.append(earlier)
            if len(waiting) >= 2 * max(1, workers):
                yield waiting.popleft().result()
        while waiting:
            yield waiting.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


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
