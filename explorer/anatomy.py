"""The anatomy of a configured model: each step's tensor shape, parameter counts, multiply-adds, a diagram."""

from __future__ import annotations

import re

import pandas as pd
from torch import nn

from explorer.config import NORM_FORMULAS, NORM_IN_FRONT, NORM_ON_OUTPUT, ModelConfig, applied_masks


def forward_steps(
    cfg: ModelConfig, n_tokens: int, n_target: int | None = None, vocabulary_size: int | None = None
) -> pd.DataFrame:
    """step, shape (in letters), size (for this input): tokens to output through one block of each stack.
    An encoder-decoder lists the encoder on the source (S = n_tokens positions), then the decoder on the target
    (T = n_target positions, 1 if not given) with its cross-attention to the encoder's output. A model with a
    read-out to `vocabulary_size` token logits ends with it, as multiply_adds counts it."""
    if not cfg.reads_target:
        rows = _stack_steps(cfg, "", n_tokens, None)
    else:
        rows = _stack_steps(cfg, "encoder ", n_tokens, None, letter="S")
        rows += _stack_steps(cfg, "decoder ", n_target or 1, n_tokens)
    if vocabulary_size is not None:
        T = n_target or 1 if cfg.reads_target else n_tokens  # the last stack's tokens
        tied = " (tied: the token embedding table)" if getattr(cfg, "tie_embeddings", False) else ""
        rows.append((f"read-out to token logits{tied}", "[T, vocabulary]", [T, vocabulary_size]))
    return pd.DataFrame(
        [{"step": step, "shape": shape, "size": "[" + ", ".join(map(str, size)) + "]"} for step, shape, size in rows]
    )


def _stack_steps(
    cfg: ModelConfig, stack: str, n_tokens: int, n_memory: int | None, letter: str = "T"
) -> list[tuple[str, str, list[int]]]:
    """(step, shape, size) rows of one stack; n_memory is the source length its cross-attention reads, if any."""
    T, D, H, K, F, S = n_tokens, cfg.d_model, cfg.n_heads, cfg.d_head, cfg.d_ff, n_memory
    t = letter  # the letter of this stack's length in the shapes: T, or S for an encoder-decoder's encoder
    what = {"": "", "encoder ": "source ", "decoder ": "target "}[stack]
    rows: list[tuple[str, str, list[int]]] = [
        (f"{what}tokens", f"[{t}]", [T]),
        (f"{what}token embeddings", f"[{t}, d_model]", [T, D]),
    ]
    if cfg.positional in ("sinusoidal", "learned"):
        rows.append((f"+ {cfg.positional} positions", f"[{t}, d_model]", [T, D]))
    if getattr(cfg, "family", None) == "bert":  # Transformer.embed: token type 0, then the embedding LayerNorm
        rows += [("+ token type 0", f"[{t}, d_model]", [T, D]), ("embedding LayerNorm", f"[{t}, d_model]", [T, D])]
    mask = applied_masks(cfg)[stack.strip() or cfg.arch]
    mask_note = "" if mask == "none" else f", {mask} mask"
    norm = norm_name(cfg)
    residual = ("+ residual" + (f", {norm} (post-norm)" if cfg.norm == "post" else ""), f"[{t}, d_model]", [T, D])
    normed = (f"[{t}, d_model]", [T, D])
    pre_norm = (f"{norm} ({cfg.norm}-norm, input side)", *normed) if cfg.norm in NORM_IN_FRONT else None
    out_norm = (f"{norm} ({cfg.norm}-norm, output side)", *normed) if cfg.norm in NORM_ON_OUTPUT else None
    block = [
        pre_norm,
        *_attention_steps(cfg, t, T),
        (f"scores Q K^T / sqrt(d_head){mask_note}", f"[heads, {t}, {t}]", [H, T, T]),
        ("softmax over keys: attention weights", f"[heads, {t}, {t}]", [H, T, T]),
        ("weights x V", f"[heads, {t}, d_head]", [H, T, K]),
        ("concatenate heads, output projection", f"[{t}, d_model]", [T, D]),
        out_norm,
        residual,
    ]
    if S is not None:
        cross_mask = ", padding mask" if "padding" in cfg.mask else ""  # the source's [PAD] keys
        block += [
            pre_norm,
            ("cross-attention: Q = x W_q", "[T, d_model]", [T, D]),
            ("cross-attention: K, V = encoder output W_k, W_v", "2 x [S, d_model]", [2, S, D]),
            ("cross-attention: split Q into heads", "[heads, T, d_head]", [H, T, K]),
            ("cross-attention: split K, V into heads", "2 x [heads, S, d_head]", [2, H, S, K]),
            (f"cross-attention: scores Q K^T / sqrt(d_head){cross_mask}", "[heads, T, S]", [H, T, S]),
            ("cross-attention: softmax over source keys", "[heads, T, S]", [H, T, S]),
            ("cross-attention: weights x V", "[heads, T, d_head]", [H, T, K]),
            ("cross-attention: concatenate heads, output projection", "[T, d_model]", [T, D]),
            out_norm,
            residual,
        ]
    ffn = [(f"feed-forward: linear, {cfg.activation}", f"[{t}, d_ff]", [T, F])]
    if cfg.activation == "swiglu":
        ffn = [("feed-forward: silu(x W_gate) × x W_up", f"[{t}, d_ff]", [T, F])]
    block += [pre_norm, *ffn, ("feed-forward: linear", f"[{t}, d_model]", [T, D]), out_norm, residual]
    rows += [(f"{stack}block × {cfg.n_layers}: {step}", shape, size) for step, shape, size in filter(None, block)]
    if cfg.norm != "post":
        rows.append((f"{stack}final {norm}", f"[{t}, d_model]", [T, D]))
    rows.append((f"{stack}output", f"[{t}, d_model]", [T, D]))
    return rows


