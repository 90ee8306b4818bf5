"""Broken and empty video files for error tests (the readable demo clip is the ``demo_clip_file`` fixture)."""

import av


def write_empty_video(path, width=64, height=48):
    """An AVI with a video stream and no frames (MP4 muxers drop an empty stream)."""
    container = av.open(str(path), "w", format="avi")
    stream = container.add_stream("mpeg4", rate=12)
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    container.start_encoding()  # writes the header: without it nothing is written
    container.close()
    return path


def truncated_copy(source, path):
    """The first half of ``source``'s bytes at ``path`` (an MP4 without its index: unreadable)."""
    path.write_bytes(source.read_bytes()[: source.stat().st_size // 2])
    return path
