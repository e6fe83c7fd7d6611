"""What the positional page shows: encoding tables, wavelengths, similarities, and why order matters."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from explorer.config import ConfigError, ModelConfig
from explorer.model import Transformer
from explorer.positional import rope_angles, sinusoidal
from explorer.tokens import split_tokens
from explorer.trace import run

MAX_PLOTTED_POSITIONS = 4096


def check_range(n_positions: int, dimensions: list[int], d_model: int) -> None:
    """ConfigError unless 1 <= n_positions <= 4096 and every dimension is in 0..d_model-1."""
    if not 1 <= n_positions <= MAX_PLOTTED_POSITIONS:
        raise ConfigError(f"Max position {n_positions:,} is out of range; use 1 to {MAX_PLOTTED_POSITIONS:,}.")
    wrong = [d for d in dimensions if not 0 <= d < d_model]
    if wrong:
        raise ConfigError(
            f"Dimension {wrong[0]} does not exist: d_model is {d_model}, so dimensions run from 0 to {d_model - 1}."
        )


def encoding_table(model: Transformer, n_positions: int) -> np.ndarray | None:
    """[P, D] what the model adds at positions 0..P-1 (sinusoidal or learned), or None (rope, none)."""
    table = model.positional.table
    if table is None:
        return None
    if n_positions > table.shape[0]:
        if model.positional.kind == "learned":
            raise ConfigError(f"The learned table has {table.shape[0]:,} positions; ask for at most that many.")
        return sinusoidal(n_positions, model.d_model).numpy()
    return table[:n_positions].detach().numpy().copy()


def wavelengths(d_model: int) -> np.ndarray:
    """[ceil(D/2)] the period, in positions, of sinusoid pair i: 2 pi 10000^(2i/D)."""
    return 2 * math.pi * np.power(10000.0, np.arange(0, d_model, 2) / d_model)


def similarity(table: np.ndarray, metric: str = "cosine") -> np.ndarray:
    """[P, P] dot products or cosine similarities between the encodings of every pair of positions."""
    table = table.astype(np.float64)
    if metric == "cosine":
        table = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    elif metric != "dot":
        raise ConfigError(f"similarity metric {metric!r} is not one of 'dot' or 'cosine'.")
    return table @ table.T


def rope_angle_table(n_positions: int, d_head: int) -> np.ndarray:
    """[P, K/2] the angle (radians) rotary encoding turns pair i by at position p."""
    return rope_angles(n_positions, d_head).numpy()


@dataclass(frozen=True)
class PermutationDemo:
    tokens: list[str]
    shuffled: list[str]
    order: list[int]  # shuffled[i] = tokens[order[i]]
    attention: np.ndarray  # [L, H, T, T] on the tokens
    shuffled_attention: np.ndarray  # [L, H, T, T] on the shuffled tokens
    max_difference: float  # max |attention permuted by order - shuffled_attention|; 0 means order is invisible


def permutation_demo(cfg: ModelConfig, text: str | list[str], order: list[int] | None = None) -> PermutationDemo:
    """Run the tokens and a reordering of them (reversed by default); compare attention after undoing the order.
    Exactly 0 only when nothing in the model knows positions: positional "none" and no causal mask."""
    tokens = split_tokens(text, cfg.max_tokens)
    order = list(range(len(tokens)))[::-1] if order is None else list(order)
    if sorted(order) != list(range(len(tokens))):
        raise ConfigError(f"The order must list each position 0 to {len(tokens) - 1} once.")
    shuffled = [tokens[i] for i in order]
    attention, shuffled_attention = run(cfg, tokens).attention, run(cfg, shuffled).attention
    expected = attention[:, :, order][:, :, :, order]  # [L, H, T, T] rows and columns moved with their tokens
    difference = float(np.abs(expected - shuffled_attention).max())
    return PermutationDemo(tokens, shuffled, order, attention, shuffled_attention, difference)
