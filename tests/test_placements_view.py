"""All four norm placements on one model's weights (explorer.analysis.placements): the numbers against the traces and
gradients of the flipped models, what the sentences say (from the numbers, including when the literature's account
fails), the figure's panels and lines, the CSV, and the flip story's words for every pair of placements."""

from __future__ import annotations

import dataclasses
import itertools
import weakref

import numpy as np
import pandas as pd
import pytest
import torch

import explorer
import explorer.model
from explorer.analysis import placements
from explorer.analysis.gradients import gradient_change, gradient_norms, layer_gradient_totals, unresolved_change
from explorer.analysis.placements import (
    COLUMNS,
    CSV_COLUMNS,
    ENTROPY,
    GRADIENT,
    MEASURES,
    RMS,
    PlacementRun,
    placement_run,
    read_table_csv,
    table_csv,
)
from explorer.analysis.stats import head_entropy, row_entropy
from explorer.build import build_model
from explorer.compare import model_for_b
from explorer.config import NORMS, ModelConfig
from explorer.flip_story import FlipEffect, flip_effect, flip_words, why_it_changes
from explorer.placements_text import placements_paragraphs
from pictures.placement_charts import PLACEMENT_COLOURS, PLACEMENT_DASHES, PLACEMENT_MARKERS, placements_chart
from pictures.training_charts import NORM_COLOURS
from tests.tiny_checkpoints import perturbed_norms, tiny

TEXT, TARGET = "the cat sat on the mat", "le chat dort"
SMALL = dict(d_model=32, n_heads=2, n_layers=3, d_ff=48)
# Both sides read the same float32 trace (or gradient) of the same deterministic computation; only float64 summation
# order could differ, far below this.
SAME = dict(rtol=1e-9, atol=0.0)


def flipped(model: explorer.Transformer, placement: str) -> explorer.Transformer:
    return model if placement == model.config.norm else model_for_b(model, model.config.replace(norm=placement))


def target_of(cfg: ModelConfig) -> str | None:
    return TARGET if cfg.arch == "encoder-decoder" else None


@pytest.fixture(scope="module")
def encoder() -> tuple[explorer.Transformer, PlacementRun]:
    model = build_model(ModelConfig(**SMALL))
    return model, placement_run(model, TEXT)


def trained_norms(model: explorer.Transformer, seed: int = 5) -> explorer.Transformer:
    """Norm weights away from 1 and biases away from 0, as a trained model's are."""
    return perturbed_norms(model, seed, scale=0.3)


# --- The numbers.


@pytest.mark.parametrize("arch", ["encoder", "decoder", "encoder-decoder"])
@pytest.mark.parametrize("own", NORMS)
def test_every_number_is_the_flipped_models_own(arch, own):
    """Residual RMS from the flipped model's trace, entropy from head_entropy of its maps, gradient totals from
    layer_gradient_totals of its gradients: the table holds exactly these, for every stack."""
    cfg = ModelConfig(arch=arch, norm=own, **SMALL)
    model = build_model(cfg)
    result = placement_run(model, TEXT, target_of(cfg))
    assert list(result.table.columns) == list(COLUMNS) and result.own == own
    for placement in NORMS:
        other = flipped(model, placement)
        trace = explorer.run(other, TEXT, target_of(cfg))
        totals = layer_gradient_totals(gradient_norms(other, TEXT, target_of(cfg)))
        for stack in trace.stacks:
            rms = np.sqrt((stack.residual.astype(np.float64) ** 2).mean(axis=(1, 2)))  # [L + 1]
            np.testing.assert_allclose(result.values(placement, RMS, stack.name), rms, **SAME)
            entropy = head_entropy(stack.self_attention).groupby("layer")["entropy"].mean()  # [L]
            np.testing.assert_allclose(result.values(placement, ENTROPY, stack.name), entropy, **SAME)
            grads = totals[totals["stack"] == stack.name].sort_values("layer")["norm"]  # [L]
            np.testing.assert_allclose(result.values(placement, GRADIENT, stack.name), grads, **SAME)
    assert result.stacks == [s.name for s in trace.stacks]


