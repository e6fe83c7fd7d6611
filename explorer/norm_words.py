"""Each norm placement in plain words: its formula, what it does to the stream, and the real models that use it."""

from __future__ import annotations

from explorer.config import NORM_FORMULAS

MODELS_USING: dict[str, str] = {
    "post": "the 2017 Transformer, BERT, MiniLM",
    "pre": "GPT-2, Llama, SmolLM2",
    "res-post": "Swin Transformer V2, OLMo 2",
    "peri": "Gemma 2, Gemma 3",
}
WHAT_IT_DOES: dict[str, str] = {
    "post": "the stream is normalised after every sub-layer",
    "pre": "each sub-layer reads a normalised copy; the stream itself is never normalised until the final norm",
    "res-post": "each sub-layer's output is normalised before it is added; the stream is not, until the final norm",
    "peri": "a norm on both sides of every sub-layer; the stream itself is normalised only by the final norm",
}


def placement_sentence(norm: str) -> str:
    """One sentence: "Res-post-norm (Swin Transformer V2, OLMo 2): x = x + Norm(f(x)); each sub-layer's ..."."""
    return f"{norm.capitalize()}-norm ({MODELS_USING[norm]}): {NORM_FORMULAS[norm]}; {WHAT_IT_DOES[norm]}."


def placement_help() -> str:
    """The four placements, one formula each, for a control's help."""
    return " ".join(f"{norm}: {NORM_FORMULAS[norm]} ({MODELS_USING[norm]})." for norm in NORM_FORMULAS)
