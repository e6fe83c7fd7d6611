"""The Attention page's grid of small maps on a long text (about 500 pieces, as a pasted paragraph): each map is
pooled to its drawn size, and the subtitle must say what a pixel shows, including the last row and column of
pixels, which cover fewer cells when the length is no multiple of the pooling factor."""

import math

import numpy as np

from pictures.attention_panels import grid_map_px
from pictures.boards import pooled_maps, sheet_panel
from pictures.style import BLUES, Ramp


def _sheet(t: int, n_heads: int = 12) -> dict:
    maps = np.random.default_rng(0).random((2 * n_heads, t, t), dtype=np.float32)  # [n, T, T]
    titles = [f"map {i}" for i in range(len(maps))]
    return sheet_panel(
        maps,
        None,
        Ramp(BLUES, 0.0, 1.0),
        name="grid",
        titles=titles,
        columns=n_heads,
        max_px=grid_map_px(n_heads),
        hovers=titles,
    )


def test_edge_pixels_of_494_cells_are_said_to_cover_fewer():
    """MiniLM on a 494-piece paragraph: 494 cells in blocks of 8 leave 6 for the last pixel of each side, which the
    subtitle had said covers 8 x 8 cells like every other."""
    subtitle = _sheet(494)["subtitle"]
    assert "494 × 494 cells drawn on 62 × 62 pixels" in subtitle
    assert "8 × 8 cells it covers (fewer at the right and bottom edges)" in subtitle


def test_a_multiple_of_the_factor_has_no_edge_note():
    subtitle = _sheet(496)["subtitle"]  # 496 = 62 x 8
    assert "8 × 8 cells it covers;" in subtitle
    assert "fewer" not in subtitle


def test_pooled_pixels_are_block_maxima_at_the_edges_too():
    """Each pooled pixel, the last row and column included, is the largest of the cells it covers (a numpy block
    max over -inf padding, independent of torch's max_pool2d)."""
    t, factor = 494, 8
    maps = np.random.default_rng(1).random((3, t, t), dtype=np.float32)
    pooled = pooled_maps(maps, np.zeros((t, t), dtype=bool), factor)
    side = math.ceil(t / factor)
    padded = np.full((3, side * factor, side * factor), -np.inf, dtype=np.float32)
    padded[:, :t, :t] = maps
    expected = padded.reshape(3, side, factor, side, factor).max(axis=(2, 4))
    np.testing.assert_array_equal(pooled, expected)
