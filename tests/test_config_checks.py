"""Bad input fails before any work, in one line naming the key, the value and what is
expected (lostcities/config_checks.py), and Hydra offers only real choices."""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import ConfigCompositionException

import lostcities.conf
from lostcities.config import TrainConfig, register_configs
from lostcities.config_checks import CROSS_RULES, RULES, check_config, field_rules, typed_config

register_configs()  # the schemas conf/train.yaml composes against

# --- every field declares its rule --------------------------------------------------


def test_every_field_of_config_py_declares_a_rule():
    keys = list(RULES)
    assert len(keys) == len(set(keys)) == 129
    assert {c.key for c in CROSS_RULES} <= set(keys)


def test_a_field_without_a_rule_fails_at_import():
    @dataclasses.dataclass
    class Loose:
        size: int = 3

    with pytest.raises(TypeError, match="Loose.size is declared without a rule"):
        field_rules(Loose)


def test_vocabularies_match_what_implements_them():
    from lostcities import config
    from lostcities.cfr.initial import INITIAL_STRATEGIES
    from lostcities.eval.opponents import BOTS
    from lostcities.perf.amp import DTYPES

    assert tuple(INITIAL_STRATEGIES) == config.INITIAL_STRATEGIES
    assert tuple(BOTS) == config.BOT_NAMES
    assert tuple(DTYPES) == config.AMP_DTYPES


def test_the_defaults_pass():
    check_config(TrainConfig())


# --- bad values, fed through Hydra -----------------------------------------------------

BAD_VALUES: dict[str, list[str]] = {
    "an integer >= 0": ["-1"],
    "an integer >= 1": ["0", "-2"],
    "an integer in [1, 30000]": ["0", "30001"],
    "an even integer >= 2": ["0", "3"],
    "an even integer >= 0": ["-2", "3"],
    "an integer in [0, 2^64)": ["-1", str(2**64)],
    "a finite number > 0": ["0", "-0.5", "inf", "nan"],
    "a finite number >= 0": ["-0.1", "inf"],
    "a number in (0, 1]": ["0", "1.5"],
    "a number in [0, 1)": ["-0.1", "1"],
    "a number in [0, 1]": ["-0.1", "1.5"],
    "a number in [0, 0.5]": ["-0.1", "0.6"],
    "a non-empty string": ["''"],
    "null or a non-empty string": ["''"],
    "a list of non-empty strings": ["['']", "['+compile=off','']"],
    "cpu, mps, cuda or cuda:N": ["gpu", "cuda:x", "CPU"],
    "null (a local Ray started by the run), auto, HOST:PORT or ray://HOST:PORT": [
        "''",
        "head",
        "http://head:6379",
        "ray://head",
    ],
    "true or false": ["maybe"],  # a wrong type: Hydra itself rejects it (see below)
}
"""Override values each kind of rule must reject, by the rule's expected text."""

REJECTED_BY_HYDRA = {"true or false"}

NEEDS = {
    "compile": ["+compile=trainer"],
    "experiment": ["+experiment=compile_ab"],
    "teacher": ["+teacher=search"],
}
"""Overrides that make an optional section present."""

CROSS_CASES: dict[str, list[str]] = {
    "executor.ray_address": ["executor=processes", "executor.ray_address=auto"],
    "network.kind": ["game=kuhn", "network=color_shared"],
    "network.attention_heads": ["network=color_shared", "network.attention_heads=3"],
    "network.normalize_last": ["network=color_shared", "network.normalize_last=true"],
    "optim.magnet": ["game=kuhn", "optim.magnet=0.1"],
    "traversal.sampling_policy": ["game=leduc", "traversal.sampling_policy=lost_cities_heuristic"],
    "traversal.initial_strategy": ["game=kuhn", "traversal.initial_strategy=lost_cities_heuristic"],
    "optim.augment_symmetries": ["game=kuhn", "optim.augment_symmetries=true"],
    "traversal.action_values": ["game=leduc", "traversal.action_values=learned"],
    "teacher.rounds": ["game=kuhn", "+teacher=search"],
    "experiment.arm": ["+experiment=compile_ab", "experiment.arm=2"],
    "experiment.baseline": ["+experiment=amp_ab", "experiment.baseline=3"],
    "compile.mode": ["+compile=inference", "compile.mode=reduce-overhead"],
    "amp.on_cpu": ["amp=fp16", "amp.on_cpu=true"],
}


def bad_values(key: str) -> list[str]:
    expected = RULES[key].expected
    if expected.startswith("one of "):
        return ["nope"]
    if expected.startswith("a list of distinct names from "):
        return ["[random,nope]", "[random,random]"]
    assert expected in BAD_VALUES, f"{key}: no bad values for rules expecting {expected!r}"
    return BAD_VALUES[expected]


FIELD_CASES = [
    pytest.param(key, value, id=f"{key}={value}") for key in RULES for value in bad_values(key)
]


def compose_cfg(overrides: list[str]):
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        return compose("train", overrides=overrides)