def _attention_steps(cfg: ModelConfig, t: str, T: int) -> list[tuple[str, str, list[int]]]:
    """Self-attention's steps up to its scores, in the order the model takes them (explorer.attention): projections,
    OLMo 2's norms on Q and K, the split into heads, rope, and with grouped-query attention the repeat of each key and
    value head for the query heads that share it, after rope has turned the fewer key heads."""
    D, H, K, G = cfg.d_model, cfg.n_heads, cfg.d_head, kv_heads(cfg)
    grouped = G != H  # fewer key/value heads, each shared by H / G query heads
    rope = cfg.positional == "rope"
    if not grouped:
        steps = [("Q, K, V = x W_q, x W_k, x W_v", f"3 x [{t}, d_model]", [3, T, D])]
    else:
        steps = [
            ("Q = x W_q", f"[{t}, d_model]", [T, D]),
            (f"K, V = x W_k, x W_v ({G} key/value heads)", f"2 x [{t}, kv_heads · d_head]", [2, T, G * K]),
        ]
    if getattr(cfg, "family", None) == "olmo2":  # one RMSNorm over each whole projection, before the split
        steps += [
            ("RMSNorm on Q (the whole projection)", f"[{t}, d_model]", [T, D]),
            ("RMSNorm on K (the whole projection)", f"[{t}, kv_heads · d_head]", [T, G * K]),
        ]
    if not grouped:
        steps.append(("split into heads", f"[heads, {t}, d_head]", [H, T, K]))
        if rope:
            steps.append(("rotate Q and K by position (rope)", f"[heads, {t}, d_head]", [H, T, K]))
        return steps
    steps += [
        ("split Q into heads", f"[heads, {t}, d_head]", [H, T, K]),
        ("split K, V into key/value heads", f"2 x [kv_heads, {t}, d_head]", [2, G, T, K]),
    ]
    if rope:
        steps += [
            ("rotate Q by position (rope)", f"[heads, {t}, d_head]", [H, T, K]),
            ("rotate K by position (rope)", f"[kv_heads, {t}, d_head]", [G, T, K]),
        ]
    steps.append((f"repeat each K, V head for {H // G} query heads", f"2 x [heads, {t}, d_head]", [2, H, T, K]))
    return steps


def parameter_counts(model: nn.Module) -> pd.DataFrame:
    """module, parameters: one row per module that owns parameters directly; their sum is the model's total."""
    counts: dict[str, int] = {}
    for name, parameter in model.named_parameters():
        module = name.rpartition(".")[0] or "(model)"
        counts[module] = counts.get(module, 0) + parameter.numel()
    return pd.DataFrame({"module": list(counts), "parameters": list(counts.values())})


def norm_name(cfg: ModelConfig) -> str:
    """LayerNorm, or RMSNorm for a Llama checkpoint."""
    return "RMSNorm" if getattr(cfg, "norm_kind", "layer") == "rms" else "LayerNorm"


