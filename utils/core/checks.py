"""The pack's input rules, written once: ranges, numbers, choices, and broadcast lengths.

Every stage checks what it is given with these, so an error always names the
input, the allowed range and what was given.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import NamedTuple


class Range(NamedTuple):
    """Accepted values from ``low`` to ``high``; an end marked open is excluded.

    Declared once next to each check; the node widgets read the same ranges, so a
    widget never offers a value the engine refuses.
    """

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False


def check_number(name: str, value, low: float = -math.inf, high: float = math.inf, *,
                 low_open: bool = False, high_open: bool = False, integer: bool = False) -> None:
    """Raise ``ValueError`` unless ``value`` is a real number (an integer if ``integer``) in the range.

    Bools, strings and NaN are refused; the range is ``[low, high]`` with either end open on request.
    """
    kind = "a whole number" if integer else "a number"
    left, right = ("(" if low_open else "["), (")" if high_open else "]")
    allowed = f"{name} must be {kind} in {left}{low:g}, {high:g}{right}"
    if isinstance(value, bool) or not isinstance(value, Integral if integer else Real):
        raise ValueError(f"{allowed}, got {value!r}")
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if math.isnan(value) or too_low or too_high:
        raise ValueError(f"{allowed}, got {value!r}")


def check_range(name: str, value, accepted: Range, integer: bool = False) -> None:
    """:func:`check_number` against a declared :class:`Range`."""
    check_number(name, value, accepted.low, accepted.high, low_open=accepted.low_open,
                 high_open=accepted.high_open, integer=integer)


def check_choice(name: str, value, allowed) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} {value!r} is not one of {', '.join(map(str, allowed))}")


def broadcast_length(**counts: int) -> int:
    """The common length of named sequences, where a length of 1 repeats.

    ``broadcast_length(images=16, overlay=1) == 16``; unequal lengths above 1
    raise ``ValueError`` naming both inputs and both numbers.
    """
    longer = [(name, count) for name, count in counts.items() if count != 1]
    for name, count in longer[1:]:
        if count != longer[0][1]:
            raise ValueError(f"{longer[0][0]} has {longer[0][1]} frames but {name} has {count}: give equal "
                             "frame counts, or 1 frame to repeat it")
    return longer[0][1] if longer else 1


def check_frame_size(found_on, width: int, height: int, what: str, where: str) -> None:
    """Refuse to draw positions measured on frames of ``found_on`` (width, height; None: unknown) on frames of
    ``width`` x ``height`` (``where``), where they would land in the wrong places."""
    if found_on is None or tuple(found_on) == (width, height):
        return
    size = "x".join(map(str, found_on))
    raise ValueError(f"{what} belong to {size} frames but {where} is {width}x{height}, so the points would "
                     f"land in the wrong places; draw on the frames the tracks were found on (or resize "
                     f"{where} to {size}), or find the tracks on these frames")