def test_layers_run_from_the_input_for_the_stream_and_from_block_0_for_the_rest(encoder):
    _, result = encoder
    n = SMALL["n_layers"]
    for (placement, measure), rows in result.table.groupby(["placement", "measure"]):
        first = -1 if measure == RMS else 0
        assert sorted(rows["layer"]) == list(range(first, n)), (placement, measure)
    assert set(result.table["measure"]) == set(MEASURES) and set(result.table["placement"]) == set(NORMS)


def test_post_norm_with_norms_at_identity_leaves_rms_1_after_every_block(encoder):
    """A LayerNorm at identity returns (x - mean) / sqrt(var + eps) per token: mean square var / (var + eps), so the
    RMS over tokens lies between sqrt(min var / (min var + eps)) and 1; the bound comes from the trace's own
    variances, plus float32 rounding of the normalised values (1e-6)."""
    model, result = encoder
    post = flipped(model, "post")
    trace = explorer.run(post, TEXT)
    eps = post.encoder.layers[0].norm2.eps
    for layer in range(SMALL["n_layers"]):
        summed = trace.first[f"blocks.{layer}.ffn.ln_in"].astype(np.float64)  # [T, D] what the block's last norm read
        var = summed.var(axis=-1).min()
        low = np.sqrt(var / (var + eps))
        value = result.values("post", RMS)[layer + 1]
        assert low - 1e-6 <= value <= 1 + 1e-6
    assert result.identity_norms == {p: True for p in NORMS}


def test_pre_norms_stream_grows_from_what_each_sub_layer_adds(encoder):
    """Pre-norm's stream after block l is the input plus every update so far: its RMS from the trace's own updates."""
    model, result = encoder
    trace = explorer.run(flipped(model, "pre"), TEXT)
    x = trace.residual[0].astype(np.float64)  # [T, D]
    for layer in range(SMALL["n_layers"]):
        x = x + trace.first[f"blocks.{layer}.attn.out"] + trace.first[f"blocks.{layer}.ffn.out"]
        # float32 additions in the engine against float64 here: a few epsilons (1.2e-7) of values near 1
        np.testing.assert_allclose(result.values("pre", RMS)[layer + 1], np.sqrt((x**2).mean()), rtol=1e-5)


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_four_placements_share_every_non_norm_weight_and_new_norms_start_at_identity(family):
    model = trained_norms(build_model(tiny(family)))
    x = model.embed(torch.tensor([3, 17, 5, 9, 12])).detach()  # [T, D]: a checkpoint without a tokenizer reads ids
    result = placement_run(model, x)
    assert result.no_gradients is not None and "typed tokens" in result.no_gradients  # a tensor has no next token
    models = {p: flipped(model, p) for p in NORMS}
    for a, b in itertools.combinations(NORMS, 2):
        params_b = dict(models[b].named_parameters())
        for name, parameter in models[a].named_parameters():
            if "norm" not in name or "q_norm" in name or "k_norm" in name:
                assert torch.equal(parameter, params_b[name]), (a, b, name)
    for placement, names in result.new_norms.items():
        params = dict(models[placement].named_parameters())
        if placement == model.config.norm:
            assert names == ()
        if placement in ("res-post", "peri"):  # output norms neither post- nor pre-norm weights have
            assert any(".out_norm1." in name for name in names)
        for name in names:
            assert torch.all(params[name] == (0 if name.endswith(".bias") else 1)), name
            assert name not in dict(model.named_parameters())
    assert not result.identity_norms[model.config.norm]  # its own norms were moved away from identity


def test_masked_rows_are_left_out_of_the_entropy_alike_for_every_placement():
    """With [PAD] first under causal+padding, query 0 may attend to nothing: its all-zero row is left out, so the
    entropy is finite and the mean over the other queries."""
    cfg = ModelConfig(mask="causal+padding", **SMALL)
    model = build_model(cfg)
    text = "[PAD] the cat sat"
    result = placement_run(model, text)
    for placement in NORMS:
        maps = explorer.run(flipped(model, placement), text).first.self_attention
        assert maps.empty_rows[0] and not maps.empty_rows[1:].any()
        entropy = result.values(placement, ENTROPY)
        assert np.isfinite(entropy).all()
        by_hand = row_entropy(maps.weights)[:, :, 1:].mean(axis=(1, 2))  # [L]: heads and allowed queries
        np.testing.assert_allclose(entropy, by_hand, rtol=1e-12)


