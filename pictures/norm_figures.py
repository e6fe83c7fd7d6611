"""Plotly figures of what a head adds, ‖α·f(x)‖ (Kobayashi et al. 2020), for a notebook and the Attention page's
HTML download: the same colours and scale as the page's norm-based map."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.analysis.norm_attention import norm_attention, removal
from explorer.analysis.stats import attention_matrix
from explorer.model import Transformer
from explorer.trace import AttentionMaps, Trace
from pictures.attention_panels import (
    MEAN_NOTE,
    MEAN_WEIGHT,
    NORM,
    axis_titles,
    norm_scale_note,
    norm_top,
    norm_values,
    plotly_token_labels,
    stretch_top,
)
from pictures.style import BLUES, MASKED_PLOT, masked_map_axes, plotly_scale


def norm_maps_figure(
    maps: AttentionMaps,
    norms: np.ndarray,
    layer: int = 0,
    head: int | None = 0,
    prefix: str = "",
    stretch: bool = False,
    scale: tuple[float, str] | None = None,
    removed: str | None = None,
) -> go.Figure:
    """One map of norms ([L, H, Tq, Tk] ‖α·f(x)‖ of `maps`): head `head`, or the mean of the layer's heads (None),
    from white = 0 to dark blue = the largest of any layer and head, or with `stretch` this map's top 1 %, as the
    Attention page draws it; `scale` = (darkest value, what the subtitle says of it) draws another page's scale
    (Compare's, shared by A and B). Hover gives the weight α too, and for one head the key's ‖f(x)‖. Grey gaps are
    masked keys; `prefix` opens the title. `removed` ("zero" or "mean"): the run removed this head, as
    attention_map_panel draws it (its mean reaches every cell; its weights no longer mix what it adds)."""
    weights = attention_matrix(maps, layer, head)  # [Tq, Tk]; a layer or head the maps lack: ConfigError
    values, extra = norm_values(weights, norms, layer, head, removed)  # [Tq, Tk], hover rows of [Tq, Tk]
    allowed = np.asarray(maps.allowed, dtype=bool)  # [Tq, Tk]
    if MEAN_WEIGHT in extra:  # every query receives the head's mean, from every key
        allowed = np.ones_like(allowed)
    if scale is None:
        own = stretch_top(values, allowed)  # this map's top 1 %
        top = own if stretch else norm_top(norms)
        scale = (top, norm_scale_note(top, stretch, own, values))
    top, note = scale
    note = f"{MEAN_NOTE} · {note}" if MEAN_WEIGHT in extra else note
    hover = f"query %{{y}}<br>key %{{x}}<br>{NORM} %{{z:.4f}}" + "".join(
        f"<br>{title} %{{customdata[{i}]:.4f}}" for i, title in enumerate(extra)
    )
    which = "mean of heads" if head is None else f"head {head}"
    x_title, y_title = axis_titles(maps.kind)
    figure = go.Figure(
        go.Heatmap(
            z=np.where(allowed, values, np.nan),
            x=plotly_token_labels(maps.key_labels),
            y=plotly_token_labels(maps.query_labels),
            customdata=np.stack(list(extra.values()), axis=-1),  # [Tq, Tk, hover rows]
            zmin=0.0,
            zmax=top,
            colorscale=plotly_scale(BLUES),
            colorbar={"title": {"text": NORM}},
            hovertemplate=hover + "<extra></extra>",
        )
    )
    figure.update_layout(
        title={
            "text": f"{prefix}{maps.kind} · layer {layer} · {which} · what it adds ({NORM})"
            + (" · removed" if removed and head is not None else ""),
            "subtitle": {"text": note},
        },
        xaxis_title=x_title,
        yaxis_title=y_title,
        template="plotly_white",
        margin={"t": 90},
        **MASKED_PLOT,
    )
    return masked_map_axes(figure)


def norm_attention_figure(
    model: Transformer,
    trace: Trace,
    layer: int = 0,
    head: int | None = 0,
    kind: str = "self-attention",
    stretch: bool = False,
) -> go.Figure:
    """What head `head` of `layer` adds from each key, ‖α·f(x)‖ (Kobayashi et al. 2020, "Attention is Not Only a
    Weight"), for the attention `kind` of `trace`, run by `model` (the order explorer.norm_attention takes them in);
    head=None: the mean of the layer's heads. `stretch`: colours up to this map's top 1 %, not the largest of any
    layer and head (the Attention page's Stretch colours)."""
    maps = trace.maps(kind)
    removed = removal(trace, maps, layer, head)  # a head the run removed: drawn as the page draws it
    return norm_maps_figure(maps, norm_attention(model, trace, kind), layer, head, stretch=stretch, removed=removed)
