"""Attention Explorer's engine: build a small transformer, run it, and keep every intermediate."""

from explorer.config import CheckpointConfig, ConfigError, ModelConfig, parse_config
from explorer.export import attention_csv, attention_json, read_attention_csv, read_attention_json
from explorer.model import Transformer, build_model
from explorer.prediction import next_token
from explorer.pretrained import list_pretrained, load_pretrained
from explorer.torch_import import from_torch
from explorer.trace import AttentionMaps, StackTrace, Trace, run

__all__ = [
    "AttentionMaps",
    "CheckpointConfig",
    "ConfigError",
    "ModelConfig",
    "StackTrace",
    "Trace",
    "Transformer",
    "attention_csv",
    "attention_json",
    "build_model",
    "from_torch",
    "list_pretrained",
    "load_pretrained",
    "next_token",
    "parse_config",
    "read_attention_csv",
    "read_attention_json",
    "run",
]
