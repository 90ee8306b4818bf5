"""The TRACKS contract: normalisation, JSON files, tracks from masks."""

import json

import numpy as np
import pytest
from trackoverlay.utils.tracks.contract import Tracks, fill_hidden, normalize_tracks
from trackoverlay.utils.tracks.from_mask import tracks_from_mask
from trackoverlay.utils.tracks.track_file import load_tracks_json, save_tracks_json, tracks_from_json, tracks_to_json


def make_dict(frames=3, count=4, seed=0, **extra):
    rng = np.random.default_rng(seed)
    result = {
        "track_path": (rng.random((frames, count, 2)) * 100).astype(np.float32),
        "track_visibility": rng.random((frames, count)) > 0.3,
    }
    result.update(extra)
    return result


def test_normalize_numpy_dict_copies_and_does_not_modify_input():
    raw = make_dict(track_size=np.full((3, 4, 2), 8, np.float32), track_confidence=np.ones((3, 4)))
    raw["track_path"][1, 2] = np.nan
    before = {key: value.copy() for key, value in raw.items()}
    tracks = normalize_tracks(raw)
    for key, value in raw.items():
        np.testing.assert_array_equal(value, before[key])
    assert tracks.path.dtype == np.float32 and tracks.visibility.dtype == bool
    assert tracks.size.dtype == np.float32 and tracks.confidence.dtype == np.float32
    assert not np.shares_memory(tracks.path, raw["track_path"])
    assert not tracks.path.flags.writeable
    assert (tracks.frame_count, tracks.track_count) == (3, 4)
    assert not tracks.visibility[1, 2] and np.isnan(tracks.path[1, 2]).all()


def test_normalize_torch_tensors():
    torch = pytest.importorskip("torch")
    path = torch.rand(5, 2, 2) * 50
    visibility = torch.ones(5, 2, dtype=torch.bool)
    tracks = normalize_tracks({"track_path": path, "track_visibility": visibility})
    np.testing.assert_array_equal(tracks.path, path.numpy())
    assert tracks.visibility.all()
    tracks.to_comfy()["track_path"][0, 0, 0] = -1.0  # writable copy, input untouched
    assert path[0, 0, 0] >= 0


def test_to_comfy_round_trip_and_optional_keys():
    tracks = normalize_tracks(make_dict())
    comfy = tracks.to_comfy()
    assert set(comfy) == {"track_path", "track_visibility"}
    again = normalize_tracks(comfy)
    np.testing.assert_array_equal(again.path, tracks.path)
    np.testing.assert_array_equal(again.visibility, tracks.visibility)
    assert normalize_tracks(tracks) is tracks


def test_single_frame_and_integer_inputs_are_accepted():
    tracks = normalize_tracks({"track_path": np.array([[1, 2], [3, 4]]), "track_visibility": [1, 0]})
    assert tracks.path.shape == (1, 2, 2) and tracks.path.dtype == np.float32
    np.testing.assert_array_equal(tracks.visibility, [[True, False]])


@pytest.mark.parametrize("frames, count", [(0, 3), (4, 0), (0, 0)])
def test_empty_tracks_are_valid(frames, count):
    tracks = normalize_tracks({"track_path": np.zeros((frames, count, 2)),
                               "track_visibility": np.zeros((frames, count), bool)})
    assert (tracks.frame_count, tracks.track_count) == (frames, count)
    assert tracks_from_json(tracks_to_json(tracks)).path.shape == (frames, count, 2)


def test_inf_in_path_becomes_invisible_nan():
    raw = make_dict()
    raw["track_visibility"][:] = True
    raw["track_path"][0, 1, 0] = np.inf
    tracks = normalize_tracks(raw)
    assert not tracks.visibility[0, 1] and np.isnan(tracks.path[0, 1]).all()
    assert tracks.visibility.sum() == raw["track_visibility"].size - 1


def test_positions_up_to_100000_px_out_stay_visible_and_farther_ones_are_lost(caplog):
    """The documented limit: ±100,000 px on either axis; beyond it a point is lost tracker output."""
    path = np.array([[[-1e5, 1e5], [99_999.5, -5.0], [100_001.0, 5.0], [5.0, -100_001.0]]], np.float32)
    tracks = Tracks(path, np.ones((1, 4), bool))
    assert tracks.visibility.tolist() == [[True, True, False, False]]
    np.testing.assert_array_equal(tracks.path[0, :2], path[0, :2])
    assert "2 visible point(s) lie beyond ±100,000 pixels" in caplog.text