def test_one_token_gives_no_gradients_and_says_why():
    result = placement_run(build_model(ModelConfig(**SMALL)), "cat")
    assert result.no_gradients is not None and GRADIENT not in set(result.table["measure"])
    sentence = placements_paragraphs(result, "untrained weights", True)[2]
    assert sentence.startswith("Gradient norms need at least two tokens")
    assert sentence.count("radient norms") == 1  # said once, not "No gradient norms: Gradient norms need ..."


def test_the_flipped_copies_lend_from_built_and_the_numbers_do_not_change(encoder):
    model, result = encoder
    lent = {"pre": flipped(model, "pre")}
    again = placement_run(model, TEXT, built=lent)
    pd.testing.assert_frame_equal(again.table, result.table)


def test_lent_traces_and_gradients_give_the_same_table(encoder):
    """The Compare page lends A's and B's traces and gradient totals: the table is the one computed afresh."""
    model, result = encoder
    known = {}
    for placement in ("post", "pre"):
        other = flipped(model, placement)
        known[placement] = (explorer.run(other, TEXT), layer_gradient_totals(gradient_norms(other, TEXT)))
    again = placement_run(model, TEXT, built={"pre": flipped(model, "pre")}, known=known)
    pd.testing.assert_frame_equal(again.table, result.table)
    assert again.new_norms == result.new_norms and again.identity_norms == result.identity_norms


def test_progress_is_told_before_each_placement_and_at_the_end(encoder):
    model, _ = encoder
    told: list[tuple[float, str]] = []
    placement_run(model, TEXT, progress=lambda share, what: told.append((share, what)))
    assert [share for share, _ in told] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert all(f"{p}-norm" in what for p, (_, what) in zip(NORMS, told, strict=False))


def test_placements_are_measured_a_block_at_a_time_and_none_during_a_backward_pass(encoder, monkeypatch):
    """No trace is made: each block's attention maps are gone once the block after it has run, and none is alive
    during a backward pass. For SmolLM2 on 512 pieces a trace is 0.6 GB and a backward pass 0.8 GB, and the Compare
    page already holds A's and B's traces."""
    model, result = encoder
    made: list[weakref.ref] = []
    alive_at_block: list[int] = []
    alive_at_backward: list[int] = []
    original_block, original_norms = explorer.model.Block.forward, placements.gradient_norms

    def block(self, *args, **kwargs):
        alive_at_block.append(sum(ref() is not None for ref in made))
        out, record = original_block(self, *args, **kwargs)
        if "attn.pattern" in record:
            made.append(weakref.ref(record["attn.pattern"]))
        return out, record

    def norms(*args, **kwargs):
        alive_at_backward.append(sum(ref() is not None for ref in made))
        return original_norms(*args, **kwargs)

    monkeypatch.setattr(explorer.model.Block, "forward", block)
    monkeypatch.setattr(placements, "gradient_norms", norms)
    again = placement_run(model, TEXT)
    pd.testing.assert_frame_equal(again.table, result.table)
    assert len(made) == len(NORMS) * SMALL["n_layers"]  # every block of every placement's forward seen
    assert max(alive_at_block) <= 1  # the loop's last record, while the next block runs
    assert alive_at_backward == [0] * len(NORMS)
    assert sum(ref() is not None for ref in made) == 0


@pytest.mark.parametrize(
    "settings",
    [
        dict(arch="decoder", mask="causal+padding", norm="pre"),
        dict(arch="encoder", positional="rope", norm="peri"),
        dict(arch="encoder-decoder", mask="padding"),
    ],
)
def test_measured_as_it_runs_equals_the_traces_measures(settings):
    cfg = ModelConfig(**SMALL, **settings)
    model = build_model(cfg)
    text = "[PAD] the cat sat on the mat [PAD]"
    expected = [placements.trace_measures(stack) for stack in explorer.run(model, text, target_of(cfg)).stacks]
    got = placements.measured_run(model, text, target_of(cfg))
    assert [m.name for m in got] == [m.name for m in expected] and len(got) == (2 if target_of(cfg) else 1)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g.rms, e.rms)
        np.testing.assert_array_equal(g.entropy, e.entropy)
        assert (g.uniform_entropy, g.sublayers) == (e.uniform_entropy, e.sublayers)


