"""Per-frame neighbour graph over tracked points (kNN, radius, Delaunay or MST), with caps and hysteresis.

Written once for NumPy and CuPy: every array step uses the module of the
input (``xp``) and only functions both provide (sorts, ``unique``,
``searchsorted``, masks). The neighbour search is a plug with the signature of
:func:`knn_cpu` (``knn(points, k) -> (idx, dist)``) or, in radius mode,
:func:`pairs_within_cpu` (``pairs_within(points, radius) -> pairs``); the CPU
plugs use ``scipy.spatial.cKDTree`` and hand results back in the input's
module, so a GPU plug can replace them without touching the graph logic. A
kNN plug may also offer ``knn.frames(points [T, N, 2], k, valid [T, N])``
(see :func:`knn_cpu_frames`): batches then search every frame in one call
(with hysteresis too, :func:`knn_searched_ahead`: only what follows the
search goes frame by frame).

Delaunay triangulations and minimum spanning trees come from SciPy
(``scipy.spatial.Delaunay``, ``scipy.sparse.csgraph.minimum_spanning_tree``)
and are built on the host, frame by frame, for CuPy input too (the points
are copied to the host and the pair keys uploaded back).

Edges are undirected int64 ``[E, 2]`` index pairs with ``i < j``, unique and
sorted by ``(i, j)``; lengths are float32 Euclidean distances in pixels. Every
tie (equal distances) is broken by index, so results are deterministic.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial import Delaunay, QhullError, cKDTree

from ..core.arrays import array_module, to_numpy
from ..core.checks import Range, check_choice, check_range
from ..core.log import LOGGER

MODES = ("knn", "radius", "delaunay", "mst")
# Accepted ranges of the numeric GraphParams fields (pixels, counts); the node widgets read these too.
GRAPH_RANGES = {
    "k": Range(1, high_open=True),
    "radius": Range(0.0, low_open=True, high_open=True),
    "max_length": Range(0.0, high_open=True),
    "delta_y_cap": Range(0.0, high_open=True),
    "degree_cap": Range(0, high_open=True),
    "hysteresis": Range(0.0, 1.0, high_open=True),
}


@dataclass(frozen=True)
class GraphParams:
    """How to link points.

    Attributes:
        mode: ``"knn"`` (each point links to its ``k`` nearest; undirected union),
            ``"radius"`` (every pair at distance <= ``radius``), ``"delaunay"``
            (the edges of the Delaunay triangulation) or ``"mst"`` (the
            Euclidean minimum spanning tree). Delaunay and MST link distinct
            positions: a point at the same position as a lower-indexed one gets
            no edges of its own.
        k: neighbours proposed per point, >= 1 (kNN mode).
        radius: link distance in pixels, > 0 (radius mode).
        max_length: drop edges longer than this many pixels; 0 = no cap.
        delta_y_cap: drop edges with ``|dy|`` above this many pixels; 0 = no cap.
        degree_cap: at most this many edges per point; 0 = no cap.
        hysteresis: stickiness margin in [0, 1) for edges that existed in the
            previous frame (see :func:`build_edges`); 0 = off.
    """

    mode: str = "knn"
    k: int = 5
    radius: float = 200.0
    max_length: float = 0.0
    delta_y_cap: float = 0.0
    degree_cap: int = 0
    hysteresis: float = 0.0

    def __post_init__(self):
        check_choice("GraphParams.mode", self.mode, MODES)
        for name, accepted in GRAPH_RANGES.items():
            check_range(f"GraphParams.{name}", getattr(self, name), accepted, integer=name in ("k", "degree_cap"))


# ----------------------------------------------------------------- xp helpers


def _unique(xp, keys):
    """Sorted unique values of a 1-D int array (sort-based; ``numpy.unique`` is slower here)."""
    keys = xp.sort(keys)
    if keys.size == 0:
        return keys
    return keys[xp.concatenate([xp.ones(1, dtype=bool), keys[1:] != keys[:-1]])]


def _float_key(xp, values, ids, n: int):
    """Int64 keys ordering by (non-negative float ``values``, then ``ids`` < ``n``).

    Non-negative float32 bit patterns sort like their values, so one integer
    sort replaces a two-key lexsort.
    """
    bits = xp.asarray(values, dtype=xp.float32).view(xp.int32).astype(xp.int64)
    return bits * n + ids


def _group_rank(xp, sorted_groups, n: int):
    """Position of each element inside its run of equal values (sorted input, values < ``n``)."""
    counts = xp.bincount(sorted_groups, minlength=n)
    first = xp.cumsum(counts) - counts
    return xp.arange(sorted_groups.size, dtype=xp.int64) - first[sorted_groups]


def _contains(xp, sorted_keys, keys):
    """Boolean mask: which ``keys`` occur in the sorted array ``sorted_keys``."""
    if sorted_keys.size == 0 or keys.size == 0:
        return xp.zeros(keys.shape, dtype=bool)
    order = xp.argsort(keys)  # sorted needles make the binary searches cache-friendly
    pos = xp.minimum(xp.searchsorted(sorted_keys, keys[order]), sorted_keys.size - 1)
    hit = xp.empty(keys.shape, dtype=bool)
    hit[order] = sorted_keys[pos] == keys[order]
    return hit


def _pair_keys(xp, a, b, n: int):
    """Undirected pair keys ``min * n + max`` (int64)."""
    return xp.minimum(a, b).astype(xp.int64) * n + xp.maximum(a, b).astype(xp.int64)


def _decode(xp, keys, n: int):
    """Inverse of :func:`_pair_keys`: int64 ``[E, 2]`` edges."""
    return xp.stack([keys // n, keys % n], axis=1).astype(xp.int64)


def edge_lengths(points, edges):
    """Float32 lengths of ``edges`` (int ``[E, 2]``) over ``points`` (``[N, 2]``)."""
    xp = array_module(points)
    delta = points[edges[:, 1]].astype(xp.float32) - points[edges[:, 0]].astype(xp.float32)
    return xp.sqrt((delta * delta).sum(axis=1)).astype(xp.float32)


# ------------------------------------------------------------------ CPU plugs


def _distances(pts, rows, cols):
    """Float64 distances between ``pts[rows]`` and ``pts[cols]`` (any matching shapes)."""
    x, y = np.ascontiguousarray(pts[:, 0]), np.ascontiguousarray(pts[:, 1])  # 1-D gathers are the fast ones
    dx, dy = x.take(cols) - x.take(rows), y.take(cols) - y.take(rows)
    return np.sqrt(dx * dx + dy * dy)


def _select_nearest(pts, rows, cols, k: int):
    """Per row, the ``k`` non-self candidates nearest by (distance, index); rows ascending."""
    keep = rows != cols
    rows, cols = rows[keep], cols[keep]
    dist = _distances(pts, rows, cols)
    order = np.lexsort((cols, dist, rows))
    order = order[_group_rank(np, rows[order], len(pts)) < k]
    return cols[order].reshape(-1, k), dist[order].reshape(-1, k)


def _ball_candidates(tree, pts, rows, reach):
    """``(rows, cols)`` of every point within ``reach[r]`` of each point in ``rows``."""
    balls = tree.query_ball_point(pts[rows], reach)
    sizes = np.fromiter(map(len, balls), dtype=np.int64, count=len(balls))
    cols = np.fromiter(itertools.chain.from_iterable(balls), dtype=np.int64, count=int(sizes.sum()))
    return np.repeat(rows, sizes), cols


def neighbour_count(k: int, points: int) -> int:
    """``k' = min(k, N - 1)``: how many neighbours each of ``points`` points can have (0 when N < 2)."""
    return max(min(int(k), points - 1), 0)


