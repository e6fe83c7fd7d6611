"""Colour and legibility for a washed-out classroom projector and for colour-blind students, computed here from the
colours drawn: CIELAB lightness along each ramp, CIEDE2000 between masked cells and a ramp's colours and between
lines told apart by colour, under simulated protanopia, deuteranopia and tritanopia (Machado, Oliveira & Fernandes
2009, severity 1) and a projector that lifts black to a quarter of white, and WCAG contrast of chart text.

The colour science is written here, not taken from the code under test; CIEDE2000 is checked against Sharma, Wu &
Dalal's (2005) published test pairs. A difference of CIEDE2000 10 is the bar: about the step between two neighbouring
colours of a 9-colour ramp (BLUES's 0.125 steps are 6 to 12 apart), so below it two categories read as one."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest

import explorer
from explorer.analysis.activations import layer_statistics
from explorer.analysis.placements import placement_run
from explorer.analysis.position_analysis import OffsetScores, default_dimensions, encoding_table
from explorer.config import ModelConfig
from explorer.tasks import make_task
from pictures import style
from pictures.activation_boards import CIVIDIS, gradient_heatmap, head_grid_panel
from pictures.activation_charts import depth_figure, norm_figure
from pictures.attention_panels import attention_map_panel
from pictures.compare_charts import difference_panel, norm_difference_figure
from pictures.compare_lines_chart import layer_lines
from pictures.heads_charts import after_before_figure, after_before_panel
from pictures.placement_charts import placements_chart
from pictures.position_demo_charts import offset_scores_panel
from pictures.positional_charts import encoding_curves
from pictures.style import MASKED_COLOUR, SUBTITLE_COLOUR, VIRIDIS
from pictures.training_charts import pattern_figure
from tests.drawn import _decode_png

BAR = 10.0  # CIEDE2000: below this two colours meant to differ read as one (the module's docstring says why)
VISIONS = ("normal", "protanopia", "deuteranopia", "tritanopia")
MACHADO = {  # linear RGB -> linear RGB, severity 1.0 (Machado et al. 2009, table of their paper's web page)
    "normal": np.eye(3),
    "protanopia": np.array(
        [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
    ),
    "deuteranopia": np.array(
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
    ),
    "tritanopia": np.array(
        [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]
    ),
}
SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750],
                        [0.0193339, 0.1191920, 0.9503041]])  # fmt: skip
D65 = SRGB_TO_XYZ @ np.ones(3)


def rgb01(colour: str | np.ndarray) -> np.ndarray:
    """ "#rrggbb" or [r, g, b] 0..255 as sRGB 0..1."""
    if isinstance(colour, str):
        colour = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return np.asarray(colour, dtype=np.float64) / 255.0


def linear(srgb: np.ndarray) -> np.ndarray:
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def lab_of_linear(rgb: np.ndarray) -> np.ndarray:
    """[..., 3] linear RGB -> [..., 3] CIELAB (D65)."""
    xyz = rgb @ SRGB_TO_XYZ.T / D65
    d = 6 / 29
    f = np.where(xyz > d**3, np.cbrt(xyz), xyz / (3 * d * d) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1)


def seen(colour, vision: str = "normal", projector: bool = False) -> np.ndarray:
    """CIELAB of a colour as an eye with `vision` sees it; `projector`: black lifted to a quarter of white."""
    rgb = np.clip(MACHADO[vision] @ linear(rgb01(colour)), 0.0, 1.0)
    return lab_of_linear(0.25 + 0.75 * rgb if projector else rgb)


def ciede2000(lab1: np.ndarray, lab2: np.ndarray) -> float:
    """CIEDE2000 colour difference (Sharma, Wu & Dalal 2005), kL = kC = kH = 1."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_mean = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_mean**7 / (c_mean**7 + 25**7)))
    a1, a2 = (1 + g) * a1, (1 + g) * a2
    c1, c2 = math.hypot(a1, b1), math.hypot(a2, b2)
    h1 = math.degrees(math.atan2(b1, a1)) % 360 if c1 else 0.0
    h2 = math.degrees(math.atan2(b2, a2)) % 360 if c2 else 0.0
    dh = 0.0 if c1 * c2 == 0 else (h2 - h1 + 180) % 360 - 180
    big_dh = 2 * math.sqrt(c1 * c2) * math.sin(math.radians(dh / 2))
    l_mean, c_bar = (l1 + l2) / 2, (c1 + c2) / 2
    if c1 * c2 == 0:
        h_mean = h1 + h2
    elif abs(h1 - h2) <= 180:
        h_mean = (h1 + h2) / 2
    else:
        h_mean = (h1 + h2 + 360) / 2 if h1 + h2 < 360 else (h1 + h2 - 360) / 2
    t = (1 - 0.17 * math.cos(math.radians(h_mean - 30)) + 0.24 * math.cos(math.radians(2 * h_mean))
         + 0.32 * math.cos(math.radians(3 * h_mean + 6)) - 0.20 * math.cos(math.radians(4 * h_mean - 63)))  # fmt: skip
    rotation = 30 * math.exp(-(((h_mean - 275) / 25) ** 2))
    rc = 2 * math.sqrt(c_bar**7 / (c_bar**7 + 25**7))
    sl = 1 + 0.015 * (l_mean - 50) ** 2 / math.sqrt(20 + (l_mean - 50) ** 2)
    sc, sh = 1 + 0.045 * c_bar, 1 + 0.015 * c_bar * t
    rt = -math.sin(math.radians(2 * rotation)) * rc
    dl, dc = (l2 - l1) / sl, (c2 - c1) / sc
    return math.sqrt(dl**2 + dc**2 + (big_dh / sh) ** 2 + rt * dc * (big_dh / sh))


