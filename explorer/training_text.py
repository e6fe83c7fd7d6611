"""What the Train page says about a task's test set, its scored positions and the best blind guess: plain sentences
from explorer.tasks' numbers, no Streamlit here."""

from __future__ import annotations

from explorer.config_words import count
from explorer.numbers import percent
from explorer.tasks import HOLD_OUT_EVERY, TEST_SEQUENCES, Task, blind_accuracy

# The Train page's opening. At length 8, seed 0, random weights give each head a mean entropy of 1.81 to 2.03 nats
# (2.08 is uniform); training does not concentrate every head: after 300 steps of sort (98.5 % of held-out tokens
# right) the first layer's four heads sit at 1.98 to 2.03 nats.
INTRO = (
    "Train a small transformer from scratch on a toy task, watch its loss and accuracy as it learns, then see the "
    "attention patterns it formed. Random weights attend almost uniformly; training gathers some heads' weight on "
    "the keys the task needs, and may leave others spread out."
)


def tokens_scored(task: Task) -> str:
    """ "tokens" or "scored tokens": what an accuracy is a share of."""
    return "scored tokens" if task.name == "induction" else "tokens"


def test_set_text(task: Task) -> str:
    """Which sequences the accuracy on unseen data is measured on, and why the model never trained on them."""
    n_tested = len(task.test_batch().inputs)
    held = (
        f"about one sequence in {HOLD_OUT_EVERY} of the task's is kept out of training (chosen by a hash of its tokens)"
    )
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
            " of tokens right without reading the input, on average over all of the task's sequences (a small "
            "held-out set can give it more or less)"
        )
    else:
        how = f"for {task.name} every token is equally likely at every position, so one in {len(task.vocabulary)}"
    return (
        f"Below it: how many percentage points that is above (or below) the best guess that ignores the input: {how}."
    )


def induction_scoring_text(task: Task, length: int | None = None) -> str | None:
    """Which positions induction scores on `length` tokens (the task's own length unless given), and why the others
    are not; None when that many tokens cannot hold a run and its repeat (an odd count, or fewer than 4)."""
    T = task.length if length is None else length
    if T % 2 or T < 4:
        return None
    first, last = T // 2, T - 2
    scored = f"position {first}" if first == last else f"positions {first} to {last}"
    return (
        f"Induction: position t predicts token t + 1. Scored: {scored}, inside the repeat: each one's next token "
        f"is the one after its copy in the first half (the copy of position t is at t − {first}, the answer at "
        f"t − {first - 1}). Not scored: {_upto(first - 2)} (the next token is random), position {first - 1} (the "
        f"repeat's first token follows from the position alone, not from a copy) and position {T - 1} (no next "
        "token)."
    )


def _upto(last: int) -> str:
    return "position 0" if last == 0 else f"positions 0 to {last}"