def kv_heads(cfg: ModelConfig) -> int:
    """Key/value heads: n_heads, or fewer in a checkpoint with grouped-query attention."""
    return getattr(cfg, "n_kv_heads", cfg.n_heads)


def qkv_row(cfg: ModelConfig, t: str, T: int) -> tuple[str, str, int]:
    """(component, formula, multiply-adds per layer) of the Q, K, V projections, with grouped K and V if any."""
    D, G, K = cfg.d_model, kv_heads(cfg), cfg.d_head
    if cfg.n_heads == G:
        return "self-attention Q, K, V projections", f"3 {t} d_model^2", 3 * T * D * D
    return (
        f"self-attention Q, K, V projections ({G} key/value heads)",
        f"{t} d_model^2 + 2 {t} d_model kv_heads d_head",
        T * D * D + 2 * T * D * G * K,
    )


def multiply_adds(
    cfg: ModelConfig, n_source: int, n_target: int | None = None, vocabulary_size: int | None = None
) -> pd.DataFrame:
    """stack, component, formula, multiply_adds: the matrix products of one forward pass, all layers included, and
    a trained model's read-out to its `vocabulary_size` token logits. LayerNorm, softmax, activations and additions
    are left out (they are not multiply-adds)."""
    D, F, L = cfg.d_model, cfg.d_ff, cfg.n_layers
    stacks: dict[str, tuple[int, int | None]] = {"encoder": (n_source, None)}  # stack -> (T, S of cross-attention)
    if cfg.arch == "decoder":
        stacks = {"decoder": (n_source, None)}
    elif cfg.reads_target:
        stacks["decoder"] = (n_target or 1, n_source)
    rows = []
    for stack, (T, S) in stacks.items():
        t = "S" if S is None and cfg.reads_target else "T"  # the steps table's letter: S is the source
        parts = [
            qkv_row(cfg, t, T),
            ("self-attention scores Q K^T", f"{t}^2 d_model", T * T * D),
            ("self-attention weights x V", f"{t}^2 d_model", T * T * D),
            ("self-attention output projection", f"{t} d_model^2", T * D * D),
        ]
        if S is not None:
            parts += [
                ("cross-attention Q projection", "T d_model^2", T * D * D),
                ("cross-attention K, V projections", "2 S d_model^2", 2 * S * D * D),
                ("cross-attention scores Q K^T", "T S d_model", T * S * D),
                ("cross-attention weights x V", "T S d_model", T * S * D),
                ("cross-attention output projection", "T d_model^2", T * D * D),
            ]
        if cfg.activation == "swiglu":
            parts.append(("feed-forward (gate, up and down linears)", f"3 {t} d_model d_ff", 3 * T * D * F))
        else:
            parts.append(("feed-forward (two linears)", f"2 {t} d_model d_ff", 2 * T * D * F))
        rows += [
            {"stack": stack, "component": c, "formula": f"layers x {f}", "multiply_adds": L * n} for c, f, n in parts
        ]
    if vocabulary_size is not None:
        T = n_target if cfg.reads_target and n_target else n_source  # the last stack's tokens
        rows.append({"stack": "read-out", "component": "output to token logits", "formula": "T d_model V",
                     "multiply_adds": T * D * vocabulary_size})  # fmt: skip
    return pd.DataFrame(rows)


