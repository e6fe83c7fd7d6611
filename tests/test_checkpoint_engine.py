"""The engine around a checkpoint, on small random ones built here: next-token prediction, the norm-flip story, the
head-roles board, GQA/SwiGLU anatomy, the app's limits and B built on a checkpoint's weights."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import explorer
from explorer.analysis.head_roles import HeadRoles
from explorer.anatomy import multiply_adds, norm_name, parameter_counts, parameter_groups
from explorer.build import build_model
from explorer.compare import can_share_weights, model_for_b, same_parameters
from explorer.config import ConfigError, ModelConfig
from explorer.flip_story import CHANGED_BITS, flip_effect, flip_words
from explorer.limits import MAX_CHECKPOINT_TRACE_BYTES, MAX_TRACE_BYTES, check_app_size, trace_bytes
from explorer.prediction import can_predict, next_token
from pictures.head_role_panels import BREADTH, clear_roles, roles_panel
from tests.drawn import panel_matrix
from tests.tiny_checkpoints import tiny

IDS = [3, 17, 5, 9, 12]


def ids_trace(model: explorer.Transformer) -> explorer.Trace:
    """A run on token ids, through the model's own embedding (no tokenizer needed)."""
    x = model.embed(torch.tensor(IDS)).detach()  # [T, D]
    return explorer.run(model, x)


def test_next_token_is_the_softmax_of_the_read_out_of_the_last_position():
    model = build_model(tiny())
    assert can_predict(model)
    trace = ids_trace(model)
    table = next_token(model, trace, k=5)
    logits = torch.from_numpy(trace.output[-1]).double() @ model.embedding.weight.double().T  # [V] tied read-out
    probabilities = torch.softmax(logits, -1).detach().numpy()
    order = np.argsort(-probabilities)[:5]
    np.testing.assert_allclose(table["probability"], probabilities[order], rtol=1e-5)
    assert table["rank"].tolist() == [1, 2, 3, 4, 5]


def test_an_encoder_has_no_next_token():
    model = build_model(tiny("bert"))
    assert not can_predict(model)
    with pytest.raises(ConfigError, match="causal"):
        next_token(model, ids_trace(model))


def test_b_on_a_checkpoint_carries_its_weights_and_tokenizer_with_the_norm_flipped():
    a = tiny()
    model_a = build_model(a)
    model_a.tokenizer = object()  # stands for the checkpoint's tokenizer: B must read text the same way
    b = a.replace(norm="post")
    assert can_share_weights(a, b)[0]
    model_b = model_for_b(model_a, b)
    assert same_parameters(model_a, model_b) and model_b.tokenizer is model_a.tokenizer
    assert model_b.head.weight is model_b.embedding.weight  # still tied after the copy


def test_two_different_checkpoints_never_share_weights():
    shareable, why = can_share_weights(tiny(), tiny(checkpoint="other"))
    assert not shareable and "two different models" in why
    assert not can_share_weights(tiny(), ModelConfig())[0]


def test_flip_effect_counts_changed_heads_and_measures_the_stream():
    a = tiny()
    model_a = build_model(a)
    b = a.replace(norm="post")
    trace_a, trace_b = ids_trace(model_a), ids_trace(model_for_b(model_a, b))
    effect = flip_effect(trace_a, trace_b)
    assert effect.n_heads == 8
    rms = np.sqrt((trace_a.residual.astype(np.float64) ** 2).mean(axis=(1, 2)))  # [L + 1] by hand
    np.testing.assert_allclose(effect.rms_a, rms)
    assert effect.rms_a[0] == pytest.approx(effect.rms_b[0])  # the same embedding goes in
    same = flip_effect(trace_a, trace_a)
    assert same.n_changed == 0 and same.first_changed_layer is None and same.most_changed[2] == 0
    words = flip_words(same, a, b, "Tiny")
    assert "trained pre-norm" in words and f"below {CHANGED_BITS} bit" in words


def roles_of(shares: np.ndarray, breadth: np.ndarray, labels: np.ndarray) -> HeadRoles:
    return HeadRoles(shares=shares, breadth=breadth, labels=labels)


