"""Gradient norms: one per parameter tensor, finite, true to finite differences, and the model left untouched."""

import threading
import unittest.mock
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import explorer
import explorer.model
from explorer.analysis.gradients import _objective, gradient_norms, layer_gradient_totals, objective, objective_text
from explorer.analysis.read_out_loss import CHUNK
from explorer.inputs import prepare_inputs

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


def saved_activation_bytes(model: explorer.Transformer, tokens: list[str]) -> int:
    """Bytes of the tensors the objective's forward keeps for the backward pass, the model's parameters left out."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        objective(model, tokens)
    return sum(kept.values())


def test_the_backward_pass_keeps_each_blocks_input_and_runs_the_block_again():
    cfg = explorer.ModelConfig(d_model=64, n_heads=4, n_layers=6, d_ff=256, mask="causal")
    model = explorer.build_model(cfg)
    tokens = (TOKENS * 11)[:64]
    stream = 64 * 64 * 4  # bytes of one [T, D] float32 block input
    # Six block inputs, the last stack's output and its read-out's few [T, D]-sized tensors: a dozen streams at most,
    # where keeping every block's activations (attention maps [H, T, T] = 4 streams each, the [T, d_ff] hidden
    # units, the norms' inputs) is several dozen
    assert saved_activation_bytes(model, tokens) <= 12 * stream
    recomputed = gradient_norms(model, tokens)
    with unittest.mock.patch.object(explorer.model, "checkpoint", lambda block, *args, use_reentrant: block(*args)):
        kept = gradient_norms(model, tokens)
    np.testing.assert_array_equal(recomputed["norm"], kept["norm"])  # the same arithmetic, run twice


def test_a_forward_that_keeps_nothing_hands_memory_back_as_it_goes_and_a_trace_does_not():
    """glibc keeps what each block frees (explorer.malloc): a forward that keeps nothing of its blocks hands it back
    every BLOCKS_PER_GIVE_BACK blocks; one that builds a trace, which a page waits for, does not pay for it."""
    cfg = explorer.ModelConfig(d_model=32, n_heads=2, n_layers=2 * explorer.model.BLOCKS_PER_GIVE_BACK, d_ff=64)
    model = explorer.build_model(cfg)
    inputs = prepare_inputs(model, TOKENS)
    calls = []
    with unittest.mock.patch.object(explorer.model, "give_back", lambda: calls.append("give back")):
        with torch.enable_grad():
            inputs.forward(model, record=False)  # gradient norms' forward: each block runs again in the backward
        assert len(calls) == 2
        with torch.inference_mode():
            inputs.forward(model, on_block=lambda stack, layer, record: None)  # a placement's measured run
        assert len(calls) == 4
        explorer.run(model, TOKENS)
    assert len(calls) == 4


def test_padding_that_leaves_a_query_no_key_gives_finite_gradients():
    model = explorer.build_model(
        explorer.ModelConfig(d_model=32, n_heads=4, n_layers=2, d_ff=64, mask="causal+padding")
    )
    tokens = ["[PAD]", "the", "cat", "sat"]
    assert not prepare_inputs(model, tokens).source.allowed[0].any()  # the first query may attend to no key
    norms = gradient_norms(model, tokens)  # through torch's fused attention, whose backward must not turn it to NaN
    assert np.isfinite(norms["norm"]).all() and (norms["norm"] > 0).any()


def test_once_the_norms_are_taken_the_model_trains_as_before():
    """The norms are taken by hooks on the parameters, which hand the backward pass a stand-in: once gone, a plain
    backward pass fills .grad with the very gradients whose norms were reported."""
    model = explorer.build_model(explorer.ModelConfig(d_model=32, n_heads=4, n_layers=2, d_ff=64, norm="pre"))
    norms = gradient_norms(model, TOKENS)
    with torch.enable_grad():
        objective(model, TOKENS).backward()
    names = [name for name, _ in model.named_parameters()]
    assert all(p.grad is not None for p in model.parameters())
    plain = [float(p.grad.norm()) for p in model.parameters()]
    assert norms["norm"].tolist() == pytest.approx(plain, rel=1e-6, abs=0), names


def test_norms_taken_in_another_thread_are_the_same():
    """The app takes gradient norms in a script thread, not the main one: the hooks keep what that thread's backward
    pass hands them (a CPU backward pass runs in the thread that asks for it)."""
    model = explorer.build_model(explorer.ModelConfig(d_model=32, n_heads=4, n_layers=2, d_ff=64))
    here = gradient_norms(model, TOKENS)
    there: list = []
    worker = threading.Thread(target=lambda: there.append(gradient_norms(model, TOKENS)))
    worker.start()
    worker.join()
    assert (here["norm"] > 0).all()
    np.testing.assert_array_equal(there[0]["norm"], here["norm"])


LONG_TEXT = "the cat sat on the mat while a small dog ran after it " * 20  # more pieces than one read-out chunk


def test_a_checkpoints_norms_equal_those_of_the_whole_read_out(minilm_model):
    """The checkpoint's objective reads out CHUNK positions at a time, and its table's gradient is taken apart from
    the read-out (read_out_loss_and_table_gradient); plain autograd through the logits of every position at once,
    with every gradient whole, gives the same norms. The margin: float32 sums over 30,522 logits in another order
    move the norms by about 1e-6 of themselves; a chunk left out or counted twice moves them by far more than 1e-4."""
    chunked = gradient_norms(minilm_model, LONG_TEXT)
    parameters = [p for p in minilm_model.parameters() if p.requires_grad]
    whole = unittest.mock.patch(
        "explorer.analysis.gradients.read_out_loss", lambda x, table, labels: F.cross_entropy(x @ table.T, labels)
    )
    with whole, torch.enable_grad():
        grads = torch.autograd.grad(objective(minilm_model, LONG_TEXT), parameters, allow_unused=True)
    expected = [0.0 if g is None else float(g.norm()) for g in grads]
    assert chunked["norm"].tolist() == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("text", [LONG_TEXT, "one two two one [SEP] three"])
def test_the_table_rows_taken_apart_hold_every_row_the_lookup_reaches(minilm_model, text):
    """TableGradient.norm_with is exact only when the lookup's gradient is zero outside the rows it was made for."""
    table = minilm_model.embedding.weight
    with torch.enable_grad():
        loss, part = _objective(minilm_model, text, None, table_apart=True)
        (lookup,) = torch.autograd.grad(loss, [table])  # [V, D]: the read-out's share is not in it
    reached = set(lookup.abs().sum(dim=1).nonzero()[:, 0].tolist())
    assert reached and reached <= set(part.rows.tolist())


