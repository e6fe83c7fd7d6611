"""pictures.attention_panels: what the reader sees (labels, masked cells, values) is what the maps hold."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.analysis.stats import head_average, head_entropy
from explorer.trace import AttentionMaps
from pictures.attention_panels import (
    GRID_MAX_CELLS,
    WEIGHTS,
    attention_map_panel,
    entropy_panel,
    grid_cells,
    grid_panel,
    token_labels,
)
from pictures.style import BLUES, MASKED_COLOUR
from tests.drawn import panel_matrix, rgb, sheet_maps


def causal(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n), dtype=bool))


def tooltip_fields(layer: dict) -> list[str]:
    return [t["field"] for t in layer["encoding"]["tooltip"]]


def test_token_labels_unique_readable_and_raw():
    tokens = ["the", "cat", "the", "<b>x</b>", "the", "1"]
    assert token_labels(tokens) == ["the", "cat", "the·2", "<b>x</b>", "the·4", "1"]
    assert len(set(token_labels(["a", "a·1", "a"]))) == 3


def test_map_values_axes_and_hover(make_maps):
    maps = make_maps(n_layers=2, n_heads=3)
    panel = attention_map_panel(maps, 1, 2)
    drawn = panel_matrix(panel)
    np.testing.assert_array_equal(drawn.values, maps.weights[1, 2])
    assert drawn.x_labels == ["the", "cat", "sat", "on", "the·4", "mat"] == drawn.y_labels
    assert (drawn.x_title, drawn.y_title, panel["value_title"]) == ("key", "query", "weight")
    assert "layer 1" in drawn.title and "head 2" in drawn.title
    assert (panel["legend"]["low"], panel["legend"]["high"]) == (0.0, 1.0)
    assert panel["legend"]["colours"] == list(WEIGHTS.colours)
    np.testing.assert_array_equal(drawn.image, WEIGHTS.rgb(maps.weights[1, 2]))  # colour of each weight
    assert panel["value_digits"] == 4 and panel["text_digits"] == 2
    assert not drawn.masked.any() and "masked" not in drawn.title


def test_map_masked_cells_are_grey_not_zero(make_maps):
    allowed = causal(6)
    maps = make_maps(allowed=allowed)
    panel = attention_map_panel(maps, 0, 0)
    drawn = panel_matrix(panel)
    np.testing.assert_array_equal(drawn.masked, ~allowed)  # exactly the upper triangle
    np.testing.assert_array_equal(drawn.values[allowed], maps.weights[0, 0][allowed])
    grey = rgb(MASKED_COLOUR)
    assert (drawn.image[~allowed] == grey).all() and not (drawn.image[allowed] == grey).all(axis=-1).any()
    assert panel["masked_text"].startswith("masked: may not attend")
    assert "grey = masked" in drawn.title and "15 of 36" in drawn.title


def test_map_flags_empty_rows(make_maps):
    allowed = causal(4) & np.array([False, True, True, True])
    maps = make_maps(tokens=["[PAD]", "a", "b", "c"], allowed=allowed)
    drawn = panel_matrix(attention_map_panel(maps, 0, 0))
    assert drawn.y_labels[0].startswith("⊘")
    assert not any(label.startswith("⊘") for label in drawn.y_labels[1:])
    assert "no allowed key" in drawn.title


def test_map_says_padding_queries_still_attend_only_when_padding_hides_keys(make_maps):
    tokens = ["a", "b", "[PAD]", "[PAD]"]
    padding = np.array([True, True, False, False])[None, :].repeat(4, axis=0)  # [PAD] keys hidden from every query
    said = "[PAD] rows still attend"
    assert said in panel_matrix(attention_map_panel(make_maps(tokens=tokens, allowed=padding), 0, 0)).title
    assert said not in panel_matrix(attention_map_panel(make_maps(tokens=tokens), 0, 0)).title  # no padding mask
    source_only = make_maps(
        tokens=["x", "y"], key_tokens=tokens, allowed=padding[:2]
    )  # cross-attention, no [PAD] query
    assert said not in panel_matrix(attention_map_panel(source_only, 0, 0)).title
    window = (0, 2, 0, 4)  # only the real queries shown
    assert (
        said
        not in panel_matrix(attention_map_panel(make_maps(tokens=tokens, allowed=padding), 0, 0, window=window)).title
    )


def test_long_inputs_thin_the_labels_and_drop_lines_and_text(make_maps):
    tokens = [f"w{i}" for i in range(100)]
    long = attention_map_panel(make_maps(n_layers=1, n_heads=1, tokens=tokens), 0, 0)
    assert 10 <= len(long["y_ticks"]) <= 45 and long["y_ticks"][0] == 0
    assert not long["grid_lines"] and long["text_digits"] is None
    small = attention_map_panel(make_maps(n_layers=1, n_heads=1), 0, 0)
    assert small["y_ticks"] == list(range(6)) and small["grid_lines"] and small["text_digits"] == 2


def test_big_maps_keep_every_weight_and_colour(make_maps):
    side = 140  # more than the zoom window's 128 a side
    allowed = causal(side)
    maps = make_maps(n_layers=1, n_heads=1, tokens=[f"w{i}" for i in range(side)], allowed=allowed)
    drawn = panel_matrix(attention_map_panel(maps, 0, 0))
    np.testing.assert_array_equal(drawn.values[allowed], maps.weights[0, 0][allowed])  # all hover
    np.testing.assert_array_equal(drawn.image, WEIGHTS.rgb(np.where(allowed, maps.weights[0, 0], np.nan)))
    assert drawn.x_labels[0] == "w0" and len(drawn.x_labels) == side


def test_map_head_average_is_labelled(make_maps):
    maps = make_maps(n_heads=4)
    panel = attention_map_panel(maps, 0, None)
    np.testing.assert_array_equal(panel_matrix(panel).values, head_average(maps, 0).astype(np.float32))
    assert "average of 4 heads" in panel["title"] and panel["value_title"] == "mean weight"


def test_cross_attention_map_has_both_token_lists(make_maps):
    maps = make_maps(tokens=["le", "chat"], key_tokens=["the", "cat", "sat"])
    maps = AttentionMaps("cross-attention", maps.weights, maps.scores, maps.allowed, ["le", "chat"], maps.key_tokens)
    drawn = panel_matrix(attention_map_panel(maps, 0, 1))
    assert drawn.x_labels == ["the", "cat", "sat"] and drawn.y_labels == ["le", "chat"]
    assert (drawn.x_title, drawn.y_title) == ("key (source)", "query (target)")
    np.testing.assert_array_equal(drawn.values, maps.weights[0, 1])


def test_grid_size_does_not_grow_with_tokens(make_maps):
    maps = make_maps(n_layers=12, n_heads=12, tokens=[f"w{i}" for i in range(33)])
    assert grid_cells(maps) <= GRID_MAX_CELLS
    sheet = grid_panel(maps)
    assert len(sheet["titles"]) == 144 and sheet["columns"] == 12
    small = grid_panel(make_maps(n_layers=12, n_heads=12))
    side = sheet["cell_px"] * sheet["cols"]
    assert side == small["cell_px"] * small["cols"] and side * 12 <= 1000


def test_entropy_panel_values(make_maps):
    maps = make_maps(n_layers=2, n_heads=3, allowed=causal(6))
    df = head_entropy(maps)
    drawn = panel_matrix(entropy_panel(df))
    np.testing.assert_allclose(drawn.values, df["entropy"].to_numpy().reshape(2, 3), rtol=1e-6)
    legend = drawn.view["legend"]
    assert legend["high"] == df["max_entropy"].iloc[0] and legend["low"] == 0
    assert (drawn.x_title, drawn.y_title) == ("head", "layer")
    assert drawn.x_labels == ["H0", "H1", "H2"] and drawn.y_labels == ["L0", "L1"]


def test_grid_panel_picks_and_outlines_each_map(make_maps):
    allowed = causal(6)
    maps = make_maps(n_layers=3, n_heads=4, allowed=allowed)
    sheet = grid_panel(maps, picked=(2, 1))
    assert sheet["columns"] == 4 and sheet["titles"][sheet["picked"]] == "L2 H1"
    drawn = sheet_maps(sheet)
    for title, pick, hover in zip(sheet["titles"], sheet["picks"], sheet["hovers"], strict=True):
        layer, head = pick["layer"], pick["head"]
        assert title == f"L{layer} H{head}" and hover.startswith(title)
        np.testing.assert_array_equal(drawn[title], WEIGHTS.rgb(np.where(allowed, maps.weights[layer, head], np.nan)))
    assert grid_panel(maps)["picked"] is None
    assert grid_panel(maps, pickable=False)["picks"] is None


def test_a_window_draws_part_of_a_big_map_with_its_own_labels(make_maps):
    side = 140
    tokens = [f"w{i}" for i in range(side)]
    maps = make_maps(n_layers=1, n_heads=2, tokens=tokens, allowed=causal(side))
    drawn = panel_matrix(attention_map_panel(maps, 0, 1, window=(10, 138, 5, 133)))
    np.testing.assert_array_equal(drawn.masked, ~causal(side)[10:138, 5:133])
    allowed = ~drawn.masked
    np.testing.assert_array_equal(drawn.values[allowed], maps.weights[0, 1, 10:138, 5:133][allowed])
    assert drawn.x_labels[0] == "w5" and drawn.y_labels[0] == "w10" and len(drawn.y_labels) == 128
    assert "queries 10–137 and keys 5–132 of 140 × 140" in drawn.title
    with pytest.raises(ValueError, match="outside"):
        attention_map_panel(maps, 0, 1, window=(0, 141, 0, 10))


def long_input_maps(n_tokens: int) -> AttentionMaps:
    """A random model's self-attention over n distinct words: spread thin, about 1/n a weight."""
    words = [f"w{i}" for i in range(n_tokens)]
    return explorer.run(explorer.ModelConfig(n_layers=2, n_heads=2), words).attention_maps()["self-attention"]


