"""A downloaded file says which heads its run removed. Found by a review of every download: with ablate=L0H1 and
ablate_with=mean, the Attention, Mixing and Activations pages' "Download this view (HTML)" named the model and the
tokens but not the removal (only the link's query held "ablate=L0H1"), though every layer after L0 attends otherwise
and the page says so; Compare's file described A and B by their settings alone; and the map's JSON could not say it
at all (its config has no removed heads)."""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.analysis.mixing import attention_rollout
from explorer.analysis.norm_attention import norm_attention
from explorer.compare_export import read_maps_csv
from explorer.config import ModelConfig
from explorer.export import attention_json, read_attention_csv, read_attention_json
from explorer.mixing_export import mixing_table
from explorer.norm_export import norm_attention_csv, norm_attention_json
from tests.test_app_compare import made_downloads

APP = str(Path(__file__).resolve().parents[1] / "dashboard.py")
REMOVED = {"tokens": "the cat sat on the mat", "ablate": "L0H1", "ablate_with": "mean"}
MEAN = "output set to its mean over the positions"
SAID = f"Heads removed: L0H1 ({MEAN}). Every figure is of the model without them."


@pytest.fixture
def made(monkeypatch) -> dict[str, object]:
    """The callable each download button of the next run is handed, by the file name it offers."""
    return made_downloads(monkeypatch)


def view_lines(files: dict[str, object], key: str) -> list[str]:
    """The plain lines at the top of a view's HTML file."""
    html = files[f"attention_explorer_{key}.html"]().decode("utf-8")
    return [re.sub("&#x27;", "'", line) for line in re.findall(r"<p>(.*?)</p>", html)]


