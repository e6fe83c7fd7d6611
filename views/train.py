"""Train page: train a tiny transformer on a toy task, watch the learning curves live, then look inside it.

Its settings are views/train_settings.py, the run in progress views/training_run.py, the model files
views/train_files.py; the numbers come from explorer.training and explorer.analysis.task_patterns. The trained models
live in this browser session's st.session_state only: no other session sees or changes them.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from explorer.analysis.task_patterns import PATTERN_NAMES, head_shown_first, pattern_history, task_pattern
from explorer.config import CheckpointConfig, ConfigError, ModelConfig
from explorer.numbers import percent
from explorer.tasks import Task, blind_accuracy, make_task
from explorer.trace import AttentionMaps, run
from explorer.training import blind_to_order, evaluate, predictions, snapshot_maps, steps_to_accuracy, too_big_to_train
from explorer.training_text import INTRO, blind_guess_text, induction_scoring_text, test_set_text, tokens_scored
from explorer.word_lists import listed
from pictures.attention_panels import attention_map_panel, grid_panel
from pictures.boards import board
from pictures.training_charts import NORM_NAMES, curves_figure, pattern_figure, training_title
from views.matrix_view import show_board
from views.state import TrainedModel, app_state, use_trained
from views.train_files import model_files
from views.train_settings import Settings, settings_controls
from views.training_run import Training, collect_stopped_training, kept_training, train_models
from views.widgets import count, plotly_chart, positions_text, static_table, view_download

GOAL = 0.99  # "learned": this share of tokens right
# Each placement's accuracy and caption: "res-post-norm: accuracy on unseen data" and "+32.7 points vs. guessing (34%)"
# fit, and two side by side fit a 1024 px projector's 564 px column (2 x 268 + the row's 16 px gap).
PLACEMENT_PX = 268


def placement_names(norms: Sequence[str]) -> str:
    """E.g. "post-norm, pre-norm and peri-norm"."""
    return listed([NORM_NAMES[norm] for norm in norms])


def model_caption(cfg: ModelConfig, task: Task, s: Settings) -> str:
    """The task, and the sidebar's model that Train would train on it."""
    norms = s.norms(cfg.norm)
    placements = placement_names(norms) + (
        ", one after the other from the same initial weights" if len(norms) > 1 else ""
    )
    arch = "an encoder (every token sees every token)" if task.arch == "encoder" else "a causal decoder"
    return (
        f"**{task.name}**: {task.description} Tokens: {' '.join(task.vocabulary)}. "
        f"The model is the sidebar's: {count(cfg.n_layers, 'layer')} × {count(cfg.n_heads, 'head')}, d_model "
        f"{cfg.d_model}, d_ff {cfg.d_ff}, {positions_text(cfg.positional)}, {cfg.activation}, {placements}; seed "
        f"{cfg.seed} picks the initial weights and the training data. The task makes it {arch}, with no padding "
        "mask and no dropout."
    )


def summary(training: Training) -> None:
    """Final accuracy on the held-out sequences per model, steps, and how fast each reached the goal."""
    task = training.task
    blind = blind_accuracy(task)
    help_text = f"{test_set_text(task)} {blind_guess_text(task)}"
    if training.steps is None:  # loaded from files: trained who knows where
        help_text += (
            " This model was loaded from files: one this page trained never saw these sequences, one trained "
            "elsewhere may have."
        )
    if training.stopped is not None:
        norm, step = training.stopped
        untrained = [n for n in training.planned if n not in training.results]
        missing = (
            f"{placement_names(untrained)} {'was' if len(untrained) == 1 else 'were'} not trained." if untrained else ""
        )
        if training.results[norm].stopped_early:
            text = (
                f"Training stopped at step {step} of {training.steps} ({NORM_NAMES[norm]}): the model keeps what "
                "it learned by then." + (f" {missing}" if missing else "")
            )
        else:
            text = f"Training stopped after {NORM_NAMES[norm]} had finished: {missing}"
        st.warning(text, icon=":material/stop_circle:")
    row = st.container(horizontal=True, gap="small")  # as many a row as the window has room for
    for norm, result in training.results.items():
        col = row.container(width=PLACEMENT_PX)
        if norm not in training.fresh:
            training.fresh[norm] = evaluate(result.model, task)
        accuracy = training.fresh[norm]
        col.metric(
            f"{NORM_NAMES[norm]}: accuracy on unseen data",
            percent(accuracy),
            delta=f"{100 * (accuracy - blind):+.1f} points vs. guessing ({blind:.0%})",
            delta_color="normal",
            help=help_text,
        )
        if len(result.history):
            reached = steps_to_accuracy(result.history, GOAL)
            share = f"{GOAL:.0%} of its {tokens_scored(task)} right"
            col.caption(
                f"{result.steps} steps · loss {result.history['loss'].iloc[-1]:.4f} at step {result.steps} · "
                + (f"first batch with {share}: at step {reached}" if reached is not None else f"no batch had {share}")
            )
        else:
            col.caption(f"Loaded from {training.source}: no learning curve or snapshots.")


