"""Stand-ins for the ComfyUI modules the nodes import lazily (ComfyUI is not installed in CI)."""

import sys
import types


class Interrupted(Exception):
    """Stands in for comfy.model_management.InterruptProcessingException."""


def install_progress_bar(monkeypatch):
    """Install a fake ``comfy.utils.ProgressBar`` that records its updates.

    Returns the class (set ``stop_at`` to a frame number to make that update
    raise :class:`Interrupted`, as ComfyUI's interrupt does) and the list of
    recorded calls: ``("total", n)`` then ``(value, total)`` per update.
    """
    calls = []

    class ProgressBar:
        stop_at = None

        def __init__(self, total):
            calls.append(("total", total))

        def update_absolute(self, value, total=None):
            calls.append((value, total))
            if value == ProgressBar.stop_at:
                raise Interrupted("Processing interrupted")

    comfy = types.ModuleType("comfy")
    comfy.utils = types.ModuleType("comfy.utils")
    comfy.utils.ProgressBar = ProgressBar
    monkeypatch.setitem(sys.modules, "comfy", comfy)
    monkeypatch.setitem(sys.modules, "comfy.utils", comfy.utils)
    return ProgressBar, calls