def opened(page: str, params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update(params)
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("key", ["attention", "mixing", "activations"])
def test_a_view_of_the_run_names_the_heads_it_removed(made, key):
    opened(f"views/{key}.py", REMOVED)
    assert SAID in view_lines(made, key)


def test_a_view_of_the_full_model_names_no_removal(made):
    opened("views/attention.py", {"tokens": "the cat sat on the mat"})
    assert not any("removed" in line for line in view_lines(made, "attention"))


def test_compares_file_says_that_a_lacks_the_heads_and_b_does_not(made):
    opened("views/compare.py", REMOVED)
    a_line, b_line = view_lines(made, "compare")[:2]
    assert a_line.startswith("A: ") and a_line.endswith(f" · heads removed: L0H1 ({MEAN})")
    assert b_line.startswith("B: ") and "removed" not in b_line


def test_the_maps_json_names_the_heads_its_run_removed_and_reads_back():
    model = explorer.build_model(ModelConfig(arch="decoder", mask="causal", norm="pre"))
    trace = explorer.run(model, "the cat sat on the mat", ablate="L0H1", ablate_with="mean")
    maps = trace.first.self_attention
    data = read_attention_json(attention_json(maps, 1, 2, trace.config, trace.ablated, trace.ablate_with))
    assert data["heads_removed"] == ["L0H1"] and data["removed_with"] == "mean"
    assert "still computes the weights" in data["removed_note"]
    np.testing.assert_array_equal(data["weights"], maps.weights[1, 2])
    norms = norm_attention(model, trace)
    both = read_attention_json(norm_attention_json(maps, norms, 0, 1, trace.config, trace.ablated, trace.ablate_with))
    assert both["heads_removed"] == ["L0H1"]
    np.testing.assert_array_equal(np.asarray(both["norms"], dtype=np.float32), norms[0, 1])
    full = read_attention_json(attention_json(maps, 1, 2, trace.config, (), "zero"))
    assert full["heads_removed"] == [] and full["removed_note"] == ""
    assert "heads_removed" not in read_attention_json(attention_json(maps, 1, 2, trace.config))  # not known: not said


def test_compares_maps_csv_with_norms_shown_holds_what_the_heads_add(made):
    """Show: norms draws A's, B's and A − B's ‖α·f(x)‖; the maps CSV and the JSON had held the weights only (a, b,
    a_minus_b; difference), so the files a class kept did not hold a number of the maps the page drew."""
    causal = {"arch": "decoder", "mask": "causal"}
    at = opened("views/compare.py", {**REMOVED, **causal, "measure": "norms", "layer": "0", "head": "1"})
    assert "comparison_maps.csv" not in made
    frame = read_maps_csv(made["comparison_maps_with-norms.csv"]())
    cfg = ModelConfig(**causal)
    model = explorer.build_model(cfg)
    trace_a = explorer.run(model, REMOVED["tokens"], ablate="L0H1", ablate_with="mean")
    norms_a = norm_attention(model, trace_a)  # [L, H, T, T]
    model_b = explorer.build_model(replace(cfg, norm="pre"))
    norms_b = norm_attention(model_b, explorer.run(model_b, REMOVED["tokens"]))
    np.testing.assert_array_equal(frame["a_norm"].to_numpy().reshape(norms_a.shape), norms_a)
    np.testing.assert_array_equal(frame["b_norm"].to_numpy().reshape(norms_b.shape), norms_b)
    np.testing.assert_allclose(frame["a_minus_b_norm"], frame["a_norm"] - frame["b_norm"], atol=1e-6)
    np.testing.assert_array_equal(frame["a"].to_numpy().reshape(norms_a.shape), trace_a.first.self_attention.weights)
    removed = frame[(frame.layer == 0) & (frame["head"] == 1)]
    assert (~removed["allowed_a"]).any() and (removed["a_norm"] > 0).all()  # its mean reaches every cell
    assert at.radio(key="measure").value == "norms"
    data = json.loads(made["comparison.json"]())
    difference = np.asarray(data["attention"][0]["norms_difference"], dtype=np.float64)  # [L, H, T, T]
    np.testing.assert_allclose(difference, norms_a.astype(np.float64) - norms_b, atol=1e-6)
    assert "norms_difference" in data["note"]


def test_an_encoder_decoders_file_says_whose_heads_were_removed(made):
    """Removal reaches the first stack's self-attention only: "L0H1" alone could be the decoder's."""
    params = {**REMOVED, "arch": "encoder-decoder", "target": "le chat", "kind": "cross-attention"}
    opened("views/attention.py", params)
    assert f"Heads removed from the encoder's self-attention: L0H1 ({MEAN})." in " ".join(view_lines(made, "attention"))


def test_the_readers_give_back_the_norms_a_file_holds_as_the_arrays_the_page_computed():
    """read_attention_json had left a norms file's norms as nested lists, and read_attention_csv its norm column as
    float64, beside weights read back as float32 [Tq, Tk]: the same file, two kinds of numbers."""
    model = explorer.build_model(ModelConfig(arch="decoder", mask="causal"))
    trace = explorer.run(model, "the cat sat on the mat [PAD]")
    maps, norms = trace.first.self_attention, norm_attention(model, trace)
    data = read_attention_json(norm_attention_json(maps, norms, 1, 3, trace.config))
    assert isinstance(data["norms"], np.ndarray) and data["norms"].dtype == np.float32
    np.testing.assert_array_equal(data["norms"], norms[1, 3])
    frame = read_attention_csv(norm_attention_csv(maps, norms, 1, 3))
    assert frame["norm"].dtype == np.float32
    np.testing.assert_array_equal(frame["norm"].to_numpy().reshape(norms[1, 3].shape), norms[1, 3])


def test_the_mixing_table_of_a_run_without_heads_names_them_beside_the_residual_share():
    """With heads removed, the Mixing CSV's raw_average and rollout count each removed head as it acted (zero, or its
    mean row), not as the weights it still computes; the table had said nothing of it."""
    model = explorer.build_model(ModelConfig(arch="decoder", mask="causal"))
    trace = explorer.run(model, "the cat sat on the mat", ablate="L0H1,L1H0", ablate_with="mean")
    rollout = attention_rollout(trace)  # [L, T, T]
    tokens = trace.first.tokens
    everyone = list(range(len(tokens)))
    table = mixing_table(tokens, everyone, {"rollout": rollout[-1]}, 0.5, trace.ablated, trace.ablate_with)
    assert (table["heads_removed"] == "L0H1,L1H0").all() and (table["removed_with"] == "mean").all()
    assert "heads_removed" not in mixing_table(tokens, everyone, {"rollout": rollout[-1]}, 0.5)  # the full model's


def test_the_attention_pages_json_names_the_heads_its_run_removed(made):
    """The page's own Download JSON, weights and norms alike: every layer after L0 attends otherwise, and the file's
    config alone cannot say so."""
    opened("views/attention.py", REMOVED | {"layer": "1"})
    weights = read_attention_json(made["attention_self-attention_L1_H0.json"]())
    assert weights["heads_removed"] == ["L0H1"] and weights["removed_with"] == "mean"
    opened("views/attention.py", REMOVED | {"layer": "1", "measure": "norms"})
    norms = read_attention_json(made["attention_self-attention_L1_H0_with-norms.json"]())
    assert norms["heads_removed"] == ["L0H1"] and norms["removed_with"] == "mean"


def test_the_mixing_pages_csvs_name_the_heads_their_run_removed(made):
    opened("views/mixing.py", REMOVED)
    for name in ("mixing_last_block.csv", "rollout_block1.csv"):
        table = pd.read_csv(io.StringIO(made[name]()))
        assert set(table["heads_removed"]) == {"L0H1"} and set(table["removed_with"]) == {"mean"}, name


def test_what_heads_do_csvs_say_how_heads_were_removed(made):
    """The ablation board's cells are each head removed alone, with zero or with its mean (the page's choice), and
    the logit lens is of the model without the sidebar's heads: neither file had said so."""
    opened("views/heads.py", {"model": "minilm-l6", "tokens": "the cat sat", "ablate": "L0H1", "ablate_with": "mean"})
    board = pd.read_csv(io.StringIO(made["head_ablation.csv"]()))
    assert set(board["removed_alone_with"]) == {"mean"}
    opened("views/heads.py", {"model": "smollm2-135m", "tokens": "The capital of France is", "ablate": "L3H2"})
    lens = pd.read_csv(io.StringIO(made["logit_lens.csv"]()))
    assert set(lens["heads_removed"]) == {"L3H2"} and set(lens["removed_with"]) == {"zero"}


def test_the_token_shares_csv_names_its_token_and_what_each_share_measures(made):
    """Was: columns "weights" and "norms", and no word of which token the shares are of."""
    at = opened("views/activations.py", {"tokens": "the cat sat on the mat", "act_open_tokens": "true"})
    assert not at.exception
    shares = pd.read_csv(io.StringIO(made["activations_encoder_token_shares.csv"]()), keep_default_na=False)
    measures = ["share_of_attention_weight", "share_of_what_heads_add"]
    assert list(shares.columns) == ["layer", "position", "token", *measures]
    position = int(shares["position"].iloc[0])
    assert set(shares["token"]) == {"the cat sat on the mat".split()[position]}