def test_a_checkpoints_logits_are_never_whole(minilm_model):
    """For SmolLM2 on 512 pieces the whole logits are 96 MB, and the read-out's backward pass held four such."""
    pieces = len(prepare_inputs(minilm_model, LONG_TEXT).source.tokens)
    assert pieces > CHUNK
    vocabulary = minilm_model.embedding.weight.shape[0]
    shapes: set[tuple[int, ...]] = set()

    class Shapes(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            shapes.update(tuple(t.shape) for t in (out if isinstance(out, tuple) else (out,)) if torch.is_tensor(t))
            return out

    with Shapes():
        gradient_norms(minilm_model, LONG_TEXT)
    assert (CHUNK, vocabulary) in shapes  # the read-out seen: a chunk's logits
    assert (pieces - 1, vocabulary) not in shapes


def test_the_objective_says_what_the_token_table_is_to_each_checkpoint(smollm_model, minilm_model):
    smollm, minilm = objective_text(smollm_model), objective_text(minilm_model)
    assert smollm_model.head.weight is smollm_model.embedding.weight  # SmolLM2's read-out is its token table
    assert "one tensor" in smollm and "BERT" not in smollm
    assert minilm_model.head is None and "BERT" in minilm and "no next-piece head" in minilm
    own_head = replace(smollm_model.config, tie_embeddings=False)
    untied = SimpleNamespace(tokenizer=smollm_model.tokenizer, config=own_head)
    said = objective_text(untied)  # a Llama folder with its own lm_head: the objective still reads the token table
    assert "not its own read-out head" in said and "BERT" not in said
