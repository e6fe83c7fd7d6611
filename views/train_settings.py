"""The Train page's settings: task, length, steps, learning rate, warmup, batch size and both placements, each a
widget bound to the URL parameter named as its key, so a shared link carries them."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.tasks import TASKS
from views.query_params import screen_train_params, show_url_notes

LEARNING_RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
BATCH_SIZES = (8, 16, 32, 64, 128, 256)
SETTINGS_NOTES_KEY = "_train_url_notes"  # notes on train_* URL values the settings could not take
MAX_LENGTH = 32  # longer sequences make unreadable heatmaps
# The whole-number settings: key (and URL parameter) -> label, least, most, default, step of the +/- buttons, help.
WHOLE_NUMBERS = {
    "train_length": ("Sequence length", 2, MAX_LENGTH, 8, 1,
                     "Tokens per sequence (even for induction: a run, then the same run again)."),
    "train_steps": ("Steps", 10, 5000, 300, 50, "AdamW updates."),
    "train_warmup": ("Warmup steps", 0, 2000, 20, 10,
                     "The learning rate grows linearly from lr/warmup to lr over these first steps."),
}  # fmt: skip
TASK_HELP = {
    "copy": "output the input as it is",
    "reverse": "output the input backwards",
    "sort": "output the input's tokens in order",
    "induction": "continue a repeated run (causal decoder)",
}


@dataclass(frozen=True)
class Settings:
    task: str
    length: int
    steps: int
    lr: float
    warmup: int
    batch_size: int
    both: bool  # post-norm and pre-norm from the same seed, data and initial weights


def learning_rate_text(rate: float) -> str:
    """A learning rate as the slider shows it and the URL spells it: 0.003."""
    return f"{rate:g}"


def whole_number(where: DeltaGenerator, key: str) -> int:
    """The number input of one of WHOLE_NUMBERS, bound to the URL parameter `key`."""
    label, low, high, default, step, help_text = WHOLE_NUMBERS[key]
    value = where.number_input(
        label, min_value=low, max_value=high, value=default, step=step, key=key, bind="query-params", help=help_text
    )
    return int(value)


def settings_controls() -> Settings:
    """The training settings, each bound to the URL parameter named as its key, so a shared link carries them."""
    screen_train_params(
        SETTINGS_NOTES_KEY,
        TASKS,
        {key: (low, high) for key, (_, low, high, *_) in WHOLE_NUMBERS.items()},
        map(learning_rate_text, LEARNING_RATES),
        BATCH_SIZES,
    )
    notes = st.container()  # filled once the settings exist
    c1, c2, c3 = st.columns(3)
    task = c1.selectbox(
        "Task",
        TASKS,
        index=TASKS.index("reverse"),
        key="train_task",
        bind="query-params",
        help="  \n".join(f"**{name}**: {text}" for name, text in TASK_HELP.items()),
    )
    length = whole_number(c1, "train_length")
    steps = whole_number(c2, "train_steps")
    lr = c2.select_slider(
        "Learning rate",
        LEARNING_RATES,
        value=3e-3,
        key="train_lr",
        bind="query-params",
        format_func=learning_rate_text,
        help="AdamW's step size after warmup (weight decay 0.01, gradients clipped to norm 1).",
    )
    warmup = whole_number(c3, "train_warmup")
    batch_size = c3.select_slider(
        "Batch size",
        BATCH_SIZES,
        value=64,
        key="train_batch",
        bind="query-params",
        help="Fresh random sequences per step.",
    )
    both = st.checkbox(
        "Train post-norm and pre-norm together",
        value=False,
        key="train_both",
        bind="query-params",
        help="Two models from the same initial weights, trained on the same batches in the same order; they "
        "differ only in where LayerNorm sits (and pre-norm's final LayerNorm). Off: the sidebar's placement.",
    )
    with notes:
        show_url_notes(SETTINGS_NOTES_KEY)
    return Settings(task, length, steps, float(lr), warmup, int(batch_size), both)
