"""Scene cuts: where one shot ends and the next begins.

A cut changes the whole picture at once, while motion (even a fast pan) and
lighting changes keep most of it. :class:`CutDetector` watches two things
in consecutive frames, on a copy reduced to 160 pixels wide:

- **Colours**: histograms compared by Bhattacharyya distance: hue and
  saturation for coloured pixels (brightness left out, so flicker and
  exposure ramps do not count), brightness only for grey ones.
- **Structure**: the grey images aligned by their global shift (phase
  correlation, so pans do not count) and compared by normalised
  correlation (so brightness and contrast do not count). This finds cuts
  between shots of the same colours, e.g. two grey shots of one brightness.

A distance *jumps* where it exceeds its threshold and is also several times
the clip's recent frame-to-frame distance of that kind (so busy footage does
not cut at every frame). A structural jump is a cut. A colour jump is a cut
only where the structure changed too (or cannot be compared, as on a black
frame): a light that changes the colours of the same picture is not a cut.

A single frame that breaks into a shot and leaves it as it was (a white
flash frame, a dropped black frame, one stray frame) is a *flash*, not two
cuts: the frame after it is compared with the frame before it too, and
where those two show the same picture, the flash frame's cut is withdrawn
(:attr:`CutDetector.flash_before`).
"""

from __future__ import annotations

import statistics
from collections import deque

import cv2
import numpy as np

from ..core.checks import Range, check_range

DEFAULT_CUT_THRESHOLD = 0.3
"""Bhattacharyya distance (0..1) of consecutive hue-saturation histograms that makes a cut."""
CUT_THRESHOLD_RANGE = Range(0.0, 1.0)

_SAMPLE_WIDTH = 160  # pixels: histograms are taken of the frame reduced to this width
_BINS = (16, 8)  # hue, saturation of coloured pixels
_GREY_BINS = 8  # brightness of grey pixels
_GREY_SATURATION = 40  # pixels less saturated than this (of 255) are grey
_RECENT = 10  # frames of recent distances the jump is compared with
_JUMP = 3.0  # a cut's distance is at least this many times the recent median
STRUCTURE_THRESHOLD = 0.35
"""Structural distance ((1 - correlation) / 2 of the aligned grey images, 0..1) that makes a cut."""
STRUCTURE_CHANGED = 0.2
"""Structural distance above which a colour jump counts as a cut (a pan stays below 0.1)."""
_FLAT = 2.0  # grey levels: an image whose spread is below this has no structure to compare


