"""The pack as ComfyUI loads it: a folder imported under its own name, V3 node schemas, templates.

ComfyUI is not installed here; ``fake_comfy`` stands in for ``comfy_api.latest``
(same names and keyword arguments as ComfyUI's V3 API), so every declaration
is built and validated the way ComfyUI's loader does it.
"""

import asyncio
import importlib.util
import json
import math
import pathlib
import subprocess
import sys

import pytest
from fake_comfy import WIDGET_TYPES, Hidden, install_comfy_api

install_comfy_api()

from trackoverlay.utils.draw.styles import BoxStyle, LabelStyle, LineStyle, TrailStyle  # noqa: E402
from trackoverlay.utils.graph.neighbours import GraphParams  # noqa: E402
from trackoverlay.utils.tracks.demo import DemoClip  # noqa: E402
from trackoverlay.utils.tracks.detect import TrackDetector  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
TESTS = pathlib.Path(__file__).resolve().parent
FOLDER_NAME = "ComfyUI-TrackOverlay"  # what a user's custom_nodes folder may be called; not 'trackoverlay'
CATEGORIES = {"Track Overlay/Tracks", "Track Overlay/Draw", "Track Overlay/Render", "Track Overlay/Video"}
CORE_TYPES = {"IMAGE", "MASK", "STRING", "VIDEO", "TRACKS", "AUDIO"}
PACK_TYPES = {"TRACK_OVERLAY", "BOUNDING_BOXES"}
HEAVY = {"torch", "cupy", "cupyx", "comfy", "folder_paths", "faiss", "freetype"}

# The inputs (in order) and outputs (names, types) of every node before the move to V3: saved workflows
# refer to these by name and position, so they must stay; new inputs may only be appended, as optional.
SAVED = {
    "TrackOverlayBackendInfo": (["backend"], ["info"], ["STRING"]),
    "TrackOverlayBoxes": (["tracks", "units", "size", "size_mode", "stroke_width", "color", "color_mode", "opacity",
                           "fill_opacity", "fill_color", "roundness", "shape", "bracket_length", "reference",
                           "boxes"], ["overlay"], ["TRACK_OVERLAY"]),
    "TrackOverlayDetectTracks": (["image", "max_points", "min_distance", "sensitivity", "method", "redetect_interval",
                                  "point_size"], ["tracks"], ["TRACKS"]),
    "TrackOverlayLineLinks": (["tracks", "mode", "k", "radius", "max_length", "delta_y_cap", "degree_cap",
                               "hysteresis", "units", "width", "color", "color_end", "color_mode", "gradient",
                               "opacity", "pattern", "dash_length", "gap_length", "curve", "bend", "bend_side",
                               "reference"], ["overlay"], ["TRACK_OVERLAY"]),
    "TrackOverlayMerge": (["overlay_a", "overlay_b", "overlay_c", "overlay_d"], ["overlay"], ["TRACK_OVERLAY"]),
    "TrackOverlayRender": (["image", "overlay", "backend"], ["image", "layer", "layer_alpha"],
                           ["IMAGE", "IMAGE", "MASK"]),
    "TrackOverlayTracksFromJSON": (["json_or_path"], ["tracks"], ["TRACKS"]),
    "TrackOverlayTracksFromMask": (["mask", "threshold", "min_area", "max_distance"], ["tracks"], ["TRACKS"]),
    "TrackOverlayTracksToJSON": (["tracks", "filename_prefix"], ["json"], ["STRING"]),
    "TrackOverlayVideo": (["video", "backend", "draw_lines", "draw_boxes", "units", "detect_max_points",
                           "detect_min_distance", "detect_sensitivity", "detect_method", "detect_redetect_interval",
                           "link_mode", "link_k", "link_radius", "link_max_length", "link_delta_y_cap",
                           "link_degree_cap", "link_hysteresis", "line_width", "line_color", "line_color_end",
                           "line_color_mode", "line_gradient", "line_opacity", "line_pattern", "line_dash_length",
                           "line_gap_length", "line_curve", "line_bend", "line_bend_side", "box_size",
                           "box_size_mode", "box_stroke_width", "box_color", "box_color_mode", "box_opacity",
                           "box_fill_opacity", "box_fill_color", "box_roundness", "box_shape",
                           "box_bracket_length", "crf", "preset", "max_frames", "tracks"], ["video"], ["VIDEO"]),
}

