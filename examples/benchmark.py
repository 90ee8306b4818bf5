"""Benchmark what users run, then the kernel: median milliseconds per frame, as tables and JSON.

Node chains (what the ComfyUI nodes do: Line Links + Boxes + Merge Overlays +
Render Overlay with their default widgets, on a float32 IMAGE batch; tracks
are random walks from numpy default_rng(0)), against ``torch.clone()`` of the
same batch:

  chain-4k-100     4K, 16 frames, 100 points     chain-4k-1000   4K, 16 frames, 1000 points
  chain-1080p-300  1080p, 32 frames, 300 points

Kernel scenes, one frame (points uniform from default_rng(0); kNN k=5
undirected; quadratic Bezier width 2 px, bend 0.3; one 40x40 box per point,
stroke 2 px, fill 0.2, roundness 0.3; lines first, boxes on top):

  s1     4K, 100 points (the seed scene)       s2     4K, 1000 points
  s1-8k  8K, 100 points                        s10k   4K, 10 000 points
  knn    kNN alone (k=5) at N = 1000, 5000, 20000: CPU (cKDTree), fused GPU kernel, FAISS
  detect point detection and tracking (CPU) at 1080p and 4K, per method: mean and
         worst milliseconds per frame over --repeat frames of the demo clip (detection
         defaults: 100 points, redetect every 5 frames); --size picks one size
  video  the video path users run, frames per second at 1080p and 4K on a textured moving clip, one table:
         plain PyAV transcodes (YUV, same x264 settings; the best one is the reference), the CLI drawing
         nothing, with a track file (100 points; CPU, and GPU when present) and with detection, in YUV
         (the default for yuv420p video) and with the RGB path forced; on the GPU with the nvcodec extra,
         one more run decodes with NVDEC; and x264 alone on the clip's first 120 frames and on those of its
         track file render, decoded beforehand (the overlay's sharp lines cost the encoder more). Each
         backend renders a short clip first (kernels compiled, caches warm: a first GPU run on a machine
         also compiles CuPy's kernels, once); every run is timed whole, start-up included, as a user waits
         for it, once per round (--video-rounds, default 3; the median is reported)
  trails motion trails of 30 frames for 1000 points at 4K (TrailStyle defaults, width 3 px; points move
         2..8 px per frame with 1 px jitter, default_rng(0)): building them (whole clip and one streamed
         frame), and one frame drawn on the CPU, or on the GPU with the frame resident
  labels 1000 text labels at 4K ('#{id:03d}', DejaVu Sans at 37 px = the CLI's default
         1.7 % of the frame height, on plates, kept on screen): building them, then drawing them
  glow   the s1 scene (4K, 100 points) with the default glow (radius 1.5 % of the frame height, strength 2):
         CPU render with and without it and the CPU glow alone; on the GPU the resident render with and
         without it, the dense layer + row blur, and the same blur by cupyx.scipy.ndimage for comparison

Examples:
  python examples/benchmark.py --scene chain-4k-100 --backend gpu
  python examples/benchmark.py --scene s1 --backend cpu
  python examples/benchmark.py --scene s10k --backend gpu --json s10k.json
  python examples/benchmark.py --scene video --backend gpu --preset veryfast
  python examples/benchmark.py --scene detect --repeat 30
  python examples/benchmark.py --scene trails --backend gpu
  python examples/benchmark.py --scene labels --backend gpu
  python examples/benchmark.py --scene glow --backend gpu
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from fractions import Fraction

import cv2
import numpy as np
from trackoverlay.utils.core.memory import keep_freed_memory
from trackoverlay.utils.draw.display_list import DisplayList, merge_sequences
from trackoverlay.utils.draw.labels import label_overlay
from trackoverlay.utils.draw.overlays import (
    box_overlay,
    box_primitives,
    link_overlay,
    link_polylines,
    trail_geometry,
    trail_overlay,
)
from trackoverlay.utils.draw.styles import BoxStyle, LabelStyle, LineStyle, TrailStyle
from trackoverlay.utils.draw.units import look_lengths
from trackoverlay.utils.graph.neighbours import GraphParams, build_edges, knn_cpu
from trackoverlay.utils.raster.backend import make_renderer, select_backend
from trackoverlay.utils.raster.batch import render_batch
from trackoverlay.utils.raster.cpu import CpuRenderer
from trackoverlay.utils.raster.glow import Glow, gaussian_weights, glow_layer
from trackoverlay.utils.tracks.demo import DemoClip
from trackoverlay.utils.tracks.detect import METHODS, TrackDetector

SCENES = {"s1": (100, "3840x2160"), "s2": (1000, "3840x2160"), "s1-8k": (100, "7680x4320"),
          "s10k": (10_000, "3840x2160")}
CHAINS = {"chain-4k-100": (100, "3840x2160", 16), "chain-4k-1000": (1000, "3840x2160", 16),
          "chain-1080p-300": (300, "1920x1080", 32)}
PARAMS = GraphParams(k=5)
LINE = LineStyle(width=2.0, curve="quadratic", bend=0.3)
BOX = BoxStyle(size=40.0, stroke_width=2.0, fill_opacity=0.2, roundness=0.3)
TRAILS = (1000, "3840x2160", TrailStyle(length=30, width=3.0))
LABELS = (1000, "3840x2160")
LABEL = LabelStyle(text="format", format="#{id:03d}", size=37.0, box_size=40.0)


def parse_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size {text!r} must look like 3840x2160") from None
    if width < 1 or height < 1:
        raise argparse.ArgumentTypeError(f"size {text!r} must be positive")
    return width, height


def textured_frame(width: int, height: int, dtype):
    y, x = np.mgrid[0:height, 0:width]
    frame = ((x * 7 + y * 13) % 251).astype(np.uint8)[..., None].repeat(3, axis=2)
    return frame if dtype == "uint8" else (frame / np.float32(255)).astype(np.float32)


def scene_inputs(count: int, width: int, height: int, dtype):
    """The scene's points and a textured frame (deterministic)."""
    points = (np.random.default_rng(0).random((count, 2)) * [width, height]).astype(np.float32)
    return points, textured_frame(width, height, dtype)


