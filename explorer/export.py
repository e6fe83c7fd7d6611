"""Downloads of the attention a page shows: a tidy CSV and a self-describing JSON."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from explorer.ablation import Head, head_name
from explorer.analysis.stats import attention_frame, attention_matrix
from explorer.config import ConfigError, ModelConfig
from explorer.trace import AttentionMaps

MASK_NOTE = (
    "allowed[q][k] is true when query q may attend to key k; where it is false the weight is exactly 0 (masked). "
    "Rows listed in empty_rows have no allowed key: all their weights are 0, not a distribution."
)

REMOVED_NOTE = (
    "heads_removed were removed in this run (their output, the weighted sum of values before the output projection, "
    "set as removed_with says: zero, or its mean over the positions). A removed head still computes the weights "
    "written here; every layer after the first removed head reads a changed stream, so its weights differ from the "
    "full model's."
)


def head_label(head: int | None) -> int | str:
    """The head as exports name it: its index, or "mean" for the average of heads."""
    return "mean" if head is None else head


def export_name(kind: str, layer: int, head: int | None, ext: str) -> str:
    """A file name that says what is inside, e.g. attention_self-attention_L0_H1.csv."""
    return f"attention_{kind.replace(' ', '-')}_L{layer}_H{head_label(head)}.{ext}"


def export_frame(maps: AttentionMaps, layer: int, head: int | None) -> pd.DataFrame:
    """The tidy frame (one row per query, key) with the kind, layer and head as leading columns: what a CSV holds."""
    frame = attention_frame(maps, layer, head)
    frame.insert(0, "head", head_label(head))
    frame.insert(0, "layer", layer)
    frame.insert(0, "kind", maps.kind)
    return frame


def attention_csv(maps: AttentionMaps, layer: int, head: int | None) -> str:
    """export_frame as CSV text."""
    return export_frame(maps, layer, head).to_csv(index=False)


def _text_of(source: str | bytes | os.PathLike[str], what: str) -> str:
    """The text of a file the page saved: `source` is that text (a CSV has lines, a JSON starts with "{"; bytes are
    read as UTF-8), or the path of the file, as a Path or a string."""
    if isinstance(source, bytes):
        return source.decode("utf-8")
    if isinstance(source, str) and ("\n" in source or source.lstrip().startswith("{")):
        return source
    try:
        return Path(source).read_text(encoding="utf-8")
    except (OSError, TypeError) as error:  # no such file, a name too long for one, not a path at all
        raise ConfigError(
            f"{str(source)[:80]!r} is neither a file nor the text of {what}: pass its path or its text."
        ) from error


def read_attention_csv(source: str | bytes | os.PathLike[str]) -> pd.DataFrame:
    """Read attention_csv output back (its text, or the path of a file holding it), weights (and norms, when there)
    as float32, tokens as written (even "NA" or "nan"), and the head as attention_json gives it: an int, or "mean"."""
    text = _text_of(source, "an attention CSV")
    frame = pd.read_csv(
        io.StringIO(text), dtype={"query_token": str, "key_token": str, "head": str}, keep_default_na=False
    )
    for column in ("weight", "norm"):  # norm: a map shown with what the heads add (explorer.norm_export)
        if column in frame:
            frame[column] = frame[column].astype(np.float32)
    frame["head"] = frame["head"].map(lambda head: head if head == "mean" else int(head))
    return frame


def removal_fields(removed: Sequence[Head], removed_with: str) -> dict[str, Any]:
    """What a file says of the heads its run removed (explorer.run's ablate, ablate_with): their names, what their
    output became, and what that does to the weights written."""
    return {
        "heads_removed": [head_name(h) for h in removed],
        "removed_with": removed_with,
        "removed_note": REMOVED_NOTE if removed else "",
    }


def attention_dict(
    maps: AttentionMaps,
    layer: int,
    head: int | None,
    config: ModelConfig | None = None,
    removed: Sequence[Head] | None = None,
    removed_with: str = "zero",
) -> dict[str, Any]:
    """Everything needed to redraw one map: config (or None), kind, layer, head, tokens, weights, allowed; with
    `removed` (the run's trace.ablated, and `removed_with` its trace.ablate_with), which heads the run removed: the
    config alone does not say, and every layer after them attends otherwise."""
    weights = attention_matrix(maps, layer, head)  # [Tq, Tk] float32
    kept = {} if removed is None else removal_fields(removed, removed_with)
    return {
        "config": None if config is None else config.to_dict(),
        "kind": maps.kind,
        "layer": layer,
        "head": head_label(head),
        "query_tokens": list(maps.query_tokens),
        "key_tokens": list(maps.key_tokens),
        "weights": [[float(v) for v in row] for row in weights],  # float32 values, exactly representable
        "allowed": np.asarray(maps.allowed, dtype=bool).tolist(),
        "masked_count": int((~maps.allowed).sum()),
        "empty_rows": [int(i) for i in np.flatnonzero(maps.empty_rows)],
        "note": MASK_NOTE,
        **kept,
    }


def attention_json(
    maps: AttentionMaps,
    layer: int,
    head: int | None,
    config: ModelConfig | None = None,
    removed: Sequence[Head] | None = None,
    removed_with: str = "zero",
) -> str:
    """attention_dict as JSON text (UTF-8, tokens unescaped)."""
    return json.dumps(attention_dict(maps, layer, head, config, removed, removed_with), ensure_ascii=False)


def read_attention_json(source: str | bytes | os.PathLike[str]) -> dict[str, Any]:
    """Parse attention_json output (its text, or the path of a file holding it); weights (and norms, when there) come
    back as float32 [Tq, Tk] arrays, allowed as bool."""
    data = json.loads(_text_of(source, "an attention JSON"))
    data["weights"] = np.asarray(data["weights"], dtype=np.float32).reshape(
        len(data["query_tokens"]), len(data["key_tokens"])
    )  # [Tq, Tk]
    data["allowed"] = np.asarray(data["allowed"], dtype=bool).reshape(data["weights"].shape)  # [Tq, Tk]
    if "norms" in data:  # a map shown with what the heads add (explorer.norm_export)
        data["norms"] = np.asarray(data["norms"], dtype=np.float32).reshape(data["weights"].shape)  # [Tq, Tk]
    return data
