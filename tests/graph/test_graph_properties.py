"""Property tests (hypothesis) of the neighbour graph over random point sets and parameters.

For random point sets (duplicates and ties included, invalid points holding
NaN) and random parameters: edges are int64 ``i < j``, unique, sorted, only
between valid points, with their true lengths; ``max_length``,
``delta_y_cap``, ``degree_cap`` and the radius (widened only for sticky
edges) hold; without caps every valid point keeps ``min(k, valid - 1)`` kNN
links; results are deterministic and the inputs unchanged.

Runs are deterministic (``derandomize=True``) and modest (50 examples).
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trackoverlay.utils.graph.neighbours import MODES, GraphParams, build_edges

SETTINGS = settings(max_examples=50, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def floats(low, high):
    """float32-representable floats in [low, high]."""
    return st.floats(low, high, allow_nan=False, allow_infinity=False, width=32)


@st.composite
def point_sets(draw):
    """(points [N, 2] float32, valid [N]): 0..40 points, on a coarse grid (duplicates, ties) or anywhere.

    Invalid points may hold NaN.
    """
    count = draw(st.integers(0, 40))
    coordinate = st.integers(0, 6).map(float) if draw(st.booleans()) else floats(0.0, 200.0)
    points = np.array(draw(st.lists(st.tuples(coordinate, coordinate), min_size=count, max_size=count)),
                      np.float32).reshape(count, 2)
    flags = np.array(draw(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=count, max_size=count)),
                     bool).reshape(count, 2)
    valid = ~flags[:, 0]
    points[~valid & flags[:, 1]] = np.nan
    return points, valid


graph_params = st.builds(
    GraphParams, mode=st.sampled_from(MODES), k=st.integers(1, 8), radius=floats(1.0, 150.0),
    max_length=st.one_of(st.just(0.0), floats(1.0, 200.0)), delta_y_cap=st.one_of(st.just(0.0), floats(1.0, 100.0)),
    degree_cap=st.integers(0, 4), hysteresis=st.one_of(st.just(0.0), floats(0.0, 0.875)))


@st.composite
def graph_cases(draw):
    """(points, valid, params, previous edges or None)."""
    points, valid = draw(point_sets())
    count = len(points)
    previous = None
    if count > 1 and draw(st.booleans()):
        pairs = draw(st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, count - 1)), max_size=30))
        previous = np.array([pair for pair in pairs if pair[0] != pair[1]], np.int64).reshape(-1, 2)
    return points, valid, draw(graph_params), previous


@SETTINGS
@given(case=graph_cases())
def test_graph_edges_are_canonical_capped_and_between_valid_points(case):
    points, valid, params, previous = case
    inputs = [value.copy() for value in (points, valid, previous) if value is not None]
    edges, lengths = build_edges(points, params, valid=valid, previous=previous)
    for value, copy in zip([value for value in (points, valid, previous) if value is not None], inputs):
        assert np.array_equal(value, copy, equal_nan=True)
    assert edges.dtype == np.int64 and edges.shape == (len(lengths), 2) and lengths.dtype == np.float32
    assert np.all(edges[:, 0] < edges[:, 1])
    keys = edges[:, 0] * len(points) + edges[:, 1]
    assert np.all(np.diff(keys) > 0)  # unique and sorted by (i, j)
    assert np.all(valid[edges])
    delta = points[edges[:, 1]].astype(np.float64) - points[edges[:, 0]]
    np.testing.assert_allclose(lengths, np.hypot(delta[:, 0], delta[:, 1]), rtol=1e-6, atol=1e-6)
    if params.max_length > 0:
        assert np.all(lengths <= params.max_length)
    if params.delta_y_cap > 0:
        assert np.all(np.abs(delta[:, 1]) <= params.delta_y_cap)
    degree = np.bincount(edges.ravel(), minlength=len(points))
    if params.degree_cap > 0:
        assert np.all(degree <= params.degree_cap)
    if params.mode == "radius":  # new edges within the radius; sticky ones within radius * (1 + hysteresis)
        sticky = np.zeros(len(edges), bool)
        if params.hysteresis > 0 and previous is not None:
            known = np.sort(previous, axis=1)
            sticky = (edges[:, None, :] == known[None]).all(axis=2).any(axis=1)
        assert np.all(lengths <= np.where(sticky, params.radius * (1.0 + params.hysteresis), params.radius))
    elif params.max_length == params.delta_y_cap == params.degree_cap == 0:
        assert np.all(degree[valid] >= min(params.k, int(valid.sum()) - 1))
    again, again_lengths = build_edges(points, params, valid=valid, previous=previous)
    assert np.array_equal(edges, again) and np.array_equal(lengths, again_lengths)
