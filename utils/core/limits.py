"""Accepted ranges of numeric parameters, declared once next to each check.

The engine's checks and the node widgets read the same :class:`Range`, so a
widget never offers a value the engine refuses.
"""

from __future__ import annotations

import math
from typing import NamedTuple


class Range(NamedTuple):
    """Values from ``low`` to ``high``; an end marked open is excluded."""

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
