"""Checks of command-line values that click's own types let through."""

from __future__ import annotations

import math

import click


def finite(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    """A number, neither NaN nor infinite: click's FloatRange lets NaN through (every
    comparison with it is false)."""
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number.")
    return value
