"""Track sources and track files: IMAGE / MASK / JSON -> TRACKS, and TRACKS -> JSON."""

from __future__ import annotations

import os

from ..utils.core.log import LOGGER
from ..utils.tracks.contract import normalize_tracks
from ..utils.tracks.detect import METHODS, TrackDetector, detect_tracks, track_clip
from ..utils.tracks.from_mask import tracks_from_mask
from ..utils.tracks.track_file import load_tracks_json, tracks_from_json, tracks_to_json
from .adapters import image_array, input_path, mask_array, save_text_output, tracks_output
from .widgets import CATEGORY, combo, defaults, float_input, int_input, socket, text

_DETECT = {**defaults(TrackDetector), **defaults(detect_tracks)}
_MASK = defaults(tracks_from_mask)
_TRACKS_OUT = "Tracks: track_path [T, N, 2] pixels and track_visibility [T, N] (core ComfyUI TRACKS), plus box sizes."


class DetectTracks:
    """Finds feature points in the frames and follows them with optical flow."""

    DISPLAY_NAME = "Detect Tracks"
    DESCRIPTION = ("Finds points to track in the frames (corners, blobs, bright spots, or what moves) and "
                   "follows them from frame to frame with optical flow. Re-detection fills gaps where no "
                   "point is, lost points keep their id when found again, scene cuts start afresh, short "
                   "tracks are dropped and births and deaths fade (track_opacity). CPU (OpenCV).")
    CATEGORY = CATEGORY
    RETURN_TYPES = ("TRACKS",)
    RETURN_NAMES = ("tracks",)
    OUTPUT_TOOLTIPS = (_TRACKS_OUT + " Fades travel as track_opacity, honoured by Boxes and Line Links.",)
    FUNCTION = "detect"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "image": socket("IMAGE", "The frames to track (a video's frames, or one image)."),
            "max_points": int_input(_DETECT["max_points"], 1, 10_000, "Most points tracked at the same time."),
            "min_distance": float_input(_DETECT["min_distance"], 0.0, 10_000.0,
                                        "New points keep at least this many pixels from each other and "
                                        "from points already tracked.", step=1.0),
            "sensitivity": float_input(_DETECT["sensitivity"], 0.0, 1.0,
                                       "0..1: higher finds weaker corners, smaller blobs, dimmer spots.",
                                       step=0.05),
            "method": combo(METHODS, _DETECT["method"],
                            "corners: Shi-Tomasi corners; blobs: light or dark blobs; bright: bright spots; "
                            "motion: corners on what moves (camera pans and shake taken out); static "
                            "points are let go."),
            "redetect_interval": int_input(_DETECT["redetect_interval"], 1, 10_000,
                                           "Look for new points at least every this many frames (1 = every "
                                           "frame); also whenever fewer than 90% of max_points are live."),
            "point_size": float_input(_DETECT["point_size"], 0.0, 10_000.0,
                                      "Box size stored with each track, in pixels (used by Boxes with "
                                      "size_mode 'track').", step=1.0),
            "min_track_length": int_input(_DETECT["min_track_length"], 1, 10_000,
                                          "Tracks seen in fewer frames are dropped (1 keeps all), so points "
                                          "do not blink on for a frame or two."),
            "fade_frames": int_input(_DETECT["fade_frames"], 0, 1_000,
                                     "Boxes and links of a track fade in over its first and out over its "
                                     "last this many frames (0 = pop). Not at scene cuts."),
            "motion_preference": float_input(_DETECT["motion_preference"], 0.0, 1.0,
                                             "0..1: how much of max_points points on moving things may take "
                                             "over from static ones (new points go to moving pixels first); "
                                             "0 = no preference.", step=0.05),
            "cut_threshold": float_input(_DETECT["cut_threshold"], 0.0, 1.0,
                                         "Colour change (0..1) between two frames that counts as a scene cut: "
                                         "tracks end and the new shot is seeded on its first frame. 0 = off.",
                                         step=0.05),
            "max_tracks": int_input(_DETECT["max_tracks"], 0, 10_000_000,
                                    "Most tracks in the whole clip; 0 = no limit. When reached, no new track "
                                    "starts (you are told so)."),
        }, "optional": {
            "subject": socket("MASK", "Only track points on this mask (one per frame, or one for all), e.g. "
                              "from a segmentation node; points that leave it end."),
        }}

    def detect(self, image, point_size, subject=None, **params):
        detector = TrackDetector(**params)
        tracks = track_clip(image_array(image), detector, point_size,
                            None if subject is None else mask_array(subject, "subject"))
        LOGGER.info("Detect Tracks: %d tracks over %d frames", tracks.track_count, tracks.frame_count)
        if detector.limit_frame is None:
            return (tracks_output(tracks),)
        message = (f"max_tracks={detector.max_tracks} was reached at frame {detector.limit_frame}: no new "
                   "tracks start after it. Raise max_tracks, or set it to 0 for no limit.")
        return {"ui": {"text": [message]}, "result": (tracks_output(tracks),)}


