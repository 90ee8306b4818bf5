"""Bright spots, found and matched to tracks frame by frame (:class:`TrackDetector`'s method ``bright``).

:meth:`Spots.find` labels a frame's regions over the sensitivity's level: a
lit area (a region over ``LIT_AREA_SHARE`` of the frame) gives way to the
lights in it, and spots whose glows touch are split at their cores. Each
spot has a weighted centroid, a mass and a brightest pixel. :meth:`Spots.follow`
matches spots to the tracks whose motion predicts them, live and lost ones
competing, and lets two tracks share a spot where two dots overlap into one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import cv2
import numpy as np
from scipy.spatial import cKDTree

CORE_MAX_SIDE = 1280
"""Bright spots' cores (which split spots whose glows touch) are found on a copy of the frame halved until its
longer side is at most this many pixels: a full-size search took ~4 ms more a 1080p frame, ~40 ms at 4K."""
LIT_AREA_SHARE = 0.01
"""Method bright: a bright region over this share of the frame is a lit area, not a spot (a night street's
pavement made regions of 3-5 % whose centroids, and boxes, fell on the road between the lamps). A lit area is
replaced by the lights in it (:func:`_lights_in`); one without lights stays one spot."""
LIGHT_STEP = 16
"""Grey levels: the steps in which the level rises through a lit area to find the parts of it that are no
larger than a spot."""
LIGHT_RISE = 48
"""Grey levels: such a part is a light when its brightest pixel passes the lit area's mean by this much: a lamp
(255) on a lit street (~190) does; the grain of a bright wall or sky does not (a rise counted from the level
where a part split off let grain of 6 levels' deviation make dozens of spots)."""
_MERGE_REACH = 2.0  # x reach: a spot this near a rival's prediction may hold both (or be pulled by the other's glow)
_SHARED_MASS = 0.65  # least share of its tracks' masses that a spot holding two or more must have (overlaps saturate)


class SpotMatches(NamedTuple):
    """What :meth:`Spots.follow` found for live then lost points."""

    positions: np.ndarray  # float32 [n + m, 2]
    matched: np.ndarray  # bool [n + m]
    merged: np.ndarray  # bool [n]: live points that share a spot, or whose spot may be pulled by a rival's glow
    mass: np.ndarray  # [n + m]: the mass of the spot each point took alone, 0 where it took none or shares one


def _cores(gray: np.ndarray, core_level: float) -> tuple[int, np.ndarray, int]:
    """Connected regions above ``core_level`` of a smoothed copy of ``gray``: lightly blurred, or for frames whose
    longer side passes ``CORE_MAX_SIDE`` halved (pixel areas averaged) until it does not. Returns (count,
    labels, factor): ``labels`` [H / factor, W / factor], region 0 below the level."""
    image, factor = gray, 1
    while max(image.shape) > CORE_MAX_SIDE:
        image = cv2.resize(image, (image.shape[1] // 2, image.shape[0] // 2), interpolation=cv2.INTER_AREA)
        factor *= 2
    if factor == 1:
        image = cv2.GaussianBlur(image, (3, 3), 0)
    count, labels = cv2.connectedComponents((image > core_level).astype(np.uint8), connectivity=8)
    return count, labels, factor


def _split_at_cores(gray: np.ndarray, rows: np.ndarray, cols: np.ndarray, label: np.ndarray, count: int,
                    core_level: float) -> tuple[np.ndarray, int]:
    """Spot labels of the bright pixels (``rows``, ``cols``, ``label``; ``count`` labels) with every spot
    that holds two or more cores (:func:`_cores`) split between them, each pixel going to its nearest
    core: two spots whose glows touch stay two. Returns (label, count); spots of one core keep their label,
    and so do lit areas kept whole (:func:`_spot_labels`: a flat bright area's grain would make it many)."""
    core_count, core_labels, factor = _cores(gray, core_level)
    if core_count <= 2:
        return label, count
    height, width = core_labels.shape
    core_rows, core_cols = np.minimum(rows // factor, height - 1), np.minimum(cols // factor, width - 1)
    core = core_labels[core_rows, core_cols]
    spot_of_core = np.zeros(core_count, np.int64)
    spot_of_core[core] = label
    spot_of_core[core[label != spot_of_core[core]]] = 0  # a core seen in two spots counts for none
    spot_of_core[0] = 0
    whole = np.bincount(label, minlength=count) > LIT_AREA_SHARE * gray.size
    spot_of_core[whole[spot_of_core]] = 0
    shared = np.flatnonzero(np.bincount(spot_of_core, minlength=count)[1:] > 1) + 1
    if not len(shared):
        return label, count
    # the pixels and the cores of each shared spot, grouped once (a night street has hundreds of such spots)
    is_shared = np.zeros(count, bool)
    is_shared[shared] = True
    chosen = np.flatnonzero(is_shared[label])
    chosen = chosen[np.argsort(label[chosen], kind="stable")]
    spot_pixels = np.split(chosen, np.searchsorted(label[chosen], shared[1:]))
    cores = np.flatnonzero(is_shared[spot_of_core])
    cores = cores[np.argsort(spot_of_core[cores], kind="stable")]
    spot_cores = np.split(cores, np.searchsorted(spot_of_core[cores], shared[1:]))
    is_core, part_of = np.zeros(core_count, bool), np.zeros(core_count, np.int64)
    label = label.copy()
    for spot, pixels, own in zip(shared, spot_pixels, spot_cores):
        top, left = core_rows[pixels].min(), core_cols[pixels].min()
        window = np.s_[top:core_rows[pixels].max() + 1, left:core_cols[pixels].max() + 1]
        is_core[own] = True
        core_mask = is_core[core_labels[window]]
        is_core[own] = False
        # each pixel's nearest core pixel (labels number the core pixels in row-major order), then its core
        _, nearest = cv2.distanceTransformWithLabels((~core_mask).astype(np.uint8), cv2.DIST_L2, 5,
                                                     labelType=cv2.DIST_LABEL_PIXEL)
        nearest = core_labels[window][core_mask][nearest[core_rows[pixels] - top, core_cols[pixels] - left] - 1]
        part_of[own] = np.arange(len(own))  # own cores ascending: the first keeps the spot's label
        label[pixels] = np.concatenate([[spot], np.arange(count, count + len(own) - 1)])[part_of[nearest]]
        count += len(own) - 1
    return label, count


def _lights_in(gray: np.ndarray, area: np.ndarray, level: int, most: float, bright: float) -> list:
    """The lights in a lit ``area`` (a bool mask over ``gray``, above ``level``): the parts no larger than
    ``most`` pixels over level + k x ``LIGHT_STEP`` whose brightest pixel passes ``bright``, found in the parts
    still too large, level by level. Returns (top, left, mask) per light, the mask over its bounding box."""
    level += LIGHT_STEP
    if level >= 255:
        return []
    count, labels, stats, _ = cv2.connectedComponentsWithStats((area & (gray > level)).astype(np.uint8),
                                                               connectivity=8)
    rising = np.zeros(count, bool)
    rising[labels[gray > bright]] = True
    size = stats[:, cv2.CC_STAT_AREA]
    wanted = (size > most) | rising
    wanted[0] = False  # the background
    lights = []
    for index in np.flatnonzero(wanted):
        left, top, width, height = stats[index, :4]
        window = np.s_[top:top + height, left:left + width]
        inside = labels[window] == index
        if size[index] <= most:
            lights.append((top, left, inside))
        else:
            lights += [(top + y, left + x, mask)
                       for y, x, mask in _lights_in(gray[window], inside, level, most, bright)]
    return lights


def _spot_labels(gray: np.ndarray, level: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(count, labels, mask) of the bright regions of ``gray`` over ``level``, each lit area (a region over
    ``LIT_AREA_SHARE`` of the frame) replaced by the lights in it when it holds any; ``mask`` (uint8) marks the
    labelled pixels (the bright ones, unless a lit area gave way to its lights)."""
    bright = (gray > level).astype(np.uint8)
    most = LIT_AREA_SHARE * gray.size
    if cv2.countNonZero(bright) <= most:  # no room for a lit area: labels without statistics are faster
        return (*cv2.connectedComponents(bright, connectivity=8), bright)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(bright, connectivity=8)
    for region in np.flatnonzero(stats[1:, cv2.CC_STAT_AREA] > most) + 1:
        left, top, width, height = stats[region, :4]
        window = np.s_[top:top + height, left:left + width]
        area = labels[window] == region
        lights = _lights_in(gray[window], area, level, most,
                            cv2.mean(gray[window], area.astype(np.uint8))[0] + LIGHT_RISE)
        if lights:  # the first light takes the area's label, the others new ones
            labels[window][area] = 0
            for number, (y, x, mask) in zip([region, *range(count, count + len(lights) - 1)], lights):
                labels[window][y:y + mask.shape[0], x:x + mask.shape[1]][mask] = number
            count += len(lights) - 1
            bright = None
    return count, labels, (labels > 0).astype(np.uint8) if bright is None else bright


@dataclass(frozen=True)
class Spots:
    """Bright spots of one frame: each spot's weighted centroid, mass and brightest pixel."""

    centroids: np.ndarray  # float32 [count, 2], row 0 (background) unused
    mass: np.ndarray
    peak: np.ndarray  # uint8

    @classmethod
    def find(cls, gray: np.ndarray, sensitivity: float) -> Spots:
        level = round(255.0 * (0.9 - 0.6 * sensitivity))  # 230 (strict) .. 77 (sensitive)
        count, labels, bright = _spot_labels(gray, level)
        where = cv2.findNonZero(bright)  # far quicker than NumPy on a sparse frame
        cols, rows = (np.zeros(0, np.int64),) * 2 if where is None else where.reshape(-1, 2).T
        label, count = _split_at_cores(gray, rows, cols, labels[rows, cols], count, core_level=(level + 255) / 2)
        values = gray[rows, cols]
        weight = values.astype(np.float64)
        mass = np.bincount(label, weight, count)
        peak = np.zeros(count, np.uint8)
        np.maximum.at(peak, label, values)
        with np.errstate(invalid="ignore", divide="ignore"):
            centroids = np.stack([np.bincount(label, weight * cols, count) / mass,
                                  np.bincount(label, weight * rows, count) / mass], axis=1)
        return cls(np.nan_to_num(centroids).astype(np.float32), mass, peak)

    def candidates(self) -> np.ndarray:
        """Spot centroids, the brightest first (by their brightest pixel, in steps of ``LIGHT_STEP`` levels:
        the lights before lit ground), and within a step the heaviest first (a large lamp before a speck)."""
        order = 1 + np.lexsort((-self.mass[1:], -(self.peak[1:] // LIGHT_STEP)))
        return self.centroids[order]

    def follow(self, predicted: np.ndarray, last: np.ndarray, reach: np.ndarray, mass: np.ndarray, lost: np.ndarray,
               lost_reach: np.ndarray) -> SpotMatches:
        """Spot centroids matched, one track per spot and nearest pairs first, to the ``predicted`` points of
        live tracks [n, 2] and of ``lost`` ones [m, 2], each within its ``reach`` / ``lost_reach`` pixels: the
        two kinds compete, so where two crossing dots part again each spot goes to the track whose motion
        predicts it. A live point that finds none may then take a spot still free within reach of its ``last``
        position: a centroid that jumped for a frame (its spot touched another) throws the prediction off by
        as much again. Live points still without a spot may then share one (:meth:`_share`; ``mass``: each
        live track's spot mass when last seen alone, 0 unknown). ``merged`` marks matched live points that
        share a spot or whose spot is within ``_MERGE_REACH`` x reach of a rival (a point left unmatched):
        spots pulled together by their glows, whose centroids say where the dots are but not how they move."""
        guesses = np.concatenate([predicted, lost]).astype(np.float32)
        reaches = np.concatenate([reach, lost_reach])
        live = len(predicted)
        spot_of = np.full(len(guesses), -1)  # -1: no spot
        looked_from = guesses.copy()
        centroids = self.centroids[1:]
        spots = cKDTree(centroids) if len(centroids) else None
        if len(guesses) and spots is not None:
            taken = np.zeros(len(centroids), bool)
            for points, open_points in ((guesses, np.arange(len(guesses))), (last, np.arange(live))):
                open_points = open_points[spot_of[open_points] < 0]
                if len(open_points) == 0:
                    break
                pairs = cKDTree(points[open_points]).sparse_distance_matrix(spots, float(reaches.max()),
                                                                            output_type="ndarray")
                pairs = pairs[pairs["v"] <= reaches[open_points[pairs["i"]]]]
                for point, spot, _ in pairs[np.argsort(pairs["v"], kind="stable")]:
                    point = open_points[point]
                    if spot_of[point] < 0 and not taken[spot]:
                        spot_of[point], taken[spot] = spot, True
                        looked_from[point] = points[point]
        matched = spot_of >= 0
        positions = guesses.copy()
        positions[matched] = centroids[spot_of[matched]]
        alone_mass = np.where(matched, self.mass[1 + spot_of], 0.0)
        shared = self._share(spots, spot_of[:live], looked_from[:live], reach, mass, positions)
        alone_mass[:live][shared] = 0.0
        merged = shared.copy()
        rivals = guesses[spot_of < 0]
        if len(rivals):
            live_matched = spot_of[:live] >= 0
            distance, _ = cKDTree(rivals).query(positions[:live][live_matched], k=1)
            merged[live_matched] |= distance <= _MERGE_REACH * reach[live_matched]
        return SpotMatches(positions, spot_of >= 0, merged, alone_mass)

    def _share(self, spots: cKDTree | None, spot_of: np.ndarray, looked_from: np.ndarray, reach: np.ndarray,
               mass: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Live points without a spot that share one (nearest first): two dots seen as one spot, which one of
        them took or neither reached. A point joins a spot within ``_MERGE_REACH`` x its reach, with the
        points that took it or, if none did, with another such point, when the spot's mass holds at least
        ``_SHARED_MASS`` of the group's (``mass``, 0 unknown) and the group's mass-weighted mean of where
        they looked from (``looked_from``) lies nearer the centroid than before and within reach of it. A
        group keeps its members' layout, shifted so that their weighted mean lands on the centroid.
        ``spots`` is the centroids' tree (None: no spot). ``spot_of`` and ``positions`` are updated in place;
        returns bool [n]: points that share a spot."""
        shared = np.zeros(len(spot_of), bool)
        open_points = np.flatnonzero(spot_of < 0)
        if len(open_points) == 0 or spots is None:
            return shared
        pairs = cKDTree(looked_from[open_points]).sparse_distance_matrix(
            spots, float(_MERGE_REACH * reach.max()), output_type="ndarray")
        pairs = pairs[pairs["v"] <= _MERGE_REACH * reach[open_points[pairs["i"]]]]
        pairs = pairs[np.argsort(pairs["v"], kind="stable")]
        for point, spot, _ in pairs:
            point = open_points[point]
            if spot_of[point] >= 0:
                continue
            members = np.flatnonzero(spot_of == spot)
            if len(members) == 0:  # a spot neither reached: shared with the next nearest open point
                others = open_points[pairs["i"][(pairs["j"] == spot)]]
                others = others[(spot_of[others] < 0) & (others != point)]
                if len(others) == 0:
                    continue
                members = others[:1]
            group = np.append(members, point)
            centroid = self.centroids[1 + spot]
            weight = _known_or_typical(mass[group])
            mean = np.average(looked_from[group], axis=0, weights=weight)
            miss = np.hypot(*(centroid - mean))
            before = np.hypot(*(centroid - np.average(looked_from[members], axis=0, weights=weight[:-1])))
            if miss > min(reach[group].min(), before) or self.mass[1 + spot] < _SHARED_MASS * weight.sum():
                continue
            spot_of[group] = spot
            positions[group] = looked_from[group] + (centroid - mean)
            shared[group] = True
        return shared


def _known_or_typical(mass: np.ndarray) -> np.ndarray:
    """``mass`` with its unknown (0) entries set to the median of the known ones (all 1 when none is known)."""
    known = mass > 0
    return np.where(known, mass, np.median(mass[known]) if known.any() else 1.0)
