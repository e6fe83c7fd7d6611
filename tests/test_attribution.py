"""Direct logit attribution: the parts add up to the logit on every placement (SmolLM2, configured decoders with a
read-out, Llama-shaped ones with grouped-query attention, an encoder-decoder), each SmolLM2 head's term is what
transformers' Llama gives for it computed by hand, and a removed head adds nothing (or its mean)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis.attribution import LogitAttribution, head_logit_attribution, logit_attribution
from explorer.analysis.logit_lens import lens_refusal
from tests.llama_reference import llama_reference
from tests.tiny_checkpoints import perturbed_norms, tiny

LETTERS = tuple("ABCDEFGHIJ")
PLACEMENTS = ["post", "pre", "res-post", "peri"]
# The parts are computed in float64 from the run's float32 intermediates, which each carry a rounding of about 6e-8 of
# their size; over the ~100 sums and norms of a 30-block stream the logit and the parts' total drift apart by up to
# about 5e-8 of the parts' absolute sum (measured on SmolLM2). 1e-6 of that sum is 20 times the drift, and far below
# the hundredths a board writes.
SUM_TOLERANCE = 1e-6
RELATIVE_TOLERANCE = 1e-5  # the parity tests' bound for float32 streams of ours and the reference's (measured 4e-7)


def parts(attribution: LogitAttribution) -> np.ndarray:
    """Every part's term, the read-out bias included."""
    cross = [] if attribution.cross_attention is None else attribution.cross_attention
    scalars = [attribution.embeddings, attribution.norm_bias, attribution.read_out_bias]
    pieces = [scalars, attribution.heads.ravel(), attribution.attention_bias, cross, attribution.feed_forward]
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in pieces])


def assert_adds_up(attribution: LogitAttribution) -> None:
    terms = parts(attribution)
    assert attribution.total == pytest.approx(terms.sum(), abs=1e-12)
    assert abs(attribution.total - attribution.logit) <= SUM_TOLERANCE * np.abs(terms).sum()


@pytest.mark.parametrize(
    "sentence, piece",
    [
        ("The capital of France is", None),
        ("The capital of France is", "Ġthe"),
        ("When Mary and John went to the store, John gave a drink to", None),
        ("1 2 3 4", None),
    ],
)
def test_smollm2s_parts_add_up_to_the_logit(smollm_model, sentence, piece):
    trace = explorer.run(smollm_model, sentence)
    attribution = logit_attribution(smollm_model, trace, piece)
    assert_adds_up(attribution)
    assert attribution.heads.shape == (30, 9) and attribution.cross_attention is None
    assert attribution.position == len(trace.tokens) - 1
    top = explorer.next_token(smollm_model, trace, k=10)
    row = top[top["piece"] == attribution.piece]
    assert len(row) == 1 and attribution.logit == pytest.approx(row["logit"].iloc[0], abs=1e-4)
    if piece is None:
        assert attribution.piece == top["piece"].iloc[0]


def test_smollm2_with_heads_removed_adds_up_and_a_removed_head_adds_nothing(smollm_model):
    sentence = "The capital of France is"
    removed = [(0, 3), (5, 0), (29, 8)]
    zero = logit_attribution(smollm_model, explorer.run(smollm_model, sentence, ablate=removed))
    assert_adds_up(zero)
    assert all(zero.heads[layer, head] == 0.0 for layer, head in removed)
    mean = logit_attribution(smollm_model, explorer.run(smollm_model, sentence, ablate=removed, ablate_with="mean"))
    assert_adds_up(mean)
    assert all(mean.heads[layer, head] != 0.0 for layer, head in removed)  # its mean output still reaches the stream


@torch.no_grad()
def reference_head_terms(reference, ids: torch.Tensor, token_id: int) -> np.ndarray:
    """[L, H] from transformers' Llama by hand: each head's slice of o_proj's input at the last position (captured by
    a pre-hook), through that slice of o_proj, the final norm with its scale frozen from the reference's own last
    hidden state (captured entering the norm), dotted with the piece's lm_head row."""
    seen: dict[object, torch.Tensor] = {}

    def keep(name):
        return lambda module, args: seen.__setitem__(name, args[0][0, -1].double())  # [in features] at the last

    layers = reference.model.layers
    hooks = [layer.self_attn.o_proj.register_forward_pre_hook(keep(i)) for i, layer in enumerate(layers)]
    hooks.append(reference.model.norm.register_forward_pre_hook(keep("final")))
    try:
        reference(input_ids=ids)
    finally:
        for hook in hooks:
            hook.remove()
    norm = reference.model.norm
    scale = torch.sqrt(seen["final"].square().mean() + norm.variance_epsilon)
    row = reference.lm_head.weight[token_id].double() * norm.weight.double() / scale  # [D]
    n_heads = reference.config.num_attention_heads
    K = reference.config.hidden_size // n_heads
    terms = np.zeros((len(layers), n_heads))
    for layer, llama_layer in enumerate(layers):
        w_o = llama_layer.self_attn.o_proj.weight.double()  # [D, H * K]
        for head in range(n_heads):
            output = w_o[:, head * K : (head + 1) * K] @ seen[layer][head * K : (head + 1) * K]  # [D]
            terms[layer, head] = float(output @ row)
    return terms