LOAD_LIKE_COMFYUI = f"""
import asyncio, importlib.util, json, sys
before = set(sys.modules)
if {{with_fake}}:
    sys.path.insert(0, {str(TESTS)!r})
    import fake_comfy
    fake_comfy.install_comfy_api()
spec = importlib.util.spec_from_file_location({FOLDER_NAME!r}, {str(REPO / "__init__.py")!r},
                                              submodule_search_locations=[{str(REPO)!r}])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
imported = sorted(set(sys.modules) - before)
nodes = []
if {{with_fake}}:
    extension = asyncio.run(module.comfy_entrypoint())
    asyncio.run(extension.on_load())
    nodes = [node.GET_SCHEMA().node_id for node in asyncio.run(extension.get_node_list())]
print(json.dumps({{"imported": imported, "loaded": sorted(set(sys.modules) - before), "nodes": nodes}}))
"""


def load_in_a_fresh_interpreter(with_fake: bool) -> dict:
    code = LOAD_LIKE_COMFYUI.replace("{with_fake}", str(with_fake))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_package_imports_without_comfyui_torch_or_cupy():
    loaded = load_in_a_fresh_interpreter(with_fake=False)
    assert [name for name in loaded["loaded"] if name.split(".")[0] in HEAVY | {"comfy_api"}] == []
    assert f"{FOLDER_NAME}.nodes.render" not in loaded["loaded"]  # nodes load only through the entrypoint


def test_comfyui_loads_every_node_under_another_folder_name_without_torch_or_cupy():
    loaded = load_in_a_fresh_interpreter(with_fake=True)
    assert [name for name in loaded["loaded"] if name.split(".")[0] in HEAVY] == []
    assert "trackoverlay" not in loaded["loaded"]  # relative imports only
    assert f"{FOLDER_NAME}.nodes.render" in loaded["loaded"]
    assert sorted(loaded["nodes"]) == sorted(set(SAVED) | {"TrackOverlayRenderLayer", "TrackOverlayDemoClip",
                                                            "TrackOverlayTrails", "TrackOverlayLabels"})


@pytest.mark.parametrize("lacking", ["Tracks", "search_aliases"])
def test_an_older_comfyui_is_told_which_version_the_nodes_need(monkeypatch, lacking):
    import dataclasses

    import fake_comfy

    if lacking == "Tracks":
        monkeypatch.delattr(fake_comfy.io, "Tracks")
        names = "the TRACKS type"
    else:
        fields = [(f.name, f.type, f) for f in dataclasses.fields(fake_comfy.Schema) if f.name != "search_aliases"]
        monkeypatch.setattr(fake_comfy.io, "Schema", dataclasses.make_dataclass("Schema", fields))
        names = "search aliases"
    module = load_pack(FOLDER_NAME + "-old")
    try:
        with pytest.raises(ImportError, match=rf"Track Overlay needs ComfyUI 0\.11\.0 or newer; this ComfyUI lacks "
                                              rf"{names} .*Update ComfyUI"):
            asyncio.run(module.comfy_entrypoint())
    finally:
        for name in [name for name in sys.modules if name.startswith(FOLDER_NAME + "-old")]:
            del sys.modules[name]


def test_the_comfyui_version_the_entrypoint_asks_for_is_the_one_the_package_declares():
    declared = (REPO / "pyproject.toml").read_text().split('requires-comfyui = ">=', 1)[1].split('"', 1)[0]
    assert load_pack(FOLDER_NAME + "-version").MINIMUM_COMFYUI == declared
    del sys.modules[FOLDER_NAME + "-version"]