def difference(c1, c2, vision: str = "normal", projector: bool = False) -> float:
    return ciede2000(seen(c1, vision, projector), seen(c2, vision, projector))


def least_difference(c1, c2) -> tuple[float, str]:
    """The smallest CIEDE2000 between two colours over normal vision and the three simulated deficiencies."""
    return min((difference(c1, c2, vision), vision) for vision in VISIONS)


def contrast(c1, c2) -> float:
    """WCAG 2 contrast ratio."""
    y1, y2 = (float(linear(rgb01(c)) @ [0.2126, 0.7152, 0.0722]) for c in (c1, c2))
    return (max(y1, y2) + 0.05) / (min(y1, y2) + 0.05)


def ramp_colours(colours: tuple[str, ...], n: int = 257) -> np.ndarray:
    """[n, 3] 0..255 colours spread evenly along a ramp as pictures.style.Ramp draws them."""
    return style.Ramp(colours, 0.0, 1.0).rgb(np.linspace(0.0, 1.0, n))


@pytest.mark.parametrize(
    ("lab1", "lab2", "expected"),
    [
        ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
        ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
        ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
        ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
        ((22.7233, 20.0904, -46.694), (23.0331, 14.973, -42.5619), 2.0373),
        ((2.0776, 0.0795, -1.135), (0.9033, -0.0636, -0.5514), 0.9082),
    ],
)
def test_ciede2000_here_gives_sharmas_published_differences(lab1, lab2, expected):
    assert ciede2000(np.array(lab1), np.array(lab2)) == pytest.approx(expected, abs=1e-4)


def test_the_colour_science_here_agrees_with_known_values():
    assert seen("#808080")[0] == pytest.approx(53.585, abs=1e-3)  # L* of sRGB mid grey
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # WCAG's classic near-miss grey
    for vision, matrix in MACHADO.items():  # each simulation keeps white white and black black
        np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=2e-6, err_msg=vision)


@pytest.mark.parametrize(
    ("name", "colours", "rising"),
    [("BLUES", style.BLUES, False), ("ORANGES", None, False), ("VIRIDIS", VIRIDIS, True), ("CIVIDIS", CIVIDIS, True)],
)
def test_a_sequential_ramps_lightness_runs_one_way(name, colours, rising):
    """L* of the drawn colours never turns back by more than uint8 rounding (0.5), and the ramp interpolated before
    rounding is strictly monotonic: a darker cell always means a larger (or smaller) value."""
    if colours is None:
        from pictures.compare_charts import ORANGES as colours
    drawn = np.array([seen(c)[0] for c in ramp_colours(colours, 1001)])
    steps = np.diff(drawn) * (1 if rising else -1)
    assert steps.min() > -0.5, f"{name}: L* turns back by {-steps.min():.2f}"
    channels = np.array([rgb01(c) for c in colours])  # [n, 3]
    t = np.linspace(0.0, 1.0, 4001)
    smooth = np.stack([np.interp(t, np.linspace(0, 1, len(colours)), channels[:, i]) for i in range(3)], axis=-1)
    lightness = lab_of_linear(linear(smooth))[:, 0]
    assert (np.diff(lightness) * (1 if rising else -1) > 0).all(), name


