"""Train a tiny transformer on a toy task, keeping its learning curve and attention snapshots, and read what it
learned: its answers, when it got there, its size."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from explorer.build import build_model, copy_shared_weights, parameter_total
from explorer.config import ConfigError, ModelConfig
from explorer.inputs import token_ids
from explorer.model import Transformer, float32_default
from explorer.tasks import Batch, Task, accuracy, expected_output
from explorer.trace import AttentionMaps, run

Callback = Callable[[int, float, float], bool | None]  # (step, loss, accuracy) -> False stops training
# A TrainResult's history, one row per step from 0 to the last: the loss and accuracy of the model after `step`
# updates (the one the snapshot of that step shows), on the batch its next update trains on, and that update's
# learning rate (NaN on the last row, whose batch no update trains on).
HISTORY_COLUMNS = ["step", "loss", "accuracy", "lr"]
MAX_TRAIN_PARAMETERS = 2_000_000  # more would take minutes per run on a laptop's CPU (the default model has 101,770)


@dataclass(frozen=True)
class Snapshot:
    step: int
    attention: np.ndarray  # [L, H, T, T] on the probe input


@dataclass
class TrainResult:
    model: Transformer
    task: Task
    history: pd.DataFrame  # step, loss, accuracy, lr: HISTORY_COLUMNS
    probe: list[str]  # the fixed input the snapshots were taken on
    snapshots: list[Snapshot] = field(default_factory=list)
    stopped_early: bool = False

    @property
    def steps(self) -> int:
        """Updates the model took: 0 for a model loaded from files."""
        return int(self.history["step"].iloc[-1]) if len(self.history) else 0


def task_config(cfg: ModelConfig, task: Task) -> ModelConfig:
    """The config a task trains: its architecture (encoder, or causal decoder), no padding mask, no dropout."""
    return cfg.replace(arch=task.arch, mask="none", dropout=0.0)


ORDER_TASKS = ("reverse", "sort")  # tasks whose answer at a position depends on where the input tokens sit


def blind_to_order(cfg: ModelConfig, task: Task) -> str | None:
    """Why this config cannot learn the task, when it cannot tell positions apart: with no positional encoding
    and no causal mask (an encoder task), every position sees the same set of tokens and computes the same thing
    for the same token, so no answer that depends on order can be learned. None when it can."""
    if cfg.positional != "none" or task_config(cfg, task).arch != "encoder" or task.name not in ORDER_TASKS:
        return None
    return (
        f"With no positional encoding, this encoder cannot tell positions apart: a token gives the same output "
        f"wherever it sits, so {task.name} cannot be learned (the Positional encodings page shows why). Pick a "
        "positional encoding in the sidebar, or train anyway to watch it fail."
    )


def too_big_to_train(cfg: ModelConfig, task: Task) -> str | None:
    """Why this config is too big to train live (over MAX_TRAIN_PARAMETERS), or None when it is not."""
    n_params = parameter_count(cfg, task)
    if n_params <= MAX_TRAIN_PARAMETERS:
        return None
    return (
        f"This model has {n_params:,} parameters; training live is limited to {MAX_TRAIN_PARAMETERS:,}. "
        "Use fewer layers or a smaller d_model or d_ff in the sidebar."
    )


def probe_tokens(task: Task, seed: int) -> list[str]:
    """The fixed input train(seed=seed) takes its attention snapshots on: one sequence drawn with seed + 1."""
    return task.tokens(task.sample(1, torch.Generator().manual_seed(seed + 1)).inputs[0])


START_PLACEMENT = "peri"  # the placement with every norm any placement has: norm1..3, out_norm1..3, the final one


def initial_model(cfg: ModelConfig, task: Task, initial: Transformer | None = None) -> Transformer:
    """The untrained model train() starts from: built for the task, or taking `initial`'s weights wherever names
    and shapes match. A norm `initial` lacks starts as built: weight 1, bias 0, an identity scale and shift after
    the normalisation. Nothing of `initial` is carried aside (copy_shared_weights' flip-back store): a trained
    model keeps only its own weights, not another placement's untrained norms."""
    model = build_model(task_config(cfg, task), task.vocabulary)
    if initial is not None:
        copy_shared_weights(initial, model)
        model.carried = {}
    return model


def common_start(cfg: ModelConfig, task: Task) -> Transformer:
    """The initial weights runs of several placements share, so they differ only in where the norms sit: the
    START_PLACEMENT model of cfg's seed, which holds every parameter any placement has (its norms at weight 1,
    bias 0, as each placement's own would start)."""
    return initial_model(cfg.replace(norm=START_PLACEMENT), task)


def logits(model: Transformer, inputs: torch.Tensor, train: bool = False) -> torch.Tensor:
    """inputs [B, T] token ids -> logits [B, T, V]."""
    if model.embedding is None or model.head is None:
        raise ConfigError("This model has no vocabulary to train on; build it with build_model(cfg, vocabulary).")
    T = inputs.shape[1]
    x = model.embed(inputs)  # [B, T, D]
    causal = torch.tril(torch.ones(1, T, T, dtype=torch.bool)) if model.encoder is None else None  # [1, T, T]
    out, _ = model(x, causal, train=train)[-1]  # [B, T, D]
    return model.head(out)  # [B, T, V]


def loss_and_accuracy(model: Transformer, batch: Batch, train: bool = False) -> tuple[torch.Tensor, float]:
    out = logits(model, batch.inputs, train)  # [B, T, V]
    loss = F.cross_entropy(out[batch.scored], batch.targets[batch.scored])
    return loss, accuracy(out, batch)


@float32_default()
def train(
    cfg: ModelConfig,
    task: Task,
    steps: int = 400,
    lr: float = 3e-3,
    warmup: int = 20,
    batch_size: int = 64,
    seed: int = 0,
    callback: Callback | None = None,
    snapshot_every: int = 25,
    clip: float = 1.0,
    initial: Transformer | None = None,
    stop_at_accuracy: float | None = None,
) -> TrainResult:
    """AdamW with linear warmup and gradient clipping; data and initial weights fixed by `seed` and cfg.seed.
    `initial` starts from a copy of another model's weights wherever names and shapes match (initial_model;
    common_start gives one every placement takes all its weights from), so runs of several placements compare
    honestly: the same initial weights, the same batches in the same order.
    `stop_at_accuracy` ends training once accuracy on the held-out sequences (evaluate), checked every 10 steps,
    reaches it. The history (HISTORY_COLUMNS) and the snapshots count the updates the model had taken: step 0 is
    the initial model, and the last row is the model returned."""
    _check(steps, lr, warmup, batch_size, snapshot_every)
    model = initial_model(cfg, task, initial)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / max(1, warmup)))
    # warmup longer than the run is allowed: the learning rate then never reaches lr
    data = torch.Generator().manual_seed(seed)
    probe = probe_tokens(task, seed)
    rows, snapshots, stopped = [], [], False
    with torch.enable_grad():
        for step in range(steps + 1):  # step: updates the model has taken
            loss, acc = loss_and_accuracy(model, task.sample(batch_size, data), train=True)
            last = step == steps  # the trained model's own row: measured on a batch it does not train on
            rows.append(
                {
                    "step": step,
                    "loss": loss.item(),
                    "accuracy": acc,
                    "lr": np.nan if last else schedule.get_last_lr()[0],
                }
            )
            if step % snapshot_every == 0 or last:
                snapshots.append(_snapshot(model, step, probe))
            checked = stop_at_accuracy is not None and step > 0 and step % 10 == 0
            reached = checked and evaluate(model, task) >= stop_at_accuracy
            if reached or (callback is not None and callback(step, rows[-1]["loss"], acc) is False):
                stopped = not last
                if snapshots[-1].step != step:
                    snapshots.append(_snapshot(model, step, probe))
                break
            if last:
                break
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            schedule.step()
    history = pd.DataFrame(rows, columns=HISTORY_COLUMNS)
    return TrainResult(model.eval(), task, history, probe, snapshots, stopped)


