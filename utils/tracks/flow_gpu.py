"""Following points by pyramidal Lucas-Kanade on the GPU (``flow_gpu.cu``, CuPy).

:class:`GpuFlow` does what :func:`.detect.opencv_round_trip` does with
OpenCV (forward from one frame into the next, then back, to check), with the
same arithmetic, so tracks agree with the CPU's to float rounding. Each
frame's pyramid and derivatives are built once, on the GPU, where OpenCV
builds them in every call: a frame is followed into, then back from, then
out of, which is most of the CPU's cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.cuda import cuda_kernel

_SOURCE = Path(__file__).with_name("flow_gpu.cu")
_OPTIONS = ("--fmad=false",)  # no fused multiply-adds: float steps rounded as the CPU rounds them
_BLOCK = (32, 8)  # threads of the per-pixel kernels
_LANES = 32  # threads a point (one warp, as in flow_gpu.cu)
_POINTS_PER_BLOCK = 4


@dataclass(frozen=True)
class Pyramid:
    """A frame's levels on the GPU: ``image`` (uint8) and ``derivative`` (int16 pairs, Scharr x and y) hold
    every level, level 0 first, at ``offsets`` (int32 on the GPU); ``sizes`` are each level's (width, height)."""

    image: object
    derivative: object
    offsets: object
    widths: object
    heights: object
    sizes: tuple


def level_sizes(width: int, height: int, window: int, max_level: int) -> tuple:
    """(width, height) of each pyramid level: halved (rounded up) while a level stays larger than ``window``
    on both sides, up to ``max_level`` (OpenCV's rule)."""
    sizes = [(width, height)]
    while len(sizes) <= max_level:
        width, height = (width + 1) // 2, (height + 1) // 2
        if width <= window or height <= window:
            break
        sizes.append((width, height))
    return tuple(sizes)


class GpuFlow:
    """Forward-backward Lucas-Kanade on the GPU; frames' pyramids are kept for the next call.

    ``window`` (pixels, odd), ``max_level``, ``max_iterations``, ``epsilon`` and ``min_eigen`` mean what
    OpenCV's ``calcOpticalFlowPyrLK`` arguments of those names mean.
    """

    def __init__(self, window: int, max_level: int, max_iterations: int, epsilon: float, min_eigen: float):
        import cupy

        self.window, self.max_level = window, max_level
        self._limits = (np.int32(max_iterations), np.float64(epsilon), np.float32(min_eigen))
        self._names = (f"follow_points<{window}>",)
        self._follow = self._kernel(self._names[0])
        self._pyramids: list[tuple[np.ndarray, Pyramid]] = []  # the last two frames, by the array given
        self._columns: dict[tuple, tuple] = {}  # per level layout: offsets, widths, heights on the GPU
        self._stream = cupy.cuda.Stream(non_blocking=True)  # its own: never waits on a renderer's work

    def _kernel(self, name: str):
        return cuda_kernel(_SOURCE, name, self._names, _OPTIONS)

    def pyramid(self, gray: np.ndarray) -> Pyramid:
        """The pyramid of uint8 ``gray`` [H, W], built on the GPU (or kept from an earlier call with this array)."""
        for array, pyramid in self._pyramids:
            if array is gray:
                return pyramid
        pyramid = self._build(gray)
        self._pyramids = [*self._pyramids[-1:], (gray, pyramid)]
        return pyramid

    def _build(self, gray: np.ndarray) -> Pyramid:
        import cupy

        height, width = gray.shape
        sizes = level_sizes(width, height, self.window, self.max_level)
        offsets = np.cumsum([0] + [w * h for w, h in sizes], dtype=np.int64)
        image = cupy.empty(int(offsets[-1]), cupy.uint8)
        derivative = cupy.empty((int(offsets[-1]), 2), cupy.int16)
        image[:offsets[1]].set(np.ascontiguousarray(gray).ravel())
        down, scharr = self._kernel("pyramid_down"), self._kernel("scharr")
        for level, (w, h) in enumerate(sizes):
            level_image = image[offsets[level]:offsets[level + 1]]
            if level > 0:
                above_w, above_h = sizes[level - 1]
                down(_grid(w, h), _BLOCK, (image[offsets[level - 1]:offsets[level]], np.int32(above_w),
                                           np.int32(above_h), level_image, np.int32(w), np.int32(h)))
            scharr(_grid(w, h), _BLOCK, (level_image, np.int32(w), np.int32(h),
                                         derivative[offsets[level]:offsets[level + 1]]))
        if sizes not in self._columns:  # every frame of a clip has the same layout: uploaded once
            columns = np.array([offsets[:-1], [w for w, _ in sizes], [h for _, h in sizes]], np.int32)
            self._columns[sizes] = tuple(cupy.asarray(columns))
        return Pyramid(image, derivative, *self._columns[sizes], sizes)

    def _launch(self, source: Pyramid, target: Pyramid, points, start, followed, found) -> None:
        """Follow points (float32 [n, 2] on the GPU) from ``source`` into ``target``, starting at ``start``; where
        they were found goes to ``followed`` (float32 [n, 2]), and whether to ``found`` (uint8 [n])."""
        count = len(points)
        top = min(len(source.sizes), len(target.sizes)) - 1
        self._follow((-(-count // _POINTS_PER_BLOCK),), (_POINTS_PER_BLOCK * _LANES,), (
            source.image, source.derivative, target.image, source.offsets, source.widths, source.heights,
            np.int32(top), points, start, np.int32(count), *self._limits, followed, found))

    def round_trip(self, previous: np.ndarray, current: np.ndarray, points: np.ndarray, guess: np.ndarray):
        """Points (float32 [n, 2]) followed from gray ``previous`` into ``current`` starting at ``guess``, then
        back starting at ``points``: (forward, found forward, back, found back), NumPy arrays. The points go
        over in one copy and the results come back in one."""
        import cupy

        count = len(points)
        sent = np.concatenate([np.reshape(points, (-1, 2)), np.reshape(guess, (-1, 2))]).astype(np.float32)
        with self._stream:
            before, after = self.pyramid(previous), self.pyramid(current)
            start, guess = cupy.asarray(sent).reshape(2, count, 2)
            results = cupy.empty(count * 18, cupy.uint8)  # forward and back (float32 [2, n, 2]), then found [2, n]
            positions, found = _positions_and_found(results, count)
            self._launch(before, after, start, guess, positions[0], found[0])
            self._launch(after, before, positions[0], start, positions[1], found[1])
            positions, found = _positions_and_found(results.get(), count)
        return positions[0], found[0], positions[1], found[1]


def _positions_and_found(results, count: int) -> tuple:
    """Views of a round trip's results (uint8 [18 n], NumPy or CuPy): positions float32 [2, n, 2] (forward,
    back) and found uint8 [2, n]."""
    return results[:16 * count].view(np.float32).reshape(2, count, 2), results[16 * count:].reshape(2, count)


def _grid(width: int, height: int) -> tuple:
    return -(-width // _BLOCK[0]), -(-height // _BLOCK[1])
