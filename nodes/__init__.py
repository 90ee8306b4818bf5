"""The pack's ComfyUI nodes (V1 API); ids are ``TrackOverlay`` + class name."""

from . import overlays, render, tracks, video

_NODES = tracks.NODES + overlays.NODES + render.NODES + video.NODES

NODE_CLASS_MAPPINGS = {f"TrackOverlay{node.__name__}": node for node in _NODES}
NODE_DISPLAY_NAME_MAPPINGS = {f"TrackOverlay{node.__name__}": node.DISPLAY_NAME for node in _NODES}