def timed(function, repeat: int, sync=lambda: None, warmup: int = 2) -> list:
    """Milliseconds of each of ``repeat`` calls after ``warmup`` calls."""
    for _ in range(warmup):
        function()
    sync()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        sync()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def median(samples: list, per: int = 1) -> float:
    return statistics.median(samples) / per


# ------------------------------------------------------------------ node chains


def chain_inputs(count: int, width: int, height: int, frames: int):
    """Random-walk tracks and a float32 batch as ComfyUI hands it (a torch tensor when torch is there)."""
    rng = np.random.default_rng(0)
    start = rng.random((count, 2)) * [width, height]
    path = (start + np.cumsum(rng.normal(0.0, 3.0, (frames, count, 2)), axis=0)).astype(np.float32)
    batch = np.ascontiguousarray(np.broadcast_to(textured_frame(width, height, "float32"), (frames, height, width, 3)))
    try:
        import torch

        batch = torch.from_numpy(batch)
    except ImportError:
        pass
    return path, np.ones((frames, count), bool), batch


def node_chain(path, visibility, batch, backend: str) -> dict:
    """Line Links + Boxes + Merge + Render as the nodes call the engine; seconds per stage."""
    t0 = time.perf_counter()
    links = link_overlay(path, visibility, GraphParams(), LineStyle(), backend=backend)
    t1 = time.perf_counter()
    boxes = box_overlay(path, visibility, BoxStyle())
    t2 = time.perf_counter()
    merged = merge_sequences(links, boxes)
    t3 = time.perf_counter()
    renderer, _ = make_renderer(backend)
    try:
        render_batch(batch, merged, renderer)
    finally:
        renderer.close()
    t4 = time.perf_counter()
    return {"Line Links": t1 - t0, "Boxes": t2 - t1, "Merge": t3 - t2, "Render": t4 - t3, "chain": t4 - t0,
            "overlay": merged}


def bench_chain(name: str, backend: str, repeat: int) -> dict:
    """The node chain per frame against torch.clone() of the batch, and the renderer alone."""
    count, size, frames = CHAINS[name]
    width, height = parse_size(size)
    path, visibility, batch = chain_inputs(count, width, height, frames)
    results = {}
    if hasattr(batch, "clone"):
        results["torch.clone() of the batch"] = median(timed(batch.clone, repeat, warmup=1), frames)
    runs = [node_chain(path, visibility, batch, backend) for _ in range(repeat + 1)][1:]
    for stage in ("Line Links", "Boxes", "Merge", "Render", "chain"):
        results[f"{backend} {stage}"] = statistics.median(run[stage] for run in runs) * 1000 / frames
    merged = runs[0]["overlay"]
    renderer, _ = make_renderer(backend)
    try:
        results[f"{backend} renderer alone (render_batch)"] = median(
            timed(lambda: render_batch(batch, merged, renderer), repeat, warmup=1), frames)
    finally:
        renderer.close()
    if "torch.clone() of the batch" in results:
        results[f"{backend} chain / torch.clone()"] = results[f"{backend} chain"] / results["torch.clone() of the batch"]
    results[f"{backend} chain / renderer alone"] = (results[f"{backend} chain"]
                                                    / results[f"{backend} renderer alone (render_batch)"])
    if backend == "gpu":
        results.update(bench_chain_on_device(batch, merged, frames, repeat))
    return results


