"""Memory a video render will need, estimated before the work and checked per frame.

Drawing cost grows with the pixels the primitives touch, not with the frame:
the CPU rasteriser keeps about ``BYTES_PER_CANDIDATE`` bytes per candidate
pixel (measured in :mod:`..raster.cpu_spans`). A link of length L and width w
touches about (L + 4) x (w + 4) candidates; a box of side s about (s + 4)^2.
Frames in flight cost their bytes each. A render whose
estimate exceeds the budget (by default half the memory the system reports
as available) is refused with the numbers and the fix, instead of being
killed half-way.
"""

from __future__ import annotations

import os

import numpy as np

from ..raster.cpu_spans import BYTES_PER_CANDIDATE

GRAPH_BYTES_PER_POINT = 120  # per point and neighbour: candidates, pair keys, sort buffers (measured: k=3, 500 B/point)
FRAME_BASE_BYTES = 64 << 20  # band buffers, pools and the display list's fixed arrays
GLOW_BYTES_PER_PIXEL = 80  # the CPU glow's dense planes and result, per frame pixel (measured: 73 at 1080p)
DEFAULT_SHARE = 0.5  # of the available memory: room for the rest of the system and for estimation error


class MemoryBudgetError(ValueError):
    """A render that would need more memory than the system has available."""


def available_memory() -> int | None:
    """Bytes the system reports as available (Linux ``MemAvailable``, else free physical pages), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def gigabytes(count: float) -> str:
    """A byte count as people read it: GB to one decimal, or MB under 0.1 GB (a limit of 0.001 GB is 1 MB, not
    0.0 GB)."""
    return f"{count / 1e9:.1f} GB" if count >= 1e8 else f"{count / 1e6:.3g} MB"


class Budget:
    """The bytes a render may use: ``limit``, by default half the available memory (unknown: nothing is refused)."""

    def __init__(self, limit: int | None = None):
        if limit is None:
            available = available_memory()
            limit = None if available is None else int(available * DEFAULT_SHARE)
        self.limit = limit

    def require(self, need: float, what: str, fix: str) -> None:
        """Raise :class:`MemoryBudgetError` when ``need`` bytes exceed the limit."""
        if self.limit is not None and need > self.limit:
            raise MemoryBudgetError(f"{what} needs about {gigabytes(need)} of memory but the limit is "
                                    f"{gigabytes(self.limit)}; {fix}")

    def check_frames(self, width: int, height: int, in_flight: int) -> None:
        """Frames of ``width`` x ``height`` held ``in_flight`` at once (decoded, drawn, encoded)."""
        self.require(width * height * 4 * in_flight + FRAME_BASE_BYTES, f"a {width}x{height} video",
                     "render a smaller video")

    def check_glow(self, width: int, height: int) -> None:
        """A glow over frames of ``width`` x ``height`` (at worst the whole frame)."""
        self.require(width * height * GLOW_BYTES_PER_PIXEL + FRAME_BASE_BYTES, f"the glow of a {width}x{height} "
                     "video", "render a smaller video, or without glow")

    def check_points(self, count: int, neighbours: int, where: str) -> None:
        """Building the neighbour graph of ``count`` points."""
        self.require(count * (neighbours + 2) * GRAPH_BYTES_PER_POINT, f"{where}: linking {count:,} points",
                     "give fewer tracks, or draw no lines")

    def draw_bytes(self, total_length: float, links: int, line_width: float, boxes: int, box_side: float) -> float:
        """Estimated bytes to draw ``links`` links of ``total_length`` pixels and ``boxes`` boxes of ``box_side``."""
        candidates = (total_length + 4.0 * links) * (line_width + 4.0) + boxes * (box_side + 4.0) ** 2
        return candidates * BYTES_PER_CANDIDATE + FRAME_BASE_BYTES

    def fits(self, need: float) -> bool:
        return self.limit is None or need <= self.limit

    def check_draw(self, link_lengths, line_width: float, boxes: int, box_side: float, where: str) -> None:
        """Drawing links of ``link_lengths`` pixels and ``boxes`` boxes of side ``box_side``."""
        lengths = np.asarray(link_lengths, np.float64)
        need = self.draw_bytes(float(lengths.sum()), len(lengths), line_width, boxes, box_side)
        self.require(need, f"{where}: drawing {len(lengths):,} links and {boxes:,} boxes",
                     "link fewer points (lower the radius or k, set a degree cap or a maximum length) or use "
                     "thinner lines and smaller boxes")
