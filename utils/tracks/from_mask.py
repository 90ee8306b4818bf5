"""Tracks from a MASK batch: one track per connected region, matched frame to frame."""

from __future__ import annotations

import cv2
import numpy as np
from scipy.optimize import linear_sum_assignment

from ..core.checks import Range
from ..core.log import LOGGER
from .contract import Tracks, fill_hidden, host_array

# Accepted ranges of the numeric parameters of :func:`tracks_from_mask`; the node widgets read these too.
MASK_RANGES = {
    "threshold": Range(0.0, 1.0),
    "min_area": Range(1),
    "max_distance": Range(0.0, low_open=True),
}


def _mask_batch(masks, threshold: float) -> np.ndarray:
    array = host_array(masks, "masks")
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3:
        raise ValueError(f"masks must have shape [B, H, W] or [H, W], got {list(np.shape(masks))}")
    if array.dtype == np.uint8:
        array = array / 255.0
    elif not (array.dtype == bool or np.issubdtype(array.dtype, np.integer)
              or np.issubdtype(array.dtype, np.floating)):
        raise TypeError(f"masks must hold bools or numbers, got dtype {array.dtype}")
    return array > threshold


def tracks_from_mask(masks, threshold: float = 0.5, min_area: int = 4,
                     max_distance: float = 50.0, max_tracks: int = 256) -> Tracks:
    """Tracks from the connected components of a MASK batch [B, H, W] (or [H, W]).

    Each component of at least ``min_area`` pixels is a point at its centroid with
    its bounding-box size. Components are matched to the previous frame's visible
    tracks by optimal assignment on centroid distance (pairs farther than
    ``max_distance`` pixels never match); unmatched components start new columns,
    in raster order, until ``max_tracks`` columns exist (later ones are dropped).
    Float masks compare with ``threshold``; uint8 masks are read as 0..255.
    Invisible slots hold the track's nearest known position and size (:func:`fill_hidden`).
    """
    limits = MASK_RANGES
    if not limits["threshold"].low <= threshold <= limits["threshold"].high:
        raise ValueError(f"threshold must lie in {limits['threshold'].low:g}..{limits['threshold'].high:g} "
                         f"(uint8 masks are read as 0..1), got {threshold}")
    if min_area < limits["min_area"].low:
        raise ValueError(f"min_area must be >= {limits['min_area'].low} pixel, got {min_area}")
    if not max_distance > limits["max_distance"].low:
        raise ValueError(f"max_distance must be > {limits['max_distance'].low:g} pixels, got {max_distance}")
    if max_tracks < 1:
        raise ValueError(f"max_tracks must be >= 1, got {max_tracks}")
    binary = _mask_batch(masks, threshold)
    frames = binary.shape[0]
    path = np.full((frames, max_tracks, 2), np.nan, np.float32)
    size = np.zeros((frames, max_tracks, 2), np.float32)
    visible = np.zeros((frames, max_tracks), bool)
    used = 0
    dropped = 0
    for t in range(frames):
        _, _, stats, centroids = cv2.connectedComponentsWithStats(binary[t].astype(np.uint8), connectivity=8)
        keep = np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] >= min_area) + 1
        points = centroids[keep].astype(np.float32) + 0.5
        boxes = stats[keep][:, [cv2.CC_STAT_WIDTH, cv2.CC_STAT_HEIGHT]].astype(np.float32)
        columns = np.full(len(keep), -1)
        live = np.flatnonzero(visible[t - 1, :used]) if t else np.zeros(0, int)
        if len(live) and len(points):
            distance = np.linalg.norm(points[:, None, :] - path[t - 1, live][None, :, :], axis=-1)
            rows, cols = linear_sum_assignment(np.where(distance <= max_distance, distance, 1e9))
            ok = distance[rows, cols] <= max_distance
            columns[rows[ok]] = live[cols[ok]]
        for index in np.flatnonzero(columns < 0):
            if used == max_tracks:
                dropped += 1
                continue
            columns[index] = used
            used += 1
        placed = columns >= 0
        path[t, columns[placed]] = points[placed]
        size[t, columns[placed]] = boxes[placed]
        visible[t, columns[placed]] = True
    if dropped:
        LOGGER.warning("tracks_from_mask: max_tracks=%d reached; %d new component(s) got no track",
                       max_tracks, dropped)
    visible = visible[:, :used]
    return Tracks(fill_hidden(path[:, :used], visible), visible, fill_hidden(size[:, :used], visible),
                  frame_size=binary.shape[:0:-1], name="tracks from mask")