def bench_chain_on_device(batch, merged: list, frames: int, repeat: int) -> dict:
    """Render when the host keeps the batch on the GPU (a CUDA torch tensor in, one out)."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    device_batch = batch.cuda()
    sync = torch.cuda.synchronize
    renderer, _ = make_renderer("gpu")
    try:
        return {"torch.clone() of the batch on the GPU": median(timed(device_batch.clone, repeat, sync), frames),
                "gpu Render, batch on the GPU": median(
                    timed(lambda: render_batch(device_batch, merged, renderer), repeat, sync), frames)}
    finally:
        renderer.close()


# ---------------------------------------------------------------- kernel scenes


def cpu_display_list(points, edges=None) -> DisplayList:
    """The scene's display list built on the CPU."""
    ids = np.arange(len(points))
    edges = build_edges(points, PARAMS)[0] if edges is None else edges
    return DisplayList((link_polylines(points, ids, edges, LINE),
                        box_primitives(points, np.full((len(points), 2), BOX.size), ids, BOX)))


def bench_cpu(points, frame, repeat: int) -> dict:
    """One CPU frame in stages: graph, geometry, raster + composite."""
    renderer = CpuRenderer()
    edges, _ = build_edges(points, PARAMS)
    display_list = cpu_display_list(points, edges)
    stages = {"graph": timed(lambda: build_edges(points, PARAMS), repeat),
              "geometry": timed(lambda: cpu_display_list(points, edges), repeat),
              "raster + composite": timed(lambda: renderer.render(frame, display_list), repeat)}
    stages = {stage: median(samples) for stage, samples in stages.items()}
    stages["total"] = sum(stages.values())
    return stages


def bench_gpu(points, frame, repeat: int) -> dict:
    """The GPU renderer's stages, the frame resident or on the host, against torch.clone()."""
    import cupy
    from trackoverlay.utils.raster.gpu import GpuRenderer

    sync = cupy.cuda.Device().synchronize
    renderer = GpuRenderer()
    display_list = cpu_display_list(points)
    scene = renderer.upload(display_list)
    stages = {"display list (graph + geometry, host)": median(timed(lambda: cpu_display_list(points), repeat)),
              "bin tiles": median(timed(lambda: renderer.bin(scene, *frame.shape[:2]), repeat, sync)),
              **gpu_resident_stages(renderer, display_list, frame, repeat),
              "total host frame in/out": median(timed(lambda: renderer.render(frame, cpu_display_list(points)),
                                                      repeat))}
    try:
        import torch

        stages["torch.clone() of the frame"] = median(timed(torch.from_numpy(frame).clone, repeat))
    except ImportError:
        pass
    return stages


def bench_labels(points, frame, repeat: int, backend: str) -> dict:
    """Labels at every point: the display list (strings, layout, placement), then raster + composite."""
    height, width = frame.shape[:2]
    path, visible = points[None], np.ones((1, len(points)), bool)

    def build():
        return label_overlay(path, visible, LABEL, bounds=(width, height))[0]

    display_list = build()
    glyphs = display_list.layers[-1]
    stages = {"glyph quads (count)": glyphs.count, "plates (count)": display_list.layers[0].count,
              "display list (strings, layout, placement)": median(timed(build, repeat))}
    if backend != "gpu":
        renderer = CpuRenderer()
        text_only = DisplayList(display_list.layers[1:])
        stages["raster + composite (cpu)"] = median(timed(lambda: renderer.render(frame, display_list), repeat))
        stages["raster + composite, text without plates (cpu)"] = median(
            timed(lambda: renderer.render(frame, text_only), repeat))
        return stages
    from trackoverlay.utils.raster.gpu import GpuRenderer

    renderer = GpuRenderer()
    stages.update(gpu_resident_stages(renderer, display_list, frame, repeat))
    stages["total host frame in/out"] = median(timed(lambda: renderer.render(frame, display_list), repeat))
    return stages


def gpu_resident_stages(renderer, display_list, frame, repeat: int) -> dict:
    """The GPU renderer's resident stages for ``display_list`` on ``frame`` (uploaded once): the scene's
    upload, the raster + composite (wall, and GPU events around it), and both together."""
    import cupy

    sync = cupy.cuda.Device().synchronize
    scene = renderer.upload(display_list)
    device_frame = cupy.asarray(frame)
    out = cupy.empty_like(device_frame)
    resident = lambda: renderer.render_device(device_frame, scene, out)  # noqa: E731
    return {
        "upload scene": median(timed(lambda: renderer.upload(display_list), repeat, sync)),
        "raster + composite resident (wall)": median(timed(resident, repeat, sync)),
        "raster + composite resident (events around it)": gpu_span(resident, repeat),
        "total resident (upload + raster)": median(timed(
            lambda: renderer.render_device(device_frame, renderer.upload(display_list), out), repeat, sync)),
    }


def gpu_span(function, repeat: int) -> float:
    """Median milliseconds between events recorded before and after ``function`` (GPU timeline, gaps included)."""
    import cupy

    samples = []
    for _ in range(repeat + 2):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        function()
        stop.record()
        stop.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, stop))
    return median(samples[2:])