@st.fragment
def attention_forming(training: Training, norm: str, probe_maps: AttentionMaps, layer: int, head: int) -> None:
    """A slider over the snapshots: the chosen head large, every head small, at that step."""
    result, task = training.results[norm], training.task
    steps = [s.step for s in result.snapshots]
    step = st.select_slider(
        "Training step",
        steps,
        value=steps[-1],
        key=f"train_snapshot_{training.run_id}_{norm}",
        help="Attention is recorded on the probe input every few steps while training.",
    )
    maps = snapshot_maps(result.snapshots[steps.index(step)], probe_maps)
    chosen = attention_map_panel(maps, layer, head, name="snapshot", max_px=380)
    show_board(board([chosen, grid_panel(maps, width_px=400, pickable=False)]), key="train_snapshot_maps")
    pattern = task_pattern(task)
    if pattern is not None and len(steps) > 1:
        history = pattern_history(result.snapshots, pattern)
        plotly_chart(pattern_figure(history, task, marked_step=step), "train_pattern")


def your_tokens(training: Training, norm: str, layer: int, head: int) -> None:
    """The trained model on tokens the user types: its attention and its answer next to the task's."""
    result, task = training.results[norm], training.task
    text = st.text_input(
        f"Tokens from {' '.join(task.vocabulary)}, separated by spaces",
        value=" ".join(result.probe),
        key=f"train_tokens_{training.run_id}",
    )
    try:
        trace = run(result.model, text)
        table = predictions(result.model, task, trace.tokens)
    except ConfigError as error:
        st.error(str(error), icon=":material/error:")
        return
    if len(trace.tokens) != task.length:
        st.info(
            f"The model was trained on sequences of {task.length} tokens; with {len(trace.tokens)} it is outside "
            "what it learned, so expect mistakes.",
            icon=":material/info:",
        )
    maps = trace.attention_maps()["self-attention"]
    left, right = st.columns(2)
    with left:
        show_board(board([attention_map_panel(maps, layer, head, name="typed", max_px=380)]), key="train_tokens_map")
    with right:
        shown = pd.DataFrame(
            {
                "input": table["input"],
                "output": table["output"],  # short headers: four columns fit half of a projector's page
                "answer": table["expected"].fillna("–"),
                "right?": table["correct"].map({True: "✓", False: "✗"}).fillna("not scored"),
            }
        )
        static_table(shown)  # every column in view in half of a projector's page, where a data grid hid "right?"
        scored = table["correct"].dropna()
        if len(scored):
            st.caption(f"{int(scored.sum())} of {len(scored)} scored positions right.")
        scoring = induction_scoring_text(task, len(trace.tokens)) if task.name == "induction" else None
        if scoring:  # of the tokens typed, as the table scores them
            st.caption(scoring)


def use_on_other_pages(training: Training, norm: str) -> None:
    """Button callback: the other pages run this model (and its probe as their tokens) instead of a random one."""
    result = training.results[norm]
    use_trained(TrainedModel(result.model, training.task, training.label(norm)))
    st.session_state["tokens"] = " ".join(result.probe)


