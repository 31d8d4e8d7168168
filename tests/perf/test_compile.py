"""The ``compile`` group: clean weights in and out of compiled networks (checkpoints and
traversal worker processes), resume across compile on/off, the size-threshold warning,
recompile counting and its limit, and every amp/compile choice composing with the rest of
the config.

torch.compile costs seconds per graph on a CPU (tens of seconds with a cold inductor
cache), so only the resume and worker-process tests run inductor; the recompile tests use
dynamo's ``eager`` backend, which counts guards and recompiles exactly the same way.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

import lostcities.perf.step as step_module
from lostcities.cfr.networks import build_network
from lostcities.cfr.trainer import DeepCFRTrainer
from lostcities.cfr.traversal import TraversalSpec
from lostcities.checkpoint import checkpoint_path, load_checkpoint
from lostcities.config import (
    AmpConfig,
    CompileConfig,
    DeterminismConfig,
    GameConfig,
    MemoryConfig,
    NetworkConfig,
    OptimConfig,
    TraversalConfig,
)
from lostcities.games import make_game
from lostcities.perf.compile import (
    COMPILED_PREFIX,
    RecompileLimitError,
    RecompileWatch,
    below_threshold,
    clean_state_dict,
    load_clean_state_dict,
)
from lostcities.train import train  # also registers the schemas


def compose_cfg(overrides: list[str]):
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        return compose("train", overrides=overrides, return_hydra_config=False)


def typed(dict_cfg):
    return OmegaConf.to_object(dict_cfg)


def run(overrides: list[str], run_dir: Path) -> None:
    dict_cfg = compose_cfg(overrides)
    resolved = OmegaConf.to_container(dict_cfg, resolve=True)
    train(typed(dict_cfg), run_dir, resolved, overrides)


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def non_timing(row: dict) -> dict:
    timing = ("time/", "traversal/nodes_per_second")
    return {k: v for k, v in row.items() if k != "time" and not k.startswith(timing)}


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches are per process: start and leave each compiling test clean."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_clean_state_dict_round_trip_compiled_plain_compiled():
    cfg = NetworkConfig(hidden=8, layers=2)
    compiled = torch.compile(build_network(cfg, 5, 3, seed=1))
    assert all(k.startswith(COMPILED_PREFIX) for k in compiled.state_dict())
    clean = clean_state_dict(compiled)
    assert not any(COMPILED_PREFIX in k for k in clean)
    plain = build_network(cfg, 5, 3, seed=2)
    plain.load_state_dict(clean)  # strict: same keys
    again = torch.compile(build_network(cfg, 5, 3, seed=3))
    params = list(again.parameters())
    load_clean_state_dict(again, clean_state_dict(plain))  # through _orig_mod
    load_clean_state_dict(plain, compiled.state_dict())  # a prefixed dict is accepted too
    assert all(a is b for a, b in zip(params, again.parameters(), strict=True))  # in place
    for state in (plain.state_dict(), clean_state_dict(again)):
        assert state.keys() == clean.keys()
        assert all(torch.equal(state[k], clean[k]) for k in clean)


def kuhn_trainer(
    network: NetworkConfig, compile: CompileConfig | None, batch_invariant: bool = False
):
    kuhn = GameConfig(name="kuhn")
    traversal = TraversalConfig(scheme="external", traversals_per_player=10)
    determinism = DeterminismConfig(batch_invariant_inference=batch_invariant)
    return DeepCFRTrainer(
        make_game(kuhn),
        TraversalSpec(kuhn, network, traversal, 1, determinism),
        MemoryConfig(500, 500),
        OptimConfig(advantage_steps=3, advantage_batch_size=32, strategy_steps=3),
        compile=compile,
    )


def compile_warnings(network: NetworkConfig, compile: CompileConfig | None, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = kuhn_trainer(network, compile, **kwargs)
    return trainer, [str(w.message) for w in caught]


def test_compile_under_the_size_threshold_warns_once_at_start():
    small = NetworkConfig(name="small", hidden=64, layers=3)
    _, messages = compile_warnings(small, CompileConfig())
    assert len(messages) == 1
    assert "'small'" in messages[0] and "expect it slower" in messages[0]
    for big in (NetworkConfig(hidden=1024, layers=1), NetworkConfig(hidden=16, layers=6)):
        assert compile_warnings(big, CompileConfig())[1] == []
    # attention (Lost Cities' color_shared network only, so not built on Kuhn here) counts
    # from 2 layers; an MLP's attention_layers is unused
    assert not below_threshold(
        NetworkConfig(kind="color_shared", hidden=16, layers=1, attention_layers=2)
    )
    assert below_threshold(NetworkConfig(kind="color_shared", hidden=16, attention_layers=1))
    assert below_threshold(NetworkConfig(hidden=16, layers=1, attention_layers=2))
    # no warning when nothing is compiled
    assert compile_warnings(small, None)[1] == []
    assert compile_warnings(small, CompileConfig(trainer=False, inference=False))[1] == []


def test_batch_invariant_evaluation_takes_precedence_over_compile_inference():
    network = NetworkConfig(hidden=1024, layers=1)
    trainer, messages = compile_warnings(
        network, CompileConfig(trainer=False, inference=True), batch_invariant=True
    )
    assert messages == [
        "compile.inference ignored: determinism's batch-invariant row-wise evaluation "
        "forward takes precedence"
    ]
    assert trainer.policy_forward.rowwise is not None and trainer.step._inference is None
    trainer, _ = compile_warnings(network, CompileConfig(trainer=False, inference=True))
    assert trainer.policy_forward.net is trainer.step._inference
    assert trainer.step._inference._orig_mod is trainer.policy_net
    assert trainer.sigma.nets == [None, None]  # traversal forwards are never compiled


def test_recompile_watch_counts_dynamo_recompiles(fresh_dynamo):
    watch = RecompileWatch(limit=1)

    def double(x):
        return 2 * x

    compiled = torch.compile(double, backend="eager", dynamic=False)
    compiled(torch.ones(2))  # first compile: not a recompile
    compiled(torch.ones(2))  # cached
    assert watch.recompiles == 0
    compiled(torch.ones(3))  # static shapes: a new size recompiles
    assert watch.recompiles == 1
    watch.check()
    with torch.no_grad():
        compiled(torch.ones(3))  # grad mode is guarded too
    assert watch.recompiles == 2
    with pytest.raises(RecompileLimitError, match="recompiled 2 times.*max_recompiles=1"):
        watch.check()
    assert RecompileWatch(limit=0).recompiles == 0  # counted from the watch's start


@pytest.fixture
def saved_recompile_limit():
    """Restore dynamo's limit by assignment: pytest >= 9.2's monkeypatch undoes with
    delattr on module attributes it did not find in __dict__, which hides dynamo's."""
    saved = torch._dynamo.config.recompile_limit
    yield
    torch._dynamo.config.recompile_limit = saved


