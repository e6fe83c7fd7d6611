"""Where a toy task needs attention to look, and how much of each head's weight lands there.

reverse and induction have one key each query must read; a head that learned the task puts its weight there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from explorer.analysis.stats import head_entropy
from explorer.tasks import Task
from explorer.trace import AttentionMaps
from explorer.training import Snapshot

PATTERN_NAMES = {"reverse": "the anti-diagonal (key T-1-t)", "induction": "the token after the earlier copy"}


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


def head_shown_first(maps: AttentionMaps, pattern: np.ndarray | None) -> tuple[int, int, str]:
    """(layer, head, why): the head that ends closest to the task's pattern if the task has one (and the maps are
    of its length), otherwise the most concentrated one (lowest mean entropy), since a uniform head shows nothing
    learned."""
    if pattern is not None and maps.weights.shape[-1] == pattern.shape[0]:
        mass = pattern_mass(pattern, maps.weights)  # [L, H]
        layer, head = divmod(int(mass.argmax()), mass.shape[1])
        return (
            layer,
            head,
            f"L{layer} H{head} is shown first: its mean weight on the key the task needs is "
            f"{mass[layer, head]:.2f} (attention spread evenly over the keys each query sees would give "
            f"{uniform_mass(pattern, maps.allowed):.3g}).",  # as pattern_figure's dotted line writes it
        )
    entropy = head_entropy(maps)
    best = entropy.loc[entropy["entropy"].idxmin()]
    layer, head = int(best["layer"]), int(best["head"])
    return (
        layer,
        head,
        f"L{layer} H{head} is shown first: its attention is the most concentrated of all heads, with a mean "
        f"entropy of {best['entropy']:.2f} nats (spread evenly: {best['max_entropy']:.2f}; one key only: 0).",
    )
