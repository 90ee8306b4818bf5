"""Delaunay and minimum-spanning-tree graphs: known edges, references, caps, hysteresis, degenerate point sets."""

import itertools

import numpy as np
import pytest
from scipy.spatial import ConvexHull
from trackoverlay.utils.graph.neighbours import (
    GraphParams,
    build_edge_batch,
    build_edge_sequence,
    build_edges,
    edge_churn,
    edge_lengths,
)

SHAPES = ("delaunay", "mst")


def edge_set(edges):
    return {(int(i), int(j)) for i, j in edges}


def random_points(n, seed):
    return np.random.default_rng(seed).uniform((0, 0), (1920, 1080), size=(n, 2)).astype(np.float32)


def prim_tree(points):
    """Reference minimum spanning tree of the complete graph (Prim, float64), as a set of pairs."""
    p = points.astype(np.float64)
    n = len(p)
    dist = np.sqrt(((p[:, None] - p[None]) ** 2).sum(-1))
    inside, best, parent, edges = np.zeros(n, bool), dist[0].copy(), np.zeros(n, int), set()
    inside[0] = True
    for _ in range(n - 1):
        j = int(np.argmin(np.where(inside, np.inf, best)))
        edges.add((min(j, parent[j]), max(j, parent[j])))
        inside[j] = True
        closer = dist[j] < best
        best[closer], parent[closer] = dist[j][closer], j
    return edges


# ------------------------------------------------------------------ known graphs


def test_delaunay_of_a_square_with_its_centre_is_the_four_sides_and_four_spokes():
    points = np.array([[0, 0], [10, 0], [0, 10], [10, 10], [5, 5]], np.float32)
    edges, lengths = build_edges(points, GraphParams(mode="delaunay"))
    assert edge_set(edges) == {(0, 1), (0, 2), (1, 3), (2, 3), (0, 4), (1, 4), (2, 4), (3, 4)}
    np.testing.assert_allclose(lengths, edge_lengths(points, edges))


def test_delaunay_of_a_triangle_around_a_point_links_the_point_to_every_corner():
    points = np.array([[0, 0], [10, 0], [5, 8], [5, 3]], np.float32)
    assert edge_set(build_edges(points, GraphParams(mode="delaunay"))[0]) == {
        (0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3)}


@pytest.mark.parametrize("seed", range(4))
def test_delaunay_of_random_points_is_planar_complete_and_holds_the_nearest_neighbours_and_the_tree(seed):
    points = random_points(80, seed)
    edges = edge_set(build_edges(points, GraphParams(mode="delaunay"))[0])
    hull = len(ConvexHull(points.astype(np.float64)).vertices)
    assert len(edges) == 3 * len(points) - 3 - hull  # Euler: a triangulation of points in general position
    nearest = build_edges(points, GraphParams(mode="knn", k=1))[0]
    assert edge_set(nearest) <= edges and prim_tree(points) <= edges


def test_mst_of_a_known_set_has_n_minus_1_edges_and_the_known_length():
    points = np.array([[0, 0], [4, 0], [8, 0], [4, 3], [4, 7]], np.float32)  # a T: arms 4, stem 3 + 4
    edges, lengths = build_edges(points, GraphParams(mode="mst"))
    assert edge_set(edges) == {(0, 1), (1, 2), (1, 3), (3, 4)}
    assert len(edges) == len(points) - 1 and float(lengths.sum()) == pytest.approx(15.0)


@pytest.mark.parametrize("seed", range(4))
def test_mst_of_random_points_is_the_spanning_tree_of_the_complete_graph(seed):
    points = random_points(60, seed)
    edges, lengths = build_edges(points, GraphParams(mode="mst"))
    want = prim_tree(points)
    assert edge_set(edges) == want and len(edges) == 59
    reference = sum(np.hypot(*(points[i].astype(np.float64) - points[j])) for i, j in want)
    assert float(lengths.astype(np.float64).sum()) == pytest.approx(reference, rel=1e-6)


def test_mst_ties_go_to_the_lower_pair():
    points = np.array([[0, 0], [1, 0], [0, 1], [1, 1]], np.float32)  # four sides of length 1: any three span
    assert edge_set(build_edges(points, GraphParams(mode="mst"))[0]) == {(0, 1), (0, 2), (1, 3)}


@pytest.mark.parametrize("mode", SHAPES)
def test_invalid_points_get_no_edges_and_ids_stay_the_columns(mode):
    points = np.array([[0, 0], [np.nan, np.nan], [10, 0], [5, 8], [500, 500]], np.float32)
    valid = np.array([True, False, True, True, False])
    edges = edge_set(build_edges(points, GraphParams(mode=mode), valid=valid)[0])
    assert edges == ({(0, 2), (0, 3), (2, 3)} if mode == "delaunay" else {(0, 3), (2, 3)})  # 0-2: 10, others 9.4


# ------------------------------------------------------------------ caps