def test_dynamo_keeps_compiling_until_the_watch_limit_trips(fresh_dynamo, saved_recompile_limit):
    torch._dynamo.config.recompile_limit = 8
    watch = RecompileWatch(limit=8)  # dynamo alone would stop at 7 and go eager silently
    assert torch._dynamo.config.recompile_limit == 10

    def triple(x):
        return 3 * x

    compiled = torch.compile(triple, backend="eager", dynamic=False)
    for size in range(1, 11):
        compiled(torch.ones(size))
    assert watch.recompiles == 9
    with pytest.raises(RecompileLimitError, match="recompiled 9 times"):
        watch.check()


def test_too_many_recompiles_stop_the_run_with_one_line(fresh_dynamo, monkeypatch):
    # dynamo's eager backend (no inductor: fast) with static shapes: Kuhn's advantage
    # memories hold fewer rows than a batch, so each new memory size is a new shape.
    def eager_static(module, cfg, dynamic):
        return torch.compile(module, backend="eager", dynamic=False)

    monkeypatch.setattr(step_module, "compile_module", eager_static)
    trainer = kuhn_trainer(NetworkConfig(hidden=1024, layers=1), CompileConfig(max_recompiles=1))
    metrics = trainer.run_iteration()
    assert metrics["compile/recompiles"] == 1  # player 1's memory: another batch size
    with pytest.raises(RecompileLimitError) as error:
        for _ in range(3):
            trainer.run_iteration()
    assert isinstance(error.value, ValueError)  # train.py's main prints it as `error: ...`
    assert "\n" not in str(error.value) and "compile.max_recompiles=1" in str(error.value)


