"""The lens grid, the attribution board and the ablation board draw the engine's numbers: read back from the JSON the
browser gets, next to explorer.logit_lens, logit_attribution and head_ablation_effects."""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import pytest

import explorer
from explorer.analysis.ablation_effects import head_ablation_effects
from explorer.analysis.attribution import logit_attribution
from explorer.analysis.logit_lens import logit_lens
from pictures import output_charts as lens_module
from pictures.output_charts import (
    CELL_PX,
    LENS_CELL_CHARS,
    LENS_CHAR_PX,
    LENS_PLOT_PX,
    LENS_TEXT_PX,
    MIN_BOARD_ROWS,
    ablation_board_figure,
    attribution_board_figure,
    lens_grid_figure,
)
from pictures.style import MOST_DECIMALS, decimals_for
from tests.drawn import figure_json, figure_title
from tests.tiny_checkpoints import perturbed_norms

LETTERS = tuple("ABCDEFGHIJ")


@pytest.fixture(scope="module")
def decoder() -> explorer.Transformer:
    """A causal decoder with a read-out to ten letters, norms moved off the identity."""
    return perturbed_norms(explorer.build_model(explorer.ModelConfig(mask="causal", n_heads=4), LETTERS), 7, 0.3)


def test_the_lens_grid_colours_each_cell_by_its_top_pieces_probability_and_names_it(decoder):
    trace = explorer.run(decoder, "A B C A B")
    lens = logit_lens(decoder, trace, k=3)
    [heatmap] = figure_json(lens_grid_figure(lens, trace.tokens))["data"]
    top = lens[lens["rank"] == 1]
    expected = top.pivot(index="layer", columns="position", values="probability").to_numpy()  # [L, T]
    np.testing.assert_array_equal(np.array(heatmap["z"], dtype=np.float64), expected)
    names = top.pivot(index="layer", columns="position", values="text").to_numpy()
    assert np.array(heatmap["text"]).tolist() == names.tolist()
    assert list(heatmap["y"]) == [0, 1] and list(heatmap["x"]) == ["A", "B", "C", "A·3", "B·4"]
    assert (heatmap["zmin"], heatmap["zmax"]) == (0.0, 1.0)
    cell = lens[(lens["layer"] == 1) & (lens["position"] == 4)]  # hover lists the three pieces of the cell, in order
    hover = np.array(heatmap["customdata"])[1, 4]
    assert [line.split(" ")[1] for line in hover.split("<br>")] == [f"'{t}'" for t in cell["text"]]


def test_the_lens_grid_shows_blank_pieces_and_says_from_which_block_the_guess_holds():
    lens = pd.DataFrame(
        {
            "layer": [0, 1, 2, 0, 1, 2],
            "position": [0, 0, 0, 1, 1, 1],
            "rank": 1,
            "piece": ["Ġ", "Âł", "<|endoftext|>", "Ċ", "ĠParis", "ĠParis"],
            "text": [" ", "\xa0", "", "\n", " Paris", " Paris"],
            "probability": [0.5, 0.6, 0.7, 0.2, 0.4, 0.9],
        }
    )
    figure = figure_json(lens_grid_figure(lens, ["x", "y"]))
    text = np.array(figure["data"][0]["text"])
    # No cell with a guess is blank: spaces (a no-break one too) and line breaks are drawn, an empty text is spelled.
    assert text[:, 0].tolist() == ["␣", "␣", "&lt;|endof…"] and text[0, 1] == "↵"  # cut to LENS_CELL_CHARS
    assert "at the last position ' Paris' is the top guess from block 1 on" in figure_title(figure)
    assert figure["layout"]["xaxis"]["title"]["text"] == "position (token)"
    assert figure["layout"]["yaxis"]["title"]["text"] == "after block"


