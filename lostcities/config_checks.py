"""Start-up checks of a composed configuration: every field's rule, then the combinations.

Hydra and OmegaConf check keys and types at compose time; :func:`typed_config` turns the
composed config into a :class:`~lostcities.config.TrainConfig` (a key no schema knows
fails here too) and :func:`check_config` checks values, so a bad one fails before any work
(no worker spawned, no MLflow run opened) with one line naming the key, the value and
what is expected::

    run.iterations=0: expected an integer >= 1

Each field's rule is declared beside the field in config.py (``checked(default, rule)``);
:data:`RULES` collects them in the order of the dataclasses, and a field declared without
a rule fails at import. :data:`CROSS_RULES` holds the combinations of values the code
relies on. The commands of lostcities/cli check their own schemas with the same
:func:`check_values` and the same one-line error (:func:`bad_value`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError

from lostcities.config import TrainConfig
from lostcities.config_rules import RULE, Rule


class CrossRule(NamedTuple):
    """A rule on a combination of fields of a config (a TrainConfig, or a command's),
    reported under ``key``: ``ok(cfg)`` and the expected text, which may name the other
    fields' values."""

    key: str
    ok: Callable[[Any], bool]
    expected: Callable[[Any], str]


def field_rules(cls: type = TrainConfig, prefix: str = "") -> dict[str, Rule]:
    """``{"section.field": rule}`` for every value field under ``cls``, in declaration
    order; TypeError for a field declared without a rule."""
    hints = typing.get_type_hints(cls)
    rules: dict[str, Rule] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        sections = [o for o in options if dataclasses.is_dataclass(o)]
        if sections:  # a section (``X`` or ``X | None``): its fields, prefixed
            rules.update(field_rules(sections[0], f"{prefix}{f.name}."))
        elif RULE in f.metadata:
            rules[prefix + f.name] = f.metadata[RULE]
        else:
            raise TypeError(f"{cls.__name__}.{f.name} is declared without a rule (checked())")
    return rules


RULES: dict[str, Rule] = field_rules()
"""Every field's rule, ``section.field`` -> Rule, in the order of config.py."""


def _lost_cities_only(key: str, off: object) -> CrossRule:
    """``key`` must be ``off`` unless the game is Lost Cities."""
    return CrossRule(
        key,
        lambda c: c.game.name == "lost_cities" or _get(c, key) == off,
        lambda c: f"{_show(off)} with game.name={c.game.name} (Lost Cities only)",
    )


def _arm_index(key: str) -> CrossRule:
    """``key`` indexes experiment.arms (0 when the experiment has no arms)."""
    return CrossRule(
        key,
        lambda c: c.experiment is None or _get(c, key) < max(1, len(c.experiment.arms)),
        lambda c: f"an index of experiment.arms (0..{max(1, len(c.experiment.arms)) - 1})",
    )


CROSS_RULES: tuple[CrossRule, ...] = (
    # the network reads the Lost Cities feature layout (lostcities/cfr/networks.py)
    _lost_cities_only("network.kind", "mlp"),
    CrossRule(
        "network.attention_heads",
        lambda c: (
            c.network.kind != "color_shared"
            or c.network.attention_layers == 0
            or c.network.hidden % c.network.attention_heads == 0
        ),
        lambda c: f"a divisor of network.hidden={c.network.hidden}",
    ),
    # color_shared normalises its tokens already (lostcities/cfr/networks.py)
    CrossRule(
        "network.normalize_last",
        lambda c: c.network.kind == "mlp" or not c.network.normalize_last,
        lambda c: f"false with network.kind={c.network.kind} (an mlp's option)",
    ),
    # the magnet is the average strategy of the iterations so far (lostcities/cfr/trainer.py)
    CrossRule(
        "optim.magnet",
        lambda c: c.optim.magnet == 0 or c.optim.policy_training == "continual",
        lambda c: f"0 with optim.policy_training={c.optim.policy_training} (continual only)",
    ),
    # the heuristic reads Lost Cities features (lostcities/cfr/initial.py)
    _lost_cities_only("traversal.sampling_policy", "uniform"),
    _lost_cities_only("traversal.initial_strategy", "uniform"),
    # Kuhn and Leduc define no symmetry (lostcities/games/__init__.py GameSpec.symmetries)
    _lost_cities_only("optim.augment_symmetries", False),
    # learned action values are the rollout scheme's (external sampling has no branching)
    CrossRule(
        "traversal.action_values",
        lambda c: c.traversal.action_values == "playout" or c.traversal.scheme == "rollout",
        lambda c: f"playout with traversal.scheme={c.traversal.scheme} (learned: rollout only)",
    ),
    # the teacher's search and games are Lost Cities' (lostcities/teacher/)
    CrossRule(
        "teacher.rounds",
        lambda c: c.teacher is None or c.game.name == "lost_cities",
        lambda c: f"no teacher section with game.name={c.game.name} (Lost Cities only)",
    ),
    _arm_index("experiment.arm"),
    _arm_index("experiment.baseline"),
    # CUDA graphs are recorded for fixed shapes; evaluation batches vary in size
    # (lostcities/perf/compile.py compile_module refuses it too, at the wrapper)
    CrossRule(
        "compile.mode",
        lambda c: (
            c.compile is None
            or c.compile.mode != "reduce-overhead"
            or not (c.compile.inference or c.compile.dynamic)
        ),
        lambda c: (
            "default, max-autotune or max-autotune-no-cudagraphs with compile.inference="
            f"{_show(c.compile.inference)}, compile.dynamic={_show(c.compile.dynamic)} "
            "(reduce-overhead records CUDA graphs for fixed shapes only)"
        ),
    ),
    # fp16 on a CPU is many times slower than fp32: only bf16 opts in (lostcities/perf/amp.py)
    CrossRule(
        "amp.on_cpu",
        lambda c: not c.amp.on_cpu or c.amp.dtype == "bf16",
        lambda c: f"false with amp.dtype={c.amp.dtype} (the CPU opt-in is bf16's)",
    ),
    # an address another executor would never use
    CrossRule(
        "executor.ray_address",
        lambda c: c.executor.ray_address is None or c.executor.name == "ray",
        lambda c: f"null with executor={c.executor.name} (only ray connects to it)",
    ),
)
"""Combinations the code relies on, checked after every field passed its own rule."""


# --- the check -----------------------------------------------------------------------

_ABSENT = object()


def _get(cfg: Any, key: str) -> Any:
    """The value at dotted ``key`` of dataclass ``cfg``; _ABSENT under a section that is None."""
    node = cfg
    for name in key.split("."):
        if node is None:
            return _ABSENT
        node = getattr(node, name)
    return node


def _show(value: object) -> str:
    """A value as it would be written on the command line (one line)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if value and value.isprintable() else repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return " ".join(repr(value).split())


def bad_value(key: str, value: object, expected: str) -> ValueError:
    """The one-line error of every configuration check, training's and the commands'."""
    return ValueError(f"{key}={_show(value)}: expected {expected}")


def check_values(cfg: Any, rules: dict[str, Rule], cross: Sequence[CrossRule] = ()) -> None:
    """Raise :func:`bad_value` for the first value of dataclass ``cfg`` that fails its rule
    in ``rules`` (``{"section.field": rule}``, as :func:`field_rules` gives), then for the
    first failing rule of ``cross``; keys under an absent section (None) are skipped."""
    for key, rule in rules.items():
        value = _get(cfg, key)
        if value is not _ABSENT and not rule.ok(value):
            raise bad_value(key, value, rule.expected)
    for combination in cross:
        if not combination.ok(cfg):
            key = combination.key
            raise bad_value(key, _get(cfg, key), combination.expected(cfg))


def check_config(cfg: TrainConfig) -> None:
    """Raise ``ValueError("<key>=<value>: expected <what>")`` for the first bad value of
    ``cfg`` (fields in the order of config.py, then the cross-field rules); sections that
    are absent (``compile``, ``experiment``) are skipped."""
    check_values(cfg, RULES, CROSS_RULES)


def typed_config(dict_cfg: DictConfig) -> TrainConfig:
    """The composed config as a checked TrainConfig. A key no schema knows fails here,
    including one appended with ``+`` (Hydra adds those to the struct config unchecked),
    and so does a bad value (``ValueError``, one line)."""
    try:
        checked = OmegaConf.merge(
            OmegaConf.structured(TrainConfig), OmegaConf.to_container(dict_cfg, resolve=True)
        )
    except ConfigKeyError as e:
        raise ValueError(f"unknown config key {e.full_key!r}: no schema in config.py has it") from e
    cfg = OmegaConf.to_object(checked)
    check_config(cfg)
    return cfg
