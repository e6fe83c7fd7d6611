"""Plotly figures of a Trace, a model or a training run, for a notebook: they draw inline in Jupyter with no
network (in a kernel the figure's data travels, which the jupyterlab-plotly extension shipped with plotly draws;
fig.write_html and fig.to_html put plotly.js itself in the file) and save as any Plotly figure.

The colour scales are the app's own (pictures.style: BLUES for weights, RDBU for differences), so a figure in a
notebook reads like the same map on a page.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import plotly.graph_objects as go
import torch

from explorer.analysis.ablation_effects import head_ablation_effects
from explorer.analysis.activations import layer_statistics
from explorer.analysis.attribution import logit_attribution
from explorer.analysis.gradients import gradient_norms, layer_gradient_totals
from explorer.analysis.logit_lens import logit_lens, output_stack, reads_next_piece
from explorer.analysis.norm_attention import removed_heads
from explorer.analysis.placements import placement_run
from explorer.analysis.position_analysis import (
    MAX_PLOTTED_POSITIONS,
    check_range,
    default_dimensions,
    encoding_table,
    rope_angle_table,
    similarity,
)
from explorer.analysis.stats import check_layer_head, head_average
from explorer.anatomy import norm_name, parameter_counts, parameter_groups
from explorer.arguments import whole_in
from explorer.build import build_model
from explorer.compare import paired_attention
from explorer.config import PAD_TOKEN, CheckpointConfig, ConfigError
from explorer.inputs import Source
from explorer.model import Transformer
from explorer.positional import positional_of
from explorer.tasks import blind_accuracy
from explorer.trace import AttentionMaps, Trace
from explorer.training import TrainResult
from pictures import activation_charts

# Made beside the pages that draw them, offered here with the rest (explorer.FIGURES): re-exported by name.
from pictures.activation_charts import massive_share_figure as massive_share_figure
from pictures.activation_charts import token_norm_figure as token_norm_figure
from pictures.attention_panels import (
    NORM,
    axis_titles,
    grid_cells,
    grid_scale,
    plotly_token_labels,
    scale_note,
    top_of,
)
from pictures.compare_charts import difference_scale
from pictures.mixing_charts import flow_figure as flow_figure
from pictures.mixing_charts import rollout_figure as rollout_figure
from pictures.norm_figures import norm_attention_figure as norm_attention_figure
from pictures.output_charts import ablation_board_figure, attribution_board_figure, lens_grid_figure
from pictures.placement_charts import placements_chart
from pictures.positional_charts import encoding_curves, pair_dimensions
from pictures.style import BLUES, MASKED_PLOT, RDBU, masked_map_axes, plotly_scale
from pictures.training_charts import curves_figure, training_title

AVERAGE = None  # head=None: the plain mean of a layer's heads
GRID_BYTES_PER_CELL = 13  # measured: MiniLM's 72 maps of 61 x 61 pieces (276,768 cells) made 3.6 MB of figure JSON
GRID_FIGURE_CELLS = 2_000_000  # about 26 MB of figure, what a notebook still saves and opens without a stall
LENS_FIGURE_K = 20  # the most pieces a logit-lens cell's hover lists: more is taller than a screen (the page lists 5)
ROPE_LAYOUTS = ("interleaved", "half")
GRADIENT_OBJECTIVE = (  # the page's chart ends "for the objective stated above", in a box a notebook does not have
    "for a next-token loss: each position predicts the token after it (in full: "
    "explorer.analysis.gradients.objective_text(model))"
)


def _needs(value: object, kind: type, function: str, what: str) -> None:
    """TypeError naming what `function` takes when `value` is not a `kind`: a model passed where a trace goes (or the
    other way round) had failed deep inside with "'Transformer' object has no attribute 'maps'"."""
    if not isinstance(value, kind):
        raise TypeError(f"{function} takes {what}; got a {type(value).__name__}.")


def _trace(value: object, function: str) -> None:
    _needs(value, Trace, function, "a Trace (what explorer.run returns)")


def _model(value: object, function: str) -> None:
    _needs(value, Transformer, function, "a model (explorer.load_pretrained, explorer.build_model) first")


def _weights(maps: AttentionMaps, layer: int, head: int | None) -> np.ndarray:
    """[Tq, Tk] one head's weights, or the head average; masked cells are NaN (drawn as gaps)."""
    shown = head_average(maps, layer) if head is None else maps.weights[layer, head].astype(np.float64)
    return np.where(maps.allowed, shown, np.nan)