KUHN_TINY = [
    "game=kuhn",
    "network=small",
    "tracking.enabled=false",
    "run.progress=false",
    "traversal.traversals_per_player=10",
    "optim.advantage_steps=4",
    "optim.strategy_steps=4",
    "optim.advantage_batch_size=32",
    "optim.strategy_batch_size=32",
    "eval.every=1",
    "checkpoint.every=1",
    "run.iterations=3",
]
COMPARED = ("loss/", "eval/")


def assert_no_prefix(checkpoint: Path) -> None:
    trainer = load_checkpoint(checkpoint)["trainer"]
    for state in [*trainer["advantage_nets"], trainer["policy_net"]]:
        assert state is not None and not any(COMPILED_PREFIX in k for k in state)


def close_rows(got: list[dict], want: list[dict]) -> None:
    """Same keys (bar compile/*), same non-float metrics; losses and evaluation equal up to
    the rounding that inductor's fused kernels may change."""
    for row, expected in zip(got, want, strict=True):
        row = {k: v for k, v in non_timing(row).items() if not k.startswith("compile/")}
        expected = non_timing(expected)
        assert row.keys() == expected.keys()
        for key, value in expected.items():
            if key.startswith(COMPARED):
                assert row[key] == pytest.approx(value, rel=1e-3, abs=1e-5), key
            else:
                assert row[key] == value, key


@pytest.mark.filterwarnings("ignore:torch.compile on network")  # Kuhn's net is small
def test_resume_across_compile_on_and_off_both_ways(tmp_path, fresh_dynamo):
    straight = tmp_path / "eager"
    run(KUHN_TINY, straight)
    want = read_metrics(straight)
    # compiled for two iterations, then resumed without compile
    run([*KUHN_TINY, "+compile=trainer", "run.iterations=2"], tmp_path / "compiled")
    compiled_rows = read_metrics(tmp_path / "compiled")
    assert [r["compile/recompiles"] for r in compiled_rows] == [1, 1]  # one shape change
    close_rows(compiled_rows, want[:2])
    checkpoint = checkpoint_path(tmp_path / "compiled" / "checkpoints", 2)
    assert_no_prefix(checkpoint)
    run([*KUHN_TINY, f"run.resume={checkpoint}"], tmp_path / "then_eager")
    resumed = read_metrics(tmp_path / "then_eager")[2:]  # after the resumed run's own rows
    assert not any(k.startswith("compile/") for k in resumed[0])
    close_rows(resumed, want[2:])
    # eager for two iterations, then resumed compiled (trainer and evaluation forward)
    checkpoint = checkpoint_path(straight / "checkpoints", 2)
    overrides = [*KUHN_TINY, "+compile=trainer", "compile.inference=true"]
    run([*overrides, f"run.resume={checkpoint}"], tmp_path / "then_compiled")
    resumed = read_metrics(tmp_path / "then_compiled")[2:]
    assert "compile/recompiles" in resumed[0]
    close_rows(resumed, want[2:])
    assert_no_prefix(checkpoint_path(tmp_path / "then_compiled" / "checkpoints", 3))


@pytest.mark.parametrize("amp", ["off", "fp16", "bf16"])
@pytest.mark.parametrize("compile", [None, "off", "trainer", "inference", "max_autotune"])
def test_every_amp_and_compile_choice_composes(amp, compile):
    overrides = [f"amp={amp}"] + ([f"+compile={compile}"] if compile else [])
    cfg = typed(compose_cfg(overrides))
    assert (cfg.amp.name, cfg.amp.dtype) == (amp, amp)
    if compile is None:
        assert cfg.compile is None
    else:
        assert cfg.compile.name == compile
        assert cfg.compile.trainer == (compile in ("trainer", "max_autotune"))
        assert cfg.compile.inference == (compile == "inference")


def test_the_full_performance_combination_composes():
    cfg = typed(compose_cfg(["+compile=trainer", "network=wide", "amp=fp16", "determinism=strict"]))
    assert cfg.compile.trainer and cfg.compile.mode == "default"
    assert (cfg.network.hidden, cfg.amp.dtype, cfg.determinism.name) == (1024, "fp16", "strict")


