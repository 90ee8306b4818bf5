"""Golden images: every scene of tests/scenes.py rendered on each backend vs tests/golden/<scene>.png.

Tolerance: max abs difference <= 1/255 per channel (1 level for uint8
frames; float32 results are compared to the stored 8-bit value / 255, so the
tolerance also absorbs their rounding to 8 bits). Regenerate the PNGs only
with ``python tests/make_goldens.py`` after an intended change of the picture.
The goldens are the CPU's pictures: the GPU gets its parity bound, 2/255, plus
that rounding for float32 frames.
"""

import cv2
import numpy as np
import pytest
from make_goldens import GOLDEN_DIR, render_scene, to_uint8
from scenes import SCENES

TOLERANCE = {"cpu": 1.0 / 255.0, "gpu": 2.0 / 255.0}
ROUNDING = 0.5 / 255.0  # float32 results vs their 8-bit golden


def read_golden(name: str) -> np.ndarray:
    path = GOLDEN_DIR / f"{name}.png"
    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert image is not None, f"missing golden {path}: run python tests/make_goldens.py {name}"
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


@pytest.mark.parametrize("name", sorted(SCENES))
def test_scene_matches_golden(renderer, name, tmp_path):
    rendered = render_scene(name, renderer)
    golden = read_golden(name)
    assert rendered.shape == golden.shape
    scale = 255.0 if rendered.dtype == np.uint8 else 1.0
    tolerance = TOLERANCE[renderer.name] + (ROUNDING if renderer.name != "cpu" and scale == 1.0 else 0.0)
    difference = np.abs(rendered / scale - golden / 255.0)
    if difference.max() > tolerance + 1e-6:
        actual = tmp_path / f"{name}.png"
        cv2.imwrite(str(actual), cv2.cvtColor(np.round(np.clip(rendered / scale, 0, 1) * 255).astype(np.uint8),
                                              cv2.COLOR_RGB2BGR))
        bad = np.count_nonzero(difference.max(axis=-1) > tolerance + 1e-6)
        pytest.fail(f"{name} on {renderer.name}: {bad} pixels differ by up to {difference.max() * 255:.1f}/255 "
                    f"(tolerance {tolerance * 255:.1f}/255); rendered image: {actual}")


def test_goldens_are_small_and_cover_every_scene():
    stored = {path.stem for path in GOLDEN_DIR.glob("*.png")}
    assert stored == set(SCENES)
    assert all(path.stat().st_size < 16_000 for path in GOLDEN_DIR.glob("*.png"))


def test_goldens_are_distinct_and_not_blank():
    """Each golden differs from its bare frame on over 3 % of its pixels, and no two goldens are alike."""
    images = {name: read_golden(name) for name in SCENES}
    for name, image in images.items():
        frame = to_uint8(SCENES[name]()[0])
        assert np.count_nonzero(np.any(image != frame, axis=-1)) > 0.03 * image.shape[0] * image.shape[1], name
    assert len({image.tobytes() for image in images.values()}) == len(images)