def _heatmap(
    maps: AttentionMaps, values: np.ndarray, visible: bool = True, top: float = 1.0, what: str = "weight"
) -> go.Heatmap:
    """One map's heatmap, blue from 0 to `top`; `what` the cells hold names the colour bar and the hover's value."""
    return go.Heatmap(
        z=values,
        x=plotly_token_labels(maps.key_labels),
        y=plotly_token_labels(maps.query_labels),
        zmin=0.0,
        zmax=top,
        colorscale=plotly_scale(BLUES),
        colorbar={"title": {"text": what}},
        hovertemplate=f"query %{{y}}<br>key %{{x}}<br>{what} %{{z:.4f}}<extra></extra>",
        visible=visible,
    )


def _map_layout(figure: go.Figure, title: str, subtitle: str | None = None, kind: str = "") -> go.Figure:
    """A map's title, axes (named for attention `kind`: a cross-attention map's keys are the source's tokens) and
    look."""
    heading = {"text": title, **({"subtitle": {"text": subtitle}} if subtitle else {})}
    x_title, y_title = axis_titles(kind)
    figure.update_layout(
        title=heading, xaxis_title=x_title, yaxis_title=y_title, template="plotly_white", **MASKED_PLOT
    )
    return masked_map_axes(figure)


def attention_figure(
    trace: Trace, layer: int = 0, head: int | None = 0, kind: str = "self-attention", stretch: bool = False
) -> go.Figure:
    """One layer's attention: head `head`, or the average of its heads (head=None). Grey gaps are masked keys.
    Colours from 0 to 1, or with `stretch` to the map's top 1 % of weights (the pages' Stretch colours)."""
    _trace(trace, "attention_figure")
    return maps_figure(trace.maps(kind), layer, head, stretch=stretch)


def maps_figure(
    maps: AttentionMaps,
    layer: int = 0,
    head: int | None = 0,
    prefix: str = "",
    stretch: bool = False,
    top: float | None = None,
) -> go.Figure:
    """attention_figure of one kind of attention maps (a trace's, or Compare's A or B); `prefix` opens the title.
    Stretched, the darkest blue is `top` when given (a scale shared with another map: Compare's A and B), else this
    map's stretch_top; the subtitle says so, or that an unstretched map is pale (scale_note)."""
    check_layer_head(maps, layer, head)
    values = _weights(maps, layer, head)  # [Tq, Tk], NaN where masked
    own = top_of(values[np.isfinite(values)]) if top is None else top
    which = "average of heads" if head is None else f"head {head}"
    figure = go.Figure(_heatmap(maps, values, top=own if stretch else 1.0))
    return _map_layout(figure, f"{prefix}{maps.kind} · layer {layer} · {which}", scale_note(own, stretch), maps.kind)


