"""Attention Explorer's engine: build a small transformer, run it, and keep every intermediate."""

from explorer.config import ConfigError, ModelConfig, parse_config
from explorer.export import attention_csv, attention_json, read_attention_csv, read_attention_json
from explorer.model import Transformer, build_model
from explorer.torch_import import from_torch
from explorer.trace import AttentionMaps, StackTrace, Trace, run

__all__ = [
    "AttentionMaps",
    "ConfigError",
    "ModelConfig",
    "StackTrace",
    "Trace",
    "Transformer",
    "attention_csv",
    "attention_json",
    "build_model",
    "from_torch",
    "parse_config",
    "read_attention_csv",
    "read_attention_json",
    "run",
]