@pytest.mark.parametrize("value, error, words", [
    ([1, 2], TypeError, ["tracks", "dict"]),
    ({"track_path": np.zeros((2, 3, 2))}, ValueError, ["tracks", "'track_visibility'"]),
    ({"track_visibility": np.zeros((2, 3), bool)}, ValueError, ["'track_path'"]),
    ({"track_path": np.zeros((2, 3, 3)), "track_visibility": np.zeros((2, 3), bool)},
     ValueError, ["tracks['track_path']", "[T, N, 2]", "[2, 3, 3]"]),
    ({"track_path": np.zeros((1, 2, 3, 2)), "track_visibility": np.zeros((2, 3), bool)},
     ValueError, ["tracks['track_path']", "shape"]),
    ({"track_path": np.zeros((2, 3, 2)), "track_visibility": np.zeros((2, 4), bool)},
     ValueError, ["tracks['track_visibility']", "[2, 4]", "[2, 3]"]),
    ({"track_path": np.zeros((2, 3, 2)), "track_visibility": np.zeros((3, 3), bool)},
     ValueError, ["[3, 3]", "[2, 3]"]),
    ({"track_path": np.zeros((2, 3, 2)), "track_visibility": np.zeros((2, 3, 1), bool)},
     ValueError, ["tracks['track_visibility']", "[T, N]"]),
    ({"track_path": np.full((2, 3, 2), "a"), "track_visibility": np.zeros((2, 3), bool)},
     TypeError, ["tracks['track_path']", "dtype"]),
    ({"track_path": np.zeros((2, 3, 2), bool), "track_visibility": np.zeros((2, 3), bool)},
     TypeError, ["tracks['track_path']", "bool"]),
    ({"track_path": [[1, 2], [3]], "track_visibility": [1, 1]}, TypeError, ["tracks['track_path']"]),
    ({"track_path": np.zeros((2, 3, 2)), "track_visibility": np.full((2, 3), 0.5)},
     ValueError, ["tracks['track_visibility']", "0/1"]),
    ({"track_path": np.zeros((2, 3, 2)), "track_visibility": np.full((2, 3), "x")},
     TypeError, ["tracks['track_visibility']"]),
    ({"track_path": np.zeros((2, 3, 2)), "track_visibility": np.zeros((2, 3), bool),
      "track_size": np.full((2, 3, 2), -1.0)}, ValueError, ["tracks['track_size']", "negative"]),
    ({"track_path": np.zeros((2, 3, 2)), "track_visibility": np.zeros((2, 3), bool),
      "track_size": np.ones((2, 4, 2))}, ValueError, ["tracks['track_size']", "[2, 4]"]),
    ({"track_path": np.zeros((2, 3, 2)), "track_visibility": np.ones((2, 3), bool),
      "track_confidence": np.full((2, 3), np.nan)}, ValueError, ["tracks['track_confidence']", "NaN"]),
    ({"track_path": np.zeros((2, 3, 2)), "track_visibility": np.zeros((2, 3), bool),
      "track_confidence": np.ones((2, 3, 2))}, ValueError, ["tracks['track_confidence']", "[T, N]"]),
])
def test_bad_tracks_raise_clear_errors(value, error, words):
    with pytest.raises(error) as caught:
        normalize_tracks(value)
    for word in words:
        assert word in str(caught.value)


def test_error_uses_given_name():
    with pytest.raises(ValueError, match="my_input"):
        normalize_tracks({"track_path": np.zeros((2, 3))}, name="my_input")


def test_nan_size_allowed_in_invisible_slots():
    size = np.ones((2, 3, 2), np.float32)
    size[0, 0] = np.nan
    visibility = np.ones((2, 3), bool)
    visibility[0, 0] = False
    tracks = Tracks(np.zeros((2, 3, 2)), visibility, size)
    assert np.isnan(tracks.size[0, 0]).all()


def test_json_round_trip_is_exact_for_float32():
    rng = np.random.default_rng(1)
    path = (rng.normal(size=(6, 5, 2)) * 1000).astype(np.float32)
    path[0, 0] = [1e-7, 3.4e38]
    path[2, 3] = np.nan
    tracks = Tracks(path, rng.random((6, 5)) > 0.2, rng.random((6, 5, 2)).astype(np.float32) * 30,
                    rng.random((6, 5)).astype(np.float32))
    back = tracks_from_json(tracks_to_json(tracks))
    for field in ("path", "visibility", "size", "confidence"):
        np.testing.assert_array_equal(getattr(back, field), getattr(tracks, field))
    document = json.loads(tracks_to_json(tracks))
    assert document["format"] == "trackoverlay.tracks" and document["version"] == 1
    assert (document["frames"], document["tracks"]) == (6, 5)
    assert document["path"][2][3] == [None, None]


