"""Attention figures for the Attention and Train pages as matrix-view panels: maps in, dict out (no
Streamlit here; pictures/boards.py says why these matrices are not Plotly heatmaps)."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from explorer.ablation import Head
from explorer.analysis.norm_attention import mean_mixing
from explorer.analysis.stats import attention_matrix
from explorer.config import PAD_TOKEN
from explorer.norm_export import norm_matrix
from explorer.text_reading import piece_label
from explorer.trace import AttentionMaps, token_axis_labels
from pictures.boards import matrix_panel, sheet_panel
from pictures.style import BLUES, VIRIDIS, Ramp, label_text, layer_head_axes

WEIGHTS = Ramp(BLUES, 0.0, 1.0)  # weight 0 = near white, 1 = dark blue; grey is reserved for masked cells
EMPTY_ROW_MARK = "⊘ "
GRID_MAX_CELLS = 400_000  # all layers x heads x Tq x Tk; above this the HTML download leaves out its Plotly grid
FAINT = 0.2  # when 99 % of a map's weights are below this, it is pale all over on the 0-to-1 scale
STRETCH_QUANTILE = 0.99  # stretched colours are darkest from this quantile up: one outlier cannot wash out the rest
NO_ENTROPY = "no entropy: no query has a key to attend to"
NORM = "‖α·f(x)‖"  # what a head adds from a key (Kobayashi et al. 2020), as titles and hover write it
KEY_SIZE = "‖f(x)‖ of the key"  # hover rows of a norm-based map of one head
REMOVED_WEIGHT = "weight α, still computed"  # a removed head's own weights, which no longer mix its output
MEAN_WEIGHT = "ᾱ, mean over the queries"  # what mixes the output of a head replaced by its mean
MEAN_NOTE = "removed, replaced by its mean: every query gets the same row, from every key, even one it may not see"


def axis_titles(kind: str) -> tuple[str, str]:
    """(x, y) axis titles of a map of attention `kind`: keys across, queries down; in cross-attention the keys are
    the source's tokens (the encoder's output) and the queries the target's (the decoder's)."""
    cross = kind == "cross-attention"
    return ("key (source)", "query (target)") if cross else ("key", "query")


def token_labels(tokens: list[str]) -> list[str]:
    """Unique labels for an axis: a repeated token gets its position, e.g. "the·4". Raw text, not HTML: the matrix
    view draws labels and hover as text (a Plotly figure escapes them with pictures.style.label_text)."""
    labels: list[str] = []
    seen: set[str] = set()
    for i, token in enumerate(tokens):
        label = str(token) or f"·{i}"
        while label in seen:
            label = f"{label}·{i}"
        seen.add(label)
        labels.append(label)
    return labels


def spelled_names(tokens: list[str], byte_level: bool) -> list[str] | None:
    """The names hover writes for byte-level pieces: each axis label (token_labels of their labels) with the
    vocabulary's spelling beside it where the two differ, as the downloads write it ("␣café (piece ĠcafÃ©)"); None
    for other tokens, whose hover writes their labels."""
    if not byte_level:
        return None
    pairs = zip(token_labels(token_axis_labels(tokens, byte_level)), tokens, strict=True)
    return [label if piece_label(token) == token else f"{label} (piece {token})" for label, token in pairs]


def token_hover_names(maps: AttentionMaps) -> tuple[list[str], list[str]] | None:
    """(query names, key names) a byte-level map's hover writes (spelled_names); None for any other map."""
    if not maps.byte_level:
        return None
    return spelled_names(maps.query_tokens, True), spelled_names(maps.key_tokens, True)


def plotly_token_labels(tokens: list[str]) -> list[str]:
    """token_labels as Plotly text (label_text): a token "<b>" is drawn as typed, not as bold."""
    return [label_text(label) for label in token_labels(tokens)]


def stretch_top(weights: np.ndarray, allowed: np.ndarray) -> float:
    """The weight that stretched colours draw darkest: the STRETCH_QUANTILE of the allowed weights ([..., Tq, Tk]
    and [Tq, Tk]); the top 1 % of weights, above it, are drawn darkest too."""
    return top_of(weights[..., np.asarray(allowed, dtype=bool)])  # [..., allowed cells]


