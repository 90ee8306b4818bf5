"""Tracks: the TRACKS contract, the track file, tracking masks, detection in frames, the demo clip."""
