"""Gradient norms: one per parameter tensor, finite, true to finite differences, and the model left untouched."""

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals, objective

TOKENS = ["the", "cat", "sat", "on", "the", "mat"]


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_one_finite_norm_per_parameter_tensor_and_no_grad_written(norm):
    model = explorer.build_model(explorer.ModelConfig(d_model=32, n_heads=4, n_layers=4, d_ff=64, norm=norm))
    norms = gradient_norms(model, TOKENS)
    assert len(norms) == len(list(model.parameters()))
    assert np.isfinite(norms["norm"]).all() and (norms["norm"] > 0).all()
    assert all(p.grad is None for p in model.parameters())
    totals = layer_gradient_totals(norms)
    assert list(totals["layer"]) == [0, 1, 2, 3]
    first_layer = norms[norms["layer"] == 0]["norm"]
    assert totals["norm"].iloc[0] == pytest.approx(float(np.sqrt((first_layer**2).sum())))


def test_gradient_agrees_with_a_finite_difference():
    model = explorer.build_model(explorer.ModelConfig(d_model=16, n_heads=2, n_layers=2, d_ff=32, norm="pre"))
    norms = gradient_norms(model, TOKENS)
    bias = model.encoder.layers[1].linear2.bias
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(objective(model, TOKENS), [bias])
    reported = norms.query("layer == 1 and parameter == 'linear2.bias'")["norm"].item()
    assert reported == pytest.approx(float(grad.norm()), rel=1e-5)
    step = 1e-2
    with torch.no_grad():
        original = bias[0].item()
        bias[0] = original + step
        up = objective(model, TOKENS).item()
        bias[0] = original - step
        down = objective(model, TOKENS).item()
        bias[0] = original
    assert (up - down) / (2 * step) == pytest.approx(grad[0].item(), rel=2e-2, abs=1e-4)


def test_encoder_decoder_gradients_reach_both_stacks():
    model = explorer.build_model(explorer.ModelConfig(arch="encoder-decoder", d_model=16, n_heads=2, d_ff=32))
    norms = gradient_norms(model, "a b c", "x y")
    assert set(layer_gradient_totals(norms)["stack"]) == {"encoder", "decoder"}
    assert (norms[norms["stack"] == "encoder"]["norm"] > 0).any()


def test_gradients_need_tokens_that_are_not_padding():
    model = explorer.build_model(explorer.ModelConfig())
    for source in ("[PAD] [PAD]", "alone"):
        with pytest.raises(explorer.ConfigError, match="at least two tokens in the input"):
            gradient_norms(model, source)
    encoder_decoder = explorer.build_model(explorer.ModelConfig(arch="encoder-decoder"))
    with pytest.raises(explorer.ConfigError, match="at least two tokens in the target"):  # the source is long enough
        gradient_norms(encoder_decoder, "the cat sat on the mat", "x")
    with pytest.raises(explorer.ConfigError, match="typed tokens"):
        gradient_norms(model, torch.randn(3, 64))
