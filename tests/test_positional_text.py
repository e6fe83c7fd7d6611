"""explorer.positional_text: what the Positional page says matches the model it describes."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import explorer
from explorer.analysis.position_analysis import permutation_demo
from explorer.config import ModelConfig
from explorer.positional_text import (
    NO_VECTORS,
    causal_order_note,
    explanation,
    formula,
    order_finding,
    rope_base,
    table_frame,
    token_line,
    token_type_note,
)


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
    assert set(NO_VECTORS) == {"rope", "none"}


def test_the_rotary_formula_pairs_the_dimensions_the_model_rotates_and_defines_r(smollm_model):
    paper = formula(ModelConfig(positional="rope"))  # the explorer's own rope turns (2i, 2i + 1)
    assert r"(q_{2i},\,q_{2i+1}) \mapsto R(\theta_{p,i})\,(q_{2i},\,q_{2i+1})" in paper
    assert r"R(\theta) = \begin{pmatrix}\cos\theta & -\sin\theta" in paper  # R is written out, not assumed
    llama = formula(smollm_model.config)  # Hugging Face Llama's layout turns (i, i + d_head/2)
    assert r"(q_{i},\,q_{i+d_{head}/2}) \mapsto R(\theta_{p,i})\,(q_{i},\,q_{i+d_{head}/2})" in llama
    assert "q_{2i}" not in llama
    million = dataclasses.replace(smollm_model.config, rope_base=1_000_000.0)  # CodeLlama's base
    assert r"\frac{p}{1000000^{2i/d_{head}}}" in formula(million) and "e+" not in formula(million)


def test_bert_says_its_input_also_gets_a_token_type_row(minilm_model):
    note = token_type_note(minilm_model)
    token_type = np.linalg.norm(minilm_model.token_type.weight[0].detach().numpy())
    positions = np.linalg.norm(minilm_model.positional.table.detach().numpy(), axis=1).mean()  # [P] -> mean
    assert f"(length {token_type:.2f}; a position row's is {positions:.2f} on average)" in note
    assert token_type_note(explorer.build_model(ModelConfig(positional="learned"))) == ""  # no token types


ENCODER_DECODER_NONE = ModelConfig(arch="encoder-decoder", positional="none", mask="none")


@pytest.mark.parametrize(
    ("cfg", "tokens", "kind", "said"),
    [
        (ModelConfig(positional="none"), "the cat sat on the mat", "moved", "attention sees a set of tokens"),
        (ENCODER_DECODER_NONE, "the cat sat on the mat", "moved", "attention sees a set of tokens"),
        # A query whose only allowed key is itself has weight 1 wherever it stands: the maps move, order is seen
        (ModelConfig(mask="padding"), "cat [PAD] [PAD] [PAD]", "blind", "at most one key"),
        (ModelConfig(arch="decoder", positional="learned", mask="padding"), "[PAD] [PAD] [PAD]", "blind", "one key"),
        (ModelConfig(), "the cat sat on the mat", "visible", "the sinusoidal encoding gives each token a position"),
        (ModelConfig(arch="decoder", positional="none"), "the cat sat", "visible", "a decoder is always causal"),
    ],
)
def test_the_reordering_finding_claims_a_set_of_tokens_only_when_nothing_carries_order(cfg, tokens, kind, said):
    target = "a b" if cfg.arch == "encoder-decoder" else None
    demo = permutation_demo(cfg, tokens, target=target)
    found, text = order_finding(cfg, demo)
    assert (found, demo.order_invisible) == (kind, kind != "visible")
    assert said in text
    if kind != "moved":
        assert "set of tokens" not in text and "output is the same" not in text
    if kind == "blind":  # a model that knows positions: its outputs do move (measured by the demo's own run)
        moved = explorer.run(explorer.build_model(cfg), demo.shuffled).output  # [T, D]
        typed = explorer.run(explorer.build_model(cfg), demo.tokens).output[demo.order]  # [T, D], moved with tokens
        assert np.abs(moved - typed).max() > 1e-3


def test_a_checkpoints_reordering_advice_points_to_a_model_that_can_drop_positions(minilm_model):
    demo = permutation_demo(minilm_model, "the cat sat")
    kind, text = order_finding(minilm_model.config, demo)
    assert kind == "visible" and "pick `configured`" in text and "Set the positional encoding" not in text


def test_only_a_causal_first_stack_is_said_to_carry_order_without_positions():
    assert "A causal mask still carries order" in causal_order_note(ModelConfig(positional="none", mask="causal"))
    assert "A causal mask still carries order" in causal_order_note(ModelConfig(arch="decoder", positional="none"))
    encoder_decoder = causal_order_note(ENCODER_DECODER_NONE)  # the decoder is causal; the reordered encoder is not
    assert "A causal mask" not in encoder_decoder and "sees its source as a set" in encoder_decoder
    assert causal_order_note(ModelConfig(positional="none", mask="padding")) == ""


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