def reduced_frame(frame: np.ndarray) -> np.ndarray:
    """uint8 RGB ``frame`` reduced to at most ``_SAMPLE_WIDTH`` pixels wide."""
    step = max(1, frame.shape[1] // (4 * _SAMPLE_WIDTH))  # every step-th pixel first: as good, far cheaper
    sample = np.ascontiguousarray(frame[::step, ::step])
    height, width = sample.shape[:2]
    size = (min(width, _SAMPLE_WIDTH), max(1, round(height * min(width, _SAMPLE_WIDTH) / width)))
    return cv2.resize(sample, size, interpolation=cv2.INTER_AREA)


def colour_histogram(small: np.ndarray) -> np.ndarray:
    """float32 histogram (sums to 1) of a reduced uint8 RGB frame: hue x saturation of its
    coloured pixels, then brightness of its grey ones."""
    hsv = cv2.cvtColor(small, cv2.COLOR_RGB2HSV)
    grey = (hsv[..., 1] < _GREY_SATURATION).astype(np.uint8)
    coloured = cv2.calcHist([hsv], [0, 1], 1 - grey, list(_BINS), [0, 180, 0, 256]).ravel()
    greys = cv2.calcHist([hsv], [2], grey, [_GREY_BINS], [0, 256]).ravel()
    histogram = np.concatenate([coloured, greys])
    return histogram / max(float(histogram.sum()), 1.0)


def _correlation_distance(before: np.ndarray, after: np.ndarray) -> float:
    """(1 - correlation) / 2 of two grey images of one shape."""
    before, after = before - before.mean(), after - after.mean()
    spread = max(float(np.sqrt((before * before).mean() * (after * after).mean())), 1e-6)
    return (1.0 - float((before * after).mean()) / spread) / 2.0


def structure_distance(previous: np.ndarray, current: np.ndarray) -> float | None:
    """(1 - correlation) / 2 of two reduced float32 grey images once ``current`` is shifted back by
    their global shift (or not shifted, where that matches better: a periodic picture gives phase
    correlation several peaks): 0 for the same picture moved, about 0.5 for unrelated pictures; None
    when either is flat (black, a fade) and has no structure to compare."""
    if min(float(previous.std()), float(current.std())) < _FLAT:
        return None
    unshifted = _correlation_distance(previous, current)
    height, width = previous.shape
    (dx, dy), _ = cv2.phaseCorrelate(previous, current)
    x, y = int(round(dx)), int(round(dy))
    if x == 0 and y == 0:
        return unshifted
    if abs(x) >= width // 2 or abs(y) >= height // 2:
        return min(unshifted, 0.5)  # moved by half the frame or more: nothing left to compare
    before = previous[max(0, -y):height - max(0, y), max(0, -x):width - max(0, x)]
    after = current[max(0, y):height - max(0, -y), max(0, x):width - max(0, -x)]
    return min(unshifted, _correlation_distance(before, after))


class _Jumps:
    """Distances of one kind between consecutive frames; a jump is one above a threshold and
    several times the recent median."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self._recent = deque(maxlen=_RECENT)

    def is_jump(self, distance: float) -> bool:
        usual = statistics.median(self._recent) if self._recent else 0.0  # a few floats: NumPy's call costs more
        return distance > self.threshold and distance > _JUMP * usual

    def record(self, distance: float, cut: bool) -> None:
        if cut:
            self._recent.clear()
        else:
            self._recent.append(distance)


class CutDetector:
    """Feed frames in order; :meth:`is_cut` says whether a frame starts a new shot.

    ``threshold`` 0 turns cut detection off. The first frame is never a cut
    (it starts the clip). A flash frame is judged a cut when it comes; the
    next frame withdraws it (:attr:`flash_before`).

    Example::

        cuts = CutDetector()
        starts = []
        for index, frame in enumerate(frames):
            if cuts.is_cut(frame):
                starts.append(index)
            elif cuts.flash_before:  # the frame before was a flash, not a cut
                starts.pop()
    """

    def __init__(self, threshold: float = DEFAULT_CUT_THRESHOLD):
        check_range("cut_threshold (0 = no cut detection)", threshold, CUT_THRESHOLD_RANGE)
        self.threshold = threshold
        self._previous = None
        self._before_cut = None  # the sample before the previous frame, where that frame was a cut
        self._colours = _Jumps(threshold)
        self._structure = _Jumps(STRUCTURE_THRESHOLD)
        self.flash_before = False
        """Whether the frame last judged showed the picture from before the frame ahead of it: that frame
        (judged a cut then) was a flash, and its cut is withdrawn."""

    def is_cut(self, frame: np.ndarray) -> bool:
        """Whether uint8 RGB ``frame`` starts a new shot (compared with the frame before it)."""
        return self.is_cut_sampled(self.sample(frame))

    def sample(self, frame: np.ndarray) -> tuple | None:
        """What :meth:`is_cut_sampled` compares of uint8 RGB ``frame`` (None with cut detection off). Depends
        on the frame alone: frames may be sampled ahead, on any thread."""
        if self.threshold == 0:
            return None
        small = reduced_frame(frame)
        return colour_histogram(small), cv2.cvtColor(small, cv2.COLOR_RGB2GRAY).astype(np.float32)

    def is_cut_sampled(self, current: tuple | None, measured: tuple | None = None) -> bool:
        """:meth:`is_cut` of the next frame's :meth:`sample` (a frame that ends a flash is not a cut, and sets
        :attr:`flash_before`); ``measured``: :meth:`distances` from the frame before, where already measured
        (ahead, on another thread)."""
        self.flash_before = False
        if current is None:
            return False
        previous, self._previous = self._previous, current
        before_cut, self._before_cut = self._before_cut, None
        if previous is None:
            return False
        colours, structure = self.distances(previous, current) if measured is None else measured
        cut = _is_cut(self._colours.is_jump(colours), structure is not None and self._structure.is_jump(structure),
                      structure)
        if cut and before_cut is not None and self._same_picture(before_cut, current):
            self.flash_before = True
            return False
        if structure is not None:
            self._structure.record(structure, cut)
        self._colours.record(colours, cut)
        if cut:
            self._before_cut = previous
        return cut

    @staticmethod
    def distances(previous: tuple, current: tuple) -> tuple[float, float | None]:
        """Colour and structural distance of two samples (structure None where either is flat); thread-safe."""
        return (float(cv2.compareHist(previous[0], current[0], cv2.HISTCMP_BHATTACHARYYA)),
                structure_distance(previous[1], current[1]))

    def _same_picture(self, earlier: tuple, later: tuple) -> bool:
        """Whether two samples a frame apart show one shot: no cut by the thresholds alone (the clip's recent
        distances, from either side of the flash, say nothing of these two)."""
        colours, structure = self.distances(earlier, later)
        return not _is_cut(colours > self.threshold, structure is not None and structure > STRUCTURE_THRESHOLD,
                           structure)


def _is_cut(colour_jump: bool, structure_jump: bool, structure: float | None) -> bool:
    """The cut rule: a structural jump, or a colour jump where the structure changed too or cannot be compared
    (``structure`` None)."""
    if structure is None:
        return colour_jump
    return structure_jump or (colour_jump and structure > STRUCTURE_CHANGED)
