"""Tests for the neighbour graph: kNN/radius edges, caps, hysteresis, churn."""

import math
import re

import numpy as np
import pytest
from trackoverlay.utils.core.arrays import array_module
from trackoverlay.utils.graph.knn_gpu import knn_gpu
from trackoverlay.utils.graph.neighbours import (
    GraphParams,
    build_edge_batch,
    build_edge_sequence,
    build_edges,
    edge_churn,
    edge_lengths,
    knn_cpu,
    knn_cpu_frames,
    knn_searched_ahead,
    pairs_within_cpu,
)


def random_points(n, seed=0, size=(1920, 1080)):
    return np.random.default_rng(seed).uniform((0, 0), size, size=(n, 2)).astype(np.float32)


def grid_points(side):
    xs, ys = np.meshgrid(np.arange(side), np.arange(side))
    return (np.stack([xs, ys], axis=-1).reshape(-1, 2) * 10.0).astype(np.float32)


def distance_matrix(points):
    p = points.astype(np.float64)
    return np.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(-1))


def knn_bruteforce(points, k):
    """Reference kNN with the plug contract, written over ``xp`` (rows by distance, ties by index)."""
    xp = array_module(points)
    p = points.astype(xp.float64)
    n = p.shape[0]
    k = min(k, n - 1)
    dist = xp.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(-1))
    dist[xp.arange(n), xp.arange(n)] = xp.inf
    idx = xp.argsort(dist, axis=1, kind="stable")[:, :max(k, 0)]
    return idx.astype(xp.int64), xp.take_along_axis(dist, idx, axis=1).astype(xp.float32)


def knn_reference_edges(points, k):
    idx, _ = knn_bruteforce(points, k)
    return {(min(i, int(j)), max(i, int(j))) for i, row in enumerate(idx) for j in row}


def edge_set(edges):
    return {(int(i), int(j)) for i, j in edges}


def degrees(edges, n):
    return np.bincount(edges.ravel(), minlength=n)


def assert_well_formed(edges, lengths, points):
    assert edges.dtype == np.int64 and edges.ndim == 2 and edges.shape[1] == 2
    assert lengths.dtype == np.float32 and lengths.shape == (len(edges),)
    assert np.all(edges[:, 0] < edges[:, 1])
    keys = edges[:, 0] * len(points) + edges[:, 1]
    assert np.all(np.diff(keys) > 0), "edges must be unique and sorted by (i, j)"
    if len(edges):
        expected = np.linalg.norm(points[edges[:, 1]] - points[edges[:, 0]], axis=1)
        np.testing.assert_allclose(lengths, expected, rtol=1e-6)


