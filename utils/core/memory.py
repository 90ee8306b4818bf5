"""Freed memory kept for reuse, in processes the pack owns (the command line, drawing workers).

Drawing a frame allocates and frees the same large arrays every frame. By
default glibc hands arrays over 128 KB back to the system when they are
freed, so each frame's arrays are new pages, every one a page fault (zeroed
by the kernel) while Python's lock is held. Told to keep freed memory below
:data:`KEEP_FREE`, the next frame reuses it. Measured on the 16-core GPU test
machine (CPU backend on worker processes, 100-point track file): page faults
in the workers went from 2 300-2 700 to 190 a 1080p frame and from 11 800 to
920 a 4K frame, and their CPU a frame from 67 to 60 ms at 1080p (medians of 4
runs) and from 203 to 191 ms at 4K (1 run).

A host's process (ComfyUI) is left as it is: its allocator is the host's
choice. ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_`` in its
environment do the same there.
"""

from __future__ import annotations

import ctypes
import sys

from .log import LOGGER

REUSE_BELOW = 32 << 20
"""Arrays smaller than this come from (and go back to) the process's heap, not straight from the system: the
most glibc takes through ``mallopt`` (a 4K RGB frame is 24.9 MB)."""

KEEP_FREE = 1 << 30
"""Free memory the heap keeps before it gives any back: more than a frame's working set at 4K (about 54 MB
with 100 points, 280 MB with 1000, see :data:`~..raster.cpu.AT_ONCE_BYTES`)."""

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Tell this process's allocator to keep freed memory for reuse (glibc, Linux); whether it took it.

    Call it only in a process the pack owns. Elsewhere (macOS, Windows, musl) it does nothing.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    taken = bool(mallopt(_M_MMAP_THRESHOLD, REUSE_BELOW)) and bool(mallopt(_M_TRIM_THRESHOLD, KEEP_FREE))
    LOGGER.debug("freed memory kept for reuse: %s", "yes" if taken else "no (the allocator refused)")
    return taken
