"""Removing heads: the explorer's ablation equals the reference implementations with the same heads' outputs replaced
by a forward pre-hook on the input of their output projection (transformers' Llama on SmolLM2's tensors, BertModel on
MiniLM); no head removed is the unablated run bit for bit; a layer without heads adds only its output bias; a
copy head stops copying; mean ablation, batched rows and a stack started at a layer equal their direct computations;
bad heads get one sentence."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import explorer
from explorer.ablation import HeadAblation
from explorer.analysis.ablation_effects import prediction_change
from explorer.config import ConfigError, ModelConfig
from explorer.inputs import prepare_inputs
from explorer.pretrained import INSTALLED, installed_path
from tests.ablation_models import COPY_DIMS, COPY_HEAD, COPY_TOKENS, IDLE_HEAD, biased_model, copy_head_model
from views.ablation_controls import MODE_HELP

os.environ["HF_HUB_OFFLINE"] = "1"

# The parity tests' bounds (tests/test_pretrained_parity.py): probabilities lie in [0, 1] and come from float32 streams
# summed in another order than the reference's, then a float64 softmax, so they agree to 1e-5; hidden states are
# compared to 1e-5 of the layer's largest magnitude, since float32 rounding over a few hundred sums is about 1e-6 of it.
PROBABILITY_TOLERANCE = 1e-5
RELATIVE_TOLERANCE = 1e-5
# The same float32 operations on the same numbers, as a batch of rows or one row alone: a kernel may sum in another
# order for another batch shape, a few float32 roundings (1e-7 each) of numbers of order 1-10.
BATCH_TOLERANCE = 1e-5
SMOLLM_HEADS = [(0, 2), (3, 0), (3, 8), (17, 5), (29, 1)]  # several in one layer; the first and last layers
MINILM_HEADS = [(0, 4), (2, 0), (2, 11), (5, 3)]


def relative_gap(ours: np.ndarray, theirs: np.ndarray) -> float:
    """max |ours - theirs| over the reference's largest magnitude."""
    return float(np.abs(ours - theirs).max() / max(np.abs(theirs).max(), 1e-30))


def removing(projections: list[torch.nn.Module], heads: list[tuple[int, int]], d_head: int, mode: str) -> list:
    """Forward pre-hooks on each layer's attention output projection (the reference model is the test's own): the
    removed heads' slices of its input [B, T, H * K], zero or their mean over the positions."""

    def hook_for(layer: int):
        def hook(module, args):
            merged = args[0].clone()  # [B, T, H * K]
            for h in (head for at, head in heads if at == layer):
                part = merged[..., h * d_head : (h + 1) * d_head]  # [B, T, K]
                merged[..., h * d_head : (h + 1) * d_head] = 0.0 if mode == "zero" else part.mean(dim=1, keepdim=True)
            return (merged, *args[1:])

        return hook

    return [projection.register_forward_pre_hook(hook_for(layer)) for layer, projection in enumerate(projections)]


def reference_run(model: torch.nn.Module, projections, heads, d_head: int, mode: str, **inputs):
    hooks = removing(projections, heads, d_head, mode)
    try:
        with torch.no_grad():
            return model(**inputs)
    finally:
        for hook in hooks:
            hook.remove()


def test_smollm2_ablation_equals_llama_with_the_heads_removed_before_o_proj(smollm_model):
    pytest.importorskip("transformers")
    from tests.llama_reference import llama_reference

    reference = llama_reference(smollm_model)
    sentence = "The capital of France is"
    ids = torch.tensor([smollm_model.tokenizer.encode(sentence).ids])
    projections = [layer.self_attn.o_proj for layer in reference.model.layers]
    before = explorer.run(smollm_model, sentence)
    for mode in ("zero", "mean"):
        out = reference_run(reference, projections, SMOLLM_HEADS, 64, mode, input_ids=ids, output_hidden_states=True)
        trace = explorer.run(smollm_model, sentence, ablate=SMOLLM_HEADS, ablate_with=mode)
        assert trace.ablated == tuple(SMOLLM_HEADS) and trace.ablate_with == mode
        assert relative_gap(trace.output, out.hidden_states[-1][0].numpy()) <= RELATIVE_TOLERANCE  # after the norm
        theirs = torch.softmax(out.logits[0, -1].double(), dim=-1)  # [V]
        change = prediction_change(smollm_model, before, trace, k=10)
        our_ids = [smollm_model.tokenizer.token_id(piece) for piece in change["piece"]]
        np.testing.assert_allclose(change["probability_after"], theirs[our_ids].numpy(), atol=PROBABILITY_TOLERANCE)
        assert np.abs(change["change"]).max() > 0.01  # the heads mattered: the test compares a real change


