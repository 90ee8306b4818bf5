"""Text labels beside tracked points: label strings -> placed glyph runs (and plates) -> display lists.

Every label is formatted in Python, but each distinct string is laid out
once (:meth:`~.glyphs.FontAtlas.layout` caches it) and the quads of all
labels of all frames are placed with array operations. Labels snap to whole
pixels, so glyphs sample their atlas texel for texel and stay crisp.
"""

from __future__ import annotations

import string

import numpy as np

from .colors import palette_colors, parse_color
from .display_list import Boxes, DisplayList, Glyphs
from .glyphs import font_atlas
from .overlays import _frame_slices, _visible
from .styles import LabelStyle

# Per placement, for x then y: (box half-size factor, margin factor, label-extent factor) of the label's
# top-left corner relative to the point.
_PLACEMENT = {
    "top_left": ((-1, 0, 0), (-1, -1, -1)),
    "top_right": ((1, 0, -1), (-1, -1, -1)),
    "bottom_left": ((-1, 0, 0), (1, 1, 0)),
    "bottom_right": ((1, 0, -1), (1, 1, 0)),
    "above": ((0, 0, -0.5), (-1, -1, -1)),
    "below": ((0, 0, -0.5), (1, 1, 0)),
    "left": ((-1, -1, -1), (0, 0, -0.5)),
    "right": ((1, 1, 0), (0, 0, -0.5)),
    "center": ((0, 0, -0.5), (0, 0, -0.5)),
}


def label_strings(template: str, columns: np.ndarray, frames: np.ndarray, points: np.ndarray,
                  sizes: np.ndarray, texts=None) -> list:
    """Each label's string: ``template`` (checked by :func:`~.styles.check_label_format`) filled with its
    track id, point, box size, frame and track text. Strings that depend on the track alone are made once
    per track."""
    def text_of(column):
        return "" if texts is None or texts[column] is None else str(texts[column])

    if all(name in (None, "id", "text") for _, name, _, _ in string.Formatter().parse(template)):
        per_track = {column: template.format(id=column, text=text_of(column), x=0.0, y=0.0, w=0.0, h=0.0, frame=0)
                     for column in np.unique(columns).tolist()}
        return [per_track[column] for column in columns.tolist()]
    return [template.format(id=column, text=text_of(column), x=x, y=y, w=w, h=h, frame=frame)
            for column, frame, (x, y), (w, h) in zip(columns.tolist(), frames.tolist(), points.tolist(),
                                                      sizes.tolist())]


def _placed(style: LabelStyle, points, half_box, extent, bounds):
    """Whole-pixel top-left corners [L, 2] of label blocks of ``extent`` [L, 2] (text + padding),
    kept inside ``bounds`` (width, height) when given."""
    factors = np.array(_PLACEMENT[style.placement], np.float32)  # [axis, (box, margin, extent)]
    corner = (points + factors[:, 0] * half_box + factors[:, 1] * style.margin + factors[:, 2] * extent
              + np.float32([style.offset_x, style.offset_y]))
    corner = np.floor(corner + 0.5)
    if bounds is not None:
        room = np.maximum(np.floor(np.float32(bounds) - extent), 0)
        corner = np.clip(corner, 0, room)
    return corner.astype(np.float32)


