"""The neighbour graph: kNN / radius links with caps and hysteresis (CPU, GPU kernel)."""