def test_stretched_colours_reach_the_darkest_blue_at_the_top_one_percent_of_weights():
    """At 120 tokens attention is spread thin: on the 0-to-1 scale every cell is pale; stretched, the weights from
    the 99th percentile up are the darkest blue, and the rest spread over the whole ramp."""
    maps = long_input_maps(120)
    weights = maps.weights[0, 1]  # [T, T]
    top = float(np.quantile(weights, 0.99))
    assert top < 0.2
    plain = panel_matrix(attention_map_panel(maps, 0, 1, stretch=False))
    assert plain.view["legend"]["high"] == 1.0
    assert f"99 % of the weights are below {top:.2g}, so cells are pale" in plain.title
    stretched = panel_matrix(attention_map_panel(maps, 0, 1, stretch=True))
    assert stretched.view["legend"]["high"] == pytest.approx(top)
    assert f"darkest blue = {top:.2g} or more" in stretched.title
    darkest = (stretched.image == rgb(BLUES[-1])).all(axis=-1)  # [T, T]
    assert darkest[weights >= top].all() and not darkest[weights < 0.95 * top].any()  # colours are rounded to bytes
    assert not (plain.image == rgb(BLUES[-1])).all(axis=-1).any()
    np.testing.assert_array_equal(stretched.values, plain.values)  # only the colours change, never the numbers
    no_control = panel_matrix(attention_map_panel(maps, 0, 1))  # a page without the control: no hint to use it
    assert "pale" not in no_control.title and no_control.view["legend"]["high"] == 1.0


def test_a_stretched_grid_shares_one_scale_for_every_map():
    maps = long_input_maps(60)
    sheet = grid_panel(maps, stretch=True)
    top = float(np.quantile(maps.weights, 0.99))  # over every map at once, not map by map
    pictures = sheet_maps(sheet)
    for layer in range(2):
        for head in range(2):
            darkest, weights = (pictures[f"L{layer} H{head}"] == rgb(BLUES[-1])).all(axis=-1), maps.weights[layer, head]
            assert darkest[weights >= top].all() and not darkest[weights < 0.95 * top].any()
    assert f"darkest blue = {top:.2g} or more" in sheet["subtitle"]
