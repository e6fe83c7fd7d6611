"""Compare figures and downloads: one colour scale for A and B, A - B centred on 0, every cell with hover, the
ranking's click, lines on the same axes, and exports that hold the engine's numbers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import explorer
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals
from explorer.compare import (
    PER_LAYER,
    MapPair,
    attention_difference,
    default_b,
    head_ranking,
    layer_values,
    model_for_b,
    paired_attention,
    per_layer_comparison,
)
from explorer.compare_export import comparison_dict, comparison_json, layers_csv, maps_csv, maps_frame, read_maps_csv
from explorer.trace import AttentionMaps
from pictures.attention_panels import WEIGHTS
from pictures.boards import decode_floats
from pictures.compare_charts import (
    A_COLOUR,
    B_COLOUR,
    MIN_MAP_PX,
    PAIR_PANEL_PX,
    RANK,
    TICK_PX,
    difference_panel,
    difference_range,
    difference_scale,
    difference_verdict,
    map_px,
    pair_panels,
    ranking_panel,
)
from pictures.compare_lines_chart import STATISTIC_TITLES, layer_lines
from pictures.log_axes import panel_scales, scales_note
from pictures.style import HOVER_NUMBERS, MASKED_COLOUR
from tests.drawn import figure_json, figure_title, panel_matrix, rgb

TOKENS = "the cat sat on the mat"
GREY = rgb(MASKED_COLOUR)


def traces(a: explorer.ModelConfig, b: explorer.ModelConfig, tokens: str = TOKENS, target: str | None = None):
    model_a = explorer.build_model(a)
    model_b = model_for_b(model_a, b)
    return model_a, model_b, explorer.run(model_a, tokens, target), explorer.run(model_b, tokens, target)


@pytest.fixture(scope="module")
def post_pre():
    a = explorer.ModelConfig(n_layers=3, mask="causal")
    return (a, default_b(a), *traces(a, default_b(a)))


def self_attention(post_pre):
    *_, trace_a, trace_b = post_pre
    return trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]


def hover_rows(panel: dict) -> list[str]:
    """The names of the rows a cell's tooltip shows, in order (see views/matrix_view.js, hoverLines)."""
    return [panel["y_title"], panel["x_title"], panel["value_title"], *(e["title"] for e in panel["extra"])]


def extra(panel: dict, title: str) -> np.ndarray:
    """The values of one extra hover row, [rows, cols]."""
    (found,) = [e for e in panel["extra"] if e["title"] == title]
    return decode_floats(found["values"], (panel["rows"], panel["cols"]))


def legend(panel: dict) -> tuple[list[str], float, float, str]:
    return panel["legend"]["colours"], panel["legend"]["low"], panel["legend"]["high"], panel["value_title"]


def test_pair_panels_share_one_colour_scale(post_pre):
    maps_a, maps_b = self_attention(post_pre)
    (panel_a, panel_b), left_out = pair_panels(maps_a, maps_b, 2, 1)
    assert left_out == []
    assert [p["title"] for p in (panel_a, panel_b)] == ["A · layer 2 · head 1", "B · layer 2 · head 1"]
    assert panel_a["legend"] is None and legend(panel_b) == (list(WEIGHTS.colours), 0.0, 1.0, "weight")  # one scale
    assert panel_a["cell_px"] == panel_b["cell_px"]  # maps of one size ...
    (alone,), _ = pair_panels(maps_a, None, 2, 1)
    assert alone["legend"] is not None and alone["cell_px"] < panel_a["cell_px"]  # ... bigger for sharing a legend
    drawn_a, drawn_b = panel_matrix(panel_a), panel_matrix(panel_b)
    causal = np.tril(np.ones((6, 6), dtype=bool))
    for drawn, maps in ((drawn_a, maps_a), (drawn_b, maps_b)):
        np.testing.assert_array_equal(drawn.values[causal], maps.weights[2, 1][causal])
        np.testing.assert_array_equal(drawn.masked, ~maps.allowed)  # grey where masked
        np.testing.assert_array_equal(drawn.image, WEIGHTS.rgb(np.where(causal, maps.weights[2, 1], np.nan)))
        assert drawn.y_labels == drawn.x_labels == ["the", "cat", "sat", "on", "the·4", "mat"]
    assert drawn_a.masked.sum() == 15  # causal: the upper triangle of 6 x 6
    assert (drawn_a.image[~causal] == GREY).all()
    assert hover_rows(panel_a) == ["query", "key", "weight"]
    assert panel_a["masked_text"] == "masked: weight 0"


