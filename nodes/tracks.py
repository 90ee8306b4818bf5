"""Track sources and track files: IMAGE / MASK / JSON -> TRACKS, and TRACKS -> JSON."""

from __future__ import annotations

import hashlib
import os

from comfy_api.latest import io, ui

from ..utils.core.log import LOGGER
from ..utils.tracks.contract import normalize_tracks
from ..utils.tracks.detect import (
    DETECT_RANGES,
    METHODS,
    TrackDetector,
    detect_tracks,
    track_clip,
)
from ..utils.tracks.from_mask import MASK_RANGES, tracks_from_mask
from ..utils.tracks.track_file import load_tracks_json, tracks_from_json, tracks_to_json
from .adapters import (
    image_array,
    mask_array,
    save_text_output,
    saved_or_input_path,
    tracks_output,
)
from .widgets import (
    TRACKS_CATEGORY,
    TRACKS_OUT,
    backend_input,
    combo,
    defaults,
    float_input,
    int_input,
    text,
    tracks_input,
)

_DETECT = {**defaults(TrackDetector), **defaults(detect_tracks)}
_MASK = defaults(tracks_from_mask)


def detect_widgets() -> list:
    """The detection widgets (one per TrackDetector parameter, and detect_tracks' point_size)."""
    limits = DETECT_RANGES
    return [
        int_input("max_points", _DETECT["max_points"], limits["max_points"], "Most points tracked at the same time."),
        float_input("min_distance", _DETECT["min_distance"], limits["min_distance"],
                    "New points keep at least this many pixels from each other and from points already "
                    "tracked.", step=1.0),
        float_input("sensitivity", _DETECT["sensitivity"], limits["sensitivity"],
                    "0..1: higher finds weaker corners, smaller blobs, dimmer spots.", step=0.05),
        combo("method", METHODS, _DETECT["method"],
              "corners: Shi-Tomasi corners; blobs: light or dark blobs; bright: bright spots, brightest first "
              "(the lights in a lit area, not the area); motion: corners on "
              "what moves (camera pans and shake taken out); static points are let go."),
        int_input("redetect_interval", _DETECT["redetect_interval"], limits["redetect_interval"],
                  "Look for new points at least every this many frames (1 = every frame); also whenever fewer "
                  "than 90% of max_points are live."),
        float_input("point_size", _DETECT["point_size"], limits["point_size"],
                    "Box size stored with each track, in pixels (used by Boxes with size_mode 'track').", step=1.0),
        int_input("min_track_length", _DETECT["min_track_length"], limits["min_track_length"],
                  "Tracks seen in fewer frames are dropped (1 keeps all), so points do not blink on for a frame "
                  "or two.", optional=True),
        int_input("fade_frames", _DETECT["fade_frames"], limits["fade_frames"],
                  "Boxes and links of a track fade in over its first and out over its last this many frames "
                  "(0 = pop). Not at scene cuts.", optional=True),
        float_input("motion_preference", _DETECT["motion_preference"], limits["motion_preference"],
                    "0..1: how much of max_points points on moving things may take over from static ones (new "
                    "points go to moving pixels first); 0 = no preference.", step=0.05, optional=True),
        float_input("cut_threshold", _DETECT["cut_threshold"], limits["cut_threshold"],
                    "Colour change (0..1) between two frames that counts as a scene cut: tracks end and the new "
                    "shot is seeded on its first frame. 0 = off.", step=0.05, optional=True),
        int_input("max_tracks", _DETECT["max_tracks"], limits["max_tracks"],
                  "Most tracks in the whole clip; 0 = no limit. When reached, no new track starts (you are told "
                  "so).", optional=True),
    ]