def drive(overrides: list[str], iterations: int):
    """(trainer, metrics rows) of ``iterations`` iterations through train.py's builders,
    the executor closed after."""
    from lostcities.train import build_executor, build_trainer

    cfg = typed(compose_cfg(overrides))
    game = make_game(cfg.game)
    executor = build_executor(cfg)
    try:
        trainer = build_trainer(cfg, game, executor)
        return trainer, [trainer.run_iteration() for _ in range(iterations)]
    finally:
        executor.close()


@pytest.mark.filterwarnings("ignore:torch.compile on network")  # Kuhn's net is small
def test_compiled_trainer_pushes_clean_weights_to_worker_processes(fresh_dynamo, monkeypatch):
    """+compile=trainer with executor=processes: the workers rebuild plain
    networks and load what they are sent strictly, so one ``_orig_mod.`` key would stop the
    run; the weights they play are the trained ones, and the run matches the eager one."""
    from lostcities.cfr.policy import AdvantagePolicy

    workers = [
        *KUHN_TINY[:-3],  # no evaluation or checkpoint: the trainer alone
        "executor=processes",
        "executor.num_workers=2",
        "executor.chunk_size=2",
    ]
    _, eager = drive(workers, 2)
    snapshots: list[dict] = []  # every sigma the parent sends to its workers
    snapshot = AdvantagePolicy.snapshot
    monkeypatch.setattr(
        AdvantagePolicy, "snapshot", lambda self: snapshots.append(snapshot(self)) or snapshots[-1]
    )
    trainer, rows = drive([*workers, "+compile=trainer"], 2)
    assert trainer.step._compiled  # the fits really ran through compiled wrappers
    assert all(row["compile/recompiles"] <= 1 for row in rows)
    pushed = [w for s in snapshots for w in s["weights"] if w is not None]
    assert pushed and not any(COMPILED_PREFIX in k for w in pushed for k in w)
    # alternating updates: player 1's last traversals played player 0's net of iteration 2
    assert snapshots[-1]["iterations"][0] == 2
    sent, plain = snapshots[-1]["weights"][0], clean_state_dict(trainer.advantage_nets[0])
    assert sent.keys() == plain.keys()
    assert all(np.array_equal(sent[k], plain[k].numpy()) for k in plain)
    close_rows(rows, eager)


@pytest.mark.filterwarnings("ignore:torch.compile on network")  # Kuhn's net is small
def test_traversal_nets_stay_plain_after_a_compiled_iteration(fresh_dynamo, monkeypatch):
    """The fits and the evaluation forward run compiled; the sigma the traversals query
    holds the plain networks (a compiled wrapper there would recompile per batch size)."""
    monkeypatch.setattr(
        step_module,
        "compile_module",
        lambda module, cfg, dynamic: torch.compile(module, backend="eager", dynamic=dynamic),
    )
    trainer, _ = drive([*KUHN_TINY[:-3], "+compile=trainer", "compile.inference=true"], 2)
    assert trainer.step._compiled and trainer.step._inference is not None
    compiled = [*trainer.step._compiled.values(), trainer.step._inference]
    assert all(net is not None for net in trainer.sigma.nets)  # trained: something to check
    for net in trainer.sigma.nets:
        assert not hasattr(net, "_orig_mod")
        assert all(net is not wrapper for wrapper in compiled)


def test_the_size_gate_times_the_training_batch_while_the_memory_fills(monkeypatch):
    """The first minibatch of a fit can be smaller than the training batch (the memory
    holds fewer rows); the gate times the forward at the training batch all the same."""
    timed: list[tuple[int, int]] = []
    monkeypatch.setattr(
        step_module, "measure_forward_us", lambda net, x: timed.append(tuple(x.shape)) or 200.0
    )
    network = NetworkConfig(hidden=8, layers=1)
    step = step_module.TrainingStep(
        AmpConfig(), CompileConfig(), network, torch.device("cpu"), 0.0, gate_batch=64
    )
    step.device = torch.device("cuda")  # the gate is timed on CUDA only; nothing runs there
    net = torch.nn.Linear(8, 3)
    first = torch.arange(10 * 8, dtype=torch.float32).reshape(10, 8)  # 10 rows stored so far
    step._measure_gate(net, first)
    assert timed == [(64, 8)]
    assert torch.equal(step_module.at_batch(first, 64)[:10], first)  # rows repeated in order
    assert torch.equal(step_module.at_batch(first, 64)[10:20], first)
    assert step_module.at_batch(first, 4) is first  # a full batch is timed as it is