def test_pair_panels_grey_out_masked_cells():
    a = explorer.ModelConfig(mask="causal")
    _, _, trace_a, trace_b = traces(a, default_b(a))
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    panels, _ = pair_panels(maps_a, maps_b, 0, 0)
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    for panel in panels:
        drawn = panel_matrix(panel)
        np.testing.assert_array_equal(drawn.masked, upper)
        assert np.isnan(drawn.values[upper]).all() and (drawn.image[upper] == GREY).all()


def test_pair_panels_say_what_a_side_lacks(post_pre):
    maps_a, _ = self_attention(post_pre)
    panels, left_out = pair_panels(maps_a, None, 0, 0, missing=(None, "B has no cross-attention"))
    assert [p["title"] for p in panels] == ["A · layer 0 · head 0"]
    assert left_out == ["B: B has no cross-attention"]
    panels, left_out = pair_panels(maps_a, maps_a, 0, 6, missing=("A has no head 6 (it has 4)", None))
    assert left_out == ["A: A has no head 6 (it has 4)", "B: no such attention"]  # B's maps lack head 6 too
    assert panels == []


def test_difference_panel_is_centred_on_zero_with_its_own_legend(post_pre):
    maps_a, maps_b = self_attention(post_pre)
    difference = attention_difference(maps_a, maps_b)[1, 2]
    panel = difference_panel(maps_a, maps_b, difference, 1, 2)
    colours, low, high, title = legend(panel)
    half = np.abs(difference).max()
    assert (low, high) == pytest.approx((-half, half))  # symmetric, white at 0
    assert colours == [B_COLOUR, "#ffffff", A_COLOUR] and title == "A − B"
    drawn = panel_matrix(panel)
    allowed = maps_a.allowed | maps_b.allowed
    np.testing.assert_array_equal(drawn.values[allowed], difference[allowed])
    np.testing.assert_array_equal(extra(panel, "A"), maps_a.weights[1, 2])  # hover gives both weights
    np.testing.assert_array_equal(extra(panel, "B"), maps_b.weights[1, 2])
    assert hover_rows(panel) == ["query", "key", "A − B", "A", "B"]
    assert panel["title"] == "A − B · layer 1 · head 2"
    assert panel["subtitle"] == f"largest |A − B| = {half:.4f} · blue: A attends more · red: B attends more"


def test_a_difference_with_a_few_large_cells_is_pale_until_stretched(post_pre):
    rng = np.random.default_rng(0)
    shown = rng.uniform(-0.01, 0.01, (200, 200))  # [Tq, Tk]: most of A − B small ...
    shown[0, :5] = 0.9  # ... and a few cells far larger, as a 512-piece map's [CLS] column
    shown[1, 0] = np.nan  # masked in both: not a difference
    robust = float(np.quantile(np.abs(shown[np.isfinite(shown)]), 0.99))
    half, note = difference_scale(shown, stretch=False)
    assert half == pytest.approx(0.9) and "turn on Stretch colours" in note
    half, note = difference_scale(shown, stretch=True)
    assert half == pytest.approx(robust) and robust < 0.011 and "colours stretched: darkest = ±" in note
    assert difference_scale(np.full((3, 3), 2e-7), stretch=True) == (pytest.approx(2e-7), None)  # rounding: no note
    maps_a, maps_b = self_attention(post_pre)
    difference = attention_difference(maps_a, maps_b)[1, 2]
    stretched = difference_panel(maps_a, maps_b, difference, 1, 2, stretch=True)
    top = float(np.quantile(np.abs(difference[maps_a.allowed | maps_b.allowed]), 0.99))
    assert (stretched["legend"]["low"], stretched["legend"]["high"]) == pytest.approx((-top, top))
    assert "colours stretched" in stretched["subtitle"]
    np.testing.assert_array_equal(
        panel_matrix(stretched).values, panel_matrix(difference_panel(maps_a, maps_b, difference, 1, 2)).values
    )


def test_difference_of_identical_maps_is_exactly_zero():
    _, _, trace_a, trace_b = traces(explorer.ModelConfig(), explorer.ModelConfig())
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    panel = difference_panel(maps_a, maps_b, attention_difference(maps_a, maps_b)[0, 0], 0, 0)
    assert (panel_matrix(panel).values == 0).all()
    assert panel["subtitle"].startswith("identical: every difference is exactly 0 · ")
    assert (panel["legend"]["low"], panel["legend"]["high"]) == (-1.0, 1.0)  # a readable legend, though nothing differs


def test_difference_verdict_tells_rounding_from_a_change():
    assert difference_verdict(0.0) == "identical: every difference is exactly 0"
    assert difference_verdict(3e-7) == "largest |A − B| = 3 × 10⁻⁷: float32 rounding, A and B agree"
    assert difference_verdict(0.25) == "largest |A − B| = 0.2500"


