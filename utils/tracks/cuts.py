"""Scene cuts: where one shot ends and the next begins.

A cut changes the colours of the whole frame at once, while motion (even a
fast pan) and lighting changes move the colour distribution only a little.
:class:`CutDetector` compares colour histograms of consecutive frames by
Bhattacharyya distance: hue and saturation for coloured pixels (brightness
left out, so flicker and exposure ramps do not count), brightness only for
grey ones (so black-and-white footage cuts too). It calls a cut where the
distance exceeds ``threshold`` and is also several times the clip's recent
frame-to-frame distance (so busy footage does not cut at every frame).
"""

from __future__ import annotations

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


def colour_histogram(frame: np.ndarray) -> np.ndarray:
    """float32 histogram (sums to 1) of a uint8 RGB frame: hue x saturation of its coloured
    pixels, then brightness of its grey ones."""
    step = max(1, frame.shape[1] // (4 * _SAMPLE_WIDTH))  # every step-th pixel first: as good, far cheaper
    sample = np.ascontiguousarray(frame[::step, ::step])
    height, width = sample.shape[:2]
    size = (min(width, _SAMPLE_WIDTH), max(1, round(height * min(width, _SAMPLE_WIDTH) / width)))
    small = cv2.resize(sample, size, interpolation=cv2.INTER_AREA)
    hsv = cv2.cvtColor(small, cv2.COLOR_RGB2HSV)
    grey = (hsv[..., 1] < _GREY_SATURATION).astype(np.uint8)
    coloured = cv2.calcHist([hsv], [0, 1], 1 - grey, list(_BINS), [0, 180, 0, 256]).ravel()
    greys = cv2.calcHist([hsv], [2], grey, [_GREY_BINS], [0, 256]).ravel()
    histogram = np.concatenate([coloured, greys])
    return histogram / max(float(histogram.sum()), 1.0)


class CutDetector:
    """Feed frames in order; :meth:`is_cut` says whether a frame starts a new shot.

    ``threshold`` 0 turns cut detection off. The first frame is never a cut
    (it starts the clip).

    Example::

        cuts = CutDetector()
        starts = [index for index, frame in enumerate(frames) if cuts.is_cut(frame)]
    """

    def __init__(self, threshold: float = DEFAULT_CUT_THRESHOLD):
        check_range("cut_threshold (0 = no cut detection)", threshold, CUT_THRESHOLD_RANGE)
        self.threshold = threshold
        self._previous = None
        self._recent = deque(maxlen=_RECENT)

    def is_cut(self, frame: np.ndarray) -> bool:
        """Whether uint8 RGB ``frame`` starts a new shot (compared with the frame before it)."""
        if self.threshold == 0:
            return False
        histogram = colour_histogram(frame)
        previous, self._previous = self._previous, histogram
        if previous is None:
            return False
        distance = float(cv2.compareHist(previous, histogram, cv2.HISTCMP_BHATTACHARYYA))
        usual = float(np.median(self._recent)) if self._recent else 0.0
        cut = distance > self.threshold and distance > _JUMP * usual
        if cut:
            self._recent.clear()
        else:
            self._recent.append(distance)
        return cut