def block_diagram(cfg: ModelConfig, length: str = "T") -> str:
    """Graphviz DOT of one block as configured: where the norms sit, and cross-attention if any. `length`: the
    letter for the tokens it reads (S for an encoder-decoder's source, as the steps table has it)."""
    cross = cfg.reads_target
    kind = "decoder" if cfg.arch != "encoder" else "encoder"
    norm = norm_name(cfg)
    self_label = "masked multi-head\\nself-attention" if kind == "decoder" or "causal" in cfg.mask else None
    sublayers = [("attn", self_label or "multi-head\\nself-attention")]
    if cross:
        sublayers.append(("cross", "multi-head\\ncross-attention\\n(K, V: encoder output)"))
    feed_forward = f"linear, {cfg.activation}, linear"
    if cfg.activation == "swiglu":  # three matrices: silu(x W_gate) × x W_up, then the down linear
        feed_forward = "silu(gate) × up,\\ndown linear"
    sublayers.append(("ffn", f"feed-forward\\n{feed_forward}"))
    # On two lines: on one, the title set the diagram's width (327 pt), and half a 1024 px page drew its text 7 px
    title = f"one {'decoder' if cross else kind} block, {cfg.norm}-norm\\n{NORM_FORMULAS[cfg.norm]}"
    lines = [
        "digraph block {",
        '  rankdir=BT; node [shape=box, style="rounded,filled", fillcolor="#f4f6fb", fontname="Helvetica"];',
        f'  label="{title}"; labelloc=t; fontname="Helvetica";',
        f'  input [label="x  [{length}, d_model]", shape=plaintext, fillcolor=none];',
    ]
    previous = "input"
    for name, label in sublayers:
        lines.append(f'  {name} [label="{label}", fillcolor="#dce8fa"];')
        lines.append(f'  {name}_add [label="+", shape=circle, fillcolor="#ffffff"];')
        lines.append(f'  {previous} -> {name}_add [label="residual", style=dashed];')
        if cfg.norm == "post":  # Norm(x + f(x))
            lines.append(f'  {name}_ln [label="{norm}", fillcolor="#fde9c8"];')
            lines += [f"  {previous} -> {name};", f"  {name} -> {name}_add;", f"  {name}_add -> {name}_ln;"]
            previous = f"{name}_ln"
            continue
        reads = previous
        if cfg.norm in NORM_IN_FRONT:  # x + f(Norm(x)), the input side of peri too
            lines.append(f'  {name}_ln [label="{norm}", fillcolor="#fde9c8"];')
            lines.append(f"  {previous} -> {name}_ln;")
            reads = f"{name}_ln"
        lines.append(f"  {reads} -> {name};")
        writes = name
        if cfg.norm in NORM_ON_OUTPUT:  # x + Norm(f(x)), the output side of peri too
            lines.append(f'  {name}_out_ln [label="{norm}\\n(on the output)", fillcolor="#fde9c8"];')
            lines.append(f"  {name} -> {name}_out_ln;")
            writes = f"{name}_out_ln"
        lines.append(f"  {writes} -> {name}_add;")
        previous = f"{name}_add"
    if cfg.norm != "post":
        lines.append(f'  final_ln [label="final {norm}\\n(after the last block)", fillcolor="#fde9c8"];')
        lines.append(f"  {previous} -> final_ln;")
        previous = "final_ln"
    lines.append(f'  output [label="[{length}, d_model]", shape=plaintext, fillcolor=none];')
    lines.append(f"  {previous} -> output;")
    lines.append("}")
    return "\n".join(lines)


NORM_GROUP = "norms"  # PARAMETER_GROUPS' name for the norms, shown as the model's kind (parameter_groups)
PARAMETER_GROUPS = (  # the first pattern a module matches names its group: the norms first (OLMo 2's q/k norms)
    (NORM_GROUP, r"(\.(out_)?norm\d*|^norm|^embed_norm|\.[qk]_norm)$"),
    ("self-attention", r"\.self_attn(\.|$)"),
    ("cross-attention", r"\.multihead_attn(\.|$)"),
    ("feed-forward", r"\.(linear[12]|gate)$"),
    ("positions (learned)", r"^positional$"),
    ("token embeddings", r"^embedding$"),
    ("token types (BERT's sentence A or B)", r"^token_type$"),  # 768 in MiniLM: no part of the token table
    ("read-out", r"^head$"),
)


def parameter_groups(counts: pd.DataFrame, norm: str = "LayerNorm") -> pd.DataFrame:
    """group, parameters, share: parameter_counts summed by what the modules do (self-attention, feed-forward,
    the norms ...), largest first; share is the fraction of the total. Unknown modules fall under "other". `norm`
    names the norms' group as the model's kind of norm (norm_name: "RMSNorm" for a Llama checkpoint)."""
    groups = []
    for module in counts["module"]:
        group = next((name for name, pattern in PARAMETER_GROUPS if re.search(pattern, module)), "other")
        groups.append(norm if group == NORM_GROUP else group)
    total = counts.assign(group=groups).groupby("group", sort=False)["parameters"].sum()
    frame = total.sort_values(ascending=False, kind="stable").reset_index()
    frame["share"] = frame["parameters"] / max(int(frame["parameters"].sum()), 1)
    return frame
