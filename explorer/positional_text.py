"""What the Positional page says about a model's positional encoding: the explanation, the formula, why a section
has nothing to show. Plain text (Markdown and LaTeX), no streamlit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from explorer.analysis.position_analysis import wavelengths
from explorer.config import CheckpointConfig, ModelConfig
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
        llama = [r"\text{(pairs } (i,\ i + d_{head}/2) \text{ in Llama's layout)}"]
        return equations(
            rf"\theta_{{p,\,i}} = \frac{{p}}{{{rope_base(cfg):g}^{{2i/d_{{head}}}}}}",
            r"(q_{2i},\,q_{2i+1}) \mapsto R(\theta_{p,i})\,(q_{2i},\,q_{2i+1})",
            *(llama if getattr(cfg, "family", None) in ("llama", "olmo2") else []),
        )
    return None


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
