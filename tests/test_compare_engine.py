"""Comparing two configurations: shared weights, exact zero for B = A, head ranking, URL round trip."""

import numpy as np
import pytest
import torch

import explorer
import explorer.build
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals
from explorer.compare import (
    MapPair,
    attention_difference,
    can_share_weights,
    default_b,
    head_ranking,
    js_divergence,
    layer_difference,
    model_for_b,
    same_parameters,
    to_query,
)
from explorer.compare_link import comparison_query
from explorer.trace import AttentionMaps

TOKENS = "the cat sat on the mat"
A = explorer.ModelConfig(n_layers=3)


def traces(a, b):
    model_a = explorer.build_model(a)
    model_b = model_for_b(model_a, b)
    return model_a, model_b, explorer.run(model_a, TOKENS), explorer.run(model_b, TOKENS)


@pytest.mark.parametrize("b", [default_b(A.replace(norm="pre")), A.replace(norm="peri", n_layers=4)])
def test_a_b_that_shares_a_s_tensors_runs_as_its_copy_does_and_holds_no_copy(b):
    """The app's B (model_for_b(..., share=True)) holds A's very tensors, not copies: SmolLM2's flipped B had been
    540 MB. It runs and takes gradients exactly as the copy does; a B made without `share` owns its tensors."""
    model_a = explorer.build_model(A.replace(norm="pre"))
    shared, copied = model_for_b(model_a, b, share=True), model_for_b(model_a, b)
    storage = {p.data_ptr() for p in model_a.parameters()}
    in_both = [name for name, _ in shared.named_parameters() if name in dict(model_a.named_parameters())]
    assert in_both and all(dict(shared.named_parameters())[n].data_ptr() in storage for n in in_both)
    assert not any(p.data_ptr() in storage for p in copied.parameters())
    np.testing.assert_array_equal(explorer.run(shared, TOKENS).attention, explorer.run(copied, TOKENS).attention)
    grads = [layer_gradient_totals(gradient_norms(m, TOKENS))["norm"] for m in (shared, copied)]
    np.testing.assert_array_equal(*grads)
    assert all(p.grad is None for p in model_a.parameters())  # A is only read


@pytest.mark.parametrize(
    "b",
    [
        A.replace(norm="post"),
        A.replace(norm="peri"),
        A.replace(norm="pre", n_layers=4),
        A.replace(positional="learned"),
    ],
)
def test_a_shared_b_has_every_value_a_copied_b_has(b):
    """Shared, B takes A's tensors and sets the norms A lacks to the identity, with no weights drawn; where more than
    norms would be left to fill (a block or a position table A has not), it is drawn first, as a copied B is."""
    model_a = explorer.build_model(A.replace(norm="pre"))
    shared, copied = model_for_b(model_a, b, share=True).state_dict(), model_for_b(model_a, b).state_dict()
    assert shared.keys() == copied.keys()
    for name, value in shared.items():
        torch.testing.assert_close(value, copied[name], rtol=0, atol=0, msg=name)


def test_a_shared_norm_flip_draws_no_weights(monkeypatch, minilm_model):
    """Drawing SmolLM2's weights for a B that drops them took 540 MB at the top of Compare's four placements."""
    copied = model_for_b(minilm_model, minilm_model.config.replace(norm="pre")).state_dict()
    monkeypatch.setattr(explorer.build, "init_weights", lambda *_: pytest.fail("weights drawn for a shared B"))
    shared = model_for_b(minilm_model, minilm_model.config.replace(norm="pre"), share=True).state_dict()
    assert shared.keys() == copied.keys()
    for name, value in shared.items():
        torch.testing.assert_close(value, copied[name], rtol=0, atol=0, msg=name)


def test_b_equal_to_a_gives_exactly_zero_difference():
    _, _, trace_a, trace_b = traces(A, A)
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    assert (attention_difference(maps_a, maps_b) == 0).all()
    assert (head_ranking(maps_a, maps_b)["js_divergence"] == 0).all()


def test_norm_placement_only_shares_every_parameter_and_changes_attention():
    b = default_b(A)
    assert b.norm == "pre" and b.replace(norm="post") == A
    model_a, model_b, trace_a, trace_b = traces(A, b)
    assert can_share_weights(A, b)[0]
    assert same_parameters(model_a, model_b)
    difference = attention_difference(
        trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    )
    assert np.abs(difference).max() > 1e-4


