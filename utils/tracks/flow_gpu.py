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

from ..core.cuda import cuda_kernel, pinned_array

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


def level_starts(sizes: tuple) -> np.ndarray:
    """Where each level of ``sizes`` starts in a pyramid's buffers, then (last) their whole length (int64)."""
    return np.cumsum([0] + [w * h for w, h in sizes], dtype=np.int64)


class GpuFlow:
    """Forward-backward Lucas-Kanade on the GPU; the last two frames' pyramids are kept for the next call.

    ``window`` (pixels, odd), ``max_level``, ``max_iterations``, ``epsilon`` and ``min_eigen`` mean what
    OpenCV's ``calcOpticalFlowPyrLK`` arguments of those names mean.

    A round trip is one CUDA graph, captured once per frame size, pair of pyramid slots and point capacity:
    the frame's upload, its pyramid, the points' upload, both directions and the results' download. Each
    CUDA call lets go of Python's lock and has to take it back behind the render's other threads; a graph
    makes that two calls a frame instead of about a dozen.
    """

    def __init__(self, window: int, max_level: int, max_iterations: int, epsilon: float, min_eigen: float):
        import cupy

        self.window, self.max_level = window, max_level
        self._limits = (np.int32(max_iterations), np.float64(epsilon), np.float32(min_eigen))
        self._names = (f"follow_points<{window}>",)
        self._follow = self._kernel(self._names[0])
        self._down, self._scharr = self._kernel("pyramid_down"), self._kernel("scharr")  # loaded before capturing
        self._stream = cupy.cuda.Stream(non_blocking=True)  # its own: never waits on a renderer's work
        self._frames: _FrameBuffers | None = None

    def _kernel(self, name: str):
        return cuda_kernel(_SOURCE, name, self._names, _OPTIONS)

    def pyramid(self, gray: np.ndarray) -> Pyramid:
        """The pyramid of uint8 ``gray`` [H, W], built on the GPU (or kept from an earlier call with this array);
        its memory is reused once two other frames have been loaded."""
        frames = self._buffers(gray.shape)
        slot = frames.holding(gray)
        if slot is None:
            slot = frames.load(gray, keep=None)
            self._run(frames, ("build", slot))
        return frames.slots[slot].pyramid

    def round_trip(self, previous: np.ndarray, current: np.ndarray, points: np.ndarray, guess: np.ndarray):
        """Points (float32 [n, 2]) followed from gray ``previous`` into ``current`` starting at ``guess``, then
        back starting at ``points``: (forward, found forward, back, found back), NumPy arrays."""
        if previous.shape != current.shape:
            raise ValueError(f"frames of one round trip must have one size, got {list(previous.shape)} and "
                             f"{list(current.shape)}")
        count = len(points)
        frames = self._buffers(current.shape)
        before = frames.holding(previous)
        if before is None:  # the first frame followed from in a shot
            before = frames.load(previous, keep=frames.holding(current))
            self._run(frames, ("build", before))
        after = frames.holding(current)
        build = after is None
        if build:
            after = frames.load(current, keep=before)
        capacity = max(_MIN_CAPACITY, 1 << (count - 1).bit_length())
        trip = frames.trip(capacity)
        trip.host_points[0, :count], trip.host_points[1, :count] = points, guess
        trip.host_count[0] = count
        self._run(frames, ("follow", before, after, build, capacity))
        positions, found = _positions_and_found(trip.host_results, capacity)
        return (positions[0, :count].copy(), found[0, :count].copy(), positions[1, :count].copy(),
                found[1, :count].copy())

    def _buffers(self, shape: tuple) -> _FrameBuffers:
        """The pyramid slots and graphs for frames of ``shape`` (made anew when the size changes)."""
        if self._frames is None or self._frames.shape != shape:
            height, width = shape
            self._frames = _FrameBuffers(shape, level_sizes(width, height, self.window, self.max_level))
        return self._frames

    def _run(self, frames: _FrameBuffers, key: tuple) -> None:
        """Launch the graph named ``key`` (captured on its first use) and wait for it."""
        graph = frames.graphs.get(key)
        if graph is None:
            graph = frames.graphs[key] = self._capture(frames, key)
        graph.launch(self._stream)
        self._stream.synchronize()

    def _capture(self, frames: _FrameBuffers, key: tuple):
        """The CUDA graph of ``key``: ("build", slot), or ("follow", from slot, into slot, build the
        target first, point capacity)."""
        with self._stream:
            self._stream.begin_capture()
            try:
                if key[0] == "build":
                    self._build(frames.slots[key[1]])
                else:
                    _, before, after, build, capacity = key
                    if build:
                        self._build(frames.slots[after])
                    self._follow_both_ways(frames.slots[before].pyramid, frames.slots[after].pyramid,
                                           frames.trip(capacity), capacity)
            finally:
                graph = self._stream.end_capture()
        return graph

    def _build(self, slot: _Slot) -> None:
        """Enqueue the upload of ``slot``'s staged frame and its pyramid's levels and derivatives."""
        from cupy.cuda import runtime

        pyramid = slot.pyramid
        offsets = level_starts(pyramid.sizes)
        runtime.memcpyAsync(pyramid.image.data.ptr, slot.staging.ctypes.data, slot.staging.nbytes,
                            runtime.memcpyHostToDevice, self._stream.ptr)
        for level, (w, h) in enumerate(pyramid.sizes):
            level_image = pyramid.image[offsets[level]:offsets[level + 1]]
            if level > 0:
                above_w, above_h = pyramid.sizes[level - 1]
                self._down(_grid(w, h), _BLOCK, (pyramid.image[offsets[level - 1]:offsets[level]], np.int32(above_w),
                                                 np.int32(above_h), level_image, np.int32(w), np.int32(h)))
            self._scharr(_grid(w, h), _BLOCK, (level_image, np.int32(w), np.int32(h),
                                               pyramid.derivative[offsets[level]:offsets[level + 1]]))

    def _follow_both_ways(self, source: Pyramid, target: Pyramid, trip: _Trip, capacity: int) -> None:
        """Enqueue the points' upload, the forward and the backward launch, and the results' download."""
        from cupy.cuda import runtime

        runtime.memcpyAsync(trip.sent.data.ptr, trip.host_sent.ctypes.data, trip.host_sent.nbytes,
                            runtime.memcpyHostToDevice, self._stream.ptr)
        (start, guess), count = _points_and_count(trip.sent, capacity)
        positions, found = _positions_and_found(trip.results, capacity)
        self._launch(source, target, start, guess, count, capacity, positions[0], found[0])
        self._launch(target, source, positions[0], start, count, capacity, positions[1], found[1])
        runtime.memcpyAsync(trip.host_results.ctypes.data, trip.results.data.ptr, trip.host_results.nbytes,
                            runtime.memcpyDeviceToHost, self._stream.ptr)

    def _launch(self, source: Pyramid, target: Pyramid, points, start, count, capacity: int, followed,
                found) -> None:
        """Follow the first ``count`` (int32 [1] on the GPU) of ``points`` (float32 [capacity, 2] on the GPU)
        from ``source`` into ``target``, starting at ``start``; where they were found goes to ``followed``
        (float32 [capacity, 2]), and whether to ``found`` (uint8 [capacity])."""
        top = min(len(source.sizes), len(target.sizes)) - 1
        self._follow((-(-capacity // _POINTS_PER_BLOCK),), (_POINTS_PER_BLOCK * _LANES,), (
            source.image, source.derivative, target.image, source.offsets, source.widths, source.heights,
            np.int32(top), points, start, count, *self._limits, followed, found))


_MIN_CAPACITY = 64  # points a round trip's graph is captured for at least (then powers of two)


class _Slot:
    """One pyramid on the GPU and the page-locked copy of the frame it is built from."""

    def __init__(self, shape: tuple, sizes: tuple, columns: tuple):
        import cupy

        total = int(level_starts(sizes)[-1])
        self.pyramid = Pyramid(cupy.empty(total, cupy.uint8), cupy.empty((total, 2), cupy.int16), *columns, sizes)
        self.staging = pinned_array(shape, np.uint8)
        self.gray: np.ndarray | None = None  # the frame held (by identity)

    def hold(self, gray: np.ndarray) -> None:
        """Stage ``gray`` for the next build."""
        np.copyto(self.staging, gray)
        self.gray = gray


class _Trip:
    """A round trip's buffers for ``capacity`` points: what goes over (points and guesses, float32 [2, n, 2],
    then the count, int32) and what comes back (positions float32 [2, n, 2], found uint8 [2, n]), each on the
    GPU and page-locked on the host."""

    def __init__(self, capacity: int):
        import cupy

        self.sent = cupy.empty(16 * capacity + 4, cupy.uint8)
        self.results = cupy.empty(18 * capacity, cupy.uint8)
        self.host_sent = pinned_array((16 * capacity + 4,), np.uint8)
        self.host_results = pinned_array((18 * capacity,), np.uint8)
        self.host_points, self.host_count = _points_and_count(self.host_sent, capacity)


class _FrameBuffers:
    """Everything a frame size needs: two pyramid slots, round-trip buffers per capacity, captured graphs."""

    def __init__(self, shape: tuple, sizes: tuple):
        import cupy

        offsets = level_starts(sizes)[:-1]
        columns = tuple(cupy.asarray(np.array(column, np.int32)) for column in
                        (offsets, [w for w, _ in sizes], [h for _, h in sizes]))
        self.shape = shape
        self.slots = [_Slot(shape, sizes, columns) for _ in range(2)]
        self.graphs: dict[tuple, object] = {}
        self._trips: dict[int, _Trip] = {}
        self.last_loaded = 1

    def holding(self, gray: np.ndarray) -> int | None:
        """The slot whose pyramid is ``gray``'s, if any."""
        return next((index for index, slot in enumerate(self.slots) if slot.gray is gray), None)

    def load(self, gray: np.ndarray, keep: int | None) -> int:
        """Copy ``gray`` into a slot's staging memory for the next graph to build: not slot ``keep``, or (None)
        not the slot loaded last. Returns the slot."""
        slot = 1 - (self.last_loaded if keep is None else keep)
        self.slots[slot].hold(gray)
        self.last_loaded = slot
        return slot

    def trip(self, capacity: int) -> _Trip:
        """The round-trip buffers for ``capacity`` points (made on first use)."""
        if capacity not in self._trips:
            self._trips[capacity] = _Trip(capacity)
        return self._trips[capacity]


def _points_and_count(sent, capacity: int) -> tuple:
    """Views of what a round trip sends (uint8 [16 n + 4], NumPy or CuPy): points and guesses float32 [2, n, 2],
    then the point count, int32 [1]."""
    return sent[:16 * capacity].view(np.float32).reshape(2, capacity, 2), sent[16 * capacity:].view(np.int32)


def _positions_and_found(results, capacity: int) -> tuple:
    """Views of a round trip's results (uint8 [18 n], NumPy or CuPy): positions float32 [2, n, 2] (forward,
    back) and found uint8 [2, n]."""
    return (results[:16 * capacity].view(np.float32).reshape(2, capacity, 2),
            results[16 * capacity:].reshape(2, capacity))


def _grid(width: int, height: int) -> tuple:
    return -(-width // _BLOCK[0]), -(-height // _BLOCK[1])
