"""The Train page's figures: learning curves, and where attention lands over training.

DataFrames in (explorer.training's history, explorer.task_patterns' pattern_history); a Vega-Lite spec (dict) out
(no Streamlit here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from explorer.task_patterns import PATTERN_NAMES, task_allowed, task_pattern, uniform_mass
from explorer.tasks import Task
from pictures.style import AXIS_NUMBERS, chart

NORM_NAMES = {"post": "post-norm", "pre": "pre-norm"}
NORM_COLOURS = {"post": "#1f5fa8", "pre": "#e0701a"}  # blue and orange: told apart in greyscale and by most eyes
MAX_PATTERN_LINES = 8  # heads drawn in the pattern chart: the ones that end closest to the task's pattern


def _norm_colour(norms: Sequence[str], legend: bool) -> dict:
    """The colour and dash of each norm placement's line (post: solid blue, pre: dashed orange)."""
    names = [NORM_NAMES.get(n, n) for n in norms]
    return {
        "color": {
            "field": "placement",
            "type": "nominal",
            "scale": {"domain": names, "range": [NORM_COLOURS.get(n, "#444444") for n in norms]},
            "legend": {"title": None, "orient": "bottom", "symbolType": "stroke"} if legend else None,
        },
        "strokeDash": {
            "field": "placement",
            "type": "nominal",
            "scale": {"domain": names, "range": [[1, 0] if n == "post" else [6, 4] for n in norms]},
            "legend": None,
        },
    }


def _reference(y: float, text: str, align: str = "left") -> list[dict]:
    """A dotted horizontal line at y with a grey note on it."""
    rule = {"data": {"values": [{"y": y}]}, "mark": {"type": "rule", "color": "#888", "strokeDash": [2, 3]},
            "encoding": {"y": {"field": "y", "type": "quantitative"}}}  # fmt: skip
    note = {
        "data": {"values": [{"y": y, "text": text}]},
        "mark": {"type": "text", "align": align, "baseline": "bottom", "dy": -3, "color": "#666", "fontSize": 11,
                 "x": 4 if align == "left" else "width"},
        "encoding": {"y": {"field": "y", "type": "quantitative"}, "text": {"field": "text"}},
    }  # fmt: skip
    return [rule, note]


def curves_table(histories: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Tidy: placement ("post-norm"), step, loss, accuracy: one row per norm placement and step."""
    parts = [
        pd.DataFrame(
            {
                "placement": NORM_NAMES.get(norm, norm),
                "step": history["step"].to_numpy(dtype=np.int32),
                "loss": history["loss"].to_numpy(dtype=np.float64),
                "accuracy": history["accuracy"].to_numpy(dtype=np.float64),
            }
        )
        for norm, history in histories.items()
    ]
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["placement", "step", "loss", "accuracy"])
    )


def curves_figure(
    histories: Mapping[str, pd.DataFrame],
    vocabulary_size: int,
    total_steps: int | None = None,
    title: str | None = None,
) -> dict:
    """Loss (log scale) and accuracy per step, one line per norm placement on the same axes.

    histories: norm ("post" or "pre") -> DataFrame with step, loss, accuracy (train()'s history). The
    dotted lines mark a model that guesses uniformly: loss ln(V), accuracy 1/V."""
    table = curves_table(histories)
    uniform_loss, chance = math.log(vocabulary_size), 1.0 / vocabulary_size
    x = {"field": "step", "type": "quantitative", "title": "step",
         "scale": {"domain": [0, total_steps]} if total_steps else {}}  # fmt: skip
    hover = [{"field": "placement", "title": "norm"}, {"field": "step"}]

    def panel(column: str, heading: str, y: dict, reference: list[dict], fmt: str) -> dict:
        lines = {
            "data": {"name": "curves"},
            "mark": {"type": "line", "strokeWidth": 2},
            "encoding": {"x": x, "y": {"field": column, "type": "quantitative", **y},
                         **_norm_colour(list(histories), legend=True),
                         "tooltip": [*hover, {"field": column, "format": fmt}]},
        }  # fmt: skip
        points = {  # invisible points: hover anywhere along a line
            **lines,
            "mark": {"type": "point", "opacity": 0, "size": 60},
            "encoding": {**lines["encoding"], **_norm_colour(list(histories), legend=False)},
        }
        return {"title": heading, "width": 340, "height": 240, "layer": [lines, points, *reference]}

    low = float(table["loss"].min()) if len(table) else uniform_loss
    loss_low = 10 ** math.floor(math.log10(max(min(low, uniform_loss), 1e-6)))  # whole decades, labelled 10^k
    loss_high = 10 ** math.ceil(math.log10(uniform_loss * 1.5))
    loss = panel(
        "loss",
        "loss (cross-entropy, nats, log scale)",
        {
            "title": "loss",
            "scale": {"type": "log", "domain": [loss_low, loss_high]},
            "axis": {"values": [10.0**e for e in range(round(math.log10(loss_low)), 3)], "format": AXIS_NUMBERS},
        },
        _reference(uniform_loss, f"uniform guess ln {vocabulary_size} = {uniform_loss:.2f}"),
        ".4f",
    )
    accuracy = panel(
        "accuracy",
        "token accuracy on the training batch",
        {"title": "accuracy", "scale": {"domain": [0, 1.02]}, "axis": {"format": ".0%"}},
        _reference(chance, f"chance 1/{vocabulary_size} = {chance:.0%}"),
        ".1%",
    )
    spec = {"hconcat": [loss, accuracy], "datasets": {"curves": table}}
    if title:
        spec["title"] = {"text": title, "anchor": "start"}
    return chart(spec)


def pattern_figure(history: pd.DataFrame, task: Task, marked_step: int | None = None) -> dict:
    """How much weight each head puts where the task needs it, over training; the heads that end highest."""
    last = history[history["step"] == history["step"].max()].sort_values("mass", ascending=False)
    shown = list(last["head_label"][:MAX_PATTERN_LINES])
    rows = history[history["head_label"].isin(shown)][["step", "head_label", "mass"]]
    hidden = last.shape[0] - len(shown)
    more = f" (the {len(shown)} highest of {last.shape[0]})" if hidden else ""
    lines = {
        "data": {"name": "pattern"},
        "mark": {"type": "line", "point": {"size": 20}},
        "encoding": {
            "x": {"field": "step", "type": "quantitative", "title": "step", "scale": {"nice": False}},
            "y": {"field": "mass", "type": "quantitative", "title": "mean weight", "scale": {"domain": [0, 1.02]}},
            "color": {"field": "head_label", "type": "nominal", "sort": shown, "title": "head",
                      "scale": {"scheme": "tableau10"}},
            "tooltip": [{"field": "head_label", "title": "head"}, {"field": "step"},
                        {"field": "mass", "title": "mean weight", "format": ".3f"}],
        },
    }  # fmt: skip
    baseline = uniform_mass(task_pattern(task), task_allowed(task))
    layers = [lines, *_reference(baseline, f"uniform attention {baseline:.3g}", align="right")]
    if marked_step is not None:
        layers.append({"data": {"values": [{"step": marked_step}]}, "mark": {"type": "rule", "color": "#444"},
                       "encoding": {"x": {"field": "step", "type": "quantitative"}}})  # fmt: skip
    return chart(
        {
            "title": {"text": f"weight on {PATTERN_NAMES.get(task.name, 'the needed key')}, per head{more}",
                      "anchor": "start"},
            "width": 900,
            "height": 240,
            "datasets": {"pattern": rows.reset_index(drop=True)},
            "layer": layers,
        }
    )  # fmt: skip