def top_of(shown: np.ndarray) -> float:
    """stretch_top of weights already picked: the STRETCH_QUANTILE of them (1 when there are none)."""
    return max(float(np.quantile(shown, STRETCH_QUANTILE)), 1e-6) if shown.size else 1.0


def weight_ramp(top: float | None) -> Ramp:
    """WEIGHTS (0 to 1), or with a `top` (stretch_top) blue from 0 to it: a long input spreads attention thin (1/T
    each when uniform), and on the 0-to-1 scale its map is white all over."""
    return WEIGHTS if top is None else Ramp(BLUES, 0.0, top)


def scale_note(top: float, stretch: bool, what: str = "weights") -> str | None:
    """What a subtitle says of the 0-to-1 blue scale (`top`: stretch_top), on a page with a Stretch colours control:
    that it is stretched, or how to see a faint map. `what` the cells hold: "weights", or "values" (Mixing's)."""
    if stretch:
        return f"colours stretched: darkest blue = {top:.2g} or more (the top 1 % of {what})"
    if top < FAINT:
        return f"99 % of the {what} are below {top:.2g}, so cells are pale: turn on Stretch colours to see the pattern"
    return None


def map_title(maps: AttentionMaps, layer: int, head: int | None) -> str:
    """E.g. "self-attention · layer 0 · head 1" or "... · average of 4 heads"."""
    which = f"head {head}" if head is not None else f"average of {maps.n_heads} heads (not a real head)"
    return f"{maps.kind} · layer {layer} · {which}"


def norm_top(norms: np.ndarray) -> float:
    """Where unstretched norm colours are darkest: the largest ‖α·f(x)‖ of any layer and head ([L, H, Tq, Tk]), so
    a head that adds little is pale next to one that adds much (1e-6 at least). Masked cells are 0 (norm_attention),
    but those of a head replaced by its mean, whose map draws them (mixing_rows), and the rest >= 0, so the largest of
    all cells is the largest drawn one, with no copy of the allowed cells."""
    return max(float(norms.max()), 1e-6) if norms.size else 1.0


def norm_scale_note(top: float, stretch: bool, own: float | None = None, values: np.ndarray | None = None) -> str:
    """What a subtitle says of the colour scale of a norm-based map (`top`: norm_top, or stretched this map's
    stretch_top), and, when this map's own stretch_top `own` is pale on it, how to see its pattern. A map whose
    `values` are 0 in every cell (a head removed with zero) has no pattern to stretch: the note says so instead."""
    if values is not None and not np.any(values):
        return f"colour = {NORM}, what the head adds from each key: 0 in every cell, it adds nothing"
    if stretch:
        return f"colours stretched: darkest blue = {NORM} of {top:.3g} or more (the top 1 % of this map)"
    note = (
        f"colour = {NORM}, what the head adds from each key: white = 0, darkest blue = {top:.3g}, the largest of "
        "any layer and head"
    )
    if own is not None and own < FAINT * top:
        note += f"; 99 % of this map is below {own:.2g}, pale on that scale: turn on Stretch colours to see its pattern"
    return note


