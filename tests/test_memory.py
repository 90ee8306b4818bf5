"""Freed memory kept for reuse in the pack's own processes (glibc's allocator told through mallopt)."""

import subprocess
import sys

import pytest

_FAULTS = """
import resource, sys
import numpy as np
from trackoverlay.utils.core.memory import keep_freed_memory

def faults():  # page faults of allocating and freeing 8 MB arrays, a frame's working arrays
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        a = np.ones(1 << 20)
        b = np.ones(1 << 20)
        del a, b
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults()
default = faults()
taken = keep_freed_memory()
faults()
print(taken, default, faults())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's (Linux)")
def test_arrays_freed_and_made_again_reuse_their_memory_once_told():
    """By default glibc returns large freed arrays to the system, so making them again faults every page in
    afresh; after keep_freed_memory() (in a fresh interpreter: it changes the whole process) they reuse it."""
    done = subprocess.run([sys.executable, "-c", _FAULTS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    taken, default, kept = done.stdout.split()
    if taken != "True":
        pytest.skip("this C library does not take glibc's mallopt settings")
    assert int(default) > 20 * 2 * 200  # two 8 MB arrays a round, hundreds of faults each (huge pages or not)
    assert int(kept) < int(default) // 10


def test_keep_freed_memory_does_nothing_off_linux(monkeypatch):
    from trackoverlay.utils.core import memory

    monkeypatch.setattr(memory.sys, "platform", "darwin")
    assert memory.keep_freed_memory() is False
