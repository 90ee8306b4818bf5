"""The display list: one frame's primitives and their styles, in drawing order.

Geometry builders emit display lists; renderers (CPU and GPU) rasterise them
with the coverage model (docs/architecture.md). A display list is a tuple of layers,
each a batch of one primitive kind; layers and the primitives inside a layer
composite "over" in order. Lists are small (kilobytes) and immutable, so they
can be passed between nodes, merged and cached freely.

Colours are straight (not premultiplied) RGBA in 0..1; the alpha carries the
opacity. Coordinates are float pixels, origin at the image's top-left corner,
pixel centres at +0.5. Every number must be finite and within
±``COORD_LIMIT`` (1,000,000) pixels; anything else is a ``ValueError``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..core.arrays import require_bounded
from ..core.checks import broadcast_length


def _as_float32(name: str, values, shape_tail: tuple, count: int | None, per: str = "primitive") -> np.ndarray:
    array = np.array(values, dtype=np.float32, order="C")  # a copy: the caller's array stays writable
    if array.ndim != 1 + len(shape_tail) or array.shape[1:] != shape_tail:
        want = "[N" + "".join(f", {n}" for n in shape_tail) + "]"
        raise ValueError(f"{name} must have shape {want}, got {list(array.shape)}")
    if count is not None and array.shape[0] != count:
        raise ValueError(f"{name} has {array.shape[0]} rows, expected {count} (one per {per})")
    require_bounded(name, array)
    return array


def _check_colors(name: str, colors: np.ndarray) -> None:
    if colors.size and (colors.min() < 0.0 or colors.max() > 1.0):
        raise ValueError(f"{name} must be RGBA values in 0..1")


@dataclass(frozen=True)
class Polylines:
    """Open polylines, each drawn as a chain of capsules of one width.

    Attributes:
        vertices: float32 [V, 2] pixel coordinates of all polylines, concatenated.
        offsets: int64 [P + 1]; polyline ``p`` is ``vertices[offsets[p]:offsets[p+1]]``
            (at least two vertices each).
        width: float32 [P] line width in pixels (> 0).
        color_start: float32 [P, 4] straight RGBA at the first vertex.
        color_end: float32 [P, 4] straight RGBA at the last vertex; the colour is
            interpolated along the arc length (equal to ``color_start`` for solid lines).
        dash: float32 [P, 2] ``(on, off)`` lengths in pixels along the arc; ``off == 0``
            draws a solid line.
        dash_round: bool [P]; dashes get round caps (dots when ``on == 0``) instead
            of butt ends.
        vertex_width: float32 [V] (>= 0) multiplying ``width`` at each vertex, or None
            (all 1); between vertices it is interpolated linearly (a tapered line).
        vertex_alpha: float32 [V] (0..1) multiplying the alpha at each vertex, or None
            (all 1); interpolated like ``vertex_width`` (a line that fades).
    """

    vertices: np.ndarray
    offsets: np.ndarray
    width: np.ndarray
    color_start: np.ndarray
    color_end: np.ndarray
    dash: np.ndarray
    dash_round: np.ndarray
    vertex_width: np.ndarray | None = None
    vertex_alpha: np.ndarray | None = None

    def __post_init__(self):
        vertices = _as_float32("polyline vertices", self.vertices, (2,), None)
        offsets = np.array(self.offsets, dtype=np.int64, order="C")
        if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != len(vertices):
            raise ValueError("polyline offsets must start at 0 and end at the vertex count")
        if np.any(np.diff(offsets) < 2):
            raise ValueError("every polyline needs at least two vertices")
        count = offsets.size - 1
        width = _as_float32("line width", self.width, (), count)
        if np.any(width <= 0):
            raise ValueError("line width must be > 0 pixels")
        color_start = _as_float32("line color_start", self.color_start, (4,), count)
        color_end = _as_float32("line color_end", self.color_end, (4,), count)
        _check_colors("line color_start", color_start)
        _check_colors("line color_end", color_end)
        dash = _as_float32("line dash", self.dash, (2,), count)
        if np.any(dash < 0):
            raise ValueError("dash lengths must be >= 0 pixels")
        dash_round = np.array(self.dash_round, dtype=bool, order="C")
        if dash_round.shape != (count,):
            raise ValueError(f"dash_round must have shape [{count}], got {list(dash_round.shape)}")
        factors = {}
        for name, low, high in (("vertex_width", 0.0, np.inf), ("vertex_alpha", 0.0, 1.0)):
            given = getattr(self, name)
            if given is not None:
                factors[name] = _as_float32(f"polyline {name}", given, (), len(vertices), "vertex")
                if np.any(factors[name] < low) or np.any(factors[name] > high):
                    raise ValueError(f"polyline {name} must hold values in {low:g}..{high:g}")
        for name, value in (("vertices", vertices), ("offsets", offsets), ("width", width),
                            ("color_start", color_start), ("color_end", color_end),
                            ("dash", dash), ("dash_round", dash_round), *factors.items()):
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def count(self) -> int:
        """Number of polylines."""
        return self.offsets.size - 1

    @classmethod
    def empty(cls) -> "Polylines":
        """A batch with no polylines."""
        return cls(np.zeros((0, 2)), np.zeros(1, np.int64), np.zeros(0), np.zeros((0, 4)),
                   np.zeros((0, 4)), np.zeros((0, 2)), np.zeros(0, bool))

    def parts(self, bounds) -> list:
        """This batch cut into runs of polylines at ``bounds`` (ascending, 0 .. :attr:`count`): one batch per
        run (an empty one for a run of none), made of this one's checked values (not checked again)."""
        if len(bounds) == 2 and bounds[0] == 0 and bounds[1] == self.count:
            return [self]
        vertex_bounds = self.offsets[np.asarray(bounds)]
        parts = []
        for (a, b), (v0, v1) in zip(itertools.pairwise(bounds), itertools.pairwise(vertex_bounds)):
            offsets = self.offsets[a:b + 1] - v0
            offsets.setflags(write=False)
            by_vertex = {name: None if getattr(self, name) is None else getattr(self, name)[v0:v1]
                         for name in ("vertices", "vertex_width", "vertex_alpha")}
            by_line = {name: getattr(self, name)[a:b]
                       for name in ("width", "color_start", "color_end", "dash", "dash_round")}
            parts.append(_checked(Polylines, offsets=offsets, **by_vertex, **by_line) if b > a else Polylines.empty())
        return parts


