"""How large a model and a trace the app builds: one link must not take a shared server's memory."""

from __future__ import annotations

from functools import lru_cache

from explorer.config import ConfigError, ModelConfig
from explorer.model import parameter_total

MAX_PARAMETERS = 100_000_000  # 400 MB of float32 weights: BERT-base's twelve blocks (85 million) fit
MAX_ATTENTION_CELLS = 25_000_000  # a trace keeps a weight and a score per cell: 200 MB, cached per input


@lru_cache(maxsize=256)
def _parameters(cfg: ModelConfig) -> int:
    return parameter_total(cfg)


def attention_cells(cfg: ModelConfig, n_source: int, n_target: int | None = None) -> int:
    """Attention weights a trace of this config keeps: layers x heads x queries x keys, over every kind."""
    per_head = n_source * n_source
    if cfg.arch == "encoder-decoder":
        t = n_target or 1
        per_head += t * t + t * n_source  # decoder self-attention, then cross-attention
    return cfg.n_layers * cfg.n_heads * per_head


def check_app_size(cfg: ModelConfig, n_source: int, n_target: int | None = None) -> None:
    """Raise ConfigError, saying what to make smaller, when the app would build a model or keep a trace too large
    for a laptop or a shared server. explorer.run itself has no such limit."""
    parameters = _parameters(cfg)
    if parameters > MAX_PARAMETERS:
        raise ConfigError(
            f"This model would have {parameters:,} parameters ({parameters * 4 / 1e9:.1f} GB); the app builds at "
            f"most {MAX_PARAMETERS:,}. Use fewer layers or a smaller d_model or d_ff."
        )
    if max(n_source, n_target or 0) > cfg.max_tokens:
        return  # explorer.run refuses such an input with its own sentence
    cells = attention_cells(cfg, n_source, n_target)
    if cells > MAX_ATTENTION_CELLS:
        raise ConfigError(
            f"{cfg.n_layers} layers × {cfg.n_heads} heads on {n_source:,} tokens would keep {cells:,} attention "
            f"weights, and as many scores ({cells * 8 / 1e9:.1f} GB); the app keeps at most "
            f"{MAX_ATTENTION_CELLS:,}. Use fewer tokens, layers or heads."
        )