def loaded_result(model: Transformer, task: Task) -> TrainResult:
    """A model loaded from files, as a TrainResult: no learning curve, no snapshots, and the probe train() would
    have used with the model's own seed (the one the Train page trains with)."""
    if model.config is None:
        raise ConfigError("Only models built from a config carry the seed their probe input is drawn with.")
    history = pd.DataFrame(columns=HISTORY_COLUMNS)
    return TrainResult(model, task, history, probe_tokens(task, model.config.seed))


def evaluate(model: Transformer, task: Task, seed: int = 12345) -> float:
    """Token accuracy on held-out sequences, which train() never draws (Task.test_batch; `seed` picks them when
    the task has more than it tests)."""
    with torch.inference_mode():
        return loss_and_accuracy(model, task.test_batch(seed))[1]


def steps_to_accuracy(history: pd.DataFrame, level: float) -> int | None:
    """The first step (updates taken) whose accuracy on its batch reached `level`, or None."""
    reached = history.loc[history["accuracy"] >= level, "step"]
    return int(reached.iloc[0]) if len(reached) else None


def parameter_count(cfg: ModelConfig, task: Task) -> int:
    """Parameters train() would fit for this config and task, counted without allocating any weights."""
    return parameter_total(task_config(cfg, task), task.vocabulary)


