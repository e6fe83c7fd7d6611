"""Positional encodings: sinusoidal (Vaswani et al. 2017), learned, rotary (Su et al. 2021), or none."""

from __future__ import annotations

import torch
from torch import nn

ADDED_TO_INPUT = ("sinusoidal", "learned")  # the kinds that add a position vector to each token's embedding
# What a model from_torch imported has in their place: explorer.run takes its input rows as they are, and whether they
# hold positions is up to whoever made them
GIVEN_INPUT = "given"


def positional_of(config: object | None) -> str:
    """The positional kind a trace's input rows were made with: its config's, or GIVEN_INPUT for an imported model
    (config None)."""
    return GIVEN_INPUT if config is None else config.positional  # type: ignore[attr-defined]


def input_text(positional: str, family: str | None = None) -> str:
    """What the residual stream's input row holds, for a caption: rope and none add no position to it; a BERT
    checkpoint (`family` "bert") adds token type 0 too and normalises the sum (Transformer.embed)."""
    if family == "bert":
        return "embedding + position + token type, then the embedding LayerNorm"
    if positional == GIVEN_INPUT:
        return "the tensor given to explorer.run, as it is"
    return "embedding + position" if positional in ADDED_TO_INPUT else "the token embedding, no position added"


def sinusoidal(n_positions: int, d_model: int) -> torch.Tensor:
    """[P, D] PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D))."""
    position = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)  # [P, 1]
    pair = torch.arange(0, d_model, 2, dtype=torch.float64)  # [ceil(D/2)] the 2i of each pair
    angle = position / torch.pow(10000.0, pair / d_model)  # [P, ceil(D/2)]
    encoding = torch.zeros(n_positions, d_model, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)
    encoding[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return encoding.float()


ROPE_BASE = 10000.0  # theta of Su et al. 2021; a checkpoint may use another (SmolLM2: 100,000)


def rope_angles(
    n_positions: int, d_head: int, dtype: torch.dtype = torch.float32, base: float = ROPE_BASE
) -> torch.Tensor:
    """[P, K/2] angle by which rotary encoding turns pair i of a query or key at position p: p / base^(2i/K)."""
    position = torch.arange(n_positions, dtype=torch.float64).unsqueeze(1)  # [P, 1]
    pair = torch.arange(0, d_head, 2, dtype=torch.float64)  # [K/2]
    return (position / torch.pow(base, pair / d_head)).to(dtype)


def apply_rope(x: torch.Tensor, base: float = ROPE_BASE, layout: str = "interleaved") -> torch.Tensor:
    """x [..., T, K] -> pair i at position t rotated by rope_angles(T, K)[t, i]. Pair i is (x[2i], x[2i+1])
    ("interleaved", the paper's) or (x[i], x[i + K/2]) ("half", Hugging Face Llama's rotate_half): the same rotation
    of differently ordered weights."""
    angles = rope_angles(x.shape[-2], x.shape[-1], torch.float64, base)  # [T, K/2]; float32 is 1e-4 rad off near 4,000
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if layout == "half":
        first, second = x.chunk(2, dim=-1)  # [..., T, K/2] each
        return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)  # [..., T, K]
    even, odd = x[..., 0::2], x[..., 1::2]  # [..., T, K/2] each
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)  # [..., T, K]


class PositionalEncoding(nn.Module):
    """Adds position information to token embeddings [T, D] (rotary and none add nothing here)."""

    def __init__(self, kind: str, d_model: int, max_positions: int):
        super().__init__()
        self.kind = kind
        if kind == "learned":
            self.table = nn.Parameter(torch.empty(max_positions, d_model))  # [P, D], filled by init_weights
        elif kind == "sinusoidal":
            self.register_buffer("table", sinusoidal(max_positions, d_model), persistent=False)  # [P, D]
        else:
            self.table = None

    def reset_buffers(self) -> None:
        """Recompute the fixed sinusoids (after the module was created on the meta device)."""
        if self.kind == "sinusoidal":
            self.table = sinusoidal(*self.table.shape)

    def encoding(self, length: int) -> torch.Tensor | None:
        """[T, D] what is added at positions 0..T-1, or None."""
        return None if self.table is None else self.table[:length]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [..., T, D]
        added = self.encoding(x.shape[-2])
        return x if added is None else x + added
