"""What the Train page says about a task's test set, its scored positions and the best blind guess: plain sentences
from explorer.tasks' numbers, no Streamlit here."""

from __future__ import annotations

from explorer.config_words import count
from explorer.numbers import percent
from explorer.tasks import HOLD_OUT_EVERY, TEST_SEQUENCES, Task, blind_accuracy


def tokens_scored(task: Task) -> str:
    """ "tokens" or "scored tokens": what an accuracy is a share of."""
    return "scored tokens" if task.name == "induction" else "tokens"


def test_set_text(task: Task) -> str:
    """Which sequences the accuracy on unseen data is measured on, and why the model never trained on them."""
    n_tested = len(task.test_batch().inputs)
    held = f"one sequence in {HOLD_OUT_EVERY} of the task's is kept out of training (chosen by a hash of its tokens)"
    if n_tested < TEST_SEQUENCES:
        return (
            f"Share of {tokens_scored(task)} right on all {count(n_tested, 'held-out sequence')}: {held}, and at "
            f"length {task.length} the task has only {task.n_sequences:,} different sequences, so these few are the "
            "test."
        )
    return f"Share of {tokens_scored(task)} right on {n_tested} held-out sequences: {held}, so none was trained on."


def blind_guess_text(task: Task) -> str:
    """What the points below the accuracy are measured against."""
    blind = blind_accuracy(task)
    if task.name == "sort":
        how = (
            f"for sort, each position's likeliest token (A near the start, J near the end), which gets {percent(blind)}"
            " of tokens right without reading the input"
        )
    else:
        how = f"for {task.name} every token is equally likely at every position, so one in {len(task.vocabulary)}"
    return (
        f"Below it: how many percentage points that is above (or below) the best guess that ignores the input: {how}."
    )


def induction_scoring_text(task: Task) -> str:
    """Which positions induction scores, and why the others are not."""
    T = task.length
    first, last = T // 2, T - 2
    scored = f"position {first}" if first == last else f"positions {first} to {last}"
    return (
        f"Induction: position t predicts token t + 1. Scored: {scored}, inside the repeat: each one's next token "
        f"is the one after its copy in the first half (position t − {first}). Not scored: {_upto(first - 2)} (the "
        f"next token is random), position {first - 1} (the repeat's first token follows from the position alone, "
        f"not from a copy) and position {T - 1} (no next token)."
    )


def _upto(last: int) -> str:
    return "position 0" if last == 0 else f"positions 0 to {last}"