def knn_cpu(points, k: int):
    """k nearest neighbours of every point, excluding itself (``scipy`` cKDTree).

    Args:
        points: float ``[N, 2]`` NumPy or CuPy array (CuPy is copied to the host).
        k: neighbours wanted, >= 1.

    Returns:
        ``(idx, dist)``: int64 and float32 ``[N, k']`` with ``k' = min(k, N - 1)``,
        in the input's array module; rows sorted by distance, ties by index.
        Ranking is exact in float64, duplicate points and ties included: rows
        whose k-th distance ties the farthest returned candidate are re-solved
        with a ball query.
    """
    xp = array_module(points)
    idx, dist = _knn_sets([to_numpy(points).astype(np.float64)], k)[0]
    return xp.asarray(idx), xp.asarray(dist)


_RUN_POINTS = 1024
"""Points searched in one tree at most (unless one set has more): beyond a few hundred points a frame the
calls' overhead is small and larger arrays only cost cache."""


def _knn_sets(point_sets: list, k: int) -> list:
    """:func:`knn_cpu` (host arrays) of each float64 ``[N_i, 2]`` set of ``point_sets``, searched together in one
    k-d tree where the sets can be placed side by side exactly (:func:`_side_by_side`), else one by one. The
    work is the same as set by set, in fewer calls: on a thread each of them gives up Python's lock and waits
    to take it back behind the other threads."""
    results = [(np.zeros((len(pts), 0), np.int64), np.zeros((len(pts), 0), np.float32)) for pts in point_sets]
    searched = [s for s, pts in enumerate(point_sets) if len(pts) >= 2]
    if not searched or k < 1:
        return results
    for run in _runs(searched, [len(point_sets[s]) for s in searched]):
        sets = [point_sets[s] for s in run]
        pts = np.concatenate(sets) if len(sets) > 1 else sets[0]
        sizes = np.array([len(points) for points in sets], np.int64)
        placed = _side_by_side(pts, sizes)
        if placed is None:  # a shift would round a coordinate: a tree for each set
            found = [_knn_placed(points, sizes[i:i + 1], points, k)[0] for i, points in enumerate(sets)]
        else:
            found = _knn_placed(pts, sizes, placed, k)
        for s, answer in zip(run, found):
            results[s] = answer
    return results


