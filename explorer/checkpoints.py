"""Save and load a trained model: weights as safetensors, the config and vocabulary as JSON. Nothing is unpickled."""

from __future__ import annotations

import json

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from explorer.build import build_model, model_skeleton
from explorer.config import ConfigError, parse_config
from explorer.model import Transformer
from explorer.tasks import Task, make_task

FORMAT = "attention-explorer/1"
MAX_WEIGHTS_BYTES = 64 * 1024 * 1024
MAX_META_BYTES = 64 * 1024


def save(model: Transformer, task: str | Task | None = None) -> tuple[bytes, str]:
    """-> (safetensors bytes of every parameter, JSON text with the config, vocabulary and task).
    Given a Task (not just its name), the JSON also keeps its sequence length, which load_trained() needs."""
    if model.config is None:
        raise ConfigError("Only models built from a config can be saved; an imported torch model is saved by torch.")
    weights = {name: tensor.detach().contiguous() for name, tensor in model.state_dict().items()}
    meta = {
        "format": FORMAT,
        "config": model.config.to_dict(),
        "vocabulary": list(model.vocabulary) if model.vocabulary else None,
        "task": task.name if isinstance(task, Task) else task,
    }
    if isinstance(task, Task):
        meta["length"] = task.length
    return save_safetensors(weights), json.dumps(meta, indent=2)


def load(weights: bytes, meta: str | bytes) -> tuple[Transformer, str | None]:
    """The model and its task name from save()'s two files; anything malformed or mismatched is explained."""
    if len(meta) > MAX_META_BYTES:
        raise ConfigError(f"The JSON file is {len(meta):,} bytes; a model's JSON is far smaller (at most 64 KiB).")
    if len(weights) > MAX_WEIGHTS_BYTES:
        raise ConfigError(f"The weights file is {len(weights) / 2**20:.0f} MiB; the limit is 64 MiB.")
    try:
        info = json.loads(meta)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"The JSON file is not valid JSON ({error}).") from None
    except RecursionError:  # "[[[[..." nested thousands deep: a JSON bomb, not a model description
        raise ConfigError("The JSON file nests too deeply to be a model description.") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT or not isinstance(info.get("config"), dict):
        raise ConfigError(f"The JSON file is not an Attention Explorer model description (format {FORMAT}).")
    cfg = parse_config(info["config"])
    vocabulary = info.get("vocabulary")
    if vocabulary is not None and (
        not isinstance(vocabulary, list)
        or not 1 <= len(vocabulary) <= 10000
        or not all(isinstance(t, str) and t and not any(c.isspace() for c in t) for t in vocabulary)
        or len(set(vocabulary)) != len(vocabulary)
    ):
        raise ConfigError("The vocabulary in the JSON file must be a list of distinct tokens without spaces.")
    task = info.get("task")
    vocabulary = tuple(vocabulary) if vocabulary else None
    try:
        tensors = load_safetensors(weights)
    except (SafetensorError, ValueError, OSError) as error:
        raise ConfigError(f"The weights file is not a readable safetensors file ({error}).") from None
    # Checked on a skeleton first: a JSON may describe a model of gigabytes, which must not be built to refuse it.
    _check_matches(model_skeleton(cfg, vocabulary), tensors)
    model = build_model(cfg, vocabulary)
    model.load_state_dict(tensors)
    return model.eval(), task if isinstance(task, str) else None


def _check_matches(model: Transformer, tensors: dict[str, torch.Tensor]) -> None:
    expected = model.state_dict()
    missing, extra = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or extra:
        detail = f"missing {missing[:3]}" if missing else f"unexpected {extra[:3]}"
        raise ConfigError(f"The weights do not belong to the model the JSON describes: {detail}.")
    for name, tensor in tensors.items():
        if tensor.shape != expected[name].shape or tensor.dtype != expected[name].dtype:
            raise ConfigError(
                f"The weights do not match the JSON's config: {name} is {tensor.dtype} {list(tensor.shape)}, "
                f"the config needs {expected[name].dtype} {list(expected[name].shape)}."
            )
        if not torch.isfinite(tensor).all():
            raise ConfigError(f"The weights file holds NaN or infinite values in {name}.")


def load_trained(weights: bytes, meta: str | bytes) -> tuple[Transformer, Task]:
    """load() for a model trained on a toy task: the model and its task, checked against each other."""
    model, name = load(weights, meta)
    length = json.loads(meta).get("length")
    if name is None or isinstance(length, bool) or not isinstance(length, int):
        raise ConfigError(
            "The JSON file does not say which task (and sequence length) the model was trained on; "
            "use the two files the Train page downloads."
        )
    task = make_task(name, length)
    if model.vocabulary != task.vocabulary:
        raise ConfigError(
            f"The model's vocabulary ({' '.join(model.vocabulary or ()) or 'none'}) is not the {name} task's "
            f"({' '.join(task.vocabulary)})."
        )
    if model.config is None or model.config.arch != task.arch:
        kinds = {"encoder": "an encoder", "decoder": "a causal decoder", "encoder-decoder": "an encoder-decoder"}
        described = kinds[model.config.arch] if model.config is not None else "an imported model"
        raise ConfigError(f"The {name} task trains {kinds[task.arch]}; the JSON describes {described}.")
    return model, task