@dataclass(frozen=True)
class Boxes:
    """Axis-aligned rounded boxes with a centred stroke and an optional fill.

    Attributes:
        center: float32 [Q, 2] box centres in pixels.
        half_size: float32 [Q, 2] half width and half height in pixels (>= 0).
        radius: float32 [Q] corner radius in pixels, 0..min(half_size).
        stroke_width: float32 [Q] stroke width in pixels (0 draws no stroke).
        stroke_color: float32 [Q, 4] straight RGBA of the stroke.
        fill_color: float32 [Q, 4] straight RGBA of the fill (alpha = fill opacity).
        bracket: float32 [Q] corner-bracket arm length in pixels; 0 strokes the
            whole outline, > 0 keeps only the corners (the fill is unaffected).
    """

    center: np.ndarray
    half_size: np.ndarray
    radius: np.ndarray
    stroke_width: np.ndarray
    stroke_color: np.ndarray
    fill_color: np.ndarray
    bracket: np.ndarray

    def __post_init__(self):
        center = _as_float32("box center", self.center, (2,), None)
        count = len(center)
        half_size = _as_float32("box half_size", self.half_size, (2,), count)
        if np.any(half_size < 0):
            raise ValueError("box sizes must be >= 0 pixels")
        radius = _as_float32("box radius", self.radius, (), count)
        if np.any(radius < 0) or np.any(radius > half_size.min(axis=1, initial=np.inf) + 1e-4):
            raise ValueError("box corner radius must lie in 0..min(width, height)/2")
        stroke_width = _as_float32("box stroke_width", self.stroke_width, (), count)
        if np.any(stroke_width < 0):
            raise ValueError("box stroke width must be >= 0 pixels")
        stroke_color = _as_float32("box stroke_color", self.stroke_color, (4,), count)
        fill_color = _as_float32("box fill_color", self.fill_color, (4,), count)
        _check_colors("box stroke_color", stroke_color)
        _check_colors("box fill_color", fill_color)
        bracket = _as_float32("box bracket", self.bracket, (), count)
        if np.any(bracket < 0):
            raise ValueError("box bracket length must be >= 0 pixels")
        for name, value in (("center", center), ("half_size", half_size), ("radius", radius),
                            ("stroke_width", stroke_width), ("stroke_color", stroke_color),
                            ("fill_color", fill_color), ("bracket", bracket)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def count(self) -> int:
        """Number of boxes."""
        return len(self.center)

    def parts(self, bounds) -> list:
        """This batch cut into runs of boxes at ``bounds`` (ascending, 0 .. :attr:`count`): one batch per run,
        made of this one's checked values (not checked again)."""
        if len(bounds) == 2 and bounds[0] == 0 and bounds[1] == self.count:
            return [self]
        return [_checked(Boxes, **{name: getattr(self, name)[a:b] for name in self.__dataclass_fields__})
                for a, b in itertools.pairwise(bounds)]


def _checked(kind, **fields):
    """A ``kind`` of fields that are parts of an instance's checked, read-only values (no second check)."""
    made = object.__new__(kind)
    for name, value in fields.items():
        object.__setattr__(made, name, value)
    return made


_ATLAS_IDS = itertools.count(1)


@dataclass(frozen=True, eq=False)
class GlyphAtlas:
    """Glyph coverage rasterised once (``draw/glyphs.py``), shared by the :class:`Glyphs` that sample it.

    Attributes:
        coverage: uint8 [Ha, Wa] anti-aliased coverage, 0..255 (read-only).
        key: a number no other atlas of this process has; renderers cache their copies by it.
    """

    coverage: np.ndarray = field(repr=False)
    key: int = field(init=False)

    def __post_init__(self):
        coverage = np.array(self.coverage, dtype=np.uint8, order="C")
        if coverage.ndim != 2:
            raise ValueError(f"glyph atlas coverage must have shape [H, W], got {list(coverage.shape)}")
        coverage.setflags(write=False)
        object.__setattr__(self, "coverage", coverage)
        object.__setattr__(self, "key", next(_ATLAS_IDS))

    @property
    def nbytes(self) -> int:
        return self.coverage.nbytes


@dataclass(frozen=True)
class Glyphs:
    """Text glyphs: axis-aligned quads that sample one :class:`GlyphAtlas`.

    A pixel centre ``(px, py)`` inside quad ``g`` (``x <= px < x + w``, ``y <= py < y + h``)
    gets the coverage of the atlas sampled bilinearly at texel coordinates
    ``(px - x + u - 0.5, py - y + v - 0.5)`` (texel ``(i, j)`` at ``(i, j)``; texels
    outside the atlas are 0), divided by 255. Outside its quad a glyph covers nothing.

    Attributes:
        origin: float32 [G, 2] top-left corner ``(x, y)`` of each quad in pixels.
        size: float32 [G, 2] quad width and height ``(w, h)`` in pixels (>= 0).
        texel: float32 [G, 2] atlas texel ``(u, v)`` under the quad's top-left corner;
            the quad's texels ``[u, u + w] x [v, v + h]`` lie inside the atlas.
        color: float32 [G, 4] straight RGBA; alpha = coverage x colour alpha.
        atlas: the :class:`GlyphAtlas` sampled.
    """

    origin: np.ndarray
    size: np.ndarray
    texel: np.ndarray
    color: np.ndarray
    atlas: GlyphAtlas

    def __post_init__(self):
        if not isinstance(self.atlas, GlyphAtlas):
            raise TypeError(f"glyph atlas must be a GlyphAtlas, got {type(self.atlas).__name__}")
        origin = _as_float32("glyph origin", self.origin, (2,), None)
        count = len(origin)
        size = _as_float32("glyph size", self.size, (2,), count)
        if np.any(size < 0):
            raise ValueError("glyph sizes must be >= 0 pixels")
        texel = _as_float32("glyph texel", self.texel, (2,), count)
        height, width = self.atlas.coverage.shape
        if count and (np.any(texel < 0) or np.any(texel + size > np.float32([width, height]))):
            raise ValueError(f"glyph texels must lie inside the {width}x{height} atlas")
        color = _as_float32("glyph color", self.color, (4,), count)
        _check_colors("glyph color", color)
        for name, value in (("origin", origin), ("size", size), ("texel", texel), ("color", color)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def count(self) -> int:
        """Number of glyph quads."""
        return len(self.origin)



@dataclass(frozen=True)
class DisplayList:
    """One frame's layers, composited "over" in order (first layer lowest).

    ``frame_size`` is (width, height) of the frames its positions belong to
    (from the tracks or the reference it was built with), or None: any frames.
    """

    layers: tuple = field(default_factory=tuple)
    frame_size: tuple | None = None

    def __post_init__(self):
        layers = tuple(self.layers)
        for layer in layers:
            if not isinstance(layer, (Polylines, Boxes, Glyphs)):
                raise TypeError(f"display list layers must be Polylines, Boxes or Glyphs, got {type(layer).__name__}")
        object.__setattr__(self, "layers", tuple(layer for layer in layers if layer.count))

    def __add__(self, other: "DisplayList") -> "DisplayList":
        """The two lists drawn one after the other (``other`` on top); :func:`merge_sequences` checks that
        their frame sizes agree."""
        return DisplayList(self.layers + other.layers, self.frame_size or other.frame_size)

    @property
    def primitive_count(self) -> int:
        """Total number of polylines, boxes and glyphs."""
        return sum(layer.count for layer in self.layers)

    @property
    def nbytes(self) -> int:
        """Bytes held by the list's arrays."""
        return sum(value.nbytes for layer in self.layers for value in vars(layer).values() if value is not None)


def merge_sequences(*sequences: list, names: tuple | None = None) -> list:
    """Merge per-frame display-list sequences, broadcasting length-1 sequences.

    Later sequences draw on top. Lengths must match or be 1, and so must the frame sizes they were built for;
    errors call the sequences by ``names`` (default "overlay 1", "overlay 2", ...).
    """
    named = {name: list(seq) for name, seq in zip(names or (f"overlay {n}" for n in itertools.count(1)), sequences)
             if seq is not None}
    if not named:
        return []
    frames = broadcast_length(**{name: len(seq) for name, seq in named.items()})
    sized = [(name, seq[0].frame_size) for name, seq in named.items() if seq and seq[0].frame_size]
    for name, size in sized[1:]:
        if size != sized[0][1]:
            raise ValueError(f"{sized[0][0]} was built for {'x'.join(map(str, sized[0][1]))} frames but {name} "
                             f"for {'x'.join(map(str, size))} frames; merge overlays made from tracks (or a "
                             "reference) of the same frames")
    merged = []
    for index in range(frames):
        combined = DisplayList()
        for seq in named.values():
            combined = combined + seq[index if len(seq) > 1 else 0]
        merged.append(combined)
    return merged