def test_a_long_piece_is_cut_in_its_cell_and_whole_in_its_hover():
    """Plotly writes every cell at the size the longest text fits: SmolLM2's guess " <0xF0><0x9F><0x98>" after an
    emoji made every cell of the lens 3 px."""
    pieces = [" <0xF0><0x9F><0x98>", "<0x85>", " OrderedDict", " Paris"]
    lens = pd.DataFrame(
        {"layer": 0, "position": range(4), "rank": 1, "piece": ["x"] * 4, "text": pieces, "probability": 0.5}
    )
    heatmap = figure_json(lens_grid_figure(lens, ["a", "b", "c", "d"]))["data"][0]
    cells = [html.unescape(text) for text in np.array(heatmap["text"])[0]]
    assert cells == ["<0xF0>…", "<0x85>", "Ordered…", " Paris"]  # byte names whole; a cut text loses its space first
    assert lens_module._cell_text(" the", 3) == "the" and lens_module._cell_text(" a", 3) == " a"
    assert lens_module._cell_text("<0xF0><0x9F>", 4) == "…"  # not "<0x…": a byte name whole or not at all
    assert all(len(cell) <= LENS_CELL_CHARS for cell in cells)
    hovers = [html.unescape(hover) for hover in np.array(heatmap["customdata"])[0]]
    assert [hover.split(" ", 1)[1].rsplit(" ", 1)[0] for hover in hovers] == [repr(p) for p in pieces]
    assert heatmap["textfont"]["size"] == LENS_TEXT_PX  # not Plotly's fit to the longest text, escaped
    # 20 positions in the narrowest lens (385 px beside the sidebar at 1024 px, 19 px a column): 2 characters at that
    # size; "th…" is about 21 px
    wide = pd.DataFrame(
        {"layer": 0, "position": range(20), "rank": 1, "piece": "x", "text": " there", "probability": 0.5}
    )
    cells = np.array(figure_json(lens_grid_figure(wide, [f"t{i}" for i in range(20)]))["data"][0]["text"])[0]
    assert set(cells) == {"t…"} and LENS_PLOT_PX / 20 >= 2 * LENS_CHAR_PX  # not " …": the space goes first


def test_the_attribution_board_draws_each_heads_term_centred_at_zero_and_crosses_removed_heads(decoder):
    trace = explorer.run(decoder, "A B C D", ablate="L1H2")
    attribution = logit_attribution(decoder, trace)
    figure = figure_json(attribution_board_figure(attribution, removed=trace.ablated))
    heatmap, halo, crosses = figure["data"]
    np.testing.assert_array_equal(np.array(heatmap["z"], dtype=np.float64), attribution.heads)
    top = np.abs(attribution.heads).max()
    assert heatmap["zmin"] == -top and heatmap["zmax"] == top  # 0 is the scale's white middle
    assert (list(crosses["x"]), list(crosses["y"])) == (["H2"], ["L1"])
    # under the dark cross a wider white one, so the cross shows on the darkest cells too (it was lost on them)
    assert (list(halo["x"]), list(halo["y"])) == (["H2"], ["L1"]) and halo["hoverinfo"] == "skip"
    assert halo["marker"]["line"]["color"] == "#ffffff"
    assert halo["marker"]["line"]["width"] > crosses["marker"]["line"]["width"]
    assert np.array(heatmap["z"])[1, 2] == 0.0  # the removed head adds nothing
    words = figure_title(figure)
    assert f"'{attribution.text}'" in words and f"logit {attribution.logit:.2f}" in words
    assert f"heads {attribution.heads.sum():+.2f}" in words
    assert f"feed-forward {attribution.feed_forward.sum():+.2f}" in words
    assert f"embeddings {attribution.embeddings:+.2f}" in words
    assert attribution.rest != 0 and f"biases {attribution.rest:+.2f}" in words  # its norms' biases moved off 0
    assert (
        figure["layout"]["xaxis"]["title"]["text"] == "head" and figure["layout"]["yaxis"]["title"]["text"] == "layer"
    )


def test_the_attribution_board_names_no_biases_for_a_model_without_any(smollm_model):
    """SmolLM2 has no bias anywhere: its board read "biases -0.00", a float residue of the total, as if it had."""
    attribution = logit_attribution(smollm_model, explorer.run(smollm_model, "The capital of France is"))
    assert attribution.rest == 0.0
    words = figure_title(figure_json(attribution_board_figure(attribution)))
    assert "biases" not in words and "embeddings" in words
    parts = attribution.heads.sum() + attribution.feed_forward.sum() + attribution.embeddings
    assert parts == pytest.approx(attribution.total, abs=1e-3)  # they add up to the logit, up to float32 sums