def test_masked_in_one_only_is_drawn_and_masked_in_both_is_grey():
    a = explorer.ModelConfig()
    _, _, trace_a, trace_b = traces(a, a.replace(mask="causal"))
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    drawn = panel_matrix(difference_panel(maps_a, maps_b, attention_difference(maps_a, maps_b)[0, 0], 0, 0))
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    np.testing.assert_array_equal(drawn.values[upper], maps_a.weights[0, 0][upper])  # B may not look there: A - 0
    assert not drawn.masked.any()  # no cell masked in both
    _, _, trace_a, trace_b = traces(a.replace(mask="causal"), a.replace(mask="causal", norm="pre"))
    maps_a, maps_b = trace_a.attention_maps()["self-attention"], trace_b.attention_maps()["self-attention"]
    panel = difference_panel(maps_a, maps_b, attention_difference(maps_a, maps_b)[0, 0], 0, 0)
    drawn = panel_matrix(panel)
    np.testing.assert_array_equal(drawn.masked, upper)
    assert (drawn.image[upper] == GREY).all()
    assert panel["masked_text"] == "masked in A and B"


@pytest.mark.parametrize("n", [40, 130])
def test_long_maps_hover_every_cell_and_keep_their_colours(make_maps, n):
    tokens = [f"t{i}" for i in range(n)]  # 1600 and 16 900 cells: hover for each, whatever the size
    causal = np.tril(np.ones((n, n), dtype=bool))
    maps_a, maps_b = make_maps(2, 2, tokens, causal, seed=0), make_maps(2, 2, tokens, causal, seed=1)
    panels, _ = pair_panels(maps_a, maps_b, 1, 0)
    for panel, maps in zip(panels, (maps_a, maps_b), strict=True):
        drawn = panel_matrix(panel)
        np.testing.assert_array_equal(drawn.values[causal], maps.weights[1, 0][causal])
        np.testing.assert_array_equal(drawn.image, WEIGHTS.rgb(np.where(causal, maps.weights[1, 0], np.nan)))
        assert panel["text_digits"] is None  # no numbers in cells this small
    difference = attention_difference(maps_a, maps_b)[1, 0]
    panel = difference_panel(maps_a, maps_b, difference, 1, 0)
    drawn = panel_matrix(panel)
    np.testing.assert_array_equal(drawn.values[causal], difference[causal])
    np.testing.assert_array_equal(extra(panel, "A"), maps_a.weights[1, 0])
    np.testing.assert_array_equal(extra(panel, "B"), maps_b.weights[1, 0])


def test_labels_are_spaced_so_they_never_overlap(make_maps):
    queries, keys = "le chat est assis sur le tapis".split(), "the cat sat on the mat".split()
    maps_a = make_maps(1, 1, queries, key_tokens=keys, seed=0)
    maps_b = make_maps(1, 1, queries, key_tokens=keys, seed=1)
    small = [*pair_panels(maps_a, maps_b, 0, 0)[0], difference_panel(maps_a, maps_b, np.zeros((7, 6)), 0, 0)]
    for panel in small:  # every token labelled on a small map
        assert panel["x_ticks"] == list(range(6)) and panel["y_ticks"] == list(range(7))
        assert panel["x_labels"] == ["the", "cat", "sat", "on", "the·4", "mat"]
    tokens = [f"t{i}" for i in range(64)]
    maps = make_maps(1, 1, tokens)
    (panel,), _ = pair_panels(maps, None, 0, 0)
    for ticks in (panel["x_ticks"], panel["y_ticks"]):
        assert ticks[0] == 0 and len(ticks) < 64
        assert min(np.diff(ticks)) * panel["cell_px"] >= TICK_PX  # labels at least TICK_PX apart


def test_maps_shrink_for_long_labels_to_fit_their_column():
    short = map_px(180, PAIR_PANEL_PX, [["the", "cat"]], "weight")
    long = map_px(180, PAIR_PANEL_PX, [["zebras", "cat"]], "weight")
    assert MIN_MAP_PX < long < short <= 180
    assert map_px(180, PAIR_PANEL_PX, [["x" * 80]], "weight") == MIN_MAP_PX  # never smaller: the panel scrolls


def test_difference_range():
    assert difference_range(np.array([[0.0, -0.3], [np.nan, 0.1]])) == pytest.approx(0.3)
    assert difference_range(np.zeros((2, 2))) == 1.0


