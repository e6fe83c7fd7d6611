"""What the Positional page says about a model's positional encoding: the explanation, the formula, why a section
has nothing to show. Plain text (Markdown and LaTeX), no streamlit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from explorer.analysis.position_analysis import PermutationDemo, wavelengths
from explorer.config import CheckpointConfig, ModelConfig, applied_masks
from explorer.model import Transformer
from explorer.numbers import readable
from explorer.positional import ROPE_BASE

EXPLANATIONS = {
    "sinusoidal": "Each position p gets a fixed vector that is **added** to the token embedding. Dimension pair i "
    "is a sine and a cosine of p at its own frequency, from fast (pair 0, wavelength 2π ≈ 6.3 positions) to slow "
    "(the last pair, wavelength {slowest:,.0f} positions with d_model {d_model}).",
    "learned": "Each position p has its own vector, a row of a trainable table, **added** to the token embedding. "
    "It starts random and would only take a shape through training.",
    "rope": "Rotary encoding adds **nothing** to the token embeddings. Inside every self-attention layer it turns "
    "each pair of dimensions of a query and of a key by an angle proportional to the position, so the score "
    "q·k depends on how far apart the two tokens are, not on where they are. (Cross-attention is not rotated.)",
    "none": "Nothing tells the model where a token is: no vector is added and nothing is rotated. Self-attention "
    "then treats the input as a **set** of tokens (unless a causal mask is on, which carries order itself).",
}
TRAINED_TABLE = (
    "Each position p has its own vector, a row of a trainable table, **added** to the token embedding. In a "
    "pretrained model the rows were learned with everything else, from the text the model was trained on."
)
NO_VECTORS = {  # why the page's table, curves and similarities have nothing to show
    "rope": "rope adds no vector to the input, so there are no position vectors to plot or compare; it rotates "
    "queries and keys instead (below).",
    "none": "no position vectors are added, so there are none to plot or compare.",
}


def token_type_note(model: Transformer) -> str:
    """For a BERT checkpoint: its input also gets token-type row 0, the same at every position, and a LayerNorm,
    which the table of position rows leaves out. "" for a model without token types."""
    if model.token_type is None:
        return ""
    size = float(model.token_type.weight[0].detach().norm())
    rows = model.positional.table
    mean = "" if rows is None else f"; a position row's is {float(rows.detach().norm(dim=-1).mean()):.2f} on average"
    return (
        f" Each token's input also gets token-type row 0, the same vector at every position (length {size:.2f}{mean}), "
        "and then a LayerNorm: the curves, the table and the similarities here are of the position rows alone."
    )


def rope_base(cfg: ModelConfig) -> float:
    """The rotary base θ: a checkpoint's own, else the original paper's 10,000."""
    return cfg.rope_base if isinstance(cfg, CheckpointConfig) else ROPE_BASE


def explanation(cfg: ModelConfig) -> str:
    """What the model's positional encoding does, in Markdown: a pretrained learned table is said to be trained."""
    if isinstance(cfg, CheckpointConfig) and cfg.positional == "learned":
        return TRAINED_TABLE
    return EXPLANATIONS[cfg.positional].format(slowest=wavelengths(cfg.d_model)[-1], d_model=cfg.d_model)


def formula(cfg: ModelConfig) -> str | None:
    """The encoding as a LaTeX formula, or None when it has none (a learned table, no positions): one equation a
    line, since a display formula does not wrap (on one line, a Llama's was 830 px, cut off on a 1024 px projector)."""
    if cfg.positional == "sinusoidal":
        return equations(
            r"PE_{p,\,2i} &= \sin\!\left(\frac{p}{10000^{2i/d_{model}}}\right)",
            r"PE_{p,\,2i+1} &= \cos\!\left(\frac{p}{10000^{2i/d_{model}}}\right)",
            align=True,
        )
    if cfg.positional == "rope":
        half = getattr(cfg, "family", None) in ("llama", "olmo2")  # Hugging Face Llama's layout: pairs (i, i + K/2)
        pair = r"(q_{i},\,q_{i+d_{head}/2})" if half else r"(q_{2i},\,q_{2i+1})"
        return equations(
            rf"\theta_{{p,\,i}} = \frac{{p}}{{{_latex_number(rope_base(cfg))}^{{2i/d_{{head}}}}}}",
            rf"{pair} \mapsto R(\theta_{{p,i}})\,{pair}",
            r"R(\theta) = \begin{pmatrix}\cos\theta & -\sin\theta \\ \sin\theta & \cos\theta\end{pmatrix}",
        )
    return None


