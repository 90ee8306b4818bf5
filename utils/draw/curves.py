"""Edge curves: straight lines and Bézier curves, flattened for the rasterisers.

All functions are vectorised over every edge at once and take the array
module ``xp`` (NumPy or CuPy), so both backends run the same code.
"""

from __future__ import annotations

import numpy as np

CURVE_KINDS = ("straight", "quadratic", "cubic", "s_curve")
BEND_SIDES = ("alternate", "left", "right")
MAX_SEGMENTS = 64


def bend_signs(id_a, id_b, side: str, xp=np):
    """+1/-1 per edge: which side of the edge the curve bows to.

    The sign depends only on the (unordered) track-id pair, so a curve keeps
    its side from frame to frame; ``alternate`` mixes sides across edges.
    """
    if side not in BEND_SIDES:
        raise ValueError(f"bend side {side!r} is not one of {', '.join(BEND_SIDES)}")
    low = xp.minimum(id_a, id_b).astype(xp.int64)
    if side == "left":
        return xp.ones(low.shape, dtype=xp.float32)
    if side == "right":
        return -xp.ones(low.shape, dtype=xp.float32)
    high = xp.maximum(id_a, id_b).astype(xp.int64)
    mixed = (low * 73856093) ^ (high * 19349663)
    return xp.where((mixed >> 3) & 1, 1.0, -1.0).astype(xp.float32)


def control_points(start, end, kind: str, bend: float, signs, xp=np):
    """Bézier control points [E, n, 2] (n = 2, 3 or 4 with the end points).

    ``start``/``end`` are [E, 2]; the edge is oriented from ``start`` to ``end``
    and bows ``bend * |end - start|`` along its normal times ``signs``
    (quadratic: one control point at the midpoint; cubic: two at the thirds,
    on the same side; s_curve: on opposite sides).
    """
    if kind not in CURVE_KINDS:
        raise ValueError(f"curve {kind!r} is not one of {', '.join(CURVE_KINDS)}")
    start = start.astype(xp.float32)
    end = end.astype(xp.float32)
    if kind == "straight":
        return xp.stack([start, end], axis=1)
    chord = end - start
    normal = xp.stack([-chord[:, 1], chord[:, 0]], axis=1) * (float(bend) * signs)[:, None]
    if kind == "quadratic":
        return xp.stack([start, (start + end) * 0.5 + normal, end], axis=1)
    second = -normal if kind == "s_curve" else normal
    return xp.stack([start, start + chord / 3 + normal, start + chord * (2 / 3) + second, end], axis=1)


def _segments_needed(controls, tolerance: float, xp):
    """Chord count per curve keeping the flattening error under ``tolerance`` px."""
    if controls.shape[1] == 2:
        return xp.ones(controls.shape[0], dtype=xp.int64)
    second = controls[:, :-2] - 2 * controls[:, 1:-1] + controls[:, 2:]
    degree = controls.shape[1] - 1
    bound = degree * (degree - 1) * xp.sqrt((second * second).sum(axis=2)).max(axis=1)
    count = xp.ceil(xp.sqrt(bound / (8.0 * tolerance)))
    return xp.clip(count, 1, MAX_SEGMENTS).astype(xp.int64)


def _bernstein(t, degree: int, xp):
    """Bernstein weights [V, degree + 1] at parameters ``t``."""
    u = 1.0 - t
    if degree == 2:
        return xp.stack([u * u, 2 * u * t, t * t], axis=1)
    return xp.stack([u ** 3, 3 * u * u * t, 3 * u * t * t, t ** 3], axis=1)


def flatten(controls, tolerance: float = 0.05, xp=np):
    """Bézier curves -> polylines: (vertices [V, 2] float32, offsets [E + 1] int64).

    Each curve gets its own chord count, enough for a flattening error under
    ``tolerance`` pixels (at most ``MAX_SEGMENTS`` chords).
    """
    count = controls.shape[0]
    chords = _segments_needed(controls, tolerance, xp)
    offsets = xp.zeros(count + 1, dtype=xp.int64)
    offsets[1:] = xp.cumsum(chords + 1)
    total = int(offsets[-1]) if count else 0
    if controls.shape[1] == 2:
        return controls.reshape(-1, 2).astype(xp.float32), offsets
    starts = xp.zeros(total, dtype=xp.int64)  # 1 where a curve (after the first) starts
    starts[offsets[1:-1]] = 1
    curve = xp.cumsum(starts)
    step = xp.arange(total) - offsets[curve]
    t = (step / chords[curve]).astype(xp.float32)
    weights = _bernstein(t, controls.shape[1] - 1, xp)
    vertices = xp.zeros((total, 2), dtype=xp.float32)
    points = controls.take(curve, axis=0)  # [V, degree + 1, 2]; take is much faster than fancy rows here
    for j in range(controls.shape[1]):  # sum of weight x control point, in control-point order
        vertices += weights[:, j, None] * points[:, j]
    return vertices, offsets