def test_ranking_panel_places_each_head_and_names_the_shown_one(post_pre):
    ranking = head_ranking(*self_attention(post_pre))
    panel = ranking_panel(ranking, 1, 3)
    drawn = panel_matrix(panel)
    largest, rank = extra(panel, "max |A − B|"), extra(panel, RANK)
    for row in ranking.itertuples():
        assert drawn.values[row.layer, row.head] == pytest.approx(row.js_divergence, rel=1e-6)
        assert largest[row.layer, row.head] == pytest.approx(row.max_abs_difference, rel=1e-6)
    by_divergence = np.argsort(-drawn.values, axis=None, kind="stable")  # cell indices, most changed first
    np.testing.assert_array_equal(rank.ravel()[by_divergence], np.arange(1, rank.size + 1))
    assert [e["digits"] for e in panel["extra"]] == [4, 0]  # the rank hovers as a whole number
    assert drawn.y_labels == ["L0", "L1", "L2"] and drawn.x_labels == ["H0", "H1", "H2", "H3"]
    assert panel["title"] == "How much each head changed (JS divergence, bits)"
    assert panel["subtitle"] == "shown above: layer 1, head 3 · click a head to show it above"
    assert hover_rows(panel) == ["layer", "head", "JS divergence (bits)", "max |A − B|", RANK]
    assert panel["frame"] == [1, 3, 1, 1]  # the shown head is framed
    assert ranking_panel(ranking, 5, 0)["subtitle"] == "click a head to show it above"  # no such layer
    assert ranking_panel(ranking, 5, 0)["frame"] is None


@pytest.mark.parametrize(("largest", "digits"), [(0.2, 3), (0.0017, 4), (0.00004, 6)])
def test_the_ranking_writes_its_largest_change_with_two_digits_at_least(largest, digits):
    """Three decimals whatever the changes: at 0.0017 nearly every cell read "0.001", and a head that did change
    "0.000"."""
    ranking = pd.DataFrame(
        {"layer": [0, 0], "head": [0, 1], "js_divergence": [largest, largest / 5], "max_abs_difference": [0.1, 0.01]}
    )
    panel = ranking_panel(ranking)
    assert panel["text_digits"] == digits
    assert f"{largest / 5:.{digits}f}".strip("0.") != ""  # the smaller change does not read as none


def test_ranking_cells_are_wide_enough_for_the_digits_they_write():
    """B = A without L0H1 on a configured 2 x 4 model changes heads by at most 0.000789 bit: the cells wrote "0.00079"
    (five decimals, about 54 px at the matrix view's 14 px) in 44 px cells, over their neighbours ("0.00011 0.00079"
    ran together at 1024 px)."""
    values = [0.0, 0.0, 0.0, 0.0, 0.00011, 0.000789, 0.00031, 0.00042]
    ranking = pd.DataFrame({"layer": [0] * 4 + [1] * 4, "head": [0, 1, 2, 3] * 2, "js_divergence": values})
    ranking = ranking.assign(max_abs_difference=0.01).sort_values("js_divergence", ascending=False, ignore_index=True)
    panel = ranking_panel(ranking, 0, 0)
    assert panel["text_digits"] == 5
    assert panel["cell_px"] >= 7.1 * 6 + 3.5  # six digits and a point
    three = ranking_panel(ranking.assign(js_divergence=ranking["js_divergence"] * 1000))  # 0.789: "0.789" fits in 44
    assert three["text_digits"] == 3 and three["cell_px"] == 44


def test_ranking_panel_click_picks_the_changed_head():
    uniform = np.full((2, 3, 4, 4), 0.25, dtype=np.float32)  # [L, H, Tq, Tk]
    changed = uniform.copy()
    changed[1, 2] = np.eye(4, dtype=np.float32)  # only layer 1, head 2 differs: it looks at itself
    allowed = np.ones((4, 4), dtype=bool)
    tokens = list("abcd")
    maps_a = AttentionMaps("self-attention", uniform, uniform, allowed, tokens, tokens)
    maps_b = AttentionMaps("self-attention", changed, changed, allowed, tokens, tokens)
    panel = ranking_panel(head_ranking(maps_a, maps_b), 0, 0)
    assert panel["pick"] == "cell"  # a click sends back {"row": layer, "col": head}
    drawn = panel_matrix(panel)
    row, col = np.unravel_index(np.argmax(drawn.values), drawn.values.shape)
    assert (drawn.y_labels[row], drawn.x_labels[col]) == ("L1", "H2")  # drawn in row L1, column H2
    others = np.ones((2, 3), dtype=bool)  # [L, H]
    others[1, 2] = False
    assert drawn.values[others].max() == 0  # every other head: 0


