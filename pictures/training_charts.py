"""The Train page's figures: learning curves, and where attention lands over training.

DataFrames in (explorer.training's history, explorer.analysis.task_patterns' pattern_history); Plotly figures out (no
Streamlit here). pictures.notebook_figures.training_figure draws the same curves for a notebook.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.analysis.task_patterns import PATTERN_NAMES, task_allowed, task_pattern, uniform_mass
from explorer.config import NORMS
from explorer.tasks import Task
from pictures.style import (
    CATEGORY10,
    LOG_NUMBERS,
    PANEL_TITLE_FONT,
    PANEL_TITLE_PX,
    axis,
    figure_layout,
    legend_below,
)

NORM_NAMES = {norm: f"{norm}-norm" for norm in NORMS}
# Blue, orange, green and dark purple: told apart by most eyes, and in greyscale by their dashes and their lightness
# (grey levels, as PIL's "L" mode converts: purple 45, blue 84, orange 136, green 167 of 255).
NORM_COLOURS = {"post": "#1f5fa8", "pre": "#e0701a", "res-post": "#6fcf6a", "peri": "#3d1a66"}
NORM_DASHES = {"post": "solid", "pre": "dash", "res-post": "dot", "peri": "dashdot"}
MAX_PATTERN_LINES = 8  # heads drawn in the pattern chart: the ones that end closest to the task's pattern
# A marker each, as well as a colour: to a colour-blind eye CATEGORY10's orange and green are one (CIEDE2000 1.3 under
# simulated protanopia), its blue and purple too (1.9), its green and red nearly (4.6 under deuteranopia)
PATTERN_MARKERS = ("circle", "square", "diamond", "triangle-up", "x", "triangle-down", "cross", "star")
REFERENCE_COLOUR, NOTE_COLOUR = "#888888", "#666666"  # a dotted reference line, and the note on it
MARK_COLOUR = "#444444"  # the vertical line at the step the slider shows
LOSS_TITLE = "loss (cross-entropy, nats, log scale)"
ACCURACY_TITLE = "token accuracy on the training batch"
PATTERN_PX = 300  # px of the pattern chart: its legend of MAX_PATTERN_LINES heads fits beside it unscrolled


def training_title(task: Task) -> str:
    """The learning curves' title: the task they are of."""
    return f"Training on {task.name} (length {task.length}): loss and accuracy per step"


def _reference(figure: go.Figure, y: float, text: str, log: bool = False, below: bool = False, **where: int) -> None:
    """A dotted horizontal line across a panel at y, with a grey note at its right end, where the curves have left
    the line (they start on it at step 0): on the line, or under it (`below`, where lines that rise from it leave
    room below)."""
    figure.add_hline(y=y, line={"color": REFERENCE_COLOUR, "width": 1, "dash": "dot"}, **where)
    figure.add_annotation(
        text=text,
        x=1.0,
        xref="x domain",
        xanchor="right",
        xshift=-6,  # clear of a vertical line at the last step
        y=math.log10(y) if log else y,  # an annotation on a log axis is placed by the log of its value
        yanchor="top" if below else "bottom",
        showarrow=False,
        font={"size": 11, "color": NOTE_COLOUR},
        **where,
    )


def _loss_axis(histories: Mapping[str, pd.DataFrame], uniform_loss: float) -> dict:
    """A log axis of whole decades, labelled as powers of ten (10⁻⁴, LOG_NUMBERS), from below the lowest loss to above
    ln V: written out, a long run's "0.00001" ran into the "0" of the step axis and up to the y title."""
    losses = [float(h["loss"].min()) for h in histories.values() if len(h)]
    low = min([*losses, uniform_loss])
    low_decade = math.floor(math.log10(max(low, 1e-6)))
    high_decade = math.ceil(math.log10(uniform_loss * 1.5))
    return axis(
        "loss",
        **LOG_NUMBERS,
        range=[low_decade, high_decade],
        dtick=1,  # a tick at every decade
    )