def predictions(model: Transformer, task: Task, tokens: Sequence[str]) -> pd.DataFrame:
    """position, input, output (the model's most likely token), expected, correct (None where not scored)."""
    tokens = list(tokens)
    ids = token_ids(model.vocabulary, tokens)  # [T]; unknown tokens raise a ConfigError
    with torch.inference_mode():
        best = logits(model, ids[None])[0].argmax(dim=-1)  # [T]
    output = [model.vocabulary[i] for i in best.tolist()]
    expected = expected_output(task, tokens)
    correct = [None if e is None else o == e for o, e in zip(output, expected, strict=True)]
    return pd.DataFrame(
        {"position": range(len(tokens)), "input": tokens, "output": output, "expected": expected, "correct": correct}
    )


def snapshot_maps(snapshot: Snapshot, like: AttentionMaps) -> AttentionMaps:
    """The snapshot's weights [L, H, T, T] with the tokens and mask of a trace on the same probe.
    Snapshots keep weights only: the scores are NaN."""
    if snapshot.attention.shape != like.weights.shape:
        raise ValueError(f"snapshot {snapshot.attention.shape} does not match the maps {like.weights.shape}")
    scores = np.full(like.scores.shape, np.nan, dtype=np.float32)
    return replace(like, weights=snapshot.attention, scores=scores)


def _snapshot(model: Transformer, step: int, probe: list[str]) -> Snapshot:
    return Snapshot(step, run(model, probe).attention)


def _check(steps: int, lr: float, warmup: int, batch_size: int, snapshot_every: int) -> None:
    if not 1 <= steps <= 20000:
        raise ConfigError(f"steps {steps} is out of range; use 1 to 20,000.")
    if not 0 < lr <= 0.1:
        raise ConfigError(f"learning rate {lr} is out of range; use a value above 0 and at most 0.1 (3e-3 works).")
    if not 0 <= warmup <= 20000:
        raise ConfigError(f"warmup {warmup} is out of range; use 0 to 20,000 steps.")
    if not 1 <= batch_size <= 1024:
        raise ConfigError(f"batch size {batch_size} is out of range; use 1 to 1,024.")
    if snapshot_every < 1:
        raise ConfigError("snapshot_every must be at least 1.")


_threads_lock = threading.Lock()  # one caller at a time reads the default count, sets its own and puts it back


def _in_new_thread(work: Callable[[], Any]) -> Any:
    """work() in a new OS thread that ends with it: torch's count there starts at the one every new thread gets."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(work()), name="torch-threads")
    worker.start()
    worker.join()
    return out[0]


@contextmanager
def single_thread() -> Iterator[None]:
    """Run this OS thread's torch work on one intra-op thread, and only this thread's; on the way out its count
    from before comes back.

    One thread makes a training run's numbers the same on any machine: with 2 threads the weights differ from the
    1-thread run's after a few steps (the reductions' order follows the thread count; bench/bench_train.py
    --threads 2,1 prints both), and a tiny model's steps are too small to share out: on a busy 2-core machine 2
    threads took several times longer per step. torch.set_num_threads sets the calling thread's OpenMP and MKL
    counts, but also the count every thread starts with at its first torch call, and Streamlit runs each script
    run of each session in a new thread: while one session trained, every other session's next page ran on one
    thread. So that default is put back at once, by a thread of its own that ends there; other threads keep
    theirs. The lock keeps two callers from taking each other's 1 for the default.
    """
    with _threads_lock:
        default = _in_new_thread(torch.get_num_threads)  # what a new thread gets: the process's count
        before = torch.get_num_threads()  # this thread's own
        torch.set_num_threads(1)
        _in_new_thread(lambda: torch.set_num_threads(default))
    try:
        yield
    finally:
        with _threads_lock:
            torch.set_num_threads(before)
            _in_new_thread(lambda: torch.set_num_threads(default))
