"""Backend selection: which renderer runs, and why.

Nothing here touches a GPU at import time; CuPy is imported and probed on
first use only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..core.log import LOGGER

BACKENDS = ("auto", "cpu", "gpu")


@dataclass(frozen=True)
class BackendChoice:
    """What a backend request resolved to, with the facts behind it."""

    requested: str
    selected: str
    reason: str
    gpu: dict = field(default_factory=dict)

    def describe(self) -> str:
        """A few human-readable lines for logs and the Backend Info node."""
        lines = [f"requested: {self.requested}", f"selected: {self.selected} ({self.reason})"]
        lines += [f"{key}: {value}" for key, value in self.gpu.items()]
        return "\n".join(lines)


@functools.lru_cache(maxsize=1)
def probe_gpu() -> tuple[bool, dict | str]:
    """(True, device facts) when CuPy can run a kernel on a GPU, else (False, reason)."""
    try:
        import cupy
    except Exception as error:  # ImportError, or a broken CUDA install raising anything
        return False, f"CuPy is not importable ({type(error).__name__}: {error})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        if count < 1:
            return False, "CuPy found no CUDA device"
        device = cupy.cuda.Device()
        props = cupy.cuda.runtime.getDeviceProperties(device.id)
        free, total = device.mem_info
        int(cupy.arange(4).sum())  # compiles and runs a kernel
        return True, {
            "device": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
            "compute_capability": device.compute_capability,
            "memory_total_mib": total // 2**20,
            "memory_free_mib": free // 2**20,
            "driver_version": cupy.cuda.runtime.driverGetVersion(),
            "runtime_version": cupy.cuda.runtime.runtimeGetVersion(),
            "cupy_version": cupy.__version__,
        }
    except Exception as error:
        return False, f"CuPy cannot use the GPU ({type(error).__name__}: {error})"


def select_backend(requested: str = "auto") -> BackendChoice:
    """Resolve ``auto``/``cpu``/``gpu`` to the backend that will run.

    ``auto`` falls back to the CPU with the reason; ``gpu`` raises
    ``RuntimeError`` with the reason and the fix when no GPU is usable.
    """
    if requested not in BACKENDS:
        raise ValueError(f"backend {requested!r} is not one of {', '.join(BACKENDS)}")
    if requested == "cpu":
        return BackendChoice("cpu", "cpu", "requested")
    ok, facts = probe_gpu()
    if ok:
        return BackendChoice(requested, "gpu", "CuPy runs on the GPU", gpu=facts)
    if requested == "gpu":
        raise RuntimeError(f"backend 'gpu' was requested but {facts}. Install CuPy for your CUDA "
                           "version (pip install cupy-cuda12x or cupy-cuda13x) or choose backend 'cpu'.")
    _log_cpu_once(str(facts))
    return BackendChoice(requested, "cpu", str(facts))


@functools.cache
def _log_cpu_once(reason: str) -> None:
    """Say once per reason (not at every render) why the CPU renders."""
    LOGGER.info("Track Overlay renders on the CPU: %s", reason)


def make_renderer(requested: str = "auto", stop_check=None):
    """``(renderer, info)`` for the resolved backend (``render``/``render_layer`` API).

    A GPU renderer falls back to the CPU, with one warning, if the GPU fails mid-run. The CPU renderer calls
    ``stop_check`` as it draws (see :class:`~.cpu.CpuRenderer`).
    """
    from .cpu import CpuRenderer

    info = select_backend(requested)
    if info.selected == "gpu":
        from .fallback import FallbackRenderer
        from .gpu import GpuRenderer

        return FallbackRenderer(GpuRenderer(), lambda: CpuRenderer(stop_check=stop_check)), info
    return CpuRenderer(stop_check=stop_check), info