def curves_figure(
    histories: Mapping[str, pd.DataFrame],
    vocabulary_size: int,
    total_steps: int | None = None,
    title: str | None = None,
    blind_accuracy: float | None = None,
) -> go.Figure:
    """Loss (log scale) and accuracy per step, one line per norm placement on the same axes (post-norm solid blue,
    pre-norm dashed orange, res-post-norm dotted green, peri-norm dash-dotted purple); hover gives the placement,
    the step and the value.

    histories: norm ("post", "pre", "res-post" or "peri") -> DataFrame with step, loss, accuracy (train()'s
    history: step n is the model after n updates, on the batch its next update trains on); total_steps: the x axis
    runs from 0 to it (the run's length, so that a live chart grows into it). The dotted lines mark a model that
    guesses uniformly: loss ln(V), accuracy 1/V; and `blind_accuracy`, when it is above 1/V (sort's
    explorer.tasks.blind_accuracy), the best accuracy of a guess that ignores the input."""
    uniform_loss, chance = math.log(vocabulary_size), 1.0 / vocabulary_size
    figure = make_subplots(rows=1, cols=2, subplot_titles=(LOSS_TITLE, ACCURACY_TITLE), horizontal_spacing=0.14)
    figure.update_annotations(font=PANEL_TITLE_FONT)
    for norm, history in histories.items():
        name = NORM_NAMES.get(norm, norm)
        line = {"color": NORM_COLOURS.get(norm, "#444444"), "width": 2, "dash": NORM_DASHES.get(norm, "solid")}
        steps = history["step"].to_numpy(dtype=np.int32)  # [n]
        for col, column, numbers in ((1, "loss", ".4f"), (2, "accuracy", ".1%")):
            figure.add_trace(
                go.Scatter(
                    x=steps,
                    y=history[column].to_numpy(dtype=np.float64),
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    mode="lines",
                    line=line,
                    hovertemplate=f"{name}<br>step %{{x}}<br>{column} %{{y:{numbers}}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    _reference(figure, uniform_loss, f"uniform guess ln {vocabulary_size} = {uniform_loss:.2f}", log=True, row=1, col=1)
    _reference(figure, chance, f"chance 1/{vocabulary_size} = {chance:.0%}", row=1, col=2)
    blind = blind_accuracy is not None and blind_accuracy > chance + 1e-9
    if blind:
        _reference(figure, blind_accuracy, f"best blind guess {blind_accuracy:.0%}", row=1, col=2)
    subtitle = (
        "step n: the model after n updates, on the batch it trains on next; dotted: guessing uniformly among the "
        f"{vocabulary_size} tokens" + (", and the best guess that ignores the input" if blind else "")
    )
    layout = figure_layout(title or "Loss and accuracy per training step", subtitle, 280)
    legend_below(layout)
    layout["margin"]["t"] += PANEL_TITLE_PX
    figure.update_layout(layout)
    figure.update_xaxes(axis("step", range=[0, total_steps] if total_steps else None))
    figure.update_yaxes(_loss_axis(histories, uniform_loss), row=1, col=1)
    figure.update_yaxes(axis("accuracy", numbers=".0%", range=[0, 1.02]), row=1, col=2)
    return figure


def pattern_figure(history: pd.DataFrame, task: Task, marked_step: int | None = None) -> go.Figure:
    """How much weight each head puts where the task needs it, over training: a line per head, for the heads that
    end highest (MAX_PATTERN_LINES), highest first; hover gives the head, the step and its weight. A dotted line
    marks attention spread evenly, a vertical one `marked_step`."""
    last = history[history["step"] == history["step"].max()].sort_values("mass", ascending=False)
    shown = list(last["head_label"][:MAX_PATTERN_LINES])
    hidden = last.shape[0] - len(shown)
    more = f" (the {len(shown)} highest of {last.shape[0]})" if hidden else ""
    figure = go.Figure()
    for i, label in enumerate(shown):
        rows = history[history["head_label"] == label].sort_values("step")
        figure.add_trace(
            go.Scatter(
                x=rows["step"].to_numpy(dtype=np.int32),
                y=rows["mass"].to_numpy(dtype=np.float64),
                name=label,
                mode="lines+markers",
                line={"color": CATEGORY10[i % len(CATEGORY10)], "width": 2},
                marker={"size": 7, "symbol": PATTERN_MARKERS[i % len(PATTERN_MARKERS)]},
                hovertemplate=f"{label}<br>step %{{x}}<br>mean weight %{{y:.3f}}<extra></extra>",
            )
        )
    baseline = uniform_mass(task_pattern(task), task_allowed(task))
    _reference(figure, baseline, f"uniform attention {baseline:.3g}", below=True)
    if marked_step is not None:
        figure.add_vline(x=marked_step, line={"color": MARK_COLOUR, "width": 1})
    subtitle = (
        "each head's mean weight on the key each query needs, on the probe input at each snapshot; dotted: attention "
        "spread evenly over the keys each query sees"
        + ("; vertical line: the step shown above" if marked_step is not None else "")
    )
    title = f"weight on {PATTERN_NAMES.get(task.name, 'the needed key')}, per head{more}"
    layout = figure_layout(title, subtitle, PATTERN_PX)
    layout["legend"] |= {"title": {"text": "head"}}
    figure.update_layout(layout, xaxis=axis("step"), yaxis=axis("mean weight", range=[0, 1.02]))
    return figure
