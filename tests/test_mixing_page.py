"""The Mixing page through streamlit.testing: the rollout and flow it draws are explorer's attention_rollout and
attention_flow on the sidebar's trace, its controls live in the URL, and flow past the page's limit is a sentence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.mixing import attention_flow, attention_flow_rows, attention_rollout
from explorer.analysis.stats import head_average
from explorer.config import ModelConfig
from explorer.mixing_text import flow_offered
from explorer.tasks import make_task
from explorer.training import train
from tests.drawn import DrawnMatrix, app_figures, app_matrices, figure_trace
from views.state import STATE_KEY, AppState, TrainedModel

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PAGE = "views/mixing.py"
TOKENS = "the cat sat on the mat"
ROWS = {
    "raw": "last layer, average of heads",
    "rollout": "rollout after the last block",
    "flow": "flow after the last block",
}
# float32 on the page (the matrix view sends float32), float64 in the engine: a few ulps of values at most 1
FLOAT32 = 1e-6


def opened(timeout: float = 180, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.query_params.update(params)
    at.switch_page(PAGE).run()
    assert_ok(at)
    return at


def assert_ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def reach_bars(at: AppTest) -> dict[str, np.ndarray]:
    """The bars of the one position's figure, by row ("raw", "rollout", "flow" when drawn)."""
    (figure,) = app_figures(at)
    names = {trace["name"] for trace in figure["data"]}
    return {key: np.asarray(figure_trace(figure, name)["y"]) for key, name in ROWS.items() if name in names}


def assert_drawn(drawn: DrawnMatrix, expected: np.ndarray) -> None:
    """The drawn map shows `expected` in every cell a path reaches, and is grey only where `expected` is 0."""
    shown = ~drawn.masked
    np.testing.assert_allclose(drawn.values[shown], expected[shown], atol=FLOAT32)
    assert (expected[drawn.masked] == 0).all()


def download_labels(at: AppTest) -> list[str]:
    return [button.proto.label for button in at.get("download_button")]


def infos(at: AppTest) -> str:
    return " ".join(i.value for i in at.info)


def test_the_default_view_draws_explorers_rollout_and_flow():
    at = opened()
    trace = explorer.run(ModelConfig(), TOKENS)
    drawn = app_matrices(at)
    rollout = attention_rollout(trace)  # [L, T, T], residual 0.5
    np.testing.assert_allclose(drawn["mix_rollout"].values, rollout[-1], atol=FLOAT32)
    np.testing.assert_allclose(drawn["mix_flow"].values, attention_flow_rows(trace), atol=FLOAT32)
    np.testing.assert_allclose(drawn["mix_raw"].values, head_average(trace.first.self_attention, 1), atol=FLOAT32)
    assert drawn["mix_rollout"].x_labels == ["the", "cat", "sat", "on", "the·4", "mat"]
    # an encoder: the row shown first is position 0's, and its bars are the same numbers
    assert at.selectbox(key="mix_query").value == 0
    bars = reach_bars(at)
    np.testing.assert_allclose(bars["rollout"], rollout[-1, 0], atol=FLOAT32)
    np.testing.assert_allclose(bars["flow"], attention_flow(trace, 0), atol=FLOAT32)
    text = " ".join(m.value for m in at.markdown)
    assert "residual connection" in text and "Abnar & Zuidema 2020" in text and "0.5·I + 0.5·A" in text
    board = next(c.value for c in at.caption if c.value.startswith("Raw: where"))  # each map by its title
    assert "Rollout: by this estimate" in board and "Flow: the most" in board and "not a share" in board
    assert "Raw, rollout and flow (CSV)" in download_labels(at)


def test_the_block_slider_is_in_the_url_and_draws_rollout_after_that_block():
    at = opened(n_layers="3", mix_layer="1")
    trace = explorer.run(ModelConfig(n_layers=3), TOKENS)
    rollout = attention_rollout(trace)
    assert at.slider(key="mix_layer").value == 1
    drawn = app_matrices(at)
    np.testing.assert_allclose(drawn["mix_layer_rollout"].values, rollout[1], atol=FLOAT32)
    np.testing.assert_allclose(drawn["mix_layer_raw"].values, head_average(trace.first.self_attention, 1), atol=1e-7)
    np.testing.assert_allclose(rollout[1], trace_mixing(trace, 1) @ trace_mixing(trace, 0), atol=1e-6)  # the recursion
    at.slider(key="mix_layer").set_value(0).run()
    assert_ok(at)
    np.testing.assert_allclose(app_matrices(at)["mix_layer_rollout"].values, rollout[0], atol=FLOAT32)


