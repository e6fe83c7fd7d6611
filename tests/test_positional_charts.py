"""Charts of the positional page: they draw the engine's numbers, labelled, and stay light."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import explorer
from explorer.position_analysis import (
    encoding_table,
    offset_scores,
    permutation_demo,
    rope_angle_table,
    similarity,
    similarity_to,
    wavelengths,
)
from explorer.positional import sinusoidal
from pictures.attention_panels import WEIGHTS
from pictures.boards import decode_floats
from pictures.positional_charts import (
    CURVE_POINTS,
    HEATMAP_PX,
    MAX_SIDE,
    TWILIGHT,
    TYPED_COLOUR,
    encoding_curves,
    encoding_heatmap,
    every_nth,
    extremes,
    offset_profile_figure,
    offset_scores_panel,
    offset_verdict,
    ordinal,
    pair_name,
    permutation_figure,
    permutation_verdict,
    rope_angle_heatmap,
    similarity_heatmap,
    similarity_profile,
    wavelength_figure,
)
from pictures.style import heading, wrap
from tests.drawn import panel_matrix, title_text, views

TOKENS = "the cat sat on the mat".split()


def all_layers(spec: dict) -> list[dict]:
    """Every layer of every view of a chart (a view without layers counts as one)."""
    found = []
    for view in views(spec):
        found += view.get("layer") or [view]
    return found


def marks(spec: dict, kind: str) -> list[dict]:
    return [layer for layer in all_layers(spec) if layer.get("mark", {}).get("type") == kind]


def axis_title(layer: dict, channel: str) -> str | None:
    return layer["encoding"][channel]["axis"]["title"]


def tooltip_titles(layer: dict) -> list[str]:
    return [row.get("title", row["field"]) for row in layer["encoding"]["tooltip"]]


def light(spec: dict, most: int = 2 * CURVE_POINTS + 4096) -> None:
    """Marks stay few enough for the browser: rows over all tables drawn (each row is one mark or two)."""
    rows = sum(len(t) for t in spec.get("datasets", {}).values())
    assert rows <= most, rows
    json.dumps({k: v for k, v in spec.items() if k != "datasets"})  # the rest is plain JSON


def test_long_subtitles_wrap_to_the_chart_width_instead_of_being_cut():
    text = "pair i repeats every 2π·10000^(2i/d_model) positions: here from 6.3 (pair 0) up to 47,117 (pair 31)"
    lines = wrap(text + "\nsecond line", 300)
    assert len(lines) > 2 and lines[-1] == "second line" and " ".join(lines[:-1]) == text
    assert all(len(line) <= 300 / (0.5 * 14) for line in lines)
    assert heading("Title") == {"text": "Title", "subtitle": [], "anchor": "start"}


def test_every_nth_and_ordinals():
    assert every_nth(10).tolist() == list(range(10))
    thinned = every_nth(4096)
    assert len(thinned) == MAX_SIDE and thinned[1] == 8 and thinned[-1] == 4088
    assert len(every_nth(1000)) <= MAX_SIDE
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 112)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "101st",
        "112th",
    ]
    assert pair_name(7, "sinusoidal") == "dim 7 (cos of pair 3)" and pair_name(7, "learned") == "dim 7"


def test_extremes_keep_every_point_while_they_fit_and_each_stretchs_extremes_beyond():
    curve = np.sin(np.arange(4096))  # [P] far denser than a screen
    assert extremes(curve, 5000).tolist() == list(range(4096))
    kept = extremes(curve, 512)
    assert len(kept) <= 512 + 2 and kept[0] == 0 and kept[-1] == 4095 and (np.diff(kept) > 0).all()
    for start in range(0, 4096, 16):  # stretches of 16 positions: both extremes of each are drawn
        stretch = curve[start : start + 16]
        assert start + int(np.argmin(stretch)) in kept and start + int(np.argmax(stretch)) in kept


def test_encoding_curves_draw_the_table_and_mark_the_typed_positions():
    table = sinusoidal(64, 16).numpy()  # [P, D]
    spec = encoding_curves(table, [0, 1, 6], ["<b>", "cat"], "sinusoidal")
    curves = spec["datasets"]["pos_curves"]
    names = ["dim 0 (sin of pair 0)", "dim 1 (cos of pair 0)", "dim 6 (sin of pair 3)"]
    assert list(curves["dimension"].unique()) == names
    dim6 = curves[curves["dimension"] == names[2]]
    np.testing.assert_array_equal(dim6["position"], np.arange(64))
    np.testing.assert_array_equal(dim6["value"], table[:, 6])
    dim0 = curves[curves["dimension"] == names[0]]["value"]
    np.testing.assert_allclose(dim0, np.sin(np.arange(64)), atol=1e-6)  # pair 0: sin(p)
    typed = spec["datasets"]["pos_typed"]
    first = typed[typed["dimension"] == names[0]]
    assert first["position"].tolist() == [0, 1] and first["token"].tolist() == ["<b>", "cat"]  # raw: drawn as text
    np.testing.assert_array_equal(typed[typed["dimension"] == names[2]]["value"], table[:2, 6])
    (line,) = marks(spec, "line")
    colours = dict(zip(names, line["encoding"]["color"]["scale"]["range"], strict=True))
    dashes = dict(zip(names, line["encoding"]["strokeDash"]["scale"]["range"], strict=True))
    assert colours[names[0]] == colours[names[1]] != colours[names[2]]  # a pair shares a colour ...
    assert dashes[names[1]] != dashes[names[0]] == dashes[names[2]]  # ... its cosine dotted
    assert TYPED_COLOUR not in colours.values()  # red means the typed tokens
    assert (axis_title(line, "x"), axis_title(line, "y")) == ("position", "value added to that dimension")
    hover = [p for p in marks(spec, "point") if p.get("data", {}).get("name") == "pos_curves"]
    assert tooltip_titles(hover[0]) == ["dimension", "position", "value"]
    assert "typed tokens" in title_text(spec)
    light(spec)


def test_long_curves_stay_light_and_say_how_they_were_drawn():
    table = sinusoidal(4096, 64).numpy()
    spec = encoding_curves(table, list(range(16)), TOKENS, "sinusoidal")
    curves = spec["datasets"]["pos_curves"]
    assert len(curves) <= CURVE_POINTS + 2 * 16
    dim0 = curves[curves["dimension"] == "dim 0 (sin of pair 0)"]
    np.testing.assert_array_equal(dim0["value"], table[dim0["position"], 0])  # every point drawn is exact
    assert dim0["value"].min() < -0.999 and dim0["value"].max() > 0.999  # the band of a fast sine is whole
    assert "lowest and highest value of each stretch" in title_text(spec)
    light(spec)


def test_encoding_heatmap_is_the_table_and_thins_long_tables():
    model = explorer.build_model(explorer.ModelConfig(d_model=32, n_heads=2, positional="learned"))
    table = encoding_table(model, 40)  # [40, 32]
    (panel,) = encoding_heatmap(table, TOKENS, "learned")["panels"]
    drawn = panel_matrix(panel)
    np.testing.assert_array_equal(drawn.values, table)
    assert "untrained" in drawn.title.lower()
    assert (drawn.x_title, drawn.y_title) == ("dimension", "position")
    assert drawn.y_labels[:3] == ["0", "1", "2"] and drawn.x_labels[-1] == "31"
    assert panel["frame"] == [0, 0, 6, 32]  # the six typed positions, every dimension
    assert panel["cell_px"] * 32 == pytest.approx(HEATMAP_PX) and panel["cell_h"] * 40 == pytest.approx(400)
    (big,) = encoding_heatmap(sinusoidal(4096, 64).numpy(), TOKENS, "sinusoidal")["panels"]
    drawn = panel_matrix(big)
    assert drawn.values.shape == (512, 64) and "values" in big  # 32,768 cells, and every one hovers
    assert drawn.y_labels[:2] == ["0", "8"]
    assert "every 8th position drawn (512 of 4,096)" in drawn.title and "hover" not in drawn.title
    assert (big["legend"]["low"], big["legend"]["high"]) == (-1.0, 1.0)


def test_wavelengths_on_a_log_axis_with_the_max_position():
    spec = wavelength_figure(wavelengths(64), 64, 100)
    frame = spec["datasets"]["pos_wavelengths"]
    np.testing.assert_allclose(frame["wavelength"], 2 * math.pi * 10000 ** (np.arange(0, 64, 2) / 64))
    assert frame["dims"][3] == "6, 7"
    line, rule = marks(spec, "line")[0], marks(spec, "rule")[0]
    assert line["encoding"]["y"]["scale"]["type"] == "log"
    assert rule["data"]["values"] == [{"wavelength": 100, "series": "max position shown (100)"}]
    assert (axis_title(line, "x"), axis_title(line, "y")) == (
        "pair i (dimensions 2i and 2i+1)",
        "wavelength (positions, log scale)",
    )
    assert tooltip_titles(marks(spec, "point")[0]) == ["pair", "dimensions", "wavelength (positions)"]


@pytest.mark.parametrize("metric", ["cosine", "dot"])
def test_similarity_heatmap_and_profile(metric):
    table = sinusoidal(30, 16).numpy()
    positions = every_nth(30)
    sim = similarity(table[positions], metric)
    (panel,) = similarity_heatmap(sim, positions, metric, 6, "sinusoidal")["panels"]
    drawn = panel_matrix(panel)
    np.testing.assert_array_equal(drawn.values, sim.astype(np.float32))
    top = 1.0 if metric == "cosine" else np.abs(sim).max()
    legend = panel["legend"]
    assert legend["low"] == pytest.approx(-top, rel=1e-6) and legend["high"] == pytest.approx(top, rel=1e-6)
    assert (drawn.x_title, drawn.y_title) == ("position", "position")
    assert panel["hover_titles"] == ["row position", "column position"]  # both axes are "position"
    assert panel["frame"] == [0, 0, 6, 6]  # the typed tokens' positions
    row = similarity_to(table, 5, metric)
    np.testing.assert_allclose(row, sim[5], rtol=1e-12, atol=1e-12)
    profile = similarity_profile(row, 5, metric)
    np.testing.assert_array_equal(profile["datasets"]["pos_profile"]["value"], sim[5].astype(np.float32))
    assert marks(profile, "rule")[0]["data"]["values"] == [{"position": 5}]


def test_rope_angles_are_wrapped_to_degrees_with_radians_on_hover():
    angles = rope_angle_table(20, 8)  # [P, K/2]
    [panel] = rope_angle_heatmap(angles, 3)["panels"]
    drawn = panel_matrix(panel)
    np.testing.assert_allclose(drawn.values, np.degrees(np.mod(angles, 2 * np.pi)), rtol=1e-5)
    [radians] = panel["extra"]
    assert (radians["title"], radians["digits"]) == ("angle (rad)", 4)
    np.testing.assert_array_equal(decode_floats(radians["values"], (20, 4)), angles.astype(np.float32))
    assert drawn.values[7, 0] == pytest.approx(math.degrees(7 - 2 * math.pi), rel=1e-5)  # 7 rad, one turn off
    assert drawn.x_title.startswith("pair i") and panel["hover_titles"] == ["position", "pair"]
    assert panel["frame"] == [0, 0, 3, 4]  # the typed tokens' positions, every pair
    legend = panel["legend"]
    assert legend["colours"] == list(TWILIGHT) and TWILIGHT[0] == TWILIGHT[-1]  # cyclic: 0° and 360° look alike
    assert (legend["low"], legend["high"], legend["ticks"]) == (0.0, 360.0, [90.0, 180.0, 270.0])


def test_offset_scores_show_masked_keys_grey_and_say_what_they_found():
    rope = offset_scores(explorer.ModelConfig(positional="rope", arch="decoder"), "a", 10)
    [panel] = offset_scores_panel(rope)["panels"]
    drawn = panel_matrix(panel)
    assert drawn.masked[0, 1] and not drawn.masked[1, 0]  # causal: key 1 is masked for query 0
    finite = np.isfinite(rope.scores)
    np.testing.assert_array_equal(drawn.values[finite], rope.scores[finite])
    assert "depends on the offset only" in offset_verdict(rope, "rope")
    profile = offset_profile_figure(rope)
    frame = profile["datasets"]["pos_offsets"]
    np.testing.assert_array_equal(frame["offset"], np.arange(-9, 10))
    domains = [layer["encoding"]["x"]["scale"]["domain"] for layer in profile["layer"] if "x" in layer["encoding"]]
    assert domains and all(d == [0, 9] for d in domains)  # causal: the x axis spans the offsets that have scores
    np.testing.assert_allclose(frame["mean"], rope.by_offset.astype(np.float32))
    assert np.isnan(frame["mean"][0]) and np.isnan(frame["lowest"][0])  # offset -9: every key there is masked
    spread = (frame["highest"] - frame["lowest"]).dropna()  # rope: each diagonal constant, up to rounding
    assert len(spread) == 10 and spread.max() < 1e-4
    sinusoidal = offset_scores(explorer.ModelConfig(), "a", 10)
    assert "diagonals vary" in offset_verdict(sinusoidal, "sinusoidal")
    flat = offset_scores(explorer.ModelConfig(positional="none"), "a", 10)
    assert float(np.ptp(flat.scores)) < 1e-5  # no positions, one token everywhere: every score equal
    verdict = offset_verdict(flat, "none")  # not "depends on the offset", which would teach a position signal
    assert "depends on neither the positions nor the offset" in verdict and "offset only" not in verdict
    no_positions = offset_scores_panel(flat)
    legend = no_positions["panels"][0]["legend"]
    assert legend["high"] > legend["low"]  # all scores equal: still a colour scale that works


def test_permutation_maps_grey_the_masked_cells_as_the_attention_page_does():
    """A padding mask hides the [PAD] key in every run: its column is grey, not a weight of 0.00, in all three."""
    cfg = explorer.ModelConfig(positional="rope", mask="causal+padding")
    demo = permutation_demo(cfg, "where is the station [PAD]")
    drawn = {p["name"]: panel_matrix(p) for p in permutation_figure(demo, 0, 0)["panels"]}
    typed_allowed = explorer.run(cfg, "where is the station [PAD]").first.self_attention.allowed
    shuffled_allowed = explorer.run(cfg, demo.shuffled).first.self_attention.allowed
    np.testing.assert_array_equal(drawn["perm_typed"].masked, ~typed_allowed)
    np.testing.assert_array_equal(drawn["perm_rerun"].masked, ~shuffled_allowed)
    np.testing.assert_array_equal(drawn["perm_moved"].masked, ~typed_allowed[demo.order][:, demo.order])
    assert drawn["perm_typed"].masked[:, 4].all()  # the [PAD] key, hidden from every query


def test_permutation_figure_panels():
    demo = permutation_demo(explorer.ModelConfig(positional="none"), "I love AI you")
    panels = permutation_figure(demo, 1, 2)["panels"]
    drawn = {p["name"]: panel_matrix(p) for p in panels}
    assert list(drawn) == ["perm_typed", "perm_moved", "perm_rerun"]
    np.testing.assert_array_equal(drawn["perm_typed"].values, demo.attention[1, 2])
    np.testing.assert_array_equal(drawn["perm_moved"].values, demo.permuted_attention[1, 2])
    np.testing.assert_array_equal(drawn["perm_rerun"].values, demo.shuffled_attention[1, 2])
    assert drawn["perm_typed"].x_labels == ["I", "love", "AI", "you"]
    assert drawn["perm_rerun"].x_labels == ["you", "AI", "love", "I"]
    assert "② and ③ agree" in permutation_verdict(demo, 1, 2)
    assert [p["legend"] is not None for p in panels] == [False, False, True]  # one weight scale, one legend ...
    assert (panels[2]["legend"]["low"], panels[2]["legend"]["high"]) == (0.0, 1.0)  # ... from 0 to 1
    for shown in drawn.values():  # every map coloured on that one scale
        np.testing.assert_array_equal(shown.image, WEIGHTS.rgb(shown.values))
    moved = permutation_demo(explorer.ModelConfig(), "I love AI you")
    assert "② and ③ differ" in permutation_verdict(moved, 0, 0)


def test_long_rope_tables_are_thinned_and_still_hover_every_cell_drawn():
    angles = rope_angle_table(4096, 128)  # [4096, 64]: thinned to 512 rows, more cells than Vega-Lite hovered
    [panel] = rope_angle_heatmap(angles, 6)["panels"]
    drawn = panel_matrix(panel)
    assert drawn.values.shape == (512, 64) and not np.isnan(drawn.values).any()
    assert "every 8th position drawn" in drawn.title
    np.testing.assert_allclose(drawn.values[1], np.degrees(np.mod(angles[8], 2 * np.pi)), rtol=1e-4)


def test_a_trained_learned_table_is_not_called_untrained():
    table = encoding_table(explorer.build_model(explorer.ModelConfig(positional="learned")), 12)
    for trained in (False, True):
        texts = [
            title_text(encoding_curves(table, [0], TOKENS, "learned", trained)),
            panel_matrix(encoding_heatmap(table, TOKENS, "learned", trained)["panels"][0]).title,
            panel_matrix(
                similarity_heatmap(similarity(table), np.arange(12), "cosine", 6, "learned", trained)["panels"][0]
            ).title,
        ]
        assert all(("untrained" in text) != trained for text in texts), texts
