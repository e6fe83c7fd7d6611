"""fig.write_image works as Plotly users expect: kaleido (a project dependency) drives the machine's Chromium, with no
network, and the PNG is the figure drawn."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import explorer
from bench.serve import CHROMIUM

pytestmark = pytest.mark.browser


def test_an_attention_figure_saves_as_a_png_of_its_size(tmp_path, monkeypatch):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: kaleido needs one to write images (make chromium installs it)")
    monkeypatch.setenv("BROWSER_PATH", os.environ.get("BROWSER_PATH", CHROMIUM))  # the Chromium kaleido drives
    trace = explorer.run(explorer.ModelConfig(n_heads=2, d_model=16, d_ff=32), "the cat sat on the mat")
    figure = explorer.attention_figure(trace, layer=1, head=0)
    path = tmp_path / "map.png"
    figure.write_image(path, width=640, height=480)
    image = np.asarray(Image.open(path).convert("RGB"))
    assert image.shape == (480, 640, 3)
    r, b = image[..., 0].astype(int), image[..., 2].astype(int)
    blue = (b - r > 20).mean()  # the map's cells: weights above about 0.1 in BLUES, as each of 6 keys gets about 1/6
    assert blue > 0.15, f"only {blue:.0%} of the image is blue: the map was not drawn"