def key_value_norms(weights: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """[Tk] ‖f(x_j)‖ of one head, read off its [Tq, Tk] weights and norms (‖α·f(x)‖ = α ‖f(x)‖) at the query that
    weighs each key most; NaN for a key no query weighs."""
    best = np.argmax(weights, axis=0)  # [Tk]
    keys = np.arange(weights.shape[1])
    alpha = weights[best, keys].astype(np.float64)  # [Tk]
    return np.divide(norms[best, keys], alpha, out=np.full(alpha.shape, np.nan), where=alpha > 0).astype(np.float32)


def mixing_rows(weights: np.ndarray) -> np.ndarray:
    """[Tq, Tk]: mean_mixing of a head replaced by its mean (weights [Tq, Tk]), the same row for every query: the very
    weights norm_attention multiplies its ‖f(x)‖ by."""
    return np.broadcast_to(mean_mixing(weights), weights.shape)  # [Tq, Tk]


def norm_values(
    weights: np.ndarray, norms: np.ndarray, layer: int, head: int | None, removed: str | None = None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The [Tq, Tk] ‖α·f(x)‖ a norm-based map colours (a head's, or the mean of the layer's heads), and the hover
    rows beside it, {title: [Tq, Tk]}: the weight α, and each key's ‖f(x)‖ for one head. A head the run `removed`
    ("zero" or "mean") still computes its weights α, but they no longer mix its output: removed with zero, nothing
    arrives and no ‖f(x)‖ can be read off; removed with its mean, ᾱ (mixing_rows) mixes it, and ‖f(x)‖ is read off
    ‖ᾱ·f(x)‖."""
    values = norm_matrix(norms, layer, head)  # [Tq, Tk]
    if head is None:
        return values, {"mean weight α": weights}
    if removed == "zero":
        return values, {REMOVED_WEIGHT: weights}
    if removed == "mean":
        mixing = mixing_rows(weights)  # [Tq, Tk]
        sizes = key_value_norms(mixing, values)  # [Tk]
        return values, {REMOVED_WEIGHT: weights, MEAN_WEIGHT: mixing, KEY_SIZE: np.broadcast_to(sizes, values.shape)}
    sizes = key_value_norms(weights, values)  # [Tk]
    return values, {"weight α": weights, KEY_SIZE: np.broadcast_to(sizes, values.shape)}


def _map_parts(
    maps: AttentionMaps,
    layer: int,
    head: int | None,
    window: tuple[int, int, int, int] | None,
    stretch: bool | None = None,
    norms: np.ndarray | None = None,
    removed: str | None = None,
) -> tuple[dict, list[str]]:
    """What any drawing of one attention map shows: the matrix arguments, and the notes for its subtitle. With
    `norms` ([L, H, Tq, Tk] ‖α·f(x)‖), they colour the map and the weights go to the hover; `removed` as in
    norm_values."""
    weights = attention_matrix(maps, layer, head)  # [Tq, Tk]
    values, extra = (weights, {}) if norms is None else norm_values(weights, norms, layer, head, removed)
    allowed = np.asarray(maps.allowed, dtype=bool)  # [Tq, Tk]
    empty = maps.empty_rows  # [Tq]
    if MEAN_WEIGHT in extra:  # every query receives the head's mean, from every key: no cell is masked from it
        allowed, empty = np.ones_like(allowed), np.zeros_like(empty)
    queries = token_labels(maps.query_labels)
    keys = token_labels(maps.key_labels)
    tq, tk = weights.shape
    q0, q1, k0, k1 = window or (0, tq, 0, tk)
    if not (0 <= q0 < q1 <= tq and 0 <= k0 < k1 <= tk):
        raise ValueError(f"window {window} is outside the {tq} x {tk} map")
    rows, cols = slice(q0, q1), slice(k0, k1)
    values, allowed, empty = values[rows, cols], allowed[rows, cols], empty[rows]  # [q1 - q0, k1 - k0]
    extra = {title: row[rows, cols] for title, row in extra.items()}
    notes = [MEAN_NOTE] if MEAN_WEIGHT in extra else []
    if (q1 - q0, k1 - k0) != (tq, tk):
        notes.append(f"queries {q0}–{q1 - 1} and keys {k0}–{k1 - 1} of {tq} × {tk}")
    n_masked = int((~allowed).sum())
    if n_masked:
        notes.append(f"grey = masked, may not attend ({n_masked} of {allowed.size} cells)")
    if empty.any():
        notes.append(f"{EMPTY_ROW_MARK.strip()} = query with no allowed key: its row is all zeros")
    if _padding_queries_attend(maps, rows):
        notes.append(f"{PAD_TOKEN} rows still attend: padding hides {PAD_TOKEN} keys, not queries (as in PyTorch)")
    if norms is None:
        top = None if stretch is None else stretch_top(values, allowed)  # one quantile, for the colours and the note
        ramp = weight_ramp(top if stretch else None)
        notes.append(None if top is None else scale_note(top, stretch))
    else:
        own = stretch_top(values, allowed)  # this map's top 1 %: where stretched colours are darkest
        top = own if stretch else norm_top(norms)
        ramp = weight_ramp(top)
        notes.append(norm_scale_note(top, bool(stretch), None if stretch is None else own, values))
    x_title, y_title = axis_titles(maps.kind)
    value_title = "mean weight" if head is None else "weight"
    if norms is not None:
        value_title = f"mean {NORM} of the heads" if head is None else NORM
    parts = {
        "values": values,
        "allowed": allowed,
        "ramp": ramp,
        "x_labels": keys[cols],
        "y_labels": [EMPTY_ROW_MARK + q if e else q for q, e in zip(queries[rows], empty, strict=True)],
        "x_title": x_title,
        "y_title": y_title,
        "value_title": value_title,
        "title": map_title(maps, layer, head) + ("" if norms is None else " · what it adds"),
        "extra": extra,
    }
    names = token_hover_names(maps)
    if names is not None:
        parts["hover_names"] = (names[0][rows], names[1][cols])
    return parts, [note for note in notes if note]


def _padding_queries_attend(maps: AttentionMaps, rows: slice) -> bool:
    """Whether a padding mask hides the [PAD] keys while some shown [PAD] query still attends to other keys: what a
    learner may take for a bug (torch's key_padding_mask masks keys only)."""
    pad_keys = np.array([t == PAD_TOKEN for t in maps.key_tokens])  # [Tk]
    pad_queries = np.array([t == PAD_TOKEN for t in maps.query_tokens])[rows]  # [rows]
    allowed = np.asarray(maps.allowed, dtype=bool)  # [Tq, Tk]
    keys_hidden = pad_keys.any() and not allowed[:, pad_keys].any()
    return bool(keys_hidden and (pad_queries & allowed[rows].any(axis=1)).any())


def attention_map_panel(
    maps: AttentionMaps,
    layer: int,
    head: int | None,
    name: str = "map",
    max_px: int = 640,
    window: tuple[int, int, int, int] | None = None,
    stretch: bool | None = None,
    norms: np.ndarray | None = None,
    removed: str | None = None,
) -> dict:
    """One attention map as a matrix-view panel: keys across, queries down (first on top); grey = masked; ⊘ = no
    allowed key; every cell hovers. `window` = (first query, end query, first key, end key) draws only that part
    of the map, with its own labels and bigger cells. Colours run from 0 to 1, or with `stretch` from 0 to the
    weight most shown weights are below (weight_ramp); None: 0 to 1 on a page with no Stretch colours control.
    With `norms` ([L, H, Tq, Tk] ‖α·f(x)‖, Kobayashi et al. 2020) the map shows what the head adds from each key,
    from 0 to norm_top (the largest of any layer and head) or, stretched, to this map's top 1 %; hover gives the
    weight α too, and for one head the key's ‖f(x)‖. `removed` ("zero" or "mean", with `norms` and one head): the run
    removed this head, whose weights then no longer mix what it adds (norm_values); its mean reaches every cell."""
    parts, notes = _map_parts(maps, layer, head, window, stretch, norms, removed)
    return matrix_panel(**parts, name=name, subtitle=" · ".join(notes) or None, max_px=max_px)


def grid_cells(maps: AttentionMaps) -> int:
    """How many cells attention_grid would draw (layers x heads x queries x keys)."""
    return int(np.prod(maps.weights.shape))


def grid_map_px(n_heads: int, width_px: int = 880) -> int:
    """Pixels along the longer side of each small map in the grid: a row of heads fits in width_px."""
    return int(min(200, max(40, width_px / (1.12 * n_heads))))


def grid_panel(
    maps: AttentionMaps,
    width_px: int = 880,
    picked: tuple[int, int] | None = None,
    pickable: bool = True,
    stretch: bool = False,
    norms: np.ndarray | None = None,
    mean_removed: Collection[Head] = (),
) -> dict:
    """Every layer (rows) x head (columns) as a small map titled "L0 H1", all on one sheet panel; when `pickable`, a
    click on one sends back {"layer": ..., "head": ...}. The map `picked` (layer, head) is framed. With `stretch`,
    one colour scale for every map (weight_ramp over them all), so the maps stay comparable. With `norms`
    ([L, H, Tq, Tk] ‖α·f(x)‖) the maps show those, on one scale from 0 to norm_top (stretched: to the top 1 % of
    them all), so the heads that add little are pale; the heads `mean_removed` (replaced by their mean) are drawn on
    every cell, as their large map is: what they add reaches every query from every key."""
    n_layers, n_heads, tq, tk = maps.weights.shape  # [L, H, Tq, Tk]
    shown = maps.weights if norms is None else np.asarray(norms, dtype=np.float32)  # [L, H, Tq, Tk]
    top, scale = grid_scale(shown, maps.allowed, stretch, norms is not None)
    layer_heads = [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
    titles = [f"L{layer} H{head}" for layer, head in layer_heads]
    sheet = sheet_panel(
        shown.reshape(n_layers * n_heads, tq, tk),  # [L * H, Tq, Tk]: layer by layer, heads in order
        maps.allowed,
        weight_ramp(top),
        name="grid",
        titles=titles,
        columns=n_heads,
        max_px=grid_map_px(n_heads, width_px),
        hovers=[f"{title}: click to show it large above" if pickable else title for title in titles],
        picks=[{"layer": layer, "head": head} for layer, head in layer_heads] if pickable else None,
        picked=None if picked is None else picked[0] * n_heads + picked[1],
        title="All layers × heads" + ("" if norms is None else f" · what each head adds ({NORM})"),
        subtitle="Rows are layers, columns are heads."
        + (" Click a map to show it large (framed in red)." if pickable else "")
        + ("" if not scale else f" {scale}"),
        whole=[layer * n_heads + head for layer, head in mean_removed] if norms is not None else (),
    )
    return sheet


def grid_scale(shown: np.ndarray, allowed: np.ndarray, stretch: bool, norms: bool) -> tuple[float | None, str]:
    """The one colour scale of every map of a grid ([L, H, Tq, Tk] `shown`: weights, or ‖α·f(x)‖ when `norms`):
    where its darkest blue is (None: at 1, the weights' own end) and the sentence that says so ("" for weights from
    0 to 1). Stretched, the top 1 % of the allowed cells of every map at once."""
    top = stretch_top(shown, allowed) if stretch else None
    if not norms:
        return top, "" if top is None else (
            f"Colours stretched, one scale for all: darkest blue = {top:.2g} or more (the top 1 % of weights)."
        )
    top = top if stretch else norm_top(shown)
    ends = " or more (the top 1 % of them all)." if stretch else ", the largest; the heads that add little are pale."
    return top, f"Colour = {NORM}, what each head adds from each key, one scale for all: darkest blue = {top:.3g}{ends}"


def _entropy_parts(df: pd.DataFrame, note: str | None = None) -> dict:
    """The [layer, head] entropy matrix and how it is drawn (matrix_panel's arguments but its name)."""
    n_layers = int(df["layer"].max()) + 1
    n_heads = int(df["head"].max()) + 1
    ent = np.full((n_layers, n_heads), np.nan, dtype=np.float32)  # [L, H]
    ent[df["layer"], df["head"]] = df["entropy"]
    max_entropy = float(df["max_entropy"].iloc[0])
    top = max_entropy if np.isfinite(max_entropy) and max_entropy > 0 else 1.0
    defined = np.isfinite(ent)  # [L, H]: NaN only when no query has a key to attend to
    return {
        "values": ent,
        "allowed": None if defined.all() else defined,
        "masked_text": NO_ENTROPY,
        "ramp": Ramp(VIRIDIS, 0.0, top),
        **layer_head_axes(n_layers, n_heads),
        "value_title": "entropy (nats)",
        "title": "Mean attention entropy per head (nats)",
        "max_px": min(600, 48 * max(n_layers, n_heads)),
        "subtitle": entropy_scale_note(max_entropy) + ("" if note is None else f". {note}"),
    }


def entropy_scale_note(max_entropy: float) -> str:
    """What the entropy panel's scale means, from head_entropy's max_entropy: NaN when no query has a key to attend
    to, 0 when every query may see only one key (the one piece of a causal model)."""
    if not np.isfinite(max_entropy):
        return "no query of this input has a key to attend to (every row is all zeros), so no head has an entropy"
    if max_entropy <= 0:
        return "every query may see only one key, so every head's entropy is 0: it has no choice to spread over"
    return f"0 = each query looks at one key; {max_entropy:.2f} = uniform over the allowed keys"


def entropy_panel(df: pd.DataFrame, note: str | None = None) -> dict:
    """Mean attention entropy per head as a [layer, head] matrix-view panel, coloured from 0 (one-hot) to uniform;
    `note` ends its subtitle."""
    return matrix_panel(**_entropy_parts(df, note), name="entropy")