def layer_panels(figure: dict) -> dict[str, dict]:
    """The panels of a figure of subplots as drawn, by the title written over each, in the order of their axes:
    {"x": its x axis, "y": its y axis, "traces": the traces drawn on it, "shapes": the shapes on it, "notes": the
    other texts written in it}."""
    layout = figure["layout"]
    found = {}
    for key in sorted((k for k in layout if k.startswith("xaxis")), key=lambda k: int(k[5:] or 1)):
        n = key[5:]
        x, y = layout[key], layout[f"yaxis{n}"]
        (title_note,) = [
            a for a in layout["annotations"]
            if a.get("xref") == "paper" and a["x"] == pytest.approx(sum(x["domain"]) / 2)
            and a["y"] == pytest.approx(y["domain"][1])
        ]  # fmt: skip
        found[title_note["text"]] = {
            "x": x,
            "y": y,
            "traces": [t for t in figure["data"] if (t.get("xaxis"), t.get("yaxis")) == (f"x{n}", f"y{n}")],
            "shapes": [s for s in layout.get("shapes", []) if s["xref"] == f"x{n}"],
            "notes": [a["text"] for a in layout["annotations"] if a is not title_note and inside(a, x, y)],
        }
    return found


def inside(note: dict, x: dict, y: dict) -> bool:
    """Whether a note placed on the page (paper coordinates) lies inside the panel of axes x and y."""
    return (note.get("xref"), note.get("yref")) == ("paper", "paper") and (
        x["domain"][0] < note["x"] < x["domain"][1] and y["domain"][0] < note["y"] < y["domain"][1]
    )


def line_of(panel: dict, name: str) -> dict:
    """The one line of a panel named `name` (its legend entry)."""
    (found,) = [t for t in panel["traces"] if t["name"] == name]
    return found


def test_layer_lines_put_a_and_b_on_the_same_axes(post_pre):
    a, b, model_a, model_b, trace_a, trace_b = post_pre
    values = [
        layer_values(trace.first, layer_gradient_totals(gradient_norms(model, TOKENS)))
        for model, trace in ((model_a, trace_a), (model_b, trace_b))
    ]
    table = per_layer_comparison(*values)
    figure = figure_json(layer_lines(table))
    panels = layer_panels(figure)
    assert list(panels) == [STATISTIC_TITLES[s] for s in PER_LAYER]
    assert list(panels)[:1] == ["Residual stream RMS"]
    assert "Per-layer statistics of A and B" in figure_title(figure)
    assert len({t["yaxis"] for t in figure["data"]}) == 4  # each statistic its own y scale ...
    assert not any("matches" in v for k, v in figure["layout"].items() if k.startswith(("xaxis", "yaxis")))
    for statistic, panel in zip(PER_LAYER, panels.values(), strict=True):
        rows = table[table["statistic"] == statistic].sort_values("layer")
        assert [t["name"] for t in panel["traces"]] == ["A", "B"]  # ... A and B on the same axes
        for column, name, colour, dash, symbol in (("a", "A", A_COLOUR, "solid", "circle"),
                                                   ("b", "B", B_COLOUR, "dash", "diamond")):  # fmt: skip
            line = line_of(panel, name)
            np.testing.assert_array_equal(line["y"], rows[column].to_numpy())
            np.testing.assert_array_equal(line["x"], rows["layer"].to_numpy())
            assert (line["line"]["color"], line["line"]["dash"], line["marker"]["symbol"]) == (colour, dash, symbol)
            assert f"{statistic} %{{y:{HOVER_NUMBERS}}}" in line["hovertemplate"]  # hover gives the value
            assert line["hovertemplate"].startswith(f"{name}<br>%{{customdata}}")  # ... the model and the layer
        assert panel["y"]["rangemode"] == "tozero" and not panel["shapes"]  # same depth: nothing shaded
        assert panel["y"]["title"]["text"]  # every linear panel names its unit ("nats", "RMS", ...)
    assert panels["Attention entropy (nats, mean of heads)"]["y"]["title"]["text"] == "nats"
    residual = panels["Residual stream RMS"]
    assert residual["x"]["title"]["text"] == "after block"
    assert residual["x"]["tickvals"][0] == -1 and residual["x"]["ticktext"][0] == "input"  # layer -1 is the input
    assert line_of(residual, "A")["customdata"][:2] == ["input", "after block 0"]
    gradient = panels["Gradient norm of each block"]
    assert gradient["x"]["title"]["text"] == "block" and line_of(gradient, "B")["customdata"][0] == "block 0"
    assert [t["showlegend"] for t in figure["data"]].count(True) == 2  # one legend entry each for A and B


