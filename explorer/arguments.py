"""Checks of the whole numbers a notebook passes (a layer, a head, a count): a sentence naming what the argument
takes, where numpy or torch would fail deep inside with an IndexError or quietly read layer -1 as the last."""

from __future__ import annotations

import numbers

from explorer.config import ConfigError


def is_whole(value: object) -> bool:
    """A whole number and not a bool: (0.5, 1) or (True, 1) must not quietly become L0H1 or L1H1."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def whole_in(name: str, value: object, low: int, high: int | None = None) -> int:
    """`value` as an int when it is a whole number (is_whole) from `low` to `high` (no upper bound when None);
    ConfigError otherwise."""
    if not is_whole(value) or value < low or (high is not None and value > high):
        takes = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise ConfigError(f"{name} is a whole number {takes}; got {value!r}.")
    return int(value)
