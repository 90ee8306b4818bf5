"""Every TRACKS shape core ComfyUI emits is accepted, or refused naming the core node and the fix;
the optional track_opacity key is checked and saved."""

import numpy as np
import pytest
from trackoverlay.utils.tracks.contract import normalize_tracks
from trackoverlay.utils.tracks.track_file import tracks_from_json, tracks_to_json

torch = pytest.importorskip("torch")


def core_generate_tracks(frames=6, count=3, mask_frames=None):
    """What core GenerateTracks / WanMoveTracksFromCoords return (their own code), mask connected or not."""
    path = torch.rand(frames, count, 2) * 100
    if mask_frames is None:
        visibility = torch.ones((frames, count), dtype=torch.bool)
    else:
        track_mask = torch.zeros(mask_frames, 8, 8)
        track_mask[::2, 2, 3] = 1.0
        visibility = (track_mask > 0).any(dim=(1, 2)).unsqueeze(-1)
    return {"track_path": path, "track_visibility": visibility}


def core_concat(tracks_1, tracks_2):
    """Core WanMoveConcatTrack's own code."""
    return {"track_path": torch.cat([tracks_1["track_path"], tracks_2["track_path"]], dim=1),
            "track_visibility": torch.cat([tracks_1["track_visibility"], tracks_2["track_visibility"]], dim=-1)}


def test_plain_core_tracks_pass():
    tracks = normalize_tracks(core_generate_tracks())
    assert tracks.visibility.shape == (6, 3) and tracks.visibility.all()


def test_track_mask_visibility_t_by_1_broadcasts_over_tracks():
    tracks = normalize_tracks(core_generate_tracks(mask_frames=6))
    assert tracks.visibility.shape == (6, 3)
    np.testing.assert_array_equal(tracks.visibility, np.repeat([[1], [0], [1], [0], [1], [0]], 3, axis=1))


@pytest.mark.parametrize("shape, expected", [((6,), "per frame"), ((1, 3), "per track")])
def test_one_dimensional_and_per_track_visibility_broadcast(shape, expected):
    flags = np.arange(np.prod(shape)).reshape(shape) % 2 == 0
    tracks = normalize_tracks({"track_path": np.zeros((6, 3, 2)), "track_visibility": flags})
    want = np.broadcast_to(flags[:, None] if expected == "per frame" else flags, (6, 3))
    np.testing.assert_array_equal(tracks.visibility, want)


def test_track_mask_of_another_length_names_the_core_node_and_the_fix():
    with pytest.raises(ValueError) as caught:
        normalize_tracks(core_generate_tracks(frames=6, mask_frames=4))
    message = str(caught.value)
    for words in ("4 frame flags", "6 frames", "GenerateTracks", "track_mask", "give a track_mask of 6 frames"):
        assert words in message


def test_concatenated_mask_tracks_name_wan_move_concat_track():
    joined = core_concat(core_generate_tracks(mask_frames=6), core_generate_tracks(count=2))
    with pytest.raises(ValueError) as caught:
        normalize_tracks(joined)
    message = str(caught.value)
    for words in ("[6, 3]", "[6, 5]", "WanMoveConcatTrack", "[T, 1]", "without 'track_mask'"):
        assert words in message


def test_opacity_is_checked_and_saved():
    path, visible = np.zeros((2, 2, 2)), np.ones((2, 2), bool)
    opacity = np.array([[0.25, 1.0], [0.5, 0.0]], np.float32)
    tracks = normalize_tracks({"track_path": path, "track_visibility": visible, "track_opacity": opacity})
    np.testing.assert_array_equal(tracks.opacity, opacity)
    np.testing.assert_array_equal(tracks_from_json(tracks_to_json(tracks)).opacity, opacity)
    assert "track_opacity" in tracks.to_comfy()
    with pytest.raises(ValueError, match=r"track_opacity'\] holds values outside 0..1"):
        normalize_tracks({"track_path": path, "track_visibility": visible, "track_opacity": opacity + 0.9})
    with pytest.raises(ValueError, match=r"track_opacity'\] has \[T, N\] = \[2, 3\]"):
        normalize_tracks({"track_path": path, "track_visibility": visible, "track_opacity": np.ones((2, 3))})
