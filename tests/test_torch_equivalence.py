"""The engine against torch's own modules with copied weights: both norm placements, every mask."""

import itertools

import numpy as np
import pytest
import torch
from torch import nn

import explorer

D, H, F, T, S = 32, 4, 64, 7, 5
MASKS = ("none", "causal", "padding", "causal+padding")
PAD_AT = (2, 5)  # positions treated as padding; no query loses every key under causal+padding


def allowed_mask(kind: str, n_query: int = T, n_key: int = T) -> torch.Tensor:
    """[Tq, Tk] bool, True = may attend (the explorer's convention)."""
    allowed = torch.ones(n_query, n_key, dtype=torch.bool)
    if "causal" in kind:
        allowed = torch.tril(allowed)
    if "padding" in kind:
        allowed[:, list(PAD_AT)] = False
    return allowed


def torch_weights(attention: nn.MultiheadAttention, query, memory, allowed) -> torch.Tensor:
    """[H, Tq, Tk] per-head weights exactly as torch reports them."""
    _, weights = attention(
        query,
        memory,
        memory,
        attn_mask=None if allowed is None else ~allowed,
        need_weights=True,
        average_attn_weights=False,
    )
    return weights


def encoder_layer(norm_first: bool, activation: str = "relu", batch_first: bool = False, bias: bool = True):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        D, H, F, dropout=0.1, activation=activation, norm_first=norm_first, batch_first=batch_first, bias=bias
    )
    with torch.no_grad():  # torch zero-initialises biases and LayerNorms: make every parameter matter
        for p in layer.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return layer.eval()


