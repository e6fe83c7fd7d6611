"""The four norm placements, read from the trace alone: each writes into the stream what its formula says."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis.placements import rms_over_depth
from explorer.build import build_model
from explorer.compare import model_for_b
from explorer.config import NORMS, ConfigError, ModelConfig, parse_config
from tests.tiny_checkpoints import perturbed_norms
from tests.traced import TracedPeak

SOURCE, TARGET = "the cat sat on the mat", "le chat dort"


def small(**changes) -> ModelConfig:
    base = ModelConfig(arch="encoder-decoder", d_model=16, n_heads=2, n_layers=2, d_ff=24, seed=3)
    return base.replace(**changes)


# The engine computes in float32 and layer_norm below in float64: values of a few units agree to a few float32
# epsilons (1.2e-7 each), so 1e-5 relative and absolute leaves two orders of magnitude of margin.
CLOSE = dict(rtol=1e-5, atol=1e-5)


def layer_norm(x: np.ndarray, module: torch.nn.Module) -> np.ndarray:
    """The module's LayerNorm computed from its own formula, in float64, not by calling it."""
    t = torch.from_numpy(x).double()
    mean, var = t.mean(-1, keepdim=True), t.var(-1, unbiased=False, keepdim=True)
    normed = (t - mean) / torch.sqrt(var + module.eps)
    return (normed * module.weight.double() + module.bias.double()).detach().numpy()


def randomise_norms(model: explorer.Transformer, seed: int) -> explorer.Transformer:
    """Norm weights and biases away from 1 and 0, so a test cannot pass by an identity norm."""
    return perturbed_norms(model, seed, scale=0.5)


def traced(cfg: ModelConfig, seed: int = 1) -> tuple[explorer.Transformer, explorer.Trace]:
    model = randomise_norms(build_model(cfg), seed)
    return model, explorer.run(model, SOURCE, TARGET if cfg.arch == "encoder-decoder" else None)


@pytest.mark.parametrize("arch", ["encoder", "decoder", "encoder-decoder"])
def test_res_post_adds_exactly_its_norms_output_of_the_sub_layer(arch):
    model, trace = traced(small(arch=arch, norm="res-post"))
    for stack, module in zip(trace.stacks, [s for s in (model.encoder, model.decoder) if s is not None], strict=True):
        parts = ["attn", "cross", "ffn"] if stack.cross_attention is not None else ["attn", "ffn"]
        for layer, block in enumerate(module.layers):
            x = stack[f"blocks.{layer}.resid_pre"]
            for index, part in enumerate(parts, start=1):
                out, update = stack[f"blocks.{layer}.{part}.out"], stack[f"blocks.{layer}.{part}.out_ln_out"]
                np.testing.assert_array_equal(stack[f"blocks.{layer}.{part}.out_ln_in"], out)
                np.testing.assert_allclose(update, layer_norm(out, getattr(block, f"out_norm{index}")), **CLOSE)
                x = x + update  # the residual update is the norm's output and nothing else (float32, as the engine)
            np.testing.assert_allclose(stack[f"blocks.{layer}.resid_post"], x, **CLOSE)
            assert f"blocks.{layer}.attn.ln_in" not in stack.activations  # nothing normalises the sub-layer's input


@pytest.mark.parametrize("arch", ["encoder", "decoder", "encoder-decoder"])
def test_peri_sub_layer_reads_a_normalised_input_and_adds_a_normalised_output(arch):
    model, trace = traced(small(arch=arch, norm="peri"))
    for stack, module in zip(trace.stacks, [s for s in (model.encoder, model.decoder) if s is not None], strict=True):
        parts = ["attn", "cross", "ffn"] if stack.cross_attention is not None else ["attn", "ffn"]
        for layer, block in enumerate(module.layers):
            x = stack[f"blocks.{layer}.resid_pre"]
            for index, part in enumerate(parts, start=1):
                np.testing.assert_array_equal(stack[f"blocks.{layer}.{part}.ln_in"], x)
                read = layer_norm(x, getattr(block, f"norm{index}"))
                np.testing.assert_allclose(stack[f"blocks.{layer}.{part}.ln_out"], read, **CLOSE)
                out = stack[f"blocks.{layer}.{part}.out"]
                update = stack[f"blocks.{layer}.{part}.out_ln_out"]
                np.testing.assert_allclose(update, layer_norm(out, getattr(block, f"out_norm{index}")), **CLOSE)
                x = x + update  # [T, D] float32, as the engine adds
            np.testing.assert_allclose(stack[f"blocks.{layer}.resid_post"], x, **CLOSE)