def _runs(items: list, sizes: list) -> list:
    """``items`` cut into runs of consecutive ones whose ``sizes`` add up to at most :data:`_RUN_POINTS` (an item
    larger than that alone)."""
    runs, total = [], _RUN_POINTS
    for item, size in zip(items, sizes):
        if total + size > _RUN_POINTS:
            runs.append([])
            total = 0
        runs[-1].append(item)
        total += size
    return runs


def _side_by_side(pts, sizes):
    """``pts`` (float64 ``[N, 2]``, sets of ``sizes`` points one after another), each set moved along x so that
    any two of its points are nearer than any point of another set; None where a move would round a coordinate
    (a set's distances there would then not be its own, bit for bit)."""
    if len(sizes) == 1:
        return pts
    starts = np.cumsum(sizes) - sizes
    diagonal = float(np.hypot(*(np.maximum.reduceat(pts, starts) - np.minimum.reduceat(pts, starts)).T).max())
    across = float(np.ptp(pts[:, 0])) + 2.0 * diagonal + 1.0  # a gap of two diagonals between sets
    step = 2.0 ** np.ceil(np.log2(max(across, 2.0 * float(np.abs(pts[:, 0]).max()) + 1.0)))
    shift = np.repeat(np.arange(len(sizes)) * step, sizes)
    placed = pts.copy()
    placed[:, 0] += shift
    # with |x| <= step / 2 taking the shift back is exact, so it gives x back only where adding it was exact
    return placed if np.array_equal(placed[:, 0] - shift, pts[:, 0]) else None


def _knn_placed(pts, sizes, placed, k: int) -> list:
    """:func:`knn_cpu` of each set of ``pts`` (float64 ``[N, 2]``, sets of ``sizes`` >= 2 points one after
    another), searched in one tree over ``placed`` (the points as :func:`_side_by_side` gives them)."""
    n, wanted = len(pts), min(int(k), int(sizes.max()) - 1)
    tree = cKDTree(placed)
    _, cand = tree.query(placed, k=min(wanted + 2, n))
    cand = np.sort(cand, axis=1).astype(np.int64)  # index order: the stable sort breaks ties by index
    dist = _distances(pts, np.arange(n)[:, None], cand)
    other = cand == np.arange(n)[:, None]  # itself, or a point of another set
    owner = np.repeat(np.arange(len(sizes)), sizes)
    if len(sizes) > 1:
        other |= owner[cand] != owner[:, None]
    reach = np.where(other, 0.0, dist).max(axis=1)
    order = np.argsort(np.where(other, np.inf, dist), axis=1, kind="stable")[:, :wanted]
    idx, dist = np.take_along_axis(cand, order, 1), np.take_along_axis(dist, order, 1)
    partial = (sizes > cand.shape[1])[owner]  # sets not all among the candidates may hide ties
    tied = np.flatnonzero(partial & (dist[:, -1] >= reach))
    if tied.size:
        rows, cols = _ball_candidates(tree, placed, tied, reach[tied] * (1.0 + 1e-9) + 1e-9)
        idx[tied], dist[tied] = _select_nearest(pts, rows, cols, wanted)
    answers = []
    for start, size in zip(np.cumsum(sizes) - sizes, sizes):
        rows, width = slice(start, start + size), neighbour_count(k, int(size))
        answers.append((idx[rows, :width] - start, dist[rows, :width].astype(np.float32)))
    return answers