def test_json_uses_short_decimals():
    tracks = Tracks(np.array([[[0.1, 100.3]]], np.float32), [[True]])
    assert '"path":[[[0.1,100.3]]]' in tracks_to_json(tracks)
    assert "size" not in json.loads(tracks_to_json(tracks))


def test_save_and_load_file(tmp_path):
    tracks = normalize_tracks(make_dict(track_size=np.full((3, 4, 2), 5.5, np.float32)))
    target = tmp_path / "tracks.json"
    save_tracks_json(tracks, target)
    loaded = load_tracks_json(target)
    np.testing.assert_array_equal(loaded.path, tracks.path)
    np.testing.assert_array_equal(loaded.size, tracks.size)
    assert loaded.confidence is None


def test_truncated_file_names_file_and_says_not_valid_json(tmp_path):
    target = tmp_path / "cut.json"
    save_tracks_json(normalize_tracks(make_dict()), target)
    target.write_text(target.read_text()[:40])
    with pytest.raises(ValueError, match="not valid JSON") as caught:
        load_tracks_json(target)
    assert str(target) in str(caught.value)


def test_missing_and_binary_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        load_tracks_json(tmp_path / "nope.json")
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_tracks_json(binary)


def _document(**changes):
    document = {"format": "trackoverlay.tracks", "version": 1, "frames": 1, "tracks": 2,
                "path": [[[1, 2], [3, 4]]], "visible": [[1, 0]]}
    document.update(changes)
    return json.dumps(document)


@pytest.mark.parametrize("text, words", [
    ("[1, 2]", ["format"]),
    (_document(format="other"), ["trackoverlay.tracks"]),
    (_document(version=2), ["version 2"]),
    (_document(version=True), ["version True"]),
    (_document(frames=-1), ["'frames'"]),
    (_document(tracks="2"), ["'tracks'"]),
    (_document(path=[[[1, 2]]]), ["'path'", "[1, 1, 2]", "[1, 2, 2]"]),
    (_document(path=[[[1, "a"], [3, 4]]]), ["'path'", "numbers"]),
    (_document(path=[[[1, 2], [3]]]), ["'path'"]),
    (_document(visible=[[1, 2]]), ["'visible'", "0 and 1"]),
    (_document(visible=[[1, None]]), ["'visible'"]),
    (_document(size=[[[1, 1]]]), ["'size'", "shape"]),
    (_document(size=[[[1, -1], [1, 1]]]), ["clip.json['size']", "negative"]),  # named as the file names it
    (json.dumps({"format": "trackoverlay.tracks", "version": 1, "frames": 1, "tracks": 0}), ["'path'"]),
])
def test_malformed_json_documents(text, words):
    with pytest.raises(ValueError) as caught:
        tracks_from_json(text, source="clip.json")
    assert "clip.json" in str(caught.value)
    for word in words:
        assert word in str(caught.value)


def test_track_text_round_trips_and_older_files_have_none():
    tracks = Tracks(np.zeros((2, 3, 2), np.float32), np.ones((2, 3), bool), text=["car", None, "Ωμέγα"])
    assert tracks.text == ("car", "", "Ωμέγα")
    document = json.loads(tracks_to_json(tracks))
    assert document["text"] == ["car", "", "Ωμέγα"] and document["version"] == 1
    assert tracks_from_json(tracks_to_json(tracks)).text == tracks.text
    assert tracks_from_json(_document()).text is None
    assert tracks_from_json(_document(text=["a", None])).text == ("a", "")
    comfy = tracks.to_comfy()
    assert comfy["track_text"] == ["car", "", "Ωμέγα"]
    assert normalize_tracks(comfy).text == tracks.text