# ------------------------------------------------------------------ node schemas


def load_pack(name: str):
    """Import the repository folder as ComfyUI does (``spec_from_file_location`` under ``name``)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "__init__.py", submodule_search_locations=[str(REPO)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def schemas():
    """{node_id: (class, schema)} of the nodes the extension hands ComfyUI."""
    module = load_pack(FOLDER_NAME)
    extension = asyncio.run(module.comfy_entrypoint())
    nodes = asyncio.run(extension.get_node_list())
    yield {node.GET_SCHEMA().node_id: (node, node.GET_SCHEMA()) for node in nodes}
    for name in [name for name in sys.modules if name == FOLDER_NAME or name.startswith(FOLDER_NAME + ".")]:
        del sys.modules[name]


def widget_inputs(schema) -> list:
    return [item for item in schema.inputs if issubclass(item.Parent, WIDGET_TYPES)]


def check_widget(where: str, widget, value) -> None:
    """A widget value ComfyUI accepts: of the widget's type, within its bounds / options."""
    kind = widget.get_io_type()
    if kind == "COMBO":
        assert widget.options and all(isinstance(option, str) for option in widget.options), where
        assert value in widget.options, f"{where}: {value!r} not in {widget.options}"
        return
    expected = {"INT": int, "FLOAT": (int, float), "STRING": str, "BOOLEAN": bool}[kind]
    assert isinstance(value, expected) and not (kind != "BOOLEAN" and isinstance(value, bool)), where
    if kind in ("INT", "FLOAT"):
        assert widget.min <= value <= widget.max, f"{where}: {value} outside {widget.min}..{widget.max}"
        assert widget.step > 0 and all(math.isfinite(bound) for bound in (widget.min, widget.max)), where
    if kind == "INT":
        assert all(isinstance(bound, int) for bound in (widget.min, widget.max, widget.step)), where


def test_node_classes_do_not_share_engine_class_names(schemas):
    for node_id, (node, _) in schemas.items():
        assert node.__name__.endswith("Node"), node_id


def test_every_declaration_is_complete_and_valid(schemas):
    for node_id, (node, schema) in schemas.items():
        assert node_id.startswith("TrackOverlay") and schema.display_name.strip(), node_id
        assert schema.category in CATEGORIES, node_id
        assert len(schema.description) > 20 and schema.search_aliases, node_id
        assert all(isinstance(alias, str) and alias.strip() for alias in schema.search_aliases), node_id
        json.dumps(schema.v1_inputs())  # /object_info serves it as JSON
        for item in schema.inputs:
            where = f"{node_id}.{item.id}"
            assert isinstance(item.tooltip, str) and item.tooltip.strip(), where
            kind = item.get_io_type()
            if issubclass(item.Parent, WIDGET_TYPES):
                check_widget(where, item, item.default)
                assert item.id not in ("seed", "noise_seed"), f"{where}: the frontend adds a randomize control"
            else:
                assert kind in CORE_TYPES | PACK_TYPES, f"{where}: unknown type {kind}"
        for output in schema.outputs:
            assert output.io_type in CORE_TYPES | PACK_TYPES, node_id
            assert isinstance(output.tooltip, str) and output.tooltip.strip(), f"{node_id} output {output.id}"


def test_search_aliases_cover_what_users_type(schemas):
    aliases = {alias for _, schema in schemas.values() for alias in schema.search_aliases}
    assert {"blob track", "plexus", "tracking overlay", "point tracker"} <= aliases


def test_saved_workflows_keep_their_inputs_and_outputs(schemas):
    for node_id, (inputs, output_names, output_types) in SAVED.items():
        _, schema = schemas[node_id]
        names = [item.id for item in schema.inputs]
        assert names[:len(inputs)] == inputs, node_id
        assert all(item.optional for item in schema.inputs[len(inputs):]), node_id
        assert [output.display_name for output in schema.outputs] == output_names, node_id
        assert [output.io_type for output in schema.outputs] == output_types, node_id


