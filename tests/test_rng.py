"""The stream-key registry of lostcities/rng.py.

``stream_key`` hashes a seed and four words in order, so two uses draw the same numbers
exactly when the seed and all four words agree. The words that name a stream must
therefore differ from every other word used in the same place under the same seed;
the same number in two different places is harmless. Each test below names one place
and the words that share it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from enum import IntEnum
from pathlib import Path

import pytest

from lostcities.cfr import _traverse
from lostcities.rng import (
    EvaluationRole,
    NetworkOwner,
    Purpose,
    ValueStream,
    stream_key,
)

PACKAGE = Path(__file__).resolve().parents[1] / "lostcities"
REGISTRIES = (Purpose, NetworkOwner, EvaluationRole, ValueStream)
# The purposes whose words a value traversal reuses under its own key
# (PyTraverser.run_values and Traverser.run_values): its own words must differ from these.
VALUE_TRAVERSAL_PURPOSES = (
    Purpose.DEAL,
    Purpose.CHANCE,
    Purpose.OPPONENT,
    Purpose.TRAVERSER,
    Purpose.ROLLOUT,
    Purpose.BRANCH,
)
PLAYERS = (0, 1)  # the player word of each player's own streams (advantage networks, memory)


def shared_words(words: Mapping[str, int]) -> dict[int, list[str]]:
    """Each word that more than one name maps to, with those names."""
    names: dict[int, list[str]] = {}
    for name, word in words.items():
        names.setdefault(int(word), []).append(name)
    return {word: group for word, group in names.items() if len(group) > 1}


@pytest.mark.parametrize("registry", REGISTRIES, ids=lambda r: r.__name__)
def test_each_use_has_its_own_word(registry: type[IntEnum]):
    # __members__ keeps aliases: an enum member given another's value shows up here
    assert shared_words(registry.__members__) == {}


def test_the_check_finds_two_uses_of_one_word():
    class Crafted(IntEnum):
        DEAL = 1
        ARENA = 0xA4E7A
        BOT = 0xA4E7A  # an alias of ARENA, as IntEnum allows

    assert shared_words(Crafted.__members__) == {0xA4E7A: ["ARENA", "BOT"]}


def test_no_purpose_is_zero():
    # A sub-seed is a key derived with fewer words (stream_key(seed, slot)): its fourth
    # word is 0, so a purpose 0 would hand one of its streams that sub-seed.
    assert stream_key(5, 1) == stream_key(5, 1, 0, 0, 0)
    assert 0 not in set(Purpose)


def test_value_stream_words_differ_from_the_purposes_a_value_traversal_reuses():
    assert set(ValueStream).isdisjoint(VALUE_TRAVERSAL_PURPOSES)


def test_network_owners_differ_from_the_players():
    assert set(NetworkOwner).isdisjoint(PLAYERS)


def test_the_kernel_value_stream_words_are_the_registry_ones():
    # _rng.pxd's PURPOSE_* are C enum values, out of Python's reach; the traversal twin
    # tests (tests/cfr/test_traversal.py) pin them by comparing draws.
    assert (_traverse.VALUE_EXPLORE, _traverse.VALUE_RECORD) == (
        ValueStream.EXPLORE,
        ValueStream.RECORD,
    )


@pytest.mark.parametrize("word", sorted({int(w) for r in REGISTRIES for w in r}))
def test_a_word_keys_a_different_stream_in_each_place(word: int):
    # Why one number may serve two places (ValueStream.EXPLORE and Purpose.MEMORY are 7).
    keys = {stream_key(5, *(word if i == place else 0 for i in range(4))) for place in range(4)}
    assert len(keys) == 4


def literal_purposes(source: str) -> list[int]:
    """Lines where a ``stream_key`` call's fourth word is spelled in place (a nonzero
    number or an UPPER_CASE constant) rather than taken from the registry."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or len(node.args) < 5:
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called != "stream_key":
            continue
        word = node.args[4]
        if isinstance(word, ast.Constant) and word.value != 0:
            lines.append(node.lineno)
        elif isinstance(word, ast.Name) and word.id.isupper():
            lines.append(node.lineno)
    return lines


def test_every_module_takes_its_purposes_from_the_registry():
    spelled = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "rng.py" and (lines := literal_purposes(path.read_text()))
    }
    assert spelled == {}


def test_the_purpose_check_finds_a_spelled_word():
    source = (
        "from lostcities import rng\n"
        "BOT_STREAM = 0xB07\n"
        "a = stream_key(seed, 0, 0, 0, BOT_STREAM)\n"
        "b = rng.stream_key(seed, 0, 0, 0, 0x5DCF)\n"
        "c = stream_key(seed, 0, 0, 0, Purpose.BOT)\n"
        "d = stream_key(base, word, 0, 0, 0)\n"
    )
    assert literal_purposes(source) == [3, 4]
