"""The Train page's figures and tables: learning curves, where attention lands, and the model's answers.

Arrays, DataFrames and models in; go.Figure or DataFrame out (no Streamlit here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from explorer.config import ModelConfig
from explorer.inputs import token_ids
from explorer.model import Transformer, stack_specs
from explorer.tasks import Task
from explorer.trace import AttentionMaps
from explorer.training import Snapshot, logits, task_config

NORM_NAMES = {"post": "post-norm", "pre": "pre-norm"}
NORM_COLOURS = {"post": "#1f5fa8", "pre": "#e0701a"}  # blue and orange: told apart in greyscale and by most eyes
NORM_DASHES = {"post": "solid", "pre": "dash"}
MAX_PATTERN_LINES = 8  # heads drawn in the pattern chart: the ones that end closest to the task's pattern


def curves_figure(
    histories: Mapping[str, pd.DataFrame],
    vocabulary_size: int,
    total_steps: int | None = None,
    title: str | None = None,
) -> go.Figure:
    """Loss (log scale) and accuracy per step, one line per norm placement on the same axes.

    histories: norm ("post" or "pre") -> DataFrame with step, loss, accuracy (train()'s history). The
    dotted lines mark a model that guesses uniformly: loss ln(V), accuracy 1/V."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("loss (cross-entropy, nats, log scale)", "token accuracy on the training batch"),
        horizontal_spacing=0.1,
    )
    for norm, history in histories.items():
        name = NORM_NAMES.get(norm, norm)
        line = dict(color=NORM_COLOURS.get(norm), dash=NORM_DASHES.get(norm, "solid"), width=2)
        steps = history["step"].to_numpy()
        for col, column, fmt in ((1, "loss", ".4f"), (2, "accuracy", ".1%")):
            fig.add_trace(
                go.Scatter(
                    x=steps,
                    y=history[column].to_numpy(dtype=np.float64),
                    mode="lines",
                    name=name,
                    legendgroup=norm,
                    showlegend=col == 1,
                    line=line,
                    hovertemplate=f"{name}<br>step %{{x}}<br>{column} %{{y:{fmt}}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    uniform_loss, chance = math.log(vocabulary_size), 1.0 / vocabulary_size
    fig.add_hline(y=uniform_loss, line=dict(color="#888", dash="dot", width=1), row=1, col=1)
    fig.add_annotation(  # on a log axis an annotation's y is log10 of the value (add_hline's own would not be)
        x=0.0,
        xref="x domain",
        y=math.log10(uniform_loss),
        yref="y",
        text=f"uniform guess ln {vocabulary_size} = {uniform_loss:.2f}",
        showarrow=False,
        xanchor="left",
        yanchor="bottom",
        font=dict(size=11, color="#666"),
    )
    fig.add_hline(
        y=chance,
        line=dict(color="#888", dash="dot", width=1),
        annotation_text=f"chance 1/{vocabulary_size} = {chance:.0%}",
        annotation_position="top left",
        annotation_font=dict(size=11, color="#666"),
        row=1,
        col=2,
    )
    x_range = [0, total_steps] if total_steps else None
    fig.update_xaxes(title_text="step", range=x_range)
    fig.update_yaxes(type="log", dtick=1, row=1, col=1)  # a label at each power of ten
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%", row=1, col=2)
    fig.update_layout(
        height=370,
        margin=dict(l=60, r=10, t=60 if title else 40, b=10),
        plot_bgcolor="white",
        legend=dict(orientation="h", x=0.5, xanchor="center", y=-0.3, yanchor="top"),
        title=dict(text=title, x=0.0, xanchor="left") if title else None,
    )
    fig.update_xaxes(showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee")
    return fig


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
    attention [L, H, T, T]; 1.0 = every such query puts all its weight there, 1/T = uniform attention."""
    rows = pattern.any(axis=1)  # [T] queries with a needed key
    on_pattern = (attention * pattern).sum(axis=-1)  # [L, H, T] weight on the needed key, per query
    return on_pattern[..., rows].mean(axis=-1)  # [L, H]


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


def pattern_figure(history: pd.DataFrame, task: Task, marked_step: int | None = None) -> go.Figure:
    """How much weight each head puts where the task needs it, over training; the heads that end highest."""
    last = history[history["step"] == history["step"].max()].sort_values("mass", ascending=False)
    shown = list(last["head_label"][:MAX_PATTERN_LINES])
    fig = go.Figure()
    for label in shown:
        rows = history[history["head_label"] == label]
        fig.add_trace(
            go.Scatter(
                x=rows["step"],
                y=rows["mass"],
                mode="lines+markers",
                marker=dict(size=4),
                name=label,
                hovertemplate=f"{label}<br>step %{{x}}<br>mean weight %{{y:.3f}}<extra></extra>",
            )
        )
    uniform = 1.0 / task.length
    fig.add_hline(
        y=uniform,
        line=dict(color="#888", dash="dot", width=1),
        annotation_text=f"uniform attention 1/{task.length}",
        annotation_position="top right",
        annotation_font=dict(size=11, color="#666"),
    )
    if marked_step is not None:
        fig.add_vline(x=marked_step, line=dict(color="#444", width=1))
    hidden = last.shape[0] - len(shown)
    more = f" (the {len(shown)} highest of {last.shape[0]})" if hidden else ""
    fig.update_layout(
        title=dict(text=f"weight on {PATTERN_NAMES.get(task.name, 'the needed key')}, per head{more}", x=0.0),
        height=320,
        margin=dict(l=60, r=10, t=40, b=40),
        plot_bgcolor="white",
        xaxis=dict(title_text="step", showgrid=True, gridcolor="#eee"),
        yaxis=dict(title_text="mean weight", range=[0, 1.02], showgrid=True, gridcolor="#eee"),
    )
    return fig


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
    cfg = task_config(cfg, task)
    encoder, decoder = stack_specs(cfg)
    with torch.device("meta"):
        model = Transformer(encoder, decoder, cfg.positional, cfg.max_tokens, config=cfg, vocabulary=task.vocabulary)
    return sum(p.numel() for p in model.parameters())


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