def test_roles_panel_draws_one_roles_share_per_head_and_greys_undefined_ones():
    shares = np.random.default_rng(0).random((2, 3, 6))  # [L, H, R]
    shares[1, 2, 1] = np.nan  # no [SEP] for this head to look at
    roles = roles_of(shares, np.full((2, 3), 0.5), np.full((2, 3), ""))
    drawn = panel_matrix(roles_panel(roles, "sep", "[CLS]"))
    np.testing.assert_allclose(drawn.values[~drawn.masked], shares[:, :, 1][~np.isnan(shares[:, :, 1])], rtol=1e-6)
    assert drawn.masked.tolist() == [[False] * 3, [False, False, True]]
    assert drawn.y_labels == ["L0", "L1"] and drawn.x_labels == ["H0", "H1", "H2"]
    assert "[SEP]" in drawn.title
    breadth = panel_matrix(roles_panel(roles, BREADTH, "[CLS]"))
    np.testing.assert_allclose(breadth.values, 0.5)


def test_clear_roles_lists_each_labelled_head_most_common_role_first():
    labels = np.array([["previous", "", "first"], ["first", "broad", "first"]])
    roles = roles_of(np.zeros((2, 3, 6)), np.zeros((2, 3)), labels)
    table = clear_roles(roles, "The")
    assert table["role"].tolist() == ["the first token (The)", "the previous token", "broad attention"]
    assert table["count"].tolist() == [3, 1, 1]
    assert table["heads"].iloc[0] == "L0 H2, L1 H0, L1 H2"
    assert clear_roles(roles_of(np.zeros((1, 1, 6)), np.zeros((1, 1)), np.array([[""]])), "x").empty


def test_anatomy_counts_gated_feed_forwards_and_grouped_key_values():
    cfg = tiny()
    model = build_model(cfg)
    groups = parameter_groups(parameter_counts(model), norm_name(cfg)).set_index("group")["parameters"]
    assert "other" not in groups.index  # the gate is feed-forward, the RMSNorms are norms
    norms = [m for m in model.modules() if isinstance(m, torch.nn.RMSNorm)]
    assert groups["RMSNorm"] == sum(m.weight.numel() for m in norms) > 0 and "LayerNorm" not in groups.index
    assert groups["feed-forward"] == cfg.n_layers * 3 * cfg.d_model * cfg.d_ff  # gate, up, down: no biases
    table = multiply_adds(cfg, 5, vocabulary_size=cfg.vocab_size)
    [qkv] = table[table["component"].str.contains("Q, K, V")]["multiply_adds"]
    d, kv = cfg.d_model, cfg.n_kv_heads * cfg.d_head
    assert qkv == cfg.n_layers * (5 * d * d + 2 * 5 * d * kv)  # K and V are [T, 2 heads x 8]
    assert table["multiply_adds"].sum() > 0 and isinstance(table, pd.DataFrame)


def test_a_checkpoint_is_not_held_to_the_configured_parameter_limit_but_to_its_own_trace_budget():
    huge = tiny(d_model=4096, n_heads=32, n_kv_heads=32, d_ff=16384, n_layers=40, vocab_size=50_000, max_tokens=4096)
    check_app_size(huge, 8)  # billions of parameters: built once per server, not per link
    assert trace_bytes(huge, 512) > MAX_TRACE_BYTES  # too much for a configured model's trace ...
    with pytest.raises(ConfigError, match="MB per input"):
        check_app_size(huge, 4096)  # ... and beyond a checkpoint's budget too
    assert trace_bytes(huge, 4096) > MAX_CHECKPOINT_TRACE_BYTES


def test_minilms_token_types_are_a_kind_of_their_own_not_part_of_the_token_table(minilm_model):
    """BERT's token-type table (768 numbers in MiniLM: sentence A or B) had been summed into "token embeddings", so that
    row read 11,721,216 where MiniLM's vocabulary table is 30,522 × 384 = 11,720,448."""
    groups = parameter_groups(parameter_counts(minilm_model), "LayerNorm").set_index("group")["parameters"]
    assert groups["token embeddings"] == minilm_model.embedding.weight.numel() == 30_522 * 384
    assert groups["token types (BERT's sentence A or B)"] == minilm_model.token_type.weight.numel() == 2 * 384