def trace_mixing(trace: explorer.Trace, layer: int, residual: float = 0.5) -> np.ndarray:
    """Ã_l written out here: residual * I + (1 - residual) * the mean of the layer's heads (rows already sum to 1)."""
    mean = trace.attention[layer].astype(np.float64).mean(axis=0)  # [T, T]
    return residual * np.eye(len(mean)) + (1 - residual) * mean


def test_a_block_beyond_the_model_shows_the_last_and_says_so():
    at = opened(mix_layer="7")
    assert at.slider(key="mix_layer").value == 1
    assert any("no block 7" in w.value for w in at.warning)


def test_with_a_head_removed_the_raw_map_is_the_A_rollout_multiplies_and_the_page_says_so():
    """Found by a review of the numbers: with L1H0 removed, rollout counted the head as zero (the token's own share
    0.571 in that layer, not the 0.5 stated) while the raw map beside it still averaged the head's weights in."""
    at = opened(ablate="L1H0")
    trace = explorer.run(ModelConfig(), TOKENS, ablate="L1H0")
    weights = trace.attention.astype(np.float64)  # [L, H, T, T]
    weights[1, 0] = 0.0  # the removed head, as it acted: its output was set to zero
    averaged = weights.mean(axis=1)  # [L, T, T]
    drawn = app_matrices(at)
    np.testing.assert_allclose(drawn["mix_raw"].values, averaged[1], atol=FLOAT32)
    augmented = 0.5 * np.eye(6) + 0.5 * averaged  # [L, T, T], each row then divided by its sum
    augmented /= augmented.sum(axis=-1, keepdims=True)
    assert augmented[1].diagonal().min() > 0.5 + 0.05  # the token keeps 0.5 / 0.875 of itself here, as said
    np.testing.assert_allclose(drawn["mix_rollout"].values, augmented[1] @ augmented[0], atol=FLOAT32)
    assert "**L1H0 removed.** In A each removed head counts as it acted: zero weight" in infos(at)
    assert "removed" not in infos(opened())


def test_a_head_removed_by_its_mean_under_a_causal_mask_is_drawn_where_it_reaches_later_tokens():
    at = opened(arch="decoder", ablate="L0H1", ablate_with="mean")
    trace = explorer.run(ModelConfig(arch="decoder"), TOKENS, ablate="L0H1", ablate_with="mean")
    weights = trace.attention.astype(np.float64)  # [L, H, T, T]
    weights[0, 1] = weights[0, 1].mean(axis=0)  # the removed head's mean row, for every query
    mixing = 0.5 * np.eye(6) + 0.5 * weights.mean(axis=1)  # [L, T, T], rows already sum to 1
    rollout = mixing[1] @ mixing[0]
    drawn = app_matrices(at)["mix_rollout"]
    assert_drawn(drawn, rollout)  # grey only where nothing arrives
    assert not drawn.masked[0, 1:].any() and (rollout[0, 1:] > 0).all()  # position 0 receives later tokens
    assert "later tokens" in infos(at) and "became zero" not in infos(at)


def test_the_residual_share_is_in_the_url():
    at = opened(mix_residual="0.2")
    trace = explorer.run(ModelConfig(), TOKENS)
    assert at.select_slider(key="mix_residual").value == 0.2
    drawn = app_matrices(at)
    np.testing.assert_allclose(drawn["mix_rollout"].values, attention_rollout(trace, 0.2)[-1], atol=FLOAT32)
    np.testing.assert_allclose(drawn["mix_flow"].values, attention_flow_rows(trace, None, 0.2), atol=FLOAT32)
    assert "0.2·I + 0.8·A" in " ".join(m.value for m in at.markdown)


