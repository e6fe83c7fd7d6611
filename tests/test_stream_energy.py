"""Where the residual stream's energy sits: per-token norms and peaks, the massive-activation finding (Sun et al.
2024) on planted and real streams, each layer's share of attention on that token, and the page's sentence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import explorer
from explorer.activations_text import (
    energy_text,
    massive_text,
    no_massive_text,
    shares_average_text,
    shares_text,
)
from explorer.analysis.norm_attention import norm_attention, norm_shares
from explorer.analysis.stream_energy import (
    MASSIVE_RATIO,
    MASSIVE_VALUE,
    MassiveActivation,
    key_share,
    largest_activation,
    massive_activation,
    norm_key_share,
    padding_queries_counted,
    token_energy,
    token_max_abs,
    token_shares,
)
from explorer.trace import StackTrace

TOKENS = ["<s>", "the", "cat", "sat", "down"]
N_LAYERS, D = 4, 64


def stream(planted: dict[tuple[int, int, int], float] | None = None, seed: int = 0) -> np.ndarray:
    """[L + 1, T, D] a residual stream of values about 1 (median |x| about 0.67), with `planted` values at
    (residual index, token, unit)."""
    x = np.random.default_rng(seed).normal(size=(N_LAYERS + 1, len(TOKENS), D)).astype(np.float32)
    for (layer, token, unit), value in (planted or {}).items():
        x[layer, token, unit] = value
    return x


def stack(residual: np.ndarray, make_maps) -> StackTrace:
    maps = make_maps(n_layers=N_LAYERS, n_heads=2, tokens=TOKENS, allowed=np.tril(np.ones((5, 5), dtype=bool)))
    return StackTrace("decoder", TOKENS, maps, None, residual, residual[-1], {})


def test_token_norm_and_peak_are_those_of_each_vector(make_maps):
    residual = stream({(2, 3, 7): -9.0})
    s = stack(residual, make_maps)
    assert token_energy(s, "max").shape == (N_LAYERS + 1, len(TOKENS))
    assert token_max_abs(s)[2, 3] == 9.0  # the sign is dropped
    np.testing.assert_allclose(token_energy(s, "norm")[1, 2], np.linalg.norm(residual[1, 2]), rtol=1e-6)
    with pytest.raises(ValueError, match="norm, max"):
        token_energy(s, "rms")


def test_a_planted_massive_activation_is_found_at_its_block_and_token(make_maps):
    # Planted after block 1 (residual index 2) and kept through the last block, on token 2, unit 5.
    planted = {(layer, 2, 5): 5000.0 for layer in range(2, N_LAYERS + 1)}
    planted[(3, 2, 5)] = -6000.0  # larger later, negative: the block named is still the first one
    finding = massive_activation(stack(stream(planted), make_maps))
    assert finding is not None
    assert (finding.position, finding.piece, finding.block, finding.unit) == (2, "cat", 1, 5)
    assert finding.blocks == (1, 2, 3)
    assert finding.value == 5000.0
    median = np.median(np.abs(stream(planted)[2]))  # the stream after block 1, every token and unit
    assert finding.ratio == pytest.approx(5000.0 / median, rel=1e-6)
    assert finding.others == ()


def test_both_thresholds_are_needed(make_maps):
    # 1000x a median of about 0.67 is about 670: 150 clears 100 but not the ratio.
    assert massive_activation(stack(stream({(2, 1, 0): 150.0}), make_maps)) is None
    # A stream of tiny values: 50 is far above 1000x its median, but not above 100.
    tiny = stream({(2, 1, 0): 50.0}) * 1e-3
    tiny[2, 1, 0] = 50.0
    assert massive_activation(stack(tiny, make_maps)) is None
    assert (MASSIVE_VALUE, MASSIVE_RATIO) == (100.0, 1000.0)


def test_no_massive_activation_in_an_ordinary_stream_and_the_largest_is_named(make_maps):
    residual = stream({(3, 4, 1): 20.0})
    s = stack(residual, make_maps)
    assert massive_activation(s) is None
    block, position, value, ratio = largest_activation(s)
    assert (block, position, value) == (2, 4, 20.0)
    assert ratio == pytest.approx(20.0 / np.median(np.abs(residual[3])), rel=1e-6)


def test_the_input_embeddings_are_not_a_block(make_maps):
    assert massive_activation(stack(stream({(0, 1, 0): 1e5}), make_maps)) is None


def test_the_largest_of_several_massive_tokens_is_named_and_the_others_listed(make_maps):
    planted = {(2, 0, 3): 2000.0, (4, 3, 9): 8000.0}
    finding = massive_activation(stack(stream(planted), make_maps))
    assert (finding.position, finding.block, finding.others) == (3, 3, (0,))


def test_norm_key_share_is_key_share_of_norm_shares(make_maps):
    maps = make_maps(n_layers=2, n_heads=3, tokens=TOKENS, allowed=np.tril(np.ones((5, 5), dtype=bool)))
    norms = maps.weights * np.random.default_rng(1).uniform(0, 3, size=(2, 3, 1, 5)).astype(np.float32)
    norms[0, 1, 3] = 0.0  # a row that adds nothing: 0, as norm_shares leaves it
    for key in range(5):
        expected = key_share(norm_shares(norms), maps.allowed, key)
        np.testing.assert_allclose(norm_key_share(norms, maps.allowed, key), expected, rtol=1e-5, equal_nan=True)


def test_key_share_on_a_known_case():
    # One layer, two heads, three tokens, causal. Key 0: query 0 sees only it (left out), queries 1 and 2 give it
    # 0.5 and 0.2 (head 0), 0.1 and 0.4 (head 1): mean 0.3.
    allowed = np.tril(np.ones((3, 3), dtype=bool))
    weights = np.zeros((1, 2, 3, 3))
    weights[0, 0] = [[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]]
    weights[0, 1] = [[1, 0, 0], [0.1, 0.9, 0], [0.4, 0.4, 0.2]]
    np.testing.assert_allclose(key_share(weights, allowed, 0), [0.3])
    np.testing.assert_allclose(key_share(weights, allowed, 2), [(0.5 + 0.2) / 2])  # only query 2 sees key 2
    assert np.isnan(key_share(weights, np.eye(3, dtype=bool), 1)).all()  # only itself sees it, and nothing else


def test_token_shares_take_the_weights_and_the_norm_shares(make_maps):
    maps = make_maps(n_layers=3, n_heads=2, tokens=TOKENS, allowed=np.tril(np.ones((5, 5), dtype=bool)))
    norms = maps.weights * np.arange(1, 6, dtype=np.float32)  # [L, H, Tq, Tk]: later keys add more
    shares = norm_shares(norms)
    frame = token_shares(maps, 0, norms)
    assert list(frame["layer"]) == [0, 1, 2]
    np.testing.assert_allclose(frame["weights"], maps.weights[:, :, 1:, 0].mean(axis=(1, 2)), rtol=1e-6)
    np.testing.assert_allclose(frame["norms"], shares[:, :, 1:, 0].mean(axis=(1, 2)), rtol=1e-6)
    assert (frame["norms"] < frame["weights"]).all()  # key 0 adds least per unit of weight
    assert token_shares(maps, 0)["norms"].isna().all()


# --- The shipped checkpoints.


@pytest.fixture(scope="module")
def smollm_run(smollm_model):
    return explorer.run(smollm_model, "The capital of France is")


def test_smollm_has_its_massive_activation_on_the_first_token_from_block_11(smollm_model, smollm_run):
    finding = massive_activation(smollm_run)
    assert finding is not None
    assert (finding.position, finding.piece, finding.block) == (0, "The", 11)
    # Sun et al. report values in the thousands to tens of thousands for such tokens; the peak here is ~22,500,
    # ~9,000x the median: well clear of both thresholds, whatever float rounding does.
    assert finding.value > 10 * MASSIVE_VALUE and finding.ratio > 3 * MASSIVE_RATIO
    shares = token_shares(smollm_run.first.self_attention, 0, norm_attention(smollm_model, smollm_run))
    reading = shares[shares["layer"] > finding.block]
    # The heads of the layers that read it put most of their weight on it (an attention sink: 0.79 measured),
    # and less of what they add (0.61 measured).
    assert reading["weights"].mean() > 0.5
    assert reading["norms"].mean() < reading["weights"].mean()
    text = massive_text(finding, shares)
    assert "from block 11" in text and "“The” (position 0)" in text


def test_minilm_post_norm_has_no_massive_activation(minilm_model):
    trace = explorer.run(minilm_model, "The cat sat on the mat because it was tired.")
    assert massive_activation(trace) is None
    block, position, value, ratio = largest_activation(trace.first)
    assert value < MASSIVE_VALUE  # ~10.5 measured: every block's LayerNorm keeps the stream small
    text = no_massive_text("post", value, ratio, block, position, trace.first.tokens[position])
    assert "No massive activation" in text and "re-normalises" in text


# --- The sentence.


def test_massive_text_says_whether_the_weight_carries_anything():
    finding = MassiveActivation(0, "<s>", 2, (2, 3), 7, 5000.0, 4200.0, ())
    shares = pd.DataFrame({"layer": [0, 1, 2, 3], "weights": [0.1, 0.1, 0.1, 0.8], "norms": [0.1, 0.1, 0.1, 0.2]})
    text = massive_text(finding, shares)
    assert "from block 2" in text and "5,000" in text and "4,200×" in text and "after blocks 2 to 3" in text
    assert "put 0.80 of their weight" in text and "it gives 0.20" in text and "parks there" in text
    assert "what they add" not in massive_text(finding, shares.assign(norms=np.nan))
    assert "Other tokens" in massive_text(MassiveActivation(0, "<s>", 2, (2,), 7, 5000.0, 4200.0, (3,)))


def test_shares_text_names_the_token_averages_every_layer_and_weighs_the_verdict():
    shares = pd.DataFrame({"layer": [0, 1], "weights": [0.6, 0.4], "norms": [0.5, 0.5]})
    text = shares_text(0, "[CLS]", shares)
    assert text.startswith("Averaged over the 2 layers, the heads put 0.50 of their weight on “[CLS]” (position 0)")
    assert "it gives 0.50, about its weight" in text
    assert "more than its weight" in shares_text(0, "[CLS]", shares.assign(norms=[0.9, 0.9]))
    unseen = shares_text(0, "[CLS]", shares.assign(weights=np.nan))  # no query could see it: "" left the chart unsaid
    assert unseen.startswith("No query may attend to “[CLS]” (position 0) and to another token")
    assert "share is 1 by construction and is not measured" in unseen  # not blamed on a mask that may not block it
    assert shares_text(0, "[CLS]", shares.assign(weights=np.nan), after=1) == ""  # no layer after block 1 to read it


def test_no_massive_text_says_why_by_norm_placement():
    post = no_massive_text("post", 10.5, 34.8, 3, 0, "[CLS]")
    assert post.startswith("**No massive activation**: the largest |x| in the residual stream is 10.5, at “[CLS]”")
    assert "after block 3, 34.8× the median" in post and "re-normalises" in post
    assert "re-normalises" not in no_massive_text("pre", 4.0, 12.0, 1, 2, "cat")


def test_energy_text_names_the_massive_token_or_the_largest_one():
    shares = pd.DataFrame({"layer": [0, 1, 2, 3], "weights": [0.5] * 4, "norms": [0.1] * 4})
    finding = MassiveActivation(1, "cat", 2, (2, 3), 7, 5000.0, 4200.0, ())
    assert energy_text("pre", finding, (2, 1, 5000.0, 4200.0), TOKENS, shares) == massive_text(finding, shares)
    text = energy_text("post", None, (3, 2, 9.5, 30.0), TOKENS, shares)
    assert text.startswith("**No massive activation**") and "Averaged over the 4 layers, the heads put 0.50" in text
    assert "on “cat” (position 2)" in text


def test_shares_with_heads_removed_average_the_heads_the_run_kept():
    """A removed head adds nothing: counted as a share of 0 it made SmolLM2's first token look as if it passed on
    less than it is looked at (0.40 against 0.76; 0.59 over the heads kept)."""
    cfg = explorer.ModelConfig(n_layers=2, n_heads=4)
    removed = ((0, 1), (1, 0), (1, 2))
    trace = explorer.run(explorer.build_model(cfg), "the cat sat on the mat", ablate=removed)
    maps = trace.first.self_attention
    norms = norm_attention(explorer.build_model(cfg), trace)  # [L, H, T, T]
    shares = token_shares(maps, 0, norms, removed)
    seeing = maps.allowed[:, 0] & (maps.allowed.sum(axis=-1) > 1)  # [T] the queries with a choice that see token 0
    for layer in range(2):
        kept = [h for h in range(4) if (layer, h) not in removed]
        weight = maps.weights[layer][kept][:, seeing, 0].mean()
        added = (norms[layer][kept][:, seeing, 0] / norms[layer][kept][:, seeing].sum(axis=-1)).mean()
        assert shares["weights"][layer] == pytest.approx(weight, rel=1e-6)
        assert shares["norms"][layer] == pytest.approx(added, rel=1e-6)
    every = token_shares(maps, 0, norms)  # the removed heads counted: their norms are 0, so the share drops
    assert (every["norms"] < shares["norms"]).all()


def test_token_norms_of_very_large_values_are_numbers_not_infinity(make_maps):
    residual = stream() * np.float32(1e20)  # float32 holds each value; its square overflows float32
    norms = token_energy(stack(residual, make_maps), "norm")
    expected = np.sqrt((residual.astype(np.float64) ** 2).sum(axis=-1))  # [L + 1, T]
    assert np.isfinite(norms).all()
    np.testing.assert_allclose(norms, expected, rtol=1e-6)


def test_a_head_replaced_by_its_mean_still_counts_with_the_weights_that_mix_it():
    """Replaced by its mean, a head still adds ᾱ_j f(x_j) to every query (ᾱ: its weights averaged over the queries).
    Was: left out as if it added nothing; on SmolLM2's layer 3 with L3H2 replaced, the norms share on the first token
    read 0.681 without it against 0.675 with it."""
    cfg = explorer.ModelConfig(n_layers=2, n_heads=4, mask="causal")
    removed = ((0, 1), (1, 2))
    model = explorer.build_model(cfg)
    trace = explorer.run(model, "the cat sat on the mat", ablate=removed, ablate_with="mean")
    maps = trace.first.self_attention
    norms = norm_attention(model, trace)  # [L, H, T, T]: a mean-replaced head's rows hold ᾱ_j ‖f(x_j)‖ everywhere
    shares = token_shares(maps, 0, norms, removed, "mean")
    seeing = maps.allowed[:, 0] & (maps.allowed.sum(axis=-1) > 1)  # [T] the queries with a choice that see token 0
    for layer in range(2):
        mixing = maps.weights[layer].astype(np.float64)  # [H, T, T]
        for at, head in removed:
            if at == layer:
                mixing[head] = mixing[head].mean(axis=0)  # ᾱ, every query's row
        added = norms[layer][:, seeing, 0] / norms[layer][:, seeing].sum(axis=-1)  # [H, T']: every head counts
        assert shares["weights"][layer] == pytest.approx(mixing[:, seeing, 0].mean(), rel=1e-6)
        assert shares["norms"][layer] == pytest.approx(added.mean(), rel=1e-6)
    assert not np.allclose(shares["norms"], token_shares(maps, 0, norms, removed)["norms"])  # zero's rule differs


def test_the_shares_sentence_says_it_averages_the_layers_not_that_every_layer_holds_its_mean():
    """Was "In every layer, the heads put 0.56 of their weight on “[CLS]” on average": MiniLM's layers put 0.35 to
    0.68 on it (the sentence's 0.56 is their mean), so no layer need hold the number it gave every layer."""
    shares = pd.DataFrame({"layer": [0, 1, 2], "weights": [0.8, 0.3, 0.4], "norms": [0.2, 0.2, 0.2]})
    text = shares_text(0, "[CLS]", shares)
    assert "In every layer" not in text and text.startswith("Averaged over the 3 layers, the heads put 0.50")
    read = shares_text(0, "[CLS]", shares, after=0, named=False)
    assert read.startswith("Averaged over the 2 layers that read it (after block 0), the heads put 0.35 of their")
    assert shares_text(0, "x", shares, after=1, named=False).startswith(
        "In the one layer that reads it (after block 1)"
    )
    gone = shares.assign(weights=[0.8, np.nan, 0.4], norms=[0.2, np.nan, 0.2])  # layer 1: every head removed (zero)
    assert shares_text(0, "[CLS]", gone).startswith("Averaged over the 2 layers with a head kept, the heads put 0.60")


def test_the_share_chart_says_which_heads_and_queries_it_averages():
    """Its subtitle had said "mean over heads" with heads removed (those removed with zero are left out) and no word
    of the [PAD] queries it counts (a padding mask hides [PAD] keys, not their rows)."""
    plain = shares_average_text()
    assert plain == "mean over heads and over the queries that may see it and another token"
    zero = shares_average_text(0, ((0, 1), (2, 3)), "zero")
    assert zero.startswith("mean over the heads kept (L0H1, L2H3 removed, adding nothing)")
    assert "replaced by their mean" in shares_average_text(0, ((0, 1),), "mean")
    assert shares_average_text(2).endswith("([PAD] queries included: a padding mask hides [PAD] keys, not their rows)")


def test_padding_queries_counted_are_the_pad_rows_the_averages_take(minilm_model):
    """MiniLM on "the cat sat [PAD] [PAD]": its two [PAD] queries attend to the 5 real tokens, and the per-head
    statistics and the shares on [CLS] average them in (measured: L0H0's entropy 1.20 nats with them, 1.29
    without; L4H4's 0.20 apart)."""
    maps = explorer.run(minilm_model, "the cat sat [PAD] [PAD]").first.self_attention
    assert maps.query_tokens.count("[PAD]") == 2
    assert padding_queries_counted(maps) == 2 and padding_queries_counted(maps, 0) == 2
    assert padding_queries_counted(explorer.run(minilm_model, "the cat sat").first.self_attention) == 0


@pytest.mark.parametrize(("others", "said"), [((10,), "position 10."), ((4, 10), "positions 4, 10.")])
def test_the_other_massive_tokens_are_counted_in_the_right_number(others, said):
    """One other token had read "Other tokens with one: positions 10." (found on a 497-piece SmolLM2 paragraph)."""
    finding = MassiveActivation(position=0, piece="The", block=3, blocks=(3, 4), unit=7, value=900.0, ratio=300.0,
                                others=others)  # fmt: skip
    assert f"Other tokens with one: {said}" in massive_text(finding)
