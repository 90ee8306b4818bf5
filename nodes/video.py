"""VIDEO -> VIDEO: the overlay streamed frame by frame from a video file into a new one.

Memory does not depend on the clip's length: frames are decoded, drawn and
encoded one at a time (``utils.video.stream.render_video``) into ComfyUI's temp
folder, and the node returns that file as a core VIDEO.
"""

from __future__ import annotations

import inspect
import os
import shutil
import tempfile
from contextlib import closing, contextmanager

from comfy_api.latest import InputImpl, io, ui

from ..utils.core.checks import Range
from ..utils.core.log import LOGGER
from ..utils.draw.styles import BoxStyle, LineStyle
from ..utils.draw.units import DEFAULT_LOOK
from ..utils.graph.neighbours import GraphParams
from ..utils.raster.backend import make_renderer
from ..utils.tracks.contract import normalize_tracks
from ..utils.tracks.detect import TrackDetector
from ..utils.video.io import CRF_RANGE, X264_PRESETS, flatten_layer
from ..utils.video.stream import DetectedPoints, FrameSource, OverlaySpec, TrackPoints, render_video
from .adapters import UNITS, engine_params, interrupt_check, pixels_per_unit, progress_callback
from .overlays import SCALED_GRAPH, SCALED_LINE, box_style, box_widgets, graph_widgets, line_widgets
from .tracks import detect_widgets
from .widgets import VIDEO_CATEGORY, backend_input, boolean, combo, defaults, int_input, tracks_input

OUTPUT_PREFIX = "TrackOverlay/overlay"
LAYER_PREFIX = "TrackOverlay/layer"
TRIMMED_CRF = 1
"""x264 quality of the copy core saves of a trimmed VIDEO (near-lossless: the overlay goes on its frames)."""
# Lengths default to the pack's look in percent of the video's height (units default to percent here:
# the node knows the height), so a new node looks the same on 640x360 and on 4K.
RELATIVE_DEFAULTS = {"link_radius": "radius", "link_max_length": "max_length", "link_delta_y_cap": "delta_y_cap",
                     "line_width": "line_width", "line_dash_length": "dash_length", "line_gap_length": "gap_length",
                     "box_size": "box_size", "box_stroke_width": "box_stroke"}
# (the widgets reused, engine class they configure, name prefix here, tooltip note)
GROUPS = {
    "detect": (detect_widgets, TrackDetector, "detect_", "Detection (when 'tracks' is not connected):"),
    "graph": (graph_widgets, GraphParams, "link_", "Links:"),
    "line": (line_widgets, LineStyle, "line_", "Lines:"),
    "box": (box_widgets, BoxStyle, "box_", "Boxes:"),
}


def _group_inputs(group: str, optional: bool = False) -> list:
    """A group's required (or optional) widgets as declared for its own node, renamed with the group's prefix
    and tooltip note."""
    widgets, engine, prefix, note = GROUPS[group]
    names = defaults(engine)
    chosen = [widget for widget in widgets() if widget.id in names and widget.optional == optional]
    for widget in chosen:  # fresh declarations: renaming them touches no other node
        widget.id, widget.tooltip = prefix + widget.id, f"{note} {widget.tooltip}"
        if widget.id in RELATIVE_DEFAULTS:
            widget.default = DEFAULT_LOOK[RELATIVE_DEFAULTS[widget.id]]
    return chosen


def _group_values(group: str, widgets: dict) -> dict:
    """The widget values of one group, with the prefix taken off."""
    prefix = GROUPS[group][2]
    return {name[len(prefix):]: value for name, value in widgets.items() if name.startswith(prefix)}


def _overlay_spec(widgets: dict, scale: float, lines: bool, boxes: bool) -> OverlaySpec:
    """Graph and styles from the widgets (lengths in units x ``scale``); they validate themselves."""
    graph = engine_params(GraphParams, _group_values("graph", widgets), scale, SCALED_GRAPH)
    line = engine_params(LineStyle, _group_values("line", widgets), scale, SCALED_LINE)
    box = box_style(_group_values("box", widgets), scale)
    return OverlaySpec(graph, line if lines else None, box if boxes else None)


def _trimmed(video) -> bool:
    """Whether ``video`` is a part of its file (core Video Slice sets a trim window)."""
    window = getattr(video, "get_active_trim_window", None)
    return window is not None and any(window())


