"""Two subtitles that said more than their maps hold (found by the review of an engineer's own torch module):
a head removed with zero draws what it adds as 0 in every cell, where the note said 99 % of the map was below 1e-06
and to turn on Stretch colours to see its pattern; and an imported model's input rows are the tensor given to
explorer.run, where the depth and per-token charts said no position was added to them."""

from __future__ import annotations

import torch
from torch import nn

import explorer
from explorer.analysis.norm_attention import norm_attention
from explorer.config import ModelConfig
from pictures.attention_panels import attention_map_panel
from tests.drawn import figure_json

TOKENS = "the cat sat on the mat"
CFG = ModelConfig(arch="decoder", mask="causal", norm="pre")
LAYER, HEAD = 1, 2


def _zero_removed():
    model = explorer.build_model(CFG)
    trace = explorer.run(model, TOKENS, ablate=[(LAYER, HEAD)], ablate_with="zero")
    return model, trace, norm_attention(model, trace)


def test_a_head_removed_with_zero_is_said_to_add_nothing_not_to_hide_a_pattern():
    model, trace, norms = _zero_removed()
    assert not norms[LAYER, HEAD].any()  # what the test is about: the removed head adds exactly nothing
    maps = trace.first.self_attention
    for stretch in (False, True):
        panel = attention_map_panel(maps, LAYER, HEAD, norms=norms, removed="zero", stretch=stretch)
        assert "0 in every cell" in panel["subtitle"]
        assert "Stretch colours" not in panel["subtitle"] and "99 %" not in panel["subtitle"]
    title = figure_json(explorer.norm_attention_figure(model, trace, LAYER, HEAD))["layout"]["title"]
    assert "0 in every cell" in title["subtitle"]["text"] and "Stretch colours" not in title["subtitle"]["text"]


def test_a_kept_head_on_the_same_run_keeps_its_scale_note():
    """The zero case is the removed head's alone: a kept head of the run is not 0 everywhere, and its note names its
    scale as before."""
    _, trace, norms = _zero_removed()
    panel = attention_map_panel(trace.first.self_attention, LAYER, 0, norms=norms, stretch=False)
    assert norms[LAYER, 0].any()
    assert "0 in every cell" not in panel["subtitle"] and "darkest blue" in panel["subtitle"]


def _imported_trace():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 24, batch_first=True).eval()
    x = torch.randn(5, 16)  # the user's own input rows: positions in them or not, the explorer cannot know
    return explorer.run(explorer.from_torch(layer), x)


def _subtitle(figure) -> str:
    """A Plotly figure's subtitle as one line (figure_layout wraps it with <br>)."""
    return figure_json(figure)["layout"]["title"]["subtitle"]["text"].replace("<br>", " ")


def test_an_imported_models_input_rows_are_the_tensor_given_not_tokens_without_positions():
    trace = _imported_trace()
    depth, per_token = _subtitle(explorer.depth_figure(trace)), _subtitle(explorer.token_norm_figure(trace))
    for subtitle in (depth, per_token):
        assert "the tensor given to explorer.run, as it is" in subtitle
        assert "no position" not in subtitle and "repeated word" not in subtitle


def test_a_configured_models_input_rows_still_name_their_positions():
    trace = explorer.run(ModelConfig(positional="none"), "the cat sat on the cat")
    assert "no position is added to the input" in _subtitle(explorer.token_norm_figure(trace))
    depth = _subtitle(explorer.depth_figure(explorer.run(ModelConfig(), "the cat sat")))
    assert "embedding + position" in depth