def attention_grid_figure(
    trace: Trace,
    kind: str = "self-attention",
    max_cells: int = GRID_FIGURE_CELLS,
    stretch: bool = False,
    norms: np.ndarray | None = None,
) -> go.Figure:
    """Every layer x head in one figure, with a slider to pick the map (each map its own trace, one visible), drawn
    as the Attention page's grid: colours from 0 to 1, or with `stretch` one scale for every map, up to the top 1 %
    of them all. `norms` ([L, H, Tq, Tk], explorer.norm_attention of this trace and kind) draws what each head adds,
    ‖α·f(x)‖, on one scale up to the largest (stretched: the top 1 % of them all); a head the run replaced by its
    mean is drawn on every cell, since what it adds reaches every query. A removed head's map is titled so. A grid of
    more than `max_cells` cells (layers x heads x queries x keys) is refused with a sentence: every map travels in
    the figure, about 13 bytes a cell, so MiniLM on 254 pieces made 58 MB. Pass a larger max_cells to draw it."""
    _trace(trace, "attention_grid_figure")
    maps = trace.maps(kind)
    cells = grid_cells(maps)
    if cells > whole_in("max_cells", max_cells, 1):
        raise ConfigError(
            f"This grid holds {cells:,} cells ({maps.n_layers} layers × {maps.n_heads} heads × "
            f"{maps.weights.shape[2]} × {maps.weights.shape[3]}), about {cells * GRID_BYTES_PER_CELL / 1e6:.0f} MB "
            f"in the figure, more than max_cells ({max_cells:,}). attention_figure draws one map; pass "
            f"max_cells={cells} to draw the grid anyway."
        )
    shown = maps.weights if norms is None else np.asarray(norms)  # [L, H, Tq, Tk]
    if shown.shape != maps.weights.shape:
        raise ConfigError(
            f"norms holds {list(shown.shape)} values and the {kind} maps {list(maps.weights.shape)}: pass "
            f"explorer.norm_attention(model, trace, {kind!r}) of this very trace."
        )
    top, note = grid_scale(shown, maps.allowed, stretch, norms is not None)
    removed = set(removed_heads(trace, maps))
    whole = removed if norms is not None and trace.ablate_with == "mean" else set()

    def drawn(layer: int, head: int) -> np.ndarray:  # [Tq, Tk], NaN where masked (drawn as gaps)
        values = shown[layer, head].astype(np.float64)
        return values if (layer, head) in whole else np.where(maps.allowed, values, np.nan)

    def title(layer: int, head: int) -> str:
        adds = "" if norms is None else f" · what it adds ({NORM})"
        return f"{kind} · layer {layer} · head {head}{adds}" + (" · removed" if (layer, head) in removed else "")

    what = "weight" if norms is None else NORM
    pairs = [(layer, head) for layer in range(maps.n_layers) for head in range(maps.n_heads)]
    figure = go.Figure(
        [_heatmap(maps, drawn(*pair), visible=i == 0, top=top or 1.0, what=what) for i, pair in enumerate(pairs)]
    )
    steps = [
        {
            "label": f"L{layer} H{head}" + (" · removed" if (layer, head) in removed else ""),
            "method": "update",
            "args": [{"visible": [j == i for j in range(len(pairs))]}, {"title.text": title(layer, head)}],
        }
        for i, (layer, head) in enumerate(pairs)
    ]
    figure.update_layout(sliders=[{"active": 0, "steps": steps, "currentvalue": {"prefix": "map "}}])
    return _map_layout(figure, title(*pairs[0]), note or None, kind)


def difference_figure(
    trace_a: Trace, trace_b: Trace, layer: int = 0, head: int = 0, stretch: bool = False
) -> go.Figure:
    """A − B for one layer and head of the first stack's self-attention (both runs on inputs of one length), from
    −largest to +largest |A − B|, or with `stretch` to the top 1 % of |A − B| (Compare's Stretch colours)."""
    _trace(trace_a, "difference_figure")
    _trace(trace_b, "difference_figure")
    pair = paired_attention(trace_a, trace_b)[0]
    return maps_difference_figure(pair.a, pair.b, layer, head, stretch)