@pytest.mark.parametrize("text, error, words", [
    ("car", TypeError, ["clip.json['text'] must be a list of 2 strings"]),  # named as the file names it
    (["a"], ValueError, ["clip.json['text'] has 1 entries but there are 2 tracks"]),
    (["a", 3], ValueError, ["[1] must be a string", "got int"]),
    (["a", "x" * 1001], ValueError, ["[1] must be a string of at most 1,000 characters", "got 1,001 characters"]),
])
def test_bad_track_text_is_refused(text, error, words):
    with pytest.raises(error) as caught:
        tracks_from_json(_document(text=text), source="clip.json")
    for word in ["clip.json", *words]:
        assert word in str(caught.value)


def test_frame_size_round_trips_through_the_file_and_the_comfy_dict():
    tracks = Tracks(np.zeros((2, 3, 2), np.float32), np.ones((2, 3), bool), frame_size=np.array([1280.0, 720.0]))
    assert tracks.frame_size == (1280, 720) and all(type(side) is int for side in tracks.frame_size)
    assert json.loads(tracks_to_json(tracks))["frame_size"] == [1280, 720]
    assert tracks_from_json(tracks_to_json(tracks)).frame_size == (1280, 720)
    assert tracks_from_json(_document()).frame_size is None  # files that predate it
    comfy = tracks.to_comfy()
    assert comfy["track_frame_size"] == [1280, 720]
    assert normalize_tracks(comfy).frame_size == (1280, 720)
    assert normalize_tracks({key: comfy[key] for key in ("track_path", "track_visibility")}).frame_size is None


@pytest.mark.parametrize("size", [[0, 10], [10.5, 10], [10, 10, 10], "1280x720", [True, True], [float("nan"), 4],
                                  [200_000, 10]])
def test_bad_frame_size_is_refused(size):
    with pytest.raises(ValueError) as caught:
        tracks_from_json(_document(frame_size=size), source="clip.json")
    assert "clip.json['frame_size'] must be [width, height]" in str(caught.value)
    with pytest.raises(ValueError, match=r"tracks\['track_frame_size'\] must be \[width, height\]"):
        Tracks(np.zeros((1, 2, 2), np.float32), np.ones((1, 2), bool), frame_size=size)


def test_cuts_round_trip_through_the_file_and_the_comfy_dict():
    tracks = Tracks(np.zeros((30, 2, 2), np.float32), np.ones((30, 2), bool), cuts=np.array([12.0, 20.0]))
    assert tracks.cuts == (12, 20) and all(type(frame) is int for frame in tracks.cuts)
    assert json.loads(tracks_to_json(tracks))["cuts"] == [12, 20]
    assert tracks_from_json(tracks_to_json(tracks)).cuts == (12, 20)
    assert "cuts" not in json.loads(tracks_to_json(Tracks(tracks.path, tracks.visibility)))  # one shot: no key
    assert tracks_from_json(_document()).cuts == ()  # files that predate it
    comfy = tracks.to_comfy()
    assert comfy["track_cuts"] == [12, 20]
    assert normalize_tracks(comfy).cuts == (12, 20)
    assert normalize_tracks({**comfy, "track_cuts": []}).cuts == ()


@pytest.mark.parametrize("cuts", [[0], [30], [20, 12], [12, 12], [12.5], "12", [True], [[12]], 12, [float("nan")]])
def test_bad_cuts_are_refused(cuts):
    document = json.loads(tracks_to_json(Tracks(np.zeros((30, 2, 2), np.float32), np.ones((30, 2), bool))))
    with pytest.raises(ValueError) as caught:
        tracks_from_json(json.dumps({**document, "cuts": cuts}), source="clip.json")
    assert "clip.json['cuts'] must list the frames that start a new shot" in str(caught.value)
    assert "ascending whole numbers in 1..29" in str(caught.value)
    with pytest.raises(ValueError, match=r"tracks\['track_cuts'\] must list the frames"):
        Tracks(np.zeros((30, 2, 2), np.float32), np.ones((30, 2), bool), cuts=cuts)


def test_fill_hidden_holds_last_and_first_known_values():
    values = np.arange(8, dtype=np.float32).reshape(4, 2, 1)
    visible = np.array([[False, False], [True, False], [False, False], [True, False]])
    filled = fill_hidden(values, visible)
    np.testing.assert_array_equal(filled[:, 0, 0], [2, 2, 2, 6])
    np.testing.assert_array_equal(filled[:, 1, 0], values[:, 1, 0])
    assert fill_hidden(np.zeros((0, 3, 2)), np.zeros((0, 3), bool)).shape == (0, 3, 2)