def test_every_signed_map_is_white_at_zero_with_a_range_symmetric_about_it(make_maps):
    """Compare's A − B, What heads do's after − before and attribution, the Positional tables: the colour range is
    -h..h and the colour at 0 the ramp's lightest and neutral (a*, b* within 1 of 0), each side darkening from it."""
    from pictures.compare_charts import difference_ramp
    from pictures.positional_charts import table_colours

    ramps = [difference_ramp(0.3), table_colours(np.array([[-0.2, 0.7]]), "learned", False)[0]]
    ramps.append(table_colours(np.array([[-0.2, 0.7], [0.1, 0.05]]), "learned", True)[0])
    ramps.append(table_colours(np.array([[-0.2, 0.7]]), "sinusoidal", False)[0])
    causal = np.tril(np.ones((6, 6), dtype=bool))
    panel = after_before_panel(make_maps(allowed=causal), make_maps(allowed=causal, seed=1), 0, 0)
    legend = panel["legend"]
    ramps.append(style.Ramp(tuple(legend["colours"]), legend["low"], legend["high"]))
    for ramp in ramps:
        assert ramp.low == -ramp.high and ramp.high > 0
        zero = seen(ramp.rgb(np.array([0.0]))[0])
        assert abs(zero[1]) < 1 and abs(zero[2]) < 1 and zero[0] > 97
        for side in (ramp.low, ramp.high):
            path = ramp.rgb(np.linspace(0.0, side, 101))
            lightness = np.array([seen(c)[0] for c in path])
            assert np.diff(lightness).max() < 0.5  # darker away from 0, on both sides


def test_masked_grey_stands_out_from_white_on_a_washed_out_projector():
    for vision in VISIONS:
        assert difference(MASKED_COLOUR, "#ffffff", vision, projector=True) > BAR


def _masked_and_ramp(panel: dict) -> tuple[np.ndarray, np.ndarray]:
    """The colour a panel draws its masked cells in, and [257, 3] colours of its ramp."""
    picture = _decode_png(panel["png"]).reshape(-1, 3)  # [cells, 3]
    masked = np.frombuffer(panel["masked"], dtype=np.uint8).astype(bool)  # [cells]
    colours = np.unique(picture[masked], axis=0)
    assert len(colours) == 1
    return colours[0], ramp_colours(tuple(panel["legend"]["colours"]))


def _offset_panel() -> dict:
    scores = np.tril(np.linspace(-3.0, 3.0, 36).reshape(6, 6))  # [P, P]
    scores[np.triu_indices(6, 1)] = -np.inf  # a causal mask
    return offset_scores_panel(OffsetScores("a", 0, 0, scores, np.arange(-5, 6), np.zeros(11), 0.0))["panels"][0]


def _gradient_panel() -> dict:
    norms = pd.DataFrame(
        {"stack": "encoder", "layer": [0, 0, 1, 1], "parameter": ["w", "key.bias"] * 2, "norm": [0.3, 0.0, 2.0, 0.0]}
    )
    return gradient_heatmap(norms, "encoder")["panels"][0]


def _head_grid_panel() -> dict:
    grid = np.array([[0.1, 0.5], [np.nan, 0.9]])  # [L, H]: one head with no value
    return head_grid_panel(grid, "Sparsity", "", "sparsity", 0.0, 1.0, colours=CIVIDIS)


@pytest.mark.parametrize("build", ["offset", "gradient", "head grid", "attention", "compare"])
def test_a_masked_cell_is_no_colour_of_its_maps_ramp_to_any_eye(build, make_maps):
    """Positional's offset scores (VIRIDIS, causal), Activations' gradients (a zero norm) and per-head grids
    (cividis), Attention's maps (BLUES), Compare's A − B: under each simulated deficiency the masked colour is at
    least BAR from every colour of the ramp. The grey was 4.6 from VIRIDIS's teal to a protanope, 5.1 to a
    deuteranope, and 7.6 from cividis's own grey to a tritanope."""
    causal = np.tril(np.ones((6, 6), dtype=bool))
    maps, other = make_maps(allowed=causal), make_maps(allowed=causal, seed=1)
    panels = {
        "offset": _offset_panel,
        "gradient": _gradient_panel,
        "head grid": _head_grid_panel,
        "attention": lambda: attention_map_panel(maps, 0, 0),
        "compare": lambda: difference_panel(maps, other, maps.weights[0, 0] - other.weights[0, 0], 0, 0),
    }
    masked, ramp = _masked_and_ramp(panels[build]())
    worst = min((least_difference(masked, colour), tuple(colour)) for colour in ramp)
    assert worst[0][0] >= BAR, f"{build}: masked {masked} is {worst[0][0]:.1f} from {worst[1]} ({worst[0][1]})"