def test_layer_lines_shade_the_layers_one_model_lacks():
    values_a = layer_values(explorer.run(explorer.ModelConfig(n_layers=2), TOKENS).first)
    values_b = layer_values(explorer.run(explorer.ModelConfig(n_layers=4), TOKENS).first)
    figure = figure_json(layer_lines(per_layer_comparison(values_a, values_b)))
    panels = layer_panels(figure)
    shaded = [[(s["type"], s["x0"], s["x1"]) for s in panel["shapes"]] for panel in panels.values()]
    assert shaded == [[("rect", 1.5, 3.5)]] * 2 + [[]] + [[("rect", 1.5, 3.5)]]  # one per panel with data
    assert "shaded: blocks only one model has" in figure_title(figure)
    gradient = panels["Gradient norm of each block"]  # no gradient norms here: the panel says so
    assert gradient["notes"] == ["not available"] and not gradient["traces"]
    assert gradient["x"]["visible"] is False and gradient["y"]["visible"] is False
    np.testing.assert_array_equal(line_of(panels["Residual stream RMS"], "B")["x"], [-1, 0, 1, 2, 3])


def test_layer_lines_shade_no_block_both_models_have():
    """B = A with a head removed has no gradient norms (they are taken with every head), yet both models have both
    blocks: the gradient panel had shaded blocks 0 to 1 and the subtitle said "shaded: blocks only one model has"."""
    model = explorer.build_model(explorer.ModelConfig())
    values_a = layer_values(explorer.run(model, TOKENS).first, layer_gradient_totals(gradient_norms(model, TOKENS)))
    values_b = layer_values(explorer.run(model, TOKENS, ablate=((0, 1),)).first)  # no gradient norms
    figure = figure_json(layer_lines(per_layer_comparison(values_a, values_b)))
    panels = layer_panels(figure)
    assert [panel["shapes"] for panel in panels.values()] == [[]] * 4
    assert "shaded" not in figure_title(figure)
    assert [t["name"] for t in panels["Gradient norm of each block"]["traces"]] == ["A"]


def test_layer_lines_without_b_name_only_a_in_the_legend():
    values_a = layer_values(explorer.run(explorer.ModelConfig(), TOKENS).first)
    figure = figure_json(layer_lines(per_layer_comparison(values_a, None)))
    assert {t["name"] for t in figure["data"]} == {"A"}
    assert [t["showlegend"] for t in figure["data"]].count(True) == 1
    assert not figure["layout"].get("shapes")
    assert figure_title(figure).startswith("Per-layer statistics of A ")


def test_json_export_holds_both_configs_and_the_engine_differences(post_pre):
    a, b, _, _, trace_a, trace_b = post_pre
    pairs = paired_attention(trace_a, trace_b)
    tables = {"encoder": per_layer_comparison(layer_values(trace_a.first), layer_values(trace_b.first))}
    inputs = {"a_tokens": trace_a.tokens, "b_tokens": trace_b.tokens}
    data = json.loads(comparison_json(a, b, inputs, "shared", pairs, tables, "objective"))
    assert explorer.ModelConfig(**data["a"]) == a and explorer.ModelConfig(**data["b"]) == b
    (pair,) = data["attention"]
    expected = attention_difference(pairs[0].a, pairs[0].b)
    difference = np.array(pair["difference"], dtype=np.float64)
    np.testing.assert_array_equal(difference.astype(np.float32), expected)
    assert pair["head_ranking"][0]["js_divergence"] == head_ranking(pairs[0].a, pairs[0].b)["js_divergence"][0]
    rows = data["per_layer"]["encoder"]
    assert {r["statistic"] for r in rows} == {"residual RMS", "residual std", "attention entropy"}
    assert comparison_dict(a, b, inputs, "shared", pairs, tables, "objective")["weights"] == "shared"


def test_json_export_with_shapes_that_cannot_be_subtracted():
    a = explorer.ModelConfig()
    _, _, trace_a, trace_b = traces(a, a.replace(n_heads=8))
    data = json.loads(
        comparison_json(a, a.replace(n_heads=8), {}, "not shared", paired_attention(trace_a, trace_b), {}, "")
    )
    (pair,) = data["attention"]
    assert pair["difference"] is None and "same heads and tokens" in pair["not_compared"]
    assert pair["b_shape"] == [2, 8, 6, 6]


def test_exports_hold_the_difference_of_the_layers_both_models_have():
    """B with 4 layers where A has 2: the page draws A − B for layers 0 and 1, and the downloads hold the same."""
    a, b = explorer.ModelConfig(), explorer.ModelConfig(n_layers=4, norm="pre")  # pre: the layers differ
    *_, trace_a, trace_b = traces(a, b)
    pairs = paired_attention(trace_a, trace_b)
    (pair,) = json.loads(comparison_json(a, b, {}, "shared", pairs, {}, ""))["attention"]
    expected = trace_a.attention - trace_b.attention[:2]  # [2, H, T, T]
    assert np.abs(expected).max() > 1e-3
    np.testing.assert_array_equal(np.array(pair["difference"], dtype=np.float32), expected)
    assert pair["head_ranking"] is None and "covers layers 0 to 1" in pair["not_compared"]
    frame = read_maps_csv(maps_csv(pairs))
    assert sorted(frame["layer"].unique()) == [0, 1] and len(frame) == 2 * 4 * 6 * 6
    np.testing.assert_array_equal(frame["a_minus_b"].to_numpy().reshape(expected.shape), expected)


