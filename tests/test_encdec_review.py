"""The configured encoder-decoder on the pages and in a notebook: what the pages say of heads removed from its encoder
(the decoder keeps every head but reads the changed encoder output through cross-attention), which stack Mixing's
downloads follow, which stack's tokens a cross-attention figure's axes hold, Compare's words for a one-token target,
and the notebook's error for a kind an encoder-decoder does not have."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import explorer
from explorer.analysis.mixing import attention_rollout, mixed_maps
from explorer.attention_text import decoder_removal_text
from explorer.config import ConfigError, ModelConfig
from explorer.mixing_export import mixing_table
from pictures import notebook_figures
from pictures.compare_charts import norm_difference_figure
from pictures.norm_figures import norm_maps_figure
from tests.test_links_sections import page
from views.ablation_controls import downstream_words, whose_heads
from views.compare_words import no_gradients_note, whose_stack
from views.mixing import mixing_csv

ENC_DEC = ModelConfig(arch="encoder-decoder", norm="post")
SOURCE, TARGET = "the cat sat on the mat", "le chat est assis"


def changed(a: explorer.Trace, b: explorer.Trace, kind: str) -> list[float]:
    """max |a - b| of one kind of attention, layer by layer."""
    return [float(np.abs(x - y).max()) for x, y in zip(a.maps(kind).weights, b.maps(kind).weights, strict=True)]


def test_an_encoder_head_removed_changes_the_decoder_below_its_layer_and_the_words_say_so():
    full = explorer.run(ENC_DEC, SOURCE, TARGET)
    cut = explorer.run(ENC_DEC, SOURCE, TARGET, ablate="L1H0")
    assert changed(full, cut, "encoder self-attention") == [0.0, 0.0]  # L1's own weights: its input is unchanged
    assert changed(full, cut, "decoder self-attention")[0] == 0.0  # reads the target alone
    assert changed(full, cut, "cross-attention")[0] > 1e-3  # layer 0 < 1, yet it reads the changed encoder output
    words = downstream_words(((1, 0),), encoder_decoder=True)
    assert not words.startswith("Layers below 1 are unchanged")  # the old banner: false for the decoder's layer 0
    assert "Encoder layers below 1 are unchanged" in words and "cross-attention" in words
    assert "layer 0 self-attention, which reads the target alone, is unchanged" in words
    assert whose_heads(((1, 0),), True) == "Encoder head" and whose_heads(((1, 0), (1, 2)), False) == "Heads"
    assert downstream_words(((1, 0),)).startswith("Layers below 1 are unchanged")  # one stack: as before


def test_a_decoder_map_says_whether_the_encoders_removed_heads_reach_it():
    layer0_self = decoder_removal_text("decoder self-attention", 0, ((1, 0),))
    assert layer0_self.startswith("This map is the full model's") and "L1H0 changes" in layer0_self
    cross = decoder_removal_text("cross-attention", 0, ((0, 1), (1, 0)))
    assert "keys and values are the encoder's output" in cross and "heads (L0H1, L1H0)" in cross
    assert "changed input" in decoder_removal_text("decoder self-attention", 1, ((1, 0),))


def test_the_attention_page_says_encoder_heads_and_what_the_cross_attention_map_reads():
    query = {"arch": "encoder-decoder", "tokens": SOURCE, "target": TARGET, "ablate": "L1H0", "kind": "cross-attention"}
    at = page("views/attention.py", query)
    info = " ".join(e.value for e in at.info)
    assert "Encoder head L1H0 (output set to zero) removed" in info
    assert "Encoder layers below 1 are unchanged" in info and "Layers below 1 are unchanged" not in info
    captions = " ".join(e.value for e in at.caption)
    assert "The decoder keeps all its heads, but this map comes from a changed input" in captions


def test_compare_names_the_encoder_and_the_target_when_it_is_one_token():
    assert whose_stack(ENC_DEC) == "'s encoder" and whose_stack(ModelConfig()) == ""
    note = no_gradients_note(ENC_DEC)
    assert "at least two tokens in the target" in note  # was "at least two tokens", beside a 6-token source
    assert "in the target" not in no_gradients_note(ModelConfig())
    query = {"arch": "encoder-decoder", "tokens": SOURCE, "target": "x", "ablate": "L0H1"}
    at = page("views/compare.py", query)
    captions = " ".join(e.value for e in at.caption)
    assert "from A's encoder only" in captions
    assert "at least two tokens in the target" in captions


def test_mixing_csv_of_an_encoder_decoder_says_it_follows_the_encoder():
    trace = explorer.run(ENC_DEC, SOURCE, TARGET)
    maps = mixed_maps(trace)
    rollout = attention_rollout(trace)[-1]  # [T, T]
    everyone = list(range(len(maps.key_tokens)))

    def table() -> pd.DataFrame:
        return mixing_table(list(maps.key_tokens), everyone, {"rollout": rollout}, 0.5)

    frame = pd.read_csv(io.StringIO(mixing_csv(table, maps.kind)))
    assert (frame["attention"] == "encoder self-attention").all()
    assert list(frame["input_token"][: len(everyone)]) == SOURCE.split()
    np.testing.assert_allclose(frame["rollout"].to_numpy().reshape(len(everyone), -1), rollout, atol=1e-7)
    one_stack = explorer.run(ModelConfig(), SOURCE)
    assert "attention" not in pd.read_csv(io.StringIO(mixing_csv(table, mixed_maps(one_stack).kind)))


def test_a_cross_attention_figure_names_source_and_target_axes():
    trace = explorer.run(ENC_DEC, SOURCE, TARGET)
    model = explorer.build_model(ENC_DEC)
    for figure in (
        notebook_figures.attention_figure(trace, 1, 0, kind="cross-attention"),
        notebook_figures.attention_grid_figure(trace, kind="cross-attention"),
    ):
        assert (figure.layout.xaxis.title.text, figure.layout.yaxis.title.text) == ("key (source)", "query (target)")
        assert list(figure.data[0].x)[:4] == SOURCE.split()[:4] and list(figure.data[0].y) == TARGET.split()
    norms = explorer.norm_attention(model, trace, "cross-attention")  # [L, H, T, S]
    figure = norm_maps_figure(trace.maps("cross-attention"), norms, 1, 0)
    assert (figure.layout.xaxis.title.text, figure.layout.yaxis.title.text) == ("key (source)", "query (target)")
    decoder = notebook_figures.attention_figure(trace, 1, 0, kind="decoder self-attention")
    assert (decoder.layout.xaxis.title.text, decoder.layout.yaxis.title.text) == ("key", "query")
    # Compare's A − B of what a head adds (its view's HTML) said "key" and "query" of a cross-attention map too
    cross = replace(trace.maps("cross-attention"), weights=norms)  # the norms as the maps' weights, as Compare has them
    figure = norm_difference_figure(cross, replace(cross, weights=norms * 0.5), 1, 0)
    assert (figure.layout.xaxis.title.text, figure.layout.yaxis.title.text) == ("key (source)", "query (target)")


def test_a_kind_an_encoder_decoder_lacks_is_refused_with_the_kind_to_pass():
    trace = explorer.run(ENC_DEC, SOURCE, TARGET)
    with pytest.raises(ConfigError, match="pass one of them as kind, e.g. kind='cross-attention'"):
        notebook_figures.attention_figure(trace, 0, 0)


def test_the_activations_gradients_say_the_removed_heads_are_the_encoders():
    """The gradient section's note named an encoder-decoder's removed heads as "the heads removed", where the
    decoder keeps every head."""
    query = {"arch": "encoder-decoder", "tokens": SOURCE, "target": TARGET, "ablate": "L1H0"}
    at = page("views/activations.py", query | {"act_open_gradients": "true"})
    [note] = [c.value for c in at.caption if "These gradients are the whole model's" in c.value]
    assert "the encoder heads removed elsewhere on this page (L1H0)" in note, note