@pytest.mark.parametrize("mode", SHAPES)
def test_caps_apply_to_the_triangulation_and_the_tree(mode):
    points = random_points(120, 7)
    full, full_lengths = build_edges(points, GraphParams(mode=mode))
    edges, _ = build_edges(points, GraphParams(mode=mode, max_length=120.0))
    assert edge_set(edges) == edge_set(full[full_lengths <= 120.0]) and len(edges) < len(full)
    edges, _ = build_edges(points, GraphParams(mode=mode, delta_y_cap=40.0))
    rise = np.abs(points[full[:, 1], 1] - points[full[:, 0], 1])
    assert edge_set(edges) == edge_set(full[rise <= 40.0])
    edges, _ = build_edges(points, GraphParams(mode=mode, degree_cap=2))
    assert np.bincount(edges.ravel(), minlength=120).max() <= 2 and edge_set(edges) <= edge_set(full)


# ------------------------------------------------------------------ hysteresis


def test_mst_hysteresis_keeps_last_frame_edge_while_it_is_within_the_margin():
    points = np.array([[0, 0], [10, 0], [5.0, 8.73]], np.float32)  # AB 10, AC 10.1, BC 10.1 + ...
    points[2] = [4.9, 8.75]  # AC ~10.03, BC ~10.09: the tree takes AB and AC
    fresh = edge_set(build_edges(points, GraphParams(mode="mst", hysteresis=0.1))[0])
    assert fresh == {(0, 1), (0, 2)}
    previous = np.array([[0, 1], [1, 2]])
    kept = edge_set(build_edges(points, GraphParams(mode="mst", hysteresis=0.1), previous=previous)[0])
    assert kept == {(0, 1), (1, 2)}  # BC costs 10.09 / 1.1 now, below AC's 10.03
    assert edge_set(build_edges(points, GraphParams(mode="mst"), previous=previous)[0]) == fresh  # margin 0: off


def test_mst_ignores_last_frame_edges_to_points_that_are_gone_or_doubled():
    points = np.array([[0, 0], [10, 0], [10, 0], [0, 10]], np.float32)  # point 2 sits on point 1
    valid = np.array([True, True, True, True])
    previous = np.array([[2, 3], [0, 3]])
    edges = edge_set(build_edges(points, GraphParams(mode="mst", hysteresis=0.3), valid=valid, previous=previous)[0])
    assert edges == {(0, 1), (0, 3)}


def test_delaunay_hysteresis_lets_last_frame_edges_pass_the_caps_by_the_margin():
    points = np.array([[0, 0], [105, 0], [52, 60]], np.float32)  # AB = 105, AC = 79.4, BC = 80.1
    params = GraphParams(mode="delaunay", max_length=100.0, hysteresis=0.1)
    assert edge_set(build_edges(points, params)[0]) == {(0, 2), (1, 2)}
    assert edge_set(build_edges(points, params, previous=np.array([[0, 1]]))[0]) == {(0, 1), (0, 2), (1, 2)}
    steep = GraphParams(mode="delaunay", delta_y_cap=55.0, hysteresis=0.1)  # rises of 60: only sticky ones stay
    assert edge_set(build_edges(points, steep, previous=np.array([[0, 2]]))[0]) == {(0, 1), (0, 2)}
    capped = GraphParams(mode="delaunay", degree_cap=1, hysteresis=0.5)  # each point keeps its shortest link
    assert edge_set(build_edges(points, capped)[0]) == {(0, 2)}
    assert edge_set(build_edges(points, capped, previous=np.array([[1, 2]]))[0]) == {(1, 2)}  # 80.1 / 1.5 first