@pytest.mark.parametrize(
    ("norm_first", "mask", "batch_first"), list(itertools.product([False, True], MASKS, [False, True]))
)
def test_encoder_layer_matches_torch(norm_first, mask, batch_first):
    layer = encoder_layer(norm_first, batch_first=batch_first)
    x = torch.randn(T, D, generator=torch.Generator().manual_seed(1))
    allowed = allowed_mask(mask)
    trace = explorer.run(explorer.from_torch(layer), x, mask=allowed)
    with torch.no_grad():
        expected = layer(x, src_mask=~allowed)
        attention_input = layer.norm1(x) if norm_first else x
        weights = torch_weights(layer.self_attn, attention_input, attention_input, allowed)
    np.testing.assert_allclose(trace.output, expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(trace.attention[0], weights.numpy(), atol=1e-6, rtol=0)
    assert trace.attention.shape == (1, H, T, T)


@pytest.mark.parametrize(("norm_first", "activation"), [(False, "gelu"), (True, "gelu"), (True, "relu")])
def test_encoder_stack_with_final_norm_matches_torch_layer_by_layer(norm_first, activation):
    torch.manual_seed(3)
    stack = nn.TransformerEncoder(
        encoder_layer(norm_first, activation), num_layers=3, norm=nn.LayerNorm(D), enable_nested_tensor=False
    ).eval()
    with torch.no_grad():
        for p in stack.norm.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        for layer in stack.layers:  # clones start identical: make the layers differ
            for p in layer.parameters():
                p.add_(torch.randn_like(p) * 0.05)
    x = torch.randn(T, D)
    allowed = allowed_mask("causal+padding")
    trace = explorer.run(explorer.from_torch(stack), x, mask=allowed)
    with torch.no_grad():
        np.testing.assert_allclose(trace.output, stack(x, mask=~allowed).numpy(), atol=1e-5)
        h = x
        for i, layer in enumerate(stack.layers):
            attention_input = layer.norm1(h) if norm_first else h
            expected = torch_weights(layer.self_attn, attention_input, attention_input, allowed)
            np.testing.assert_allclose(trace.attention[i], expected.numpy(), atol=1e-6, rtol=0)
            h = layer(h, src_mask=~allowed)
            np.testing.assert_allclose(trace.residual[i + 1], h.numpy(), atol=1e-5)


FINAL_NORMS = {
    "its own eps": lambda: nn.LayerNorm(D, eps=0.1),
    "no weight or bias": lambda: nn.LayerNorm(D, elementwise_affine=False),
    "no bias": lambda: nn.LayerNorm(D, bias=False),
}


@pytest.mark.parametrize("final_norm", list(FINAL_NORMS))
def test_a_stack_final_norm_unlike_the_layers_norms_matches_torch(final_norm):
    """The final norm is the user's own module: its eps, weight and bias need not be the layers'."""
    stack = nn.TransformerEncoder(
        encoder_layer(True), num_layers=2, norm=FINAL_NORMS[final_norm](), enable_nested_tensor=False
    ).eval()
    with torch.no_grad():
        for p in stack.norm.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    x = torch.randn(T, D, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = stack(x)
    np.testing.assert_allclose(explorer.run(explorer.from_torch(stack), x).output, expected.numpy(), atol=1e-5)


@pytest.mark.parametrize("final_norm", list(FINAL_NORMS))
def test_a_transformer_with_its_own_final_norms_matches_torch(final_norm):
    torch.manual_seed(5)
    model = nn.Transformer(D, H, 1, 1, F, dropout=0.0, norm_first=True).eval()
    model.encoder.norm, model.decoder.norm = FINAL_NORMS[final_norm](), FINAL_NORMS[final_norm]()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    src, tgt = torch.randn(S, D), torch.randn(T, D)
    with torch.no_grad():
        expected = model(src, tgt)
    np.testing.assert_allclose(explorer.run(explorer.from_torch(model), src, tgt).output, expected.numpy(), atol=1e-5)


def test_padded_positions_are_what_the_layers_compute_not_the_zeros_of_torchs_nested_tensor_path():
    """As the README says: torch's nested-tensor path zeroes padded positions; the explorer matches torch everywhere
    else, and matches torch without that path everywhere."""
    torch.manual_seed(6)
    stack = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(D, H, F, dropout=0.0, batch_first=True), 2, enable_nested_tensor=True
    ).eval()
    x, padded = torch.randn(T, D), torch.tensor([False] * (T - 2) + [True] * 2)
    trace = explorer.run(explorer.from_torch(stack), x, mask=(~padded).expand(T, T))
    with torch.inference_mode():
        nested = stack(x[None], src_key_padding_mask=padded[None])[0]
        stack.use_nested_tensor = False
        layer_by_layer = stack(x[None], src_key_padding_mask=padded[None])[0]
    assert (nested[padded] == 0).all() and (np.abs(trace.output[padded.numpy()]) > 0.1).any()
    np.testing.assert_allclose(trace.output[~padded.numpy()], nested[~padded].numpy(), atol=1e-5)
    np.testing.assert_allclose(trace.output, layer_by_layer.numpy(), atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_full_transformer_matches_torch_including_cross_attention(norm_first):
    torch.manual_seed(4)
    model = nn.Transformer(D, H, 2, 2, F, dropout=0.2, norm_first=norm_first).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    src, tgt = torch.randn(S, D), torch.randn(T, D)
    tgt_allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
    memory_allowed = torch.ones(T, S, dtype=torch.bool)
    memory_allowed[:, 1] = False
    trace = explorer.run(explorer.from_torch(model), src, tgt, target_mask=tgt_allowed, memory_mask=memory_allowed)
    with torch.no_grad():
        expected = model(src, tgt, tgt_mask=~tgt_allowed, memory_mask=~memory_allowed)
        np.testing.assert_allclose(trace.output, expected.numpy(), atol=1e-5)
        memory = model.encoder(src)
        np.testing.assert_allclose(trace.first.output, memory.numpy(), atol=1e-5)
        h = tgt
        for i, layer in enumerate(model.decoder.layers):
            self_input = layer.norm1(h) if norm_first else h
            self_weights = torch_weights(layer.self_attn, self_input, self_input, tgt_allowed)
            np.testing.assert_allclose(trace.decoder_attention[i], self_weights.numpy(), atol=1e-6, rtol=0)
            mid = h + layer.self_attn(self_input, self_input, self_input, attn_mask=~tgt_allowed)[0]
            mid = mid if norm_first else layer.norm1(mid)
            cross_input = layer.norm2(mid) if norm_first else mid
            cross_weights = torch_weights(layer.multihead_attn, cross_input, memory, memory_allowed)
            np.testing.assert_allclose(trace.cross_attention[i], cross_weights.numpy(), atol=1e-6, rtol=0)
            h = layer(h, memory, tgt_mask=~tgt_allowed, memory_mask=~memory_allowed)
    assert (trace.cross_attention[..., 1] == 0).all()


def test_layers_without_bias_match_torch():
    layer = encoder_layer(True, bias=False)
    x = torch.randn(T, D)
    with torch.no_grad():
        expected = layer(x)
    np.testing.assert_allclose(explorer.run(explorer.from_torch(layer), x).output, expected.numpy(), atol=1e-5)


@pytest.mark.parametrize(("norm", "mask"), list(itertools.product(["post", "pre"], MASKS)))
def test_built_model_is_the_torch_encoder_with_its_weights(norm, mask):
    """build_model's blocks are the textbook placements: load its weights into torch and compare."""
    cfg = explorer.ModelConfig(d_model=D, n_heads=H, n_layers=2, d_ff=F, norm=norm, activation="gelu")
    model = explorer.build_model(cfg)
    stack = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(D, H, F, activation="gelu", norm_first=norm == "pre"),
        num_layers=2,
        norm=nn.LayerNorm(D) if norm == "pre" else None,
        enable_nested_tensor=False,
    ).eval()
    stack.load_state_dict({k.removeprefix("encoder."): v for k, v in model.state_dict().items() if "encoder." in k})
    x = torch.randn(T, D)
    allowed = allowed_mask(mask)
    with torch.no_grad():
        expected = stack(x, mask=~allowed)
    np.testing.assert_allclose(explorer.run(model, x, mask=allowed).output, expected.numpy(), atol=1e-5)
