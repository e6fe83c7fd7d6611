"""Removing attention heads: which heads, written and checked, and what a removed head's output becomes.

A head is removed by replacing its output, the weighted sum of values before the output projection, with zeros
("zero"), or with its own mean over every position of the input, [PAD] included ("mean", mean ablation), so nothing
else in the model changes. The removal is an argument of the forward pass (explorer.run(..., ablate=...)), never a
hook or a change to the model: a checkpoint cached for every session stays untouched. Heads are (layer, head) pairs
of the self-attention of the stack that reads the input (the encoder, or a decoder-only model's decoder), numbered
from 0 as on the pages, and written "L1H3" in a link (TransformerLens's names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import torch

from explorer.arguments import is_whole
from explorer.config import ConfigError

Head = tuple[int, int]  # (layer, head), from 0
ABLATE_WITH = ("zero", "mean")
_HEAD_NAME = re.compile(r"^\s*L(\d{1,4})\s*H(\d{1,4})\s*$", re.IGNORECASE)


def head_name(head: Head) -> str:
    """(1, 3) -> "L1H3", as a link and the pages write a head."""
    return f"L{head[0]}H{head[1]}"


def heads_text(heads: Iterable[Head]) -> str:
    """The heads as a link writes them: "L1H3,L2H5" ("" for none)."""
    return ",".join(head_name(h) for h in heads)


def head_names(heads: Iterable[Head]) -> str:
    """The heads as a sentence names them: "L1H3, L2H5" ("" for none)."""
    return ", ".join(head_name(h) for h in heads)


def parse_heads(text: str) -> tuple[Head, ...]:
    """ "L1H3, L2H5" -> ((1, 3), (2, 5)); ConfigError with one sentence for anything else (not range-checked here)."""
    heads = []
    for part in (p for p in text.split(",") if p.strip()):
        match = _HEAD_NAME.match(part)
        if match is None:
            raise ConfigError(
                f"{part.strip()[:40]!r} is not a head: write heads to remove as L<layer>H<head>, separated by commas, "
                "e.g. L1H3,L2H5 (layers and heads count from 0)."
            )
        heads.append((int(match.group(1)), int(match.group(2))))
    return tuple(heads)


def checked_heads(heads: Iterable[Head], n_layers: int, n_heads: int) -> tuple[Head, ...]:
    """The heads, sorted, once each checked against the model's layers and heads; ConfigError saying what is wrong."""
    checked = []
    for head in heads:
        if isinstance(head, str):
            raise ConfigError(f"A head to remove is a (layer, head) pair of whole numbers, not {head!r}.")
        try:
            values = tuple(head)
        except TypeError:
            values = ()
        if len(values) != 2 or not all(is_whole(v) for v in values):
            raise ConfigError(f"A head to remove is a (layer, head) pair of whole numbers, not {head!r}.")
        layer, index = (int(v) for v in values)
        if not 0 <= layer < n_layers:
            raise ConfigError(
                f"{head_name((layer, index))} names layer {layer}, but the model's layers are 0 to {n_layers - 1}."
            )
        if not 0 <= index < n_heads:
            raise ConfigError(
                f"{head_name((layer, index))} names head {index}, but each layer's heads are 0 to {n_heads - 1}."
            )
        if (layer, index) in checked:
            raise ConfigError(f"{head_name((layer, index))} is listed twice among the heads to remove.")
        checked.append((layer, index))
    return tuple(sorted(checked))


def checked_mode(mode: str) -> str:
    """ "zero" or "mean"; ConfigError otherwise."""
    if mode not in ABLATE_WITH:
        raise ConfigError(
            f"ablate_with is {mode!r}: it is 'zero' (the head's output set to zero) or 'mean' (set to its mean over "
            "every position of the input)."
        )
    return mode


@dataclass(frozen=True)
class HeadAblation:
    """Which heads of each layer a forward pass removes, per batch row, and what their output becomes."""

    removed: torch.Tensor  # [B or 1, L, H] float: 1 where the head is removed in that row of the batch, else 0
    mode: str = "zero"  # "zero" or "mean" (ABLATE_WITH)

    @classmethod
    def of(cls, heads: Iterable[Head], n_layers: int, n_heads: int, mode: str = "zero") -> HeadAblation:
        """One row: the same heads removed for the whole (single-input) batch."""
        removed = torch.zeros(1, n_layers, n_heads)  # [1, L, H]
        for layer, head in heads:
            removed[0, layer, head] = 1.0
        return cls(removed, checked_mode(mode))

    def layer(self, index: int) -> torch.Tensor | None:
        """[B or 1, H]: the heads removed in block `index`, or None when it keeps them all (its numbers untouched)."""
        if index >= self.removed.shape[1]:
            return None
        row = self.removed[:, index]  # [B or 1, H]
        return row if bool(row.any()) else None


def remove_heads(attended: torch.Tensor, removed: torch.Tensor, mode: str) -> torch.Tensor:
    """attended [B, H, T, K] (each head's weighted sum of values), removed [B or 1, H] -> [B, H, T, K] with the removed
    heads' rows replaced by zeros, or by their mean over the T positions."""
    gone = removed[:, :, None, None].to(attended.dtype)  # [B or 1, H, 1, 1]
    kept = attended * (1.0 - gone)
    if mode == "zero":
        return kept
    return kept + gone * attended.mean(dim=2, keepdim=True)  # [B, H, 1, K] broadcast over the positions
