"""Print the mean edge churn per frame of a jittered point cloud for a few hysteresis margins, per graph mode.

100 fixed points (uniform in 1920x1080, seed 0), 60 frames, each frame adds
gaussian jitter (sigma 3 px). Churn = edges added + removed versus the
previous frame. Run: ``python examples/graph_churn.py``.
"""

import numpy as np
from trackoverlay.utils.graph.neighbours import GraphParams, build_edge_sequence, edge_churn


def jittered_tracks(points=100, frames=60, sigma=3.0, seed=0):
    """``(track_path [T, N, 2], visibility [T, N])`` of fixed points plus per-frame jitter."""
    rng = np.random.default_rng(seed)
    base = rng.uniform((0, 0), (1920, 1080), size=(points, 2))
    path = base[None] + rng.normal(0.0, sigma, size=(frames, points, 2))
    return path.astype(np.float32), np.ones((frames, points), dtype=bool)


def main():
    path, visibility = jittered_tracks()
    print("mode      k/radius/cap  hysteresis  mean churn/frame  mean edges")
    for mode, extra in (("knn", {"k": 5}), ("radius", {"radius": 150.0}), ("delaunay", {"max_length": 150.0}),
                        ("mst", {})):
        for margin in (0.0, 0.1, 0.2, 0.3):
            params = GraphParams(mode=mode, hysteresis=margin, **extra)
            sequence = build_edge_sequence(path, visibility, params)
            size = next(iter(extra.values()), "-")
            edges = np.mean([len(e) for e in sequence])
            print(f"{mode:<9} {size:>12}  {margin:>10.1f}  {edge_churn(sequence).mean():>16.2f}  {edges:>10.1f}")


if __name__ == "__main__":
    main()
