"""Norm-based attention (Kobayashi et al. 2020): ||alpha_ij f_h(x_j)|| against a direct computation from the model's
modules, on every kind of model the engine builds, and on constructed cases where the answer is known."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import explorer
from explorer.analysis.norm_attention import norm_attention, norm_shares, value_norms
from explorer.config import ConfigError

# float32 sums of d_model products: the engine's einsum and the test's loop add in other orders, about 1e-6 apart.
RELATIVE_TOLERANCE = 1e-5


def head_vectors(attention, x: torch.Tensor) -> torch.Tensor:
    """[H, T, D] f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h, head by head with the module's own Linear pieces: the value rows
    taken from in_proj by position, not by the engine's reshape."""
    d = attention.out_proj.weight.shape[0]
    k = attention.d_head
    group = attention.n_heads // attention.n_kv_heads
    vectors = []
    for h in range(attention.n_heads):
        g = h // group
        rows = slice(d + attention.n_kv_heads * k + g * k, d + attention.n_kv_heads * k + (g + 1) * k)
        bias = None if attention.in_proj_bias is None else attention.in_proj_bias[rows]
        value = torch.nn.functional.linear(x, attention.in_proj_weight[rows], bias)  # [T, K]
        vectors.append(value @ attention.out_proj.weight[:, h * k : (h + 1) * k].T)  # [T, D]
    return torch.stack(vectors)


def relative_gap(ours: np.ndarray, theirs: np.ndarray) -> float:
    return float(np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-30))


@pytest.mark.parametrize(
    "cfg",
    [
        explorer.ModelConfig(norm="post"),
        explorer.ModelConfig(norm="pre", n_heads=8, mask="causal", positional="rope"),
        explorer.ModelConfig(arch="decoder", norm="pre", n_layers=3),
        explorer.ModelConfig(norm="res-post", n_layers=3),
        explorer.ModelConfig(arch="decoder", norm="peri", n_heads=2),
    ],
    ids=["post", "pre-rope-causal", "decoder", "res-post", "peri-decoder"],
)
def test_norms_equal_a_direct_computation_and_the_heads_add_up_to_the_sublayer(cfg):
    """Besides the norms, the vectors they measure must be the head's real share of the output: summed over keys and
    heads, alpha_ij f_h(x_j) plus the output bias is exactly what the attention sub-layer added (attn.out)."""
    model = explorer.build_model(cfg)
    trace = explorer.run(model, "the cat sat on the mat again")
    ours = norm_attention(model, trace)
    stack = model.encoder or model.decoder
    for layer, block in enumerate(stack.layers):
        name = "attn.ln_out" if cfg.norm in ("pre", "peri") else "resid_pre"  # res-post reads the raw stream
        x = torch.from_numpy(trace.first[f"blocks.{layer}.{name}"])  # [T, D] what attention reads
        with torch.no_grad():
            vectors = head_vectors(block.self_attn, x)  # [H, T, D]
        weights = torch.from_numpy(trace.attention[layer])  # [H, T, T]
        direct = weights * vectors.norm(dim=-1)[:, None, :]  # [H, T, T]
        assert relative_gap(ours[layer], direct.numpy()) <= RELATIVE_TOLERANCE
        summed = torch.einsum("hij,hjd->id", weights, vectors) + block.self_attn.out_proj.bias.detach()  # [T, D]
        assert relative_gap(summed.numpy(), trace.first[f"blocks.{layer}.attn.out"]) <= RELATIVE_TOLERANCE


def test_cross_attention_reads_the_encoders_output():
    model = explorer.build_model(explorer.ModelConfig(arch="encoder-decoder", norm="pre"))
    trace = explorer.run(model, "the cat sat on the mat", "le chat")
    ours = norm_attention(model, trace, "cross-attention")
    assert ours.shape == trace.cross_attention.shape
    memory = torch.from_numpy(trace.first.output)  # [S, D]
    for layer, block in enumerate(model.decoder.layers):
        with torch.no_grad():
            sizes = head_vectors(block.multihead_attn, memory).norm(dim=-1)  # [H, S]
        direct = trace.cross_attention[layer] * sizes.numpy()[:, None, :]
        assert relative_gap(ours[layer], direct) <= RELATIVE_TOLERANCE
    decoder_self = norm_attention(model, trace, "decoder self-attention")
    assert decoder_self.shape == trace.decoder_attention.shape
    assert (decoder_self[trace.decoder_attention == 0] == 0).all()