def test_pack_types_are_declared_once(schemas):
    declared = {}
    for _, schema in schemas.values():
        for item in [*schema.inputs, *schema.outputs]:
            if item.io_type in PACK_TYPES:
                declared.setdefault(item.io_type, set()).add(item.Parent)
    assert set(declared) == PACK_TYPES and all(len(parents) == 1 for parents in declared.values())


def test_render_asks_for_its_graph_and_the_file_reader_fingerprints(schemas):
    _, schema = schemas["TrackOverlayRender"]
    assert {Hidden.unique_id, Hidden.dynprompt} <= set(schema.hidden)
    reader, _ = schemas["TrackOverlayTracksFromJSON"]
    assert "fingerprint_inputs" in vars(reader)


def test_the_bounding_boxes_input_stays_a_socket(schemas):
    """Frontends from ComfyUI 0.27 draw a widget for the core BOUNDING_BOXES type unless the input forces a
    socket; that widget would take a saved widget value and shift every later one (templates break)."""
    _, schema = schemas["TrackOverlayBoxes"]
    boxes = next(item for item in schema.inputs if item.id == "boxes")
    assert boxes.get_io_type() == "BOUNDING_BOXES" and boxes.extra_dict == {"forceInput": True}


# ------------------------------------------------- widget ranges = engine ranges


def widget_extremes(schema, prefix: str = "") -> dict:
    """{name: (min, max)} of the number widgets whose id starts with ``prefix`` (prefix removed)."""
    return {item.id[len(prefix):]: (item.min, item.max) for item in widget_inputs(schema)
            if item.get_io_type() in ("INT", "FLOAT") and item.id.startswith(prefix)}


def accepts_both_ends(make, extremes: dict) -> None:
    for name, bounds in extremes.items():
        for value in bounds:
            make(name, value)  # raises if the engine refuses what the widget offers


def test_style_and_graph_widgets_offer_only_values_the_engine_accepts(schemas):
    _, links = schemas["TrackOverlayLineLinks"]
    extremes = widget_extremes(links)
    accepts_both_ends(lambda name, value: GraphParams(**{name: value}),
                      {name: extremes[name] for name in GraphParams.__dataclass_fields__ if name in extremes})
    for pattern in ("solid", "dashed", "dotted"):  # dash/gap lengths may be 0 only for some patterns
        accepts_both_ends(lambda name, value, pattern=pattern: LineStyle(pattern=pattern, **{name: value}),
                          {name: extremes[name] for name in LineStyle.__dataclass_fields__ if name in extremes})
    _, boxes = schemas["TrackOverlayBoxes"]
    accepts_both_ends(lambda name, value: BoxStyle(**{name: value}), widget_extremes(boxes))
    _, trails = schemas["TrackOverlayTrails"]
    accepts_both_ends(lambda name, value: TrailStyle(**{name: value}), widget_extremes(trails))
    _, labels = schemas["TrackOverlayLabels"]
    accepts_both_ends(lambda name, value: LabelStyle(**{name: value}), widget_extremes(labels))


def test_dash_and_gap_widgets_start_above_zero_because_the_engine_refuses_zero():
    with pytest.raises(ValueError, match="dash length must be a number in"):
        LineStyle(pattern="dashed", dash_length=0.0)
    with pytest.raises(ValueError, match="gap length must be a number in"):
        LineStyle(pattern="dotted", gap_length=0.0)