def start_up_error(overrides: list[str]) -> str:
    """The one-line ValueError typed_config raises for ``overrides``."""
    dict_cfg = compose_cfg(overrides)
    with pytest.raises(ValueError) as info:
        typed_config(dict_cfg)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("key", "value"), FIELD_CASES)
def test_a_bad_value_of_any_field_fails_at_start_up_naming_it(key, value):
    overrides = [*NEEDS.get(key.split(".")[0], []), f"{key}={value}"]
    if RULES[key].expected in REJECTED_BY_HYDRA:
        with pytest.raises(ConfigCompositionException, match=key):
            compose_cfg(overrides)
        return
    message = start_up_error(overrides)
    assert message.startswith(f"{key}=")
    assert message.endswith(f": expected {RULES[key].expected}")


@pytest.mark.parametrize("key", [c.key for c in CROSS_RULES])
def test_a_bad_combination_fails_at_start_up_naming_the_key(key):
    message = start_up_error(CROSS_CASES[key])
    assert message.startswith(f"{key}="), message
    assert ": expected " in message


def test_messages_read_well():
    assert start_up_error(["run.iterations=0"]) == "run.iterations=0: expected an integer >= 1"
    assert start_up_error(["game.name=chess"]) == (
        "game.name=chess: expected one of lost_cities, kuhn, leduc"
    )
    assert start_up_error(["game=kuhn", "optim.augment_symmetries=true"]) == (
        "optim.augment_symmetries=true: expected false with game.name=kuhn (Lost Cities only)"
    )
    assert start_up_error(["+experiment=compile_ab", "experiment.arm=2"]) == (
        "experiment.arm=2: expected an index of experiment.arms (0..1)"
    )


@functools.cache
def _typed(section: str) -> TrainConfig:
    return typed_config(compose_cfg(NEEDS.get(section, [])))


@pytest.mark.parametrize("key", list(RULES))
def test_a_wrongly_typed_value_fails_the_check(key):
    """Dataclasses do not check types: a TrainConfig built in code is checked too."""
    section, name = key.split(".")
    cfg = copy.deepcopy(_typed(section))
    setattr(getattr(cfg, section), name, object())
    with pytest.raises(ValueError, match=rf"^{key}=<object object at \w+>: expected "):
        check_config(cfg)


# --- the shipped configs pass ----------------------------------------------------------

SHIPPED = [
    ["game=kuhn"],
    ["game=leduc"],
    ["game=lost_cities"],
    *[[f"network={n}"] for n in ("default", "wide", "deep", "compact", "small", "color_shared")],
    *[[f"game={g}", "network=deep"] for g in ("kuhn", "leduc")],
    ["determinism=strict"],
    ["amp=fp16"],
    ["amp=bf16"],
    *[[f"+compile={c}"] for c in ("off", "trainer", "inference", "max_autotune")],
    *[[f"+experiment={e}"] for e in ("amp_ab", "compile_ab", "drift", "network_ab")],
]


@pytest.mark.parametrize("overrides", SHIPPED, ids=" ".join)
def test_every_shipped_choice_passes(overrides):
    typed_config(compose_cfg(overrides))


# --- the command line: exit 2, one line, nothing started -------------------------------


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("run.iterations=0", "error: run.iterations=0: expected an integer >= 1"),
        ("eval.every=0", "error: eval.every=0: expected an integer >= 1"),
    ],
)
def test_command_line_stops_at_once_with_one_line(tmp_path, override, line):
    mlflow_db = tmp_path / "mlflow.db"
    done = subprocess.run(
        [sys.executable, "-m", "lostcities.train", override],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{mlflow_db}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [line]
    assert done.stdout == ""
    assert not mlflow_db.exists()  # failed before any MLflow work


# --- Hydra's choices: no schema entries, group files still validated -------------------


def test_no_group_offers_a_schema_choice():
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        groups = [g for g in loader.list_groups("") if g != "hydra"]
        options = {g: loader.get_group_options(g) for g in groups}
    assert {"game", "network", "determinism", "amp", "compile", "experiment"} <= set(groups)
    for group, names in options.items():
        assert names, group
        assert not [n for n in names if "schema" in n], (group, names)


TYPOS = {
    "network": "name: typo\nhiden: 64\n",
    "amp": "name: typo\ndtype: fp16\nscale: 2.0\n",
    "determinism": "name: typo\ntorch_deterministc: true\n",
    "compile": "name: typo\ntrainr: true\n",
    "game": "# @package _global_\ngame:\n  nam: kuhn\n",
}


@pytest.mark.parametrize(
    ("group", "text"),
    [*TYPOS.items(), ("network", "name: typo\nhidden: wide\n")],
    ids=[*TYPOS, "network-type"],
)
def test_a_group_file_is_still_validated_against_its_schema(tmp_path, group, text):
    conf = tmp_path / "conf"
    shutil.copytree(Path(lostcities.conf.__file__).parent, conf)
    (conf / group / "typo.yaml").write_text(text)
    prefix = "+" if group == "compile" else ""
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        with pytest.raises(ConfigCompositionException, match=f"{group}/typo"):
            compose("train", overrides=[f"{prefix}{group}=typo"])
