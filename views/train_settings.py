"""The Train page's settings: task, length, steps, learning rate, warmup, batch size and the norm placements to
train, each a widget bound to the URL parameter named as its key, so a shared link carries them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.config import NORM_FORMULAS, NORMS
from explorer.tasks import TASKS
from views.query_params import (
    note_ignored_url_value,
    one_of,
    screen_train_params,
    show_url_notes,
    whole_number_in,
)

LEARNING_RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
BATCH_SIZES = (8, 16, 32, 64, 128, 256)
SETTINGS_NOTES_KEY = "_train_url_notes"  # notes on train_* URL values the settings could not take
MAX_LENGTH = 32  # longer sequences make unreadable heatmaps
# The whole-number settings: key (and URL parameter) -> label, least, most, default, step of the +/- buttons, help.
WHOLE_NUMBERS = {
    "train_length": ("Sequence length", 2, MAX_LENGTH, 8, 1,
                     "Tokens per sequence (for induction even and at least 4: a run, then the same run again)."),
    "train_steps": ("Steps", 10, 5000, 300, 50, "AdamW updates."),
    "train_warmup": ("Warmup steps", 0, 2000, 20, 10,
                     "The learning rate grows linearly from lr/warmup to lr over these first steps."),
}  # fmt: skip
SIDEBAR_PLACEMENT = "the sidebar's"
# The placements control's choices, as it shows them and the URL spells them (train_norms) -> the placements they
# train, None for the sidebar's own.
PLACEMENT_CHOICES: dict[str, tuple[str, ...] | None] = {
    SIDEBAR_PLACEMENT: None,
    "post and pre": ("post", "pre"),
    "all four": NORMS,
}
PLACEMENTS_KEY = "train_norms"
OLD_BOTH_KEY = "train_both"  # the checkbox links made before there were four placements: true meant post and pre
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
    placements: str  # a key of PLACEMENT_CHOICES: which norm placements train, from the same initial weights

    def norms(self, sidebar_norm: str) -> tuple[str, ...]:
        """The placements to train, in the order they train: the sidebar's alone, or several from one start."""
        return PLACEMENT_CHOICES[self.placements] or (sidebar_norm,)


def learning_rate_text(rate: float) -> str:
    """A learning rate as the slider shows it and the URL spells it: 0.003."""
    return f"{rate:g}"


def url_checks() -> dict[str, Callable[[str], bool]]:
    """Each setting's URL parameter -> whether its control takes a value as the URL spells it."""
    return {
        "train_task": one_of(TASKS),
        **{key: whole_number_in(low, high) for key, (_, low, high, *_) in WHOLE_NUMBERS.items()},
        "train_lr": one_of(map(learning_rate_text, LEARNING_RATES)),
        "train_batch": one_of(BATCH_SIZES),
    }


def control_value(key: str, raw: str) -> str | int | float:
    """A setting's value as its URL spells it (one url_checks takes) -> as its control holds it."""
    if key == "train_task":
        return raw
    return float(raw) if key == "train_lr" else int(float(raw))


def whole_number(where: DeltaGenerator, key: str) -> int:
    """The number input of one of WHOLE_NUMBERS, bound to the URL parameter `key`."""
    label, low, high, default, step, help_text = WHOLE_NUMBERS[key]
    value = where.number_input(
        label, min_value=low, max_value=high, value=default, step=step, key=key, bind="query-params", help=help_text
    )
    return int(value)


def take_old_both_link() -> None:
    """A link from before the four placements may say train_both=true (post and pre): the placements control
    starts there instead, and the old parameter leaves the address bar, which then carries train_norms."""
    if OLD_BOTH_KEY not in st.query_params:
        return
    notes = st.session_state.get(SETTINGS_NOTES_KEY, {})
    if OLD_BOTH_KEY in notes:  # a junk value: no control answers to it now, so the placements control retires it
        notes.setdefault(PLACEMENTS_KEY, notes.pop(OLD_BOTH_KEY))
    if st.query_params[OLD_BOTH_KEY].lower() == "true" and PLACEMENTS_KEY not in st.query_params:
        st.session_state.setdefault(PLACEMENTS_KEY, "post and pre")  # the control's value in this run ...
        st.query_params[PLACEMENTS_KEY] = "post and pre"  # ... and in the address bar, for a link copied now
    del st.query_params[OLD_BOTH_KEY]


def settings_controls() -> Settings:
    """The training settings, each bound to the URL parameter named as its key, so a shared link carries them."""
    screen_train_params(SETTINGS_NOTES_KEY, url_checks())
    note_ignored_url_value(
        SETTINGS_NOTES_KEY,
        PLACEMENTS_KEY,
        one_of(PLACEMENT_CHOICES),
        "not a value this setting can take; using its default.",
    )
    take_old_both_link()
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
    placements = st.radio(
        "Norm placements to train",
        list(PLACEMENT_CHOICES),
        index=0,
        key=PLACEMENTS_KEY,
        bind="query-params",
        horizontal=True,
        help="Several placements train one after the other, from the same initial weights, on the same batches in "
        "the same order: they differ only in where the norms sit (a norm one placement has and another lacks "
        "starts at weight 1, bias 0). "
        + " ".join(f"**{norm}**: {formula}." for norm, formula in NORM_FORMULAS.items()),
    )
    with notes:
        show_url_notes(SETTINGS_NOTES_KEY)
    return Settings(task, length, steps, float(lr), warmup, int(batch_size), placements)
