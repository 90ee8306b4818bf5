"""Shared test setup: GPU tests run only where CuPy can use a GPU."""

import pytest
from trackoverlay.utils.raster.backend import probe_gpu


def pytest_collection_modifyitems(config, items):
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    usable, reason = probe_gpu()
    if usable:
        return
    skip = pytest.mark.skip(reason=f"no usable GPU: {reason}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)
