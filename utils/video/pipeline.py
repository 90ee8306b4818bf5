"""Stages on threads of their own: produce -> transform -> [finish] -> consume, with bounded queues.

::

    produce (thread) ─▶ queue ─▶ transform (caller's thread) ─▶ queue ─▶ [finish (thread) ─▶ queue ─▶]
        consume (thread)

The caller's thread runs ``transform``, so signal handlers (Ctrl-C,
SIGTERM) and host callbacks that raise (ComfyUI's interrupt) act where they
always did; an optional ``finish`` stage splits the middle work over two
threads (the video path builds a frame's overlay while the GPU draws the
one before). Full queues block the stage in front (back-pressure), so
memory is bounded by the queue depths. The first error in any stage stops
them all: the other threads finish their current item and exit (waited
for even through an interrupt, :func:`~..core.threads.join_all`), and the
error is raised in the caller's thread. Order is kept (one thread per stage;
``finish`` may run on a pool, :func:`~..core.threads.ordered_ahead`).
:func:`prefetched` moves one iterator onto a thread of its own inside a stage
(the video path decodes there while the producing stage follows points).
"""

from __future__ import annotations

import queue
import threading
from contextlib import closing
from typing import Callable, Iterable, Iterator

from ..core.threads import Worker, join_all, ordered_ahead

_END = object()
_POLL = 0.05  # seconds between checks of the stop flag while a queue is full or empty


class _Stopped(Exception):
    """Another stage failed or the caller gave up: leave quietly."""


def _put(channel: queue.Queue, item, stop: threading.Event) -> None:
    """Put ``item`` once there is room; raise :class:`_Stopped` once ``stop`` is set."""
    while not stop.is_set():
        try:
            channel.put(item, timeout=_POLL)
            return
        except queue.Full:
            continue
    raise _Stopped


def prefetched(items: Iterable, depth: int, name: str) -> Iterator:
    """``items`` pulled on a thread of their own (``trackoverlay-{name}``), up to ``depth`` ahead of the caller,
    who gets them in order. An error pulling an item is raised at its turn; closing the iterator stops the
    thread (after the item it is pulling), so close it before closing what ``items`` reads."""
    channel: queue.Queue = queue.Queue(max(1, depth))
    stop = threading.Event()

    def pull():
        try:
            for item in items:
                _put(channel, (True, item), stop)
            _put(channel, (False, None), stop)
        except _Stopped:
            pass
        except BaseException as error:  # noqa: BLE001 - raised in the caller's thread at its turn
            try:
                _put(channel, (False, error), stop)
            except _Stopped:
                pass

    worker = Worker(pull, name)
    try:
        while True:
            pulled, item = channel.get()
            if not pulled:
                if item is not None:
                    raise item
                return
            yield item
    finally:
        stop.set()
        join_all([worker])


class Pipeline:
    """Runs one produce -> transform -> [finish ->] consume pass; see the module docstring.

    Example::

        done = Pipeline(depth=2).run(decoded_frames, draw, encode)
    """

    def __init__(self, depth: int = 2):
        self.depth = max(1, depth)
        self._stop = threading.Event()
        self._errors: list[BaseException] = []

    def _put(self, channel: queue.Queue, item) -> None:
        _put(channel, item, self._stop)

    def _get(self, channel: queue.Queue):
        while not self._stop.is_set():
            try:
                return channel.get(timeout=_POLL)
            except queue.Empty:
                continue
        raise _Stopped

    def _thread(self, name: str, body: Callable[[], None]) -> Worker:
        def guarded():
            try:
                body()
            except _Stopped:
                pass
            except BaseException as error:  # reported to the caller's thread, which re-raises it
                self._errors.append(error)
                self._stop.set()

        return Worker(guarded, name)

    def _raise_first_error(self) -> None:
        if self._errors:
            raise self._errors[0]

    def run(self, items: Iterable, transform: Callable, consume: Callable,
            after_transform: Callable[[int], None] | None = None, finish: Callable | None = None,
            finish_workers: int = 1) -> int:
        """Feed ``items`` through ``transform`` (and ``finish``, on its own thread, or on ``finish_workers``
        threads several items at once, still in order) into ``consume``; returns how many were consumed.

        ``after_transform(count)`` runs in the caller's thread after each item
        is handed on (progress bars; raising there stops the pipeline).
        """
        inbox: queue.Queue = queue.Queue(self.depth)
        outbox: queue.Queue = queue.Queue(self.depth)
        consumed = [0]

        def produce():
            for item in items:
                self._put(inbox, item)
            self._put(inbox, _END)

        def drain(channel: queue.Queue):
            while (item := self._get(channel)) is not _END:
                consume(item)
                consumed[0] += 1

        threads = [self._thread("decode", produce)]
        if finish is None:
            threads.append(self._thread("encode", lambda: drain(outbox)))
        else:
            finished: queue.Queue = queue.Queue(self.depth)

            def transformed():
                while (item := self._get(outbox)) is not _END:
                    yield item

            def relay():
                if finish_workers > 1:
                    jobs = ((lambda item=item: finish(item)) for item in transformed())
                    with closing(ordered_ahead(jobs, finish_workers, "finish")) as results:
                        for result in results:
                            self._put(finished, result)
                else:
                    for item in transformed():
                        self._put(finished, finish(item))
                self._put(finished, _END)

            threads += [self._thread("finish", relay), self._thread("encode", lambda: drain(finished))]
        try:
            count = 0
            while True:
                try:
                    item = self._get(inbox)
                except _Stopped:
                    break
                if item is _END:
                    self._put(outbox, _END)
                    break
                self._put(outbox, transform(item))
                count += 1
                if after_transform is not None:
                    after_transform(count)
            threads[-1].ended.wait()  # the last frames encoded (an interrupt here stops every stage)
        except _Stopped:
            pass
        finally:
            self._stop.set()
            join_all(threads)
        self._raise_first_error()
        return consumed[0]
