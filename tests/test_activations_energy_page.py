"""The Activations page's "where the stream's energy sits" on the shipped checkpoints, through streamlit.testing:
the sentence naming SmolLM2's massive token, the shares chart drawing what the engine computes, max |x| on request,
and MiniLM's post-norm saying why it has none."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.norm_attention import norm_attention
from explorer.analysis.stream_energy import token_energy, token_shares
from tests.drawn import app_figures, app_matrices, figure_titled, figure_trace

pytestmark = pytest.mark.slow

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
PROMPT = "The capital of France is"
SENTENCE = "the cat sat on the mat because it was tired."


def opened(query: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.switch_page("views/activations.py")
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def energy_source(at: AppTest) -> str:
    """The sentence's Markdown as the page writes it."""
    [text] = [i.value for i in at.info if "assive activation" in i.value]
    return text


def energy_text(at: AppTest) -> str:
    """The sentence as it reads, its Markdown escapes (a token's "[" written "\\[") taken off."""
    return re.sub(r"\\(.)", r"\1", energy_source(at))


def test_smollm_names_its_massive_token_and_draws_its_shares(smollm_model):
    at = opened({"model": "smollm2-135m", "tokens": PROMPT, "act_energy": "max"})
    text = energy_text(at)
    assert text.startswith("**Massive activation from block 11**") and "“The” (position 0)" in text
    trace = explorer.run(smollm_model, PROMPT)
    expected = token_shares(trace.first.self_attention, 0, norm_attention(smollm_model, trace))
    figure = figure_titled(at, "How much the heads look at “The”")
    # A title does not wrap: with "(decoder stack)" after it, it ran off a 1024 px screen's chart (the subtitle wraps)
    title = figure["layout"]["title"]
    assert title["text"].endswith("and take from it") and title["subtitle"]["text"].startswith("decoder stack · ")
    weights = figure_trace(figure, "share of attention weight (α)")
    norms = figure_trace(figure, "share of what heads add (‖α·f(x)‖)")
    np.testing.assert_allclose(weights["y"], expected["weights"], rtol=1e-6)
    np.testing.assert_allclose(norms["y"], expected["norms"], rtol=1e-6)
    drawn = app_matrices(at)["act_token_norms"]  # max |x| picked in the link: the heatmap shows it
    assert drawn.title.startswith("Largest |x| in each token")
    np.testing.assert_allclose(drawn.values, token_energy(trace.first, "max"), rtol=1e-6)


def test_minilm_says_post_norm_leaves_no_massive_activation(minilm_model):
    at = opened({"model": "minilm-l6", "tokens": SENTENCE, "act_open_tokens": "true"})
    text = energy_text(at)
    assert text.startswith("**No massive activation**") and "re-normalises" in text and "“[CLS]”" in text
    trace = explorer.run(minilm_model, SENTENCE)
    drawn = app_matrices(at)["act_token_norms"]  # the norm by default
    np.testing.assert_allclose(drawn.values, token_energy(trace.first, "norm"), rtol=1e-6)
    figure_titled(at, "How much the heads look at “[CLS]”")  # the token with the largest |x|, for the contrast


def test_a_token_no_query_may_see_gets_a_sentence_not_an_empty_chart():
    """Found by a review of the numbers: the largest |x| sat on a [PAD] key the padding mask hides from every query,
    and the chart of how much heads look at it was drawn with no line and nothing said."""
    tokens = "the cat sat [PAD] on the mat [PAD]"
    at = opened({"norm": "res-post", "mask": "causal+padding", "tokens": tokens, "act_open_tokens": "true"})
    stack = explorer.run(explorer.ModelConfig(norm="res-post", mask="causal+padding"), tokens).first
    position = int(np.argmax(token_energy(stack, "max")[1:].max(axis=0)))
    assert stack.tokens[position] == "[PAD]" and not stack.self_attention.allowed[:, position].any()
    assert "No query may attend to “[PAD]” (position 7) and to another token: the mask blocks it" in energy_text(at)
    assert not [f for f in app_figures(at) if "How much the heads look at" in f["layout"]["title"]["text"]]