def maps_difference_figure(
    a: AttentionMaps | None, b: AttentionMaps | None, layer: int = 0, head: int = 0, stretch: bool = False
) -> go.Figure:
    """difference_figure of two sets of maps of one shape."""
    if a is None or b is None or a.weights.shape != b.weights.shape:
        raise ConfigError("A and B need maps of the same shape (the same number of layers, heads and tokens).")
    layer, head = whole_in("layer", layer, 0, a.n_layers - 1), whole_in("head", head, 0, a.n_heads - 1)
    difference = a.weights[layer, head].astype(np.float64) - b.weights[layer, head]  # [Tq, Tk]
    either = np.asarray(a.allowed, bool) | np.asarray(b.allowed, bool)  # [Tq, Tk]
    top, note = difference_scale(np.where(either, difference, np.nan), stretch)
    figure = go.Figure(
        go.Heatmap(
            z=np.where(either, difference, np.nan),  # masked in both: grey, as on Compare, not a difference of 0
            x=plotly_token_labels(a.key_labels),
            y=plotly_token_labels(a.query_labels),
            zmin=-top,
            zmax=top,
            colorscale=plotly_scale(RDBU[::-1]),  # blue: A attends more, red: B attends more, as on Compare
            colorbar={"title": {"text": "A − B"}},
            hovertemplate="query %{y}<br>key %{x}<br>A − B %{z:.4f}<extra></extra>",
        )
    )
    return _map_layout(figure, f"A − B · layer {layer} · head {head} (blue: A attends more, red: B)", note, a.kind)


def positional_figure(
    model: Transformer, n_positions: int = 64, dims: list[int] | None = None, tokens: list[str] | None = None
) -> go.Figure:
    """The vector a sinusoidal or learned encoding adds at each position, one curve per dimension: the Positional
    page's chart. `dims`: the page's spread of sine/cosine pairs when None; `tokens` (say trace.tokens): their
    positions are shaded and marked in red, with the token on hover, as the page marks the typed tokens."""
    _model(model, "positional_figure")
    table = _position_table(model, n_positions, "there are no curves to draw")  # [P, D]
    dims = default_dimensions(table.shape[1]) if dims is None else list(dims)
    check_range(n_positions, dims, table.shape[1])  # a dimension the model lacks: a sentence, not an IndexError
    kind = model.positional.kind
    return encoding_curves(table, dims, list(tokens or []), kind, kind == "learned" and _trained_table(model))


def _position_table(model: Transformer, n_positions: int, missing: str) -> np.ndarray:
    """[P, D] the vectors the model adds at positions 0..n_positions-1; ConfigError for a count outside 1..4096 (0 had
    drawn nothing, -5 the table's every row but its last five) or a model that adds none."""
    n_positions = whole_in("n_positions", n_positions, 1, MAX_PLOTTED_POSITIONS)
    table = encoding_table(model, n_positions)  # [P, D] or None
    if table is None:
        raise ConfigError(f"This model adds no position vectors (rotary or none): {missing}.")
    return table


def _trained_table(model: Transformer) -> bool:
    """Whether a learned position table holds anything but the random values its config and seed start from."""
    if isinstance(model.config, CheckpointConfig):
        return True
    if model.config is None:
        return False
    start = build_model(model.config, model.vocabulary).positional.table  # [P_max, D]
    return not torch.equal(start, model.positional.table)


def position_similarity_figure(model: Transformer, n_positions: int = 64, metric: str = "cosine") -> go.Figure:
    """How alike the position vectors are, position against position (cosine, or dot product)."""
    _model(model, "position_similarity_figure")
    sim = similarity(_position_table(model, n_positions, "there is nothing to compare"), metric)  # [P, P]
    top = float(np.abs(sim).max()) or 1.0
    figure = go.Figure(
        go.Heatmap(
            z=sim,
            zmin=-top,
            zmax=top,
            colorscale=plotly_scale(RDBU),  # as the Positional page: -1 blue, +1 red
            colorbar={"title": {"text": metric}},
            hovertemplate=f"position %{{y}} vs %{{x}}<br>{metric} %{{z:.4f}}<extra></extra>",
        )
    )
    figure.update_layout(title=f"Similarity of position vectors ({metric})", template="plotly_white")
    figure.update_xaxes(title="position")
    figure.update_yaxes(title="position", autorange="reversed")
    return figure