def test_maps_csv_keeps_tokens_pandas_would_read_as_missing():
    tokens = ["NA", "null", "nan", "None"]
    *_, trace_a, trace_b = traces(explorer.ModelConfig(n_layers=1), explorer.ModelConfig(n_layers=1), tokens)
    frame = read_maps_csv(maps_csv(paired_attention(trace_a, trace_b)))
    assert frame["query_token"].tolist()[:16:4] == tokens  # rows: query by query, each over every key
    assert frame["key_token"].tolist()[:4] == tokens


def test_two_inputs_name_each_sides_tokens_in_the_maps_csv_and_the_difference_map():
    model = explorer.build_model(explorer.ModelConfig(n_layers=1))
    trace_a, trace_b = explorer.run(model, "the cat sat"), explorer.run(model, "a cat ran")
    (pair,) = paired_attention(trace_a, trace_b)
    frame = read_maps_csv(maps_csv([pair]))
    cell = frame[(frame["head"] == 2) & (frame["query_index"] == 0) & (frame["key_index"] == 2)]
    assert (cell["query_token"].item(), cell["key_token"].item()) == ("the", "sat")
    assert (cell["b_query_token"].item(), cell["b_key_token"].item()) == ("a", "ran")  # whose weight "b" is
    assert cell["b"].item() == trace_b.attention[0, 2, 0, 2]
    panel = difference_panel(pair.a, pair.b, attention_difference(pair.a, pair.b)[0, 2], 0, 2)
    assert panel["x_labels"] == panel["y_labels"] == ["the / a", "cat", "sat / ran"]


def test_csv_exports_read_back(post_pre):
    *_, trace_a, trace_b = post_pre
    pairs = paired_attention(trace_a, trace_b)
    frame = read_maps_csv(maps_csv(pairs))
    assert len(frame) == 3 * 4 * 6 * 6
    cell = frame[(frame["layer"] == 2) & (frame["head"] == 1) & (frame["query_index"] == 4) & (frame["key_index"] == 1)]
    assert cell["query_token"].item() == "the" and cell["key_token"].item() == "cat"
    assert cell["a"].item() == pairs[0].a.weights[2, 1, 4, 1]
    assert cell["b"].item() == pairs[0].b.weights[2, 1, 4, 1]
    assert cell["a_minus_b"].item() == attention_difference(pairs[0].a, pairs[0].b)[2, 1, 4, 1]
    assert not frame.loc[frame["key_index"] > frame["query_index"], "allowed_a"].any()  # causal
    lines = layers_csv({"encoder": per_layer_comparison(layer_values(trace_a.first), None)}).splitlines()
    assert lines[0] == "stack,statistic,layer,a,b,a_minus_b"
    assert maps_frame(MapPair("x", 0, pairs[0].a, None)).empty


def lines_table(values: dict[str, tuple[list[float], list[float]]]) -> pd.DataFrame:
    """A per_layer_comparison table with A's and B's values of each statistic given (the others NaN)."""
    rows = [
        {"statistic": s, "layer": i, "a": a, "b": b}
        for s, (values_a, values_b) in values.items()
        for i, (a, b) in enumerate(zip(values_a, values_b, strict=True))
    ]
    return pd.DataFrame(rows).assign(a_minus_b=lambda t: t["a"] - t["b"])


def y_types(figure: dict) -> list[str]:
    """Each panel's y axis type, in PER_LAYER order ("linear" when Plotly's default)."""
    return [figure["layout"][f"yaxis{i if i > 1 else ''}"].get("type", "linear") for i in range(1, 5)]


# SmolLM2 run post-norm (measured on "The cat sat on the mat because it was tired"): its gradient norms reach 11,000
# where A's stay 3 to 19; A's residual RMS reaches 300 where B's stays 0.1 to 0.4.
ORDERS_APART = {
    "residual RMS": ([0.1, 12.0, 299.0], [0.09, 0.2, 0.36]),
    "gradient norm": ([19.4, 2.9, 8.0], [2900.0, 11292.0, 47.0]),
    "attention entropy": ([1.2, 0.3, 0.7], [1.1, 1.5, 1.5]),
}


