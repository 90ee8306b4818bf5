"""Shared test fixtures; GPU tests run only where CuPy can use a GPU.

Fixtures (one definition each):

- ``cpu_renderer``: a :class:`CpuRenderer` with 2 worker threads, shared by the session.
- ``gpu_renderer``: the :class:`GpuRenderer` likewise, for tests marked ``gpu``.
- ``renderer``: every backend in turn, ``cpu`` then ``gpu``: rendering tests that
  take it run once per backend and compare each with the coverage model,
  the goldens or their own exact values. The ``gpu`` run is marked ``gpu``
  and skipped (with the reason) where CuPy cannot use a GPU.
- ``demo_clip``: a small deterministic :class:`DemoClip` (160x96, 8 frames at 12 fps, 6 dots).
- ``demo_clip_file``: ``demo_clip`` encoded as an MP4 (near-lossless, crf 10).

Test modules mirror the engine's packages (tests/tracks, tests/graph,
tests/draw, tests/raster, tests/video; tests/examples for the scripts) and
have unique basenames; the node tests sit here in tests/. Shared helpers
(scenes.py, bad_videos.py, fake_comfy.py, make_goldens.py) sit here too, on the
pytest path (pyproject ``pythonpath``).
"""

import pytest
from trackoverlay.utils.raster.backend import probe_gpu
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.tracks.demo import DemoClip
from trackoverlay.utils.video.io import VideoWriter

BACKENDS = [pytest.param("cpu", id="cpu"), pytest.param("gpu", id="gpu", marks=pytest.mark.gpu)]


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


@pytest.fixture(scope="session")
def cpu_renderer():
    renderer = CpuRenderer(workers=2)
    yield renderer
    renderer.close()


@pytest.fixture(scope="session")
def gpu_renderer():
    """The GPU renderer (2 host threads); only tests marked ``gpu`` may ask for it (it imports CuPy)."""
    from trackoverlay.utils.raster.gpu import GpuRenderer

    renderer = GpuRenderer(workers=2)
    yield renderer
    renderer.close()


@pytest.fixture(scope="session", params=BACKENDS)
def renderer(request):
    """``cpu_renderer``, then ``gpu_renderer`` (``renderer.name`` says which)."""
    return request.getfixturevalue(f"{request.param}_renderer")


@pytest.fixture(scope="session")
def demo_clip():
    return DemoClip(width=160, height=96, frame_count=8, fps=12, dots=6, seed=3)


@pytest.fixture(scope="session")
def demo_clip_file(demo_clip, tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "dots.mp4"
    with VideoWriter(path, fps=demo_clip.fps, crf=10) as writer:
        for frame in demo_clip.frames():
            writer.write(frame)
    return path
