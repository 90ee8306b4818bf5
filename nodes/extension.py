"""The pack's ComfyExtension: the node classes ComfyUI registers."""

from __future__ import annotations

from comfy_api.latest import ComfyExtension

from . import demo, labels, overlays, render, tracks, video

NODES = tracks.NODES + overlays.NODES + labels.NODES + render.NODES + video.NODES + demo.NODES


class TrackOverlayExtension(ComfyExtension):
    async def get_node_list(self) -> list:
        return list(NODES)
