"""Rendering: IMAGE + TRACK_OVERLAY -> composited IMAGE (Render Overlay) or the layer alone (Render Layer).

ComfyUI caches a node's outputs by its inputs, never by what reads them, so
a node whose outputs depend on their connections can hand a later graph a
stale result. The layer for compositing therefore has its own node, Render
Layer, and Render Overlay pays only for the composite. Render Overlay keeps
its old ``layer``/``layer_alpha`` outputs so saved workflows still run: they
are built only when the running graph reads them, and otherwise carry a
blocker that names Render Layer.
"""

from __future__ import annotations

from comfy_api.latest import io

from ..utils.core.checks import broadcast_length
from ..utils.core.log import LOGGER
from ..utils.draw.units import DEFAULT_LOOK, UNITS, pixels_per_unit
from ..utils.raster.backend import make_renderer, select_backend
from ..utils.raster.batch import render_batch, render_layers
from ..utils.raster.glow import GLOW_RADIUS_PERCENT, GLOW_STRENGTH, Glow
from .adapters import (
    connected_outputs,
    image_array,
    interrupt_check,
    not_built,
    overlay_list,
    progress_callback,
    to_tensor,
)
from .widgets import RENDER_CATEGORY, Overlay, backend_input, float_input

_LAYER_TIP = "The overlay's colour alone (straight, not premultiplied; black where nothing is drawn)."
_ALPHA_TIP = ("The overlay's opacity: 1 where it fully covers the frame, 0 where nothing is drawn (core Join "
              "Image with Alpha expects the inverse: put Invert Mask between).")
_OVERLAY_IN = ("What to draw (from Line Links, Boxes or Merge Overlays). Its frame count must equal the image "
               "batch's, or either must be 1 (it repeats).")
_LAYER_SLOTS = (1, 2)


def glow_inputs() -> list:
    """The glow widgets (after the inputs of saved workflows, so optional)."""
    return [float_input("glow_radius", DEFAULT_LOOK["glow_radius"], GLOW_RADIUS_PERCENT,
                        "How far the glow reaches around everything drawn, in % of the frame height (the blur's "
                        "sigma is a third of it). Used only with a glow strength above 0.", optional=True),
            float_input("glow_strength", 0.0, GLOW_STRENGTH, "Glow (bloom): a soft blurred halo under the overlay, "
                        "this many times the blurred overlay (its opacity kept at most 1). 0 = no glow.",
                        step=0.05, optional=True)]


def glow_spec(radius_percent: float, strength: float, height: int) -> Glow:
    """The glow of the widgets for frames ``height`` pixels tall."""
    return Glow(radius=radius_percent * pixels_per_unit(UNITS[1], height), strength=strength)


def _renderer(backend: str, what: str, count: int, width: int, height: int):
    renderer, info = make_renderer(backend, stop_check=interrupt_check())
    LOGGER.info("%s: %d frame(s) of %dx%d on %s", what, count, width, height, info.selected)
    return renderer


