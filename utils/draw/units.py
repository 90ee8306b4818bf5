"""Sizes relative to the frame, so one look works from 640 px to 8K.

Lengths (box size, line and trail width, dashes, link radius, label size, ...) are given in
pixels or in percent of the frame's height; :func:`pixels_per_unit` says how
many pixels one unit is. The default look, :data:`DEFAULT_LOOK`, is defined
in percent of the frame height, and :func:`look_lengths` turns it (or given
values) into pixels for a frame.
"""

from __future__ import annotations

from ..core.checks import check_number

UNITS = ("pixels", "% of frame height")

DEFAULT_LOOK = {
    "box_size": 3.0,  # 22 px at 720p, 65 px at 4K
    "box_stroke": 0.2,
    "line_width": 0.2,
    "dash_length": 1.7,
    "gap_length": 1.1,
    "radius": 28.0,
    "max_length": 0.0,  # 0 = no limit
    "delta_y_cap": 0.0,  # 0 = no limit
    "trail_width": 0.3,  # 3.2 px at 1080p
    "label_size": 1.7,  # 12 px at 720p, 37 px at 4K
    "label_padding": 0.4,
    "label_margin": 0.5,
    "label_outline": 0.0,  # 0 = no plate outline
    "glow_radius": 1.5,  # drawn only with a glow strength above 0
    "speed_range": 2.0,  # per frame; used only by the colour mode 'speed'
}
"""The default lengths, in percent of the frame height."""


def pixels_per_unit(units: str, height: int) -> float:
    """Pixels per length unit: 1 for pixels, ``height`` / 100 for '% of frame height'."""
    if units not in UNITS:
        raise ValueError(f"units {units!r} is not one of {', '.join(UNITS)}")
    return 1.0 if units == UNITS[0] else height / 100.0


def look_lengths(height: int, units: str = UNITS[1], **given) -> dict:
    """Pixel lengths for a frame ``height`` pixels tall.

    Each keyword names a :data:`DEFAULT_LOOK` length; its value is in ``units``,
    or None for the default look's value (always relative to the frame).
    """
    unknown = sorted(set(given) - set(DEFAULT_LOOK))
    if unknown:
        raise ValueError(f"unknown length(s) {', '.join(unknown)}; known: {', '.join(DEFAULT_LOOK)}")
    for name, value in given.items():
        if value is not None:
            check_number(f"{name.replace('_', ' ')} ({units})", value, 0.0)
    scale = pixels_per_unit(units, height)
    relative = pixels_per_unit(UNITS[1], height)
    return {name: DEFAULT_LOOK[name] * relative if value is None else value * scale
            for name, value in given.items()}
