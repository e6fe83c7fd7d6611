"""Toy tasks with generated data, each with its own small vocabulary and an accuracy metric.

Every task keeps one sequence in HOLD_OUT_EVERY out of training, chosen by a hash of the sequence, so that a test
set of those is data the model never trained on: at length 8, induction has only 10,000 different sequences and a
300-step run draws 19,200, so sequences merely drawn afresh would mostly be ones it trained on."""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from explorer.config import ConfigError

SYMBOLS = tuple("ABCDEFGHIJ")  # the tokens every task draws from
HOLD_OUT_EVERY = 8  # one sequence in this many is kept out of training, for the test set
TEST_SEQUENCES = 512  # the test set's size, unless the task has fewer held-out sequences (then it is all of them)
ENUMERATED = 100_000  # up to this many sequences, the test set is picked from a list of them all (0.1 s to hash)
PARTS = ("train", "test", "any")  # which sequences Task.sample draws: not held out, held out, or either


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

    @property
    def free_length(self) -> int:
        """How many tokens of a sequence are drawn at random: all of them, or induction's first half."""
        return self.length // 2 if self.name == "induction" else self.length

    @property
    def n_sequences(self) -> int:
        """How many different sequences the task has."""
        return len(self.vocabulary) ** self.free_length

    def sample(self, batch_size: int, generator: torch.Generator, part: str = "train") -> Batch:
        """A batch drawn from the generator: of sequences training may use ("train", what train() draws), of the
        held-out ones ("test"), or of either ("any")."""
        if part not in PARTS:
            raise ValueError(f"part {part!r} is not one of {PARTS}")
        free = torch.randint(len(self.vocabulary), (batch_size, self.free_length), generator=generator)  # [B, n]
        if part != "any":
            wanted = part == "test"
            wrong = held_out(free) != wanted  # [B]
            while wrong.any():  # draw again in place: one row in HOLD_OUT_EVERY is held out, so this ends fast
                free[wrong] = torch.randint(
                    len(self.vocabulary), (int(wrong.sum()), self.free_length), generator=generator
                )
                wrong = held_out(free) != wanted
        return self.batch(free)

    def test_batch(self, seed: int = 12345) -> Batch:
        """The held-out sequences a model is tested on: every one of them when there are at most TEST_SEQUENCES,
        else TEST_SEQUENCES of them picked with `seed`, all different while the task has at most ENUMERATED
        sequences (drawn, so rarely alike, above that). Kept per task and seed: the page asks on every rerun."""
        return _test_batch(self, seed)

    def batch(self, free: torch.Tensor) -> Batch:
        """The batch of these randomly drawn tokens [B, free_length]: its inputs, targets and scored positions."""
        batch_size, T = free.shape[0], self.length
        if self.name == "induction":
            sequence = torch.cat([free, free], dim=1)  # [B, T]: a random run, then the same run again
            targets = torch.roll(sequence, -1, dims=1)  # [B, T]: position t predicts token t + 1
            scored = torch.zeros(batch_size, T, dtype=torch.bool)
            scored[:, T // 2 : T - 1] = True  # in the repeat, the next token follows an earlier copy of this one
            return Batch(sequence, targets, scored)
        inputs = free  # [B, T]
        if self.name == "copy":
            targets = inputs.clone()
        elif self.name == "reverse":
            targets = inputs.flip(1)
        else:
            targets = inputs.sort(dim=1).values
        return Batch(inputs, targets, torch.ones(batch_size, T, dtype=torch.bool))

    def tokens(self, ids: torch.Tensor) -> list[str]:
        return [self.vocabulary[i] for i in ids.tolist()]


@functools.lru_cache(maxsize=16)
def _test_batch(task: Task, seed: int) -> Batch:
    """Task.test_batch, cached here rather than on the method, which would keep every Task it saw."""
    generator = torch.Generator().manual_seed(seed)
    if task.n_sequences > ENUMERATED:
        return task.sample(TEST_SEQUENCES, generator, part="test")
    V, n = len(task.vocabulary), task.free_length
    places = V ** torch.arange(n - 1, -1, -1)  # [n]: the weight of each token's digit
    every = torch.arange(task.n_sequences)[:, None] // places % V  # [n_sequences, n]: each sequence once
    kept = every[held_out(every)]  # [about n_sequences / HOLD_OUT_EVERY, n]
    if len(kept) > TEST_SEQUENCES:
        kept = kept[torch.randperm(len(kept), generator=generator)[:TEST_SEQUENCES]]
    return task.batch(kept)


def held_out(free: torch.Tensor) -> torch.Tensor:
    """Which sequences are kept out of training, by their randomly drawn tokens [B, n] -> [B] bool: one in
    HOLD_OUT_EVERY, picked by a hash of the tokens, so the same on every machine and for every seed."""
    rows = free.to(torch.uint8).numpy()  # [B, n]; the vocabulary has fewer than 256 tokens
    digests = [hashlib.blake2b(row.tobytes(), digest_size=1).digest()[0] for row in rows]
    return torch.from_numpy(np.array(digests, dtype=np.int64) % HOLD_OUT_EVERY == 0)


@functools.lru_cache(maxsize=64)
def blind_accuracy(task: Task) -> float:
    """The best token accuracy of an answer that ignores the input: each position's likeliest target.

    Every target of copy, reverse and induction is uniform over the V tokens, so 1/V. Sort's k-th target is the
    k-th smallest of T uniform tokens: P(it is at most v) = P(at least k + 1 tokens are at most v), a binomial tail
    with p = (v + 1) / V; the likeliest v per position, averaged over positions. Exact over all sequences (the
    held-out eighth changes it by sampling noise only). Kept per task: the live curves ask on every redraw."""
    V, T = len(task.vocabulary), task.length
    if task.name != "sort":
        return 1.0 / V

    def at_most(k: int, v: int) -> float:  # P(the k-th smallest of T is at most token v)
        p = (v + 1) / V
        return sum(math.comb(T, j) * p**j * (1 - p) ** (T - j) for j in range(k + 1, T + 1))

    best = [max(at_most(k, v) - (at_most(k, v - 1) if v else 0.0) for v in range(V)) for k in range(T)]
    return sum(best) / T


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
    if name == "induction" and (length % 2 or length < 4):
        raise ConfigError(
            f"Sequence length {length} does not work for induction, which repeats its first half and scores the "
            "repeat's tokens that have a next one: use an even length of 4 or more."
        )
    descriptions = {
        "copy": "Output the input as it is.",
        "reverse": "Output the input backwards: position t reads position T-1-t (an anti-diagonal of attention).",
        "sort": "Output the input's tokens in alphabetical order.",
        "induction": "A random run of tokens, then the same run again; predict each next token of the repeat, from "
        "what came after the same place in the first run.",
    }
    if name not in descriptions:
        raise ConfigError(f"Task {name!r} is not one of {', '.join(descriptions)}.")
    return Task(name, descriptions[name], "decoder" if name == "induction" else "encoder", length)


TASKS = ("copy", "reverse", "sort", "induction")
