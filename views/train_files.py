"""The Train page's model files: download the model shown as safetensors + JSON, and load such a pair back as
this session's model (checked before use, never executed)."""

from __future__ import annotations

import streamlit as st

from explorer import checkpoints
from explorer.config import ConfigError
from explorer.training import loaded_result
from views.training_run import Training, keep_training, next_run_id
from views.widgets import download

UPLOAD_ERROR_KEY = "_train_upload_error"  # why the last upload could not load, shown once
LIMIT_MB = checkpoints.MAX_WEIGHTS_BYTES >> 20  # the largest file the page accepts, in MB


def model_files(training: Training | None, norm: str | None) -> None:
    """Download the shown model (safetensors + JSON); upload such a pair back."""
    st.subheader("Model files")
    if training is not None and norm is not None:
        result, task = training.results[norm], training.task
        name = f"{task.name}{task.length}_{norm}-norm"
        row = st.container(horizontal=True)  # each button as wide as its label, which columns cut on a projector
        download(
            "Download weights (.safetensors)",
            lambda: checkpoints.save(result.model, task)[0],
            f"{name}.safetensors",
            "application/octet-stream",
            "train_download_weights",
            row,
        )
        download(
            "Download settings (.json)",
            lambda: checkpoints.save(result.model, task)[1],
            f"{name}.json",
            "application/json",
            "train_download_json",
            row,
        )
    st.file_uploader(
        "Load a trained model: choose both of its files, the .safetensors and the .json",
        type=["safetensors", "json"],
        accept_multiple_files=True,
        key="train_upload",
        max_upload_size=LIMIT_MB,
        help=f"The two files this page downloads, at most {LIMIT_MB} MB. Nothing in them is executed: the weights "
        "are plain tensors and the settings plain JSON, both checked before use.",
    )
    st.button("Load model", key="train_load", on_click=load_uploaded, icon=":material/upload:")
    error = st.session_state.pop(UPLOAD_ERROR_KEY, None)
    if error:
        st.error(error, icon=":material/error:")


def load_uploaded() -> None:
    """Button callback (before the page draws): check the uploaded pair and make it this session's model."""
    files = st.session_state.get("train_upload") or []
    weights = [f for f in files if f.name.lower().endswith(".safetensors")]
    metas = [f for f in files if f.name.lower().endswith(".json")]
    if len(weights) != 1 or len(metas) != 1:
        st.session_state[UPLOAD_ERROR_KEY] = (
            "Choose exactly two files: one .safetensors (the weights) and one .json (the settings), as the Train "
            f"page downloads them. Chosen: {', '.join(f.name for f in files) or 'none'}."
        )
        return
    too_big = [f for f in (*weights, *metas) if f.size > checkpoints.MAX_WEIGHTS_BYTES]
    if too_big:
        st.session_state[UPLOAD_ERROR_KEY] = f"{too_big[0].name} is over the {LIMIT_MB} MB limit."
        return
    try:
        model, task = checkpoints.load_trained(weights[0].getvalue(), metas[0].getvalue())
    except ConfigError as error:
        st.session_state[UPLOAD_ERROR_KEY] = f"Could not load {weights[0].name} with {metas[0].name}: {error}"
        return
    norm = model.config.norm
    result = loaded_result(model, task)
    keep_training(Training(next_run_id(), task, {norm: result}, (norm,), None, weights[0].name))
