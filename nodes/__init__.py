"""The pack's ComfyUI nodes (V3 API); :mod:`.extension` lists them for ComfyUI.

Nothing here imports ComfyUI: the node modules import ``comfy_api`` when
ComfyUI loads them through the pack's ``comfy_entrypoint``.
"""
