"""The model's settings as controls: one table that both the sidebar and Compare's B controls are drawn from.

Each field's name is the ModelConfig field, the widget's key and the URL parameter (B's carry the b_ prefix:
?norm=post&b_norm=pre); what it takes comes from explorer.config (CHOICES, INT_LIMITS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamlit.delta_generator import DeltaGenerator

from explorer.config import CHOICES, INT_LIMITS, PAD_TOKEN
from explorer.norm_words import placement_help


@dataclass(frozen=True)
class Field:
    """One setting of the model, as a control."""

    name: str  # ModelConfig's field, the widget key and the URL parameter
    label: str  # in the sidebar, and greyed out for a checkpoint
    help: str  # the sidebar's (?) text
    short_label: str = ""  # Compare's B box, where a "≠ A" mark must fit on one line; "" when `label` is short

    @property
    def short(self) -> str:
        """The label in Compare's B box."""
        return self.short_label or self.label

    @property
    def options(self) -> list[str] | None:
        """The choices of a select box; None for a whole number."""
        return list(CHOICES[self.name]) if self.name in CHOICES else None

    @property
    def limits(self) -> tuple[int, int]:
        """Least and most of a whole number (explorer.config.INT_LIMITS)."""
        return INT_LIMITS[self.name]


MODEL_FIELDS = (
    Field(
        "arch",
        "Architecture",
        "encoder: BERT-like, every token sees every token (unless masked). decoder: GPT-like, always causal. "
        "encoder-decoder: both stacks plus cross-attention from the target to the source.",
    ),
    Field(
        "norm",
        "Norm placement",
        "Where each sub-layer f's norm sits. " + placement_help(),
        "Norm placement",
    ),
    Field("n_layers", "Layers", "Blocks per stack (an encoder-decoder has this many in each stack)."),
    Field("n_heads", "Heads", "Attention heads per layer; d_model must divide evenly among them."),
    Field("d_model", "d_model", "Width of the residual stream; must be a multiple of n_heads."),
    Field("d_ff", "d_ff", "Hidden width of each feed-forward sub-layer (4 x d_model is the classic choice)."),
    Field("positional", "Positional encoding", "How token order enters the model.", "Positions"),
    Field(
        "mask",
        "Mask",
        f"Which keys each query may attend to. causal: only itself and earlier tokens. padding: never the "
        f"{PAD_TOKEN} tokens.",
    ),
    Field("activation", "Activation", "Non-linearity inside the feed-forward sub-layer."),
    Field("seed", "Seed", "Decides the random weights and the token embeddings."),
)
FIELD = {f.name: f for f in MODEL_FIELDS}


def field_control(
    field: Field,
    where: DeltaGenerator,
    default: Any,
    prefix: str = "",
    label: str | None = None,
    help_text: str | None = None,
) -> Any:
    """The control of one field, into `where` (the sidebar, a column), bound to the URL parameter prefix + name:
    a select box for a choice, a number input within the field's limits for a whole number. `label` and
    `help_text` replace the sidebar's."""
    label = field.label if label is None else label
    help_text = field.help if help_text is None else help_text
    key = prefix + field.name
    if field.options is not None:
        options = field.options
        return where.selectbox(
            label, options, index=options.index(default), key=key, bind="query-params", help=help_text
        )
    low, high = field.limits
    return where.number_input(
        label,
        min_value=low,
        max_value=high,
        value=default,
        step=1,
        key=key,
        bind="query-params",
        help=help_text,
    )
