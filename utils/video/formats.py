"""Output formats, chosen by the output's extension (a trailing ``/`` is a PNG sequence folder).

==========  ==========================  =================================  ======================
output      composited frames           overlay alone (``layer_only``)     audio
==========  ==========================  =================================  ======================
``.mp4``    H.264 yuv420p (HEVC: ask)   refused: no alpha                  copied, else AAC
``.mov``    H.264 yuv420p (HEVC: ask)   ProRes 4444 + 16-bit alpha         copied, else AAC
``.webm``   VP9 yuv420p                 VP9 yuva420p, lossless             copied, else Opus
``.gif``    GIF, a palette per frame    refused: 1-bit transparency only   none
``DIR/``    PNG RGB, frame_000000.png   PNG RGBA                           none
==========  ==========================  =================================  ======================

Layer alpha is **straight** (not premultiplied) in every format: colour
channels hold the overlay's own colour, alpha its coverage, as PNG defines it
and as After Effects, Resolve and Nuke read ProRes 4444 / VP9 alpha by default
("straight" / "unpremultiplied"). Where alpha is 0 the colour is black.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .paths import is_folder_spelling

CODECS = ("h264", "hevc")
PNG_SEQUENCE = "png"


@dataclass(frozen=True)
class OutputFormat:
    """How one kind of output is written.

    ``container`` is the FFmpeg muxer (None for a PNG folder), ``codec`` the
    encoder, ``pix_fmt`` what it is fed, ``even`` whether sizes must be even
    (then odd frames are padded by one edge row/column), ``audio_copy`` the
    audio codecs the container takes as they are and ``audio_encoder`` what
    other audio is re-encoded to (None: the format has no audio).
    """

    name: str
    container: str | None
    codec: str
    pix_fmt: str
    alpha: bool
    even: bool = False
    options: tuple = ()
    audio_copy: frozenset = frozenset()
    audio_encoder: str | None = None
    codec_tag: str | None = None


# copied as they are (FFmpeg 8.1 muxes each): MOV takes PCM but not Opus or FLAC, MP4 the reverse
_MP4_AUDIO = frozenset({"aac", "mp3", "alac", "ac3", "eac3", "opus", "flac"})
_MOV_AUDIO = frozenset({"aac", "mp3", "alac", "ac3", "eac3", "pcm_s16le", "pcm_s16be", "pcm_s24le", "pcm_s24be",
                        "pcm_f32le"})
_WEBM_AUDIO = frozenset({"opus", "vorbis"})

_H264 = dict(codec="libx264", pix_fmt="yuv420p", alpha=False, even=True)
_HEVC = dict(codec="libx265", pix_fmt="yuv420p", alpha=False, even=True, codec_tag="hvc1",
             options=(("x265-params", "log-level=error"),))
_VP9 = dict(codec="libvpx-vp9", pix_fmt="yuv420p", alpha=False, options=(("row-mt", "1"), ("b", "0")))

COMPOSITED = {
    (".mp4", "h264"): OutputFormat("H.264 MP4", "mp4", audio_copy=_MP4_AUDIO, audio_encoder="aac", **_H264),
    (".mp4", "hevc"): OutputFormat("HEVC MP4", "mp4", audio_copy=_MP4_AUDIO, audio_encoder="aac", **_HEVC),
    (".mov", "h264"): OutputFormat("H.264 MOV", "mov", audio_copy=_MOV_AUDIO, audio_encoder="aac", **_H264),
    (".mov", "hevc"): OutputFormat("HEVC MOV", "mov", audio_copy=_MOV_AUDIO, audio_encoder="aac", **_HEVC),
    (".webm", None): OutputFormat("VP9 WebM", "webm", audio_copy=_WEBM_AUDIO, audio_encoder="libopus", **_VP9),
    (".gif", None): OutputFormat("GIF", "gif", "gif", "pal8", alpha=False),
    ("/", None): OutputFormat("PNG sequence", None, "png", "rgb24", alpha=False),
}
LAYER = {
    (".mov", None): OutputFormat("ProRes 4444 MOV with alpha", "mov", "prores_ks", "yuva444p10le", alpha=True,
                                 options=(("profile", "4"), ("alpha_bits", "16"), ("vendor", "apl0")),
                                 audio_copy=_MOV_AUDIO, audio_encoder="aac"),
    (".webm", None): OutputFormat("VP9 WebM with alpha", "webm", "libvpx-vp9", "yuva420p", alpha=True,
                                  options=(("lossless", "1"), ("row-mt", "1")), audio_copy=_WEBM_AUDIO,
                                  audio_encoder="libopus"),
    ("/", None): OutputFormat("PNG sequence with alpha", None, "png", "rgba", alpha=True),
}

_COMPOSITED_CHOICES = ".mp4 or .mov (H.264, or HEVC with codec hevc), .webm (VP9), .gif, or a folder ending in / " \
                      "(PNG sequence)"
_LAYER_CHOICES = ".mov (ProRes 4444 with alpha), .webm (VP9 with alpha) or a folder ending in / (PNG sequence " \
                 "with alpha)"


def choose_format(path, layer_only: bool = False, codec: str = "h264") -> OutputFormat:
    """The format for output ``path`` (by extension, case-insensitive), or a ValueError listing the choices."""
    path = os.fspath(path)
    if codec not in CODECS:
        raise ValueError(f"codec {codec!r} is not one of {', '.join(CODECS)}")
    extension = "/" if is_folder_spelling(path) else os.path.splitext(path)[1].lower()
    table, choices = (LAYER, _LAYER_CHOICES) if layer_only else (COMPOSITED, _COMPOSITED_CHOICES)
    found = table.get((extension, codec)) or table.get((extension, None))
    if found is None:
        what = "the overlay alone (layer only)" if layer_only else "video"
        named = f"extension {extension!r}" if extension else "no extension"
        if layer_only and (extension, "h264") in COMPOSITED or extension == ".gif":
            named = f"{named} (it cannot hold an alpha channel)"
        raise ValueError(f"output {path} has {named}; write {what} as {choices}")
    if codec != "h264" and found.codec not in ("libx264", "libx265"):
        raise ValueError(f"codec {codec} is for .mp4 and .mov outputs; {path} is {found.name}")
    return found