class TracksFromMask:
    """One track per mask region, matched from frame to frame."""

    DISPLAY_NAME = "Tracks From Mask"
    DESCRIPTION = ("Turns every region of a mask batch into a track at its centre, with its bounding-box "
                   "size; regions are matched to the previous frame's by distance.")
    CATEGORY = CATEGORY
    RETURN_TYPES = ("TRACKS",)
    RETURN_NAMES = ("tracks",)
    OUTPUT_TOOLTIPS = (_TRACKS_OUT,)
    FUNCTION = "from_mask"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "mask": socket("MASK", "Mask batch [B, H, W]; each connected region becomes a track."),
            "threshold": float_input(_MASK["threshold"], 0.0, 1.0, "Mask values above this count as inside.",
                                     step=0.05),
            "min_area": int_input(_MASK["min_area"], 1, 100_000_000, "Regions smaller than this many pixels "
                                  "are ignored."),
            "max_distance": float_input(_MASK["max_distance"], 0.01, 100_000.0,
                                        "A region continues a track only if its centre moved at most this "
                                        "many pixels since the previous frame.", step=1.0),
        }}

    def from_mask(self, mask, threshold, min_area, max_distance):
        tracks = tracks_from_mask(mask_array(mask), threshold=threshold, min_area=min_area,
                                  max_distance=max_distance)
        return (tracks_output(tracks),)


def _json_source(json_or_path: str) -> tuple:
    """("json", text) for pasted JSON, or ("file", resolved path)."""
    value = json_or_path.strip()
    if not value:
        raise ValueError("json_or_path is empty: paste track JSON (from Tracks To JSON) or give the path "
                         "of a .json track file")
    if value.startswith("{"):
        return "json", value
    return "file", input_path(value)


class TracksFromJSON:
    """Reads tracks from JSON text or a track file."""

    DISPLAY_NAME = "Tracks From JSON"
    DESCRIPTION = ("Reads tracks saved by Tracks To JSON (or by the pack's scripts): paste the JSON text, "
                   "or give a file path (relative paths are looked up in ComfyUI's input folder).")
    CATEGORY = CATEGORY
    RETURN_TYPES = ("TRACKS",)
    RETURN_NAMES = ("tracks",)
    OUTPUT_TOOLTIPS = (_TRACKS_OUT,)
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "json_or_path": text("", "Track JSON text (starting with '{'), or the path of a .json track file.",
                                 multiline=True),
        }}

    @classmethod
    def IS_CHANGED(cls, json_or_path):
        """A track file's modification time, so an edited file is read again (text is keyed by ComfyUI)."""
        if not isinstance(json_or_path, str) or not json_or_path.strip():
            return ""
        kind, value = _json_source(json_or_path)
        return os.path.getmtime(value) if kind == "file" and os.path.isfile(value) else ""

    def load(self, json_or_path):
        kind, value = _json_source(json_or_path)
        tracks = tracks_from_json(value, source="json_or_path") if kind == "json" else load_tracks_json(value)
        return (tracks_output(tracks),)


class TracksToJSON:
    """Writes tracks as JSON text, and optionally to a file in ComfyUI's output folder."""

    DISPLAY_NAME = "Tracks To JSON"
    DESCRIPTION = ("Serialises tracks to the pack's JSON track format (readable by Tracks From JSON and the "
                   "scripts). With a filename prefix it also saves a .json file in ComfyUI's output folder.")
    CATEGORY = CATEGORY
    RETURN_TYPES = ("STRING",)
    RETURN_NAMES = ("json",)
    OUTPUT_TOOLTIPS = ("The tracks as JSON text.",)
    OUTPUT_NODE = True
    FUNCTION = "to_json"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "tracks": socket("TRACKS", "The tracks to write."),
        }, "optional": {
            "filename_prefix": text("", "Leave empty to only output the text. Otherwise also save "
                                    "<prefix>_00001_.json in ComfyUI's output folder (may contain "
                                    "subfolders, e.g. tracks/shot1)."),
        }}

    def to_json(self, tracks, filename_prefix=""):
        document = tracks_to_json(normalize_tracks(tracks))
        prefix = filename_prefix.strip()
        saved = save_text_output(document, prefix, "json") if prefix else None
        if prefix and saved is None:
            LOGGER.warning("Tracks To JSON: ComfyUI's output folder is unknown here; %r was not saved", prefix)
        return {"ui": {"tracks_json": [saved] if saved else []}, "result": (document,)}

NODES = (DetectTracks, TracksFromMask, TracksFromJSON, TracksToJSON)
