"""A training run of the Train page in progress, and the one this session keeps: the run trains in the script run
that started it, draws its progress, and hands its model over when a later click stops it.

The trained models live in this browser session's st.session_state only: no other session sees or changes them.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from explorer.config import NORMS, ModelConfig
from explorer.tasks import Task, blind_accuracy
from explorer.training import TrainResult, common_start, single_thread, train
from pictures.training_charts import NORM_NAMES, curves_figure, training_title
from views.train_settings import Settings, learning_rate_text, url_checks
from views.widgets import plotly_chart

RESULT_KEY = "_train"  # this session's last training run, or the model loaded from files: a Training
LIVE_KEY = "_train_live"  # the LiveTraining of a training run in progress
RUNS_KEY = "_train_runs"  # how many trainings or loads this session has made: keys each one's widgets
UPDATE_SECONDS = 0.3  # how often the progress bar and the live curves are redrawn while training
STOP_WAIT_SECONDS = 30.0  # how long a run waits for a stopped training run to hand over its model
SNAPSHOTS = 30  # about this many attention snapshots per run


@dataclass
class Training:
    """One training run (or one model loaded from files) of this session."""

    run_id: int  # keys this run's widgets, so a new run starts with fresh selectors
    task: Task
    results: dict[str, TrainResult]  # placement ("post", "pre", "res-post", "peri") -> model, history, snapshots
    planned: tuple[str, ...]  # the placements asked for (a Stop can leave the later ones untrained)
    steps: int | None  # steps asked for; None for a model loaded from files
    source: str  # what the model came from, for labels
    fresh: dict[str, float] = field(default_factory=dict)  # accuracy on the held-out sequences, filled when first shown
    recipe: str = ""  # the Train page's settings a link leaves out, e.g. "lr 0.01, warmup 0, batch 32"; "" when loaded

    @property
    def stopped(self) -> tuple[str, int] | None:
        """(placement, steps it trained) when Stop or another click ended training early, else None."""
        for norm in self.planned:
            result = self.results.get(norm)
            if result is None or result.stopped_early:
                last = norm if result is not None else list(self.results)[-1]
                return last, self.results[last].steps
        return None

    def label(self, norm: str) -> str:
        """E.g. "reverse (length 8) · post-norm · 300 steps at lr 0.003, warmup 20, batch 64": with the task, what a
        link made while the model is shown needs to train it again (its sidebar settings are in the link), since the
        same settings and seed give the same weights."""
        result = self.results[norm]
        trained = f"{result.steps} steps" if len(result.history) else self.source
        if len(result.history) and self.recipe:
            trained += f" at {self.recipe}"
        return f"{self.task.name} (length {self.task.length}) · {NORM_NAMES[norm]} · {trained}"


# Training.label of a run trained here, read back: each group is named as the URL parameter that sets it.
LABEL_PATTERN = re.compile(
    r"(?P<train_task>\S+) \(length (?P<train_length>\d+)\) · (?P<norm>\S+)-norm · (?P<train_steps>\d+) steps "
    r"at lr (?P<train_lr>\S+), warmup (?P<train_warmup>\d+), batch (?P<train_batch>\d+)"
)


def train_again_params(label: str) -> dict[str, str] | None:
    """The URL parameters that set the Train page to train again the model a link's `label` names (Training.label),
    its placement as the sidebar's norm; None when the label names no run trained here (a model loaded from files, a
    link made before labels said the learning rate) or a value the Train page cannot take."""
    found = LABEL_PATTERN.fullmatch(label)
    if found is None:
        return None
    params = found.groupdict()
    checks = url_checks()
    if params["norm"] not in NORMS or not all(checks[key](params[key]) for key in params if key in checks):
        return None
    return params


def next_run_id() -> int:
    """A new number for this session's next training or load."""
    st.session_state[RUNS_KEY] = st.session_state.get(RUNS_KEY, 0) + 1
    return st.session_state[RUNS_KEY]