def test_a_checkpoint_measured_as_it_runs_equals_its_traces_measures(minilm_model):
    (expected,) = [placements.trace_measures(s) for s in explorer.run(minilm_model, TEXT).stacks]
    (got,) = placements.measured_run(minilm_model, TEXT)
    np.testing.assert_array_equal(got.rms, expected.rms)
    np.testing.assert_array_equal(got.entropy, expected.entropy)
    assert got.uniform_entropy == expected.uniform_entropy


def test_the_csv_reads_back_as_the_table(encoder):
    _, result = encoder
    back = read_table_csv(table_csv(result))
    assert list(back.columns) == list(CSV_COLUMNS) and back["resolved"].all()
    pd.testing.assert_frame_equal(back[list(COLUMNS)], result.table)


def test_the_csv_flags_the_gradient_norms_float32_does_not_resolve(encoder):
    """The chart draws an unresolved placement's gradients faint and the sentence leaves them out: the CSV said
    nothing, and gave SmolLM2's res-post-norm block 0 as 14,900,000 where float64 gives 6,780,000."""
    _, result = encoder
    back = read_table_csv(table_csv(dataclasses.replace(result, unresolved={"res-post": 39.9})))
    flagged = (back["placement"] == "res-post") & (back["measure"] == GRADIENT)
    assert flagged.any() and not back.loc[flagged, "resolved"].any() and back.loc[~flagged, "resolved"].all()


# --- The sentences.


def made_up(rms: dict[str, list[float]], own: str = "post", untrained: bool = True) -> PlacementRun:
    """A PlacementRun with these residual RMS values (input first) and level gradients and entropies."""
    rows = []
    for placement, values in rms.items():
        n = len(values) - 1
        rows += [(placement, "encoder", layer - 1, RMS, v) for layer, v in enumerate(values)]
        rows += [(placement, "encoder", layer, GRADIENT, 1.0 + layer) for layer in range(n)]
        rows += [(placement, "encoder", layer, ENTROPY, 1.0) for layer in range(n)]
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    identity = {p: untrained for p in NORMS}
    new = {p: () if p == own else ("encoder.norm.weight",) for p in NORMS}
    return PlacementRun(table, own, new, identity, {"encoder": 2}, {"encoder": 1.5}, None)


def test_the_sentences_name_every_placement_and_its_numbers(encoder):
    _, result = encoder
    paragraphs = placements_paragraphs(result, "untrained weights", True)
    text = " ".join(paragraphs)
    for placement in NORMS:
        assert f"{placement}-norm" in text
    assert "identity" in paragraphs[0] and "untrained weights" in paragraphs[0]
    pre_end = result.values("pre", RMS)[-1]
    assert explorer.numbers.readable(pre_end) in paragraphs[1]


def test_the_sentences_say_so_when_the_literature_does_not_hold():
    """Post-norm not flat, pre-norm not growing, res-post and peri ending above pre: each said plainly."""
    result = made_up({"post": [1, 1, 3], "pre": [1, 1, 1], "res-post": [1, 2, 3], "peri": [1, 2, 3]}, untrained=False)
    _, stream, grads, _ = placements_paragraphs(result, "trained weights", False)
    assert "not flat here" in stream and "does not grow here" in stream
    assert "Res-post-norm and peri-norm end above pre-norm's 1, unlike what is reported" in stream
    assert "not checked here" in grads  # Xiong et al.'s predictions are for weights at initialisation


def test_the_sentences_say_so_when_the_literature_holds():
    result = made_up({"post": [1, 1, 1], "pre": [1, 4, 9], "res-post": [1, 2, 3], "peri": [1, 2, 2.5]})
    _, stream, grads, _ = placements_paragraphs(result, "untrained weights", True)
    assert "Post-norm stays flat, at 1 after every block, as expected" in stream
    assert "Pre-norm grows ×9, as expected" in stream
    assert "Res-post-norm and peri-norm end below pre-norm's 9, as reported" in stream
    assert "post-norm's last block's is 2 times its first's (as predicted)" in grads
    assert "within ×2 of each other (as predicted)" in grads


