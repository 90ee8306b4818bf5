"""Text from a real font: FreeType rasterises each glyph once into a coverage atlas, and strings are laid
out as runs of atlas quads (the :class:`~.display_list.Glyphs` that both rasterisers sample).

One :class:`FontAtlas` serves one font at one pixel size. Glyphs are rendered
anti-aliased (8-bit coverage, the font's hinting) the first time a string
needs them and packed into shelves of one growing atlas; a glyph never
moves once packed, so every later :meth:`FontAtlas.atlas` snapshot also
serves the quads laid out before it. Layout follows FreeType's advances and
kerning, one line per ``\\n``; there is no shaping, so scripts that need it
(Arabic joining, Indic reordering) come out as isolated glyphs. A character
the font lacks is drawn as its ``.notdef`` box and logged once.

freetype-py is imported when the first font is opened.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.log import LOGGER
from .display_list import GlyphAtlas

DEFAULT_FONT = Path(__file__).resolve().parents[2] / "fonts" / "DejaVuSans.ttf"
"""The bundled font (DejaVu Sans; its licence is fonts/LICENSE.txt)."""

MAX_PIXEL_SIZE = 512
_ATLAS_WIDTH = 1024  # texels; wider only for a glyph that needs it
_RING = 1  # zero texels of a quad around its glyph: room for the bilinear fringe of a quad off the pixel grid
_CELL_BORDER = 2 * _RING  # zero texels around a packed glyph: its quad's ring, and a ring no quad covers
_RUNS_PER_FONT = 16_384  # laid-out strings kept per font and size
_FONTS = 32  # font atlases kept
_PRELOAD = "".join(map(chr, range(0x20, 0x7F)))  # printable ASCII, so most labels never grow the atlas

_lock = threading.Lock()
_atlases: OrderedDict = OrderedDict()
_missing_logged: set = set()


def _freetype():
    try:
        import freetype
    except ImportError as error:
        raise RuntimeError(f"text labels need the freetype-py package (pip install freetype-py): {error}") from None
    return freetype


def font_path(font) -> Path:
    """The font file ``font`` names (empty or None: the bundled DejaVu Sans), checked to exist."""
    if font is None or (isinstance(font, str) and not font.strip()):
        return DEFAULT_FONT
    if not isinstance(font, (str, os.PathLike)):
        raise TypeError(f"label font must be a file path, got {type(font).__name__}")
    path = Path(os.path.expanduser(os.fspath(font).strip()))
    if not path.is_file():
        raise ValueError(f"label font {os.fspath(font)!r} does not exist or is not a file; give the path of a "
                         "TrueType or OpenType font file (.ttf, .otf), or leave it empty for the bundled DejaVu Sans")
    return path.resolve()


def _open_face(path: Path):
    freetype = _freetype()
    try:
        face = freetype.Face(os.fspath(path))
    except (freetype.FT_Exception, OSError) as error:
        raise ValueError(f"label font {os.fspath(path)!r} is not a font FreeType can read ({error}); give a "
                         ".ttf or .otf file") from None
    if not face.is_scalable:
        raise ValueError(f"label font {os.fspath(path)!r} has no outlines (a bitmap-only font); give a "
                         "TrueType or OpenType font")
    return face


def check_font(font) -> None:
    """Raise ``ValueError`` unless ``font`` is empty (the bundled font) or a readable outline font file."""
    path = font_path(font)
    if path != DEFAULT_FONT:
        _open_face(path)


@dataclass(frozen=True)
class TextRun:
    """One string laid out with its block's top-left corner at (0, 0); every number is whole pixels.

    ``offset``, ``size`` and ``texel`` are float32 [G, 2] per glyph quad (the
    :class:`~.display_list.Glyphs` fields, ``offset`` relative to the block);
    ``extent`` is the block's (width, height): the longest line's advance, and
    the lines from the first ascender to the last descender.
    """

    offset: np.ndarray
    size: np.ndarray
    texel: np.ndarray
    extent: tuple

    @property
    def count(self) -> int:
        return len(self.offset)


class FontAtlas:
    """One font at one whole pixel size: its glyph atlas and its laid-out strings (thread-safe)."""

    def __init__(self, path: Path, pixel_size: int):
        freetype = _freetype()
        self.path = path
        self.pixel_size = pixel_size
        self._face = _open_face(path)
        self._face.set_pixel_sizes(0, pixel_size)
        metrics = self._face.size
        self.ascender = round(metrics.ascender / 64)
        self.descender = round(-metrics.descender / 64)
        self.line_height = max(round(metrics.height / 64), self.ascender + self.descender)
        self._load_flags = freetype.FT_LOAD_RENDER | freetype.FT_LOAD_TARGET_NORMAL | freetype.FT_LOAD_NO_BITMAP
        self._kerning = bool(self._face.has_kerning)
        self._lock = threading.Lock()
        self._glyphs = {}  # glyph index -> (left, top, width, height, atlas x, atlas y, advance 26.6) or None
        self._coverage = np.zeros((64, _ATLAS_WIDTH), np.uint8)
        self._shelf = [0, 0, 0]  # y, height, next x
        self._snapshot = None
        self._runs: OrderedDict = OrderedDict()
        self.layout(_PRELOAD)

    # -- glyphs ------------------------------------------------------------------
    def _glyph(self, index: int):
        """The packed glyph ``index`` (rendered and packed on first use)."""
        known = self._glyphs.get(index)
        if known is not None:
            return known
        self._face.load_glyph(index, self._load_flags)
        slot = self._face.glyph
        bitmap = slot.bitmap
        rows, width = bitmap.rows, bitmap.width
        x = y = 0
        if rows and width:
            pixels = np.array(bitmap.buffer, np.uint8).reshape(rows, abs(bitmap.pitch))[:, :width]
            if bitmap.pitch < 0:
                pixels = pixels[::-1]
            x, y = self._pack(width + 2 * _CELL_BORDER, rows + 2 * _CELL_BORDER)
            self._coverage[y + _CELL_BORDER:y + _CELL_BORDER + rows, x + _CELL_BORDER:x + _CELL_BORDER + width] = pixels
            self._snapshot = None
        glyph = (slot.bitmap_left, slot.bitmap_top, width if rows else 0, rows if width else 0, x, y,
                 slot.advance.x)
        self._glyphs[index] = glyph
        return glyph

    def _pack(self, width: int, height: int) -> tuple[int, int]:
        """Top-left texel of a free ``width`` x ``height`` cell (shelf packing; the atlas grows downwards)."""
        shelf_y, shelf_height, next_x = self._shelf
        if width > self._coverage.shape[1]:
            grown = np.zeros((self._coverage.shape[0], width), np.uint8)
            grown[:, :self._coverage.shape[1]] = self._coverage
            self._coverage = grown
        if next_x + width > self._coverage.shape[1]:
            shelf_y, shelf_height, next_x = shelf_y + shelf_height, 0, 0
        if shelf_y + height > self._coverage.shape[0]:
            grown = np.zeros((max(2 * self._coverage.shape[0], shelf_y + height), self._coverage.shape[1]), np.uint8)
            grown[:self._coverage.shape[0]] = self._coverage
            self._coverage = grown
        self._shelf = [shelf_y, max(shelf_height, height), next_x + width]
        return next_x, shelf_y

    def _index(self, char: str) -> int:
        index = self._face.get_char_index(ord(char))
        if index == 0:
            key = (self.path, char)
            with _lock:
                first = key not in _missing_logged
                _missing_logged.add(key)
            if first:
                LOGGER.warning("font %s has no glyph for %r (U+%04X); drawing its .notdef box instead",
                               self.path.name, char, ord(char))
        return index

    # -- strings -------------------------------------------------------------------
    def layout(self, text: str) -> TextRun:
        """``text`` laid out (cached per string): FreeType advances and kerning, a line per ``\\n``."""
        with self._lock:
            run = self._runs.get(text)
            if run is not None:
                self._runs.move_to_end(text)
                return run
            run = self._layout(text)
            self._runs[text] = run
            if len(self._runs) > _RUNS_PER_FONT:
                self._runs.popitem(last=False)
            return run

    def _layout(self, text: str) -> TextRun:
        quads, widest = [], 0
        lines = text.split("\n")
        for number, line in enumerate(lines):
            baseline = self.ascender + number * self.line_height
            pen, previous = 0, None  # 26.6 fixed point
            for char in line:
                index = self._index(char)
                if previous is not None and self._kerning:
                    pen += self._face.get_kerning(previous, index).x
                left, top, width, height, x, y, advance = self._glyph(index)
                if width:
                    quads.append((round(pen / 64) + left - _RING, baseline - top - _RING, width + 2 * _RING,
                                  height + 2 * _RING, x + _CELL_BORDER - _RING, y + _CELL_BORDER - _RING))
                pen += advance
                previous = index
            widest = max(widest, round(pen / 64))
        table = np.array(quads, np.float32).reshape(-1, 6)
        height = self.ascender + self.descender + (len(lines) - 1) * self.line_height
        return TextRun(table[:, 0:2], table[:, 2:4], table[:, 4:6], (widest, height))

    def atlas(self) -> GlyphAtlas:
        """The atlas holding every glyph laid out so far (a new snapshot only after new glyphs)."""
        with self._lock:
            if self._snapshot is None:
                used = self._shelf[0] + self._shelf[1]
                self._snapshot = GlyphAtlas(self._coverage[:max(used, 1)])
            return self._snapshot


def font_atlas(font, pixel_size: float) -> FontAtlas:
    """The shared :class:`FontAtlas` of ``font`` (a path; empty for the bundled font) at ``pixel_size``
    rounded to whole pixels (1..``MAX_PIXEL_SIZE``)."""
    path = font_path(font)
    size = int(np.clip(round(float(pixel_size)), 1, MAX_PIXEL_SIZE))
    key = (path, size)
    with _lock:
        atlas = _atlases.get(key)
        if atlas is not None:
            _atlases.move_to_end(key)
            return atlas
    atlas = FontAtlas(path, size)
    with _lock:
        atlas = _atlases.setdefault(key, atlas)
        while len(_atlases) > _FONTS:
            _atlases.popitem(last=False)
    return atlas