class LiveTraining:
    """A training run in progress: train()'s callback, which redraws the progress bar and the curves every
    UPDATE_SECONDS, and the place its result is left for whichever script run shows it.

    How a click ends it. Streamlit does not wait for a running script: on any click (Stop, another control,
    another page) it tells the running script to stop and at once starts a new run in another thread, with the
    same session_state. From then on, the old run raises StopException at its next st call, including any use of
    st.session_state. So the new run sets `stop_requested` (the callback then returns False: train() returns the
    model as learned so far), waits for `finished`, and moves `training` into session_state. When the old run
    itself meets Streamlit's exception (a rerun or stop request, the tab closing), it ends training the same
    way and raises the exception again once the result is kept here."""

    def __init__(
        self, run_id: int, bar: DeltaGenerator, chart: DeltaGenerator, norms: tuple[str, ...], steps: int, task: Task
    ) -> None:
        self.run_id = run_id
        self.bar, self.chart = bar, chart
        self.norms, self.steps, self.task = norms, steps, task
        self.rows: dict[str, list[dict]] = {norm: [] for norm in norms}
        self.norm = norms[0]
        self.last_draw = 0.0
        self.draws = 0  # keys each drawing of the live chart: two alike in one run would clash
        self.stop_requested = threading.Event()  # set by a later script run of this session
        self.finished = threading.Event()  # set once `training` holds everything this run will learn
        self.interrupt: BaseException | None = None  # Streamlit's exception met while drawing, raised again later
        self.training: Training | None = None

    @property
    def ended(self) -> bool:
        """Stop was asked for, or a draw met Streamlit's exception: train no further."""
        return self.stop_requested.is_set() or self.interrupt is not None

    def begin(self, norm: str) -> bool:
        """Placement `norm` starts training: draw its empty curve; False when the run has ended."""
        self.norm = norm
        return self.draw()

    def __call__(self, step: int, loss: float, accuracy: float) -> bool:
        self.rows[self.norm].append({"step": step, "loss": loss, "accuracy": accuracy})
        if self.stop_requested.is_set():
            return False
        if step == self.steps or time.monotonic() - self.last_draw >= UPDATE_SECONDS:
            return self.draw()
        return True

    def draw(self) -> bool:
        """Redraw the progress bar and the curves; False (train no further) once the run has ended."""
        if self.ended:
            return False
        rows = self.rows[self.norm]
        step = rows[-1]["step"] if rows else 0
        done = self.norms.index(self.norm) * self.steps + step
        text = f"Training {NORM_NAMES[self.norm]}: step {step} of {self.steps}"
        if rows:
            text += f" · loss {rows[-1]['loss']:.4f} · accuracy {rows[-1]['accuracy']:.1%} on its next batch"
        histories = {norm: pd.DataFrame(r, columns=["step", "loss", "accuracy"]) for norm, r in self.rows.items() if r}
        try:
            self.bar.progress(done / (self.steps * len(self.norms)), text=text)
            figure = curves_figure(
                histories, len(self.task.vocabulary), self.steps, training_title(self.task), blind_accuracy(self.task)
            )
            plotly_chart(figure, f"train_live_{self.draws}", self.chart)
        except BaseException as interrupt:  # noqa: B036 - Streamlit's rerun/stop request: raised again once kept
            self.interrupt = interrupt
            return False
        self.last_draw = time.monotonic()
        self.draws += 1
        return True


def keep_result(live: LiveTraining) -> None:
    """Move a finished or stopped training run's result into session_state (from a run Streamlit still runs)."""
    if live.training is not None:
        keep_training(live.training)
    if st.session_state.get(LIVE_KEY) is live:
        del st.session_state[LIVE_KEY]


def collect_stopped_training() -> None:
    """A training run of this session still in progress was stopped by the click that started this run: wait
    for it to hand over what it learned, and keep that."""
    live: LiveTraining | None = st.session_state.get(LIVE_KEY)
    if live is None:
        return
    live.stop_requested.set()
    if not live.finished.wait(STOP_WAIT_SECONDS):
        st.info("The training you stopped is still finishing a step; its model appears at your next click.")
        return
    keep_result(live)


def train_models(cfg: ModelConfig, task: Task, s: Settings, bar: DeltaGenerator, chart: DeltaGenerator) -> None:
    """Train the placements asked for, one after the other, keeping the result in session_state."""
    norms = s.norms(cfg.norm)
    live = LiveTraining(next_run_id(), bar, chart, norms, s.steps, task)
    st.session_state[LIVE_KEY] = live
    start = common_start(cfg, task)  # the same initial weights for every placement
    results: dict[str, TrainResult] = {}
    try:
        with single_thread():
            for norm in norms:
                if not live.begin(norm):
                    break
                results[norm] = train(
                    cfg.replace(norm=norm),
                    task,
                    steps=s.steps,
                    lr=s.lr,
                    warmup=s.warmup,
                    batch_size=s.batch_size,
                    seed=cfg.seed,
                    callback=live,
                    snapshot_every=max(1, s.steps // SNAPSHOTS),
                    initial=start,
                )
                if live.ended:
                    break
    finally:  # no st call here: after a click, Streamlit may already have stopped this run
        if results:
            live.training = Training(live.run_id, task, results, norms, s.steps, "trained here", recipe=recipe(s))
        live.finished.set()
    if live.interrupt is not None:
        raise live.interrupt
    keep_result(live)  # raises StopException instead if a click already ended this run; the next run keeps it
    bar.empty()
    chart.empty()


def recipe(s: Settings) -> str:
    """The settings that decide a run's weights besides the task, its steps and the sidebar's model, as a label
    says them: "lr 0.003, warmup 20, batch 64"."""
    return f"lr {learning_rate_text(s.lr)}, warmup {s.warmup}, batch {s.batch_size}"


def keep_training(training: Training) -> None:
    """Make `training` the one this session shows, in place of any before it."""
    st.session_state[RESULT_KEY] = training


def kept_training() -> Training | None:
    """This session's last training run, or the model it loaded from files."""
    return st.session_state.get(RESULT_KEY)