class RenderOverlayNode(io.ComfyNode):
    """Draws an overlay over the frames, frame by frame."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="TrackOverlayRender",
            display_name="Render Overlay",
            category=RENDER_CATEGORY,
            search_aliases=["tracking overlay", "draw overlay", "composite overlay", "plexus render", "glow",
                            "bloom"],
            description="Composites the overlay over the frames (anti-aliased, one frame at a time), with an "
                        "optional glow. For the overlay alone (to composite elsewhere) use Render Layer.",
            inputs=[
                io.Image.Input("image", tooltip="The frames to draw on."),
                Overlay.Input("overlay", tooltip=_OVERLAY_IN),
                backend_input(),
                *glow_inputs(),
            ],
            outputs=[
                io.Image.Output("image", tooltip="The frames with the overlay drawn on them."),
                io.Image.Output("layer", tooltip=f"{_LAYER_TIP} Kept for saved workflows; built only when "
                                "connected. New graphs: use Render Layer."),
                io.Mask.Output("layer_alpha", tooltip=f"{_ALPHA_TIP} Kept for saved workflows; built only when "
                               "connected. New graphs: use Render Layer."),
            ],
            hidden=[io.Hidden.unique_id, io.Hidden.dynprompt],
        )

    @classmethod
    def execute(cls, image, overlay, backend, glow_radius=DEFAULT_LOOK["glow_radius"],
                glow_strength=0.0) -> io.NodeOutput:
        frames = image_array(image)
        overlays = overlay_list(overlay, "overlay")
        glow = glow_spec(glow_radius, glow_strength, frames.shape[1])
        count = broadcast_length(**{"the image batch": len(frames), "the overlay": len(overlays)})
        used = connected_outputs(cls.hidden)
        with_layer = used is None or bool(used.intersection(_LAYER_SLOTS))
        renderer = _renderer(backend, "Render Overlay", count, frames.shape[2], frames.shape[1])
        try:
            result = render_batch(frames, overlays, renderer, with_layer=with_layer,
                                  progress=progress_callback(count), glow=glow)
        finally:
            renderer.close()  # worker threads, pinned buffers
        if not with_layer:
            blocked = not_built("Render Overlay built no layer: its layer outputs were not connected when this "
                                "result was made (and ComfyUI reuses it). Use Render Layer for the layer, or "
                                "change a Render Overlay input to run it again.")
            return io.NodeOutput(to_tensor(result.frames), blocked, blocked)
        return io.NodeOutput(to_tensor(result.frames), to_tensor(result.layer_rgb), to_tensor(result.layer_alpha))


class RenderLayerNode(io.ComfyNode):
    """The overlay alone, as colour + alpha, for compositing elsewhere."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="TrackOverlayRenderLayer",
            display_name="Render Layer",
            category=RENDER_CATEGORY,
            search_aliases=["overlay layer", "alpha layer", "transparent overlay", "overlay matte", "rgba overlay"],
            description="Renders the overlay alone, as colour + alpha, the size of the given frames, for "
                        "compositing elsewhere (e.g. Invert Mask + Join Image with Alpha + Save Image gives a "
                        "transparent PNG). The frames are only measured, not drawn on.",
            inputs=[
                io.Image.Input("image", tooltip="The frames the layer will go over: only their size and count "
                               "are used."),
                Overlay.Input("overlay", tooltip=_OVERLAY_IN),
                backend_input(),
                *glow_inputs(),
            ],
            outputs=[
                io.Image.Output("layer", tooltip=_LAYER_TIP),
                io.Mask.Output("layer_alpha", tooltip=_ALPHA_TIP),
            ],
        )

    @classmethod
    def execute(cls, image, overlay, backend, glow_radius=DEFAULT_LOOK["glow_radius"],
                glow_strength=0.0) -> io.NodeOutput:
        count, height, width = image_array(image).shape[:3]
        overlays = overlay_list(overlay, "overlay")
        glow = glow_spec(glow_radius, glow_strength, height)
        count = broadcast_length(**{"the image batch": count, "the overlay": len(overlays)})
        renderer = _renderer(backend, "Render Layer", count, width, height)
        try:
            rgb, alpha = render_layers(overlays, count, height, width, renderer, progress=progress_callback(count),
                                       glow=glow)
        finally:
            renderer.close()
        return io.NodeOutput(to_tensor(rgb), to_tensor(alpha))


class BackendInfoNode(io.ComfyNode):
    """Reports which renderer would run, and why."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="TrackOverlayBackendInfo",
            display_name="Backend Info",
            category=RENDER_CATEGORY,
            search_aliases=["gpu info", "cuda check", "cupy"],
            description="Reports the renderer a backend choice resolves to (GPU or CPU) with the facts behind "
                        "it: device, memory, driver, CuPy and FAISS versions, or why the GPU is not used.",
            inputs=[backend_input()],
            outputs=[io.String.Output("info", tooltip="A few lines of text; connect to a text preview node.")],
        )

    @classmethod
    def execute(cls, backend) -> io.NodeOutput:
        try:
            return io.NodeOutput(select_backend(backend).describe())
        except RuntimeError as error:  # 'gpu' without a usable GPU: report instead of failing
            return io.NodeOutput(f"requested: {backend}\nselected: none ({error})")


NODES = (RenderOverlayNode, RenderLayerNode, BackendInfoNode)