def knn_cpu_frames(points, k: int, valid):
    """:func:`knn_cpu` of every frame's valid points at once (the batched form of the plug).

    Args:
        points: float ``[T, N, 2]`` (NumPy or CuPy); ``valid``: bool ``[T, N]``.
        k: neighbours wanted, >= 1.

    Returns:
        ``(idx, dist)``: int64 and float32 ``[T, N, k']``, ``k' = min(k, N - 1)``,
        frame-local indices; -1 (and inf) where a point is invalid or has
        fewer valid neighbours; in the input's array module.
    """
    xp = array_module(points)
    pts, mask = to_numpy(points), to_numpy(valid)
    frames, n = mask.shape
    width = neighbour_count(k, n)
    idx = np.full((frames, n, width), -1, np.int64)
    dist = np.full((frames, n, width), np.inf, np.float32)
    ids = [np.flatnonzero(mask[t]) for t in range(frames)]
    found = _knn_sets([pts[t, frame_ids].astype(np.float64) for t, frame_ids in enumerate(ids)], k)
    for t, (frame_ids, (near, far)) in enumerate(zip(ids, found)):
        idx[t, frame_ids, :near.shape[1]] = frame_ids[near]
        dist[t, frame_ids, :near.shape[1]] = far
    return xp.asarray(idx), xp.asarray(dist)


knn_cpu.frames = knn_cpu_frames


def knn_searched_ahead(path, valid, params: GraphParams, knn=knn_cpu) -> list | None:
    """One kNN plug per frame of ``path`` (float ``[T, N, 2]``, ``valid`` bool ``[T, N]``) that answers from
    one search of all the frames (``knn.frames``), for :func:`build_edges` to take frame by frame: each
    frame's valid points asked for as many neighbours as hysteresis asks (rows are sorted by distance, ties
    by index, so their first ``k`` columns answer ``k``). None where the graph is not kNN or the plug has
    no batched form."""
    if params.mode != "knn" or not hasattr(knn, "frames"):
        return None
    xp = array_module(path)
    idx, dist = knn.frames(path, knn_query_count(params, params.hysteresis > 0), valid)
    local = xp.cumsum(valid, axis=1, dtype=xp.int64) - 1  # a valid column's place among its frame's valid points
    plugs = []
    for t in range(valid.shape[0]):
        ids = xp.nonzero(valid[t])[0]
        width = neighbour_count(idx.shape[2], int(ids.size))
        plugs.append(_answered(local[t][idx[t, ids, :width]], dist[t, ids, :width]))
    return plugs


def _answered(idx, dist):
    """A kNN plug that hands back ``(idx, dist)``, found beforehand for the points it is asked about, cut to
    the neighbours asked for."""

    def knn(points, k: int):
        if len(points) != len(idx):
            raise ValueError(f"this kNN answer is for {len(idx)} points, asked about {len(points)}")
        width = neighbour_count(k, len(points))
        return idx[:, :width], dist[:, :width]

    return knn


def pairs_within_cpu(points, radius: float):
    """All index pairs ``i < j`` at distance <= ``radius`` (int64 ``[P, 2]``, input's module)."""
    xp = array_module(points)
    pts = to_numpy(points).astype(np.float64)
    pairs = cKDTree(pts).query_pairs(float(radius), output_type="ndarray")
    return xp.asarray(pairs.astype(np.int64).reshape(-1, 2))


# ---------------------------------------------------------------- candidates


def knn_query_count(params: GraphParams, sticky: bool) -> int:
    """Neighbours asked of the kNN plug: ``k``, or ``k + max(2, k)`` when sticky edges compete."""
    return params.k + max(2, params.k) if sticky else params.k


def _knn_keys(xp, pts, ids, n: int, params: GraphParams, knn, sticky):
    """Sorted unique pair keys of the kNN union (hysteresis-scored when ``sticky``)."""
    k = min(params.k, ids.size - 1)
    if k < 1:
        return xp.zeros(0, dtype=xp.int64)
    idx, dist = knn(pts[ids], knn_query_count(params, sticky is not None))
    width = idx.shape[1]
    rows = xp.repeat(xp.arange(ids.size, dtype=xp.int64), width)
    cols = xp.asarray(idx, dtype=xp.int64).ravel()
    keys = _pair_keys(xp, ids[rows], ids[cols], n)
    if sticky is not None:
        dist = xp.asarray(dist, dtype=xp.float32).ravel()
        score = xp.where(_contains(xp, sticky, keys), dist / (1.0 + params.hysteresis), dist)
        best = xp.argsort(_float_key(xp, score, cols, ids.size).reshape(-1, width), axis=1)[:, :k]
        keys = xp.take_along_axis(keys.reshape(-1, width), best, axis=1).ravel()
    return _unique(xp, keys)