def jittered_tracks(points=100, frames=60, sigma=3.0, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform((0, 0), (1920, 1080), size=(points, 2))
    path = base[None] + rng.normal(0.0, sigma, size=(frames, points, 2))
    return path.astype(np.float32), np.ones((frames, points), dtype=bool)


# ---------------------------------------------------------------- knn plug


@pytest.mark.parametrize("points", [random_points(400, seed=1), grid_points(12)], ids=["random", "grid"])
@pytest.mark.parametrize("k", [1, 4, 8])
def test_knn_cpu_matches_bruteforce_including_ties(points, k):
    idx, dist = knn_cpu(points, k)
    ref_idx, ref_dist = knn_bruteforce(points, k)
    assert idx.dtype == np.int64 and dist.dtype == np.float32
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_allclose(dist, ref_dist, rtol=1e-6)


def test_knn_cpu_duplicate_points_excludes_self_and_breaks_ties_by_index():
    points = np.array([[5, 5]] * 6 + [[50, 50], [51, 50]], dtype=np.float32)
    idx, dist = knn_cpu(points, 3)
    np.testing.assert_array_equal(idx, knn_bruteforce(points, 3)[0])
    np.testing.assert_array_equal(idx[0], [1, 2, 3])
    np.testing.assert_array_equal(idx[5], [0, 1, 2])
    assert np.all(idx != np.arange(len(points))[:, None])
    assert np.all(dist[:6] == 0)


@pytest.mark.parametrize("n,k,width", [(0, 3, 0), (1, 3, 0), (2, 3, 1), (4, 3, 3), (4, 9, 3)])
def test_knn_cpu_width_is_min_k_n_minus_1(n, k, width):
    idx, dist = knn_cpu(random_points(n), k)
    assert idx.shape == dist.shape == (n, width)


# ---------------------------------------------------------------- kNN graph


@pytest.mark.parametrize("k", [1, 3, 5, 9])
def test_knn_edges_match_bruteforce_union(k):
    points = random_points(300, seed=k)
    edges, lengths = build_edges(points, GraphParams(k=k))
    assert_well_formed(edges, lengths, points)
    assert edge_set(edges) == knn_reference_edges(points, k)


def test_every_point_has_at_least_k_edges():
    points = random_points(250, seed=3)
    edges, _ = build_edges(points, GraphParams(k=4))
    assert degrees(edges, len(points)).min() >= 4


def test_edges_are_deduplicated_undirected_and_sorted():
    points = random_points(200, seed=4)
    edges, lengths = build_edges(points, GraphParams(k=6))
    assert_well_formed(edges, lengths, points)
    pairs = edge_set(edges)
    assert len(pairs) == len(edges)
    assert not pairs & {(j, i) for i, j in pairs}


def test_invalid_points_get_no_edges_and_may_hold_nan():
    points = random_points(60, seed=5)
    valid = np.ones(60, dtype=bool)
    valid[[3, 17, 40]] = False
    points[17] = np.nan
    edges, _ = build_edges(points, GraphParams(k=3), valid=valid)
    assert not np.isin(edges, [3, 17, 40]).any()
    keep = np.flatnonzero(valid)
    expected = {(int(keep[i]), int(keep[j])) for i, j in knn_reference_edges(points[keep], 3)}
    assert edge_set(edges) == expected


def test_nonfinite_valid_point_raises_naming_it():
    points = random_points(10)
    points[6, 1] = np.inf
    with pytest.raises(ValueError, match="point 6"):
        build_edges(points, GraphParams())


@pytest.mark.parametrize("n", [0, 1])
@pytest.mark.parametrize("mode", ["knn", "radius"])
def test_zero_and_one_point_give_no_edges(n, mode):
    edges, lengths = build_edges(random_points(n), GraphParams(mode=mode, radius=5000.0))
    assert edges.shape == (0, 2) and edges.dtype == np.int64
    assert lengths.shape == (0,) and lengths.dtype == np.float32


def test_two_points_give_one_edge():
    points = np.array([[0, 0], [3, 4]], dtype=np.float32)
    edges, lengths = build_edges(points, GraphParams(k=5))
    np.testing.assert_array_equal(edges, [[0, 1]])
    np.testing.assert_allclose(lengths, [5.0])


def test_k_at_least_n_gives_complete_graph():
    points = random_points(7)
    edges, _ = build_edges(points, GraphParams(k=20))
    assert len(edges) == 7 * 6 // 2


def test_duplicate_points_link_without_self_loops():
    points = np.array([[10, 10]] * 5 + [[100, 10], [100, 11]], dtype=np.float32)
    edges, lengths = build_edges(points, GraphParams(k=2))
    assert_well_formed(edges, lengths, points)
    assert edge_set(edges) == knn_reference_edges(points, 2)
    assert degrees(edges, len(points)).min() >= 2


def test_all_points_invisible_gives_no_edges():
    points = random_points(20)
    edges, lengths = build_edges(points, GraphParams(), valid=np.zeros(20, dtype=bool))
    assert edges.shape == (0, 2) and lengths.shape == (0,)


def test_results_are_deterministic():
    points = grid_points(8)
    first = build_edges(points, GraphParams(k=3, degree_cap=2))
    second = build_edges(points.copy(), GraphParams(k=3, degree_cap=2))
    np.testing.assert_array_equal(first[0], second[0])


# ------------------------------------------------------------------- radius


@pytest.mark.parametrize("radius", [40.0, 150.0])
def test_radius_matches_bruteforce(radius):
    points = random_points(300, seed=6)
    edges, lengths = build_edges(points, GraphParams(mode="radius", radius=radius))
    assert_well_formed(edges, lengths, points)
    i, j = np.nonzero(np.triu(distance_matrix(points) <= radius, k=1))
    assert edge_set(edges) == set(zip(i.tolist(), j.tolist()))
    assert len(edges) > 0


# --------------------------------------------------------------------- caps


def test_delta_y_cap_filters_exactly():
    points = random_points(300, seed=7)
    base, _ = build_edges(points, GraphParams(k=6))
    edges, _ = build_edges(points, GraphParams(k=6, delta_y_cap=40.0))
    dy = np.abs(points[base[:, 1], 1] - points[base[:, 0], 1])
    assert edge_set(edges) == edge_set(base[dy <= 40.0])
    assert 0 < len(edges) < len(base)


def test_max_length_filters_exactly():
    points = random_points(300, seed=8)
    base, base_lengths = build_edges(points, GraphParams(k=6))
    edges, lengths = build_edges(points, GraphParams(k=6, max_length=60.0))
    assert edge_set(edges) == edge_set(base[base_lengths <= 60.0])
    assert lengths.max() <= 60.0 and len(edges) < len(base)


def test_degree_cap_keeps_the_shortest_on_both_ends():
    # 0-1 (1 px), 1-2 (2 px), 0-2 (3 px): every point keeps only its shortest; 2's is 1-2,
    # which 1 drops, so only 0-1 survives (2 ends with degree 0).
    points = np.array([[0, 0], [1, 0], [3, 0]], dtype=np.float32)
    edges, lengths = build_edges(points, GraphParams(k=2, degree_cap=1))
    np.testing.assert_array_equal(edges, [[0, 1]])
    np.testing.assert_allclose(lengths, [1.0])


def degree_cap_reference(edges, lengths, cap):
    keep = []
    for e, (i, j) in enumerate(edges):
        ok = True
        for node, other in ((i, j), (j, i)):
            mine = [(lengths[f], b if a == node else a) for f, (a, b) in enumerate(edges) if node in (a, b)]
            ok &= sorted(mine).index((lengths[e], other)) < cap
        keep.append(ok)
    return edges[np.array(keep, dtype=bool)]


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_degree_cap_matches_rule_and_bounds_degree(cap):
    points = random_points(80, seed=9)
    base, base_lengths = build_edges(points, GraphParams(k=5, max_length=250.0))
    edges, _ = build_edges(points, GraphParams(k=5, max_length=250.0, degree_cap=cap))
    assert degrees(edges, len(points)).max() <= cap
    assert edge_set(edges) == edge_set(degree_cap_reference(base, base_lengths, cap))


def test_degree_cap_ties_break_by_other_endpoint_id():
    # Point 0 is 1 px from 1, 2 and 3: with cap 2 it keeps 1 and 2.
    points = np.array([[0, 0], [1, 0], [0, 1], [-1, 0]], dtype=np.float32)
    edges, _ = build_edges(points, GraphParams(mode="radius", radius=1.0, degree_cap=2))
    np.testing.assert_array_equal(edges, [[0, 1], [0, 2]])


# ------------------------------------------------------------------- params


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"k": 0}, "k"),
        ({"k": 2.5}, "k"),
        ({"radius": -1.0}, "radius"),
        ({"radius": 0.0}, "radius"),
        ({"radius": math.nan}, "radius"),
        ({"mode": "voronoi"}, "mode"),
        ({"max_length": -1.0}, "max_length"),
        ({"max_length": math.nan}, "max_length"),
        ({"delta_y_cap": -0.5}, "delta_y_cap"),
        ({"degree_cap": -1}, "degree_cap"),
        ({"hysteresis": 1.0}, "hysteresis"),
        ({"hysteresis": -0.1}, "hysteresis"),
        ({"hysteresis": math.nan}, "hysteresis"),
    ],
)
def test_bad_params_raise_naming_the_field(kwargs, field):
    """The message names the field, what it allows and the value given."""
    given = re.escape(repr(kwargs[field]))
    if field == "mode":
        pattern = rf"GraphParams\.mode {given} is not one of knn, radius, delaunay, mst$"
    else:
        pattern = rf"GraphParams\.{field} must be (a number|a whole number) in [\[(].*[)\]], got {given}$"
    with pytest.raises(ValueError, match=pattern):
        GraphParams(**kwargs)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match=r"\[N, 2\]"):
        build_edges(np.zeros((4, 3), np.float32), GraphParams())
    with pytest.raises(ValueError, match="valid"):
        build_edges(np.zeros((4, 2), np.float32), GraphParams(), valid=np.ones(3, bool))
    with pytest.raises(ValueError, match="visibility"):
        build_edge_sequence(np.zeros((2, 4, 2), np.float32), np.ones((2, 5), bool), GraphParams())


