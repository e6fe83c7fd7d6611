"""Attention without its weights (MultiHeadAttention's need_weights=False, Stack.forward's record=False) gives the
same output as the path that computes and keeps every weight: masks, a query with no allowed key, cross-attention,
grouped-query heads, rope and removed heads; training keeps the weights path; a stack run so records nothing."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import explorer
from explorer.ablation import HeadAblation
from explorer.attention import MultiHeadAttention
from explorer.config import ARCHS, MASKS, PAD_TOKEN, ModelConfig
from tests.tiny_checkpoints import tiny

# The fused kernel sums the same products in another order (in blocks of keys, with a running maximum): the outputs
# differ by float32 rounding, about 1e-7 of their size (measured: 2e-8 on MiniLM's 1 - cosine board, and at most
# 6e-7 here on outputs of size 1). 1e-5 leaves a wide margin and is far below any difference a wrong mask, scale or
# head would make (of the order of the outputs themselves).
ROUNDING = 1e-5
TOKENS = ["the", "cat", PAD_TOKEN, "sat", "on", PAD_TOKEN]


def attention(rope: bool, n_kv_heads: int) -> MultiHeadAttention:
    """4 heads of 8 over d_model 32, with random weights (the module's parameters start uninitialised)."""
    torch.manual_seed(0)
    module = MultiHeadAttention(32, 4, rope=rope, n_kv_heads=n_kv_heads)
    for parameter in module.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    return module


def masks(T: int, S: int) -> torch.Tensor:
    """[2, T, S]: random allowed keys, with row 0 of the first sentence allowed none."""
    allowed = torch.rand(2, T, S, generator=torch.Generator().manual_seed(1)) > 0.4
    allowed[0, 0] = False
    allowed[1, :, 0] = True  # the second sentence: every query has a key
    return allowed


@pytest.mark.parametrize(
    ("rope", "n_kv_heads", "cross", "removed_with"),
    [
        (False, 4, False, None),
        (True, 4, False, "zero"),
        (True, 2, False, "mean"),  # grouped-query: 4 query heads share 2 key/value heads
        (False, 4, True, "zero"),  # cross-attention: 5 queries, 7 keys
        (False, 2, True, "mean"),
    ],
)
def test_the_output_without_weights_equals_the_output_with_them(rope, n_kv_heads, cross, removed_with):
    module = attention(rope, n_kv_heads)
    query = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(2))  # [B, T, D]
    memory = torch.randn(2, 7, 32, generator=torch.Generator().manual_seed(3)) if cross else query  # [B, S, D]
    allowed = masks(5, memory.shape[1])
    removed = None if removed_with is None else torch.tensor([[1.0, 0, 0, 0], [0, 0, 1, 1]])  # [B, H]
    with torch.inference_mode():
        expected, weights, _ = module(query, memory, allowed, False, removed, removed_with or "zero")
        output, no_weights, no_scores = module(
            query, memory, allowed, False, removed, removed_with or "zero", need_weights=False
        )
    assert no_weights is None and no_scores is None
    assert (weights[0, :, 0] == 0).all()  # the query with no key: weight 0 everywhere, so its heads add nothing
    assert torch.isfinite(output).all()
    np.testing.assert_allclose(output.numpy(), expected.numpy(), atol=ROUNDING)
    unmasked, _, _ = module(query, memory, None, False, need_weights=False)
    assert (unmasked - output).abs().max() > 100 * ROUNDING  # the mask is applied, not ignored


def test_training_keeps_the_weights_path_and_its_dropout():
    """In training the weights are dropped out as the module always did: need_weights does not change the draw."""
    module = attention(False, 4)
    module.dropout = 0.5
    query = torch.randn(1, 6, 32)
    torch.manual_seed(7)
    expected, _, _ = module(query, query, None, True)
    torch.manual_seed(7)
    output, weights, _ = module(query, query, None, True, need_weights=False)
    assert weights is not None
    torch.testing.assert_close(output, expected, rtol=0, atol=0)


CONFIGS = [
    ModelConfig(d_model=32, n_heads=4, n_layers=3, d_ff=64, arch=a, mask=m) for a, m in itertools.product(ARCHS, MASKS)
]


@pytest.mark.parametrize("cfg", [*CONFIGS, tiny("llama")], ids=lambda c: f"{c.arch}-{c.mask}-{c.positional}")
def test_a_stack_run_without_records_ends_where_the_recorded_run_does(cfg):
    model = explorer.build_model(cfg)
    target = ["le", "chat", PAD_TOKEN] if cfg.arch == "encoder-decoder" else None
    trace = explorer.run(model, TOKENS, target)
    stack = model.encoder if model.encoder is not None else model.decoder
    x = torch.from_numpy(trace.first.residual[0]).expand(3, -1, -1)  # [B, T, D], three rows
    allowed = torch.from_numpy(trace.first.self_attention.allowed)[None]  # [1, T, T]
    removed = torch.zeros(3, len(stack.layers), stack.layers[0].self_attn.n_heads)  # [B, L, H]
    removed[1, 1, 2] = removed[2, 2 % len(stack.layers), 0] = 1.0  # rows 1 and 2 each lose a head
    ablation = HeadAblation(removed, "zero")
    with torch.inference_mode():
        recorded, records = stack(x, allowed, ablation=ablation, first_layer=1)
        output, nothing = stack(x, allowed, ablation=ablation, first_layer=1, record=False)
    assert len(records) == len(stack.layers) - 1 and len(nothing) == 0
    np.testing.assert_allclose(output.numpy(), recorded.numpy(), atol=ROUNDING)
    assert (output[1] - output[0]).abs().max() > 100 * ROUNDING  # the removed head is removed in the fused path too