def test_collapsed_attention_and_block_0_twins_are_said_only_when_the_numbers_show_them():
    result = made_up({p: [1, 1, 1] for p in NORMS})
    table = result.table.copy()
    res_post = (table["placement"] == "res-post") & (table["measure"] == ENTROPY) & (table["layer"] == 1)
    table.loc[res_post, "value"] = 0.01
    pre_0 = (table["placement"] == "pre") & (table["measure"] == ENTROPY) & (table["layer"] == 0)
    table.loc[pre_0, "value"] = 0.5
    changed = PlacementRun(
        table, "post", result.new_norms, result.identity_norms, {"encoder": 2}, {"encoder": 1.5}, None
    )
    words = placements_paragraphs(changed, "untrained weights", True)[3]
    assert "Res-post-norm: in every layer after block 0 the heads put nearly all their weight on a single key" in words
    assert "post-norm and res-post-norm (both read the raw stream)" in words
    assert "pre-norm and peri-norm" not in words  # their block-0 entropies differ here


@pytest.mark.slow
def test_minilm_all_four_placements_say_what_its_numbers_show(minilm_model):
    result = placement_run(minilm_model, "The cat sat on the mat because it was tired.")
    paragraphs = placements_paragraphs(result, "pretrained weights of MiniLM", False)
    assert result.own == "post" and not result.identity_norms["post"]
    rms = {p: result.values(p, RMS) for p in NORMS}
    grows = rms["pre"][-1] / rms["pre"][0]
    # Post-norm training never let MiniLM's stream grow, so its sub-layers write updates as large as the stream
    # itself: summed unnormalised over 6 blocks they must at least double it (it measured x11).
    assert grows > 2
    assert f"Pre-norm grows ×{explorer.numbers.readable(grows)}" in paragraphs[1]
    assert "final norm" in paragraphs[0] and "output norms" in paragraphs[0]
    assert result.unresolved == {}  # every placement's gradients move under 1 % with the input (README)


@pytest.mark.slow
def test_smollm2s_res_post_gradients_are_called_rounding_not_a_measurement(smollm_model):
    """SmolLM2's weights run res-post: float32 and float64 gradient norms differ by x3 to x13 per block (measured,
    README). The check finds it, by a change in the input of one part in a million, and only there."""
    result = placement_run(smollm_model, "The cat sat on the mat because it was tired.")
    assert set(result.unresolved) == {"res-post"} and result.unresolved["res-post"] > 2  # x13-x120 measured
    grads = placements_paragraphs(result, "pretrained weights of SmolLM2", False, kind="RMSNorm")[2]
    assert "Not given for res-post-norm: moving the input by one part in a million" in grads
    assert "res-post-norm " not in grads.split("Not given")[0]  # its numbers are not in the sentence
    figure = placements_chart(result)
    faint = [t for t in figure.data if t.xaxis == "x2" and t.name == "res-post-norm"]
    assert len(faint) == 1 and faint[0].opacity < 1 and "not resolved" in faint[0].hovertemplate


def test_a_gradient_that_is_not_a_number_leaves_its_blocks_total_not_a_number():
    norms = pd.DataFrame(
        {"stack": "encoder", "layer": pd.array([0, 0, 1, 1], dtype="Int64"), "parameter": list("abab"),
         "norm": [3.0, float("nan"), 3.0, 4.0]}
    )  # fmt: skip
    totals = layer_gradient_totals(norms)
    assert np.isnan(totals["norm"].iloc[0]) and totals["norm"].iloc[1] == pytest.approx(5.0)


def test_a_configured_models_gradients_are_resolved_in_every_placement():
    """Random weights in any placement pass the check by far: the gradient moves by about the input's 1e-6."""
    for norm in NORMS:
        model = build_model(ModelConfig(norm=norm, n_layers=3))
        totals = layer_gradient_totals(gradient_norms(model, TEXT))
        change = gradient_change(model, TEXT, None, totals)["change"]
        assert (change < 1.001).all(), (norm, change.max())  # a hundredth of the 10 % UNRESOLVED allows


def with_gradients(result: PlacementRun, values: dict[str, list[float]]) -> PlacementRun:
    """`result` with these gradient norms per placement (one per block)."""
    table = result.table.copy()
    for placement, norms in values.items():
        rows = (table["placement"] == placement) & (table["measure"] == GRADIENT)
        table.loc[rows, "value"] = norms
    return dataclasses.replace(result, table=table)