def test_stretch_colours_in_the_link_stretches_both_boards_and_the_switch_undoes_it():
    at = opened(stretch="true", mix_layer="0")
    trace = explorer.run(ModelConfig(), TOKENS)
    maps, rollout = trace.first.self_attention, attention_rollout(trace)
    shown = [head_average(maps, 0)[maps.allowed], rollout[0][maps.allowed | np.eye(len(rollout[0]), dtype=bool)]]
    drawn = app_matrices(at)
    layer_top = drawn["mix_layer_rollout"].view["legend"]["high"]  # the board's one legend
    assert layer_top == pytest.approx(np.quantile(np.concatenate(shown), 0.99), rel=1e-5) and layer_top < 1
    last = [head_average(maps, 1)[maps.allowed], rollout[1][maps.allowed | np.eye(len(rollout[1]), dtype=bool)]]
    last_top = drawn["mix_rollout"].view["legend"]["high"]  # raw and rollout stretched; flow keeps 0 to 1
    assert last_top == pytest.approx(np.quantile(np.concatenate(last), 0.99), rel=1e-5) and last_top < 1
    assert drawn["mix_flow"].view["legend"]["high"] == 1.0 and "colours stretched" in drawn["mix_raw"].title
    at.toggle(key="stretch").set_value(False).run()
    assert_ok(at)
    assert [app_matrices(at)[k].view["legend"]["high"] for k in ("mix_flow", "mix_layer_rollout")] == [1.0, 1.0]


def test_junk_in_the_url_is_said_not_silently_dropped():
    at = opened(mix_residual="lots", mix_layer="x")
    warnings = " ".join(w.value for w in at.warning)
    assert "mix_residual=lots" in warnings and "mix_layer=x" in warnings
    assert "mix_rollout" in app_matrices(at)


def test_past_the_limit_flow_of_every_row_is_a_sentence_and_one_row_is_still_drawn():
    words = " ".join(f"w{i}" for i in range(60))  # 2 layers x 60 tokens: every row is 60^2 max flows on 7,200 edges
    assert not flow_offered(2, 60, None) and flow_offered(2, 60, 1)
    at = opened(tokens=words, mix_query="59")
    drawn = app_matrices(at)
    assert "mix_flow" not in drawn and "mix_rollout" in drawn
    assert "Flow for every position is not computed here" in infos(at) and "3,600 max-flow problems" in infos(at)
    board = next(c.value for c in at.caption if c.value.startswith("Raw: where"))  # two maps: no flow
    assert "Rollout: by this estimate" in board and "flow" not in board.lower()
    assert "Raw and rollout (CSV)" in download_labels(at)  # the button had been "Rollout and flow" without flow
    trace = explorer.run(ModelConfig(), words)
    np.testing.assert_allclose(reach_bars(at)["flow"], attention_flow(trace, 59), atol=FLOAT32)


def test_past_the_one_row_limit_no_flow_is_drawn_and_the_page_says_how_to_get_it():
    words = " ".join(f"w{i}" for i in range(240))
    assert not flow_offered(2, 240, 1)
    at = opened(tokens=words, n_heads="1")
    assert "This position's flow is not computed here" in infos(at)
    assert "flow" not in reach_bars(at)
    assert "mix_rollout" in app_matrices(at)


def test_a_causal_model_shows_which_tokens_reach_the_prediction():
    at = opened(arch="decoder")
    trace = explorer.run(ModelConfig(arch="decoder"), TOKENS)
    assert at.selectbox(key="mix_query").value == 5  # the last position: the one that predicts
    assert any("reach the prediction" in s.value for s in at.subheader)
    bars = reach_bars(at)
    np.testing.assert_allclose(bars["flow"], attention_flow(trace, 5), atol=FLOAT32)
    rollout = app_matrices(at)["mix_rollout"]
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    np.testing.assert_array_equal(rollout.masked, upper)  # no path from a later token: grey, as on the Attention page
    assert_drawn(rollout, attention_rollout(trace)[-1])


@pytest.mark.parametrize(
    "params",
    [
        {"tokens": "cat"},  # one token: a mask with nothing above the diagonal
        {"mask": "padding", "tokens": "the [PAD] [PAD]"},  # a padded encoder whose last rows see only "the"
        {"arch": "encoder-decoder", "mask": "causal"},  # a causal encoder: its last position predicts nothing
    ],
)
def test_only_a_decoder_only_model_is_said_to_predict(params):
    """Found by a review: "reach the prediction" was decided from the mask's shape, so these layouts, whose first
    stack predicts no next token, opened on their last position under that title."""
    at = opened(**params)
    assert not any("prediction" in s.value for s in at.subheader)
    assert at.selectbox(key="mix_query").value == 0
    (figure,) = app_figures(at)
    assert "reach position 0" in figure["layout"]["title"]["text"]