def test_detect_mask_demo_and_video_widgets_offer_only_values_the_engine_accepts(schemas):
    import numpy as np
    from trackoverlay.utils.tracks.detect import detect_tracks
    from trackoverlay.utils.tracks.from_mask import tracks_from_mask
    from trackoverlay.utils.video.io import CRF_RANGE

    _, detect = schemas["TrackOverlayDetectTracks"]
    frame = np.zeros((1, 16, 16, 3), np.uint8)
    extremes = widget_extremes(detect)
    accepts_both_ends(lambda name, value: detect_tracks(frame, **{name: value}),
                      {name: bounds for name, bounds in extremes.items() if name != "max_points"})
    accepts_both_ends(lambda name, value: TrackDetector(**{name: value}), {"max_points": extremes["max_points"]})
    _, mask = schemas["TrackOverlayTracksFromMask"]
    accepts_both_ends(lambda name, value: tracks_from_mask(np.zeros((1, 8, 8)), **{name: value}),
                      widget_extremes(mask))
    _, demo = schemas["TrackOverlayDemoClip"]
    extremes = widget_extremes(demo)
    extremes["seed"] = extremes.pop("variant")
    accepts_both_ends(lambda name, value: DemoClip(**{name: value}), extremes)
    _, video = schemas["TrackOverlayVideo"]
    assert widget_extremes(video)["crf"] == CRF_RANGE[:2]
    accepts_both_ends(lambda name, value: GraphParams(**{name: value}), widget_extremes(video, "link_"))
    accepts_both_ends(lambda name, value: BoxStyle(**{name: value}), widget_extremes(video, "box_"))


# ------------------------------------------------------------ workflow templates


def templates():
    return sorted((REPO / "example_workflows").glob("*.json"))


def test_no_workflow_json_in_examples():
    assert list((REPO / "examples").glob("*.json")) == []  # ComfyUI would list them as templates


def test_templates_cover_image_video_layer_and_look_and_each_has_a_thumbnail():
    names = {path.stem for path in templates()}
    assert {"track_overlay_image", "track_overlay_video", "track_overlay_layer", "track_overlay_look"} <= names
    for path in templates():
        thumbnail = path.with_suffix(".jpg")  # ComfyUI's frontend asks for <template name>.jpg
        assert thumbnail.is_file() and thumbnail.read_bytes()[:3] == b"\xff\xd8\xff", path.name


@pytest.mark.parametrize("path", templates(), ids=lambda path: path.name)
def test_template_needs_no_input_file_and_matches_the_schemas(schemas, path):
    workflow = json.loads(path.read_text(encoding="utf-8"))
    nodes = {node["id"]: node for node in workflow["nodes"]}
    assert workflow["last_node_id"] == max(nodes) and workflow["last_link_id"] == max(link[0] for link in
                                                                                      workflow["links"])
    for link_id, source, out_slot, target, in_slot, kind in workflow["links"]:
        assert link_id in nodes[source]["outputs"][out_slot]["links"]
        assert nodes[target]["inputs"][in_slot]["link"] == link_id
        assert nodes[source]["outputs"][out_slot]["type"] == kind == nodes[target]["inputs"][in_slot]["type"]
    loaders = [node["type"] for node in nodes.values() if node["type"].startswith("Load")]
    assert loaders == [], f"{path.name} needs input files: {loaders}"
    ours = [node for node in nodes.values() if node["type"].startswith("TrackOverlay")]
    assert "TrackOverlayDemoClip" in {node["type"] for node in ours}
    for node in ours:
        _, schema = schemas[node["type"]]
        widgets = widget_inputs(schema)
        assert len(node["widgets_values"]) == len(widgets), node["type"]
        for widget, value in zip(widgets, node["widgets_values"]):
            check_widget(f"{path.name}:{node['type']}.{widget.id}", widget, value)
        linked = {entry["name"] for entry in node.get("inputs", []) if entry.get("link") is not None}
        sockets = {item.id for item in schema.inputs if not issubclass(item.Parent, WIDGET_TYPES)}
        required = {item.id for item in schema.inputs if not item.optional} & sockets
        assert required <= linked <= sockets, node["type"]
        outputs = [(entry["name"], entry["type"]) for entry in node["outputs"]]
        assert outputs == [(output.display_name, output.io_type) for output in schema.outputs], node["type"]
