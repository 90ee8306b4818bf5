"""Track Overlay: a ComfyUI node pack (this folder) and its engine (``utils``).

ComfyUI loads the nodes through :func:`comfy_entrypoint` (V3 API). Importing
the package itself pulls in neither ComfyUI nor torch, so the engine works on
its own.
"""


MINIMUM_COMFYUI = "0.11.0"  # as requires-comfyui in pyproject.toml


async def comfy_entrypoint():
    """The pack's ComfyExtension (called by ComfyUI when it loads custom nodes); an older ComfyUI gets an
    error that says which version the nodes need."""
    _check_comfyui()
    from .nodes.extension import TrackOverlayExtension

    return TrackOverlayExtension()


def _check_comfyui() -> None:
    """Raise ``ImportError`` naming the version needed when this ComfyUI lacks what the nodes use."""
    import inspect

    from comfy_api.latest import io

    missing = []
    if not hasattr(io, "Tracks"):
        missing.append("the TRACKS type (io.Tracks, ComfyUI 0.5.0)")
    if "search_aliases" not in inspect.signature(io.Schema).parameters:
        missing.append("search aliases (io.Schema search_aliases, ComfyUI 0.11.0)")
    if missing:
        raise ImportError(f"Track Overlay needs ComfyUI {MINIMUM_COMFYUI} or newer; this ComfyUI lacks "
                          f"{' and '.join(missing)}. Update ComfyUI (git pull in its folder, or Update ComfyUI in "
                          "ComfyUI-Manager), then restart it.")
