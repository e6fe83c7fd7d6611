"""The What heads do page through streamlit.testing: the numbers it shows are the engine's (every head's ablation
effect, the attention change after removed heads, the next pieces before and after, the direct logit attribution,
the logit lens), its controls live in the URL, and a model without a read-out says why there is no lens; plus the
page's sentences on hand-made numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import explorer
import views.caches as caches
import views.widgets as widgets
from explorer.analysis.ablation_effects import embedding_cosine, head_ablation_effects, prediction_change
from explorer.analysis.attribution import LogitAttribution, logit_attribution
from explorer.analysis.logit_lens import lens_refusal, logit_lens
from explorer.config import ModelConfig
from explorer.heads_text import (
    change_sentence,
    effect_sentence,
    first_top_layer,
    head_changes,
    lens_sentence,
    top_effects_sentence,
    top_heads_sentence,
)
from explorer.tasks import make_task
from explorer.training import train
from tests.drawn import app_figures, app_matrices, as_read, figure_titled, table_as_read
from views.state import STATE_KEY, AppState, TrainedModel

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PAGE = "views/heads.py"
TOKENS = "the cat sat on the mat"
PROMPT = "The capital of France is"
SENTENCE = "the cat sat on the mat"
FLOAT32 = 1e-6  # the page's boards and maps carry float32 values of numbers at most about 1


def opened(timeout: float = 120, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.query_params.update(params)
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value[:500] for e in at.exception]
    return at


def texts(elements) -> str:
    """The elements' text as a reader sees it (Markdown's escapes undone)."""
    return " ".join(as_read(e.value) for e in elements)


def board_values(at: AppTest, title: str) -> np.ndarray:
    """[L, H] the heatmap of the board whose title holds `title`."""
    figure = figure_titled(at, title)
    return np.asarray(figure["data"][0]["z"], dtype=np.float64)


def test_a_configured_model_shows_every_heads_ablation_effect_and_says_why_there_is_no_lens():
    at = opened()
    effects = head_ablation_effects(ModelConfig(), TOKENS)  # [L, H]
    np.testing.assert_allclose(board_values(at, "sentence embedding"), effects, atol=1e-12)
    assert "No head is removed" in texts(at.info)
    assert lens_refusal(explorer.build_model(ModelConfig())) in texts(at.info)
    assert not [f for f in app_figures(at) if "logit lens" in str(f["layout"]["title"])]  # no empty chart


def test_an_encoder_decoders_board_holds_the_encoders_heads_and_says_so():
    at = opened(arch="encoder-decoder", n_layers="2", n_heads="4")
    cfg = ModelConfig(arch="encoder-decoder", n_layers=2, n_heads=4)
    target = at.session_state["target"]
    effects = head_ablation_effects(cfg, TOKENS, target)  # [L, H] of the encoder's heads, through the decoder
    np.testing.assert_allclose(board_values(at, "sentence embedding"), effects, atol=1e-12)
    captions = texts(at.caption)
    assert "encoder's self-attention heads" in captions and "decoder's cross-attention" in captions
    assert "encoder's self-attention heads" not in texts(opened().caption)  # an encoder's caption has no need of it


def test_removed_heads_show_the_embedding_cosine_the_attention_change_and_the_difference_map():
    at = opened(n_layers="3", ablate="L0H1", heads_layer="2", heads_head="3")
    cfg = ModelConfig(n_layers=3)
    before, after = explorer.run(cfg, TOKENS), explorer.run(cfg, TOKENS, ablate="L0H1")
    cosine = embedding_cosine(before, after)
    shown = texts(at.markdown)
    assert f"cosine {cosine:.4f}" in shown and f"1 − cosine = {1 - cosine:.3g}" in shown
    effects = head_ablation_effects(cfg, TOKENS)
    assert f"it ranks {int((effects > effects[0, 1]).sum()) + 1} of the 12 heads" in shown
    maps_before, maps_after = before.first.self_attention, after.first.self_attention
    per_layer = head_changes(maps_before, maps_after).mean(axis=1)  # [L]
    assert per_layer[0] == 0 and (per_layer[1:] > 0).all()  # layer 0 computes its weights before any head is removed
    bars = figure_titled(at, "attention changed")["data"][0]["y"]
    np.testing.assert_allclose(bars, per_layer, atol=1e-12)
    assert change_sentence(per_layer, [(0, 1)]) in shown
    assert (at.selectbox(key="heads_layer").value, at.selectbox(key="heads_head").value) == (2, 3)
    drawn = app_matrices(at)["heads_difference"]
    expected = maps_after.weights[2, 3].astype(np.float64) - maps_before.weights[2, 3]
    np.testing.assert_allclose(drawn.values, expected, atol=FLOAT32)
    board = figure_titled(at, "sentence embedding")
    crossed = [t for t in board["data"] if t.get("name") == "removed head"]
    assert crossed and list(crossed[0]["x"]) == ["H1"] and list(crossed[0]["y"]) == ["L0"]


def test_stretch_colours_stretches_the_difference_map_from_the_link_and_the_switch_undoes_it():
    at = opened(n_layers="3", ablate="L0H1", heads_layer="2", heads_head="3", stretch="true")
    cfg = ModelConfig(n_layers=3)
    before, after = explorer.run(cfg, TOKENS), explorer.run(cfg, TOKENS, ablate="L0H1")
    change = np.abs(after.attention[2, 3].astype(np.float64) - before.attention[2, 3])  # [T, T], nothing masked
    drawn = app_matrices(at)["heads_difference"]
    assert drawn.view["legend"]["high"] == pytest.approx(np.quantile(change, 0.99), rel=1e-5)
    assert "colours stretched" in drawn.title and "stretch=true" not in texts(at.warning)  # a parameter it knows
    at.toggle(key="stretch").set_value(False).run()
    assert app_matrices(at)["heads_difference"].view["legend"]["high"] == pytest.approx(change.max(), rel=1e-5)


def test_a_head_of_the_last_layer_changes_no_attention_so_no_empty_chart_or_blank_map_is_drawn():
    at = opened(ablate="L1H0")  # the default model has 2 layers: L1 is the last
    assert "in the last layer: no later layer reads what it wrote" in texts(at.markdown)
    assert not [f for f in app_figures(at) if "attention changed" in str(f["layout"]["title"])]
    assert "heads_difference" not in app_matrices(at)


def test_the_difference_map_opens_on_the_head_that_moved_most():
    at = opened(n_layers="3", ablate="L0H1,L0H2")
    cfg = ModelConfig(n_layers=3)
    before, after = explorer.run(cfg, TOKENS), explorer.run(cfg, TOKENS, ablate="L0H1,L0H2")
    changes = head_changes(before.first.self_attention, after.first.self_attention)  # [L, H]
    layer, head = np.unravel_index(int(np.argmax(changes)), changes.shape)
    assert (at.selectbox(key="heads_layer").value, at.selectbox(key="heads_head").value) == (layer, head)
    assert "L0H1 and L0H2 removed together" in texts(at.markdown)


def test_removing_other_heads_opens_the_map_on_the_head_that_moves_most_now():
    at = opened(n_layers="4", ablate="L0H1")
    at.multiselect(key="_ablate_pick").set_value(["L2H0"]).run()  # layers 0 to 2 now keep their weights
    assert not at.exception
    cfg = ModelConfig(n_layers=4)
    before, after = explorer.run(cfg, TOKENS), explorer.run(cfg, TOKENS, ablate="L2H0")
    changes = head_changes(before.first.self_attention, after.first.self_attention)
    expected = np.unravel_index(int(np.argmax(changes)), changes.shape)
    assert (at.selectbox(key="heads_layer").value, at.selectbox(key="heads_head").value) == expected
    assert expected[0] == 3


def test_smollm2_shows_the_next_pieces_before_and_after_its_attribution_and_its_lens(smollm_model, monkeypatch):
    monkeypatch.setitem(caches._CHECKPOINTS, "smollm2-135m", smollm_model)  # the session's copy, not a second load
    at = opened(timeout=300, model="smollm2-135m", tokens=PROMPT, ablate="L29H1,L23H0")
    before, after = explorer.run(smollm_model, PROMPT), explorer.run(smollm_model, PROMPT, ablate="L23H0,L29H1")
    change = prediction_change(smollm_model, before, after, k=10)
    assert len(at.table) == 1
    shown = table_as_read(at, "next piece")
    assert [t.strip("'") for t in shown["next piece"]] == change["text"].tolist()
    np.testing.assert_allclose(shown["before"], change["probability_before"], atol=1e-12)  # drawn rounded to 0.001
    np.testing.assert_allclose(shown["change"], change["change"], atol=1e-12)
    attribution = logit_attribution(smollm_model, before)  # the top piece, " Paris", of the full model
    assert attribution.text == " Paris"
    np.testing.assert_allclose(board_values(at, "Which heads write"), attribution.heads, atol=1e-12)
    direct = attribution.heads[23, 0] + attribution.heads[29, 1]
    logit_after = logit_attribution(smollm_model, after, attribution.token_id).logit
    said = texts(at.markdown)
    assert f"its logit from {attribution.logit:.3f} to {logit_after:.3f}" in said
    assert f"Their direct share of that logit was {direct:+.3f}" in said
    assert f"which add up to {attribution.total:.3f}" in said
    best = np.argsort(-attribution.heads, axis=None)[:3]  # the three heads that raise ' Paris' most
    named = ", ".join(f"L{i // 9}H{i % 9} ({attribution.heads.flat[i]:+.3f})" for i in best)
    assert f"The heads that write ' Paris' most directly: {named}." in said
    lens = logit_lens(smollm_model, after, k=5)  # the lens of the model shown: without the heads
    grid = figure_titled(at, "logit lens")["data"][0]
    top = lens[lens["rank"] == 1].pivot(index="layer", columns="position", values="probability").to_numpy()
    np.testing.assert_allclose(np.asarray(grid["z"], dtype=np.float64), top, atol=1e-12)
    assert lens_sentence(lens, len(after.tokens) - 1, 30) in said
    # another piece from the URL: its logit is shared out
    at = opened(timeout=300, model="smollm2-135m", tokens=PROMPT, heads_piece="Ġthe")
    the = logit_attribution(smollm_model, before, "Ġthe")
    np.testing.assert_allclose(board_values(at, "Which heads write"), the.heads, atol=1e-12)
    assert at.selectbox(key="heads_piece").value == "Ġthe"


def test_the_sentences_show_a_piece_as_written_though_markdown_reads_a_backslash(smollm_model, monkeypatch):
    """SmolLM2's likeliest piece after a LaTeX command is " \\", quoted "' \\\\'" as repr writes it: sent to Markdown
    as it is, it read "' \\'", one backslash fewer than in the table beside it."""
    monkeypatch.setitem(caches._CHECKPOINTS, "smollm2-135m", smollm_model)
    text = r"Use the command \textbf{bold} or"
    attribution = logit_attribution(smollm_model, explorer.run(smollm_model, text))
    assert attribution.text == " \\"
    said = texts(opened(timeout=300, model="smollm2-135m", tokens=text).markdown)
    assert f"The logit of ' \\\\' at the last position is {attribution.logit:.3f}" in said
    assert "The heads that write ' \\\\' most directly" in said


def test_the_views_html_file_keeps_a_piece_of_asterisks(smollm_model, monkeypatch):
    """The file's sentences went through the summary line's Markdown cleaner, which took " **" out of them."""
    monkeypatch.setitem(caches._CHECKPOINTS, "smollm2-135m", smollm_model)
    kept: list[list[str]] = []
    monkeypatch.setattr(widgets, "view_download", lambda title, lines, *rest: kept.append(lines))
    text = "In Markdown, **bold** and"
    attribution = logit_attribution(smollm_model, explorer.run(smollm_model, text))
    assert attribution.text == " **"
    opened(timeout=300, model="smollm2-135m", tokens=text)
    [lines] = kept
    assert any(line.startswith("The logit of ' **' at the last position") for line in lines), lines


def test_each_list_of_smollm2s_pieces_says_what_a_byte_named_in_it_means(smollm_model, monkeypatch):
    """After a row of emoji the likeliest pieces hold part of a character, which read as bytes named <0xF0>."""
    monkeypatch.setitem(caches._CHECKPOINTS, "smollm2-135m", smollm_model)
    at = opened(timeout=300, model="smollm2-135m", tokens="Emoji: 😀 😃 😄", ablate="L0H0")
    captions = [c.value for c in at.caption]
    lists = ("likeliest next pieces of either run", "Sharing out the logit of", "read out as if it were the last")
    for words in lists:  # the before/after table, the piece the board shares out, the logit lens
        [caption] = [c for c in captions if words in c]
        assert "`<0xF0>`" in caption, caption
    [sharing] = [c for c in captions if lists[1] in c]
    assert "' <0xF0><0x9F><0x98>'" in as_read(sharing)  # the top guess, "ĠðŁĺ": a space and three of four bytes
    plain = opened(timeout=300, model="smollm2-135m", tokens=PROMPT)
    assert not [c.value for c in plain.caption if "<0xF0>" in c.value]  # " Paris" holds whole characters


def test_minilm_shows_every_heads_effect_on_the_embedding_and_no_lens(minilm_model, monkeypatch):
    monkeypatch.setitem(caches._CHECKPOINTS, "minilm-l6", minilm_model)
    at = opened(timeout=300, model="minilm-l6", tokens=SENTENCE, ablate="L1H3")
    effects = head_ablation_effects(minilm_model, SENTENCE)
    np.testing.assert_allclose(board_values(at, "sentence embedding"), effects, atol=1e-12)
    before, after = explorer.run(minilm_model, SENTENCE), explorer.run(minilm_model, SENTENCE, ablate="L1H3")
    cosine = embedding_cosine(before, after)
    assert f"cosine {cosine:.4f}" in texts(at.markdown)
    assert lens_refusal(minilm_model) in texts(at.info)
    assert not at.table  # no next-token table: MiniLM predicts no word


def test_a_trained_model_with_an_output_layer_gets_its_board_and_its_lens():
    task = make_task("reverse", 8)
    model = train(ModelConfig(positional="learned"), task, steps=5).model  # an encoder with a read-out
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state[STATE_KEY] = AppState(trained=TrainedModel(model, task, "reverse, 5 steps"))
    at.query_params.update({"tokens": "A B C D", "ablate": "L0H1"})
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value[:500] for e in at.exception]
    before, after = explorer.run(model, "A B C D"), explorer.run(model, "A B C D", ablate="L0H1")
    np.testing.assert_allclose(
        board_values(at, "Which heads write"), logit_attribution(model, before).heads, atol=1e-12
    )
    lens = logit_lens(model, after, k=5)
    top = lens[lens["rank"] == 1].pivot(index="layer", columns="position", values="probability").to_numpy()
    np.testing.assert_allclose(np.asarray(figure_titled(at, "logit lens")["data"][0]["z"], float), top, atol=1e-12)
    assert f"cosine {embedding_cosine(before, after):.4f}" in texts(at.markdown)  # an encoder: no next-token table
    assert not at.table


def test_first_top_layer_and_the_lens_sentence():
    rows = [(0, "a", 0.2), (1, "b", 0.3), (2, "a", 0.5), (3, "a", 0.9)]
    lens = pd.DataFrame(
        {
            "layer": [r[0] for r in rows],
            "position": 4,
            "rank": 1,
            "piece": [r[1] for r in rows],
            "text": [" " + r[1] for r in rows],
            "probability": [r[2] for r in rows],
        }
    )
    assert first_top_layer(lens, 4) == (0, 2)
    said = lens_sentence(lens, 4, 4)
    assert "first tops the guesses at block 0" in said and "for good from block 2" in said
    assert first_top_layer(lens, 3) == (None, None)


def test_the_change_sentence_names_the_unchanged_layers():
    changes = np.array([0.0, 0.0, 0.01, 0.03])
    said = change_sentence(changes, [(1, 0), (2, 1)])
    assert said.startswith("Layers 0 to 1 attend exactly as before") and "most in layer 3, by 0.0300" in said
    assert "no later layer reads" in change_sentence(changes, [(3, 0)])


def test_the_effect_sentence_sets_the_real_change_beside_the_direct_share():
    larger = effect_sentence([(23, 0), (29, 1)], " Mary", (0.923, 11.0), (0.651, 7.0), 3.0)
    assert "logit from 11.000 to 7.000 (-4.000)" in larger and "would have moved by -3.000" in larger
    assert "the real change is larger" in larger
    assert "accounts for the whole change" in effect_sentence([(1, 0)], " a", (0.9, 11.0), (0.8, 10.8), 0.205)
    assert "moved the other way" in effect_sentence([(1, 0)], " a", (0.9, 11.0), (0.95, 11.5), 0.2)
    assert "the real change is smaller" in effect_sentence([(1, 0)], " a", (0.9, 11.0), (0.85, 10.5), 1.0)


def attribution_of(heads: list[list[float]]) -> LogitAttribution:
    """A logit of ' Paris' shared out over these heads alone."""
    heads_array = np.array(heads)
    zeros = np.zeros(heads_array.shape[0])
    total = float(heads_array.sum())
    return LogitAttribution("ĠParis", " Paris", 0, 0, total, 0.0, heads_array, zeros, None, zeros, 0.0, 0.0, total)


def test_the_sentences_speak_of_one_head_as_one():
    """A 1-head model's board read "these heads turn the sentence embedding most: L0H0"."""
    one = top_effects_sentence(np.array([[0.0638]]))
    assert one == "Removed, the model's only head turns the sentence embedding by 1 − cosine = 0.0638."
    two = top_effects_sentence(np.array([[0.1, 0.3]]))
    assert "these heads" in two and two.index("L0H1") < two.index("L0H0")
    said = top_heads_sentence(attribution_of([[0.5, -0.2]]))
    assert (
        said
        == "The head that writes ' Paris' most directly: L0H0 (+0.500). The one that holds it back most: L0H1 (-0.200)."
    )
    assert top_heads_sentence(attribution_of([[0.5, 0.7]])).startswith(
        "The heads that write ' Paris' most directly: L0H1"
    )