def depth_figure(trace: Trace, stack: int = 0) -> go.Figure:
    """The residual stream and each sub-layer's output over depth: mean, std, RMS and max |x|, one panel each (the
    Activations page's chart); `stack`: 0, or 1 for an encoder-decoder's decoder."""
    _trace(trace, "depth_figure")
    positional = positional_of(trace.config)
    part = activation_charts.trace_stack(trace, stack)
    family = getattr(trace.config, "family", None)  # a BERT checkpoint's input row is normalised
    padded = PAD_TOKEN in part.tokens  # their rows are in the statistics, and the subtitle says so
    return activation_charts.depth_figure(layer_statistics(part), part.name, positional, family, padded)


def gradient_figure(model: Transformer, source: Source, target: Source | None = None) -> go.Figure:
    """The gradient norm of each block's parameters, for the next-token loss explorer.analysis.gradients.objective_text
    states (the Activations page's chart, whose subtitle here names that loss: the page states it above the chart)."""
    _model(model, "gradient_figure")
    totals = layer_gradient_totals(gradient_norms(model, source, target))
    return activation_charts.gradient_totals_figure(totals, model.first_stack.spec.placement, GRADIENT_OBJECTIVE)


def placements_figure(
    model: Transformer, source: Source, target: Source | None = None, stack: str | None = None
) -> go.Figure:
    """All four norm placements on the model's very weights (explorer.placement_run; norms it lacks start at
    identity): residual RMS over depth, gradient norm per block, attention entropy per layer, one line per placement
    (Compare's "All four placements"); `stack`: "encoder" or "decoder" of an encoder-decoder, None the first."""
    _model(model, "placements_figure")
    if stack is not None and stack not in model.stack_names:
        names = " or ".join(repr(name) for name in model.stack_names)
        raise ConfigError(f"stack is {names} for this model, or None for the first; got {stack!r}.")
    return placements_chart(placement_run(model, source, target), stack)


def training_figure(result: TrainResult) -> go.Figure:
    """Loss (log scale) and accuracy against the step of a training run (explorer.training.train's result): the
    Train page's learning curves for this one run, with the uniform-guess loss and chance accuracy dotted (and, for
    sort, the accuracy of the best guess that ignores the input)."""
    _needs(result, TrainResult, "training_figure", "what explorer.train returns")
    task, histories = result.task, {result.model.config.norm: result.history}
    return curves_figure(
        histories, len(task.vocabulary), result.steps or None, training_title(task), blind_accuracy(task)
    )


def _check_rope(n_positions: object, d_head: object, base: object, layout: object) -> None:
    """ConfigError for rotary settings no model has: n_positions=-3 had raised torch's "upper bound and lower bound
    inconsistent", and an odd or zero d_head, a base of 0 (angles NaN) or an unknown layout had drawn a figure."""
    whole_in("n_positions", n_positions, 1, MAX_PLOTTED_POSITIONS)
    if whole_in("d_head", d_head, 2) % 2:
        raise ConfigError(f"d_head is even: rotary encoding turns pairs of a head's dimensions; got {d_head}.")
    if not (isinstance(base, numbers.Real) and math.isfinite(base) and base > 0):
        raise ConfigError(f"base is a positive number (theta: 10,000 in the paper, 100,000 in SmolLM2); got {base!r}.")
    if layout not in ROPE_LAYOUTS:
        pairs = "'interleaved' (pairs 2i, 2i+1) or 'half' (pairs i, i + d_head/2)"
        raise ConfigError(f"layout is {pairs}; got {layout!r}.")


