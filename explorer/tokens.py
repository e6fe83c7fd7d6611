"""Text -> tokens -> deterministic embeddings, identical in every process for a seed."""

from __future__ import annotations

import hashlib
from functools import lru_cache

import torch

from explorer.config import PAD_TOKEN, ConfigError


def split_tokens(text: str | list[str] | tuple[str, ...], max_tokens: int, what: str = "input") -> list[str]:
    """Split a string on whitespace (a list of strings is taken as is) and check the length."""
    if isinstance(text, str):
        tokens = text.split()
    elif isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text):
        tokens = list(text)
    else:  # e.g. a list of numbers or of tensors: never embed their printed form as if it were words
        raise ConfigError(
            f"The {what} must be text, a list of token strings, or a float torch.Tensor [T, d_model] of input "
            f"embeddings; got a {type(text).__name__}"
            + (f" of {type(text[0]).__name__}" if isinstance(text, (list, tuple)) and text else "")
            + "."
        )
    if not tokens:
        raise ConfigError(f"The {what} is empty: type at least one token, e.g. 'the cat sat on the mat'.")
    if any(not t or t.isspace() for t in tokens):
        raise ConfigError(f"The {what} has an empty token; tokens are words separated by spaces.")
    if len(tokens) > max_tokens:
        raise ConfigError(
            f"The {what} has {len(tokens):,} tokens, more than the {max_tokens:,} this model takes; shorten the text."
        )
    return tokens


@lru_cache(maxsize=65536)
def _token_vector(token: str, d_model: int, seed: int) -> torch.Tensor:
    digest = hashlib.sha256(f"{seed}\x00{token}".encode()).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & (2**63 - 1))
    return torch.randn(d_model, generator=generator, dtype=torch.float32)  # [D], N(0, 1)


def embed_tokens(tokens: list[str], d_model: int, seed: int) -> torch.Tensor:
    """[T, D] one fixed N(0, 1) vector per distinct token string: a repeated word gives identical rows."""
    return torch.stack([_token_vector(t, d_model, seed) for t in tokens])  # [T, D]


def padding_keys(tokens: list[str]) -> torch.Tensor:
    """[T] bool, True where the token is a real token (not [PAD])."""
    return torch.tensor([t != PAD_TOKEN for t in tokens], dtype=torch.bool)
