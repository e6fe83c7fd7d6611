"""Toy tasks with generated data, each with its own small vocabulary and an accuracy metric."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from explorer.config import ConfigError

SYMBOLS = tuple("ABCDEFGHIJ")  # the tokens every task draws from


@dataclass(frozen=True)
class Batch:
    inputs: torch.Tensor  # [B, T] long: token ids fed to the model
    targets: torch.Tensor  # [B, T] long: the token each position should output
    scored: torch.Tensor  # [B, T] bool: positions that count in the loss and the accuracy


@dataclass(frozen=True)
class Task:
    name: str
    description: str
    arch: str  # "encoder" (sees the whole input) or "decoder" (causal, predicts the next token)
    length: int  # sequence length the model sees
    vocabulary: tuple[str, ...] = SYMBOLS

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """A fresh batch drawn from the generator."""
        V, T = len(self.vocabulary), self.length
        if self.name == "induction":
            half = torch.randint(V, (batch_size, T // 2), generator=generator)  # [B, T/2]
            sequence = torch.cat([half, half], dim=1)  # [B, T]: a random run, then the same run again
            targets = torch.roll(sequence, -1, dims=1)  # [B, T]: position t predicts token t + 1
            scored = torch.zeros(batch_size, T, dtype=torch.bool)
            scored[:, T // 2 : T - 1] = True  # only the repeat is predictable (from an earlier copy)
            return Batch(sequence, targets, scored)
        inputs = torch.randint(V, (batch_size, T), generator=generator)  # [B, T]
        if self.name == "copy":
            targets = inputs.clone()
        elif self.name == "reverse":
            targets = inputs.flip(1)
        else:
            targets = inputs.sort(dim=1).values
        return Batch(inputs, targets, torch.ones(batch_size, T, dtype=torch.bool))

    def tokens(self, ids: torch.Tensor) -> list[str]:
        return [self.vocabulary[i] for i in ids.tolist()]


def accuracy(logits: torch.Tensor, batch: Batch) -> float:
    """Share of scored positions whose most likely token is the target: logits [B, T, V]."""
    correct = (logits.argmax(dim=-1) == batch.targets) & batch.scored
    return float(correct.sum() / batch.scored.sum())


def expected_output(task: Task, tokens: Sequence[str]) -> list[str | None]:
    """What the task wants at each position of this input; None where nothing is scored.

    copy: the input; reverse: it backwards; sort: its tokens in vocabulary order; induction: the next token, at
    the positions of the repeat that have one (from T/2 to T-2), as Task.sample scores them."""
    tokens = list(tokens)
    T = len(tokens)
    if task.name == "copy":
        return list(tokens)
    if task.name == "reverse":
        return tokens[::-1]
    if task.name == "sort":
        order = {t: i for i, t in enumerate(task.vocabulary)}
        return sorted(tokens, key=lambda t: order[t])
    return [tokens[t + 1] if T // 2 <= t <= T - 2 else None for t in range(T)]


def make_task(name: str, length: int = 8) -> Task:
    if length < 2 or length > 64:
        raise ConfigError(f"Sequence length {length} does not work here; use 2 to 64.")
    if name == "induction" and length % 2:
        raise ConfigError(
            f"Sequence length {length} does not work for induction, which repeats its first half: use an even length."
        )
    descriptions = {
        "copy": "Output the input as it is.",
        "reverse": "Output the input backwards: position t reads position T-1-t (an anti-diagonal of attention).",
        "sort": "Output the input's tokens in alphabetical order.",
        "induction": "A random run of tokens, then the same run again; predict each next token of the repeat.",
    }
    if name not in descriptions:
        raise ConfigError(f"Task {name!r} is not one of {', '.join(descriptions)}.")
    return Task(name, descriptions[name], "decoder" if name == "induction" else "encoder", length)


TASKS = ("copy", "reverse", "sort", "induction")
