"""Overlays built on a worker process of their own: the same video as built here, the builder (its memory of
earlier frames included) moving there mid-render, a worker that does not start leaving the building here, and one
that dies failing the render."""

import dataclasses
import logging
import os
import pickle
import signal
import time
from types import SimpleNamespace

import numpy as np
import pytest
from test_processes import assert_same_video, render
from test_yuv import SPEC
from trackoverlay.utils.draw.display_list import GlyphAtlas, Polylines
from trackoverlay.utils.draw.styles import LabelStyle, LineStyle, TrailStyle
from trackoverlay.utils.graph.neighbours import GraphParams
from trackoverlay.utils.video import building, processes

RICH = dataclasses.replace(SPEC, graph=GraphParams(k=2, hysteresis=0.4),
                           lines=LineStyle(width=2.0, color_mode="speed", curve="quadratic"),
                           trails=TrailStyle(length=4), labels=LabelStyle())
"""Hysteresis, colours by speed, trails and labels: every kind of memory of earlier frames a builder holds."""


@pytest.fixture
def apart(monkeypatch):
    """``apart(handover)``: overlays built on a process whatever the renderer, the worker ready before the
    first frame and taking the builder from group ``handover`` on (as when it is ready mid-render); returns the
    building processes made, each with the groups it was asked for and those its worker built."""
    made, start, group = [], building.BuildingProcess.__init__, building.BuildingProcess.group

    def use(handover: int) -> list:
        def starting(self, builder, stop_check=None):
            start(self, builder, stop_check)
            while not self._worker.ready:
                time.sleep(0.01)
            self.asked, self.on_worker = 0, 0
            made.append(self)

        def grouping(self, frames, indices=None):
            self.asked += 1
            if self.asked <= handover:
                return self._builder.group(frames, indices)  # built here, as while the worker starts
            self.on_worker += self._on_worker()
            return group(self, frames, indices)

        monkeypatch.setattr(building, "builds_apart", lambda renderer, frames: True)
        monkeypatch.setattr(building.BuildingProcess, "__init__", starting)
        monkeypatch.setattr(building.BuildingProcess, "group", grouping)
        return made

    return use


@pytest.mark.parametrize("handover", [0, 5], ids=["from-the-start", "mid-render"])
def test_overlays_built_on_a_process_equal_overlays_built_here(tmp_path, apart, handover):
    here = render(tmp_path, "here", spec=RICH)
    made = apart(handover)
    there = render(tmp_path, "there", spec=RICH)
    assert len(made) == 1 and made[0].asked == 12 and made[0].on_worker == 12 - handover
    assert made[0]._worker.process.poll() is not None  # the worker left with the render
    assert_same_video(here, there)


def test_a_building_worker_that_does_not_start_leaves_the_building_here(tmp_path, apart, monkeypatch, caplog):
    here = render(tmp_path, "here", spec=RICH)
    monkeypatch.setattr(building, "builds_apart", lambda renderer, frames: True)
    monkeypatch.setattr(processes, "_BOOT", "import sys; sys.exit(3)")
    with caplog.at_level(logging.WARNING, logger="trackoverlay"):
        there = render(tmp_path, "there", spec=RICH)
    assert "a building process did not start (it exited with code 3 before it was ready); the overlays are " \
           "built here" in caplog.text
    assert_same_video(here, there)


def test_a_building_worker_that_dies_fails_the_render(tmp_path, apart, monkeypatch):
    made = apart(0)
    ask = processes.WorkerProcess.ask

    def dying(self, job, stop_check):
        if job[0] == "group" and made[0].asked == 6:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
        return ask(self, job, stop_check)

    monkeypatch.setattr(processes.WorkerProcess, "ask", dying)
    with pytest.raises(RuntimeError, match=r"a building process \(pid \d+\) ended with exit code -9 while it worked"):
        render(tmp_path, "died", spec=RICH)
    assert not (tmp_path / "died.mp4").exists()


def test_overlays_are_built_apart_on_the_gpu_for_long_renders_only():
    gpu, cpu = SimpleNamespace(name="gpu"), SimpleNamespace(name="cpu")
    assert building.builds_apart(gpu, processes.PROCESS_MIN_FRAMES)
    assert building.builds_apart(gpu, None)  # unknown length: counted as long
    assert not building.builds_apart(gpu, processes.PROCESS_MIN_FRAMES - 1)
    assert not building.builds_apart(cpu, 10_000)  # on the CPU drawing sets the pace


def test_display_lists_from_another_process_stay_read_only_and_keep_their_atlas_apart():
    """Unpickled (as from a building worker), a display list's arrays are read-only as made here, and a glyph
    atlas keeps a key no atlas made here has (renderers cache atlases by it)."""
    lines = Polylines(np.array([[0, 0], [5, 5]], np.float32), np.array([0, 2]), np.ones(1), np.ones((1, 4)),
                      np.ones((1, 4)), np.zeros((1, 2)), np.zeros(1, bool))
    copied = pickle.loads(pickle.dumps(lines, pickle.HIGHEST_PROTOCOL))
    assert not copied.vertices.flags.writeable and not copied.width.flags.writeable
    np.testing.assert_array_equal(copied.vertices, lines.vertices)
    atlas = GlyphAtlas(np.full((3, 4), 7, np.uint8))
    moved = pickle.loads(pickle.dumps(atlas))
    assert moved.key == atlas.key and not moved.coverage.flags.writeable
    assert GlyphAtlas(np.zeros((2, 2), np.uint8)).key not in (atlas.key, moved.key)