@pytest.fixture(scope="module")
def bert_reference():
    transformers = pytest.importorskip("transformers")
    folder = str(installed_path(INSTALLED["minilm-l6"]))
    model = transformers.BertModel.from_pretrained(folder, attn_implementation="eager").eval()
    return model, transformers.AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_minilm_ablation_equals_bert_with_the_heads_removed_before_the_output_dense(minilm_model, bert_reference, mode):
    reference, tokenizer = bert_reference
    sentence = "The cat sat on the mat because it was tired."
    encoded = tokenizer(sentence, return_tensors="pt")
    projections = [layer.attention.output.dense for layer in reference.encoder.layer]
    out = reference_run(reference, projections, MINILM_HEADS, 32, mode, **encoded)
    trace = explorer.run(minilm_model, sentence, ablate=MINILM_HEADS, ablate_with=mode)
    assert relative_gap(trace.output, out.last_hidden_state[0].numpy()) <= RELATIVE_TOLERANCE
    assert relative_gap(explorer.run(minilm_model, sentence).output, trace.output) > 1e-3  # the heads changed it


def assert_same_trace(a: explorer.Trace, b: explorer.Trace) -> None:
    """Every field of every stack bit for bit (-inf scores included)."""
    assert len(a.stacks) == len(b.stacks)
    for x, y in zip(a.stacks, b.stacks, strict=True):
        assert x.tokens == y.tokens
        for field in ("residual", "output"):
            assert np.array_equal(getattr(x, field), getattr(y, field)), field
        for maps_x, maps_y in ((x.self_attention, y.self_attention), (x.cross_attention, y.cross_attention)):
            if maps_x is None:
                assert maps_y is None
                continue
            for field in ("weights", "scores", "allowed"):
                assert np.array_equal(getattr(maps_x, field), getattr(maps_y, field)), field
        assert x.activations.keys() == y.activations.keys()
        for name, value in x.activations.items():
            assert np.array_equal(value, y.activations[name]), name


@pytest.mark.parametrize("ablate", [[], "", " , ", ()])
def test_removing_no_head_is_the_unablated_run_exactly(ablate):
    cfg = ModelConfig(arch="encoder-decoder", mask="causal", norm="peri", n_layers=2)
    plain = explorer.run(cfg, "a b c d", "w x y")
    trace = explorer.run(cfg, "a b c d", "w x y", ablate=ablate, ablate_with="mean")
    assert trace.ablated == ()
    assert_same_trace(plain, trace)


@pytest.mark.parametrize("norm", ["post", "pre", "res-post", "peri"])
def test_a_layer_without_its_heads_adds_only_the_attention_output_bias(norm):
    model = biased_model(arch="decoder", norm=norm, n_layers=3, n_heads=4, d_model=32)
    plain = explorer.run(model, "the cat sat on the mat")
    layer = 1
    trace = explorer.run(model, "the cat sat on the mat", ablate=[(layer, h) for h in range(4)])
    bias = model.decoder.layers[layer].self_attn.out_proj.bias.detach().numpy()  # [D]
    out = trace.first.activations[f"blocks.{layer}.attn.out"]  # [T, D]
    assert np.array_equal(out, np.broadcast_to(bias, out.shape))  # W_O times zeros is zeros: only the bias is left
    assert np.array_equal(trace.residual[: layer + 1], plain.residual[: layer + 1])  # the blocks below: untouched
    assert np.array_equal(trace.attention[layer], plain.attention[layer])  # the removed heads' weights are kept
    assert not np.allclose(trace.attention[layer + 1], plain.attention[layer + 1])  # the layer above now differs


def test_a_copy_head_copies_the_previous_token_and_stops_when_removed():
    model, x = copy_head_model()
    plain = explorer.run(model, x)
    assert (np.diagonal(plain.attention[0, 0], offset=-1) > 0.999).all()  # each position looks at the previous one
    copied = plain.first.activations["blocks.0.attn.out"][1:, COPY_DIMS]  # [T - 1, 4]
    np.testing.assert_allclose(copied, np.eye(4)[list(COPY_TOKENS[:-1])], atol=1e-6)  # weight 1 - 5e-9, not 1
    assert plain.output[1:, COPY_DIMS].argmax(axis=1).tolist() == list(COPY_TOKENS[:-1])  # visible in the output

    removed = explorer.run(model, x, ablate=[COPY_HEAD])
    assert not removed.first.activations["blocks.0.attn.out"].any()
    flat = removed.output[:, COPY_DIMS]  # [T, 4]: the four dimensions alike, no token stands out
    assert np.array_equal(flat, np.broadcast_to(flat[:, :1], flat.shape))
    assert np.array_equal(explorer.run(model, x, ablate=[IDLE_HEAD]).output, plain.output)  # it added nothing


