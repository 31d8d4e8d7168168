"""The rules a configuration value must pass, declared beside each field of config.py.

A field is declared with :func:`checked`, e.g. ``iterations: int = checked(30, integer(1))``;
:func:`lostcities.config_checks.check_config` walks the dataclasses and applies every
field's rule at start-up, failing with one line naming the key, the value and what is
expected::

    run.iterations=0: expected an integer >= 1

Hydra and OmegaConf already check keys and types at compose time; these rules check
values (ranges, names from a vocabulary). This module imports nothing of the package.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import MISSING, field, fields
from typing import Any, NamedTuple

RULE = "rule"
"""The key of a field's rule in its dataclass ``metadata``."""

SEED_LIMIT = 2**64  # seeds are uint64 in the C random streams (lostcities/_rng.pxd)
DEVICE = re.compile(r"cpu|mps|cuda(:\d+)?")
RAY_ADDRESS = re.compile(r"auto|(ray://)?[\w.-]+:\d+")


class Rule(NamedTuple):
    """A field's rule: ``ok(value)`` and the text after ``expected`` in the error."""

    ok: Callable[[Any], bool]
    expected: str


def checked(default: Any = MISSING, rule: Rule | None = None, *, factory: Any = MISSING) -> Any:
    """A dataclass field with ``default`` (or ``factory()``) whose values must pass ``rule``."""
    if rule is None:
        raise TypeError("checked() needs a rule")
    return field(default=default, default_factory=factory, metadata={RULE: rule})


# --- rule makers ---------------------------------------------------------------------


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _is_text(v: object) -> bool:
    return isinstance(v, str) and v != ""


def integer(low: int, high: int | None = None) -> Rule:
    if high is None:
        return Rule(lambda v: _is_int(v) and v >= low, f"an integer >= {low}")
    return Rule(lambda v: _is_int(v) and low <= v <= high, f"an integer in [{low}, {high}]")


def seed() -> Rule:
    return Rule(lambda v: _is_int(v) and 0 <= v < SEED_LIMIT, "an integer in [0, 2^64)")


def even_integer(low: int) -> Rule:
    return Rule(lambda v: _is_int(v) and v >= low and v % 2 == 0, f"an even integer >= {low}")


def positive() -> Rule:
    return Rule(lambda v: _is_number(v) and v > 0, "a finite number > 0")


def non_negative() -> Rule:
    return Rule(lambda v: _is_number(v) and v >= 0, "a finite number >= 0")


def number_in(text: str, ok: Callable[[float], bool]) -> Rule:
    return Rule(lambda v: _is_number(v) and ok(v), f"a number in {text}")


def boolean() -> Rule:
    return Rule(lambda v: isinstance(v, bool), "true or false")


def label() -> Rule:
    return Rule(_is_text, "a non-empty string")


def optional_label() -> Rule:
    return Rule(lambda v: v is None or _is_text(v), "null or a non-empty string")


def one_of(names: Sequence[str]) -> Rule:
    names = tuple(names)
    return Rule(lambda v: isinstance(v, str) and v in names, "one of " + ", ".join(names))


def names_from(names: Sequence[str], *, empty: bool = True) -> Rule:
    """A list of distinct names from ``names``; ``empty=False`` also refuses an empty one."""
    names = tuple(names)

    def ok(v: object) -> bool:
        return (
            isinstance(v, list | tuple)
            and all(isinstance(n, str) and n in names for n in v)
            and len(set(v)) == len(v)
            and (empty or len(v) > 0)
        )

    kind = "a list" if empty else "a non-empty list"
    return Rule(ok, f"{kind} of distinct names from " + ", ".join(names))


def texts() -> Rule:
    return Rule(
        lambda v: isinstance(v, list | tuple) and all(_is_text(s) for s in v),
        "a list of non-empty strings",
    )


def optional(rule: Rule) -> Rule:
    """``rule``, or None (the field's "not set": the code then picks or derives a value)."""
    return Rule(lambda v: v is None or rule.ok(v), f"null or {rule.expected}")


def rule_of(cls: type, name: str) -> Rule:
    """The rule declared for field ``name`` of dataclass ``cls``, for another field that
    takes the same values (a command's ``--games`` and training's ``eval.games``)."""
    (declared,) = (f for f in fields(cls) if f.name == name)
    return declared.metadata[RULE]


def device() -> Rule:
    return Rule(
        lambda v: isinstance(v, str) and DEVICE.fullmatch(v) is not None,
        "cpu, mps, cuda or cuda:N",
    )


def ray_address() -> Rule:
    return Rule(
        lambda v: v is None or (isinstance(v, str) and RAY_ADDRESS.fullmatch(v) is not None),
        "null (a local Ray started by the run), auto, HOST:PORT or ray://HOST:PORT",
    )