def test_a_key_whose_value_vectors_are_zero_gets_no_share_whatever_its_weight():
    """An imported post-norm layer reads its input as it is: a zero input row and zero value biases make every head's
    f_h(x_j) zero for that key, so the key gets nothing of what any head adds though it still has weight."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    with torch.no_grad():
        layer.self_attn.in_proj_bias.zero_()
    model = explorer.from_torch(layer)
    x = torch.randn(5, 16)
    x[2] = 0.0  # key 2: x_j = 0, so x_j W_V + b_V = 0 for every head
    trace = explorer.run(model, x)
    norms = norm_attention(model, trace)
    assert (trace.attention[0][:, :, 2] > 0.01).all()  # every query still looks at it
    assert (norms[0][:, :, 2] == 0).all()
    assert (norm_shares(norms)[0][:, :, 2] == 0).all()
    assert (norms[0][:, :, [0, 1, 3, 4]] > 0).all()


def test_masked_keys_add_nothing_and_shares_are_distributions():
    cfg = explorer.ModelConfig(mask="causal+padding")
    model = explorer.build_model(cfg)
    trace = explorer.run(model, "a b c [PAD] [PAD]")
    norms = norm_attention(model, trace)
    allowed = trace.first.self_attention.allowed  # [T, T]
    assert (norms[..., ~allowed] == 0).all()
    shares = norm_shares(norms)
    sums = shares.sum(axis=-1)  # [L, H, T]
    has_keys = allowed.any(axis=-1)
    np.testing.assert_allclose(sums[..., has_keys], 1.0, atol=1e-6)
    assert (sums[..., ~has_keys] == 0).all()
    assert np.isfinite(shares).all()


def test_value_norms_keep_one_number_per_key_not_a_vector():
    model = explorer.build_model(explorer.ModelConfig(n_layers=3, n_heads=2))
    trace = explorer.run(model, "one two three four")
    assert value_norms(model, trace).shape == (3, 2, 4)


def test_a_trace_of_another_model_or_a_missing_kind_is_refused():
    model = explorer.build_model(explorer.ModelConfig(n_layers=2))
    deeper = explorer.build_model(explorer.ModelConfig(n_layers=3))
    trace = explorer.run(deeper, "a b c")
    with pytest.raises(ConfigError, match="not this model's run .it was made with another configuration"):
        norm_attention(model, trace)
    with pytest.raises(ConfigError, match="no 'cross-attention'"):
        norm_attention(deeper, trace, "cross-attention")


def test_a_trace_of_another_model_with_the_same_config_is_refused():
    """Found by a notebook review: two imported models of one shape both have config None, so norm_attention(b,
    trace of a) computed with b's weights on a's stream and returned numbers of neither. A trained model and the
    random one it started from share a config in the same way."""
    torch.manual_seed(0)
    a, b = (
        explorer.from_torch(nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2))
        for _ in "ab"
    )
    trace = explorer.run(a, torch.randn(5, 16))
    assert norm_attention(a, trace).shape == (2, 4, 5, 5)
    with pytest.raises(ConfigError, match="block 0 of this model turns the trace's stream into another"):
        norm_attention(b, trace)
    cfg = explorer.ModelConfig(n_layers=2, norm="pre", mask="causal", positional="rope")
    start, learned = explorer.build_model(cfg), explorer.build_model(cfg)
    with torch.no_grad():
        learned.first_stack.layers[0].self_attn.out_proj.weight.mul_(1.5)  # as a step of training changes it
    trace = explorer.run(start, "the cat sat on the mat")
    norm_attention(start, trace)
    with pytest.raises(ConfigError, match="not this model's run"):
        norm_attention(learned, trace)


def test_a_run_with_heads_removed_is_checked_on_a_block_it_left_whole():
    cfg = explorer.ModelConfig(n_layers=2, n_heads=2)
    model, other = explorer.build_model(cfg), explorer.build_model(cfg)
    with torch.no_grad():
        other.first_stack.layers[1].linear2.weight.mul_(2.0)
    trace = explorer.run(model, "a b c d", ablate="L0H1")
    norm_attention(model, trace)  # block 0 lost a head, so rerun without it, it would not match: block 1 is rerun
    with pytest.raises(ConfigError, match="block 1 of this model"):
        norm_attention(other, trace)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_a_run_with_a_head_removed_in_every_block_is_checked_without_those_heads(mode):
    """With a head removed in every block no block ran whole, and the check used to pass any model of the config."""
    cfg = explorer.ModelConfig(n_layers=2, n_heads=2, mask="causal")
    model, other = explorer.build_model(cfg), explorer.build_model(cfg)
    with torch.no_grad():
        other.first_stack.layers[0].linear2.weight.mul_(2.0)
    trace = explorer.run(model, "a b c d", ablate="L0H1,L1H0", ablate_with=mode)
    norm_attention(model, trace)  # block 0 rerun without L0H1 gives the trace's stream
    with pytest.raises(ConfigError, match="block 0 of this model"):
        norm_attention(other, trace)


@pytest.mark.slow
def test_minilms_first_token_heads_add_little_to_the_stream(minilm_model):
    """Kobayashi et al. (2020) found BERT's heads that park their weight on [CLS] and [SEP] add almost nothing there.
    On MiniLM and this sentence 30 of 72 heads are first-token heads by weight, 1 by what they add, and those 30 put
    0.68 of their weight but 0.15 of what they add on [CLS]. The test pins the direction with the paper's margin:
    "mostly" means fewer than half of the heads keep the role, and their share falls by more than half."""
    from explorer.analysis.head_roles import head_roles

    trace = explorer.run(minilm_model, "The cat sat on the mat because it was tired.")
    allowed = trace.first.self_attention.allowed
    by_weight = head_roles(trace.attention, trace.tokens, allowed)
    by_norm = head_roles(norm_shares(norm_attention(minilm_model, trace)), trace.tokens, allowed)
    first_heads = by_weight.labels == "first"
    assert first_heads.sum() >= 10  # the board's claim this test is about: many first-token heads by weight
    assert (by_norm.labels == "first").sum() < first_heads.sum() / 2
    assert by_norm.share("first")[first_heads].mean() < by_weight.share("first")[first_heads].mean() / 2


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_a_removed_head_is_measured_by_what_it_really_added(mode):
    """With heads removed (explorer.ablation), the weights that mix the values are zero (zero) or each key's mean weight
    over the queries (mean); with those, the heads' vectors still add up exactly to what the sub-layer added, and the
    norm map of a zeroed head is 0 everywhere although its attention weights are kept in the trace."""
    cfg = explorer.ModelConfig(arch="decoder", norm="pre", n_layers=2, n_heads=4)
    model = explorer.build_model(cfg)
    removed = [(0, 1), (1, 2), (1, 3)]
    trace = explorer.run(model, "the cat sat on the mat again", ablate=removed, ablate_with=mode)
    ours = norm_attention(model, trace)  # [L, H, T, T]
    for layer, block in enumerate(model.decoder.layers):
        x = torch.from_numpy(trace.first[f"blocks.{layer}.attn.ln_out"])  # [T, D]
        with torch.no_grad():
            vectors = head_vectors(block.self_attn, x)  # [H, T, D]
        weights = torch.from_numpy(trace.attention[layer].copy())  # [H, T, T]
        for head in [h for (at, h) in removed if at == layer]:
            assert trace.attention[layer, head].sum() > 0  # the weights it computed are still shown
            weights[head] = 0.0 if mode == "zero" else weights[head].mean(dim=0, keepdim=True)
        summed = torch.einsum("hij,hjd->id", weights, vectors) + block.self_attn.out_proj.bias.detach()  # [T, D]
        assert relative_gap(summed.numpy(), trace.first[f"blocks.{layer}.attn.out"]) <= RELATIVE_TOLERANCE
        direct = weights * vectors.norm(dim=-1)[:, None, :]  # [H, T, T]
        assert relative_gap(ours[layer], direct.numpy()) <= RELATIVE_TOLERANCE
    if mode == "zero":
        assert not ours[0, 1].any() and not ours[1, 2].any()
