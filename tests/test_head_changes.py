"""head_changes, the What heads do page's measure of how much removing heads moved each head's attention: the mean
|after - before| over the cells a query may attend to, worked out here cell by cell, and computed a layer at a time
(a float64 copy of every map at once had taken a SmolLM2 page on 512 pieces to a 3.3 GB peak)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import explorer
from bench.sentences import words
from explorer.config import ModelConfig
from explorer.heads_text import head_changes
from pictures.heads_charts import after_before_figure, after_before_panel
from tests.drawn import figure_json, figure_title
from tests.traced import TracedPeak

CAUSAL = ModelConfig(n_layers=4, n_heads=4, d_model=64, d_ff=128, mask="causal")


def maps_before_and_after(tokens: str, ablate: str):
    before = explorer.run(CAUSAL, tokens).first.self_attention
    after = explorer.run(CAUSAL, tokens, ablate=ablate).first.self_attention
    return before, after


def test_each_heads_change_is_the_mean_over_its_allowed_cells_only():
    before, after = maps_before_and_after(words(9), "L1H2")
    changes = head_changes(before, after)  # [L, H]
    cells = [(q, k) for q in range(9) for k in range(9) if k <= q]  # causal: a query sees itself and what came before
    for layer in range(CAUSAL.n_layers):
        for head in range(CAUSAL.n_heads):
            moved = [
                abs(float(after.weights[layer, head, q, k]) - float(before.weights[layer, head, q, k]))
                for q, k in cells
            ]
            assert np.isclose(changes[layer, head], sum(moved) / len(moved), rtol=1e-12, atol=0)
    assert (changes[:2] == 0).all() and (changes[2:] > 0).all()  # a removed head still computes its own weights


def test_no_allowed_cell_means_no_change():
    before, after = maps_before_and_after(words(5), "L0H0")
    nowhere = dataclasses.replace(before, allowed=np.zeros_like(before.allowed))
    assert (head_changes(nowhere, after) == 0).all()


def test_the_change_is_computed_without_a_float64_copy_of_every_map():
    before, after = maps_before_and_after(words(96), "L0H1")
    every_map_in_float64 = before.weights.size * 8  # bytes: what the whole-array version copied three times over
    with TracedPeak() as traced:
        head_changes(before, after)
    # A layer at a time holds one layer's maps in float64 (a quarter of them: 4 layers), two while the next layer's
    # difference replaces the last one's: half, where the whole-array version held 2.5 times all of them
    assert traced.peak < every_map_in_float64 * 0.75, f"{traced.peak:,} bytes at peak, {every_map_in_float64:,} of maps"


def test_the_downloaded_difference_map_stretches_as_the_page_does_over_the_allowed_cells():
    before, after = maps_before_and_after(words(40), "L0H1")
    change = after.weights[2, 3].astype(np.float64) - before.weights[2, 3]  # [T, T]
    allowed = np.asarray(before.allowed, dtype=bool)  # causal: the upper triangle is no difference
    top = float(np.quantile(np.abs(change[allowed]), 0.99))
    page = after_before_panel(before, after, 2, 3, stretch=True)
    figure = figure_json(after_before_figure(before, after, 2, 3, stretch=True))
    assert page["legend"]["high"] == figure["data"][0]["zmax"] == pytest.approx(top, rel=1e-6)
    assert "colours stretched" in figure_title(figure) and "colours stretched" in page["subtitle"]
    plain = figure_json(after_before_figure(before, after, 2, 3))
    assert plain["data"][0]["zmax"] == pytest.approx(np.abs(change[allowed]).max(), rel=1e-6)
