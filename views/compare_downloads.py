"""The Compare page's downloads: the comparison as JSON, its per-layer figures and maps as CSV, and the view as one
HTML file holding the maps the attention section shows (ShownMaps, which that section fills: it reruns alone) and the
per-layer lines, each made on the click."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pandas as pd
import streamlit as st

from explorer.ablation import parse_heads
from explorer.compare import MapPair
from explorer.compare_export import comparison_json, layers_csv, maps_csv
from explorer.compare_text import describe
from explorer.config import ModelConfig
from pictures import notebook_figures
from pictures.compare_charts import norm_difference_figure, pair_norm_note
from pictures.compare_lines_chart import NOT_AVAILABLE, layer_lines
from pictures.norm_figures import norm_maps_figure
from views.ablation_controls import Removal
from views.compare_lines import shown_axes
from views.compare_runs import ComparedRuns
from views.widgets import download, plain, view_download


@dataclass
class ShownMaps:
    """What the attention section last drew: the attention kind (a pair's label; None: the first pair), layer, head,
    whether its colours were stretched, the value A's and B's maps are darkest at (pair_top, or pair_norm_top for
    unstretched norms), and the URL's query then. The section reruns alone when one of them changes, and the view's
    download, drawn outside it and made on the click, reads them here: one object per full run, which the section
    gets again on each of its own reruns."""

    kind: str | None = None
    layer: int = 0
    head: int = 0
    stretch: bool = False
    top: float = 1.0
    query: dict[str, str] = field(default_factory=dict)


def downloads(
    a: ModelConfig,
    b: ModelConfig,
    inputs: dict[str, Any],
    sharing: str,
    runs: ComparedRuns,
    pairs: list[MapPair],
    tables,
    aligned,
    lines: pd.DataFrame,
    shown: ShownMaps,
    missing: str,
    objective: str,
) -> None:
    """The JSON and CSV files and the view's HTML, each made on the click from `runs` (`pairs`: its pairs, whose
    shapes say whether A − B can be subtracted; read here, not kept), the view's of the maps `shown`; `objective`:
    what A's and B's gradient norms measure (compare_lines.gradient_objectives)."""
    st.subheader("Download the comparison")
    st.caption(
        "JSON: both configurations, the inputs, the per-layer figures and every A − B map with the head ranking. "
        "CSV: the per-layer figures, and every map of A and B with A − B (one row per cell). With Show: norms, the "
        "maps' ‖α·f(x)‖ too, beside the weights."
    )
    row = st.container(horizontal=True)  # each button as wide as its label, which columns cut on a projector
    norms = st.session_state.get("measure") == "norms"
    everything = partial(comparison_file, runs, a, b, inputs, sharing, tables, objective, aligned, norms)
    download("Download JSON", everything, "comparison.json", "application/json", "compare_json", row)
    download(
        "Per-layer CSV", partial(layers_csv, tables), "comparison_per_layer.csv", "text/csv", "compare_layers_csv", row
    )
    can_subtract = any(p.common_layers for p in pairs)
    download(
        "Maps CSV",
        partial(maps_file, runs, norms),
        "comparison_maps_with-norms.csv" if norms else "comparison_maps.csv",
        "text/csv",
        "compare_maps_csv",
        row,
        disabled=not can_subtract,
        help=None if can_subtract else "A and B have no layer with the same heads and tokens to subtract.",
    )
    sides = (("A", a), ("B", b))
    described = [f"{side}: {plain(describe(c, a))}{removed_of(inputs, side.lower())}" for side, c in sides]
    figures = partial(compare_figures, runs, shown, lines, norms, shown_axes(), missing)  # axes: in the script run
    view_download("Compare A and B", described, figures, "compare", row, query=lambda: shown.query)


def removed_of(inputs: dict[str, Any], side: str) -> str:
    """ " · heads removed: L0H1 (output set to zero)" for a side ("a" or "b") of the comparison's `inputs` that removes
    heads, else "": describe names the settings only, and the file had not said that A's maps lack the heads."""
    heads = parse_heads(inputs.get(f"{side}_removed") or "")
    if not heads:
        return ""
    return f" · heads removed: {Removal(heads, inputs.get(f'{side}_removed_with', 'zero')).words}"


def comparison_file(
    runs: ComparedRuns,
    a: ModelConfig,
    b: ModelConfig,
    inputs: dict[str, Any],
    sharing: str,
    tables: dict[str, pd.DataFrame],
    objective: str,
    aligned: bool,
    norms: bool = False,
) -> str:
    """comparison_json of the pairs of `runs`, made on the click; with `norms` (the page shows what the heads add),
    A − B of their ‖α·f(x)‖ too."""
    measured = runs.measured() if norms else None
    return comparison_json(a, b, inputs, sharing, runs.pairs(), tables, objective, aligned, measured)


def maps_file(runs: ComparedRuns, norms: bool = False) -> str:
    """maps_csv of the pairs of `runs`, made on the click; with `norms` (the page shows what the heads add), their
    ‖α·f(x)‖ beside the weights, as the Attention page's CSV has them."""
    return maps_csv(runs.pairs(), runs.measured() if norms else None)


def compare_figures(
    runs: ComparedRuns,
    shown: ShownMaps,
    lines: pd.DataFrame,
    norms: bool = False,
    axes: str = "auto",
    missing: str = NOT_AVAILABLE,
) -> list:
    """A's and B's map of the layer and head the attention section shows (`shown`, read on the click), A − B when
    they have the same shape, and the per-layer lines drawn on the page's `axes`; with `norms`, the maps and A − B of
    what the heads add (runs.measured()). A's and B's maps share one colour scale, the page's (stretched or not)."""
    pairs = runs.pairs()
    labels = [p.label for p in pairs]
    index = labels.index(shown.kind) if shown.kind in labels else 0
    pair, layer, head, stretch = pairs[index], shown.layer, shown.head, shown.stretch
    sides = [(m, side) for m, side in ((pair.a, "A"), (pair.b, "B")) if m is not None]
    drawn = [(m, side) for m, side in sides if layer < m.n_layers and head < m.n_heads]
    same = len(drawn) == 2 and pair.a.weights.shape == pair.b.weights.shape
    if not norms:
        figures = [
            notebook_figures.maps_figure(m, layer, head, f"{side} · ", stretch=stretch, top=shown.top)
            for m, side in drawn
        ]
        if same:
            figures.append(notebook_figures.maps_difference_figure(pair.a, pair.b, layer, head, stretch))
    else:
        added = runs.measured_head(index, layer, head)  # the same pair carrying ‖α·f(x)‖
        measured = {"A": added.a, "B": added.b}
        removed = dict(zip(("A", "B"), runs.removals(index, layer, head), strict=True))
        scale = (shown.top, pair_norm_note(shown.top, stretch))  # the page's scale, as the section drew it
        figures = [
            norm_maps_figure(
                m,
                measured[side].weights,
                layer,
                head,
                f"{side} · ",
                scale=scale,
                removed=removed[side],
            )
            for m, side in drawn
        ]
        if same:
            figures.append(norm_difference_figure(added.a, added.b, layer, head, stretch))
    lines_figure = layer_lines(lines, axes=axes, missing=missing)  # on the click, outside the script run
    return [*figures, lines_figure]
