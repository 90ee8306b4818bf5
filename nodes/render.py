"""Rendering (IMAGE + TRACK_OVERLAY -> composited IMAGE, layer IMAGE, alpha MASK) and backend info."""

from __future__ import annotations

from ..utils.core.checks import broadcast_length
from ..utils.core.log import LOGGER
from ..utils.raster.backend import make_renderer, select_backend
from ..utils.raster.batch import render_batch
from .adapters import image_array, overlay_list, progress_callback, to_tensor
from .widgets import CATEGORY, OVERLAY, backend_input, socket


class Render:
    """Draws an overlay over the frames, frame by frame."""

    DISPLAY_NAME = "Render Overlay"
    DESCRIPTION = ("Composites the overlay over the frames (anti-aliased, one frame at a time) and also "
                   "returns the overlay alone as colour + alpha, for compositing elsewhere.")
    CATEGORY = CATEGORY
    RETURN_TYPES = ("IMAGE", "IMAGE", "MASK")
    RETURN_NAMES = ("image", "layer", "layer_alpha")
    OUTPUT_TOOLTIPS = ("The frames with the overlay drawn on them.",
                       "The overlay's colour alone (black where nothing is drawn).",
                       "The overlay's opacity: 1 where it fully covers the frame, 0 where nothing is drawn.")
    FUNCTION = "render"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "image": socket("IMAGE", "The frames to draw on."),
            "overlay": socket(OVERLAY, "What to draw (from Line Links, Boxes or Merge Overlays). Its frame "
                              "count must equal the image batch's, or either must be 1 (it repeats)."),
            "backend": backend_input(),
        }}

    def render(self, image, overlay, backend):
        frames = image_array(image)
        overlays = overlay_list(overlay, "overlay")
        count = broadcast_length(**{"the image batch": len(frames), "the overlay": len(overlays)})
        renderer, info = make_renderer(backend)
        LOGGER.info("Render Overlay: %d frame(s) of %dx%d on %s", count, frames.shape[2], frames.shape[1],
                    info.selected)
        try:
            result = render_batch(frames, overlays, renderer, with_layer=True, progress=progress_callback(count))
        finally:
            renderer.close()  # worker threads, pinned buffers
        return to_tensor(result.frames), to_tensor(result.layer_rgb), to_tensor(result.layer_alpha)


class BackendInfo:
    """Reports which renderer would run, and why."""

    DISPLAY_NAME = "Backend Info"
    DESCRIPTION = ("Reports the renderer a backend choice resolves to (GPU or CPU) with the facts behind it: "
                   "device, memory, driver, CuPy and FAISS versions, or why the GPU is not used.")
    CATEGORY = CATEGORY
    RETURN_TYPES = ("STRING",)
    RETURN_NAMES = ("info",)
    OUTPUT_TOOLTIPS = ("A few lines of text; connect to a text preview node.",)
    FUNCTION = "describe"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"backend": backend_input()}}

    def describe(self, backend):
        try:
            return (select_backend(backend).describe(),)
        except RuntimeError as error:  # 'gpu' without a usable GPU: report instead of failing
            return (f"requested: {backend}\nselected: none ({error})",)


NODES = (Render, BackendInfo)