# ------------------------------------------------------------ immutability


def test_inputs_are_not_modified():
    path, visibility = jittered_tracks(points=30, frames=4)
    path[2, 5] = np.nan
    visibility[1, 7] = False
    path_copy, visibility_copy = path.copy(), visibility.copy()
    params = GraphParams(k=3, degree_cap=2, max_length=500.0, hysteresis=0.2)
    sequence = build_edge_sequence(path, visibility, params)
    previous, valid = sequence[0].copy(), visibility[1].copy()
    build_edges(path[1], params, valid=valid, previous=sequence[0])
    sequence_copy = [edges.copy() for edges in sequence]
    edge_churn(sequence)
    np.testing.assert_array_equal(path, path_copy)
    np.testing.assert_array_equal(visibility, visibility_copy)
    np.testing.assert_array_equal(valid, visibility[1])
    np.testing.assert_array_equal(sequence[0], previous)
    for edges, copy in zip(sequence, sequence_copy):
        np.testing.assert_array_equal(edges, copy)


# --------------------------------------------------------------- plugs


def test_knn_plug_receives_xp_arrays_and_matches_cpu():
    points = random_points(150, seed=10)
    calls = []

    def plug(pts, k):
        calls.append((array_module(pts), pts.shape, k))
        return knn_bruteforce(pts, k)

    valid = np.ones(150, dtype=bool)
    valid[::10] = False
    for params in (GraphParams(k=4), GraphParams(k=4, hysteresis=0.2)):
        previous, _ = build_edges(points, GraphParams(k=4), valid=valid)
        got = build_edges(points, params, knn=plug, valid=valid, previous=previous)
        want = build_edges(points, params, valid=valid, previous=previous)
        np.testing.assert_array_equal(got[0], want[0])
    assert calls == [(np, (135, 2), 4), (np, (135, 2), 8)]


