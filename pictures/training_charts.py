"""The Train page's figures and tables: learning curves, where attention lands, and the model's answers.

Arrays, DataFrames and models in; a Vega-Lite spec (dict) or DataFrame out (no Streamlit here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from explorer.config import ModelConfig
from explorer.inputs import token_ids
from explorer.model import Transformer, parameter_total
from explorer.tasks import Task
from explorer.trace import AttentionMaps
from explorer.training import Snapshot, logits, task_config
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


def task_pattern(task: Task) -> np.ndarray | None:
    """[T, T] bool: for each query (row), the key it must read to do the task; None when there is no single one.

    reverse: position t outputs the token at T-1-t, an anti-diagonal. induction: in the repeat, position t holds a
    copy of the token at t - T/2, and the next token is the one after that earlier copy, at t - T/2 + 1.
    copy and sort have no such key (copy can pass each token straight along the residual stream)."""
    T = task.length
    if task.name == "reverse":
        return np.fliplr(np.eye(T, dtype=bool))
    if task.name == "induction":
        pattern = np.zeros((T, T), dtype=bool)
        half = T // 2
        for t in range(half, T - 1):  # the scored positions
            pattern[t, t - half + 1] = True
        return pattern
    return None


PATTERN_NAMES = {"reverse": "the anti-diagonal (key T-1-t)", "induction": "the token after the earlier copy"}


def pattern_mass(pattern: np.ndarray, attention: np.ndarray) -> np.ndarray:
    """[L, H]: each head's mean weight on the key the task needs, over the queries that need one.
    attention [L, H, T, T]; 1.0 = every such query puts all its weight there (uniform attention: uniform_mass)."""
    rows = pattern.any(axis=1)  # [T] queries with a needed key
    on_pattern = (attention * pattern).sum(axis=-1)  # [L, H, T] weight on the needed key, per query
    return on_pattern[..., rows].mean(axis=-1)  # [L, H]


def task_allowed(task: Task) -> np.ndarray:
    """[T, T] bool: the keys each query may see while the task trains (causal for a decoder task, else all)."""
    every = np.ones((task.length, task.length), dtype=bool)  # [T, T]
    return np.tril(every) if task.arch == "decoder" else every


def uniform_mass(pattern: np.ndarray, allowed: np.ndarray) -> float:
    """pattern_mass of a head that spreads its weight evenly over the keys each query may see: the baseline a
    trained head is measured against (1/T without a mask; more for a causal query that sees fewer keys)."""
    uniform = allowed / np.maximum(allowed.sum(axis=-1, keepdims=True), 1)  # [T, T]
    return float(pattern_mass(pattern, uniform[None, None])[0, 0])


def pattern_history(snapshots: Sequence[Snapshot], pattern: np.ndarray) -> pd.DataFrame:
    """Tidy: step, layer, head, head_label ("L1 H2"), mass, for every snapshot and head."""
    rows = []
    for snapshot in snapshots:
        mass = pattern_mass(pattern, snapshot.attention)  # [L, H]
        for (layer, head), value in np.ndenumerate(mass):
            rows.append(
                {"step": snapshot.step, "layer": layer, "head": head, "head_label": f"L{layer} H{head}", "mass": value}
            )
    return pd.DataFrame(rows, columns=["step", "layer", "head", "head_label", "mass"])


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


def snapshot_maps(snapshot: Snapshot, like: AttentionMaps) -> AttentionMaps:
    """The snapshot's weights [L, H, T, T] with the tokens and mask of a trace on the same probe.
    Snapshots keep weights only: the scores are NaN."""
    if snapshot.attention.shape != like.weights.shape:
        raise ValueError(f"snapshot {snapshot.attention.shape} does not match the maps {like.weights.shape}")
    scores = np.full(like.scores.shape, np.nan, dtype=np.float32)
    return AttentionMaps(like.kind, snapshot.attention, scores, like.allowed, like.query_tokens, like.key_tokens)


def expected_output(task: Task, tokens: Sequence[str]) -> list[str | None]:
    """What the task wants at each position of this input; None where nothing is scored.

    copy: the input; reverse: it backwards; sort: its tokens in vocabulary order; induction: the next token, at
    the positions of the repeat that have one (from T/2 to T-2), as Task.sample scores them."""
    tokens = list(tokens)
    T = len(tokens)
    if task.name == "copy":
        return list(tokens)
    if task.name == "reverse":
        return tokens[::-1]
    if task.name == "sort":
        order = {t: i for i, t in enumerate(task.vocabulary)}
        return sorted(tokens, key=lambda t: order[t])
    return [tokens[t + 1] if T // 2 <= t <= T - 2 else None for t in range(T)]


def predictions(model: Transformer, task: Task, tokens: Sequence[str]) -> pd.DataFrame:
    """position, input, output (the model's most likely token), expected, correct (None where not scored)."""
    tokens = list(tokens)
    ids = token_ids(model.vocabulary, tokens)  # [T]; unknown tokens raise a ConfigError
    with torch.inference_mode():
        best = logits(model, ids[None])[0].argmax(dim=-1)  # [T]
    output = [model.vocabulary[i] for i in best.tolist()]
    expected = expected_output(task, tokens)
    correct = [None if e is None else o == e for o, e in zip(output, expected, strict=True)]
    return pd.DataFrame(
        {"position": range(len(tokens)), "input": tokens, "output": output, "expected": expected, "correct": correct}
    )


def parameter_count(cfg: ModelConfig, task: Task) -> int:
    """Parameters train() would fit for this config and task, counted without allocating any weights."""
    return parameter_total(task_config(cfg, task), task.vocabulary)


def steps_to_accuracy(history: pd.DataFrame, level: float) -> int | None:
    """The first step whose training-batch accuracy reached `level`, or None."""
    reached = history.loc[history["accuracy"] >= level, "step"]
    return int(reached.iloc[0]) if len(reached) else None


def percent(share: float) -> str:
    """A share as a percentage with one decimal, never rounded up to "100.0%" unless it is exactly 1."""
    text = f"{share:.1%}"
    decimals = 1
    while share < 1.0 and text.startswith("100.") and decimals < 6:
        decimals += 1
        text = f"{share:.{decimals}%}"
    return text
