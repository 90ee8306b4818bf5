"""Video in and out: decoding, encoding, and the streaming overlay pipeline."""