def test_pairs_within_plug_is_used_in_radius_mode():
    points = random_points(100, seed=11)
    calls = []

    def plug(pts, radius):
        calls.append(radius)
        return pairs_within_cpu(pts, radius)

    got, _ = build_edges(points, GraphParams(mode="radius", radius=90.0), pairs_within=plug)
    want, _ = build_edges(points, GraphParams(mode="radius", radius=90.0))
    np.testing.assert_array_equal(got, want)
    assert calls == [90.0]


# ---------------------------------------------------------------- sequence


def test_sequence_without_hysteresis_equals_per_frame_edges():
    path, visibility = jittered_tracks(points=40, frames=5)
    visibility[2, :10] = False
    params = GraphParams(k=3)
    sequence = build_edge_sequence(path, visibility, params)
    assert len(sequence) == 5
    for t, edges in enumerate(sequence):
        np.testing.assert_array_equal(edges, build_edges(path[t], params, valid=visibility[t])[0])


@pytest.mark.parametrize("params", [GraphParams(k=3), GraphParams(k=3, degree_cap=2, max_length=150.0)])
def test_batched_knn_plug_gives_the_per_frame_plug_graph(params):
    path, visibility = jittered_tracks(points=40, frames=6)
    visibility[1, :38] = False  # two points left: fewer than k
    visibility[2, :39] = False  # one point: no edges
    visibility[3] = False
    visibility[4, ::3] = False
    frame, edges, lengths = build_edge_batch(path, visibility, params)  # knn_cpu.frames: all frames at once
    per_frame = build_edge_sequence(path, visibility, params, knn=lambda points, k: knn_cpu(points, k))
    assert np.all(np.diff(frame) >= 0)
    for t, want in enumerate(per_frame):
        np.testing.assert_array_equal(edges[frame == t], want)
        np.testing.assert_array_equal(lengths[frame == t], edge_lengths(path[t], want))
    assert len(per_frame[1]) == (1 if params.max_length == 0 else len(per_frame[1])) <= 1
    assert len(per_frame[2]) == len(per_frame[3]) == 0


def test_knn_cpu_frames_marks_invalid_and_missing_neighbours():
    points = random_points(5, seed=3)[None].repeat(2, axis=0)
    valid = np.array([[True] * 5, [True, False, True, False, False]])
    idx, dist = knn_cpu_frames(points, 3, valid)
    assert idx.shape == dist.shape == (2, 5, 3)
    np.testing.assert_array_equal(idx[0], knn_cpu(points[0], 3)[0])
    assert idx[1, 0].tolist() == [2, -1, -1] and idx[1, 2].tolist() == [0, -1, -1]
    assert (idx[1, [1, 3, 4]] == -1).all() and np.isinf(dist[1, 1]).all()