def test_shape_changes_cannot_share_weights_and_say_so():
    other_seed = A.replace(seed=1)
    assert not can_share_weights(A, other_seed)[0]
    assert not same_parameters(explorer.build_model(A), model_for_b(explorer.build_model(A), other_seed))
    shareable, why = can_share_weights(A, A.replace(n_heads=8))
    assert not shareable and "n_heads (4 vs 8)" in why
    with pytest.raises(explorer.ConfigError, match="same shape"):
        _, _, trace_a, trace_b = traces(A, A.replace(n_layers=2))
        attention_difference(trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"])


def test_more_layers_keep_a_weights_in_the_blocks_both_have():
    """B with 4 layers where A has 3: B's blocks 0 to 2 are A's, so with the same norm those maps are A's exactly."""
    deeper = A.replace(n_layers=4)
    assert can_share_weights(A, deeper)[0]
    model_a = explorer.build_model(A)
    model_b = model_for_b(model_a, deeper)
    assert same_parameters(model_a, model_b)
    maps_a = explorer.run(model_a, TOKENS).attention_maps()["self-attention"]
    maps_b = explorer.run(model_b, TOKENS).attention_maps()["self-attention"]
    pair = MapPair("self-attention", 0, maps_a, maps_b)
    for layer in range(3):
        assert (layer_difference(pair, layer, 1) == 0).all()
    assert layer_difference(pair, 3, 1) is None  # A has no layer 3
    wider = explorer.run(model_for_b(model_a, A.replace(n_heads=8, n_layers=4)), TOKENS)
    other_heads = MapPair("self-attention", 0, maps_a, wider.attention_maps()["self-attention"])
    assert layer_difference(other_heads, 0, 1) is None  # other heads


def maps_from(weights: np.ndarray) -> AttentionMaps:
    tokens = [str(i) for i in range(weights.shape[-1])]
    allowed = np.ones(weights.shape[-2:], dtype=bool)
    return AttentionMaps("self-attention", weights.astype(np.float32), np.zeros_like(weights), allowed, tokens, tokens)


def test_head_ranking_puts_the_changed_head_first():
    uniform = np.full((2, 3, 4, 4), 0.25)
    changed = uniform.copy()
    changed[1, 2] = np.eye(4)  # layer 1, head 2: from uniform to one-hot
    changed[0, 1, 0] = [0.4, 0.2, 0.2, 0.2]  # a small change elsewhere
    ranking = head_ranking(maps_from(uniform), maps_from(changed))
    assert (ranking.loc[0, "layer"], ranking.loc[0, "head"]) == (1, 2)
    assert ranking.loc[0, "js_divergence"] == pytest.approx(js_divergence(np.full(4, 0.25), np.eye(4)[0]))
    assert (ranking.loc[1, "layer"], ranking.loc[1, "head"]) == (0, 1)
    assert (ranking.loc[2:, "js_divergence"] == 0).all()


def test_js_divergence_is_zero_for_equal_and_one_for_disjoint():
    assert js_divergence(np.array([0.5, 0.5]), np.array([0.5, 0.5])) == 0
    assert js_divergence(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)


def test_the_url_holds_only_what_b_changes_beyond_the_flipped_norm():
    b = A.replace(norm="pre", mask="causal", positional="rope", seed=3)
    assert to_query(b, A) == {"b_mask": "causal", "b_positional": "rope", "b_seed": "3"}  # norm=pre is B's default
    assert to_query(default_b(A), A) == {}


def test_a_comparison_link_holds_a_s_changes_the_texts_and_b_s_changes():
    a = explorer.ModelConfig(seed=3)
    b = default_b(a).replace(mask="causal")
    assert comparison_query(a, b, TOKENS, None, "configuration", TOKENS) == {
        "seed": "3",
        "tokens": TOKENS,
        "b_mask": "causal",
    }
    ed = explorer.ModelConfig(arch="encoder-decoder")
    assert comparison_query(ed, default_b(ed), TOKENS, "le chat", "configuration", TOKENS) == {
        "arch": "encoder-decoder",
        "tokens": TOKENS,
        "target": "le chat",
    }


def test_a_two_input_link_holds_b_s_text_unless_it_is_a_s_reversed():
    a = explorer.ModelConfig()
    reversed_tokens = "mat the on sat cat the"
    assert comparison_query(a, a, TOKENS, None, "input", reversed_tokens) == {"tokens": TOKENS, "compare": "input"}
    assert comparison_query(a, a, TOKENS, None, "input", "a dog") == {
        "tokens": TOKENS,
        "compare": "input",
        "b_tokens": "a dog",
    }