def _gap_colour(figure) -> str:
    """What shows through a Plotly heatmap's NaN cells: the plot's background, as its template resolves it."""
    layout = figure.layout
    template = layout.template if layout.template.layout.plot_bgcolor else pio.templates[pio.templates.default]
    return layout.plot_bgcolor or template.layout.plot_bgcolor


def _named_colour(colour: str) -> str:
    return {"white": "#ffffff"}.get(colour, colour)


@pytest.fixture(scope="module")
def causal_run():
    model = explorer.build_model(ModelConfig(arch="decoder", n_layers=2, n_heads=2, d_model=16, d_ff=32, seed=3))
    return model, explorer.run(model, "the cat sat on the mat".split())


def test_a_plotly_maps_masked_gaps_are_grey_not_the_white_of_weight_zero(causal_run, make_maps):
    """Notebook maps, the Mixing figures and the HTML downloads of Compare's and What heads do's difference maps:
    masked cells are NaN and show the masked grey, at least BAR from white (BLUES's 0 is 2.6 from it) to any eye;
    a cell masked on the page is masked in the download, not a difference of 0."""
    model, trace = causal_run
    causal = np.tril(np.ones((6, 6), dtype=bool))
    maps, other = make_maps(allowed=causal), make_maps(allowed=causal, seed=1)
    figures = {
        "attention": explorer.attention_figure(trace, 0, 0),
        "grid": explorer.attention_grid_figure(trace),
        "norms": explorer.norm_attention_figure(model, trace, 0, 0),
        "rollout": explorer.rollout_figure(trace),
        "A − B norms": norm_difference_figure(maps, other, 0, 0),
        "after − before": after_before_figure(maps, other, 0, 0),
        "A − B": explorer.difference_figure(trace, explorer.run(model, "a dog sat on the rug".split())),
    }
    for name, figure in figures.items():
        gap = _named_colour(_gap_colour(figure))
        assert least_difference(gap, "#ffffff")[0] >= BAR, f"{name}: its masked cells show {gap}"
        heatmap = next(t for t in figure.data if t.type == "heatmap")
        z = np.asarray(heatmap.z, dtype=np.float64)  # [Tq, Tk]: both inputs are 6 tokens, causal
        assert np.isnan(z[~causal]).all(), f"{name}: a masked cell drawn as a value"
        # the grey is the plot's background: a grid line drawn on it crossed the masked cells' middles, in white
        axes = [figure.layout[key] for key in figure.layout if key.startswith(("xaxis", "yaxis"))]
        assert axes and all(a.showgrid is False for a in axes), f"{name}: grid lines across its masked gaps"
        assert_masked_map_axes(name, figure.to_dict()["layout"])


def assert_masked_map_axes(name: str, layout: dict) -> None:
    """The axes every page draws a map with: the first query on top (y reversed), the keys' labels tilted, and no grid
    line on either axis (both read from the figure's own JSON, as Plotly draws it)."""
    x_axes = [value for key, value in layout.items() if key.startswith("xaxis")]
    y_axes = [value for key, value in layout.items() if key.startswith("yaxis")]
    assert x_axes and y_axes, f"{name}: no axes set"
    assert all(a.get("autorange") == "reversed" and a.get("showgrid") is False for a in y_axes), f"{name}: {y_axes}"
    assert all(a.get("tickangle") == -45 and a.get("showgrid") is False for a in x_axes), f"{name}: {x_axes}"


def _entries(figure) -> dict[str, tuple[str, str, str, str]]:
    """Each legend entry (a trace's name) -> its colour, then what else tells it apart: its mode (lines, markers or
    both), dash and marker symbol."""
    entries = {}
    for trace in figure.data:
        if trace.type != "scatter" or not trace.name or trace.showlegend is False:
            continue
        line, marker = trace.line or {}, trace.marker or {}
        colour = line.color if line and line.color else marker.color
        if isinstance(colour, str) and colour.startswith("#"):
            cues = (trace.mode or "lines", (line.dash if line else None) or "solid", marker.symbol or "circle")
            entries[trace.name] = (colour, *cues)
    return entries


def _collisions(figure) -> list[str]:
    """Pairs of legend entries drawn alike but for colour whose colours are within BAR to some eye."""
    found = []
    for (a, (ca, *cue_a)), (b, (cb, *cue_b)) in itertools.combinations(_entries(figure).items(), 2):
        if cue_a == cue_b:
            gap, vision = least_difference(ca, cb)
            if gap < BAR:
                found.append(f"{a} / {b}: {gap:.1f} ({vision})")
    return found