def _radius_keys(xp, pts, ids, n: int, params: GraphParams, pairs_within, sticky):
    """Sorted unique pair keys within the radius (``radius * (1 + margin)`` for sticky edges)."""
    margin = params.hysteresis if sticky is not None else 0.0
    pairs = xp.asarray(pairs_within(pts[ids], params.radius * (1.0 + margin)), dtype=xp.int64)
    keys = _unique(xp, _pair_keys(xp, ids[pairs[:, 0]], ids[pairs[:, 1]], n))
    lengths = edge_lengths(pts, _decode(xp, keys, n))
    limit = params.radius
    if sticky is not None:
        limit = xp.where(_contains(xp, sticky, keys), params.radius * (1.0 + margin), params.radius)
    return keys[lengths <= limit]


def _distinct_points(pts, ids):
    """Host ids (ascending) and float64 positions of the points ``pts[ids]``, the first at each position only."""
    host_ids, positions = to_numpy(ids), to_numpy(pts[ids]).astype(np.float64)
    if len(host_ids) < 2:
        return host_ids, positions
    _, first = np.unique(positions, axis=0, return_index=True)
    first.sort()
    return host_ids[first], positions[first]


def triangulation_pairs(positions: np.ndarray) -> np.ndarray:
    """Index pairs ``i < j`` (int64 ``[P, 2]``, sorted) of the Delaunay triangulation of distinct ``positions``.

    Two points give their one pair, fewer none. Collinear points, which Qhull
    cannot triangulate (``QhullError``), give the chain of consecutive points
    along their line: their minimum spanning tree.
    """
    count = len(positions)
    if count < 3:
        return np.array([[0, 1]], np.int64)[:max(count - 1, 0)]
    try:
        simplices = Delaunay(positions).simplices
    except QhullError:
        direction = positions[np.argmax(np.abs(positions - positions[0]).sum(axis=1))] - positions[0]
        order = np.argsort((positions - positions[0]) @ direction, kind="stable")
        pairs = np.stack([order[:-1], order[1:]], axis=1)
    else:
        pairs = np.concatenate([simplices[:, [0, 1]], simplices[:, [1, 2]], simplices[:, [0, 2]]])
    return np.unique(np.sort(pairs, axis=1).astype(np.int64), axis=0)


