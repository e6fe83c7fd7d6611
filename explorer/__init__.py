"""Attention Explorer's engine: build a small transformer, run it, and keep every intermediate.

The Plotly figures (explorer.attention_figure and the others in FIGURES) come from the pictures package, imported
only when first asked for: the engine itself needs neither plotly nor streamlit.
"""

from typing import Any

from explorer.analysis.ablation_effects import head_ablation_effects, prediction_change
from explorer.analysis.attribution import LogitAttribution, head_logit_attribution, logit_attribution
from explorer.analysis.logit_lens import logit_lens
from explorer.analysis.mixing import attention_flow, attention_rollout
from explorer.analysis.norm_attention import norm_attention, norm_shares
from explorer.analysis.placements import placement_run
from explorer.build import build_model
from explorer.config import CheckpointConfig, ConfigError, ModelConfig, parse_config
from explorer.export import attention_csv, attention_json, read_attention_csv, read_attention_json
from explorer.model import Transformer
from explorer.prediction import next_token
from explorer.pretrained import list_pretrained, load_pretrained
from explorer.torch_import import from_torch
from explorer.trace import ACTIVATION_NAMES, AttentionMaps, StackTrace, Trace, run
from explorer.training import train

FIGURES = (
    "ablation_figure",
    "attention_figure",
    "attention_grid_figure",
    "attribution_figure",
    "depth_figure",
    "difference_figure",
    "flow_figure",
    "gradient_figure",
    "logit_lens_figure",
    "massive_share_figure",
    "norm_attention_figure",
    "parameters_figure",
    "placements_figure",
    "position_similarity_figure",
    "positional_figure",
    "rollout_figure",
    "rope_angle_figure",
    "token_norm_figure",
    "training_figure",
)


def __getattr__(name: str) -> Any:
    if name in FIGURES:
        from pictures import notebook_figures

        return getattr(notebook_figures, name)
    raise AttributeError(f"module 'explorer' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and the figures __getattr__ imports on first use: dir() and a notebook's tab completion
    offer explorer.attention_figure before it is imported."""
    return sorted(set(globals()) | set(FIGURES))


__all__ = [
    "ACTIVATION_NAMES",
    "AttentionMaps",
    "CheckpointConfig",
    "ConfigError",
    "LogitAttribution",
    "ModelConfig",
    "StackTrace",
    "Trace",
    "Transformer",
    "attention_csv",
    "attention_flow",
    "attention_json",
    "attention_rollout",
    "build_model",
    "from_torch",
    "head_ablation_effects",
    "head_logit_attribution",
    "list_pretrained",
    "load_pretrained",
    "logit_attribution",
    "logit_lens",
    "next_token",
    "norm_attention",
    "norm_shares",
    "parse_config",
    "placement_run",
    "prediction_change",
    "read_attention_csv",
    "read_attention_json",
    "run",
    "train",
    *FIGURES,
]