def _disc_masks(centres_per_frame, shape=(60, 80), radius=3):
    rows, cols = np.indices(shape)
    masks = np.zeros((len(centres_per_frame),) + shape, np.float32)
    for t, centres in enumerate(centres_per_frame):
        for x, y in centres:
            masks[t][(cols - x) ** 2 + (rows - y) ** 2 <= radius ** 2] = 1.0
    return masks


def test_tracks_from_mask_keeps_ids_and_measures_boxes():
    frames = [[(10 + 2 * t, 10), (60 - 2 * t, 40)] for t in range(6)]
    masks = _disc_masks(frames)
    before = masks.copy()
    tracks = tracks_from_mask(masks)
    np.testing.assert_array_equal(masks, before)
    assert tracks.track_count == 2 and tracks.visibility.all()
    for t, ((x0, y0), (x1, y1)) in enumerate(frames):
        np.testing.assert_allclose(tracks.path[t, 0], [x0 + 0.5, y0 + 0.5], atol=1e-4)
        np.testing.assert_allclose(tracks.path[t, 1], [x1 + 0.5, y1 + 0.5], atol=1e-4)
    np.testing.assert_array_equal(tracks.size[0], [[7, 7], [7, 7]])


def test_tracks_from_mask_new_ids_gaps_and_cap(caplog):
    frames = [[(10, 10)], [(12, 10), (60, 40)], [(60, 42)], [(14, 10), (60, 44)], [(40, 20)]]
    masks = _disc_masks(frames)
    tracks = tracks_from_mask(masks, max_distance=10)
    # dot 0 vanishes on frame 2 and returns: a new column; the last dot is new too.
    assert tracks.track_count == 4
    np.testing.assert_array_equal(tracks.visibility[:, 0], [1, 1, 0, 0, 0])
    np.testing.assert_array_equal(tracks.visibility[:, 1], [0, 1, 1, 1, 0])
    np.testing.assert_allclose(tracks.path[2, 0], [12.5, 10.5])  # held while hidden
    capped = tracks_from_mask(masks, max_distance=10, max_tracks=2)
    assert capped.track_count == 2
    assert "max_tracks=2" in caplog.text


def test_tracks_from_mask_inputs():
    single = tracks_from_mask(_disc_masks([[(20, 20)]])[0])
    assert single.frame_count == 1 and single.track_count == 1
    uint8 = tracks_from_mask((_disc_masks([[(20, 20)]]) * 255).astype(np.uint8))
    assert uint8.track_count == 1
    tiny = np.zeros((1, 20, 20), np.float32)
    tiny[0, 5, 5] = 1
    assert tracks_from_mask(tiny, min_area=2).track_count == 0
    with pytest.raises(ValueError, match=r"masks.*\[B, H, W\]"):
        tracks_from_mask(np.zeros((1, 2, 3, 4)))
    with pytest.raises(ValueError, match="max_tracks"):
        tracks_from_mask(tiny, max_tracks=0)
    with pytest.raises(ValueError, match="min_area"):
        tracks_from_mask(tiny, min_area=0)


def _checkerboard(frames: int) -> np.ndarray:
    """uint8 [frames, 48, 64, 3] of 8 px squares: corners everywhere."""
    board = ((np.indices((48, 64)) // 8).sum(axis=0) % 2 * 200 + 30).astype(np.uint8)
    return np.repeat(board[None, ..., None], 3, axis=3).repeat(frames, axis=0)


@pytest.mark.parametrize("subject", [np.zeros((48, 64), np.float32), np.zeros((3, 24, 32), bool)])
def test_an_empty_subject_mask_is_refused_with_the_likely_cause(subject):
    from trackoverlay.utils.tracks.detect import detect_tracks

    with pytest.raises(ValueError, match=r"subject masks are all empty .*\(Load Image's mask of an image without "
                                         r"alpha is an empty 64x64 one\), or leave subject unset"):
        detect_tracks(_checkerboard(3), subject=subject)
    some = np.zeros((48, 64), bool)
    some[8:40, 8:56] = True
    assert detect_tracks(_checkerboard(3), subject=some).track_count > 0


def test_motion_on_one_frame_is_refused_with_the_methods_that_work():
    from trackoverlay.utils.tracks.detect import detect_tracks

    with pytest.raises(ValueError, match="method 'motion' .* one frame has no motion; give several frames, or "
                                         "pick corners, blobs or bright for a single image"):
        detect_tracks(_checkerboard(1), method="motion")
    assert detect_tracks(_checkerboard(1), method="corners").track_count > 0
