"""The logit lens: every block's stream of the output stack through its final norm and the read-out. Its last block is
next_token, each block agrees with transformers' Llama on SmolLM2's tensors, a model with no read-out says why, and
only a few positions of one layer are read out at a time."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.analysis import logit_lens as lens_module
from explorer.analysis.logit_lens import LENS_COLUMNS, ROWS_AT_ONCE, can_read_out, lens_refusal, logit_lens
from explorer.tasks import make_task
from tests.llama_reference import llama_reference
from tests.tiny_checkpoints import perturbed_norms

LETTERS = tuple("ABCDEFGHIJ")
PROBABILITY_TOLERANCE = 1e-5  # the parity tests' bound: float32 streams, differently ordered sums, float64 softmax
# The same float32 read-out of the same output, as a [T, D] matrix here and a [D] vector in next_token: the 576-term
# sums round in another order, and in another again with another thread count. One float32 step of a logit near 20
# is 2.4e-6, and a reordered sum can land a few steps away: 1.3e-6 of probability was seen with torch's default
# threads (1e-6 held on one). The parity tests' 1e-5 bounds that, and is still far below the 4 decimals shown.
SAME_READ_OUT = PROBABILITY_TOLERANCE


def last_rows(lens, layer: int, position: int):
    return lens[(lens["layer"] == layer) & (lens["position"] == position)].sort_values("rank")


def test_smollm2s_last_block_is_next_token_and_every_block_is_llamas_hidden_state_read_out(smollm_model):
    pytest.importorskip("transformers")
    sentence = "The capital of France is"
    trace = explorer.run(smollm_model, sentence)
    k = 3
    lens = logit_lens(smollm_model, trace, k=k)
    T = len(trace.tokens)
    assert list(lens.columns) == LENS_COLUMNS and len(lens) == 30 * T * k
    top = explorer.next_token(smollm_model, trace, k=k)
    final = last_rows(lens, 29, T - 1)
    assert final["piece"].tolist() == top["piece"].tolist() and final["text"].iloc[0] == " Paris"
    np.testing.assert_allclose(final["probability"], top["probability"], atol=SAME_READ_OUT)

    reference = llama_reference(smollm_model)
    ids = torch.tensor([smollm_model.tokenizer.encode(sentence).ids])
    with torch.no_grad():
        hidden = reference(input_ids=ids, output_hidden_states=True).hidden_states  # 31 x [1, T, D]
        for layer in range(30):
            # transformers' last hidden state has been through the final norm already; the others have not.
            stream = hidden[layer + 1][0] if layer == 29 else reference.model.norm(hidden[layer + 1][0])  # [T, D]
            theirs = torch.softmax(reference.lm_head(stream).double(), dim=-1)  # [T, V]
            for position in range(T):
                ours = last_rows(lens, layer, position)
                our_ids = [smollm_model.tokenizer.token_id(p) for p in ours["piece"]]
                expected = theirs[position].topk(k).values.numpy()
                # The same k probabilities, and each of our pieces has ours in the reference's distribution (so a near
                # tie may swap two ranks, but no piece is misread).
                np.testing.assert_allclose(ours["probability"], expected, atol=PROBABILITY_TOLERANCE)
                np.testing.assert_allclose(
                    ours["probability"], theirs[position, our_ids].numpy(), atol=PROBABILITY_TOLERANCE
                )


@pytest.mark.parametrize("norm", ["post", "pre", "res-post", "peri"])
def test_each_block_is_read_out_through_the_final_norm_when_the_stack_has_one(norm):
    model = perturbed_norms(explorer.build_model(explorer.ModelConfig(norm=norm, mask="causal"), LETTERS), 3, 0.3)
    trace = explorer.run(model, "A B C D E")
    lens = logit_lens(model, trace, k=2)
    with torch.inference_mode():
        for layer in range(trace.last.n_layers):
            stream = torch.from_numpy(trace.last.residual[layer + 1])  # [T, D]
            if norm != "post":  # post-norm blocks end with their own norm: the stack has no final one
                stream = model.encoder.norm(stream)
            expected = torch.softmax(model.head(stream).double(), dim=-1).topk(2)  # [T, 2]
            for position in range(5):
                rows = last_rows(lens, layer, position)
                assert rows["piece"].tolist() == [LETTERS[i] for i in expected.indices[position]]
                np.testing.assert_allclose(rows["probability"], expected.values[position].numpy(), rtol=1e-6)


def test_an_encoder_decoder_is_read_out_after_its_decoder():
    model = explorer.build_model(explorer.ModelConfig(arch="encoder-decoder", n_layers=3), LETTERS)
    trace = explorer.run(model, "A B C D", "E F")
    lens = logit_lens(model, trace, k=1)
    assert sorted(set(lens["layer"])) == [0, 1, 2] and sorted(set(lens["position"])) == [0, 1]  # decoder positions
    with torch.inference_mode():
        expected = torch.softmax(model.head(torch.from_numpy(trace.output)).double(), dim=-1).max(dim=-1)  # [T]
    final = lens[lens["layer"] == 2]
    assert final["piece"].tolist() == [LETTERS[i] for i in expected.indices]
    np.testing.assert_allclose(final["probability"], expected.values.numpy(), rtol=1e-6)


def test_a_trained_toy_model_gets_the_lens_and_its_last_block_is_its_prediction():
    result = explorer.train(explorer.ModelConfig(n_layers=2), make_task("induction", 8), steps=3)
    trace = explorer.run(result.model, "A B C D A B C D")
    assert can_read_out(result.model) and lens_refusal(result.model) == ""
    lens = logit_lens(result.model, trace, k=3)
    top = explorer.next_token(result.model, trace, k=3)
    final = last_rows(lens, 1, 7)
    assert final["piece"].tolist() == top["piece"].tolist()
    np.testing.assert_allclose(final["probability"], top["probability"], atol=SAME_READ_OUT)


def test_a_model_without_a_read_out_says_why(minilm_model):
    configured = explorer.build_model(explorer.ModelConfig(arch="encoder"))
    for model, words in [(minilm_model, "sentence-embedding encoder"), (configured, "Train page")]:
        assert not can_read_out(model)
        sentence = lens_refusal(model)
        assert words in sentence and sentence.endswith(".")
        with pytest.raises(explorer.ConfigError) as raised:
            logit_lens(model, explorer.run(model, "the cat sat"))
        assert str(raised.value) == sentence


def test_only_a_few_rows_are_read_out_at_once(monkeypatch):
    """Never [L, T, V]: each read-out sees at most ROWS_AT_ONCE (block, position) pairs, every pair once."""
    model = explorer.build_model(explorer.ModelConfig(mask="causal", n_layers=3), LETTERS)
    trace = explorer.run(model, " ".join(LETTERS[i % 10] for i in range(ROWS_AT_ONCE + 6)))
    seen = []
    read_out = lens_module.ReadOut.__call__

    def spied(self, normed):
        seen.append(tuple(normed.shape))
        return read_out(self, normed)

    monkeypatch.setattr(lens_module.ReadOut, "__call__", spied)
    lens = logit_lens(model, trace, k=1)
    assert max(rows for rows, _ in seen) == ROWS_AT_ONCE and sum(rows for rows, _ in seen) == 3 * (ROWS_AT_ONCE + 6)
    assert len(lens) == 3 * (ROWS_AT_ONCE + 6) and not lens.duplicated(["layer", "position"]).any()
    picked = logit_lens(model, trace, k=2, positions=[0, 69])  # only the positions asked for
    assert sorted(set(picked["position"])) == [0, 69] and len(picked) == 3 * 2 * 2
    with pytest.raises(explorer.ConfigError, match="positions 0 to 69"):
        logit_lens(model, trace, positions=[70])
    full = lens.set_index(["layer", "position"])["probability"]
    first = picked[picked["rank"] == 1].set_index(["layer", "position"])["probability"]
    np.testing.assert_allclose(first, full.loc[first.index], atol=SAME_READ_OUT)  # the same, read in other chunks


def test_progress_is_told_the_share_read_after_each_product():
    """A long lens (16 s on SmolLM2 at 512 pieces) tells its progress: one share per read-out, rising to 1, the
    share of (block, position) pairs read; the lens is the same with or without it."""
    model = explorer.build_model(explorer.ModelConfig(mask="causal", n_layers=3), LETTERS)
    trace = explorer.run(model, " ".join(LETTERS[i % 10] for i in range(ROWS_AT_ONCE + 6)))
    told: list[float] = []
    lens = logit_lens(model, trace, k=2, progress=told.append)
    pairs = 3 * (ROWS_AT_ONCE + 6)
    products = -(-pairs // ROWS_AT_ONCE)
    assert told == [min(pairs, ROWS_AT_ONCE * (i + 1)) / pairs for i in range(products)]
    assert lens.equals(logit_lens(model, trace, k=2))


@pytest.mark.parametrize(("k", "words"), [(0, "0"), (-1, "-1"), (2.5, "2.5"), (True, "True")])
def test_a_k_that_is_no_count_of_pieces_is_named_for_the_table_and_the_lens(k, words):
    """k=0 had given an empty table, k=-1 torch's "selected index k out of range", and the lens read both as 1."""
    model = explorer.build_model(explorer.ModelConfig(arch="decoder", mask="causal"), LETTERS)
    trace = explorer.run(model, "A B C")
    with pytest.raises(explorer.ConfigError, match=f"k is a whole number of at least 1; got {words}"):
        explorer.next_token(model, trace, k=k)
    with pytest.raises(explorer.ConfigError, match=f"k is a whole number of at least 1; got {words}"):
        explorer.logit_lens(model, trace, k=k)
    assert len(explorer.next_token(model, trace, k=11)) == 10  # more than the vocabulary: all of it
