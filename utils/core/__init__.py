"""Shared by every stage: the pack logger, array helpers, input checks, CUDA loading."""
