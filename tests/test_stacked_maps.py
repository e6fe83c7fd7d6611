"""Outside autograd each stack's blocks write their attention maps into one buffer (explorer.model.Records.stacked),
which a trace then keeps as it is: the numbers must be those of the ordinary forward, bit for bit, in every case the
forward branches on (no mask, a mask, a query that may see no key, cross-attention, scores kept or not, a run
starting above block 0)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.build import build_model

T, S = 6, 4


def small(**changes) -> explorer.ModelConfig:
    return explorer.ModelConfig(d_model=32, n_heads=4, n_layers=3, d_ff=64, seed=3).replace(**changes)


def masks(kind: str, rows: int, cols: int) -> torch.Tensor | None:
    """[1, rows, cols] bool, True = may attend: none, causal, or causal with query 2 seeing no key at all."""
    if kind == "none":
        return None
    allowed = torch.ones(rows, cols, dtype=torch.bool).tril()
    if kind == "empty row":
        allowed[2] = False  # softmax over no key: the forward's third branch gives that row weight 0
    return allowed.unsqueeze(0)


def both_ways(stack, *args, **kwargs):
    """The stack's forward with autograd on (each block makes its own maps) and off (one buffer per stack)."""
    with torch.enable_grad():
        _, plain = stack(*args, **kwargs)
        plain = [{key: value.detach() for key, value in record.items()} for record in plain]
    with torch.inference_mode():
        _, buffered = stack(*args, **kwargs)
    return plain, buffered


@pytest.mark.parametrize("mask", ["none", "causal", "empty row"])
@pytest.mark.parametrize("keep_scores", [True, False])
@pytest.mark.parametrize("first_layer", [0, 1])
def test_self_attention_written_into_the_buffer_is_the_ordinary_forward_bit_for_bit(mask, keep_scores, first_layer):
    stack = build_model(small(arch="encoder")).encoder
    x = torch.randn(1, T, 32, generator=torch.Generator().manual_seed(0))
    plain, buffered = both_ways(stack, x, masks(mask, T, T), first_layer=first_layer, keep_scores=keep_scores)
    kinds = ("pattern", "scores") if keep_scores else ("pattern",)
    assert set(buffered.stacked) == {f"attn.{kind}" for kind in kinds}
    assert len(buffered) == len(plain) == 3 - first_layer
    for i, (expected, got) in enumerate(zip(plain, buffered, strict=True)):
        assert set(got) == set(expected)
        for key in buffered.stacked:
            assert torch.equal(got[key], expected[key]), (i, key)
            assert got[key].data_ptr() == buffered.stacked[key][i].data_ptr(), "record i is slice i of the buffer"
    if mask == "empty row":
        assert (buffered.stacked["attn.pattern"][:, 0, :, 2] == 0).all()


def test_a_decoder_block_writes_its_cross_attention_into_a_buffer_of_the_sources_length():
    model = build_model(small(arch="encoder-decoder"))
    generator = torch.Generator().manual_seed(1)
    target, memory = torch.randn(1, T, 32, generator=generator), torch.randn(1, S, 32, generator=generator)
    plain, buffered = both_ways(model.decoder, target, masks("causal", T, T), memory, masks("none", T, S))
    assert buffered.stacked["cross.pattern"].shape == (3, 1, 4, T, S)
    for expected, got in zip(plain, buffered, strict=True):
        for key in ("attn.pattern", "attn.scores", "cross.pattern", "cross.scores"):
            assert torch.equal(got[key], expected[key]), key


def test_training_makes_no_buffer_and_a_batch_keeps_each_rows_maps():
    stack = build_model(small(arch="decoder")).decoder
    batch = torch.randn(3, T, 32, generator=torch.Generator().manual_seed(2))
    _, trained = stack(batch, masks("causal", T, T), train=True)  # autograd on: out= tensors cannot take gradients
    assert trained.stacked == {}
    plain, buffered = both_ways(stack, batch, masks("causal", T, T))
    assert buffered.stacked["attn.pattern"].shape == (3, 3, 4, T, T)
    for expected, got in zip(plain, buffered, strict=True):
        assert torch.equal(got["attn.pattern"], expected["attn.pattern"])


def test_a_trace_keeps_the_buffer_it_was_written_into_and_the_maps_are_softmax_rows():
    trace = explorer.run(small(arch="decoder", mask="causal"), "the cat sat on the mat")
    weights = trace.attention  # [L, H, T, T]
    assert weights.shape == (3, 4, 6, 6)
    assert not weights.flags.owndata, "the trace took the blocks' buffer, not a copy of it"
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-6)  # float32 rows of six weights
    assert (np.triu(weights, k=1) == 0).all()  # causal: nothing above the diagonal