def _decoder_stats(norm: str) -> pd.DataFrame:
    model = explorer.build_model(ModelConfig(arch="encoder-decoder", norm=norm, n_layers=2, d_model=16, d_ff=32))
    trace = explorer.run(model, "a b c".split(), "x y".split())
    return layer_statistics(trace.stacks[1])


def test_lines_told_apart_only_by_colour_are_apart_to_colour_blind_eyes(causal_run):
    """Activations' points over depth (orange and green were 1.3 apart to a protanope, green and red 4.6 to a
    deuteranope) and its norms' sub-layers, Train's head lines, Positional's default curves (a learned table's eight:
    the 7th and 8th were green and purple, solid like orange and blue), and the charts that
    had a second cue already (Compare's A and B, the four placements): any two entries drawn with one dash and one
    marker are at least BAR apart in colour under each simulated deficiency."""
    model, trace = causal_run
    stats = layer_statistics(trace.first)
    peri = _decoder_stats("peri")
    history = pattern_history_of_eight_heads()
    run = placement_run(model, trace.tokens)
    table = encoding_table(explorer.build_model(ModelConfig(d_model=64)), 32)  # [P, D]
    figures = {
        "depth": depth_figure(stats, "decoder", "sinusoidal"),
        "depth, cross-attention": depth_figure(_decoder_stats("pre"), "decoder", "sinusoidal"),
        "norms, decoder": norm_figure(_decoder_stats("pre"), "decoder", "pre"),
        "norms, peri": norm_figure(peri, "decoder", "peri"),
        "pattern": pattern_figure(history, make_task("reverse", 4)),
        "positional": encoding_curves(table, default_dimensions(64), ["a", "b"], "sinusoidal"),
        "positional, learned (8 curves)": encoding_curves(table, default_dimensions(64), ["a", "b"], "learned"),
        "positional, 9 pairs": encoding_curves(table, list(range(18)), ["a"], "sinusoidal"),
        "placements": placements_chart(run),
        "compare": layer_lines(_layer_table(run)),
    }
    found = {name: _collisions(figure) for name, figure in figures.items()}
    assert not any(found.values()), found


def _layer_table(run) -> pd.DataFrame:
    """A per_layer_comparison-shaped table (statistic, layer, a, b) from the post- and pre-norm rows of a
    placement run, for Compare's per-layer lines."""
    names = {"residual RMS": "residual RMS", "gradient norm": "gradient norm", "attention entropy": "attention entropy"}
    rows = []
    for measure, statistic in names.items():
        for placement, column in (("post", "a"), ("pre", "b")):
            part = run.table[(run.table["measure"] == measure) & (run.table["placement"] == placement)]
            rows += [{"statistic": statistic, "layer": int(r.layer), column: float(r.value)} for r in part.itertuples()]
    table = pd.DataFrame(rows).groupby(["statistic", "layer"], as_index=False).first()
    std = table[table["statistic"] == "residual RMS"].assign(statistic="residual std")
    return pd.concat([table, std], ignore_index=True)


def pattern_history_of_eight_heads() -> pd.DataFrame:
    """pattern_history's table for 8 heads whose mass rises at different rates (the chart draws its 8 highest)."""
    rows = [
        {"step": step, "head_label": f"L{h // 4} H{h % 4}", "mass": min(1.0, 0.1 + 0.01 * h * step)}
        for step in (0, 10, 20)
        for h in range(8)
    ]
    return pd.DataFrame(rows)


def test_chart_text_on_white_has_wcag_contrast_of_at_least_4_5(causal_run):
    """Subtitles, and the note an empty panel writes (Compare's per-layer lines, the four placements: "#888888"
    was 3.5:1); the matrix view's subtitle (views/matrix_view.css)."""
    assert contrast(SUBTITLE_COLOUR, "#ffffff") >= 4.5
    model, trace = causal_run
    run = placement_run(model, trace.tokens)
    no_gradients = dataclasses.replace(run, table=run.table.assign(value=np.nan))
    table = _layer_table(run).assign(a=np.nan, b=np.nan)
    notes = [a.font.color for a in placements_chart(no_gradients).layout.annotations if a.font and a.font.color]
    notes += [a.font.color for a in layer_lines(table).layout.annotations if a.font and a.font.color]
    assert notes
    for colour in notes:
        assert contrast(colour, "#ffffff") >= 4.5, colour
    css = Path("views/matrix_view.css").read_text()
    subtitle = css.split(".mv-subtitle", 1)[1].split("color:", 1)[1].split(";", 1)[0].strip()
    assert contrast(subtitle, "#ffffff") >= 4.5