@pytest.mark.parametrize(
    ("arch", "mask", "text"),
    [("decoder", "causal", "the cat sat on the mat"), ("encoder", "padding", "the cat sat [PAD] [PAD]")],
)
def test_mean_ablation_is_each_heads_mean_output_through_the_output_projection(arch, mask, text):
    """The direct computation: v = W_v · (what attention reads) + b_v per head, its weighted sum with the trace's
    weights, the removed heads' sums replaced by their mean over every position ([PAD] included, as the sidebar's
    help says), then W_O and its bias."""
    model = biased_model(arch=arch, mask=mask, norm="pre", n_layers=2, n_heads=4, d_model=32)
    layer, removed = 1, [0, 2]
    plain = explorer.run(model, text)
    trace = explorer.run(model, text, ablate=[(layer, h) for h in removed], ablate_with="mean")
    attention = model.first_stack.layers[layer].self_attn
    D, H, K = 32, 4, 8
    read = plain.first.activations[f"blocks.{layer}.attn.ln_out"].astype(np.float64)  # [T, D], pre-norm's norm1
    w_v = attention.in_proj_weight.detach().numpy()[2 * D :].astype(np.float64)  # [D, D]
    b_v = attention.in_proj_bias.detach().numpy()[2 * D :].astype(np.float64)
    values = (read @ w_v.T + b_v).reshape(-1, H, K).transpose(1, 0, 2)  # [H, T, K]
    heads = plain.attention[layer].astype(np.float64) @ values  # [H, T, K]
    heads[removed] = heads[removed].mean(axis=1, keepdims=True)
    merged = heads.transpose(1, 0, 2).reshape(-1, D)  # [T, D]
    expected = merged @ attention.out_proj.weight.detach().numpy().T + attention.out_proj.bias.detach().numpy()
    np.testing.assert_allclose(trace.first.activations[f"blocks.{layer}.attn.out"], expected, atol=1e-5)  # float32
    if "[PAD]" in text:  # the [PAD] rows count in the mean: the sidebar's help must not say "the sentence's"
        assert "[PAD] included" in MODE_HELP


def removal_rows(rows: list[list[tuple[int, int]]], n_layers: int, n_heads: int) -> torch.Tensor:
    """[R, L, H]: 1 at each row's (layer, head) pairs, as HeadAblation takes them."""
    removed = torch.zeros(len(rows), n_layers, n_heads)
    for r, heads in enumerate(rows):
        for layer, head in heads:
            removed[r, layer, head] = 1.0
    return removed


def test_a_batch_removes_other_heads_in_each_row_as_single_runs_do():
    model = biased_model(arch="decoder", norm="pre", n_layers=2, n_heads=4, d_model=32)
    text = "the cat sat on the mat"
    rows = [[], [(0, 1)], [(1, 0), (1, 3)], [(0, 0), (0, 1), (0, 2), (0, 3), (1, 2)]]
    removed = removal_rows(rows, 2, 4)  # [B, L, H]
    inputs = prepare_inputs(model, text)
    for mode in ("zero", "mean"):
        with torch.inference_mode():
            x = inputs.source.x.expand(len(rows), -1, -1)  # [B, T, D]
            ((out, records),) = model(x, inputs.source.allowed[None], ablation=HeadAblation(removed, mode))
        for b, heads in enumerate(rows):
            single = explorer.run(model, text, ablate=heads, ablate_with=mode)
            np.testing.assert_allclose(out[b].numpy(), single.output, atol=BATCH_TOLERANCE)
            for layer, record in enumerate(records):
                np.testing.assert_allclose(record["resid_post"][b].numpy(), single.residual[layer + 1], atol=1e-5)
                np.testing.assert_allclose(record["attn.pattern"][b].numpy(), single.attention[layer], atol=1e-6)