def test_a_single_block_is_not_said_as_first_to_last_nor_as_layers_after_block_0():
    """One block: gradients read "block 0 → block 0: post-norm 13.6 → 13.6", and a placement whose only layer is
    sharp was said to be sharp "in every layer after block 0", a layer it does not have."""
    result = made_up({p: [1.0, 1.0] for p in NORMS})
    sharp = (result.table["placement"] == "res-post") & (result.table["measure"] == ENTROPY)
    result = dataclasses.replace(result, table=result.table.assign(value=result.table["value"].mask(sharp, 0.05)))
    _, _, grads, entropy = placements_paragraphs(result, "untrained weights", True)
    assert grads.startswith("Gradient norm of the one block's parameters (block 0): post-norm 1, pre-norm 1,")
    assert "→" not in grads
    assert "Res-post-norm: in its one layer (block 0) the heads put nearly all their weight" in entropy
    assert "after block 0" not in entropy


def test_unresolved_gradients_are_left_out_of_the_sentence_and_said_why():
    result = dataclasses.replace(made_up({p: [1, 1, 1] for p in NORMS}), unresolved={"res-post": 12.9})
    grads = placements_paragraphs(result, "trained weights", False)[2]
    assert "post-norm 1 → 2, pre-norm 1 → 2, peri-norm 1 → 2." in grads and "res-post-norm 1" not in grads
    assert "Not given for res-post-norm" in grads and "up to ×12.9" in grads


@pytest.mark.parametrize(
    ("rms", "gradients", "said"),
    [
        ({p: [1, 1] for p in NORMS}, {}, None),  # one block: no first and last to compare
        ({p: [1, 1, 1] for p in NORMS}, {"post": [0.0, 0.0]}, None),  # "a a a": nothing to predict, loss 0
        ({p: [1, 1, 1] for p in NORMS}, {"post": [1.0, 1.05]}, "1.05 times its first's (barely: under ×2)"),
        ({p: [1, 1, 1] for p in NORMS}, {"post": [1.0, 0.5]}, "0.5 times its first's (not as predicted)"),
    ],
)
def test_xiong_et_als_prediction_is_checked_only_where_it_means_something(rms, gradients, said):
    words = placements_paragraphs(with_gradients(made_up(rms), gradients), "untrained weights", True)[2]
    if said is None:
        assert "Xiong" not in words and "nan" not in words
    else:
        assert said in words


def test_an_encoder_decoders_encoder_is_not_checked_against_a_prediction_about_the_output():
    run = placement_run(build_model(ModelConfig(arch="encoder-decoder", n_layers=3)), "the cat sat", "le chat")
    encoder = placements_paragraphs(run, "untrained weights", True, "encoder")[2]
    decoder = placements_paragraphs(run, "untrained weights", True, "decoder")[2]
    assert "see the decoder's for it" in encoder and "last block's is" not in encoder
    assert "post-norm's last block's is" in decoder


def test_collapse_is_said_of_every_layer_after_block_0_and_only_where_attention_could_spread():
    result = made_up({p: [1, 1, 1, 1] for p in NORMS})  # three blocks
    table = result.table.copy()
    entropy = (table["placement"] == "res-post") & (table["measure"] == ENTROPY)
    table.loc[entropy & (table["layer"] == 1), "value"] = 0.01
    table.loc[entropy & (table["layer"] == 2), "value"] = 0.3  # layer 2 still spreads: not collapsed
    assert "single key" not in placements_paragraphs(dataclasses.replace(result, table=table), "w", True)[3]
    table.loc[entropy, "value"] = 0.01
    collapsed = placements_paragraphs(dataclasses.replace(result, table=table), "w", True)[3]
    assert "Res-post-norm: in every layer after block 0" in collapsed
    table.loc[table["measure"] == ENTROPY, "value"] = 0.0  # one token: one key, entropy 0 whatever the heads do
    one_key = dataclasses.replace(result, table=table, uniform_entropy={"encoder": 0.0})
    assert "single key" not in placements_paragraphs(one_key, "w", True)[3]
    every = dataclasses.replace(result, table=table)  # three or more collapsed: a list, not "and ... and"
    assert (
        "Post-norm, pre-norm, res-post-norm and peri-norm: in every layer" in placements_paragraphs(every, "w", True)[3]
    )


def test_an_rmsnorm_is_not_said_to_have_a_bias():
    result = made_up({"post": [1, 1, 3], "pre": [1, 1, 1], "res-post": [1, 2, 3], "peri": [1, 2, 3]})
    assert "gain (and bias)" in placements_paragraphs(result, "w", False)[1]
    stream = placements_paragraphs(result, "w", False, kind="RMSNorm")[1]
    assert "set by the gain of each block's last norm" in stream and "bias" not in stream


