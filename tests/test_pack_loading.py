"""The pack as ComfyUI loads it: a folder imported under its own name, node schemas, templates."""

import importlib.util
import inspect
import json
import math
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
FOLDER_NAME = "ComfyUI-TrackOverlay"  # what a user's custom_nodes folder may be called; not 'trackoverlay'
WIDGET_TYPES = {"INT", "FLOAT", "STRING", "BOOLEAN"}
CORE_TYPES = {"IMAGE", "MASK", "STRING", "VIDEO"}
PACK_TYPES = {"TRACKS", "TRACK_OVERLAY", "BOUNDING_BOXES"}

LOAD_LIKE_COMFYUI = f"""
import importlib.util, json, sys
before = set(sys.modules)
spec = importlib.util.spec_from_file_location({FOLDER_NAME!r}, {str(REPO / "__init__.py")!r},
                                              submodule_search_locations=[{str(REPO)!r}])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
new = sorted(set(sys.modules) - before)
print(json.dumps({{"nodes": sorted(module.NODE_CLASS_MAPPINGS), "names": module.NODE_DISPLAY_NAME_MAPPINGS,
                  "new_modules": new}}))
"""


def load_pack(name: str):
    """Import the repository folder as ComfyUI does (``spec_from_file_location`` under ``name``)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "__init__.py", submodule_search_locations=[str(REPO)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pack():
    module = load_pack(FOLDER_NAME)
    yield module
    for name in [name for name in sys.modules if name == FOLDER_NAME or name.startswith(FOLDER_NAME + ".")]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def fresh_import():
    """What a clean interpreter imports when it loads the pack like ComfyUI."""
    result = subprocess.run([sys.executable, "-c", LOAD_LIKE_COMFYUI], capture_output=True, text=True,
                            cwd="/", timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def node_specs(pack):
    return sorted(pack.NODE_CLASS_MAPPINGS.items())


def test_pack_imports_under_its_folder_name_without_torch_cupy_or_comfy(fresh_import):
    heavy = [name for name in fresh_import["new_modules"]
             if name.split(".")[0] in {"torch", "cupy", "cupyx", "comfy", "folder_paths", "faiss"}]
    assert heavy == []
    assert "trackoverlay" not in fresh_import["new_modules"]  # relative imports only
    assert f"{FOLDER_NAME}.nodes.render" in fresh_import["new_modules"]
    assert fresh_import["nodes"] == sorted(fresh_import["names"])


def test_node_ids_and_display_names(pack):
    assert len(pack.NODE_CLASS_MAPPINGS) == 10
    for node_id, node in node_specs(pack):
        assert node_id.startswith("TrackOverlay") and pack.NODE_DISPLAY_NAME_MAPPINGS[node_id].strip()


def check_widget(where: str, kind, options: dict) -> None:
    """A widget's declaration is one ComfyUI accepts, with its default inside its bounds."""
    if isinstance(kind, list):
        assert kind and all(isinstance(option, str) for option in kind), where
        assert options.get("default", kind[0]) in kind, where
        return
    assert isinstance(kind, str) and kind == kind.upper() and kind, where
    if kind not in WIDGET_TYPES:
        assert kind in CORE_TYPES | PACK_TYPES, f"{where}: unknown type {kind}"
        assert "default" not in options, where
        return
    default = options["default"]
    expected = {"INT": int, "FLOAT": (int, float), "STRING": str, "BOOLEAN": bool}[kind]
    assert isinstance(default, expected) and not (kind != "BOOLEAN" and isinstance(default, bool)), where
    if kind in ("INT", "FLOAT"):
        assert options["min"] <= default <= options["max"], where
        assert options["step"] > 0 and all(math.isfinite(options[key]) for key in ("min", "max")), where
    if kind == "INT":
        assert all(isinstance(options[key], int) for key in ("min", "max", "step")), where


def test_every_input_is_declared_validly_with_a_tooltip(pack):
    for node_id, node in node_specs(pack):
        spec = node.INPUT_TYPES()
        json.dumps(spec)  # /object_info serves it as JSON
        assert set(spec) <= {"required", "optional"} and spec["required"], node_id
        for group in spec.values():
            for name, declaration in group.items():
                where = f"{node_id}.{name}"
                assert isinstance(declaration, tuple) and len(declaration) == 2, where
                kind, options = declaration
                assert isinstance(options.get("tooltip"), str) and options["tooltip"].strip(), where
                check_widget(where, kind, options)