def _frames_of(point_sets):
    """Point sets padded into ``(path [T, N, 2], valid [T, N])``."""
    width = max(len(points) for points in point_sets)
    path = np.full((len(point_sets), width, 2), np.nan, np.float32)
    valid = np.zeros((len(point_sets), width), bool)
    for t, points in enumerate(point_sets):
        path[t, :len(points)], valid[t, :len(points)] = points, True
    return path, valid


@pytest.mark.parametrize("case", ["same-points-every-frame", "ties-and-small-frames", "a-coordinate-near-zero",
                                  "more-than-one-tree-holds"])
@pytest.mark.parametrize("k", [1, 5, 10])
def test_knn_cpu_frames_equals_knn_cpu_frame_by_frame(case, k):
    """Frames searched together (one tree, frames side by side) give each frame's own search bit for bit: no
    neighbour from another frame, even where frames hold the very same points, ties by index, frames with
    fewer points than asked, and a coordinate so near zero that moving it would round it (then the frames
    are searched one by one)."""
    if case == "same-points-every-frame":
        sets = [random_points(60, seed=2)] * 6
    elif case == "ties-and-small-frames":
        sets = [grid_points(6), grid_points(3)[:2], grid_points(2), random_points(3, seed=4), grid_points(5)[::2],
                np.repeat(grid_points(2), 3, axis=0), grid_points(4)]
    elif case == "a-coordinate-near-zero":
        sets = [random_points(30, seed=5), random_points(30, seed=6)]  # moved, these five would be one point
        sets[1][:5] = np.array([[0.0, 0.0], [4e-20, 0.0], [3e-20, 0.0], [2e-20, 0.0], [1e-20, 0.0]], np.float32)
    else:
        sets = [random_points(700, seed=seed) for seed in range(3)]  # more points than one tree takes
    path, valid = _frames_of(sets)
    idx, dist = knn_cpu_frames(path, k, valid)
    for t, points in enumerate(sets):
        want_idx, want_dist = knn_cpu(points, k)
        width = want_idx.shape[1]
        np.testing.assert_array_equal(idx[t, :len(points), :width], want_idx)
        np.testing.assert_array_equal(dist[t, :len(points), :width], want_dist)
        assert (idx[t, :len(points), width:] == -1).all()


def test_hysteresis_searches_every_frame_at_once_and_builds_the_same_graph():
    """With hysteresis each frame still needs the one before, but the neighbours of all frames are searched in
    one batched call; the edges equal a search frame by frame, cuts included."""
    path, visibility = jittered_tracks(points=80, frames=7)
    visibility[2, :70] = False  # ten points left
    visibility[4, 5::2] = False
    params = GraphParams(k=4, hysteresis=0.3, degree_cap=3)
    calls = []

    def batched(points, k):
        return knn_cpu(points, k)

    def frames(points, k, valid):
        calls.append(k)
        return knn_cpu_frames(points, k, valid)

    batched.frames = frames
    got = build_edge_sequence(path, visibility, params, knn=batched, cuts=(3,))
    want = build_edge_sequence(path, visibility, params, knn=lambda points, k: knn_cpu(points, k), cuts=(3,))
    assert calls == [4 + 4]  # once, for as many neighbours as sticky edges ask
    for edges_got, edges_want in zip(got, want):
        np.testing.assert_array_equal(edges_got, edges_want)


def test_a_plug_searched_ahead_answers_only_the_points_it_was_searched_for():
    path, valid = _frames_of([random_points(12, seed=1), random_points(9, seed=2)])
    plugs = knn_searched_ahead(path, valid, GraphParams(k=3))
    np.testing.assert_array_equal(plugs[1](path[1, :9], 2)[0], knn_cpu(path[1, :9], 2)[0])
    with pytest.raises(ValueError, match="for 9 points, asked about 12"):
        plugs[1](path[0], 3)
    assert knn_searched_ahead(path, valid, GraphParams(mode="radius")) is None


def test_sequence_treats_nonfinite_visible_slot_as_invisible():
    path, visibility = jittered_tracks(points=20, frames=3)
    path[1, 4] = np.nan
    sequence = build_edge_sequence(path, visibility, GraphParams(k=3, hysteresis=0.2))
    assert not np.isin(sequence[1], 4).any()
    assert np.isin(sequence[0], 4).any() and np.isin(sequence[2], 4).any()


