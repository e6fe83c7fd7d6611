"""The Mixing page's downloads: rollout, flow and the raw average of heads as one long table, a row per
(position, input token) pair."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from explorer.ablation import Head, heads_text


def mixing_table(
    tokens: list[str],
    queries: list[int],
    columns: dict[str, np.ndarray | None],
    residual: float,
    removed: Sequence[Head] = (),
    removed_with: str = "zero",
) -> pd.DataFrame:
    """One row per (position in `queries`, input token): position, its token, input, its token, the residual share
    rollout and flow were computed with, then each of `columns` ({name: [len(queries), T] values}; None leaves the
    column out). With heads `removed` (trace.ablated, `removed_with` its ablate_with), heads_removed ("L0H1,L1H0")
    and removed_with after the residual share: each removed head then counts as it acted (mixed_maps), so the values
    are not the full model's."""
    n_tokens = len(tokens)
    shown = {name: np.asarray(values, dtype=np.float64) for name, values in columns.items() if values is not None}
    for name, values in shown.items():
        if values.shape != (len(queries), n_tokens):
            raise ValueError(f"{name} is {values.shape}, not {len(queries)} positions x {n_tokens} tokens")
    positions = np.repeat(np.asarray(queries, dtype=np.int64), n_tokens)  # [Q * T]
    inputs = np.tile(np.arange(n_tokens), len(queries))  # [Q * T]
    words = np.asarray(tokens, dtype=object)
    frame = pd.DataFrame(
        {
            "position": positions,
            "position_token": words[positions],
            "input": inputs,
            "input_token": words[inputs],
            "residual_share": residual,
        }
    )
    if removed:
        frame["heads_removed"], frame["removed_with"] = heads_text(removed), removed_with
    for name, values in shown.items():
        frame[name] = values.ravel()
    return frame


def last_block_label(flow_shown: bool) -> str:
    """The last block's CSV button, named by the columns it holds."""
    return "Raw, rollout and flow (CSV)" if flow_shown else "Raw and rollout (CSV)"
