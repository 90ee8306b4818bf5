"""Detect Tracks as ComfyUI runs it: the new widgets, the subject MASK, fades in the output, limit messages."""

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from synthetic import make_clip, on_mask_share  # noqa: E402
from trackoverlay.nodes import NODE_CLASS_MAPPINGS  # noqa: E402
from trackoverlay.utils.tracks.contract import normalize_tracks  # noqa: E402
from trackoverlay.utils.tracks.detect import TrackDetector  # noqa: E402

NODE = NODE_CLASS_MAPPINGS["TrackOverlayDetectTracks"]


def detect(**inputs):
    spec = NODE.INPUT_TYPES()["required"]
    widgets = {name: options["default"] for name, (_, options) in spec.items() if "default" in options}
    return NODE().detect(**{**widgets, **inputs})


@pytest.fixture(scope="module")
def clip():
    return make_clip(frames=24, cuts=(12,), pan=(1.0, 0.5))


def frames_of(clip):
    return torch.from_numpy(clip.frames.astype(np.float32) / 255.0)


def test_every_detector_setting_is_a_widget_with_the_engine_default():
    spec = NODE.INPUT_TYPES()
    for name, parameter in inspect.signature(TrackDetector).parameters.items():
        default = parameter.default
        assert spec["required"][name][1]["default"] == default, name
        assert spec["required"][name][1]["tooltip"]
    assert "motion" in spec["required"]["method"][0]
    assert spec["optional"]["subject"][0] == "MASK"


def test_defaults_give_faded_tracks_on_every_frame(clip):
    (tracks,) = detect(image=frames_of(clip), max_points=30, min_distance=10.0)
    assert tracks["track_opacity"].dtype == torch.float32
    checked = normalize_tracks(tracks)
    assert (checked.visibility.sum(axis=1) > 0).all()
    assert not (checked.visibility[:12].any(axis=0) & checked.visibility[12:].any(axis=0)).any()


def test_subject_mask_input(clip):
    mask = torch.from_numpy(clip.subject.astype(np.float32))
    (tracks,) = detect(image=frames_of(clip), subject=mask, max_points=30, min_distance=8.0)
    assert on_mask_share(normalize_tracks(tracks), clip.subject) >= 0.95
    with pytest.raises(ValueError, match="subject has 3 masks but there are 24 frames"):
        detect(image=frames_of(clip), subject=mask[:3])


def test_reaching_max_tracks_is_said_in_the_node(clip):
    result = detect(image=frames_of(clip), max_points=10, max_tracks=12, min_distance=10.0, min_track_length=1)
    message = result["ui"]["text"][0]
    assert "max_tracks=12 was reached at frame 12" in message and "0 for no limit" in message
    (tracks,) = result["result"]
    assert tracks["track_path"].shape[1] == 12
