"""Conversions between ComfyUI values and the engine's NumPy world.

torch, ``comfy``, ``comfy_execution`` and ``folder_paths`` are imported inside
the functions that need them, so this module imports without ComfyUI.
"""

from __future__ import annotations

import os
from dataclasses import fields, replace

import numpy as np

from ..utils.core.checks import check_frame_size
from ..utils.draw.display_list import DisplayList
from ..utils.draw.units import UNITS, pixels_per_unit
from ..utils.tracks.contract import POSITION_LIMIT, Tracks, normalize_tracks


def _host_float32(value, name: str, kind: str) -> np.ndarray:
    """float32 NumPy view of a torch tensor (no copy for a CPU float32 tensor).

    Floats and bools keep their values; uint8 (0..255) is scaled to 0..1; other
    integer types are a ``TypeError`` (their range is ambiguous).
    """
    if not type(value).__module__.startswith("torch"):
        raise TypeError(f"{name} must be a torch tensor ({kind}), got {type(value).__name__}")
    import torch

    if not (value.is_floating_point() or value.dtype in (torch.uint8, torch.bool)):
        raise TypeError(f"{name} must hold floats in 0..1 (or uint8 0..255), got {value.dtype}")
    if value.device.type == "meta":
        raise TypeError(f"{name} is a tensor on the 'meta' device (a shape without data); connect real frames")
    array = value.detach().to(device="cpu", dtype=torch.float32).numpy()
    return array / np.float32(255.0) if value.dtype == torch.uint8 else array


def image_array(image, name: str = "image") -> np.ndarray:
    """An IMAGE as float32 [B, H, W, 3] (a single [H, W, 3] image becomes B = 1); never modified."""
    array = _host_float32(image, name, "IMAGE")
    shape = list(array.shape)
    if array.ndim == 3:
        array = array[None]
    if array.ndim != 4 or array.shape[-1] != 3:
        raise ValueError(f"{name} must be an IMAGE of shape [B, H, W, 3] (or [H, W, 3]) with 3 colour "
                         f"channels, got shape {shape}; convert grey (1 channel) or RGBA (4) images to RGB "
                         "before this node (e.g. with core Split Image with Alpha)")
    if 0 in array.shape:
        raise ValueError(f"{name} is empty (shape {shape}); connect at least one frame")
    return array


def mask_array(mask, name: str = "mask") -> np.ndarray:
    """A MASK as float32 [B, H, W] (a single [H, W] mask becomes B = 1); never modified."""
    array = _host_float32(mask, name, "MASK")
    shape = list(array.shape)
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3 or 0 in array.shape:
        raise ValueError(f"{name} must be a non-empty MASK of shape [B, H, W] (or [H, W]), got shape {shape}")
    return array


