"""Small checkpoint-shaped configs, BERT's and Llama's, with random weights in seconds, and norms moved away from the
identity as trained ones are (test helpers)."""

from __future__ import annotations

import torch

import explorer
from explorer.config import CheckpointConfig


def perturbed_norms(model: explorer.Transformer, seed: int, scale: float) -> explorer.Transformer:
    """Every norm weight and bias moved by N(0, scale^2) from its initial 1 and 0, so a test cannot pass by an identity
    norm; in place, and returned."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.add_(scale * torch.randn(parameter.shape, generator=generator))
    return model


def tiny(family: str = "llama", **changes) -> CheckpointConfig:
    """A small checkpoint-shaped config: 2 layers, 4 query heads sharing 2 key/value heads (llama)."""
    llama = family == "llama"
    fields = dict(
        arch="decoder" if llama else "encoder",
        norm="pre" if llama else "post",
        positional="rope" if llama else "learned",
        mask="causal" if llama else "padding",
        activation="swiglu" if llama else "gelu",
        d_model=32,
        n_heads=4,
        n_layers=2,
        d_ff=48,
        max_tokens=64,
        checkpoint=f"tiny-{family}",
        family=family,
        n_kv_heads=2 if llama else 4,
        vocab_size=40,
        type_vocab_size=0 if llama else 2,
        tie_embeddings=llama,
        rope_base=100_000.0,
    )
    return CheckpointConfig(**(fields | changes))