def _save_trimmed(video, path: str) -> None:
    """Core's own save of a trimmed VIDEO (its frames re-encoded), as near-lossless as it allows."""
    if "crf" in inspect.signature(video.save_to).parameters:
        video.save_to(path, crf=TRIMMED_CRF)
    else:
        video.save_to(path)


@contextmanager
def _video_file(video, folder: str):
    """A file path to decode ``video`` from: its own file, else a temporary copy deleted afterwards.

    Uses ``get_stream_source()`` (a path, or an in-memory file) where the
    VIDEO has it, else ``save_to`` (older ComfyUI), which copies a file's
    streams without re-encoding. A trimmed VIDEO (core Video Slice) is saved
    by core, which keeps only the frames of its trim window, the frames its
    Get Video Components gives.
    """
    if not hasattr(video, "get_stream_source") and not hasattr(video, "save_to"):
        raise TypeError(f"video must be a VIDEO (from Load Video or another video node), got "
                        f"{type(video).__name__}")
    trimmed = _trimmed(video)
    source = video.get_stream_source() if hasattr(video, "get_stream_source") and not trimmed else None
    if isinstance(source, (str, os.PathLike)):
        yield os.fspath(source)
        return
    handle, copy = tempfile.mkstemp(prefix=".trackoverlay_input_", suffix=".mp4", dir=folder)
    os.close(handle)
    try:
        if trimmed:
            _save_trimmed(video, copy)
        elif source is None:
            video.save_to(copy)
        else:
            with open(copy, "wb") as target:
                shutil.copyfileobj(source, target)
        yield copy
    finally:
        os.remove(copy)


def _output_path(folder_paths, layer_only: bool) -> str:
    """A new path: ``TrackOverlay/overlay_00001_.mp4`` in the temp folder, or ``TrackOverlay/layer_00001_.mov``
    in the output folder (core Save Video writes MP4 only, so the node keeps the ProRes file itself)."""
    root = folder_paths.get_output_directory() if layer_only else folder_paths.get_temp_directory()
    prefix, extension = (LAYER_PREFIX, ".mov") if layer_only else (OUTPUT_PREFIX, ".mp4")
    folder, name, counter, _, _ = folder_paths.get_save_image_path(prefix, root)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{name}_{counter:05}_{extension}")


def _progress(total: int):
    """``progress(done)`` for render_video driving ComfyUI's bar (which raises on interrupt), or None."""
    bar = progress_callback(total)
    return None if bar is None else lambda done: bar(done, max(total, done))


class LayerVideo(InputImpl.VideoFromFile):
    """``layer_only``'s VIDEO: the ProRes 4444 layer with alpha. Save Video cannot store it with its alpha (MP4
    refuses ProRes; MKV and WebM are re-encoded without alpha, straight colours on black), so saving writes
    the layer premultiplied over black (H.264) and lets core save that; the .mov with alpha stays where the
    node wrote it."""

    def __init__(self, path: str):
        super().__init__(path)
        self.layer_path = path

    def save_to(self, path, *args, **kwargs):
        LOGGER.warning("Overlay Video: the layer is saved to %s over black, without alpha (Save Video cannot store "
                       "ProRes 4444 with its alpha); the layer with alpha is %s", path, self.layer_path)
        with tempfile.TemporaryDirectory(prefix="trackoverlay_") as folder:
            flat = os.path.join(folder, "layer_over_black.mp4")
            flatten_layer(self.layer_path, flat)
            return InputImpl.VideoFromFile(flat).save_to(path, *args, **kwargs)


