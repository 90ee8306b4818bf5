"""The built-in demo clip as node outputs, so every template runs with no input file."""

from __future__ import annotations

from fractions import Fraction

from comfy_api.latest import InputImpl, Types, io

from ..utils.tracks.demo import DEMO_RANGES, DemoClip
from .adapters import audio_output, frames_tensor, progress_callback, tracks_output
from .widgets import TRACKS_OUT, VIDEO_CATEGORY, defaults, float_input, int_input

AUDIO_RATE = defaults(DemoClip.audio)["sample_rate"]
# Lighter than the engine's 720p default: a template should run in seconds on a CPU.
WIDTH, HEIGHT, FRAMES, FPS, DOTS = 640, 360, 48, 24.0, 40


class DemoClipNode(io.ComfyNode):
    """Glowing dots drifting over a dark background, with their true tracks and a short sound."""

    @classmethod
    def define_schema(cls):
        limits = DEMO_RANGES
        return io.Schema(
            node_id="TrackOverlayDemoClip",
            display_name="Demo Clip",
            category=VIDEO_CATEGORY,
            search_aliases=["test clip", "sample video", "demo video", "tracking overlay demo", "example footage"],
            description="Generates the pack's demo clip (glowing dots drifting over a dark textured background) "
                        "from a seed: the frames, the dots' true tracks, and a VIDEO with a short generated "
                        "sound, so a graph runs with no input file.",
            inputs=[
                int_input("width", WIDTH, limits["width"], "Frame width in pixels (even, as H.264 needs).", step=2),
                int_input("height", HEIGHT, limits["height"], "Frame height in pixels (even, as H.264 needs).",
                          step=2),
                int_input("frame_count", FRAMES, limits["frame_count"], "Number of frames."),
                float_input("fps", FPS, limits["fps"], "Frames per second (sets the dots' speed and the "
                            "VIDEO's frame rate).", step=1.0),
                int_input("dots", DOTS, limits["dots"], "Number of glowing dots."),
                int_input("variant", 0, limits["seed"], "Which arrangement of dots: the same number gives the "
                          "same clip on every machine."),
            ],
            outputs=[
                io.Image.Output("frames", tooltip="The clip's frames, IMAGE [B, H, W, 3]."),
                io.Tracks.Output("tracks", tooltip="The dots' true positions: " + TRACKS_OUT[0].lower()
                                 + TRACKS_OUT[1:]),
                io.Video.Output("video", tooltip="The same frames as a VIDEO with a short generated sound track "
                                "(a hum and a blip each second), e.g. for Overlay Video."),
                io.Audio.Output("audio", tooltip="The sound track alone."),
            ],
        )

    @classmethod
    def execute(cls, width, height, frame_count, fps, dots, variant) -> io.NodeOutput:
        clip = DemoClip(width, height, frame_count, fps=fps, dots=dots, seed=variant)
        frames = frames_tensor(clip.frames(), frame_count, height, width, progress_callback(frame_count))
        audio = audio_output(clip.audio(AUDIO_RATE), AUDIO_RATE)
        components = Types.VideoComponents(images=frames, frame_rate=Fraction(fps).limit_denominator(1001),
                                           audio=audio)
        return io.NodeOutput(frames, tracks_output(clip.tracks()), InputImpl.VideoFromComponents(components), audio)


NODES = (DemoClipNode,)