def test_masked_tokens_get_zero_and_are_drawn_grey():
    at = opened(mask="padding", tokens="a b [PAD] c")
    trace = explorer.run(ModelConfig(mask="padding"), "a b [PAD] c")
    rollout = attention_rollout(trace)[-1]  # [T, T]
    flow = attention_flow_rows(trace)
    others = [0, 1, 3]
    assert (rollout[others, 2] == 0).all() and (flow[others, 2] == 0).all()  # nothing of [PAD] reaches the others
    drawn = app_matrices(at)
    for name in ("mix_rollout", "mix_flow"):
        assert drawn[name].masked[others, 2].all() and not drawn[name].masked[2, 2]  # [PAD]'s own stream stays
    assert_drawn(drawn["mix_flow"], flow)
    assert_drawn(drawn["mix_rollout"], rollout)


def test_an_encoder_decoder_follows_the_encoders_self_attention_and_says_so():
    at = opened(arch="encoder-decoder")
    assert any("encoder's self-attention" in i.value for i in at.info)
    trace = explorer.run(ModelConfig(arch="encoder-decoder"), TOKENS, at.text_input(key="target").value)
    assert_drawn(app_matrices(at)["mix_rollout"], attention_rollout(trace)[-1])


def test_a_trained_model_draws_its_own_rollout():
    task = make_task("reverse", 8)
    result = train(ModelConfig(positional="learned"), task, steps=5)
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state[STATE_KEY] = AppState(trained=TrainedModel(result.model, task, "reverse, 5 steps"))
    at.query_params["tokens"] = "A B C D"
    at.switch_page(PAGE).run()
    assert_ok(at)
    expected = attention_rollout(explorer.run(result.model, "A B C D"))[-1]
    np.testing.assert_allclose(app_matrices(at)["mix_rollout"].values, expected, atol=FLOAT32)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "text"), [("minilm-l6", "The cat sat on the mat because it was tired."),
                                            ("smollm2-135m", "The capital of France is")])  # fmt: skip
def test_the_real_checkpoints_draw_their_rollout_and_flow(name, text):
    at = opened(timeout=300, model=name, tokens=text)
    model = at.session_state[STATE_KEY].model  # the checkpoint the app loaded (test_app_pretrained checks it is)
    assert model.config.checkpoint == name
    trace = explorer.run(model, text)
    drawn = app_matrices(at)
    assert_drawn(drawn["mix_rollout"], attention_rollout(trace)[-1])
    assert_drawn(drawn["mix_flow"], attention_flow_rows(trace))
    assert drawn["mix_rollout"].x_labels[0] == trace.tokens[0]


@pytest.mark.parametrize(
    "raw", ["1e400", "nan", "-inf", "-1", "2.5", "9" * 400, "٣", "", "<script>alert(1)</script>", "a" * 5000]
)
def test_any_string_in_the_pages_parameters_gives_a_page_not_a_traceback(raw):
    # tests/test_url_fuzz.py fuzzes the pages it lists; this page's own parameters get the same hostile strings here
    at = opened(mix_residual=raw, mix_layer=raw, mix_query=raw)
    assert at.title and "mix_rollout" in app_matrices(at)


def test_a_head_removed_by_its_mean_under_a_padding_mask_is_not_said_to_reach_hidden_tokens():
    """Found by a review: under a padding mask every position hides the same keys ([PAD]), which no query weighs, so
    their mean weighs none either; the note still said a position "receives tokens its mask hides from it"."""
    at = opened(mask="padding", tokens="a b c d [PAD] [PAD]", ablate="L0H1", ablate_with="mean")
    trace = explorer.run(ModelConfig(mask="padding"), "a b c d [PAD] [PAD]", ablate="L0H1", ablate_with="mean")
    rollout = attention_rollout(trace)[-1]  # [T, T]
    assert (rollout[:4, 4:] == 0).all()  # no [PAD] reaches a token
    assert "removed" in infos(at) and "mask hides" not in infos(at)
    assert "mask hides" in infos(opened(mask="causal+padding", ablate="L0H1", ablate_with="mean"))


def test_one_token_that_no_attention_reaches_at_residual_0_is_said_to_get_0():
    """One [PAD] under a padding mask at residual share 0: its one key is hidden, so rollout and flow are 0, and the
    note had said they give all of its row to it (1)."""
    at = opened(mask="padding", tokens="[PAD]", mix_residual="0.0")
    assert attention_rollout(explorer.run(ModelConfig(mask="padding"), "[PAD]"), 0.0)[-1, 0, 0] == 0
    captions = " ".join(c.value for c in at.caption)
    assert "rollout and flow are 0" in captions and "(1)" not in captions
    assert "(1)" in " ".join(c.value for c in opened(mask="padding", tokens="[PAD]").caption)
