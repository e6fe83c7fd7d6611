"""How large a model and a trace the app builds: one link must not take a shared server's memory."""

from __future__ import annotations

from functools import lru_cache

from explorer.build import parameter_total
from explorer.config import CheckpointConfig, ConfigError, ModelConfig
from explorer.machine_memory import available_bytes
from explorer.model import Transformer

MAX_PARAMETERS = 100_000_000  # 400 MB of float32 weights: BERT-base's twelve blocks (85 million) fit
MAX_TRACE_BYTES = 256_000_000  # one input's trace; the app caches a few (dashboard.cached_run)
# A shipped checkpoint is built once per server, not per link, so the parameter limit is not for it; its traces are
# larger: 512 pieces through SmolLM2's 30 x 9 heads keep 626 MB (views.shared_cache bounds how many are kept).
MAX_CHECKPOINT_TRACE_BYTES = 1_500_000_000
MAX_PIECES = 512  # sub-word pieces the app runs through a checkpoint: MiniLM's whole position table
FLOATS_PER_LAYER_TOKEN = 14  # x d_model, plus d_ff: measured 10 for an encoder block, 11.5 for an encoder-decoder


@lru_cache(maxsize=256)
def _parameters(cfg: ModelConfig) -> int:
    return parameter_total(cfg)


def attention_cells(cfg: ModelConfig, n_source: int, n_target: int | None = None) -> int:
    """Attention weights a trace of this config keeps: layers x heads x queries x keys, over every kind."""
    per_head = n_source * n_source
    if cfg.reads_target:
        t = n_target or 1
        per_head += t * t + t * n_source  # decoder self-attention, then cross-attention
    return cfg.n_layers * cfg.n_heads * per_head


def trace_bytes(cfg: ModelConfig, n_source: int, n_target: int | None = None) -> int:
    """An upper estimate of the bytes an app's trace keeps (run with keep_scores=False): per layer and token the
    residual stream, each sub-layer's input and output and the feed-forward's hidden units; per attention cell a
    weight; all float32."""
    tokens = n_source + ((n_target or 1) if cfg.reads_target else 0)
    return 4 * (
        _activation_floats(cfg.n_layers, tokens, cfg.d_model, cfg.d_ff) + attention_cells(cfg, n_source, n_target)
    )


def _activation_floats(n_layers: int, tokens: int, d_model: int, d_ff: int) -> int:
    """The floats a stack's trace keeps besides attention: per layer and token, FLOATS_PER_LAYER_TOKEN x d_model
    and the feed-forward's d_ff hidden units."""
    return n_layers * tokens * (FLOATS_PER_LAYER_TOKEN * d_model + d_ff)


def check_app_size(cfg: ModelConfig, n_source: int, n_target: int | None = None) -> None:
    """Raise ConfigError, saying what to make smaller, when the app would build a model or keep a trace too large
    for a laptop or a shared server. explorer.run itself refuses only a trace larger than the machine's free
    memory (check_fits_in_memory)."""
    checkpoint = isinstance(cfg, CheckpointConfig)
    parameters = 0 if checkpoint else _parameters(cfg)
    if parameters > MAX_PARAMETERS:
        raise ConfigError(
            f"This model would have {parameters:,} parameters ({parameters * 4 / 1e9:.1f} GB); the app builds at "
            f"most {MAX_PARAMETERS:,}. Use fewer layers or a smaller d_model or d_ff."
        )
    if max(n_source, n_target or 0) > cfg.max_tokens:
        return  # explorer.run refuses such an input with its own sentence
    size = trace_bytes(cfg, n_source, n_target)
    budget = MAX_CHECKPOINT_TRACE_BYTES if checkpoint else MAX_TRACE_BYTES
    if size > budget:
        tokens = f"{n_source:,}" + (f" + {n_target:,}" if cfg.reads_target and n_target else "")
        raise ConfigError(
            f"Every number of this run ({cfg.n_layers} layers × {cfg.n_heads} heads, d_model {cfg.d_model}, d_ff "
            f"{cfg.d_ff}, on {tokens} tokens) would take about {size / 1e6:,.0f} MB; the app keeps at most "
            f"{budget / 1e6:,.0f} MB per input. Use fewer tokens, layers or heads, or a smaller d_model "
            "or d_ff."
        )


def run_bytes(model: Transformer, n_source: int, n_target: int | None, keep_scores: bool) -> tuple[int, int]:
    """(all, attention weights): an upper estimate of the bytes explorer.run's trace of `model` keeps, read from the
    model's own stacks (an imported torch model has no ModelConfig), as trace_bytes reads a config."""
    stacks = [(model.first_stack.spec, n_source, 0)]
    if model.encoder is not None and model.decoder is not None and n_target is not None:
        stacks.append((model.decoder.spec, n_target, n_source))  # its cross-attention reads every source position
    floats = cells = 0
    for spec, tokens, memory in stacks:
        floats += _activation_floats(spec.n_layers, tokens, spec.d_model, spec.d_ff)
        cells += spec.n_layers * spec.n_heads * tokens * (tokens + memory)
    return 4 * (floats + cells * (2 if keep_scores else 1)), 4 * cells


def check_fits_in_memory(model: Transformer, n_source: int, n_target: int | None, keep_scores: bool) -> None:
    """Raise ConfigError when a run's trace alone would take more memory than the machine has free: torch asked for
    27 GB for 5,000 pieces through SmolLM2 and failed deep inside the forward with its own allocator's message (or,
    on a machine that overcommits, the kernel ends the process)."""
    free = available_bytes()
    if free is None:
        return
    size, weights = run_bytes(model, n_source, n_target, keep_scores)
    if size <= free:
        return
    spec = model.first_stack.spec
    scores = ", as much again of their scores (keep_scores=False keeps none)" if keep_scores else ""
    raise ConfigError(
        f"This run would keep about {size / 1e6:,.0f} MB: {weights / 1e6:,.0f} MB of attention weights "
        f"({spec.n_layers} layers × {spec.n_heads} heads, {n_source:,} positions){scores}, and the activations; "
        f"this machine has {free / 1e6:,.0f} MB free. Use a shorter text."
    )
