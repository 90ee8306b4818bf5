"""The staged pipeline under the video path: order, back-pressure, and shutdown on any stage's error."""

import signal
import threading
import time

import pytest
from trackoverlay.utils.video.pipeline import Pipeline, prefetched


def test_items_pass_in_order_through_all_three_stages():
    seen, threads = [], set()

    def transform(item):
        threads.add(("transform", threading.current_thread().name))
        return item * 10

    def consume(item):
        threads.add(("consume", threading.current_thread().name))
        seen.append(item)

    assert Pipeline(depth=2).run(iter(range(50)), transform, consume) == 50
    assert seen == [10 * i for i in range(50)]
    assert ("transform", threading.main_thread().name) in threads  # the caller's thread draws
    assert all(name != threading.main_thread().name for stage, name in threads if stage == "consume")


def test_a_finish_stage_runs_on_its_own_thread_between_transform_and_consume():
    seen, threads = [], {}

    def stage(name, function):
        def run(item):
            threads.setdefault(name, set()).add(threading.current_thread().name)
            return function(item)
        return run

    done = Pipeline(depth=2).run(iter(range(50)), stage("transform", lambda item: item * 10),
                                 stage("consume", seen.append), finish=stage("finish", lambda item: item + 1))
    assert done == 50 and seen == [10 * i + 1 for i in range(50)]
    assert threads["transform"] == {threading.main_thread().name}
    assert len(threads["finish"]) == 1 and not threads["finish"] & (threads["transform"] | threads["consume"])


def test_a_finish_stage_on_several_workers_runs_items_at_once_and_keeps_their_order():
    together = threading.Barrier(3, timeout=10)  # the first three items pass only if they run at once
    seen, threads = [], set()

    def finish(item):
        threads.add(threading.current_thread().name)
        if item < 30:
            together.wait()
        time.sleep(0.002 * (item % 4))  # later items often finish first
        return item + 1

    done = Pipeline(depth=2).run(iter(range(60)), lambda item: item * 10, seen.append, finish=finish,
                                 finish_workers=3)
    assert done == 60 and seen == [10 * i + 1 for i in range(60)]
    assert len(threads) == 3 and all(name.startswith("trackoverlay-finish") for name in threads)


def test_back_pressure_bounds_the_items_in_flight():
    produced, consumed = [0], [0]
    most = [0]

    def items():
        for index in range(40):
            produced[0] += 1
            most[0] = max(most[0], produced[0] - consumed[0])
            yield index

    def slow(item):
        time.sleep(0.005)
        consumed[0] += 1

    Pipeline(depth=2).run(items(), lambda item: item, slow)
    assert most[0] <= 2 * 2 + 3  # two queues of 2, plus one item in each stage


@pytest.mark.parametrize("workers", [1, 3], ids=["finish-thread", "finish-workers"])
@pytest.mark.parametrize("stage", ["produce", "transform", "finish", "consume", "after"])
def test_an_error_anywhere_stops_every_stage_and_reaches_the_caller(stage, workers):
    pulled = [0]

    def items():
        for index in range(10_000):
            pulled[0] += 1
            if stage == "produce" and index == 5:
                raise OSError("disk read failed")
            yield index

    def transform(item):
        if stage == "transform" and item == 5:
            raise ValueError("bad frame")
        return item

    def finish(item):
        if stage == "finish" and item == 5:
            raise RuntimeError("cudaErrorLaunchFailure")
        return item

    def consume(item):
        if stage == "consume" and item == 5:
            raise OSError(28, "No space left on device")

    def after(count):
        if stage == "after" and count == 5:
            raise KeyboardInterrupt

    before = threading.active_count()
    expected = {"produce": OSError, "transform": ValueError, "finish": RuntimeError, "consume": OSError,
                "after": KeyboardInterrupt}[stage]
    with pytest.raises(expected):
        Pipeline(depth=2).run(items(), transform, consume, after, finish=finish, finish_workers=workers)
    assert pulled[0] < 20 + 2 * workers  # stopped promptly, not after the 10 000 items
    assert threading.active_count() == before  # the stage threads are gone


def test_prefetched_keeps_order_pulls_on_its_own_thread_and_stays_bounded():
    pulled, threads = [0], set()

    def items():
        for index in range(30):
            pulled[0] += 1
            threads.add(threading.current_thread().name)
            yield index

    seen = []
    for item in prefetched(items(), depth=2, name="test-ahead"):
        time.sleep(0.002)
        assert pulled[0] - item <= 2 + 2  # the queue of 2, one being put, one being pulled
        seen.append(item)
    assert seen == list(range(30))
    assert threads == {"trackoverlay-test-ahead"}


def test_prefetched_raises_a_pull_error_at_its_turn_and_closing_stops_the_thread():
    def items():
        yield from range(3)
        raise OSError("disk read failed")

    before = threading.active_count()
    got = []
    with pytest.raises(OSError, match="disk read failed"):
        got.extend(prefetched(items(), depth=4, name="test-ahead"))
    assert got == [0, 1, 2]  # everything before the error first
    endless = prefetched(iter(int, 1), depth=2, name="test-ahead")
    assert next(endless) == 0
    endless.close()
    assert threading.active_count() == before


class Interrupted(BaseException):
    """What a signal handler raises (like Ctrl-C's KeyboardInterrupt)."""


def test_closing_prefetched_waits_for_its_thread_even_through_an_interrupt():
    """An interrupt while closing waits for the pulling thread is raised once that thread has left ``items``,
    so what ``items`` reads can be closed next (not 'generator already executing')."""
    handled = threading.Event()

    def items():
        yield 0
        handled.wait(10)  # a slow pull (a 4K frame decoding), under way when the interrupt comes and after
        time.sleep(0.2)
        yield 1

    def interrupt(signum, frame):
        handled.set()
        raise Interrupted

    source = items()
    ahead = prefetched(source, depth=1, name="test-ahead")
    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        assert next(ahead) == 0
        threading.Timer(0.1, signal.pthread_kill, (threading.main_thread().ident, signal.SIGUSR1)).start()
        with pytest.raises(Interrupted):
            ahead.close()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert not source.gi_running
    source.close()
    assert not [thread for thread in threading.enumerate() if thread.name == "trackoverlay-test-ahead"]