def test_a_link_with_stretch_tops_smollms_token_heatmap_at_the_99th_percentile_and_the_switch_undoes_it(smollm_model):
    at = opened({"model": "smollm2-135m", "tokens": SENTENCE, "act_open_tokens": "true", "stretch": "true"})
    norms = token_energy(explorer.run(smollm_model, SENTENCE).first, "norm")  # [31, T]
    stretched = app_matrices(at)["act_token_norms"]
    assert stretched.view["legend"]["high"] == pytest.approx(np.quantile(norms, 0.99), rel=1e-5)
    assert "colours stretched" in stretched.title
    at.toggle(key="stretch").set_value(False).run()
    full = app_matrices(at)["act_token_norms"]
    assert full.view["legend"]["high"] == pytest.approx(norms.max(), rel=1e-5)  # the massive token's norm
    np.testing.assert_allclose(full.values, norms, rtol=1e-6)


def shown_strings(at: AppTest) -> list[str]:
    """Every sentence, label and figure string the page shows (Plotly's and the tables' too)."""
    texts = [e.value for kind in ("markdown", "caption", "info", "warning", "subheader") for e in at.get(kind)]
    texts += [e.label for e in at.expander] + [json.dumps(f, default=str) for f in app_figures(at)]
    return texts + [point for frame in at.dataframe for point in frame.value.get("point", [])]


def test_smollm_names_its_rmsnorm_wherever_the_page_names_a_norm(smollm_model):
    at = opened({"model": "smollm2-135m", "tokens": PROMPT, "act_open_norms": "true"})
    at.toggle(key="act_stats_table").set_value(True).run()
    figure = figure_titled(at, "What each RMSNorm receives and returns")  # as the zero-fraction chart names silu
    names = {t["name"] for t in figure["data"]}
    assert names == {
        f"{sub} RMSNorm {side}" for sub in ("self-attention", "feed-forward") for side in ("input", "output")
    }
    [stats] = [d.value for d in at.dataframe]  # the statistics table, and its CSV, name the points the same way
    assert {"attn RMSNorm in", "ffn RMSNorm out"} <= set(stats["point"])
    assert not [s for s in shown_strings(at) if "LayerNorm" in s]


def test_minilms_pad_queries_and_removed_heads_are_named_where_the_page_averages_them(minilm_model):
    """A padding mask hides [PAD] keys, not their rows: MiniLM's [PAD] queries attend to the real tokens, and the
    per-head grids and the shares chart averaged them in without a word (L0H0's entropy 1.20 nats with them, 1.29
    without); the shares chart said "mean over heads" with L0H1 removed, which it leaves out."""
    tokens = "the cat sat [PAD] [PAD]"
    at = opened({"model": "minilm-l6", "tokens": tokens, "ablate": "L0H1", "act_open_tokens": "true",
                 "act_open_heads": "true"})  # fmt: skip
    [caption] = [c.value for c in at.caption if c.value.startswith("The self-attention of the encoder stack")]
    assert "[PAD] queries included: a padding mask hides [PAD] keys, not their rows" in caption
    subtitle = figure_titled(at, "How much the heads look at “[CLS]”")["layout"]["title"]["subtitle"]["text"]
    assert (
        "mean over the heads kept (L0H1 removed, adding nothing)" in subtitle and "[PAD] queries included" in subtitle
    )
    assert "Averaged over the 6 layers, the heads put" in energy_text(at)


def test_a_token_that_reads_as_markdown_is_named_as_typed():
    """Found by the typed-text review: the sentence wrote the token raw between quotes, and a configured model's token
    "$ab$" showed as an italic math ab (Streamlit's Markdown reads $...$ as LaTeX)."""
    at = opened({"tokens": "$ab$ $ab$ $ab$", "act_open_tokens": "true"})  # whichever token it names is "$ab$"
    source = energy_source(at)
    assert "“\\$ab\\$”" in source and "“$ab$”" not in source
    assert "“$ab$” (position" in energy_text(at)