def test_outputs_category_description_and_function(pack):
    for node_id, node in node_specs(pack):
        assert node.CATEGORY == "Track Overlay", node_id
        assert isinstance(node.DESCRIPTION, str) and len(node.DESCRIPTION) > 20, node_id
        assert isinstance(node.RETURN_TYPES, tuple) and node.RETURN_TYPES, node_id
        assert all(kind in CORE_TYPES | PACK_TYPES for kind in node.RETURN_TYPES), node_id
        assert len(node.RETURN_NAMES) == len(node.RETURN_TYPES) == len(node.OUTPUT_TOOLTIPS), node_id
        assert all(isinstance(tip, str) and tip.strip() for tip in node.OUTPUT_TOOLTIPS), node_id
        assert callable(getattr(node, node.FUNCTION, None)), node_id


def test_function_signature_matches_the_inputs(pack):
    """Required inputs bind without defaults; optional ones may be left out."""
    for node_id, node in node_specs(pack):
        spec = node.INPUT_TYPES()
        function = inspect.signature(getattr(node(), node.FUNCTION))
        function.bind(**{name: None for group in spec.values() for name in group})
        function.bind(**{name: None for name in spec["required"]})
        missing_one = dict.fromkeys(list(spec["required"])[1:])
        with pytest.raises(TypeError):
            function.bind(**missing_one)


def test_nodes_keep_no_state_on_instances(pack):
    for node_id, node in node_specs(pack):
        assert "__init__" not in vars(node) and vars(node()) == {}, node_id


# ------------------------------------------------------------ workflow templates


def templates():
    return sorted((REPO / "example_workflows").glob("*.json"))


def test_no_workflow_json_in_examples():
    assert list((REPO / "examples").glob("*.json")) == []


def test_templates_exist_for_video_and_image():
    names = {path.name for path in templates()}
    assert {"track_overlay_video.json", "track_overlay_image.json"} <= names


@pytest.mark.parametrize("path", templates(), ids=lambda path: path.name)
def test_template_links_and_our_widget_values_are_consistent(pack, path):
    workflow = json.loads(path.read_text(encoding="utf-8"))
    nodes = {node["id"]: node for node in workflow["nodes"]}
    assert workflow["last_node_id"] == max(nodes) and workflow["last_link_id"] == len(workflow["links"])
    for link_id, source, out_slot, target, in_slot, kind in workflow["links"]:
        assert link_id in nodes[source]["outputs"][out_slot]["links"]
        assert nodes[target]["inputs"][in_slot]["link"] == link_id
        assert nodes[source]["outputs"][out_slot]["type"] == kind == nodes[target]["inputs"][in_slot]["type"]
    ours = [node for node in nodes.values() if node["type"].startswith("TrackOverlay")]
    assert {"TrackOverlayDetectTracks", "TrackOverlayRender"} <= {node["type"] for node in ours}
    for node in ours:
        cls = pack.NODE_CLASS_MAPPINGS[node["type"]]
        spec = cls.INPUT_TYPES()
        declared = [(name, declaration) for group in ("required", "optional")
                    for name, declaration in spec.get(group, {}).items()]
        widgets = [(name, declaration) for name, declaration in declared
                   if isinstance(declaration[0], list) or declaration[0] in WIDGET_TYPES]
        assert len(node["widgets_values"]) == len(widgets), node["type"]
        for (name, (kind, options)), value in zip(widgets, node["widgets_values"]):
            check_widget(f"{path.name}:{node['type']}.{name}", kind, {**options, "default": value})
        sockets = {name for name, declaration in declared} - {name for name, _ in widgets}
        assert {entry["name"] for entry in node["inputs"]} == sockets, node["type"]
        assert [entry["name"] for entry in node["outputs"]] == list(cls.RETURN_NAMES), node["type"]
        assert [entry["type"] for entry in node["outputs"]] == list(cls.RETURN_TYPES), node["type"]