def test_peri_attention_is_computed_from_the_normalised_input():
    """The pattern the trace shows is the one the input norm's output gives: q and k come from Norm_in(x)."""
    model, trace = traced(small(arch="encoder", norm="peri"))
    block, stack = model.encoder.layers[1], trace.first
    read = torch.from_numpy(stack["blocks.1.attn.ln_out"])[None]  # [1, T, D]
    with torch.no_grad():
        _, weights, _ = block.self_attn(read, read, None)
    np.testing.assert_allclose(weights[0].numpy(), stack["blocks.1.attn.pattern"], atol=1e-6)


@pytest.mark.parametrize("norm", NORMS)
def test_every_placement_has_the_norms_its_formula_names(norm):
    names = {name for name, _ in build_model(small(arch="decoder", norm=norm)).named_parameters() if "norm" in name}
    blocks = {name.split(".")[3] for name in names if ".layers." in name}
    expected = {
        "post": {"norm1", "norm2"},
        "pre": {"norm1", "norm2"},
        "res-post": {"out_norm1", "out_norm2"},
        "peri": {"norm1", "norm2", "out_norm1", "out_norm2"},
    }[norm]
    assert blocks == expected
    assert ("decoder.norm.weight" in names) == (norm != "post")  # every placement but post needs a final norm


@pytest.mark.parametrize(("first", "second"), list(itertools.permutations(NORMS, 2)))
def test_a_flip_to_a_placement_and_back_gives_the_original_numbers_exactly(first, second):
    cfg = small(norm=first)
    model = randomise_norms(build_model(cfg), seed=5)
    flipped = model_for_b(model, cfg.replace(norm=second))
    back = model_for_b(flipped, cfg)
    original, again = explorer.run(model, SOURCE, TARGET), explorer.run(back, SOURCE, TARGET)
    np.testing.assert_array_equal(again.output, original.output)
    np.testing.assert_array_equal(again.attention, original.attention)
    np.testing.assert_array_equal(again.residual, original.residual)


def test_new_norms_of_a_flip_start_as_the_identity_and_shared_ones_keep_their_weights():
    model = randomise_norms(build_model(small(arch="encoder", norm="pre")), seed=2)
    peri = model_for_b(model, model.config.replace(norm="peri"))
    block, source = peri.encoder.layers[0], model.encoder.layers[0]
    torch.testing.assert_close(block.norm1.weight, source.norm1.weight, rtol=0, atol=0)
    assert (block.out_norm1.weight == 1).all() and (block.out_norm1.bias == 0).all()


@pytest.mark.parametrize("raw", ["middle", "Pre", "pre-norm", ""])
def test_an_unknown_placement_in_a_url_or_json_gets_a_sentence_listing_the_four(raw):
    with pytest.raises(ConfigError) as caught:
        parse_config({"norm": raw})
    message = str(caught.value)
    assert all(f'"{name}"' in message for name in NORMS)
    assert "Norm(x + f(x))" in message and "Norm(f(x))" in message


def test_residual_rms_over_depth_is_the_whole_streams_rms_taken_a_layer_at_a_time():
    stack = explorer.run(ModelConfig(n_layers=4, d_model=64, d_ff=128), " ".join(["the cat sat on the mat"] * 16)).first
    stream = stack.residual.astype(np.float64)  # [L + 1, T, D]
    np.testing.assert_array_equal(rms_over_depth(stack), np.sqrt((stream**2).mean(axis=(1, 2))))
    with TracedPeak() as traced:
        rms_over_depth(stack)
    # One layer's stream squared in float64 (a fifth of the stream: 5 positions of depth) is held at a time; the
    # whole-stream version held two float64 copies of all of it
    assert traced.peak < stream.nbytes / 2, f"{traced.peak:,} bytes at the peak for a {stream.nbytes:,}-byte stream"