def to_tensor(array: np.ndarray):
    """A float32 (or bool) CPU torch tensor sharing ``array``'s memory when it can."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(array))


def tracks_output(tracks: Tracks) -> dict:
    """The TRACKS dict of torch tensors (core keys plus this pack's optional ones; track text stays a list)."""
    return {key: to_tensor(value) if isinstance(value, np.ndarray) else value
            for key, value in tracks.to_comfy().items()}


def overlay_list(overlay, name: str) -> list:
    """A TRACK_OVERLAY value (list of per-frame DisplayList), checked."""
    if not isinstance(overlay, (list, tuple)) or not all(isinstance(entry, DisplayList) for entry in overlay):
        raise TypeError(f"{name} must be a TRACK_OVERLAY (one display list per frame) from a Track Overlay "
                        f"node such as Line Links or Boxes, got {type(overlay).__name__}")
    if not overlay:
        raise ValueError(f"{name} has no frames; its tracks must cover at least one frame")
    return list(overlay)


def unit_scale(units: str, frame_size: tuple | None) -> float:
    """:func:`pixels_per_unit` with the height of ``frame_size`` (see :func:`overlay_frame_size`) where needed."""
    relative = units == UNITS[1]
    if relative and frame_size is None:
        raise ValueError(f"units '{units}' needs the frame height: connect the frames to 'reference' (tracks "
                         "from this pack's Detect Tracks, Tracks From Mask or Demo Clip carry it), or set units "
                         "to 'pixels'")
    return pixels_per_unit(units, frame_size[1] if relative else 0)


def overlay_frame_size(tracks: Tracks, reference, name: str = "reference") -> tuple | None:
    """(width, height) of the frames an overlay of ``tracks`` is for: the ``reference``'s, which must be the
    tracks' own when they say; else the tracks' (None when neither says)."""
    if reference is None:
        return tracks.frame_size
    height, width = image_array(reference, name).shape[1:3]
    check_frame_size(tracks.frame_size, width, height, "the tracks", f"'{name}'")
    return width, height


def overlay_inputs(tracks, units: str, reference) -> tuple:
    """What an overlay node draws from: the checked tracks, the frame size the overlay is for
    (:func:`overlay_frame_size`) and the pixels per ``units`` on those frames."""
    tracks = normalize_tracks(tracks)
    frame_size = overlay_frame_size(tracks, reference)
    return tracks, frame_size, unit_scale(units, frame_size)


def for_frames(overlays: list, frame_size: tuple | None) -> list:
    """``overlays`` marked as built for frames of ``frame_size`` (Render refuses frames of another size)."""
    return overlays if frame_size is None else [replace(entry, frame_size=frame_size) for entry in overlays]


def engine_params(cls, widgets: dict, scale: float = 1.0, scaled: tuple = ()):
    """An instance of the dataclass ``cls`` from the widgets named like its fields (``scaled`` ones x ``scale``).
    A value refused once scaled is named in the widget's units too: the engine's limits are in pixels."""
    values = {field.name: widgets[field.name] for field in fields(cls) if field.name in widgets}
    given = dict(values)
    values.update({key: values[key] * scale for key in scaled if key in values})
    try:
        return cls(**values)
    except ValueError as error:
        if scale == 1.0:
            raise
        changed = [key for key in scaled if key in values and values[key] != given[key]]
        quoted = [key for key in changed if repr(values[key]) in str(error) or f"{values[key]:g}" in str(error)]
        named = ", ".join(f"{key} {given[key]:g} % = {values[key]:g} px" for key in quoted or changed)
        raise ValueError(f"{error} ({UNITS[1]} is {scale:g} px per % on these frames: {named}; lower the "
                         "size, or give it in pixels)") from None


def _box_rows(frame, label: str) -> np.ndarray:
    """float32 [n, 4] (x, y, width, height) from one frame's list of box dicts."""
    if isinstance(frame, dict):
        frame = [frame]
    rows = []
    for index, box in enumerate(frame):
        where = f"{label} box {index}"
        if not isinstance(box, dict):
            raise TypeError(f"{where} must be a dict with x, y, width, height, got {type(box).__name__}")
        missing = [key for key in ("x", "y", "width", "height") if key not in box]
        if missing:
            raise ValueError(f"{where} is missing {', '.join(missing)}; each box needs x, y (top-left), "
                             "width and height in pixels")
        values = [box[key] for key in ("x", "y", "width", "height")]
        try:
            if any(isinstance(value, (str, bytes, bool, np.bool_)) for value in values):
                raise TypeError
            row = [float(value) for value in values]
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{where}: x, y, width, height must be numbers (not text or true/false) within "
                             f"±{POSITION_LIMIT:,.0f} pixels") from None
        if not all(abs(value) <= POSITION_LIMIT for value in row) or row[2] < 0 or row[3] < 0:
            raise ValueError(f"{where}: x, y, width, height must be finite pixels within ±{POSITION_LIMIT:,.0f} "
                             f"and width, height >= 0, got {row}")
        rows.append(row)
    return np.array(rows, np.float32).reshape(-1, 4)


def bounding_boxes(boxes, name: str = "boxes") -> list:
    """Per-frame (centers [n, 2], sizes [n, 2]) from a BOUNDING_BOXES value.

    Accepts a list of {x, y, width, height} dicts (one frame) or a list of such
    lists (one per frame); x, y is the box's top-left corner in pixels.
    """
    if isinstance(boxes, dict):
        boxes = [boxes]
    if not isinstance(boxes, (list, tuple)):
        raise TypeError(f"{name} must be BOUNDING_BOXES (a list of {{x, y, width, height}} dicts, or one "
                        f"such list per frame), got {type(boxes).__name__}")
    per_frame = len(boxes) > 0 and all(isinstance(item, (list, tuple)) for item in boxes)
    frames = boxes if per_frame else [boxes]
    result = []
    for index, frame in enumerate(frames):
        rows = _box_rows(frame, f"{name} frame {index}")
        result.append((rows[:, :2] + rows[:, 2:] / 2, rows[:, 2:]))
    return result


