"""Detect Tracks as ComfyUI runs it: the new widgets, the subject MASK, fades in the output, limit messages."""

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fake_comfy import WIDGET_TYPES, install_comfy_api  # noqa: E402

install_comfy_api()

from synthetic import make_clip, on_mask_share  # noqa: E402
from trackoverlay.nodes.overlays import TrailsNode  # noqa: E402
from trackoverlay.nodes.tracks import DetectTracksNode as NODE  # noqa: E402
from trackoverlay.utils.tracks.contract import normalize_tracks  # noqa: E402
from trackoverlay.utils.tracks.detect import DETECT_RANGES, TrackDetector  # noqa: E402

INPUTS = {item.id: item for item in NODE.GET_SCHEMA().inputs}


def detect(**inputs):
    """Execute the node with its widget defaults, overridden by ``inputs``; returns its NodeOutput."""
    widgets = {name: item.default for name, item in INPUTS.items() if issubclass(item.Parent, WIDGET_TYPES)}
    return NODE.PREPARE_CLASS_CLONE(None).execute(**{**widgets, **inputs})


@pytest.fixture(scope="module")
def clip():
    return make_clip(frames=24, cuts=(12,), pan=(1.0, 0.5))


def frames_of(clip):
    return torch.from_numpy(clip.frames.astype(np.float32) / 255.0)


def test_every_detector_setting_is_a_widget_with_the_engine_default_and_range():
    for name, parameter in inspect.signature(TrackDetector).parameters.items():
        widget = INPUTS[name]
        assert widget.default == parameter.default and widget.tooltip, name
        if name in DETECT_RANGES:
            assert widget.min == DETECT_RANGES[name].low, name
    assert "motion" in INPUTS["method"].options
    assert INPUTS["subject"].get_io_type() == "MASK" and INPUTS["subject"].optional


def test_defaults_give_faded_tracks_on_every_frame(clip):
    (tracks,) = detect(image=frames_of(clip), max_points=30, min_distance=10.0).args
    assert tracks["track_opacity"].dtype == torch.float32
    checked = normalize_tracks(tracks)
    assert (checked.visibility.sum(axis=1) > 0).all()
    assert not (checked.visibility[:12].any(axis=0) & checked.visibility[12:].any(axis=0)).any()


def test_the_scene_cut_travels_with_the_tracks_and_ends_every_trail(clip):
    (tracks,) = detect(image=frames_of(clip), max_points=30, min_distance=10.0).args
    assert tracks["track_cuts"] == [12]
    widgets = {item.id: item.default for item in TrailsNode.GET_SCHEMA().inputs
               if issubclass(item.Parent, WIDGET_TYPES)}
    (overlay,) = TrailsNode.PREPARE_CLASS_CLONE(None).execute(tracks=tracks, **widgets).args
    drawn = [entry.primitive_count for entry in overlay]
    assert drawn[11] >= 20 and drawn[13] >= 20
    assert drawn[12] == 0  # the old shot's trails end at the cut; the new shot's points have one position


def test_subject_mask_input(clip):
    mask = torch.from_numpy(clip.subject.astype(np.float32))
    (tracks,) = detect(image=frames_of(clip), subject=mask, max_points=30, min_distance=8.0).args
    assert on_mask_share(normalize_tracks(tracks), clip.subject) >= 0.95
    with pytest.raises(ValueError, match="subject has 3 masks but there are 24 frames"):
        detect(image=frames_of(clip), subject=mask[:3])


def test_reaching_max_tracks_is_said_in_the_node(clip):
    result = detect(image=frames_of(clip), max_points=10, max_tracks=12, min_distance=10.0, min_track_length=1)
    message = result.ui.as_dict()["text"][0]
    assert "max_tracks=12 was reached at frame 12" in message and "0 for no limit" in message
    (tracks,) = result.args
    assert tracks["track_path"].shape[1] == 12
