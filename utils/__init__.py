"""Track Overlay engine: functions over NumPy/CuPy arrays, no ComfyUI imports."""