def label_overlay(path, visibility, style: LabelStyle, texts=None, sizes=None, opacity=None,
                  bounds: tuple | None = None) -> list:
    """Per-frame display lists of a text label beside every visible track: its plate, then its glyphs.

    ``path`` float32 [T, N, 2] and ``visibility`` bool [T, N] as for
    :func:`~.overlays.box_overlay`; ``texts`` one string (or None) per track
    column, the tracks' own text; ``sizes`` float32 [T, N, 2] box sizes, used
    when ``style.box_size_mode == 'track'``; ``opacity`` float32 [T, N] (the
    tracks' fades) scales text and plate alpha; ``bounds`` (width, height) of
    the frame keeps every label inside it. Labels whose string is empty are
    not drawn.
    """
    if style.text == "track_text" and texts is None:
        raise ValueError("label text 'track_text' needs text per track, and these tracks carry none: add a "
                         "'text' list to the track file (one string per track), or pick another label text")
    if texts is not None and len(texts) != np.shape(visibility)[1]:
        raise ValueError(f"label texts has {len(texts)} entries but the tracks have {np.shape(visibility)[1]}; "
                         "give one text per track")
    if bounds is not None and (len(bounds) != 2 or min(bounds) < 1):
        raise ValueError(f"label bounds must be the frame's (width, height) in pixels, got {bounds!r}")
    visible = _visible(path, visibility)
    frame, column = np.nonzero(visible)
    points = np.asarray(path, np.float32)[frame, column]
    box = np.full((len(column), 2), style.box_size, np.float32)
    if style.box_size_mode == "track" and sizes is not None:
        given = np.asarray(sizes, np.float32)[frame, column]
        box = np.where(np.isfinite(given) & (given >= 0), given, box)
    strings = label_strings(style.template, column, frame, points, box, texts)
    keep = np.array([len(text) > 0 for text in strings], bool).reshape(-1)
    frame, column, points, box = frame[keep], column[keep], points[keep], box[keep]
    strings = [text for text, kept in zip(strings, keep) if kept]
    fade = None if opacity is None else np.asarray(opacity, np.float32)[frame, column]

    fonts = font_atlas(style.font, style.size)
    unique = {}
    which = np.array([unique.setdefault(text, len(unique)) for text in strings], np.int64)
    runs = [fonts.layout(text) for text in unique]
    atlas = fonts.atlas()  # after every layout: it holds all their glyphs

    padding = float(np.floor(style.plate_padding + 0.5))
    extent = np.array([run.extent for run in runs], np.float32).reshape(-1, 2)[which] + 2 * padding
    corner = _placed(style, points, box * 0.5, extent, bounds)
    text_color, plate_fill, plate_stroke = _colors(style, column, fade)

    counts = np.array([run.count for run in runs], np.int64)
    starts = np.cumsum(counts) - counts
    table = {name: np.concatenate([getattr(run, name) for run in runs]).reshape(-1, 2) if runs
             else np.zeros((0, 2), np.float32) for name in ("offset", "size", "texel")}
    per_label = counts[which]
    owner = np.repeat(np.arange(len(which)), per_label)  # the label of each glyph quad
    row = (starts[which] - (np.cumsum(per_label) - per_label))[owner] + np.arange(len(owner))  # its run's row
    glyph_origin = corner[owner] + padding + table["offset"][row]
    plates = _plates(style, corner, extent, plate_fill, plate_stroke)

    frames = np.shape(visibility)[0]
    label_bounds = _frame_slices(frame, frames)
    glyph_bounds = _frame_slices(frame[owner], frames)
    overlays = []
    for t in range(frames):
        (a, b), (g, h) = label_bounds[t:t + 2], glyph_bounds[t:t + 2]
        layers = () if plates is None else (Boxes(*(values[a:b] for values in plates)),)
        layers += (Glyphs(glyph_origin[g:h], table["size"][row[g:h]], table["texel"][row[g:h]],
                          text_color[owner[g:h]], atlas),)
        overlays.append(DisplayList(layers))
    return overlays


def _colors(style: LabelStyle, column, fade):
    """Straight RGBA per label of the text, the plate's fill and the plate's outline."""
    count = len(column)
    text = palette_colors(column) if style.color_mode == "track" else np.tile(parse_color(style.color), (count, 1))
    fill = np.tile(parse_color(style.plate_color), (count, 1))
    stroke = np.tile(parse_color(style.plate_stroke_color), (count, 1))
    text[:, 3] *= style.opacity
    fill[:, 3] *= style.plate_opacity
    for colors in (text, fill, stroke) if fade is not None else ():
        colors[:, 3] *= fade
    return text, fill, stroke


def _plates(style: LabelStyle, corner, extent, fill, stroke):
    """The plates' :class:`Boxes` fields (None when the plate is invisible)."""
    if style.plate_opacity <= 0 and style.plate_stroke <= 0:
        return None
    half = extent * 0.5
    count = len(corner)
    return (corner + half, half, half.min(axis=1) * style.plate_roundness, np.full(count, style.plate_stroke),
            stroke, fill, np.zeros(count))
