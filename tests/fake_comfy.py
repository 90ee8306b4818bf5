"""Stand-ins for the ComfyUI modules the nodes import (ComfyUI is not installed in CI).

No package on PyPI provides ComfyUI's ``comfy_api``, so :func:`install_comfy_api`
installs a minimal ``comfy_api.latest`` holding just what the nodes use. It
follows ComfyUI's own V3 API (``comfy_api/latest/_io.py``) as of 0.11.0, the
oldest version the pack supports: the same class names, the same keyword
arguments (one that 0.11.0 does not accept, such as ``Schema``'s later
``essentials_category``, is a ``TypeError`` here too), schema validation
(unique ids) and the same ``as_dict`` keys that ``/object_info`` serves. It
imports no torch.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field
from enum import Enum
from fractions import Fraction
from typing import Any


class Interrupted(Exception):
    """Stands in for comfy.model_management.InterruptProcessingException."""


def install_progress_bar(monkeypatch):
    """Install a fake ``comfy.utils.ProgressBar`` that records its updates.

    Returns the class (set ``stop_at`` to a frame number to make that update
    raise :class:`Interrupted`, as ComfyUI's interrupt does) and the list of
    recorded calls: ``("total", n)`` then ``(value, total)`` per update.
    """
    calls = []

    class ProgressBar:
        stop_at = None

        def __init__(self, total):
            calls.append(("total", total))

        def update_absolute(self, value, total=None):
            calls.append((value, total))
            if value == ProgressBar.stop_at:
                raise Interrupted("Processing interrupted")

    comfy = types.ModuleType("comfy")
    comfy.utils = types.ModuleType("comfy.utils")
    comfy.utils.ProgressBar = ProgressBar
    monkeypatch.setitem(sys.modules, "comfy", comfy)
    monkeypatch.setitem(sys.modules, "comfy.utils", comfy.utils)
    return ProgressBar, calls


# ----------------------------------------------------------------- comfy_api.latest.io


def _prune(values: dict) -> dict:
    return {key: value for key, value in values.items() if value is not None}


class Input:
    def __init__(self, id: str, display_name=None, optional=False, tooltip=None, lazy=None,
                 extra_dict=None, raw_link=None, advanced=None):
        self.id, self.display_name, self.optional, self.tooltip, self.lazy = id, display_name, optional, tooltip, lazy
        self.extra_dict = extra_dict or {}
        self.rawLink, self.advanced = raw_link, advanced

    @property
    def io_type(self):
        return self.Parent.io_type

    def as_dict(self) -> dict:
        return _prune({"display_name": self.display_name, "optional": self.optional, "tooltip": self.tooltip,
                       "lazy": self.lazy, "rawLink": self.rawLink, "advanced": self.advanced}) | _prune(self.extra_dict)

    def get_io_type(self):
        return self.io_type


class WidgetInput(Input):
    def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None, default=None,
                 socketless=None, widget_type=None, force_input=None, extra_dict=None, raw_link=None, advanced=None):
        super().__init__(id, display_name, optional, tooltip, lazy, extra_dict, raw_link, advanced)
        self.default, self.socketless = default, socketless
        self.widget_type, self.force_input = widget_type, force_input

    def as_dict(self) -> dict:
        return super().as_dict() | _prune({"default": self.default, "socketless": self.socketless,
                                           "widgetType": self.widget_type, "forceInput": self.force_input})


class Output:
    def __init__(self, id=None, display_name=None, tooltip=None, is_output_list=False):
        self.id, self.display_name, self.tooltip, self.is_output_list = id, display_name or id, tooltip, is_output_list

    @property
    def io_type(self):
        return self.Parent.io_type

    def as_dict(self) -> dict:
        return _prune({"display_name": self.display_name or self.id, "tooltip": self.tooltip,
                       "is_output_list": self.is_output_list})


def comfytype(io_type: str):
    """Binds ``io_type`` to a type class and its Input/Output classes (fresh subclasses, as ComfyUI copies them)."""
    def decorate(cls):
        cls.io_type = io_type
        for name in ("Input", "Output"):
            base = getattr(cls, name, None)
            if base is not None:
                setattr(cls, name, type(name, (base,), {"Parent": cls}))
        return cls
    return decorate


class ComfyTypeIO:
    io_type: str | None = None
    Input = Input
    Output = Output


def Custom(io_type: str):
    """A ComfyType for a custom io_type."""
    @comfytype(io_type)
    class CustomComfyType(ComfyTypeIO):
        pass
    return CustomComfyType


@comfytype("BOOLEAN")
class Boolean(ComfyTypeIO):
    class Input(WidgetInput):
        def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None, default=None,
                     label_on=None, label_off=None, socketless=None, force_input=None, extra_dict=None,
                     raw_link=None, advanced=None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input,
                             extra_dict, raw_link, advanced)
            self.label_on, self.label_off = label_on, label_off

        def as_dict(self):
            return super().as_dict() | _prune({"label_on": self.label_on, "label_off": self.label_off})


@comfytype("INT")
class Int(ComfyTypeIO):
    class Input(WidgetInput):
        def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None, default=None,
                     min=None, max=None, step=None, control_after_generate=None,
                     display_mode=None, socketless=None, force_input=None, extra_dict=None, raw_link=None,
                     advanced=None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input,
                             extra_dict, raw_link, advanced)
            self.min, self.max, self.step = min, max, step
            self.control_after_generate, self.display_mode = control_after_generate, display_mode

        def as_dict(self):
            return super().as_dict() | _prune({"min": self.min, "max": self.max, "step": self.step,
                                               "control_after_generate": self.control_after_generate,
                                               "display": self.display_mode})


@comfytype("FLOAT")
class Float(ComfyTypeIO):
    class Input(WidgetInput):
        def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None, default=None,
                     min=None, max=None, step=None, round=None,
                     display_mode=None, gradient_stops=None, socketless=None, force_input=None, extra_dict=None,
                     raw_link=None, advanced=None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input,
                             extra_dict, raw_link, advanced)
            self.min, self.max, self.step, self.round = min, max, step, round
            self.display_mode, self.gradient_stops = display_mode, gradient_stops

        def as_dict(self):
            return super().as_dict() | _prune({"min": self.min, "max": self.max, "step": self.step,
                                               "round": self.round, "display": self.display_mode,
                                               "gradient_stops": self.gradient_stops})


@comfytype("STRING")
class String(ComfyTypeIO):
    class Input(WidgetInput):
        def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None, multiline=False,
                     placeholder=None, default=None, dynamic_prompts=None, socketless=None,
                     force_input=None, extra_dict=None, raw_link=None, advanced=None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, force_input,
                             extra_dict, raw_link, advanced)
            self.multiline, self.placeholder, self.dynamic_prompts = multiline, placeholder, dynamic_prompts

        def as_dict(self):
            return super().as_dict() | _prune({"multiline": self.multiline, "placeholder": self.placeholder,
                                               "dynamicPrompts": self.dynamic_prompts})


@comfytype("COMBO")
class Combo(ComfyTypeIO):
    class Input(WidgetInput):
        def __init__(self, id, options=None, display_name=None, optional=False, tooltip=None, lazy=None,
                     default=None, control_after_generate=None, upload=None, image_folder=None, remote=None,
                     socketless=None, extra_dict=None, raw_link=None, advanced=None):
            super().__init__(id, display_name, optional, tooltip, lazy, default, socketless, None, None, extra_dict,
                             raw_link, advanced)
            self.options, self.control_after_generate = options, control_after_generate
            self.upload, self.image_folder, self.remote = upload, image_folder, remote

        def as_dict(self):
            return super().as_dict() | _prune({"multiselect": False, "options": self.options,
                                               "control_after_generate": self.control_after_generate})


Image = Custom("IMAGE")
Mask = Custom("MASK")
Video = Custom("VIDEO")
Tracks = Custom("TRACKS")
Audio = Custom("AUDIO")
WIDGET_TYPES = (Boolean, Int, Float, String, Combo)


class Hidden(str, Enum):
    unique_id = "UNIQUE_ID"
    prompt = "PROMPT"
    extra_pnginfo = "EXTRA_PNGINFO"
    dynprompt = "DYNPROMPT"
    auth_token_comfy_org = "AUTH_TOKEN_COMFY_ORG"
    api_key_comfy_org = "API_KEY_COMFY_ORG"


class HiddenHolder:
    """What ``cls.hidden`` holds during execution; a hidden value not given is None."""

    def __init__(self, values=None):
        for hidden in Hidden:
            setattr(self, hidden.name, (values or {}).get(hidden))


@dataclass
class Schema:
    node_id: str
    display_name: str | None = None
    category: str = "sd"
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    hidden: list = field(default_factory=list)
    description: str = ""
    search_aliases: list = field(default_factory=list)
    is_input_list: bool = False
    is_output_node: bool = False
    is_deprecated: bool = False
    is_experimental: bool = False
    is_api_node: bool = False
    price_badge: Any = None
    not_idempotent: bool = False
    enable_expand: bool = False
    accept_all_inputs: bool = False

    def validate(self):
        """As ComfyUI's: input ids unique, output ids unique."""
        for kind, ids in (("Input", [i.id for i in self.inputs]), ("Output", [o.id for o in self.outputs])):
            repeated = sorted({name for name in ids if ids.count(name) > 1})
            if repeated:
                raise ValueError(f"{kind} ids must be unique, but {repeated} are not.")

    def finalize(self):
        if self.is_output_node:
            self.hidden += [h for h in (Hidden.prompt, Hidden.extra_pnginfo) if h not in self.hidden]
        for index, output in enumerate(self.outputs):
            if output.id is None:
                output.id = f"_{index}_{output.io_type}_"

    def v1_inputs(self) -> dict:
        """The ``input`` entry of /object_info: {required, optional, hidden} of (type, options)."""
        info = {"required": {}}
        for item in self.inputs:
            options = item.as_dict()
            options.pop("optional", None)
            info.setdefault("optional" if item.optional else "required", {})[item.id] = (item.get_io_type(), options)
        for hidden in self.hidden:
            info.setdefault("hidden", {})[hidden.name] = (hidden.value,)
        return info


class NodeOutput:
    def __init__(self, *args, ui=None, expand=None, block_execution=None):
        self.args, self.ui, self.expand, self.block_execution = args, ui, expand, block_execution

    @property
    def result(self):
        return self.args if self.args else None

    def __getitem__(self, index):
        return self.args[index]


class ComfyNode:
    """Base of V3 nodes: classmethods only; ``hidden`` is set on a clone per execution."""

    hidden = HiddenHolder()

    @classmethod
    def define_schema(cls) -> Schema:
        raise NotImplementedError

    @classmethod
    def execute(cls, **kwargs) -> NodeOutput:
        raise NotImplementedError

    @classmethod
    def GET_SCHEMA(cls) -> Schema:
        if "define_schema" not in vars(cls) or "execute" not in vars(cls):
            raise TypeError(f"{cls.__name__} must define define_schema and execute")
        schema = cls.define_schema()
        schema.finalize()
        schema.validate()
        return schema

    @classmethod
    def PREPARE_CLASS_CLONE(cls, hidden_inputs=None):
        """A subclass whose ``hidden`` holds ``hidden_inputs`` ({Hidden: value}), as ComfyUI runs nodes."""
        return type(cls.__name__, (cls,), {"hidden": HiddenHolder(hidden_inputs)})


class FolderType(str, Enum):
    """comfy_api.latest.io.FolderType: where a saved file lies."""

    input = "input"
    output = "output"
    temp = "temp"


io = types.ModuleType("comfy_api.latest.io")
for _name, _value in {
    "Input": Input, "WidgetInput": WidgetInput, "Output": Output, "comfytype": comfytype, "Custom": Custom,
    "ComfyTypeIO": ComfyTypeIO, "Boolean": Boolean, "Int": Int, "Float": Float, "String": String, "Combo": Combo,
    "Image": Image, "Mask": Mask, "Video": Video, "Tracks": Tracks, "Audio": Audio, "Hidden": Hidden,
    "HiddenHolder": HiddenHolder, "Schema": Schema, "NodeOutput": NodeOutput, "ComfyNode": ComfyNode,
    "FolderType": FolderType,
}.items():
    setattr(io, _name, _value)


# ------------------------------------------------------- comfy_api.latest: the rest


class ComfyExtension:
    async def on_load(self) -> None:
        pass

    async def get_node_list(self) -> list:
        raise NotImplementedError


@dataclass
class VideoComponents:
    images: Any
    frame_rate: Fraction
    audio: Any = None
    metadata: dict | None = None


class VideoFromFile:
    def __init__(self, file, *, start_time: float = 0, duration: float = 0):
        self.path = file
        self.start_time, self.duration = start_time, duration

    def get_stream_source(self):
        return self.path

    def get_active_trim_window(self) -> tuple:
        return float(self.start_time), float(self.duration)

    def save_to(self, path, format="auto", codec="auto", metadata=None, crf=None):
        """Core's save with format and codec "auto": the streams are copied into ``path``'s container as they
        are (so, as in core, ProRes into MP4 fails); with a trim window the frames whose time lies in it are
        re-encoded (H.264 at ``crf``), as core does."""
        import av

        if self.start_time or self.duration:
            self._save_trimmed(path, crf)
            return
        with av.open(self.path) as source, av.open(path, "w") as output:
            streams = {stream: output.add_stream_from_template(stream) for stream in source.streams
                       if stream.type in ("video", "audio")}
            for packet in source.demux(*streams):
                if packet.dts is not None:
                    packet.stream = streams[packet.stream]
                    output.mux(packet)

    def _save_trimmed(self, path, crf) -> None:
        import av

        end = self.start_time + self.duration if self.duration else float("inf")
        with av.open(self.path) as source, av.open(path, "w") as output:
            video = source.streams.video[0]
            stream = output.add_stream("libx264", rate=video.average_rate,
                                       options={} if crf is None else {"crf": str(crf)})
            stream.width, stream.height, stream.pix_fmt = video.width, video.height, "yuv420p"
            kept = 0
            for frame in source.decode(video):
                if self.start_time <= frame.time < end:
                    frame.pts, frame.time_base = kept, 1 / Fraction(video.average_rate)
                    output.mux(stream.encode(frame))
                    kept += 1
            output.mux(stream.encode(None))


class VideoFromComponents:
    def __init__(self, components: VideoComponents):
        self.components = components

    def get_components(self) -> VideoComponents:
        return self.components


class PreviewText:
    """comfy_api.latest.ui.PreviewText: text shown on the node."""

    def __init__(self, value: str, **kwargs):
        self.value = value

    def as_dict(self) -> dict:
        return {"text": (self.value,)}


class SavedResult(dict):
    """comfy_api.latest.ui.SavedResult: a file ComfyUI serves, by name, subfolder and folder type."""

    def __init__(self, filename: str, subfolder: str, type: FolderType):  # core names it "type"
        super().__init__(filename=filename, subfolder=subfolder, type=type.value)


class PreviewVideo:
    """comfy_api.latest.ui.PreviewVideo: videos shown on the node."""

    def __init__(self, values: list, **kwargs):
        self.values = values

    def as_dict(self) -> dict:
        return {"images": self.values, "animated": (True,)}


class ExecutionBlocker:
    """comfy_execution.graph_utils.ExecutionBlocker: downstream nodes stop with ``message``."""

    def __init__(self, message):
        self.message = message


def install_comfy_api() -> None:
    """Put the stand-in ``comfy_api.latest`` (and ``comfy_execution.graph_utils``) in ``sys.modules``.

    Does nothing when a ``comfy_api.latest`` is already imported.
    """
    if "comfy_api.latest" in sys.modules:
        return
    latest = types.ModuleType("comfy_api.latest")
    latest.io = io
    latest.ComfyExtension = ComfyExtension
    latest.ui = types.SimpleNamespace(PreviewText=PreviewText, PreviewVideo=PreviewVideo, SavedResult=SavedResult)
    latest.InputImpl = types.SimpleNamespace(VideoFromFile=VideoFromFile, VideoFromComponents=VideoFromComponents)
    latest.Types = types.SimpleNamespace(VideoComponents=VideoComponents)
    package = types.ModuleType("comfy_api")
    package.latest = latest
    graph_utils = types.ModuleType("comfy_execution.graph_utils")
    graph_utils.ExecutionBlocker = ExecutionBlocker
    execution = types.ModuleType("comfy_execution")
    execution.graph_utils = graph_utils
    sys.modules.update({"comfy_api": package, "comfy_api.latest": latest, "comfy_execution": execution,
                        "comfy_execution.graph_utils": graph_utils})


class FakeDynamicPrompt:
    """comfy_execution.graph.DynamicPrompt over an API-format prompt {id: {class_type, inputs}}."""

    def __init__(self, prompt: dict):
        self.prompt = prompt

    def all_node_ids(self):
        return set(self.prompt)

    def get_node(self, node_id):
        return self.prompt[node_id]
