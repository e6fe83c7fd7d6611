"""Every head's effect on the sentence embedding, in batched runs, equals removing each head in its own run (MiniLM,
configured encoders, decoders and an encoder-decoder, a grouped-query checkpoint shape); the embedding pools the real
positions; a head that adds nothing has no effect; and the next-token table before and after."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import explorer
from explorer.analysis import ablation_effects
from explorer.analysis.ablation_effects import (
    PREDICTION_COLUMNS,
    embedding_cosine,
    head_ablation_effects,
    prediction_change,
    sentence_embedding,
)
from explorer.config import ConfigError, ModelConfig
from tests.ablation_models import COPY_HEAD, IDLE_HEAD, copy_head_model
from tests.tiny_checkpoints import tiny

# A batch of H rows runs the same float32 operations as one row alone, but a kernel may sum in another order for another
# batch shape: the embeddings then differ by float32 rounding, about 1e-7 of their size, and 1 - cosine by no more
# (measured on MiniLM: 1e-8). 1e-5 keeps a wide margin and stays below the effects a board shows (1e-4 and up).
BATCH_TOLERANCE = 1e-5
# A head whose removal changes nothing: the batched embedding differs from the plain one by rounding at most, and
# 1 - cosine of two vectors a rounding apart is of the order of its square (1e-14).
NO_EFFECT = 1e-10
SENTENCE = "The cat sat on the mat."


def single_effects(model, source, heads, target=None, mode="zero") -> np.ndarray:
    """1 - cosine for each head removed in its own explorer.run: what the batched board must equal."""
    base = explorer.run(model, source, target)
    return np.array(
        [1.0 - embedding_cosine(base, explorer.run(model, source, target, ablate=[h], ablate_with=mode)) for h in heads]
    )


def test_minilm_every_head_in_batches_equals_each_head_removed_alone(minilm_model):
    told: list[float] = []
    effects = head_ablation_effects(minilm_model, SENTENCE, progress=lambda share, what: told.append(share))
    assert effects.shape == (6, 12) and np.isfinite(effects).all()
    assert (effects >= 0).all() and (effects <= 2).all()  # 1 - cosine
    assert effects.max() > 0.01  # some heads move the embedding (the last layer's most, on this sentence)
    assert told == sorted(told) and told[0] == 0.0 and told[-1] == 1.0 and len(told) == 7
    sample = [(0, 0), (1, 7), (2, 11), (3, 3), (5, 3), (5, 11)]
    expected = single_effects(minilm_model, SENTENCE, sample)
    np.testing.assert_allclose([effects[h] for h in sample], expected, atol=BATCH_TOLERANCE)
    means = head_ablation_effects(minilm_model, SENTENCE, mode="mean")
    expected = single_effects(minilm_model, SENTENCE, sample[:3], mode="mean")
    np.testing.assert_allclose([means[h] for h in sample[:3]], expected, atol=BATCH_TOLERANCE)


def test_mean_ablation_of_a_single_piece_changes_nothing(minilm_model):
    """With one position a head's mean over the positions is its output: removing it with mode="mean" is a no-op."""
    effects = head_ablation_effects(minilm_model, ["[CLS]"], mode="mean")
    assert np.abs(effects).max() <= NO_EFFECT


def test_the_copy_head_matters_and_a_head_of_zeros_does_not():
    model, x = copy_head_model()
    effects = head_ablation_effects(model, x)
    assert effects[COPY_HEAD] > 0.5  # the copied token is a large part of every position's output
    assert abs(effects[IDLE_HEAD]) <= NO_EFFECT


STACKS = {
    "decoder": (lambda: explorer.build_model(ModelConfig(arch="decoder", norm="pre", n_layers=2, n_heads=4)), None),
    "encoder-decoder": (
        lambda: explorer.build_model(ModelConfig(arch="encoder-decoder", n_layers=2, n_heads=4)),
        "x y",
    ),
    "tiny-llama": (lambda: explorer.build_model(tiny()), None),  # grouped-query attention: 4 heads, 2 key/value heads
}


@pytest.mark.parametrize("kind", list(STACKS))
def test_batched_effects_equal_single_runs_on_every_kind_of_stack(kind):
    build, target = STACKS[kind]
    model = build()
    effects = head_ablation_effects(model, "a b c d e", target)
    heads = [(layer, head) for layer in range(2) for head in range(4)]
    np.testing.assert_allclose(effects.ravel(), single_effects(model, "a b c d e", heads, target), atol=BATCH_TOLERANCE)
    assert effects.min() > 0  # each head moves this random model's embedding


def test_small_batches_give_the_same_board(monkeypatch):
    cfg = ModelConfig(n_layers=2, n_heads=4)
    whole = head_ablation_effects(cfg, "a b c d e", mode="mean")  # a config is built, as explorer.run builds it
    monkeypatch.setattr(ablation_effects, "BATCH_BYTES", 1)  # one head per batch
    np.testing.assert_allclose(head_ablation_effects(cfg, "a b c d e", mode="mean"), whole, atol=BATCH_TOLERANCE)


def test_the_sentence_embedding_pools_the_real_positions():
    cfg = ModelConfig(mask="padding")
    trace = explorer.run(cfg, "a b c [PAD] [PAD]")
    np.testing.assert_allclose(sentence_embedding(trace), trace.output[:3].astype(np.float64).mean(axis=0), rtol=1e-12)
    assert embedding_cosine(trace, trace) == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(ConfigError, match="only \\[PAD\\] pieces"):
        sentence_embedding(explorer.run(cfg, "[PAD] [PAD]"))
    with pytest.raises(ConfigError, match="different texts"):
        embedding_cosine(trace, explorer.run(cfg, "a b c d [PAD]"))
    with pytest.raises(ConfigError, match="ablate_with is 'max'"):
        head_ablation_effects(cfg, "a b c", mode="max")


