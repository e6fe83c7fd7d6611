"""A configuration in words: the phrases the pages' one-line summaries are made of."""

from __future__ import annotations

from explorer.config import ModelConfig, applied_masks


def count(n: int, noun: str) -> str:
    """E.g. "1 layer", "4 layers"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def positions_text(positional: str) -> str:
    """E.g. "sinusoidal positions", or "no positions" for none."""
    return f"{'no' if positional == 'none' else positional} positions"


def mask_text(cfg: ModelConfig) -> str:
    """The mask as the model applies it, for a summary line: a decoder is causal whatever the mask control says."""
    masks = applied_masks(cfg)
    if len(masks) == 2:
        return " · ".join(f"{name} mask {mask}" for name, mask in masks.items())
    (mask,) = masks.values()
    return f"mask {mask}" + ("" if mask == cfg.mask else " (a decoder is always causal)")