class DetectTracksNode(io.ComfyNode):
    """Finds feature points in the frames and follows them with optical flow."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="TrackOverlayDetectTracks",
            display_name="Detect Tracks",
            category=TRACKS_CATEGORY,
            search_aliases=["point tracker", "feature tracking", "optical flow", "blob track", "track points",
                            "corner detection"],
            description="Finds points to track in the frames (corners, blobs, bright spots, or what moves) and "
                        "follows them from frame to frame with optical flow. Re-detection fills gaps where no "
                        "point is, lost points keep their id when found again, scene cuts start afresh, short "
                        "tracks are dropped and births and deaths fade (track_opacity). Points are followed on "
                        "the GPU (CuPy) or the CPU (OpenCV), with the same arithmetic (to float rounding).",
            inputs=[
                io.Image.Input("image", tooltip="The frames to track (a video's frames, or one image)."),
                *detect_widgets(),
                backend_input(optional=True),
                io.Mask.Input("subject", optional=True, tooltip="Only track points on this mask (one per frame, "
                              "or one for all), e.g. from a segmentation node; points that leave it end."),
            ],
            outputs=[io.Tracks.Output("tracks", tooltip=TRACKS_OUT + " Fades travel as track_opacity, honoured "
                                      "by Boxes and Line Links.")],
        )

    @classmethod
    def execute(cls, image, point_size, subject=None, **params) -> io.NodeOutput:
        detector = TrackDetector(**params)
        tracks = track_clip(image_array(image), detector, point_size,
                            None if subject is None else mask_array(subject, "subject"))
        LOGGER.info("Detect Tracks: %d tracks over %d frames", tracks.track_count, tracks.frame_count)
        if detector.limit_frame is None:
            return io.NodeOutput(tracks_output(tracks))
        message = (f"max_tracks={detector.max_tracks} was reached at frame {detector.limit_frame}: no new "
                   "tracks start after it. Raise max_tracks, or set it to 0 for no limit.")
        return io.NodeOutput(tracks_output(tracks), ui=ui.PreviewText(message))


class TracksFromMaskNode(io.ComfyNode):
    """One track per mask region, matched from frame to frame."""

    @classmethod
    def define_schema(cls):
        limits = MASK_RANGES
        return io.Schema(
            node_id="TrackOverlayTracksFromMask",
            display_name="Tracks From Mask",
            category=TRACKS_CATEGORY,
            search_aliases=["blob track", "mask to tracks", "region tracking", "segment tracking"],
            description="Turns every region of a mask batch into a track at its centre, with its "
                        "bounding-box size; regions are matched to the previous frame's by distance.",
            inputs=[
                io.Mask.Input("mask", tooltip="Mask batch [B, H, W]; each connected region becomes a track."),
                float_input("threshold", _MASK["threshold"], limits["threshold"],
                            "Mask values above this count as inside.", step=0.05),
                int_input("min_area", _MASK["min_area"], limits["min_area"],
                          "Regions smaller than this many pixels are ignored."),
                float_input("max_distance", _MASK["max_distance"], limits["max_distance"],
                            "A region continues a track only if its centre moved at most this many pixels "
                            "since the previous frame.", step=1.0),
            ],
            outputs=[io.Tracks.Output("tracks", tooltip=TRACKS_OUT)],
        )

    @classmethod
    def execute(cls, mask, threshold, min_area, max_distance) -> io.NodeOutput:
        tracks = tracks_from_mask(mask_array(mask), threshold=threshold, min_area=min_area,
                                  max_distance=max_distance)
        return io.NodeOutput(tracks_output(tracks))


def _json_source(json_or_path: str) -> tuple:
    """("json", text) for pasted JSON, or ("file", resolved path)."""
    value = json_or_path.strip()
    if not value:
        raise ValueError("json_or_path is empty: paste track JSON (from Tracks To JSON) or give the path "
                         "of a .json track file")
    if value.startswith("{"):
        return "json", value
    return "file", saved_or_input_path(value)


def file_fingerprint(path: str) -> str:
    """Modification time, size and SHA-256 of a file ('' when it does not exist)."""
    if not os.path.isfile(path):
        return ""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    stat = os.stat(path)
    return f"{stat.st_mtime_ns}:{stat.st_size}:{digest.hexdigest()}"


class TracksFromJSONNode(io.ComfyNode):
    """Reads tracks from JSON text or a track file."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="TrackOverlayTracksFromJSON",
            display_name="Tracks From JSON",
            category=TRACKS_CATEGORY,
            search_aliases=["load tracks", "track file", "import tracks"],
            description="Reads tracks saved by Tracks To JSON (or by the pack's scripts): paste the JSON text, "
                        "or give a file path (relative paths are looked up in ComfyUI's input folder, then "
                        "in its output folder, where Tracks To JSON saves). An edited file is read again on the "
                        "next run.",
            inputs=[
                text("json_or_path", "", "Track JSON text (starting with '{'), or the path of a .json track file "
                     "(relative: in ComfyUI's input folder, else its output folder, e.g. tracks/shot_00001_.json).",
                     multiline=True),
            ],
            outputs=[io.Tracks.Output("tracks", tooltip=TRACKS_OUT)],
        )

    @classmethod
    def fingerprint_inputs(cls, json_or_path):
        """A track file's mtime, size and content hash, so an edited file is read again (text is keyed by ComfyUI)."""
        if not isinstance(json_or_path, str) or not json_or_path.strip():
            return ""
        kind, value = _json_source(json_or_path)
        return file_fingerprint(value) if kind == "file" else ""

    @classmethod
    def execute(cls, json_or_path) -> io.NodeOutput:
        kind, value = _json_source(json_or_path)
        tracks = tracks_from_json(value, source="json_or_path") if kind == "json" else load_tracks_json(value)
        return io.NodeOutput(tracks_output(tracks))


class TracksToJSONNode(io.ComfyNode):
    """Writes tracks as JSON text, and optionally to a file in ComfyUI's output folder."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="TrackOverlayTracksToJSON",
            display_name="Tracks To JSON",
            category=TRACKS_CATEGORY,
            search_aliases=["save tracks", "export tracks", "track file"],
            description="Serialises tracks to the pack's JSON track format (readable by Tracks From JSON and "
                        "the scripts). With a filename prefix it also saves a .json file in ComfyUI's output "
                        "folder.",
            inputs=[
                tracks_input(tooltip="The tracks to write."),
                text("filename_prefix", "", "Leave empty to only output the text. Otherwise also save "
                     "<prefix>_00001_.json in ComfyUI's output folder (may contain subfolders, e.g. "
                     "tracks/shot1).", optional=True),
            ],
            outputs=[io.String.Output("json", tooltip="The tracks as JSON text.")],
            is_output_node=True,
        )

    @classmethod
    def execute(cls, tracks, filename_prefix="") -> io.NodeOutput:
        document = tracks_to_json(normalize_tracks(tracks))
        prefix = filename_prefix.strip()
        saved = save_text_output(document, prefix, "json") if prefix else None
        if prefix and saved is None:
            LOGGER.warning("Tracks To JSON: ComfyUI's output folder is unknown here; %r was not saved", prefix)
        return io.NodeOutput(document, ui={"tracks_json": [saved] if saved else []})


NODES = (DetectTracksNode, TracksFromMaskNode, TracksFromJSONNode, TracksToJSONNode)