def _latex_number(value: float) -> str:
    """A base as LaTeX writes it: 1000000, not Python's 1e+06 (which would read as e + 06)."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"


def equations(*lines: str, align: bool = False) -> str:
    """LaTeX lines, one equation each: centred under one another, or with `align` lined up at their & (at "=")."""
    block = "aligned" if align else "gathered"
    return rf"\begin{{{block}}}" + r" \\ ".join(lines) + rf"\end{{{block}}}"


def table_frame(table: np.ndarray, tokens: list[str] | None = None) -> pd.DataFrame:
    """A [P, D] position table as a CSV's rows: position (, token), dim_0 ... dim_{D-1}."""
    frame = pd.DataFrame(table, columns=[f"dim_{d}" for d in range(table.shape[1])])
    if tokens is not None:
        frame.insert(0, "token", tokens)
    frame.insert(0, "position", np.arange(table.shape[0]))
    return frame


def token_line(tokens: list[str], most_chars: int = 200) -> str:
    """The tokens joined by spaces, as many whole tokens as fit in `most_chars`, then "… (N tokens in all)" when some
    are left out: a long text is never cut inside a token, which would show a token the text does not have."""
    line = " ".join(tokens)
    if len(line) <= most_chars:
        return line
    shown = []
    for token in tokens:
        if len(" ".join([*shown, token])) > most_chars:
            break
        shown.append(token)
    return " ".join(shown) + f" … ({len(tokens):,} tokens in all)"


def first_stack_causal(cfg: ModelConfig) -> bool:
    """Whether the first stack's self-attention (the one the reordering demonstration reorders) is causal: a
    decoder's always is; an encoder-decoder's decoder is, but its encoder only with a causal mask."""
    return "causal" in next(iter(applied_masks(cfg).values()))


def causal_order_note(cfg: ModelConfig) -> str:
    """For a model with no positions: what still carries order, said after why the page has no vectors to show."""
    if first_stack_causal(cfg):
        return " (A causal mask still carries order, as shown below.)"
    if cfg.reads_target:
        return " (The decoder's causal mask orders the target; the encoder, reordered below, sees its source as a set.)"
    return ""


def knows_order(cfg: ModelConfig) -> list[str]:
    """Why the first stack can see the order of its tokens, one reason a clause: its positional encoding, a causal
    mask. Empty when nothing tells it: then reordering the tokens can only move its maps."""
    reasons = []
    if cfg.positional != "none":
        reasons.append(
            f"the {cfg.positional} encoding gives each token a position"
            + (" (rotating queries and keys)" if cfg.positional == "rope" else " (added to its embedding)")
        )
    if first_stack_causal(cfg):
        reasons.append(
            "a causal mask also carries position: token i may only look at tokens 0 to i, so moving a token "
            "changes which tokens it and the others can see"
            + (" (a decoder is always causal)" if cfg.arch == "decoder" else "")
        )
    return reasons


def order_finding(cfg: ModelConfig, demo: PermutationDemo) -> tuple[str, str]:
    """What the reordering demonstration found, as (kind, Markdown): "moved" when nothing tells the model order and
    the maps only moved; "blind" when something does but these maps cannot show it (each query has at most one key
    to look at); "visible" when the reordered run is not the moved map."""
    reasons = knows_order(cfg)
    if demo.order_invisible and not reasons:
        return "moved", (
            f"**Reordering only moved the maps.** The difference is 0 up to float32 rounding "
            f"({readable(demo.max_difference, 2)}: the same numbers summed in another order; float32 resolves about "
            "10⁻⁷ near 1). Mathematically it is exactly 0: with no positional encoding and no causal mask, attention "
            "sees a set of tokens, not a sequence. Each token's output is the same, wherever it stands."
        )
    if demo.order_invisible:
        single = bool((demo.allowed.sum(axis=-1) <= 1).all())  # [T]: no query has two keys to choose between
        why = (
            "every query may attend to at most one key here (the mask leaves it no other), and its weight on that "
            "key is 1 wherever it stands. Type more tokens that are not padding to see the maps change"
            if single
            else "with these tokens the maps happen to agree to float32 rounding"
        )
        return "blind", (
            f"**These maps only moved, but the model does see order:** {'; and '.join(reasons)}. The maps do not "
            f"show it because {why}. What the model outputs at each token still depends on where it stands."
        )
    if isinstance(cfg, CheckpointConfig):
        how = (
            "A pretrained model's encoding and mask cannot be changed: pick `configured` in the sidebar's Model box "
            "and set its positional encoding to none (and the mask to none or padding, with an encoder: a decoder is "
            "always causal) to see the maps only move."
        )
    else:
        how = (
            "Set the positional encoding to none (and the mask to none or padding, with an encoder) to see the maps "
            "only move."
        )
    return "visible", (
        f"**Order is visible to the model:** {'; and '.join(reasons)}. The reordered run is not just the original "
        f"map moved. {how}"
    )