VOCABULARY = tuple("abcdefghijkl")


def test_prediction_change_lists_both_top_ks_with_before_after_and_change():
    model = explorer.build_model(ModelConfig(arch="decoder", norm="pre", n_heads=4), vocabulary=VOCABULARY)
    before = explorer.run(model, "a b c d")
    after = explorer.run(model, "a b c d", ablate="L0H1,L1H0,L1H2")
    k = 3
    table = prediction_change(model, before, after, k=k)
    assert list(table.columns) == PREDICTION_COLUMNS
    assert k <= len(table) <= 2 * k and table["rank"].is_monotonic_increasing
    top_before = explorer.next_token(model, before, k=k)
    top_after = explorer.next_token(model, after, k=k)
    assert set(top_before["piece"]) | set(top_after["piece"]) == set(table["piece"])  # the union, each once
    first = table.head(k)  # the rows ranked 1..k before are next_token's own
    assert first["rank"].tolist() == [1, 2, 3] and first["piece"].tolist() == top_before["piece"].tolist()
    # The same float32 read-out of the same output vector, then a float64 softmax: equal to float64 rounding.
    np.testing.assert_allclose(first["probability_before"], top_before["probability"], rtol=1e-12)
    by_piece = table.set_index("piece")
    for rank, row in top_after.iterrows():
        assert by_piece.loc[row["piece"], "rank_after"] == rank + 1
        assert by_piece.loc[row["piece"], "probability_after"] == pytest.approx(row["probability"], rel=1e-12)
    np.testing.assert_array_equal(table["change"], table["probability_after"] - table["probability_before"])
    assert np.abs(table["change"]).max() > 1e-4  # the removed heads moved the prediction

    same = prediction_change(model, before, before, k=len(VOCABULARY) + 5)  # k beyond the vocabulary: every piece
    assert len(same) == len(VOCABULARY) and not same["change"].any() and same["rank"].equals(same["rank_after"])


def test_prediction_change_says_why_not(minilm_model):
    trace = explorer.run(minilm_model, SENTENCE)
    with pytest.raises(ConfigError, match="predicts a next token"):
        prediction_change(minilm_model, trace, trace)
    model = explorer.build_model(ModelConfig(arch="decoder"), vocabulary=VOCABULARY)
    with pytest.raises(ConfigError, match="different texts"):
        prediction_change(model, explorer.run(model, "a b"), explorer.run(model, "a c"))


def test_a_lent_run_gives_the_same_board_and_a_wrong_one_is_refused(minilm_model):
    """The What heads do page lends its own run of the text instead of running it again (0.6 GB for SmolLM2 on 512
    pieces, beside the page's)."""
    base = explorer.run(minilm_model, SENTENCE)
    np.testing.assert_array_equal(
        head_ablation_effects(minilm_model, SENTENCE, base=base), head_ablation_effects(minilm_model, SENTENCE)
    )
    with pytest.raises(ConfigError, match="heads removed"):
        head_ablation_effects(minilm_model, SENTENCE, base=explorer.run(minilm_model, SENTENCE, ablate="L0H1"))
    with pytest.raises(ConfigError, match="another text"):
        head_ablation_effects(minilm_model, "A dog ran.", base=base)


def imported_encoder(seed: int) -> explorer.Transformer:
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    return explorer.from_torch(nn.TransformerEncoder(layer, 2))


def test_an_imported_models_mask_holds_in_every_run_with_a_head_removed():
    """Found by a notebook review: head_ablation_effects took no mask, so a causal imported model's board was the
    unmasked model's (1.3e-2 off)."""
    model, x = imported_encoder(0), torch.randn(5, 16)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    base = explorer.run(model, x, mask=causal)
    heads = [(layer, head) for layer in range(2) for head in range(4)]
    alone = [1.0 - embedding_cosine(base, explorer.run(model, x, mask=causal, ablate=[h])) for h in heads]
    masked = head_ablation_effects(model, x, mask=causal)
    np.testing.assert_allclose(masked.ravel(), alone, atol=BATCH_TOLERANCE)
    assert np.abs(masked - head_ablation_effects(model, x)).max() > 100 * BATCH_TOLERANCE  # the mask matters here
    figure = explorer.ablation_figure(model, x, mask=causal)
    np.testing.assert_allclose(np.asarray(figure.data[0].z, dtype=float), masked, atol=1e-12)


def test_a_lent_run_of_another_input_mask_or_model_is_refused():
    """An imported model's tokens are x0 ... x4 whatever the tensor holds, and its config is None: a run of another
    tensor or of another imported model of one shape had been taken, and its board returned (0.019 and 0.55 off)."""
    model, x = imported_encoder(0), torch.randn(5, 16)
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    lent = explorer.run(model, x, mask=causal)
    np.testing.assert_array_equal(
        head_ablation_effects(model, x, mask=causal, base=lent), head_ablation_effects(model, x, mask=causal)
    )
    with pytest.raises(ConfigError, match="read another encoder input"):
        head_ablation_effects(model, torch.randn(5, 16), mask=causal, base=lent)
    with pytest.raises(ConfigError, match="masked its encoder otherwise"):
        head_ablation_effects(model, x, base=lent)
    with pytest.raises(ConfigError, match="not this model's run"):
        head_ablation_effects(imported_encoder(1), x, mask=causal, base=lent)