def look_inside(training: Training) -> str:
    """Curves, attention forming over training, the model on typed tokens; returns the placement shown."""
    histories = {norm: r.history for norm, r in training.results.items() if len(r.history)}
    if histories:
        steps = max(training.results[norm].steps for norm in histories)
        task = training.task
        curves = curves_figure(histories, len(task.vocabulary), steps, training_title(task), blind_accuracy(task))
        plotly_chart(curves, "train_curves")
        labels = [training.label(norm) for norm in training.results]
        view_download("Train", labels, lambda: [curves], "train")  # the curves as the page draws them
    norms = list(training.results)
    norm = norms[0]
    if len(norms) > 1:
        norm = st.radio(
            "Look inside",
            norms,
            format_func=NORM_NAMES.get,
            horizontal=True,
            key=f"train_model_{training.run_id}",
        )
    result, task = training.results[norm], training.task
    probe_maps = run(result.model, result.probe).attention_maps()["self-attention"]
    pattern = task_pattern(task)
    best_layer, best_head, why = head_shown_first(probe_maps, pattern)
    c1, c2, _ = st.columns([1, 1, 3])
    layer = c1.selectbox(
        "Layer", range(probe_maps.n_layers), index=best_layer, key=f"train_layer_{training.run_id}_{norm}"
    )
    head = c2.selectbox("Head", range(probe_maps.n_heads), index=best_head, key=f"train_head_{training.run_id}_{norm}")
    st.caption(why)
    if result.snapshots:
        st.subheader("Watch attention form")
        looks_for = f" For {task.name}, look for {PATTERN_NAMES[task.name]}." if task.name in PATTERN_NAMES else ""
        st.caption(
            f"The probe input `{' '.join(result.probe)}`: attention of the chosen head, and of every head, at the "
            f"step the slider picks.{looks_for}"
        )
        attention_forming(training, norm, probe_maps, layer, head)
    st.subheader("Try your own tokens")
    your_tokens(training, norm, layer, head)
    st.subheader("Use it on the other pages")
    trained = app_state().trained
    in_use = trained is not None and trained.model is result.model
    st.button(
        "Use this model on the other pages",
        key="train_use",
        on_click=use_on_other_pages,
        args=(training, norm),
        disabled=in_use,
        icon=":material/send:",
        help="Attention and the other pages then show this model on its probe input instead of the random model "
        "(until you click 'Back to the random model' in the sidebar). It stays in this browser session only.",
    )
    if in_use:
        st.success(f"The other pages show this model: {trained.label}.", icon=":material/check_circle:")
        st.page_link("views/attention.py", label="Open the Attention page", icon=":material/grid_on:")
    return norm


def main() -> None:
    st.title("Train")
    st.caption(INTRO)
    collect_stopped_training()
    state = app_state()
    cfg: ModelConfig | None = state.sidebar_config
    s = settings_controls()
    task, problem = None, None
    try:
        task = make_task(s.task, s.length)
    except ConfigError as error:
        problem = str(error)
    if isinstance(state.config, CheckpointConfig) and state.trained is None:
        cfg, problem = (
            None,
            (
                "Training builds a small model from the sidebar's controls, not a real checkpoint: choose "
                "“configured” in the sidebar's Model box to train one."
            ),
        )
    elif cfg is None:
        problem = "Fix the model setting named above (in the sidebar) to train."
    elif task is not None:
        st.caption(model_caption(cfg, task, s))
        blind = blind_to_order(cfg, task)
        if blind:
            st.warning(blind, icon=":material/shuffle:")
        problem = too_big_to_train(cfg, task)
    if problem:
        st.error(problem, icon=":material/error:")
    buttons = st.container(horizontal=True)  # each as wide as its label, which 1/6 columns cut on a narrow window
    start = buttons.button(
        "Train", type="primary", key="train_start", icon=":material/play_arrow:", disabled=bool(problem)
    )
    buttons.button(
        "Stop",
        key="train_stop",
        icon=":material/stop:",
        disabled=not start,
        help="Ends training and keeps what the model learned so far.",
    )
    bar, chart = st.empty(), st.empty()
    if start and not problem:
        train_models(cfg, task, s, bar, chart)
    training = kept_training()
    if training is None and not start and not problem:  # in the live chart's place, so the chart replaces it
        chart.info(
            "Press **Train**: the loss and accuracy curves grow here as the model learns (300 steps take a few "
            "seconds a placement). **Stop**, or any other click, ends training and keeps what the model has learned "
            "so far.",
            icon=":material/play_circle:",
        )
    norm = None
    if training is not None:
        st.header("What it learned")
        summary(training)
        norm = look_inside(training)
    model_files(training, norm)


main()
