"""Compiling and caching the pack's CUDA kernels (CuPy, imported on first use)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np


@functools.lru_cache(maxsize=None)
def cuda_module(source: Path, name_expressions: tuple = (), options: tuple = ()):
    """The compiled kernels of ``source`` (compiled once per process, cached on disk by CuPy); ``options``
    are NVRTC's, added to C++17."""
    import cupy

    return cupy.RawModule(code=Path(source).read_text(), options=("--std=c++17", *options),
                          name_expressions=name_expressions)


@functools.lru_cache(maxsize=None)
def cuda_kernel(source: Path, name: str, name_expressions: tuple = (), options: tuple = ()):
    """One kernel of :func:`cuda_module` by name (template instances by their expression)."""
    return cuda_module(source, name_expressions, options).get_function(name)


def pinned_array(shape, dtype=np.uint8) -> np.ndarray:
    """A new NumPy array of ``shape`` in page-locked host memory (CuPy's pool): copies to and from the GPU run
    asynchronously (inside CUDA graphs too), about four times faster than from pageable memory."""
    import cupy

    count = int(np.prod(shape))
    memory = cupy.cuda.alloc_pinned_memory(max(count * np.dtype(dtype).itemsize, 1))
    return np.frombuffer(memory, dtype, count).reshape(shape)
