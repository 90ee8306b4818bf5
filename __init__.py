"""Track Overlay: a ComfyUI node pack (this folder) and its engine (``utils``).

ComfyUI loads the nodes through :func:`comfy_entrypoint` (V3 API). Importing
the package itself pulls in neither ComfyUI nor torch, so the engine works on
its own.
"""


async def comfy_entrypoint():
    """The pack's ComfyExtension (called by ComfyUI when it loads custom nodes)."""
    from .nodes.extension import TrackOverlayExtension

    return TrackOverlayExtension()
