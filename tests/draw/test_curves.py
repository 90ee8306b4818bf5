"""Curve flattening: the fewest chords that keep every curve within 0.05 px of its polyline."""

import math

import numpy as np
import pytest
from trackoverlay.utils.draw.curves import MAX_SEGMENTS, control_points, flatten

TOLERANCE = 0.05  # px, flatten's default


def bezier(controls, t):
    """Points [E, len(t), 2] of Bézier curves ``controls`` [E, n, 2] at parameters ``t`` (float64)."""
    controls = np.asarray(controls, np.float64)
    degree = controls.shape[1] - 1
    t = np.asarray(t, np.float64)[:, None]
    points = np.zeros((controls.shape[0], len(t), 2))
    for i in range(degree + 1):
        weight = math.comb(degree, i)
        points += weight * t ** i * (1 - t) ** (degree - i) * controls[:, None, i]
    return points


def polyline_distance(points, vertices):
    """Distance from each point [P, 2] to the polyline ``vertices`` [V, 2] (float64)."""
    p0, p1 = vertices[:-1], vertices[1:]
    delta = p1 - p0
    offset = points[:, None] - p0[None]
    t = np.clip((offset * delta).sum(axis=2) / np.maximum((delta * delta).sum(axis=1), 1e-300), 0, 1)
    return np.linalg.norm(offset - t[..., None] * delta, axis=2).min(axis=1)


def flattening_error(controls, vertices):
    """How far each curve strays from its polyline (max over 2001 samples per curve)."""
    samples = bezier(controls, np.linspace(0, 1, 2001))
    return np.array([polyline_distance(curve, polyline.astype(np.float64))
                     for curve, polyline in zip(samples, vertices)]).max(axis=1)


def curves(kind, seed):
    """40 curves of ``kind``: chords 10..150 px, one bend in 0.05..0.6, bowing to either side."""
    rng = np.random.default_rng(seed)
    start = rng.uniform(0, 500, (40, 2))
    angle = rng.uniform(0, 2 * np.pi, 40)
    end = start + rng.uniform(10, 150, (40, 1)) * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    return control_points(start, end, kind, rng.uniform(0.05, 0.6), rng.choice([-1.0, 1.0], 40))


def split(vertices, offsets):
    return [vertices[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


@pytest.mark.parametrize("kind", ["quadratic", "cubic", "s_curve"])
def test_every_curve_lies_within_the_tolerance_of_its_polyline(kind):
    controls = curves(kind, seed=len(kind))
    vertices, offsets = flatten(controls)
    chords = np.diff(offsets) - 1
    assert np.all(chords < MAX_SEGMENTS) and chords.max() > 4  # the cap is not what bounds these curves
    error = flattening_error(controls, split(vertices, offsets))
    assert error.max() <= TOLERANCE + 1e-4, error.max()  # + float32 vertices


def test_quadratics_get_the_fewest_chords_that_meet_the_tolerance():
    """One chord fewer (uniform in t) would stray beyond 0.05 px: flattening is not wastefully fine."""
    controls = curves("quadratic", seed=1)
    _, offsets = flatten(controls)
    chords = np.diff(offsets) - 1
    bent = chords > 1
    fewer = [bezier(controls[i:i + 1], np.linspace(0, 1, n))[0] for i, n in zip(np.flatnonzero(bent), chords[bent])]
    error = flattening_error(controls[bent], fewer)
    assert bent.sum() > 20 and np.all(error > TOLERANCE), error.min()


def test_long_curves_are_capped_at_max_segments():
    controls = control_points(np.array([[0.0, 0.0]]), np.array([[20000.0, 0.0]]), "cubic", 1.0, np.array([1.0]))
    _, offsets = flatten(controls)
    assert offsets.tolist() == [0, MAX_SEGMENTS + 1]


def test_straight_links_are_one_chord():
    controls = control_points(np.array([[1.0, 2.0], [5.0, 5.0]]), np.array([[30.0, 40.0], [5.0, 5.0]]),
                              "straight", 0.3, np.ones(2))
    vertices, offsets = flatten(controls)
    assert offsets.tolist() == [0, 2, 4] and vertices.tolist() == [[1, 2], [30, 40], [5, 5], [5, 5]]