def test_one_row_with_many_removals_attends_once_and_gives_each_removals_run():
    # head_ablation_effects' batches: one stream in, R rows of removed heads, R outputs (without records); the first
    # block's attention is computed once for all of them
    model = biased_model(arch="decoder", norm="pre", n_layers=2, n_heads=4, d_model=32)
    text = "the cat sat on the mat"
    rows = [[(0, 1)], [(0, 2)], [(0, 1), (1, 3)]]
    removed = removal_rows(rows, 2, 4)  # [R, L, H]
    inputs = prepare_inputs(model, text)
    for mode in ("zero", "mean"):
        with torch.inference_mode():
            x = inputs.source.x[None]  # [1, T, D]
            ((out, _),) = model(x, inputs.source.allowed[None], ablation=HeadAblation(removed, mode), record=False)
        assert out.shape[0] == len(rows)
        for r, heads in enumerate(rows):
            single = explorer.run(model, text, ablate=heads, ablate_with=mode)
            np.testing.assert_allclose(out[r].numpy(), single.output, atol=BATCH_TOLERANCE)


def test_a_stack_started_at_a_layer_from_the_traced_stream_is_the_full_run():
    cfg = ModelConfig(arch="decoder", norm="pre", n_layers=3, n_heads=4, d_model=32)
    model = explorer.build_model(cfg)
    text = "the cat sat on the mat"
    trace = explorer.run(model, text)
    allowed = torch.from_numpy(trace.first.self_attention.allowed)[None]  # [1, T, T] causal
    for layer in range(3):
        with torch.inference_mode():
            out, records = model.decoder(
                torch.from_numpy(trace.first.residual[layer])[None], allowed, first_layer=layer
            )
        assert len(records) == 3 - layer  # only the blocks run
        # The same float32 operations on the same numbers as the full run; a tolerance of float32 rounding only in case
        # a kernel sums a copied input in another order.
        np.testing.assert_allclose(out[0].numpy(), trace.output, atol=1e-6)
        for offset, record in enumerate(records):
            np.testing.assert_allclose(record["attn.pattern"][0].numpy(), trace.attention[layer + offset], atol=1e-6)


@pytest.mark.parametrize(
    ("ablate", "ablate_with", "says"),
    [
        ([(2, 0)], "zero", "layer 2, but the model's layers are 0 to 1"),
        ([(-1, 0)], "zero", "layer -1"),
        ([(0, 4)], "zero", "head 4, but each layer's heads are 0 to 3"),
        ("L0H9", "zero", "head 9"),
        ([(0, 1), (1, 2), (0, 1)], "zero", "L0H1 is listed twice"),
        ("L0H1,L0H1", "zero", "listed twice"),
        ("L0H1,junk", "zero", "'junk' is not a head"),
        ("layer 1 head 2", "zero", "is not a head"),
        ([(0,)], "zero", "pair of whole numbers"),
        ([(0, 1, 2)], "zero", "pair of whole numbers"),
        ([0, 1], "zero", "pair of whole numbers"),
        (["L0H1"], "zero", "pair of whole numbers"),
        ([("a", "b")], "zero", "pair of whole numbers"),
        ([(0.5, 1)], "zero", "pair of whole numbers"),
        ([(True, 1)], "zero", "pair of whole numbers"),
        ([(0, 1)], "max", "ablate_with is 'max'"),
        ([(0, 1)], None, "ablate_with is None"),
    ],
)
def test_bad_heads_get_one_sentence(ablate, ablate_with, says):
    cfg = ModelConfig(n_layers=2, n_heads=4)
    with pytest.raises(ConfigError, match=says) as raised:
        explorer.run(cfg, "a b c", ablate=ablate, ablate_with=ablate_with)
    message = str(raised.value)
    assert message.endswith(".") and "\n" not in message and "Traceback" not in message


def test_a_causal_models_mean_removal_lets_a_position_see_later_tokens_as_the_help_says():
    """The mean over the positions includes the last one's output, which has read every token: under a causal mask
    position 0 then changes with the tokens after it, which no kept head lets it see."""
    model = biased_model(arch="decoder", mask="causal", norm="pre", n_layers=2, n_heads=4, d_model=32)
    first = {}
    for text in ("the cat sat", "the dog ran"):
        kept = explorer.run(model, text).first.activations["blocks.1.attn.out"][0]  # [D] position 0
        mean = explorer.run(model, text, ablate=[(1, 0)], ablate_with="mean").first.activations["blocks.1.attn.out"]
        first[text] = kept, mean[0]
    np.testing.assert_array_equal(first["the cat sat"][0], first["the dog ran"][0])  # the causal mask holds
    assert np.abs(first["the cat sat"][1] - first["the dog ran"][1]).max() > 1e-3  # the mean carries later tokens
    assert "causal mask that mean holds the later positions' outputs too" in MODE_HELP
