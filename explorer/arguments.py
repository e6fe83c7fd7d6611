"""Checks of the whole numbers a notebook passes (a layer, a head, a count): a sentence naming what the argument
takes, where numpy or torch would fail deep inside with an IndexError or quietly read layer -1 as the last."""

from __future__ import annotations

import numbers

from explorer.config import ConfigError


def whole_in(name: str, value: object, low: int, high: int | None = None) -> int:
    """`value` as an int when it is a whole number (not a bool) from `low` to `high` (no upper bound when None);
    ConfigError otherwise."""
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not whole or value < low or (high is not None and value > high):
        takes = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise ConfigError(f"{name} is a whole number {takes}; got {value!r}.")
    return int(value)