def test_auto_axes_go_log_only_where_a_and_b_span_more_than_a_hundredfold():
    table = lines_table(ORDERS_APART)
    scales = panel_scales(table)
    assert [scales[s].log for s in PER_LAYER] == [True, False, True, False]  # residual std: no values here
    assert scales["gradient norm"].span == pytest.approx(11292.0 / 2.9)
    figure = figure_json(layer_lines(table))
    assert y_types(figure) == ["log", "linear", "log", "linear"]
    assert figure["layout"]["yaxis"]["title"]["text"] == "log scale" and "rangemode" not in figure["layout"]["yaxis"]
    assert figure["layout"]["yaxis4"]["rangemode"] == "tozero"
    # powers of ten, not "1000000", which ran into the panel's title at 1024 px
    assert figure["layout"]["yaxis"]["exponentformat"] == "power" and not figure["layout"]["yaxis"]["tickformat"]
    assert "from 0 or logarithmic (marked log scale)" in figure_title(figure)
    note = scales_note(scales, "auto", STATISTIC_TITLES)
    assert note.startswith("Log scale on Residual stream RMS (×3,320) and Gradient norm of each block (×3,890): ")
    # Values within a hundredfold (the same models' entropies, or a configured post/pre pair) stay linear, unsaid
    close = lines_table({"attention entropy": ORDERS_APART["attention entropy"], "residual RMS": ([1, 3], [1, 99])})
    assert not any(s.log for s in panel_scales(close).values())
    assert scales_note(panel_scales(close), "auto", STATISTIC_TITLES) is None
    assert y_types(figure_json(layer_lines(close))) == ["linear"] * 4


def test_log_panels_leave_room_between_the_columns_and_label_whole_decades():
    """At 1024 px the right panel's "log scale" title was drawn on the left panel's last markers (56 px between the
    columns), and a log panel spanning three decades labelled 2 and 5 between them: "5 2 10³ 5 2 10² 5 2 10 5" in 150
    px."""
    figure = figure_json(layer_lines(lines_table(ORDERS_APART)))
    layout = figure["layout"]
    assert layout["xaxis2"]["domain"][0] - layout["xaxis"]["domain"][1] >= 0.15 - 1e-9
    assert [layout[f"yaxis{i}"].get("dtick") for i in ("", "3")] == [1, 1]  # whole decades
    linear = figure_json(layer_lines(lines_table({"attention entropy": ORDERS_APART["attention entropy"]})))
    assert linear["layout"]["xaxis2"]["domain"][0] - linear["layout"]["xaxis"]["domain"][1] == pytest.approx(0.1)
    picked = figure_json(layer_lines(lines_table({"residual RMS": ([1.0, 3.0], [1.5, 2.0])}), axes="log"))
    assert picked["layout"]["yaxis"]["type"] == "log" and "dtick" not in picked["layout"]["yaxis"]  # within a decade


def test_a_panel_with_values_of_zero_or_below_stays_linear_and_says_why():
    table = lines_table({"gradient norm": ([0.0, 5.0, 8.0], [900.0, 2000.0, 4.0])})  # a block with no gradient
    scale = panel_scales(table)["gradient norm"]
    assert not scale.log and scale.non_positive and scale.wide  # its positive values span ×500, but 0 has no log
    assert scales_note(panel_scales(table), "auto", STATISTIC_TITLES) == (
        "Gradient norm of each block stays linear: it has values of 0 or below, which a log axis cannot show."
    )
    assert y_types(figure_json(layer_lines(table, axes="log"))) == ["linear"] * 4


def test_linear_and_log_axes_as_picked():
    table = lines_table(ORDERS_APART)
    assert y_types(figure_json(layer_lines(table, axes="linear"))) == ["linear"] * 4
    assert scales_note(panel_scales(table, "linear"), "linear", STATISTIC_TITLES).startswith(
        "On these linear axes the smaller values of Residual stream RMS (×3,320) and Gradient norm of each block"
    )
    assert y_types(figure_json(layer_lines(table, axes="log"))) == ["log", "linear", "log", "log"]  # std: no values
    assert scales_note(panel_scales(table, "log"), "log", STATISTIC_TITLES).startswith("Log scale, as picked, on ")


def test_an_all_padding_entropy_panel_says_why_it_is_empty_not_the_gradients_reason():
    """Every panel without values said the gradient panel's `missing`: on "[PAD] [PAD]" with gradients off, the
    entropy panel read "not computed yet: turn on Gradient norms above", which no toggle could change."""
    cfg = explorer.ModelConfig(mask="padding")
    trace = explorer.run(cfg, "[PAD] [PAD]")
    table = per_layer_comparison(layer_values(trace.first), layer_values(explorer.run(cfg, "[PAD] [PAD]").first))
    gradients_off = "not computed yet:<br>turn on Gradient norms above"
    notes = [a["text"] for a in figure_json(layer_lines(table, missing=gradients_off))["layout"]["annotations"]]
    assert gradients_off in notes  # the gradient panel's own reason
    assert "no query has a key<br>it may attend to" in notes
    assert notes.count(gradients_off) == 1
