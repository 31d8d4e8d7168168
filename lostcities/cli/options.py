"""Command lines built from checked dataclasses: the command line is the schema.

:func:`parse` turns a schema (fields declared with ``checked(default, rule)`` and a
docstring each, as in lostcities/config.py) into argparse arguments and the parsed
arguments back into the schema:

- field ``batch_size`` is the option ``--batch-size``, its help the field's docstring;
- a ``list`` field takes comma-separated values (``--bots cautious,committer``);
- a ``bool`` field is ``--name`` / ``--no-name``;
- a field declared with :func:`positional` is a positional argument (a list: one or more);
- the fields of a nested dataclass (a section) are ``--section-field``; a section declared
  with :func:`switched` is optional: ``--section K`` sets one of its fields and turns it
  on, 0 (the default) leaves it out (None);
- every value given is checked by its field's rule, then the schema's cross rules, and a
  bad one stops the command with training's one-line error (lostcities/config_checks.py)
  on stderr and exit status 2::

      error: search.candidates=-1: expected an integer >= 0

A value that does not parse as its field's type (``--games many``) fails its rule the same
way. Misspelt options and missing positionals are argparse's own errors (usage, exit 2).
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import sys
import textwrap
import types
import typing
from collections.abc import Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

from lostcities.config_checks import CrossRule, bad_value, check_values
from lostcities.config_rules import RULE, Rule

T = TypeVar("T")

POSITIONAL = "positional"
"""Metadata key of a field given as a positional argument; its value is the metavar."""
SWITCH = "switch"
"""Metadata key of an optional section: the name of the field ``--section K`` sets."""
HIDDEN = "hidden"
"""Metadata key of a section: its fields the command sets itself, never options."""

METAVARS = {int: "N", float: "X", str: "TEXT"}


def positional(rule: Rule, metavar: str) -> Any:
    """A required field given as a positional argument (a list field: one or more)."""
    return field(metadata={RULE: rule, POSITIONAL: metavar})


def switched(switch: str, hidden: Sequence[str] = ()) -> Any:
    """An optional section (``X | None``, default None): ``--name K`` sets its field
    ``switch`` to K and turns it on, the other fields are ``--name-field``; K = 0 leaves it
    out. ``hidden``: its fields the command derives itself (a seed keyed per player)."""
    return field(default=None, metadata={SWITCH: switch, HIDDEN: tuple(hidden)})


@dataclass(frozen=True)
class Option:
    """One command-line argument: the field at ``key`` (``search.candidates``), checked by
    ``rule``; ``flag`` is None for a positional; ``kind`` is a list's element type."""

    key: str
    flag: str | None
    kind: type
    many: bool
    rule: Rule
    default: Any
    help: str
    metavar: str
    group: str | None = None  # the section it belongs to, for the help's grouping


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}``: the string literal under each field of dataclass ``cls``
    (and of the dataclasses it inherits from), read from the source; runtime keeps none."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):  # no source (an interactive interpreter): no help text
            continue
        body = tree.body[0].body
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _unwrap(hint: Any) -> Any:
    """``X`` of ``X | None``; any other hint as it is."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (hint,) = (arm for arm in typing.get_args(hint) if arm is not type(None))
    return hint


def _default(f: Field) -> Any:
    if f.default is not MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not MISSING else MISSING


def options(schema: type, prefix: str = "", group: str | None = None) -> list[Option]:
    """Every argument of ``schema``, in the order of its fields (sections' fields prefixed
    by the section's name)."""
    hints = typing.get_type_hints(schema)
    docs = field_docs(schema)
    out: list[Option] = []
    for f in fields(schema):
        hint, key = _unwrap(hints[f.name]), prefix + f.name
        if is_dataclass(hint):
            out += _section_options(hint, key, f, docs.get(f.name, ""))
            continue
        many = typing.get_origin(hint) is list
        kind = typing.get_args(hint)[0] if many else hint
        metavar = f.metadata.get(POSITIONAL) or METAVARS.get(kind, "TEXT")
        flag = None if POSITIONAL in f.metadata else "--" + key.replace(".", "-").replace("_", "-")
        rule = f.metadata.get(RULE)
        if rule is None:  # as training's check refuses it (config_checks.field_rules)
            raise TypeError(f"{schema.__name__}.{f.name} is declared without a rule (checked())")
        metavar = f"{metavar},..." if many and flag else metavar
        out.append(
            Option(key, flag, kind, many, rule, _default(f), docs.get(f.name, ""), metavar, group)
        )
    return out


def _section_options(cls: type, key: str, f: Field, doc: str) -> list[Option]:
    """A section's options: its switch (``--key K``) if it is optional, then its fields but
    the switch's and the hidden ones."""
    switch = f.metadata.get(SWITCH)
    skipped = {f"{key}.{name}" for name in f.metadata.get(HIDDEN, ())}
    out = []
    if switch is not None:
        skipped.add(f"{key}.{switch}")
        inner = next(o for o in options(cls) if o.key == switch).rule
        rule = Rule(
            lambda v: (isinstance(v, int) and v == 0) or inner.ok(v),
            f"0 (no {key}) or {inner.expected}",
        )
        out.append(Option(key, "--" + key.replace("_", "-"), int, False, rule, 0, doc, "K", key))
    return out + [o for o in options(cls, key + ".", key) if o.key not in skipped]


def _show_default(value: Any) -> str | None:
    """A default as typed on the command line; None when there is nothing to show."""
    if value is None or value is MISSING:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _help(option: Option) -> str:
    text = " ".join(option.help.split()).replace("%", "%%")  # argparse %-formats help
    shown = _show_default(option.default)
    return text if shown is None else f"{text} [default: {shown}]"


def build_parser(opts: Sequence[Option], prog: str, description: str) -> argparse.ArgumentParser:
    """An argparse parser of ``opts``; every option's default is left out of the namespace
    (``SUPPRESS``), so the schema's own default applies."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    groups: dict[str, Any] = {}  # section -> its argument group
    for option in opts:
        target: Any = parser
        if option.group is not None:
            if option.group not in groups:
                groups[option.group] = parser.add_argument_group(f"{option.group} options")
            target = groups[option.group]
        if option.flag is None:
            nargs = "+" if option.many else None
            target.add_argument(option.key, metavar=option.metavar, nargs=nargs, help=_help(option))
            continue
        common = {"dest": option.key, "default": argparse.SUPPRESS, "help": _help(option)}
        if option.kind is bool:
            target.add_argument(option.flag, action=argparse.BooleanOptionalAction, **common)
        else:
            target.add_argument(option.flag, metavar=option.metavar, **common)
    return parser


def _typed(text: str, kind: type) -> Any:
    """``text`` as a ``kind``; the text itself where it does not parse (its rule names it)."""
    if kind not in (int, float):
        return text
    try:
        return kind(text)
    except ValueError:
        return text


def _value(option: Option, raw: Any) -> Any:
    """The parsed value of ``option`` from what argparse gave (text, texts, or a bool)."""
    if option.kind is bool:
        return raw
    if not option.many:
        return _typed(raw, option.kind)
    items = raw if isinstance(raw, list) else [t for t in raw.split(",") if t]
    return [_typed(t, option.kind) for t in items]


def _build(schema: type[T], values: dict[str, Any], prefix: str = "") -> T:
    """``schema`` with the given ``values`` (``{key: value}``), its defaults elsewhere."""
    hints = typing.get_type_hints(schema)
    kwargs: dict[str, Any] = {}
    for f in fields(schema):
        hint, key = _unwrap(hints[f.name]), prefix + f.name
        if is_dataclass(hint):
            switch = f.metadata.get(SWITCH)
            if switch is not None:
                if not values.get(key):  # --key 0 or not given: the section is off
                    kwargs[f.name] = None
                    continue
                values = {**values, f"{key}.{switch}": values[key]}
            kwargs[f.name] = _build(hint, values, key + ".")
        elif key in values:
            kwargs[f.name] = values[key]
    return schema(**kwargs)


def parse(
    schema: type[T],
    argv: Sequence[str] | None,
    *,
    prog: str,
    description: str,
    cross: Sequence[CrossRule] = (),
) -> T:
    """``schema`` from the command line ``argv`` (None: ``sys.argv[1:]``): every value given
    checked by its field's rule, then ``cross``; a bad value prints ``error: <key>=<value>:
    expected <what>`` on stderr and exits with status 2."""
    opts = options(schema)
    namespace = build_parser(opts, prog, description).parse_args(argv)
    try:
        values = {}
        for option in opts:
            if hasattr(namespace, option.key):
                value = _value(option, getattr(namespace, option.key))
                if not option.rule.ok(value):
                    raise bad_value(option.key, value, option.rule.expected)
                values[option.key] = value
        config = _build(schema, values)
        check_values(config, {}, cross)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    return config
