"""Rasterising display lists and compositing them: the shared layer, CPU and GPU rasterisers, backend choice."""