def test_a_stream_that_is_not_a_number_is_not_compared_in_words():
    result = made_up({"post": [1, float("nan"), 1], "pre": [1, 2, 3], "res-post": [1, 2, 3], "peri": [1, 2, 3]})
    paragraphs = placements_paragraphs(result, "w", True)
    assert len(paragraphs) == 2 and "Post-norm gave values that are not numbers" in paragraphs[1]
    assert "nan" not in " ".join(paragraphs)


# --- The figure.


def test_the_figure_has_three_panels_with_one_line_per_placement(encoder):
    _, result = encoder
    figure = placements_chart(result)
    panels: dict[str, list] = {}
    for trace in figure.data:
        panels.setdefault(trace.xaxis, []).append(trace)
    assert len(panels) == 3 and all(len(lines) == 4 for lines in panels.values())
    for measure, lines in zip(MEASURES, panels.values(), strict=True):
        for placement, line in zip(NORMS, lines, strict=True):
            assert line.name == f"{placement}-norm"
            assert line.line.color == PLACEMENT_COLOURS[placement]
            np.testing.assert_array_equal(line.y, result.values(placement, measure))
    looks = {(PLACEMENT_DASHES[p], PLACEMENT_MARKERS[p]) for p in NORMS}
    assert len(looks) == 4 and len(set(PLACEMENT_DASHES.values())) == 4  # told apart without colour


def test_hover_says_input_not_after_block_input(encoder):
    """The residual stream's first point is the input to block 0: hover read "after block input"."""
    _, result = encoder
    rms, gradient, entropy = (placements_chart(result).data[i * 4] for i in range(3))  # post-norm in each panel
    assert list(rms.customdata) == ["input", "after block 0", "after block 1", "after block 2"]
    assert list(gradient.customdata) == list(entropy.customdata) == ["block 0", "block 1", "block 2"]
    assert all("block %{customdata}" not in t.hovertemplate for t in placements_chart(result).data)


# The chart in Compare's expander is 530 px wide beside the sidebar on a 1024 px window (measured on a screenshot);
# a tick label of Plotly's 12 px font takes at most 7 px per character (Source Sans digits are half an em).
CHART_PX_AT_1024 = 530
LABEL_PX_PER_CHARACTER = 7


@pytest.mark.parametrize("n_layers", [2, 6, 12, 30])
def test_block_labels_of_every_panel_fit_side_by_side_at_1024_px(n_layers):
    """Labels that do not fit are turned on end by Plotly, which at 30 blocks made every panel's axis unreadable."""
    result = made_up({p: [1.0] * (n_layers + 1) for p in NORMS})
    layout = placements_chart(result).layout
    plot_px = CHART_PX_AT_1024 - layout.margin.l - layout.margin.r
    for name in ("xaxis", "xaxis2", "xaxis3"):
        x_axis = layout[name]
        px_per_block = plot_px * (x_axis.domain[1] - x_axis.domain[0]) / (x_axis.range[1] - x_axis.range[0])
        for (left, right), (a, b) in zip(
            itertools.pairwise(x_axis.tickvals), itertools.pairwise(x_axis.ticktext), strict=True
        ):
            needed = LABEL_PX_PER_CHARACTER * (len(a) + len(b)) / 2 + 4  # half of each label, and a gap
            assert (right - left) * px_per_block >= needed, (name, a, b)


def test_placement_colours_keep_the_train_pages(encoder):
    for norm, colour in NORM_COLOURS.items():
        assert PLACEMENT_COLOURS[norm] == colour