class OverlayVideoNode(io.ComfyNode):
    """Draws the overlay over a whole video, streaming, and returns a new video."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="TrackOverlayVideo",
            display_name="Overlay Video (streaming)",
            category=VIDEO_CATEGORY,
            search_aliases=["tracking overlay video", "plexus video", "point tracker video", "blob track video",
                            "video overlay"],
            description="Decodes a video frame by frame, finds points (or takes the connected tracks), links "
                        "them and draws boxes, and encodes the result to H.264 in ComfyUI's temp folder, so "
                        "memory does not grow with the video's length. The audio is kept. The node shows the "
                        "result; connect the output to Save Video to keep it. With layer_only it saves the "
                        "overlay alone with alpha (ProRes 4444 .mov) in ComfyUI's output folder for compositing "
                        "(the node says where); Save Video then stores it over black, without alpha (it cannot "
                        "store ProRes 4444 with its alpha).",
            is_output_node=True,  # runs without a consumer: it shows its result, and a layer is itself one
            inputs=[
                io.Video.Input("video", tooltip="The video to draw on (from Load Video, for example)."),
                backend_input(),
                boolean("draw_lines", True, "Draw the links between neighbouring points."),
                boolean("draw_boxes", True, "Draw a box around every point."),
                combo("units", UNITS, UNITS[1], "Unit of the widths, lengths and sizes below: percent of the "
                      "video's height (the default: the look survives a change of resolution), or pixels."),
                *_group_inputs("detect"), *_group_inputs("graph"), *_group_inputs("line"), *_group_inputs("box"),
                int_input("crf", 18, CRF_RANGE, "H.264 quality, 0..51: lower is better and larger (18 looks "
                          "lossless)."),
                combo("preset", X264_PRESETS, "veryfast", "x264 speed: faster presets encode quicker and make "
                      "larger files at the same quality."),
                int_input("max_frames", 0, Range(0), "Stop after this many frames; 0 = the whole video."),
                tracks_input(optional=True, tooltip="Tracks to draw instead of detecting points: one track frame "
                             "per video frame, or one for all (pixel coordinates of this video)."),
                boolean("keep_audio", True, "Keep the video's sound (copied as it is, or re-encoded to AAC).",
                        optional=True),
                boolean("layer_only", False, "Save the overlay alone with straight (not premultiplied) alpha as "
                        "output/TrackOverlay/layer_*.mov (ProRes 4444) for compositing; off: the overlay drawn "
                        "over the video (H.264, in the temp folder for Save Video).", optional=True),
                *_group_inputs("detect", optional=True),  # after the inputs of saved workflows
                *_group_inputs("line", optional=True), *_group_inputs("box", optional=True),
            ],
            outputs=[io.Video.Output("video", tooltip="The video with the overlay drawn on every frame (same size "
                                     "and frame rate).")],
        )

    @classmethod
    def execute(cls, video, backend, draw_lines, draw_boxes, units, crf, preset, max_frames, tracks=None,
                keep_audio=True, layer_only=False, **widgets) -> io.NodeOutput:
        import folder_paths

        temp = folder_paths.get_temp_directory()
        os.makedirs(temp, exist_ok=True)
        with _video_file(video, temp) as path, closing(FrameSource.from_video(path)) as source:
            spec = _overlay_spec(widgets, pixels_per_unit(units, source.height), draw_lines, draw_boxes)
            points = (DetectedPoints(TrackDetector(**_group_values("detect", widgets), backend=backend)) if tracks is None
                      else TrackPoints(normalize_tracks(tracks), name="tracks"))
            output = _output_path(folder_paths, layer_only)
            total = min(filter(None, (source.frame_count, max_frames)), default=0)
            renderer, info = make_renderer(backend, stop_check=interrupt_check())
            LOGGER.info("Overlay Video: %dx%d, about %d frame(s), on %s -> %s", source.width, source.height,
                        total, info.selected, output)
            try:
                count = render_video(source, points, spec, renderer, output, max_frames=max_frames or None,
                                     crf=crf, preset=preset, progress=_progress(total), audio=keep_audio,
                                     layer_only=layer_only)
            finally:
                renderer.close()
        LOGGER.info("Overlay Video: wrote %d frame(s) to %s", count, output)
        if layer_only:  # a browser cannot play ProRes 4444: say where the layer is
            where = os.path.relpath(output, folder_paths.get_output_directory())
            shown = ui.PreviewText(f"The overlay alone with alpha ({count} frames, ProRes 4444) is saved in the "
                                   f"output folder as {where}")
            return io.NodeOutput(LayerVideo(output), ui=shown)
        subfolder, name = os.path.split(os.path.relpath(output, temp))
        return io.NodeOutput(InputImpl.VideoFromFile(output),
                             ui=ui.PreviewVideo([ui.SavedResult(name, subfolder, io.FolderType.temp)]))


NODES = (OverlayVideoNode,)