def test_the_ablation_board_draws_one_minus_cosine_from_zero():
    effects = np.array([[0.0, 0.25, 0.01], [0.002, 0.5, 0.1]])
    figure = figure_json(ablation_board_figure(effects, removed=[(0, 1)]))
    heatmap, _, crosses = figure["data"]
    np.testing.assert_array_equal(np.array(heatmap["z"]), effects)
    assert (heatmap["zmin"], heatmap["zmax"]) == (0.0, 0.5) and heatmap["colorbar"]["title"]["text"] == "1 − cosine"
    assert "%{customdata}" in heatmap["hovertemplate"] and np.array(heatmap["customdata"])[1, 2] == "L1H2"
    assert (list(crosses["x"]), list(crosses["y"])) == (["H1"], ["L0"])


@pytest.mark.parametrize(("top", "written"), [(0.0533, "0.053"), (0.5, "0.50"), (3.2, "3.2"), (47.0, "47")])
def test_a_boards_cells_give_its_largest_value_two_digits_and_the_rest_as_many_decimals(top, written):
    """Two significant digits of every value ("0.00093" beside "0.053") made MiniLM's cells 4 px: Plotly sizes every
    cell's text to the longest."""
    effects = np.array([[top, top / 57, 0.0]])
    heatmap = figure_json(ablation_board_figure(effects))["data"][0]
    numbers = heatmap["texttemplate"].removeprefix("%{z:").removesuffix("}")
    cells = [format(value, numbers) for value in effects[0]]
    assert cells[0] == written and max(len(cell) for cell in cells) == len(written)  # no cell longer than the top


def test_a_board_with_nothing_to_scale_to_writes_two_decimals():
    """An all-zero board had been written "0.0000000000"; a NaN had raised (a review's findings)."""
    for effects in (np.zeros((1, 3)), np.array([[np.nan, 0.0, 0.0]])):
        heatmap = figure_json(ablation_board_figure(effects))["data"][0]
        assert heatmap["texttemplate"] == "%{z:.2f}"
    assert decimals_for(float("inf")) == decimals_for(0.0) == 2 and decimals_for(1e-12) == MOST_DECIMALS


def test_the_notebook_figures_draw_the_engines_numbers(decoder):
    trace = explorer.run(decoder, "B A D C", ablate=[(0, 3)], ablate_with="mean")
    [lens] = figure_json(explorer.logit_lens_figure(decoder, trace))["data"]
    expected = logit_lens(decoder, trace, k=1).pivot(index="layer", columns="position", values="probability")
    np.testing.assert_array_equal(np.array(lens["z"], dtype=np.float64), expected.to_numpy())
    heatmap, _, crosses = figure_json(explorer.attribution_figure(decoder, trace, piece="C"))["data"]
    np.testing.assert_array_equal(np.array(heatmap["z"]), explorer.head_logit_attribution(decoder, trace, "C"))
    assert (list(crosses["x"]), list(crosses["y"])) == (["H3"], ["L0"])
    encoder = explorer.build_model(explorer.ModelConfig(arch="encoder", n_heads=2))
    [board] = figure_json(explorer.ablation_figure(encoder, "the cat sat on the mat"))["data"]
    np.testing.assert_allclose(np.array(board["z"]), head_ablation_effects(encoder, "the cat sat on the mat"))


def test_a_two_layer_board_gives_each_layer_a_readable_row():
    """The default model has 2 layers: its board's plot area (the figure's height less its margins) holds at least
    MIN_BOARD_ROWS rows of CELL_PX, not the 18 px the margins once left it."""
    layout = ablation_board_figure(np.full((2, 4), 0.1), removed=[(0, 1)]).layout
    plot_px = layout.height - layout.margin.t - layout.margin.b
    assert plot_px >= CELL_PX * MIN_BOARD_ROWS


def test_a_lens_of_some_positions_says_which_of_the_texts_it_shows():
    """The page reads the last 32 positions of a longer text: a reader must not take them for the whole text."""
    lens = pd.DataFrame({"layer": 0, "position": range(5, 8), "rank": 1, "piece": "x", "text": "x", "probability": 0.5})
    tokens = [f"t{i}" for i in range(8)]
    assert "the last 3 of 8 positions" in figure_title(figure_json(lens_grid_figure(lens, tokens)))
    inner = lens[lens["position"] != 7]
    title = figure_title(figure_json(lens_grid_figure(inner, tokens)))
    assert "2 of 8 positions" in title and "the last 2" not in title
    whole = lens.assign(position=lens["position"] - 5)  # positions 0-2 of a 3-token text
    assert " of 3 positions" not in figure_title(figure_json(lens_grid_figure(whole, tokens[:3])))