def jittered(points=100, frames=30, sigma=3.0, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.uniform((0, 0), (1920, 1080), size=(points, 2))
    return (base[None] + rng.normal(0.0, sigma, size=(frames, points, 2))).astype(np.float32)


@pytest.mark.parametrize("mode, extra, ratio", [("mst", {}, 0.1), ("delaunay", {"max_length": 150.0}, 0.7)])
def test_hysteresis_cuts_the_churn_of_jittered_points(mode, extra, ratio):
    """Measured as in examples/graph_churn.py: MST churn falls from ~10 edges a frame to ~0.2; a capped
    Delaunay's by half (its flips between near-cocircular points are the triangulation's own)."""
    path = jittered()
    visible = np.ones(path.shape[:2], bool)
    churn = {margin: edge_churn(build_edge_sequence(path, visible, GraphParams(mode=mode, hysteresis=margin,
                                                                             **extra))).mean()
             for margin in (0.0, 0.2)}
    assert churn[0.0] > 3 and churn[0.2] < ratio * churn[0.0], churn


# ------------------------------------------------------------------ degenerate point sets

DEGENERATE = {
    "none": np.zeros((0, 2)),
    "one": [[5, 5]],
    "two": [[0, 0], [3, 4]],
    "collinear": [[0, 0], [30, 30], [10, 10], [20, 20]],
    "collinear-with-twins": [[0, 0], [20, 0], [20, 0], [10, 0], [0, 0]],
    "all-the-same": [[7, 7]] * 5,
    "three-with-a-twin": [[0, 0], [10, 0], [0, 0]],
    "square-and-twin": [[0, 0], [10, 0], [0, 10], [10, 10], [10, 10]],
}
EXPECTED = {  # the same for both shapes: the chain along a line is the MST, and twins get no edges
    "none": set(), "one": set(), "two": {(0, 1)}, "collinear": {(0, 2), (1, 3), (2, 3)},
    "collinear-with-twins": {(0, 3), (1, 3)}, "all-the-same": set(), "three-with-a-twin": {(0, 1)},
}


@pytest.mark.parametrize("mode", SHAPES)
@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_degenerate_point_sets_do_not_crash(mode, name):
    points = np.asarray(DEGENERATE[name], np.float32).reshape(-1, 2)
    edges, lengths = build_edges(points, GraphParams(mode=mode, hysteresis=0.2),
                                 previous=np.array([[0, 1]]) if len(points) > 1 else None)
    assert edges.dtype == np.int64 and lengths.dtype == np.float32 and len(edges) == len(lengths)
    if name in EXPECTED:
        assert edge_set(edges) == EXPECTED[name]
    else:  # the square: its twin (4 sits on 3) stays out; a diagonal is the triangulation's choice
        assert 4 not in edges and len(edges) == (5 if mode == "delaunay" else 3)


@pytest.mark.parametrize("mode", SHAPES)
def test_a_long_line_of_points_is_linked_as_a_chain(mode):
    order = np.random.default_rng(3).permutation(500)
    points = np.stack([order * 2.0, order * 1.5 + 7], axis=1).astype(np.float32)  # on one line, shuffled
    edges = build_edges(points, GraphParams(mode=mode))[0]
    assert edge_set(edges) == {tuple(sorted((int(a), int(b)))) for a, b in
                               zip(np.argsort(order)[:-1], np.argsort(order)[1:])}


# ------------------------------------------------------------------ batches and sequences


@pytest.mark.parametrize("mode", SHAPES)
@pytest.mark.parametrize("hysteresis", [0.0, 0.25])
@pytest.mark.parametrize("cuts", [(), (2,)], ids=["one shot", "a cut"])
def test_batches_equal_the_frame_by_frame_graph(mode, hysteresis, cuts):
    """Frame by frame, each with the frame before's edges as previous, except a shot's first frame."""
    path = jittered(points=40, frames=5)
    visible = np.random.default_rng(2).random(path.shape[:2]) > 0.2
    visible[3] = False  # an empty frame
    visible[4, 3:] = False  # three points
    params = GraphParams(mode=mode, hysteresis=hysteresis, max_length=400.0)
    sequence = build_edge_sequence(path, visible, params, cuts=cuts)
    previous = None
    for t in range(len(path)):
        want, _ = build_edges(path[t], params, valid=visible[t], previous=None if t in cuts else previous)
        assert edge_set(sequence[t]) == edge_set(want)
        previous = want
    _, _, lengths = build_edge_batch(path, visible, params, cuts=cuts)
    np.testing.assert_allclose(lengths, np.concatenate([edge_lengths(path[t], sequence[t]) for t in range(5)]))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", SHAPES)
@pytest.mark.parametrize("hysteresis", [0.0, 0.25])
def test_cupy_points_give_the_same_graph_built_on_the_host(mode, hysteresis):
    import cupy

    path = jittered(points=60, frames=4)
    visible = np.random.default_rng(5).random(path.shape[:2]) > 0.1
    params = GraphParams(mode=mode, hysteresis=hysteresis, degree_cap=4)
    want = build_edge_batch(path, visible, params)
    got = build_edge_batch(cupy.asarray(path), cupy.asarray(visible), params)
    for got_part, want_part in zip(got, want, strict=True):
        assert isinstance(got_part, cupy.ndarray)
        np.testing.assert_allclose(got_part.get(), want_part, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", SHAPES)
def test_link_overlay_of_the_new_shapes_built_on_the_gpu_matches_the_cpu(mode):
    from trackoverlay.utils.draw.overlays import link_overlay
    from trackoverlay.utils.draw.styles import LineStyle

    path = jittered(points=50, frames=3)
    visible = np.ones(path.shape[:2], bool)
    for params in (GraphParams(mode=mode), GraphParams(mode=mode, hysteresis=0.3)):
        want = link_overlay(path, visible, params, LineStyle(), backend="cpu")
        got = link_overlay(path, visible, params, LineStyle(), backend="gpu")
        for frame_want, frame_got in itertools.zip_longest(want, got):
            np.testing.assert_allclose(frame_got.layers[0].vertices, frame_want.layers[0].vertices, atol=1e-3)