def rope_angle_figure(n_positions: int, d_head: int, base: float = 10000.0, layout: str = "interleaved") -> go.Figure:
    """The angle (degrees, modulo 360) rotary encoding turns each pair of a head by, at each position; `layout`:
    which dimensions make a pair: "interleaved" (2i, 2i+1), the paper's, or "half" (i, i + d_head/2), a Llama's."""
    _check_rope(n_positions, d_head, base, layout)
    angles = np.degrees(np.mod(rope_angle_table(n_positions, d_head, base), 2 * np.pi))  # [P, K/2]
    figure = go.Figure(
        go.Heatmap(
            z=angles,
            zmin=0.0,
            zmax=360.0,
            colorscale="twilight",  # cyclic: 0 and 360 degrees look alike, as on the Positional page
            colorbar={"title": {"text": "angle (°)"}},
            hovertemplate="position %{y}, pair %{x}<br>%{z:.1f}°<extra></extra>",
        )
    )
    figure.update_layout(title=f"Rotary angles (base {base:,.0f})", template="plotly_white")
    figure.update_xaxes(title=f"pair i ({pair_dimensions(layout)} of each head)")
    figure.update_yaxes(title="position", autorange="reversed")
    return figure


def parameters_figure(model: Transformer) -> go.Figure:
    """The model's parameters by kind of module (self-attention, feed-forward, its norms ...), largest first."""
    _model(model, "parameters_figure")
    groups = parameter_groups(parameter_counts(model), norm_name(model.config))
    figure = go.Figure(
        go.Bar(x=groups["group"], y=groups["parameters"], hovertemplate="%{x}: %{y:,} parameters<extra></extra>")
    )
    total = int(groups["parameters"].sum())
    figure.update_layout(
        title=f"{total:,} parameters by kind of module", yaxis_title="parameters", template="plotly_white"
    )
    return figure


def logit_lens_figure(model: Transformer, trace: Trace, k: int = 1) -> go.Figure:
    """Every layer's guess (the logit lens, nostalgebraist 2020): blocks x positions of the top next piece read out
    after each block through the final norm and the read-out, coloured by its probability; hover lists the k
    likeliest (k from 1 to LENS_FIGURE_K: explorer.logit_lens gives more, as a table). The model needs a read-out to a
    vocabulary (SmolLM2, a trained model): others get a ConfigError saying why."""
    _model(model, "logit_lens_figure")
    k = whole_in("k", k, 1, LENS_FIGURE_K)  # the hover's lines: k = 49,152 had run for minutes towards 240 MB
    lens = logit_lens(model, trace, k)
    final_norm = output_stack(model, trace).norm is not None  # a post-norm stack has none: the subtitle says so
    return lens_grid_figure(lens, trace.last.labels, final_norm, next_piece=reads_next_piece(model))


def attribution_figure(model: Transformer, trace: Trace, piece: str | int | None = None) -> go.Figure:
    """Which heads make the prediction: layers x heads of each head's direct effect on the logit of `piece` (its
    spelling, its id, or None: the top next piece) at the last position, red up, blue down; the heads the run removed
    are crossed."""
    _model(model, "attribution_figure")
    removed = trace.ablated if len(trace.stacks) == 1 else ()  # removal reaches the first stack's heads only
    return attribution_board_figure(logit_attribution(model, trace, piece), removed)


def ablation_figure(
    model: Transformer,
    source: Source,
    target: Source | None = None,
    mode: str = "zero",
    *,
    mask: torch.Tensor | None = None,
    target_mask: torch.Tensor | None = None,
    memory_mask: torch.Tensor | None = None,
) -> go.Figure:
    """Layers x heads of what removing each head alone does to the sentence embedding, 1 − cosine (MiniLM's board;
    any model works): every head in batched runs (explorer.head_ablation_effects), with `mode` "zero" or "mean", and
    an imported model's masks as explorer.run takes them."""
    _model(model, "ablation_figure")
    masks = {"mask": mask, "target_mask": target_mask, "memory_mask": memory_mask}
    return ablation_board_figure(head_ablation_effects(model, source, target, mode, **masks))