def trail_tracks(count: int, width: int, height: int, frames: int):
    """Points moving 2..8 px per frame in random directions with 1 px jitter (default_rng(0))."""
    rng = np.random.default_rng(0)
    start = rng.random((count, 2)) * [width, height]
    angle = rng.uniform(0, 2 * np.pi, count)
    velocity = rng.uniform(2, 8, (count, 1)) * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    steps = np.arange(frames)[:, None, None]
    path = start + velocity * steps + rng.normal(0.0, 1.0, (frames, count, 2))
    return path.astype(np.float32), np.ones((frames, count), bool)


def bench_trails(backend: str, repeat: int, size, dtype) -> dict:
    """Trails of the last frame of a clip: built (whole clip, one streamed frame) and drawn (CPU or GPU resident)."""
    count, default_size, style = TRAILS
    width, height = size or parse_size(default_size)
    frames = style.length + style.smoothing_frames
    path, visible = trail_tracks(count, width, height, frames)
    frame = textured_frame(width, height, dtype)
    overlays = trail_overlay(path, visible, style)
    display_list = overlays[-1]
    segments = int(sum(len(layer.vertices) - layer.count for layer in display_list.layers))
    stages = {
        f"build, whole clip of {frames} frames (per frame)": median(
            timed(lambda: trail_overlay(path, visible, style), repeat), frames),
        "build, one streamed frame (its ring of frames)": median(
            timed(lambda: trail_geometry(path, visible, style, frames=[frames - 1]), repeat)),
    }
    if backend != "gpu":
        renderer = CpuRenderer()
        stages["cpu raster + composite"] = median(timed(lambda: renderer.render(frame, display_list), repeat))
        renderer.close()
    else:
        from trackoverlay.utils.raster.gpu import GpuRenderer

        renderer = GpuRenderer()
        stages.update(gpu_resident_stages(renderer, display_list, frame, repeat))
        renderer.close()
    stages["polylines / segments drawn"] = f"{display_list.primitive_count} / {segments}"
    return stages


def bench_knn(repeat: int, backend: str) -> dict:
    """kNN (k=5) alone at several N: CPU (cKDTree), fused CuPy kernel, FAISS (when installed)."""
    results = {}
    for count in (1000, 5000, 20000):
        points = (np.random.default_rng(0).random((count, 2)) * [3840, 2160]).astype(np.float32)
        results[f"cpu N={count}"] = median(timed(lambda: knn_cpu(points, 5), repeat))
        if backend != "gpu":
            continue
        import cupy
        from trackoverlay.utils.graph.knn_gpu import knn_gpu

        sync = cupy.cuda.Device().synchronize
        device_points = cupy.asarray(points)
        results[f"fused kernel N={count}"] = median(timed(lambda: knn_gpu(device_points, 5), repeat, sync))
        results[f"fused kernel, host points in/out N={count}"] = median(
            timed(lambda: [part.get() for part in knn_gpu(cupy.asarray(points), 5)], repeat, sync))
        try:
            import faiss  # noqa: F401
        except ImportError as error:
            results[f"faiss N={count}"] = f"not installed ({error})"
            continue
        results.update(bench_faiss(points, repeat, count))
    return results


# ------------------------------------------------------------------ glow (scene "glow")


def scene_glow(height: int) -> Glow:
    """The default glow radius (1.5 % of the frame height) at strength 2."""
    return Glow(radius=look_lengths(height, glow_radius=None)["glow_radius"], strength=2.0)


def bench_glow(points, frame, repeat: int, backend: str) -> dict:
    """Milliseconds per frame with and without the glow: CPU always, GPU resident when the backend is gpu."""
    height, width = frame.shape[:2]
    glow = scene_glow(height)
    display_list = cpu_display_list(points)
    renderer = CpuRenderer()
    layer = renderer.rasterize(display_list, height, width)
    results = {"glow": f"radius {glow.radius:g} px, sigma {glow.radius / 3:.2f}, "
                       f"{len(gaussian_weights(glow.radius))} taps, strength {glow.strength:g}",
               "cpu render, no glow": median(timed(lambda: renderer.render(frame, display_list), repeat)),
               "cpu render with glow": median(timed(lambda: renderer.render(frame, display_list, glow=glow), repeat)),
               "cpu glow alone (glow_layer of the rasterised layer)": median(timed(lambda: glow_layer(layer, glow),
                                                                                   repeat))}
    renderer.close()
    if backend == "gpu":
        results.update(bench_glow_gpu(display_list, frame, glow, repeat))
    return results


def bench_glow_gpu(display_list, frame, glow: Glow, repeat: int) -> dict:
    """The resident render with and without the glow (GPU events), and the blur by cupyx for comparison."""
    import cupy
    from trackoverlay.utils.raster.gpu import GpuRenderer

    height, width = frame.shape[:2]
    renderer = GpuRenderer()
    scene = renderer.upload(display_list)
    device_frame = cupy.asarray(frame)
    out = cupy.empty_like(device_frame)
    results = {"gpu resident render, no glow": gpu_span(lambda: renderer.render_device(device_frame, scene, out),
                                                        repeat),
               "gpu resident render with glow": gpu_span(
                   lambda: renderer.render_device(device_frame, scene, out, glow=glow), repeat)}
    results["gpu glow cost (with - without)"] = (results["gpu resident render with glow"]
                                                 - results["gpu resident render, no glow"])
    bins = renderer.bin(scene, height, width)
    with renderer._on_stream():
        results["gpu dense layer + row blur (own kernels)"] = gpu_span(
            lambda: renderer._glow_halo(scene, bins, 0, height, width, glow), repeat)
    results.update(bench_cupyx_blur(height, width, gaussian_weights(glow.radius), repeat))
    renderer.close()
    return results