def test_each_smollm2_head_is_its_share_computed_with_transformers_llama(smollm_model):
    pytest.importorskip("transformers")
    sentence = "The capital of France is"
    trace = explorer.run(smollm_model, sentence)
    attribution = logit_attribution(smollm_model, trace)
    ids = torch.tensor([smollm_model.tokenizer.encode(sentence).ids])
    theirs = reference_head_terms(llama_reference(smollm_model), ids, attribution.token_id)
    assert np.abs(attribution.heads - theirs).max() <= RELATIVE_TOLERANCE * np.abs(theirs).max()
    np.testing.assert_array_equal(head_logit_attribution(smollm_model, trace), attribution.heads)


@pytest.mark.parametrize("norm", PLACEMENTS)
def test_a_configured_decoder_with_layernorm_biases_adds_up_on_every_placement(norm):
    model = perturbed_norms(explorer.build_model(explorer.ModelConfig(norm=norm, mask="causal"), LETTERS), 4, 0.3)
    for sentence, piece in [("A B C D E", None), ("J I H", "C"), ("A", 7)]:
        attribution = logit_attribution(model, explorer.run(model, sentence), piece)
        assert_adds_up(attribution)
        assert attribution.norm_bias != 0.0 and attribution.read_out_bias != 0.0  # both parts are really there
    for mode in ("zero", "mean"):
        ablated = logit_attribution(model, explorer.run(model, "A B C D E", ablate="L0H1,L1H3", ablate_with=mode))
        assert_adds_up(ablated)
        assert (ablated.heads[0, 1] == 0.0) == (mode == "zero")


@pytest.mark.parametrize("norm", PLACEMENTS)
def test_a_llama_shaped_decoder_with_grouped_query_attention_adds_up_on_every_placement(norm):
    model = perturbed_norms(explorer.build_model(tiny(norm=norm)), 5, 0.3)  # RMSNorm, 4 query heads on 2 key/value
    for sentence in ["a b c d e f", "x"]:
        attribution = logit_attribution(model, explorer.run(model, sentence))
        assert_adds_up(attribution)
        assert attribution.piece == f"#{attribution.token_id}" and attribution.norm_bias == 0.0  # RMSNorm: no bias
    ablated = logit_attribution(model, explorer.run(model, "a b c d", ablate=[(1, 2)], ablate_with="mean"))
    assert_adds_up(ablated)


@pytest.mark.parametrize("norm", ["post", "peri"])
def test_an_encoder_decoder_credits_its_decoders_cross_attention(norm):
    model = perturbed_norms(
        explorer.build_model(explorer.ModelConfig(arch="encoder-decoder", norm=norm), LETTERS), 6, 0.3
    )
    trace = explorer.run(model, "A B C D", "E F G", ablate="L0H0")  # an encoder head: it reaches the decoder only
    attribution = logit_attribution(model, trace)  # through the memory, which the cross-attention parts read
    assert_adds_up(attribution)
    assert attribution.cross_attention.shape == (2,) and np.all(attribution.cross_attention != 0.0)
    assert attribution.heads[0, 0] != 0.0  # the decoder's head 0 of layer 0 was not removed
    assert attribution.position == 2


def test_pieces_are_named_by_spelling_or_id_and_a_model_without_a_read_out_says_why(smollm_model, minilm_model):
    trace = explorer.run(smollm_model, "The capital of France is")
    by_name = logit_attribution(smollm_model, trace, "ĠParis")
    by_id = logit_attribution(smollm_model, trace, by_name.token_id)
    assert (by_name.text, by_name.logit) == (" Paris", by_id.logit)
    np.testing.assert_array_equal(by_name.heads, by_id.heads)
    assert repr(by_name).startswith("LogitAttribution(' Paris' logit 17.37")
    # The text next_token's table shows (the README's piece=" John") names the piece as its spelling does
    by_text = logit_attribution(smollm_model, trace, " Paris")
    assert by_text.token_id == by_name.token_id
    table = explorer.next_token(smollm_model, trace, k=5)
    for text, spelling in zip(table["text"], table["piece"], strict=True):
        assert logit_attribution(smollm_model, trace, text).piece == spelling
    # After a full stop the likeliest piece is a newline, which the tokenizer alone reads as nothing: its text names it
    stop = explorer.run(smollm_model, "The capital of France is Paris.")
    table = explorer.next_token(smollm_model, stop, k=5)
    assert "\n" in table["text"].tolist()
    for text, spelling in zip(table["text"], table["piece"], strict=True):
        assert logit_attribution(smollm_model, stop, text).piece == spelling
    assert [logit_attribution(smollm_model, stop, blank).piece for blank in ("\n\n", "  ", "\t")] == ["ĊĊ", "ĠĠ", "ĉ"]
    # "é" is the text of Ã© and the spelling of a byte piece: the text is what the table shows, so it wins
    coffee = explorer.run(smollm_model, "Il a bu un caf")
    assert explorer.next_token(smollm_model, coffee, k=1)["text"].tolist() == ["é"]
    assert logit_attribution(smollm_model, coffee, "é").piece == "Ã©"
    for junk, words in [
        ("Paris-ish", r"reads as 3 pieces for this tokenizer \('Paris', '-', 'ish'\)"),
        (10**6, "outside the model's vocabulary"),
    ]:
        with pytest.raises(explorer.ConfigError, match=words):
            logit_attribution(smollm_model, trace, junk)
    with pytest.raises(explorer.ConfigError) as raised:
        logit_attribution(minilm_model, explorer.run(minilm_model, "the cat sat"))
    assert str(raised.value) == lens_refusal(minilm_model)
