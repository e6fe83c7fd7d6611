"""What the "What heads do" page says, held to numbers computed another way: a mean removal's expected direct
change, the norms a post-norm model's parts pass through, what 1 − cosine of several heads can and cannot say, and
sentences of runs where nothing moved."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.ablation_effects import embedding_cosine
from explorer.analysis.attribution import logit_attribution, replaced_direct_change
from explorer.config import ModelConfig
from explorer.heads_text import (
    alone_sentence,
    attribution_sentence,
    change_sentence,
    change_text,
    cosine_sentence,
    effect_sentence,
    head_changes,
    top_effects_sentence,
)
from explorer.tasks import make_task
from explorer.training import train
from pictures.output_charts import attribution_board_figure, lens_grid_figure
from tests.drawn import as_read, figure_json
from views.state import STATE_KEY, AppState, TrainedModel

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PAGE = "views/heads.py"
MARY = "When Mary and John went to the store, John gave a drink to"


def texts(elements) -> str:
    return " ".join(as_read(e.value) for e in elements)


def direct_term(model, trace, vector: np.ndarray, token_id: int) -> float:
    """A [D] vector written into the last position's stream of a pre-norm (RMSNorm) model, read out through the final
    norm with the scale of `trace`'s run and the piece's read-out row."""
    seen = trace.last.residual[-1][-1].astype(np.float64)  # [D] what the final norm read
    norm = model.decoder.norm
    scale = np.sqrt(np.mean(seen**2) + norm.eps)
    row = model.head.weight[token_id].detach().double().numpy() * norm.weight.detach().double().numpy()  # [D]
    return float(vector.astype(np.float64) @ row / scale)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_a_removals_direct_change_is_what_the_removed_runs_heads_write_instead(smollm_model, mode):
    """Another route to the expected change: the layer's attention output with the heads replaced minus the full
    one (both heads in one layer, so the runs agree up to it) is exactly their replacement minus their output.
    The page had set −(direct share) beside a mean removal, as if the mean wrote nothing: on MARY with L23H0 and
    L29H1 that was −3.311 where the mean's own direct change is −2.195 (−2.1946 with transformers' Llama in float64
    and hooks on o_proj), which turned the verdict around (the real change, −2.242, is larger, not smaller)."""
    heads = [(23, 0), (23, 4)]
    before = explorer.run(smollm_model, MARY)
    replaced = explorer.run(smollm_model, MARY, ablate=heads, ablate_with=mode)
    token_id = logit_attribution(smollm_model, before).token_id
    name = "blocks.23.attn.out"
    written = replaced.last.activations[name][-1] - before.last.activations[name][-1]  # [D]
    expected = direct_term(smollm_model, before, written, token_id)
    assert replaced_direct_change(smollm_model, before, heads, mode) == pytest.approx(expected, abs=2e-5)
    two_layers = replaced_direct_change(smollm_model, before, [(23, 0), (29, 1)], "mean")
    assert two_layers == pytest.approx(-2.1946, abs=1e-3)


def test_the_page_sets_a_mean_removal_beside_what_the_mean_would_write(smollm_model):
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"model": "smollm2-135m", "tokens": MARY, "ablate": "L23H0,L29H1", "ablate_with": "mean"})
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value[:500] for e in at.exception]
    said = texts(at.markdown)
    assert "would have moved by -2.195" in said and "the real change is larger" in said
    assert "Their direct share of that logit was +3.311, and their mean output's is +1.116" in said


def test_removing_a_head_that_held_the_piece_back_undoes_a_gain_not_a_loss():
    said = effect_sentence([(1, 0)], " a", (0.5, 10.0), (0.4, 9.5), -0.3)  # removing it should have raised the logit
    assert "would have moved by +0.300" in said and "more than undid the gain" in said and "loss" not in said
    assert "made up for the loss" in effect_sentence([(1, 0)], " a", (0.5, 10.0), (0.6, 10.5), 0.3)


def post_norm_reader() -> TrainedModel:
    task = make_task("reverse", 8)
    model = train(ModelConfig(positional="learned"), task, steps=5).model  # post-norm: no final norm
    return TrainedModel(model, task, "reverse, 5 steps")


def test_a_post_norm_models_parts_are_read_out_through_every_norm_after_them_not_a_final_one():
    trained = post_norm_reader()
    assert trained.model.encoder.norm is None
    attribution = logit_attribution(trained.model, explorer.run(trained.model, "A B C D"))
    said = attribution_sentence(attribution)
    assert "final norm" not in said and "through every norm after it, from its own block's on" in said
    subtitle = figure_json(attribution_board_figure(attribution))["layout"]["title"]["subtitle"]["text"]
    assert "final norm" not in subtitle and "every norm after it" in subtitle
    lens = explorer.logit_lens(trained.model, explorer.run(trained.model, "A B C D"))
    lens_title = figure_json(lens_grid_figure(lens, list("ABCD"), final_norm=False))["layout"]["title"]["subtitle"][
        "text"
    ]
    assert "final norm, then" not in lens_title and "no final norm" in lens_title

    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[STATE_KEY] = AppState(trained=trained)
    at.query_params.update({"tokens": "A B C D", "ablate": "L0H1"})
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value[:500] for e in at.exception]
    assert "final norm (" not in texts(at.markdown)
    assert "through the final norm" not in texts(at.caption) and "has no final norm" in texts(at.caption)


def test_a_pre_norm_models_route_is_the_final_norm_alone(smollm_model):
    said = attribution_sentence(logit_attribution(smollm_model, explorer.run(smollm_model, "The capital of")))
    assert "read out through the final norm (its scale frozen at this run's) and the row of the read-out" in said


def test_heads_removed_together_are_not_said_to_share_a_job_from_1_minus_cosine():
    """1 − cosine grows as the square of a small turn: two heads whose removals turn MiniLM's embedding the same way
    (L0H3, L2H5: turns at cosine +0.45 to each other) give 0.00584 together against 0.00409 alone, and the page
    said "together they do more than the sum of their parts"; pairs whose turns partly cancel give less, which it
    read as "(partly the same job)"."""
    effects = np.zeros((3, 6))
    effects[0, 3], effects[2, 5] = 0.0025, 0.0016
    for cosine in (1 - 0.00584, 1 - 0.003):
        said = alone_sentence([(0, 3), (2, 5)], cosine, effects)
        assert "same job" not in said.split("do not say")[0] and "sum of their parts" not in said
        assert "add up to 0.0041" in said and "square of a small turn" in said


def test_no_later_weight_moving_is_said_so():
    """One token: each query has one key, whose weight is 1 with or without the head, so no weight moves; the page
    had said "the weights moved most in layer 1, by 0.0000"."""
    model = explorer.build_model(ModelConfig(arch="decoder", mask="causal", norm="pre", n_layers=3))
    before, after = explorer.run(model, "a"), explorer.run(model, "a", ablate="L0H1")
    changes = head_changes(before.first.self_attention, after.first.self_attention).mean(axis=1)
    said = change_sentence(changes, [(0, 1)])
    assert not changes.any() and "moved most" not in said and "No weight of a later layer moved" in said
    assert change_text(3.2e-6) == "3.2e-06" and change_text(0.0123) == "0.0123" and change_text(0.0) == "0.0000"


def test_an_unchanged_embedding_and_an_all_zero_board_are_said_as_such():
    model = explorer.build_model(ModelConfig(arch="decoder", mask="causal", n_layers=2))
    before = explorer.run(model, "a")
    after = explorer.run(model, "a", ablate="L0H1", ablate_with="mean")  # one position: its mean is itself
    cosine = embedding_cosine(before, after)
    assert cosine == 1.0
    assert "turns" not in cosine_sentence([(0, 1)], cosine) and "1 − cosine = 0" in cosine_sentence([(0, 1)], cosine)
    effects = explorer.head_ablation_effects(model, "a", mode="mean")
    assert effects.max() < 1e-12  # float32 rounding of the batched runs: the page had ranked it, "L0H0 (1.58e-14)"
    assert "no head turns the sentence embedding beyond float32 rounding" in top_effects_sentence(effects)


def test_the_lens_cells_fit_their_columns_beside_the_sidebar_at_1024_px():
    """SmolLM2's lens plot is 385 px wide at 1024 px: 14 positions give 27 px a column, 4 characters at 6.5 px. At
    the assumed 480 px, cells wrote 5 ("boug…", "Eliz…"), which ran into their neighbours and the block numbers."""
    rows = [(layer, position, "a-long-piece") for layer in range(2) for position in range(14)]
    lens = pd.DataFrame(
        {
            "layer": [r[0] for r in rows],
            "position": [r[1] for r in rows],
            "rank": 1,
            "piece": [r[2] for r in rows],
            "text": [r[2] for r in rows],
            "probability": 0.5,
        }
    )
    cells = figure_json(lens_grid_figure(lens, [f"t{i}" for i in range(14)]))["data"][0]["text"]
    assert max(len(c) for row in cells for c in row) <= 4


def test_a_board_of_zeros_ranks_no_head():
    """One token, a head removed by its mean: every cell of the board is 0 (the mean is the head's own output). Was:
    "it ranks 1 of the 8 heads by its effect", a rank among ties."""
    said = alone_sentence([(0, 1)], 1.0, np.zeros((2, 4)))
    assert "ranks 1 of the 8" not in said and "Every head's cell on the board is 0" in said
    assert "ranks 4 of the 8" in alone_sentence([(0, 1)], 0.9, np.array([[0.5, 0.1, 0.3, 0.0], [0.2, 0.0, 0.0, 0.0]]))