def bench_cupyx_blur(height: int, width: int, weights, repeat: int) -> dict:
    """The same separable blur (rows then columns, zero outside) by cupyx.scipy.ndimage.correlate1d."""
    import cupy
    from cupyx.scipy import ndimage

    device_weights = cupy.asarray(weights)
    results = {}
    for dtype in (cupy.float32, cupy.float16):
        layer = cupy.random.default_rng(0).random((height, width, 4), dtype=cupy.float32).astype(dtype)

        def blur(layer=layer):
            rows = ndimage.correlate1d(layer, device_weights, axis=1, mode="constant")
            return ndimage.correlate1d(rows, device_weights, axis=0, mode="constant")

        try:
            results[f"cupyx correlate1d rows + columns, {cupy.dtype(dtype).name}"] = gpu_span(blur, repeat)
        except Exception as error:  # noqa: BLE001 - a dtype cupyx refuses is reported, not fatal
            results[f"cupyx correlate1d rows + columns, {cupy.dtype(dtype).name}"] = f"failed ({type(error).__name__})"
    return results


# ------------------------------------------------------------------ video path (scene "video")


CLIP_SPEED = 3
"""Pixels the benchmark clip's texture moves right each frame."""


def _video_clip(path: str, width: int, height: int, frames: int) -> None:
    """A textured clip moving ``CLIP_SPEED`` px right a frame (x264 crf 18 veryfast), so decoding does real work:
    smooth noise at two scales, whose blobs have corners that a tracker keeps, as in footage (stripes would
    leave it only edges to slide along)."""
    import av

    rng = np.random.default_rng(1)
    base = np.zeros((height, width), np.float32)
    for cell, weight in ((24, 0.75), (6, 0.25)):
        noise = rng.random((height // cell + 2, width // cell + 2)).astype(np.float32)
        base += weight * cv2.resize(noise, (width, height), interpolation=cv2.INTER_CUBIC)
    base = np.clip(base * 255.0, 0, 255).astype(np.uint8)
    with av.open(path, "w") as container:
        stream = container.add_stream("libx264", rate=30, options={"crf": "18", "preset": "veryfast"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for index in range(frames):
            frame = np.roll(base, CLIP_SPEED * index, axis=1)[..., None].repeat(3, axis=2)
            image = av.VideoFrame.from_ndarray(frame, format="rgb24")
            image.pts = index
            container.mux(stream.encode(image))
        container.mux(stream.encode(None))


def riding_points(frames: int, width: int, height: int, count: int = 100, seed: int = 0) -> np.ndarray:
    """float32 [frames, count, 2]: points riding on the benchmark clip's texture with a slow wobble, as a
    tracker following it reports them (wrapping round at the right edge, as the texture does)."""
    rng = np.random.default_rng(seed)
    start, phase = rng.random((count, 2)) * [width, height], rng.random(count) * 2 * np.pi
    time = np.arange(frames)[:, None]
    x = (start[:, 0] + CLIP_SPEED * time) % width
    y = np.clip(start[:, 1] + 6 * np.sin(time / 20 + phase), 0, height - 1)
    return np.stack([x, y], axis=-1).astype(np.float32)


def _x264(writer, rate, width: int, height: int, preset: str, threaded: bool):
    """A yuv420p x264 stream at the CLI's settings (crf 18, ``preset``) in ``writer``; ``threaded``: x264 frame
    threads (else PyAV's default, slice threads)."""
    stream = writer.add_stream("libx264", rate=rate, options={"crf": "18", "preset": preset})
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    if threaded:
        stream.codec_context.thread_type = "FRAME"
    return stream


def _number(frame, index: int, stream) -> None:
    """Time a decoded ``frame`` as the ``index``-th frame of ``stream`` (in the encoder's time base: left in
    the decoder's, the numbers would be read as far shorter times, and the muxer refuses the repeats)."""
    frame.pts = index
    frame.time_base = 1 / Fraction(stream.codec_context.framerate)


def _transcode(source: str, target: str, preset: str, threaded: bool) -> int:
    """A plain PyAV transcode in YUV at the CLI's x264 settings: serial with PyAV's default encoder threads
    (x264 slice threads), or ``threaded``: x264 frame threads and decoding, encoding on two threads."""
    import av
    from trackoverlay.utils.video.pipeline import Pipeline

    with av.open(source) as reader, av.open(target, "w") as writer:
        video = reader.streams.video[0]
        video.thread_type = "AUTO"
        stream = _x264(writer, video.average_rate, video.codec_context.width, video.codec_context.height, preset,
                       threaded)
        count = [0]

        def encode(frame) -> None:
            _number(frame, count[0], stream)
            writer.mux(stream.encode(frame))
            count[0] += 1

        frames = reader.decode(video)
        if threaded:
            Pipeline().run(frames, lambda frame: frame, encode)
        else:
            for frame in frames:
                encode(frame)
        writer.mux(stream.encode(None))
    return count[0]


ENCODER_FRAMES = 120
"""Frames the encoder-alone runs of the video scene encode from memory (decoded beforehand: 120 4K frames hold
about 1.5 GB, twice over)."""


def _decoded(path: str, count: int) -> tuple[list, Fraction]:
    """The first ``count`` frames of ``path`` decoded as yuv420p, and its frame rate."""
    import av

    with av.open(path) as reader:
        video = reader.streams.video[0]
        video.thread_type = "AUTO"
        frames = [frame.reformat(format="yuv420p") for frame in itertools.islice(reader.decode(video), count)]
        return frames, video.average_rate


def _encode_only(frames: list, rate: Fraction, target: str, preset: str) -> int:
    """x264 alone at the CLI's settings (frame threads) on frames decoded beforehand: the encoder's own pace on
    that picture."""
    import av

    with av.open(target, "w") as writer:
        stream = _x264(writer, rate, frames[0].width, frames[0].height, preset, threaded=True)
        for index, frame in enumerate(frames):
            _number(frame, index, stream)
            writer.mux(stream.encode(frame))
        writer.mux(stream.encode(None))
    return len(frames)


def _overlay_cli(source: str, target: str, preset: str, backend: str, *extra: str, rgb: bool = False) -> None:
    """The CLI's own render (examples/overlay_video.py main), in-process; ``rgb`` forces the RGB path."""
    import contextlib
    import importlib.util
    import io

    from trackoverlay.utils.video import stream

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "overlay_video.py")
    spec = importlib.util.spec_from_file_location("overlay_video_bench", script)
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    stream._YUV_COMPOSITE = not rgb
    try:  # the CLI's log lines and progress bar would bury the table
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cli.main([source, "-o", target, "--backend", backend, "--preset", preset, *extra])
    finally:
        stream._YUV_COMPOSITE = True
    if code != 0:
        raise RuntimeError(f"overlay_video.py exited with status {code}")


PLAIN = "plain transcode"


def video_runs(clip: str, tracks: str, jumping: str, folder: str, preset: str, backends) -> dict:
    """Name -> function rendering ``clip`` once (the runs of the video scene)."""
    out = os.path.join(folder, "out.mp4")
    nothing = ("--tracks", tracks, "--no-lines", "--no-boxes")
    runs = {
        f"{PLAIN}: PyAV defaults (x264 slice threads), serial": lambda: _transcode(clip, out, preset, False),
        f"{PLAIN}: x264 frame threads, decode | encode threads": lambda: _transcode(clip, out, preset, True),
        "CLI, nothing drawn, YUV": lambda: _overlay_cli(clip, out, preset, "cpu", *nothing),
        "CLI, nothing drawn, RGB (forced)": lambda: _overlay_cli(clip, out, preset, "cpu", *nothing, rgb=True),
    }
    for backend in backends:
        runs[f"CLI, track file (100 points), {backend}, YUV"] = lambda b=backend: _overlay_cli(
            clip, out, preset, b, "--tracks", tracks, "--decoder", "cpu")
        runs[f"CLI, track file (100 points), {backend}, RGB (forced)"] = lambda b=backend: _overlay_cli(
            clip, out, preset, b, "--tracks", tracks, "--decoder", "cpu", rgb=True)
    runs[f"CLI, points jumping at random every frame, {backends[-1]}, YUV"] = lambda: _overlay_cli(
        clip, out, preset, backends[-1], "--tracks", jumping, "--decoder", "cpu")
    runs[f"CLI, detection (corners, 100 points), {backends[-1]}, YUV"] = lambda: _overlay_cli(
        clip, out, preset, backends[-1])
    return runs


def bench_video(backends, frames: int, preset: str, sizes=("1920x1080", "3840x2160"), rounds: int = 3) -> tuple:
    """Frames per second of plain transcodes and of the CLI's renders of the same clip, same x264 settings,
    in one run, and the process's CPU time a frame (all its threads, x264's included): ({run: {size: median
    fps}}, {run: {size: median CPU ms a frame}}). Every run is timed once per round, the rounds one after
    another, so a slow spell of a shared machine reaches all runs alike, not one. A run that returns a count
    (the encoder-alone runs: at most :data:`ENCODER_FRAMES`) is timed per frame of that count, the others per
    frame of the clip."""
    import tempfile

    from trackoverlay.utils.video.nvcodec import probe_nvdec

    samples, cpu = {}, {}
    with tempfile.TemporaryDirectory(prefix="trackoverlay-bench-") as folder:
        _warm_up(folder, backends, preset)
        for size in sizes:
            width, height = parse_size(size)
            clip, tracks, jumping = _video_inputs(folder, size, width, height, frames)
            runs = video_runs(clip, tracks, jumping, folder, preset, backends)
            if "gpu" in backends and probe_nvdec()[0]:
                runs["CLI, track file (100 points), gpu, NVDEC decode"] = lambda: _overlay_cli(
                    clip, os.path.join(folder, "out.mp4"), preset, "gpu", "--tracks", tracks, "--decoder", "nvdec")
            runs.update(_encoder_runs(clip, tracks, folder, preset, backends[-1]))
            for _ in range(rounds):
                for name, run in runs.items():
                    start, used = time.perf_counter(), time.process_time()
                    count = run() or frames
                    samples.setdefault(name, {}).setdefault(size, []).append(count / (time.perf_counter() - start))
                    cpu.setdefault(name, {}).setdefault(size, []).append(1000 * (time.process_time() - used) / count)
    return tuple({name: {size: median(values) for size, values in by_size.items()} for name, by_size in taken.items()}
                 for taken in (samples, cpu))


def _encoder_runs(clip: str, tracks: str, folder: str, preset: str, backend: str) -> dict:
    """Name -> function encoding, with x264 alone, the clip's first :data:`ENCODER_FRAMES` frames and those of its
    track file render (drawn once here): an overlay of sharp lines costs the encoder more than the clip alone,
    whoever draws it."""
    rendered = os.path.join(folder, "overlaid.mp4")
    _overlay_cli(clip, rendered, preset, backend, "--tracks", tracks, "--decoder", "cpu")
    target = os.path.join(folder, "encoded.mp4")
    plain, overlaid = _decoded(clip, ENCODER_FRAMES), _decoded(rendered, ENCODER_FRAMES)
    return {"x264 alone, the clip's frames (decoded beforehand)": lambda: _encode_only(*plain, target, preset),
            "x264 alone, the track file render's frames (decoded beforehand)": lambda: _encode_only(
                *overlaid, target, preset)}


def _video_inputs(folder: str, name: str, width: int, height: int, frames: int) -> tuple[str, str, str]:
    """(clip, track file, jumping track file) in ``folder``: the textured clip, 100 points riding on it
    (:func:`riding_points`), and 100 points at new random places every frame (x264's worst case: the
    overlay it has to encode never matches the frame before)."""
    from trackoverlay.utils.tracks.contract import Tracks
    from trackoverlay.utils.tracks.track_file import save_tracks_json

    clip, tracks, jumping = (os.path.join(folder, f"{name}{tail}") for tail in (".mp4", ".json", "-jumping.json"))
    _video_clip(clip, width, height, frames)
    visible = np.ones((frames, 100), bool)
    save_tracks_json(Tracks(riding_points(frames, width, height), visible), tracks)
    random = (np.random.default_rng(0).random((frames, 100, 2)) * [width, height]).astype(np.float32)
    save_tracks_json(Tracks(random, visible), jumping)
    return clip, tracks, jumping


def _warm_up(folder: str, backends, preset: str) -> None:
    """Render a short clip once per backend and path, untimed (kernels compiled, caches warm)."""
    clip, tracks, _ = _video_inputs(folder, "warm", 320, 240, 8)
    for backend in backends:
        for rgb in (False, True):
            _overlay_cli(clip, os.path.join(folder, "warm-out.mp4"), preset, backend, "--tracks", tracks, rgb=rgb)


def print_video_table(title: str, rates: dict, cpu: dict) -> None:
    """fps per run and size, each run's time per frame against the best plain transcode's (x best), and its CPU
    time a frame (ms, all threads)."""
    sizes = list(next(iter(rates.values())))
    best = {size: max(fps[size] for name, fps in rates.items() if name.startswith(PLAIN)) for size in sizes}
    width = max(len(name) for name in rates)
    print(title)
    print(f"  {'run':<{width}}" + "".join(f"  {size + ' fps':>14}  {'x best':>6}  {'CPU ms':>6}" for size in sizes))
    for name, by_size in rates.items():
        cells = "".join(f"  {by_size[size]:14.1f}  {best[size] / by_size[size]:6.2f}  {cpu[name][size]:6.1f}"
                        for size in sizes)
        print(f"  {name:<{width}}{cells}")


def bench_faiss(points, repeat: int, count: int) -> dict:
    """FAISS GpuIndexFlatL2 on the same points: the search alone and with the exact re-ranking."""
    import faiss

    resources = faiss.StandardGpuResources()
    index = faiss.GpuIndexFlatL2(resources, 2)
    index.add(points)
    return {f"faiss GpuIndexFlatL2 search N={count}": median(timed(lambda: index.search(points, 6), repeat)),
            f"faiss knn_gpu (bfKnn) N={count}": median(timed(
                lambda: faiss.knn_gpu(resources, points, points, 6), repeat))}


DETECT_SIZES = ("1920x1080", "3840x2160")


def bench_detect(repeat: int, sizes) -> dict:
    """Detection and tracking per frame on the demo clip (frames made beforehand), each method, each size."""
    results = {}
    for width, height in sizes:
        frames = list(DemoClip(width, height, frame_count=max(repeat, 6)).frames())
        for method in METHODS:
            detector = TrackDetector(method=method)
            samples = []
            for frame in frames:
                start = time.perf_counter()
                detector.push(frame)
                samples.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            detector.finish()
            samples[-1] += (time.perf_counter() - start) * 1000  # the frames held back, charged once
            results[f"{width}x{height} {method} mean"] = statistics.mean(samples)
            results[f"{width}x{height} {method} worst"] = max(samples)
    return results


def print_table(title: str, stages: dict, unit: str = "median ms (per frame)") -> None:
    width = max(len(stage) for stage in stages)
    print(title)
    print(f"  {'stage':<{width}}  {unit}")
    for stage, value in stages.items():
        shown = f"{value:9.3f}" if isinstance(value, float) else value
        print(f"  {stage:<{width}}  {shown}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("auto", "cpu", "gpu"), default="auto")
    parser.add_argument("--scene", choices=tuple(CHAINS) + tuple(SCENES) + ("knn", "video", "detect", "trails",
                                                                          "labels", "glow"),
                        default="chain-4k-100")
    parser.add_argument("--size", type=parse_size, help="frame size WxH of a kernel scene (default: the scene's)")
    parser.add_argument("--frame-dtype", choices=("uint8", "float32"), default="uint8",
                        help="frame dtype of a kernel scene (node chains use float32 batches)")
    parser.add_argument("--repeat", type=int, default=15, help="timed runs (median reported)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--video-frames", type=int, default=240,
                        help="scene video: clip length (default: 240, 8 s at 30 fps)")
    parser.add_argument("--preset", default="veryfast", help="scene video: x264 preset (default: veryfast)")
    parser.add_argument("--video-rounds", type=int, default=3,
                        help="scene video: times each run is timed, in rounds (median reported; default: 3)")
    args = parser.parse_args(argv)
    if args.video_rounds < 1:
        parser.error(f"--video-rounds must be at least 1, got {args.video_rounds}")
    backend = select_backend(args.backend).selected
    if args.scene == "video":
        keep_freed_memory()  # as the CLI does for itself: every run alike, the plain transcodes included
        backends = ["cpu", "gpu"] if backend == "gpu" else ["cpu"]
        sizes = ("x".join(map(str, args.size)),) if args.size else ("1920x1080", "3840x2160")
        rates, cpu = bench_video(backends, args.video_frames, args.preset, sizes, args.video_rounds)
        print_video_table(f"scene video | {os.cpu_count()} CPU cores | backends {', '.join(backends)} | "
                          f"{args.video_frames} frames | x264 {args.preset} crf 18 | median of "
                          f"{args.video_rounds} rounds", rates, cpu)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump({"scene": "video", "backends": backends, "frames": args.video_frames,
                           "preset": args.preset, "fps": rates, "cpu_ms_per_frame": cpu}, handle, indent=2)
        return 0
    size = None
    if args.scene == "knn":
        stages = bench_knn(args.repeat, backend)
    elif args.scene == "detect":
        sizes = [args.size] if args.size else [parse_size(text) for text in DETECT_SIZES]
        stages = bench_detect(args.repeat, sizes)
        backend, size = "cpu", ", ".join(f"{w}x{h}" for w, h in sizes)
    elif args.scene == "trails":
        stages = bench_trails(backend, args.repeat, args.size, args.frame_dtype)
        size = "x".join(map(str, args.size)) if args.size else TRAILS[1]
    elif args.scene == "labels":
        width, height = args.size or parse_size(LABELS[1])
        points, frame = scene_inputs(LABELS[0], width, height, args.frame_dtype)
        stages = bench_labels(points, frame, args.repeat, backend)
        size = f"{width}x{height}"
    elif args.scene == "glow":
        width, height = args.size or parse_size(SCENES["s1"][1])
        points, frame = scene_inputs(SCENES["s1"][0], width, height, args.frame_dtype)
        stages = bench_glow(points, frame, args.repeat, backend)
        size = f"{width}x{height}"
    elif args.scene in CHAINS:
        stages = bench_chain(args.scene, backend, args.repeat)
        size = CHAINS[args.scene][1]
    else:
        count, default_size = SCENES[args.scene]
        width, height = args.size or parse_size(default_size)
        points, frame = scene_inputs(count, width, height, args.frame_dtype)
        stages = bench_gpu(points, frame, args.repeat) if backend == "gpu" else bench_cpu(points, frame, args.repeat)
        size = f"{width}x{height}"
    print_table(f"scene {args.scene} | backend {backend} | size {size}", stages,
                "ms per frame" if args.scene == "detect" else "median ms (per frame)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"scene": args.scene, "backend": backend, "size": size, "frame_dtype": args.frame_dtype,
                       "stages": stages}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