def spanning_tree_pairs(positions: np.ndarray, pairs: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The minimum spanning tree (forest) of the graph ``pairs`` (unique, ``i < j``) weighted by ``scores``.

    Ties go to the lower ``(i, j)``: the weights handed to SciPy are the edges'
    ranks by (score, i, j), which keeps the tree and makes it unique.
    """
    if len(pairs) == 0:
        return np.zeros((0, 2), np.int64)
    rank = np.empty(len(pairs), np.float64)
    rank[np.lexsort((pairs[:, 1], pairs[:, 0], scores))] = np.arange(1, len(pairs) + 1)
    graph = coo_matrix((rank, (pairs[:, 0], pairs[:, 1])), shape=(len(positions),) * 2).tocsr()
    tree = minimum_spanning_tree(graph).tocoo()
    return np.sort(np.stack([tree.row, tree.col], axis=1).astype(np.int64), axis=1)


def _delaunay_keys(xp, pts, ids, n: int):
    """Sorted unique pair keys of the Delaunay triangulation of the distinct points ``pts[ids]``."""
    ids, positions = _distinct_points(pts, ids)
    pairs = triangulation_pairs(positions)
    return xp.asarray(np.sort(_pair_keys(np, ids[pairs[:, 0]], ids[pairs[:, 1]], n)))


def _mst_keys(xp, pts, ids, n: int, params: GraphParams, sticky):
    """Sorted pair keys of the minimum spanning tree of the distinct points ``pts[ids]``.

    Sticky edges (between points of this frame) join the candidates, the
    triangulation's edges (which hold every Euclidean MST), at their length
    divided by ``1 + hysteresis``.
    """
    ids, positions = _distinct_points(pts, ids)
    pairs = triangulation_pairs(positions)
    if sticky is not None:
        sticky = to_numpy(sticky)
        local = np.full(n, -1, np.int64)
        local[ids] = np.arange(len(ids))
        old = local[_decode(np, sticky, n)]
        pairs = np.unique(np.concatenate([pairs, old[(old >= 0).all(axis=1)]]), axis=0)
    scores = _distances(positions, pairs[:, 0], pairs[:, 1])
    if sticky is not None:
        scores = np.where(_contains(np, sticky, _pair_keys(np, ids[pairs[:, 0]], ids[pairs[:, 1]], n)),
                          scores / (1.0 + params.hysteresis), scores)
    tree = spanning_tree_pairs(positions, pairs, scores)
    return xp.asarray(np.sort(_pair_keys(np, ids[tree[:, 0]], ids[tree[:, 1]], n)))


# ---------------------------------------------------------------------- caps


def _degree_mask(xp, edges, lengths, cap: int, n: int):
    """Edges among the ``cap`` shortest (by length, then other id) of BOTH endpoints."""
    count = edges.shape[0]
    node = xp.concatenate([edges[:, 0], edges[:, 1]])
    other = xp.concatenate([edges[:, 1], edges[:, 0]])
    by_length = xp.argsort(_float_key(xp, xp.concatenate([lengths, lengths]), other, n))
    position = xp.empty(2 * count, dtype=xp.int64)
    position[by_length] = xp.arange(2 * count, dtype=xp.int64)
    order = xp.argsort(node * (2 * count) + position)  # keys unique: no stable sort needed
    ok = xp.zeros(2 * count, dtype=bool)
    ok[order] = _group_rank(xp, node[order], n) < cap
    return ok[:count] & ok[count:]


def _apply_caps(xp, pts, edges, lengths, params: GraphParams, slack=None):
    """``delta_y_cap``, then ``max_length``, then ``degree_cap`` (true lengths, divided by ``slack`` [E]
    where given: an edge with slack 1.25 passes caps 25 % tighter than its size)."""
    keep = xp.ones(edges.shape[0], dtype=bool)
    measured = lengths if slack is None else lengths / slack
    if params.delta_y_cap > 0:
        rise = xp.abs(pts[edges[:, 1], 1] - pts[edges[:, 0], 1])
        keep &= (rise if slack is None else rise / slack) <= params.delta_y_cap
    if params.max_length > 0:
        keep &= measured <= params.max_length
    edges, lengths, measured = edges[keep], lengths[keep], measured[keep]
    if params.degree_cap > 0:
        keep = _degree_mask(xp, edges, measured, params.degree_cap, pts.shape[0])
        edges, lengths = edges[keep], lengths[keep]
    return edges, lengths


# -------------------------------------------------------------------- public


def _check_inputs(xp, points, valid, previous):
    """Validated float32 points, bool mask and sorted previous-edge keys (or None)."""
    pts = xp.asarray(points, dtype=xp.float32)
    if pts.ndim != 2 or pts.shape[1] != 2:
        raise ValueError(f"points must have shape [N, 2], got {list(pts.shape)}")
    n = pts.shape[0]
    mask = xp.ones(n, dtype=bool) if valid is None else xp.asarray(valid, dtype=bool)
    if mask.shape != (n,):
        raise ValueError(f"valid must have shape [{n}] (one flag per point), got {list(mask.shape)}")
    bad = mask & ~xp.isfinite(pts).all(axis=1)
    if bool(bad.any()):
        raise ValueError(f"point {int(xp.argmax(bad))} is not finite; pass only finite points or mark it invalid")
    if previous is None:
        return pts, mask, None
    prev = xp.asarray(previous, dtype=xp.int64).reshape(-1, 2)
    if prev.size and (int(prev.min()) < 0 or int(prev.max()) >= n):
        raise ValueError(f"previous edges must index points 0..{n - 1}")
    return pts, mask, _unique(xp, _pair_keys(xp, prev[:, 0], prev[:, 1], n))


def build_edges(points, params: GraphParams, knn=knn_cpu, valid=None, previous=None,
                pairs_within=pairs_within_cpu):
    """Neighbour edges of one frame.

    Candidates: in kNN mode each valid point proposes its ``k`` nearest valid
    points and the undirected union is kept; in radius mode every valid pair at
    distance <= ``radius``. Caps follow, on true lengths and in this order:
    ``|dy| <= delta_y_cap``, ``length <= max_length``, then ``degree_cap``: an
    edge survives if it is among the ``degree_cap`` shortest surviving edges
    (ties by the other endpoint's id) of BOTH endpoints, so every degree is
    <= the cap (a parallel rule, not a greedy loop).

    Delaunay mode takes the triangulation's edges, MST mode the minimum
    spanning tree (ties by index), both over the distinct positions of the
    valid points: fewer than 3 give their one pair (2) or nothing, and
    collinear points, which have no triangulation, give the chain along their
    line (their MST).

    Hysteresis (``params.hysteresis > 0`` and ``previous`` given): edges in
    ``previous`` are sticky. kNN mode queries ``k + max(2, k)`` neighbours,
    scores sticky edges as ``length / (1 + margin)`` and new ones by length,
    and each point keeps its ``k`` best scores (ties by index). Radius mode
    keeps a sticky edge while ``length <= radius * (1 + margin)``; a new one
    needs ``length <= radius``. MST mode builds the tree with sticky edges
    (those still between distinct valid points) costing ``length / (1 +
    margin)``. Delaunay mode keeps the triangulation's edges and lets sticky
    ones pass the caps with the same margin: their length and rise are
    divided by ``1 + margin`` for ``max_length``, ``delta_y_cap`` and the
    degree ranking.

    Args:
        points: float32 ``[N, 2]`` pixel positions (NumPy or CuPy); not modified.
        params: :class:`GraphParams`.
        knn: kNN plug, same contract as :func:`knn_cpu`.
        valid: optional bool ``[N]``; invalid points get no edges and may hold NaN.
        previous: optional int ``[E, 2]`` edges of the previous frame (same indices).
        pairs_within: radius plug, same contract as :func:`pairs_within_cpu`.

    Returns:
        ``(edges, lengths)``: int64 ``[E, 2]`` with ``i < j``, unique, sorted by
        ``(i, j)``; float32 ``[E]`` lengths in pixels.

    Raises:
        ValueError: bad shapes, or a valid point that is not finite (names its index).
    """
    xp = array_module(points)
    pts, mask, sticky = _check_inputs(xp, points, valid, previous)
    if params.hysteresis <= 0:
        sticky = None
    n = pts.shape[0]
    keys = _candidate_keys(xp, pts, xp.nonzero(mask)[0].astype(xp.int64), n, params, knn, pairs_within, sticky)
    slack = None
    if params.mode == "delaunay" and sticky is not None:
        slack = xp.where(_contains(xp, sticky, keys), 1.0 + params.hysteresis, 1.0).astype(xp.float32)
    return _capped_edges(xp, pts, keys, n, params, slack)


def _candidate_keys(xp, pts, ids, n: int, params: GraphParams, knn, pairs_within, sticky):
    """Sorted unique pair keys (over ``n`` nodes) proposed among the points ``pts[ids]`` of one frame."""
    if params.mode == "knn":
        return _knn_keys(xp, pts, ids, n, params, knn, sticky)
    if params.mode == "delaunay":
        return _delaunay_keys(xp, pts, ids, n)
    if params.mode == "mst":
        return _mst_keys(xp, pts, ids, n, params, sticky)
    return _radius_keys(xp, pts, ids, n, params, pairs_within, sticky)


def _capped_edges(xp, pts, keys, n: int, params: GraphParams, slack=None):
    """Edges and lengths of the pair ``keys`` (over ``n`` nodes of ``pts``), caps applied (see :func:`_apply_caps`)."""
    edges = _decode(xp, keys, n)
    return _apply_caps(xp, pts, edges, edge_lengths(pts, edges), params, slack)


def _check_path(track_path, visibility):
    """``(xp, path float32 [T, N, 2], valid bool [T, N])``: visible slots with finite positions."""
    xp = array_module(track_path)
    path = xp.asarray(track_path, dtype=xp.float32)
    vis = xp.asarray(visibility, dtype=bool)
    if path.ndim != 3 or path.shape[2] != 2:
        raise ValueError(f"track_path must have shape [T, N, 2], got {list(path.shape)}")
    if vis.shape != path.shape[:2]:
        raise ValueError(f"visibility shape {list(vis.shape)} must match track_path [T, N] = {list(path.shape[:2])}")
    finite = xp.isfinite(path).all(axis=2)
    lost = int((vis & ~finite).sum())
    if lost:
        LOGGER.debug("graph: %d visible track slot(s) hold NaN/inf positions; treated as invisible", lost)
    return xp, path, vis & finite


def build_edge_batch(track_path, visibility, params: GraphParams, knn=knn_cpu, pairs_within=pairs_within_cpu,
                     cuts=()):
    """Every frame's edges at once, as pairs of track ids (columns).

    The same edges as :func:`build_edge_sequence`, in one flat set: frame
    ``t`` links the visible points of ``track_path[t]`` (hysteresis against
    frame ``t - 1``'s edges, unless ``t`` is in ``cuts``: a shot's first
    frame holds on to no link of the shot before). Without hysteresis frames
    are independent and everything after the neighbour search runs once for
    the whole batch (nodes numbered ``t * N + column``).

    Returns:
        ``(frame, edges, lengths)``: int64 ``[E]``, int64 ``[E, 2]`` (columns
        ``i < j``) and float32 ``[E]``, sorted by ``(frame, i, j)``.
    """
    xp, path, valid = _check_path(track_path, visibility)
    frames, columns = valid.shape
    if params.hysteresis > 0 and frames > 0:
        edges, lengths, previous = [], [], None
        plugs = knn_searched_ahead(path, valid, params, knn) or [knn] * frames
        for t in range(frames):  # each frame needs the one before
            previous, length = build_edges(path[t], params, plugs[t], valid[t], None if t in cuts else previous,
                                           pairs_within)
            edges.append(previous)
            lengths.append(length)
        frame = xp.repeat(xp.arange(frames, dtype=xp.int64), [len(part) for part in edges])
        return frame, xp.concatenate(edges), xp.concatenate(lengths)
    nodes = frames * columns
    pts = xp.nan_to_num(path.reshape(nodes, 2))  # invalid slots are never read; NaN-free for the caps
    if params.mode == "knn" and hasattr(knn, "frames"):
        keys = _knn_frame_keys(xp, path, valid, params, knn.frames)
    else:
        ids = xp.nonzero(valid.reshape(nodes))[0].astype(xp.int64)
        bounds = to_numpy(xp.searchsorted(ids, xp.arange(frames + 1, dtype=xp.int64) * columns))
        keys = [_candidate_keys(xp, pts, ids[a:b], nodes, params, knn, pairs_within, None)
                for a, b in zip(bounds[:-1], bounds[1:])]
        keys = xp.concatenate(keys) if keys else xp.zeros(0, xp.int64)  # frame-major, so still sorted
    edges, lengths = _capped_edges(xp, pts, keys, nodes, params)
    return edges[:, 0] // columns, edges % columns, lengths


def _knn_frame_keys(xp, path, valid, params: GraphParams, knn_frames):
    """Sorted unique pair keys of every frame's kNN union (nodes ``t * N + column``), one plug call."""
    frames, columns = valid.shape
    if frames == 0 or columns < 2:
        return xp.zeros(0, xp.int64)
    idx, _ = knn_frames(path, params.k, valid)
    frame, row, slot = xp.nonzero((idx >= 0) & valid[:, :, None])
    base = frame.astype(xp.int64) * columns
    return _unique(xp, _pair_keys(xp, base + row, base + idx[frame, row, slot], frames * columns))


def build_edge_sequence(track_path, visibility, params: GraphParams, knn=knn_cpu,
                        pairs_within=pairs_within_cpu, cuts=()):
    """Per-frame edges over a track set, as pairs of track ids (columns).

    Frame ``t`` links the visible points of ``track_path[t]`` as
    :func:`build_edges` does, with frame ``t - 1``'s edges as ``previous`` so
    hysteresis keys on track ids (all frames in one :func:`build_edge_batch`).
    A visible slot with a NaN/inf position (a lost tracker emits NaN) is
    treated as invisible. Inputs are not modified.

    Args:
        track_path: float32 ``[T, N, 2]`` pixel positions (NumPy or CuPy).
        visibility: bool ``[T, N]``.
        params, knn, pairs_within: as in :func:`build_edges`.
        cuts: the frames that start a shot (no hysteresis against the frame before).

    Returns:
        list of ``T`` int64 ``[E_t, 2]`` edge arrays (lengths: :func:`edge_lengths`).
    """
    xp = array_module(track_path)
    frame, edges, _ = build_edge_batch(track_path, visibility, params, knn, pairs_within, cuts)
    frames = int(xp.asarray(track_path).shape[0])
    bounds = to_numpy(xp.searchsorted(frame, xp.arange(frames + 1, dtype=xp.int64)))
    return [edges[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def edge_churn(sequence) -> np.ndarray:
    """Edges added plus removed at each frame ``t >= 1`` versus frame ``t - 1`` (int64 ``[T - 1]``)."""
    frames = [to_numpy(edges).reshape(-1, 2).astype(np.int64) for edges in sequence]
    n = max((int(edges.max()) + 1 for edges in frames if edges.size), default=1)
    keys = [np.unique(_pair_keys(np, edges[:, 0], edges[:, 1], n)) for edges in frames]
    return np.array([np.setxor1d(a, b, assume_unique=True).size for a, b in zip(keys, keys[1:])],
                    dtype=np.int64)