def progress_callback(total: int):
    """``progress(done, total)`` driving ComfyUI's progress bar, or None outside ComfyUI.

    ComfyUI's progress hook also raises when the user interrupts, so the loop stops there.
    """
    try:
        from comfy.utils import ProgressBar
    except ImportError:
        return None
    bar = ProgressBar(total)
    return lambda done, count: bar.update_absolute(done, count)


def interrupt_check():
    """A check that raises ComfyUI's interrupt when the user has pressed cancel (None outside ComfyUI). Unlike
    the progress bar's, it may run on any thread and leaves the flag set, so every drawing thread stops."""
    try:
        from comfy import model_management
    except ImportError:
        return None

    def check() -> None:
        if model_management.processing_interrupted():
            raise model_management.InterruptProcessingException()

    return check


def _folder_paths():
    """ComfyUI's ``folder_paths`` module, or None outside ComfyUI."""
    try:
        import folder_paths
    except ImportError:
        return None
    return folder_paths


def input_path(path: str) -> str:
    """An absolute path as given; a relative one under ComfyUI's input folder (outside ComfyUI: as given)."""
    path = os.path.expanduser(path)
    paths = _folder_paths()
    if os.path.isabs(path) or paths is None:
        return path
    return os.path.join(paths.get_input_directory(), path)


def saved_or_input_path(path: str) -> str:
    """:func:`input_path`, or the same relative path under ComfyUI's output folder where only that holds it
    (where the pack's nodes save, e.g. Tracks To JSON's files)."""
    given = input_path(path)
    paths = _folder_paths()
    if os.path.exists(given) or paths is None or os.path.isabs(os.path.expanduser(path)):
        return given
    saved = os.path.join(paths.get_output_directory(), os.path.expanduser(path))
    return saved if os.path.exists(saved) else given


def save_text_output(text: str, prefix: str, extension: str):
    """Save ``text`` as ``<prefix>_00001_.<extension>`` under ComfyUI's output folder.

    Returns the ``{filename, subfolder, type}`` record ComfyUI reports, or None
    outside ComfyUI (nothing is written then).
    """
    paths = _folder_paths()
    if paths is None:
        return None
    output_dir = paths.get_output_directory()
    folder, filename, counter, subfolder, _ = paths.get_save_image_path(prefix, output_dir)
    os.makedirs(folder, exist_ok=True)
    name = f"{filename}_{counter:05}_.{extension}"
    with open(os.path.join(folder, name), "w", encoding="utf-8") as handle:
        handle.write(text)
    return {"filename": name, "subfolder": subfolder, "type": "output"}


def connected_outputs(hidden) -> set | None:
    """Output slots of the running node that some node of the running graph reads.

    ``hidden`` is the node's V3 hidden holder (``unique_id`` and ``dynprompt``);
    None when they are not given (outside ComfyUI), meaning "unknown".
    """
    prompt, node_id = getattr(hidden, "dynprompt", None), getattr(hidden, "unique_id", None)
    if prompt is None or node_id is None:
        return None
    used = set()
    for other in prompt.all_node_ids():
        for value in prompt.get_node(other).get("inputs", {}).values():
            if isinstance(value, list) and len(value) == 2 and str(value[0]) == str(node_id):
                used.add(int(value[1]))
    return used


def not_built(message: str):
    """The value of an output that was not built: downstream nodes stop with ``message``."""
    from comfy_execution.graph_utils import ExecutionBlocker

    return ExecutionBlocker(message)


def frames_tensor(frames, count: int, height: int, width: int, progress=None):
    """An IMAGE (float32 [count, H, W, 3] in 0..1) filled from ``count`` uint8 RGB frames, one at a time
    (``progress(done, count)`` after each: a progress bar, which raises on an interrupt)."""
    array = np.empty((count, height, width, 3), np.float32)
    filled = 0
    for filled, frame in enumerate(frames, 1):
        np.divide(frame, np.float32(255.0), out=array[filled - 1])
        if progress is not None:
            progress(filled, count)
    if filled != count:
        raise ValueError(f"expected {count} frames, got {filled}")
    return to_tensor(array)


def audio_output(waveform: np.ndarray, sample_rate: int) -> dict:
    """A core AUDIO value from a float32 [channels, samples] waveform."""
    return {"waveform": to_tensor(waveform)[None], "sample_rate": sample_rate}
