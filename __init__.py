"""Track Overlay: a ComfyUI node pack (this folder) and its engine (``utils``)."""