def test_a_stream_spanning_orders_of_magnitude_is_drawn_on_a_log_scale():
    result = made_up({"post": [0.1, 0.2, 0.3], "pre": [0.1, 40.0, 400.0], "res-post": [0.1, 1, 2], "peri": [0.1, 1, 2]})
    layout = placements_chart(result).layout
    assert layout.yaxis.type == "log" and "log scale" in layout.yaxis.title.text
    assert layout.yaxis.exponentformat == "power"  # 10⁶, not "1000000" running into the axis title
    assert layout.yaxis3.type != "log"  # entropy: never, even spanning orders of magnitude (0 = one key)
    collapsed = made_up({p: [1, 1, 1] for p in NORMS})
    table = collapsed.table.copy()
    table.loc[table["measure"] == ENTROPY, "value"] = [1e-7, 1.0] * (len(table[table["measure"] == ENTROPY]) // 2)
    spread = PlacementRun(
        table, "post", collapsed.new_norms, collapsed.identity_norms, {"encoder": 2}, {"encoder": 1.5}, None
    )
    assert placements_chart(spread).layout.yaxis3.type != "log"


def test_notebook_figure_is_the_pages(encoder):
    model, result = encoder
    figure = explorer.placements_figure(model, TEXT)
    np.testing.assert_array_equal(figure.data[0].y, placements_chart(result).data[0].y)


# --- The flip story, for every pair of placements.


def effect() -> FlipEffect:
    return FlipEffect(12, 3, (2, 5, 0.4), 1, np.array([1.0, 0.5, 0.5]), np.array([1.0, 2.0, 4.0]))


@pytest.mark.parametrize(("a", "b"), list(itertools.permutations(NORMS, 2)))
def test_flip_words_explain_every_pair_of_placements(a, b):
    cfg = ModelConfig()
    words = flip_words(effect(), cfg.replace(norm=a), cfg.replace(norm=b), "Tiny")
    assert f"Tiny was trained {a}-norm. Run {b}-norm on the very same weights" in words
    why = why_it_changes(a, b, effect().rms_a[1:])
    assert why in words
    if b == "post":
        assert "normalises the stream after every sub-layer" in why
    elif a == "post":
        assert "never normalises the stream itself" in why
    else:
        assert "Neither placement normalises the stream itself" in why
        reads = {"pre", "peri"}
        if (a in reads) != (b in reads):
            assert ("raw stream" if a in reads else "input norms that start at identity") in why
        adds = {"res-post", "peri"}
        if (a in adds) != (b in adds):
            assert ("no longer normalised" if a in adds else "output norms that start at identity") in why


@pytest.mark.parametrize("b", ["pre", "res-post", "peri"])
def test_a_post_norm_checkpoints_stream_is_said_bounded_at_its_measured_rms_not_unit_size(minilm_model, b):
    """MiniLM's trained LayerNorm gains keep its post-norm stream well below an RMS of 1 after every block: the flip
    story gives the range measured on this text (RMS over tokens and units of each block's output, by hand), and
    does not call it unit size."""
    model_b = model_for_b(minilm_model, minilm_model.config.replace(norm=b))
    trace_a = explorer.run(minilm_model, TEXT)
    effect = flip_effect(trace_a, explorer.run(model_b, TEXT))
    after = [np.sqrt((np.asarray(r, np.float64) ** 2).mean()) for r in trace_a.first.residual[1:]]  # [L]
    assert len(after) == minilm_model.config.n_layers and max(after) < 0.7
    words = flip_words(effect, minilm_model.config, model_b.config, "MiniLM")
    assert f"post-norm kept bounded (an RMS of {min(after):.2f} to {max(after):.2f} after each block here)" in words
    assert "unit size" not in words


@pytest.mark.slow
def test_totals_compare_lends_already_checked_are_not_checked_again(minilm_model, monkeypatch):
    """Compare's B (A with another placement) comes with its `change` column: checking it again was waste."""
    text = "The cat sat on the mat because it was tired."
    flipped = model_for_b(minilm_model, minilm_model.config.replace(norm="pre"), share=True)
    checked = gradient_change(flipped, text, None, layer_gradient_totals(gradient_norms(flipped, text)))
    original, calls = placements.gradient_change, []
    monkeypatch.setattr(placements, "gradient_change", lambda *args: calls.append(args) or original(*args))
    placement_run(minilm_model, text, built={"pre": flipped}, known={"pre": (None, checked)})
    assert len(calls) == 2  # res-post and peri: MiniLM's own post is not checked, pre came checked


def test_a_block_that_is_not_resolved_or_not_a_number_makes_the_totals_unresolved():
    totals = pd.DataFrame({"stack": "encoder", "layer": [0, 1], "norm": [1.0, 2.0]})
    assert unresolved_change(totals) is None  # not checked
    assert unresolved_change(totals.assign(change=[1.0, 1.09])) is None
    assert unresolved_change(totals.assign(change=[1.0, 12.9])) == 12.9
    assert np.isnan(unresolved_change(totals.assign(change=[float("nan"), 12.9])))  # a NaN is not skipped
