"""explorer.positional_text: what the Positional page says matches the model it describes."""

from __future__ import annotations

import math

import numpy as np

from explorer.config import ModelConfig
from explorer.positional_text import NO_VECTORS, explanation, formula, rope_base, table_frame, token_line


def test_the_sinusoid_explanation_names_the_slowest_wavelength_of_this_width():
    slowest = 2 * math.pi * 10000 ** ((64 - 2) / 64)  # the last pair, i = 31, of d_model 64
    said = explanation(ModelConfig(positional="sinusoidal", d_model=64))
    assert f"wavelength {slowest:,.0f} positions with d_model 64" in said
    assert "**added**" in said and "{" not in said  # every placeholder filled


def test_a_formula_for_sinusoids_and_rotary_only():
    assert r"\sin" in formula(ModelConfig(positional="sinusoidal"))
    assert "10000^" in formula(ModelConfig(positional="rope"))
    assert formula(ModelConfig(positional="learned")) is None and formula(ModelConfig(positional="none")) is None
    assert rope_base(ModelConfig(positional="rope")) == 10000.0


def test_a_pretrained_learned_table_is_said_to_be_trained_and_its_own_rope_base_is_used(minilm_model, smollm_model):
    minilm = minilm_model.config
    assert "pretrained model the rows were learned" in explanation(minilm)
    assert "starts random" in explanation(ModelConfig(positional="learned"))
    smol = smollm_model.config
    assert formula(smol).startswith(rf"\begin{{gathered}}\theta_{{p,\,i}} = \frac{{p}}{{{smol.rope_base:g}^")
    assert "Llama" in formula(smol)
    assert set(NO_VECTORS) == {"rope", "none"}


def test_a_table_becomes_one_csv_row_per_position():
    table = np.arange(6, dtype=np.float32).reshape(3, 2)  # [P=3, D=2]
    frame = table_frame(table, ["a", "b", "c"])
    assert list(frame.columns) == ["position", "token", "dim_0", "dim_1"]
    assert frame["position"].tolist() == [0, 1, 2] and frame["dim_1"].tolist() == [1.0, 3.0, 5.0]
    assert list(table_frame(table).columns) == ["position", "dim_0", "dim_1"]


def test_a_long_token_line_is_cut_between_tokens_and_says_how_many_there_are():
    tokens = [f"Ġword{i}" for i in range(512)]
    line = token_line(tokens, 60)
    shown, _, rest = line.partition(" … ")
    assert rest == "(512 tokens in all)" and len(shown) <= 60
    assert shown.split(" ") == tokens[: len(shown.split(" "))]  # whole tokens only, in order
    assert len(" ".join(tokens[: len(shown.split(" ")) + 1])) > 60  # as many as fit
    assert token_line(tokens[:3], 60) == "Ġword0 Ġword1 Ġword2"  # a short text whole, with no count