def test_edge_churn_counts_added_plus_removed():
    sequence = [np.array([[0, 1]]), np.array([[0, 1], [1, 2]]), np.array([[1, 2], [2, 3], [0, 3]]),
                np.zeros((0, 2), np.int64)]
    np.testing.assert_array_equal(edge_churn(sequence), [1, 3, 3])
    assert edge_churn(sequence[:1]).shape == (0,)
    assert edge_churn([]).shape == (0,)


# --------------------------------------------------------------- hysteresis


@pytest.mark.parametrize("mode,extra", [("knn", {"k": 5}), ("radius", {"radius": 150.0})])
def test_hysteresis_cuts_churn_on_jittered_tracks(mode, extra):
    path, visibility = jittered_tracks()
    plain = build_edge_sequence(path, visibility, GraphParams(mode=mode, **extra))
    sticky = build_edge_sequence(path, visibility, GraphParams(mode=mode, hysteresis=0.2, **extra))
    churn_plain, churn_sticky = edge_churn(plain).mean(), edge_churn(sticky).mean()
    assert churn_plain > 3.0, "the jitter must cause churn for this test to mean anything"
    assert churn_sticky < churn_plain / 3


def test_hysteresis_keeps_k_property_and_caps():
    path, visibility = jittered_tracks()
    params = GraphParams(k=5, hysteresis=0.2)
    capped = GraphParams(k=5, hysteresis=0.2, max_length=180.0, delta_y_cap=120.0, degree_cap=4)
    for edges in build_edge_sequence(path, visibility, params):
        assert degrees(edges, 100).min() >= 5
    for t, edges in enumerate(build_edge_sequence(path, visibility, capped)):
        points = path[t]
        assert np.linalg.norm(points[edges[:, 1]] - points[edges[:, 0]], axis=1).max() <= 180.0
        assert np.abs(points[edges[:, 1], 1] - points[edges[:, 0], 1]).max() <= 120.0
        assert degrees(edges, 100).max() <= 4


def test_radius_hysteresis_bounds():
    path, visibility = jittered_tracks()
    radius, margin = 150.0, 0.2
    sequence = build_edge_sequence(path, visibility, GraphParams(mode="radius", radius=radius, hysteresis=margin))
    for t in range(1, len(sequence)):
        lengths = edge_lengths(path[t], sequence[t])
        old = np.isin(sequence[t][:, 0] * 100 + sequence[t][:, 1], sequence[t - 1][:, 0] * 100 + sequence[t - 1][:, 1])
        assert np.all(lengths[~old] <= radius)
        assert np.all(lengths[old] <= radius * (1 + margin))


def test_sticky_edge_survives_small_overtake():
    # 1 is slightly farther from 0 than 2 is (and 1, 2 have nearer partners 4, 5), but
    # 0-1 existed: with the margin it stays and 0 no longer proposes 2.
    points = np.array([[0, 0], [10.4, 0], [0, 10], [500, 500], [20, 0], [0, 19]], dtype=np.float32)
    previous = np.array([[0, 1]])
    plain, _ = build_edges(points, GraphParams(k=1))
    sticky, _ = build_edges(points, GraphParams(k=1, hysteresis=0.1), previous=previous)
    assert (0, 1) not in edge_set(plain)
    assert (0, 1) in edge_set(sticky) and (0, 2) not in edge_set(sticky)


# ---------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize(
    "params",
    [
        GraphParams(k=5),
        GraphParams(k=4, max_length=200.0, delta_y_cap=120.0, degree_cap=3),
        GraphParams(k=5, hysteresis=0.2),
        GraphParams(mode="radius", radius=90.0, hysteresis=0.2, degree_cap=4),
    ],
)
@pytest.mark.parametrize("knn", [knn_cpu, knn_bruteforce, knn_gpu], ids=["knn_cpu", "knn_xp", "knn_gpu"])
def test_cupy_arrays_give_the_numpy_graph(params, knn):
    import cupy

    path, visibility = jittered_tracks(points=300, frames=4)
    visibility[1, ::7] = False
    want = build_edge_sequence(path, visibility, params)
    got = build_edge_sequence(cupy.asarray(path), cupy.asarray(visibility), params, knn=knn)
    for edges_want, edges_got in zip(want, got):
        assert isinstance(edges_got, cupy.ndarray)
        np.testing.assert_array_equal(cupy.asnumpy(edges_got), edges_want)
