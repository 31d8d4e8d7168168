"""The ``amp`` group: amp=off is the pre-AMP training path bit for bit, a CPU falls back to
fp32 with one warning unless bf16 is opted in (amp=bf16_cpu), and an active AMP skips and
counts non-finite steps."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from conftest import train_run

import lostcities.cfr.targets as targets_module
import lostcities.cfr.trainer as trainer_module
from lostcities.cfr.fitting import action_relabel
from lostcities.cfr.networks import build_network
from lostcities.cfr.targets import policy_loss, regret_loss
from lostcities.cfr.trainer import DeepCFRTrainer
from lostcities.cfr.traversal import TraversalSpec
from lostcities.config import (
    AmpConfig,
    GameConfig,
    MemoryConfig,
    NetworkConfig,
    OptimConfig,
    TraversalConfig,
)
from lostcities.games import make_game
from lostcities.perf.amp import MixedPrecision
from lostcities.rng import Purpose, stream_key, torch_seed


class PreAmpTrainer(DeepCFRTrainer):
    """The training code as it was before AMP and compile (commit c057e2d), verbatim:
    a fresh network per reinitialisation, the plain loop, the plain losses."""

    def _train_advantage(self, player: int, t: int) -> float:
        memory = self.advantage_memories[player]
        if memory.size == 0:
            return float("nan")
        net = self.advantage_nets[player]
        if net is None or self.optim.reinit_advantage:
            net = self._new_net(Purpose.NETWORK_INIT, t, player)
            self.advantage_optimizers[player] = torch.optim.Adam(
                net.parameters(), lr=self.optim.advantage_lr
            )
        loss = self._fit(
            net,
            self.advantage_optimizers[player],
            memory,
            t,
            self.optim.advantage_steps,
            self.optim.advantage_batch_size,
            self._generator(t, player, Purpose.TRAINING),
            _pre_amp_regret_loss,
        )
        net.eval()
        self.advantage_nets[player] = net
        self.sigma.set_network(player, net, trainer_module.regret_weight(t), t)
        return loss

    def train_policy(self) -> float:
        t = self.iteration
        if self.strategy_memory.size == 0 or self.policy_trained_at == t:
            return self.policy_loss
        if self.optim.policy_training == "scratch":
            self.policy_net = self._new_net(Purpose.NETWORK_INIT, t, 2)
            self.policy_optimizer = torch.optim.Adam(
                self.policy_net.parameters(), lr=self.optim.strategy_lr
            )
        self.policy_loss = self._fit(
            self.policy_net,
            self.policy_optimizer,
            self.strategy_memory,
            t,
            self.optim.strategy_steps,
            self.optim.strategy_batch_size,
            self._generator(t, 2, Purpose.TRAINING),
            _pre_amp_policy_loss,
        )
        self.policy_net.eval()
        self.policy_forward = trainer_module.NetworkForward(
            self.policy_net, self.device, self.batch_invariant
        )
        self.policy_trained_at = t
        return self.policy_loss

    def _fit(self, net, optimizer, memory, t, steps, batch_size, generator, loss_fn) -> float:
        net.train()
        tail = []
        for step in range(steps):
            features, masks, targets, iterations = memory.sample(batch_size, generator, self.device)
            if self.symmetries is not None:
                relabel = action_relabel(self.symmetries)
                features, masks, targets = relabel(features, masks, targets, generator)
            weights = self._weights(iterations, t)
            loss = loss_fn(net(features), masks, targets, weights)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if self.optim.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), self.optim.grad_clip)
            optimizer.step()
            if step >= steps - max(1, steps // 10):
                tail.append(loss.item())
        return float(np.mean(tail))


def _pre_amp_regret_loss(pred, masks, targets, weights):
    squared = torch.where(masks, (pred - targets) ** 2, torch.zeros_like(pred))
    return (weights[:, None] * squared).sum() / masks.sum().clamp(min=1)


def _pre_amp_policy_loss(logits, masks, targets, weights):
    logits = logits.masked_fill(~masks, float("-inf"))
    log_probs = torch.log_softmax(logits, dim=1).masked_fill(~masks, 0.0)
    return -(weights[:, None] * targets * log_probs).sum() / len(targets)


SCENARIOS = {
    # Leduc, alternating updates, advantage nets from scratch, scratch policy, clipping
    "leduc": (
        "leduc",
        NetworkConfig(hidden=16, layers=2),
        TraversalConfig(scheme="external", traversals_per_player=20),
        OptimConfig(
            advantage_steps=12, advantage_batch_size=64, strategy_steps=12, strategy_batch_size=64
        ),
    ),
    # Kuhn, simultaneous updates, continued advantage nets, continual policy, no clipping
    "kuhn": (
        "kuhn",
        NetworkConfig(hidden=8, layers=1),
        TraversalConfig(scheme="external", traversals_per_player=10, updates="simultaneous"),
        OptimConfig(
            advantage_steps=7,
            advantage_batch_size=32,
            strategy_steps=9,
            strategy_batch_size=32,
            reinit_advantage=False,
            policy_training="continual",
            grad_clip=0.0,
        ),
    ),
}


def make_trainer(scenario: str, cls=DeepCFRTrainer, amp: AmpConfig | None = None):
    game, network, traversal, optim = SCENARIOS[scenario]
    game_cfg = GameConfig(name=game)
    return cls(
        make_game(game_cfg),
        TraversalSpec(game_cfg, network, traversal, seed=5),
        MemoryConfig(500, 500),
        optim,
        amp=amp,
    )


def run_three(trainer) -> tuple[list[dict], dict]:
    """Three iterations, the policy trained after each: (non-timing metrics, state dict)."""
    rows = []
    for _ in range(3):
        metrics = trainer.run_iteration()
        metrics["loss/policy"] = trainer.train_policy()
        rows.append({k: v for k, v in metrics.items() if not k.startswith("time/")})
    rows = [{k: v for k, v in r.items() if k != "traversal/nodes_per_second"} for r in rows]
    return rows, trainer.state_dict()


def assert_same_training(got: tuple[list[dict], dict], expected: tuple[list[dict], dict]):
    (got_rows, got_state), (want_rows, want_state) = got, expected
    new = ("amp/", "fit/")  # the step's and the fits' bookkeeping, which the old code lacks
    for row, want in zip(got_rows, want_rows, strict=True):
        assert {k: v for k, v in row.items() if not k.startswith(new)} == {
            k: v for k, v in want.items() if not k.startswith(new)
        }
    for name in ("advantage_nets", "policy_net", "advantage_optimizers", "policy_optimizer"):
        assert_equal_tree(got_state[name], want_state[name])


def assert_equal_tree(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_equal_tree(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_equal_tree(x, y)
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    else:
        assert a == b or (a != a and b != b)  # NaN == NaN here


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_amp_off_trains_bit_identically_to_the_pre_amp_code(scenario):
    expected = run_three(make_trainer(scenario, PreAmpTrainer))
    got = run_three(make_trainer(scenario, amp=AmpConfig()))
    assert_same_training(got, expected)
    assert got[0][-1]["amp/active"] == 0.0
    assert got[0][-1]["amp/grad_scale"] == 1.0
    assert got[0][-1]["amp/nonfinite_loss_count"] == 0


def test_reinitialising_in_place_is_bit_identical_to_a_fresh_network():
    trainer = make_trainer("leduc")
    net = trainer._new_net(Purpose.NETWORK_INIT, 1, 0)
    params = [p for p in net.parameters()]
    for t, player in [(2, 0), (3, 1), (7, 2)]:
        same = trainer._reinit(net, Purpose.NETWORK_INIT, t, player)
        assert same is net and all(a is b for a, b in zip(net.parameters(), params, strict=True))
        key = stream_key(trainer.seed, t, player, 0, Purpose.NETWORK_INIT)
        fresh = build_network(
            trainer.network_cfg,
            trainer.game.encoding_size,
            trainer.game.num_actions,
            seed=torch_seed(key),
        )
        assert_equal_tree(net.state_dict(), fresh.state_dict())


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_amp_on_a_cpu_warns_once_and_trains_exactly_like_amp_off(dtype):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = make_trainer("kuhn", amp=AmpConfig(name=dtype, dtype=dtype))
    messages = [str(w.message) for w in caught if "amp=" in str(w.message)]
    assert len(messages) == 1
    assert f"amp={dtype} requested" in messages[0] and "fp32" in messages[0]
    assert "CPU" in messages[0]
    got = run_three(trainer)
    assert all(row["amp/active"] == 0.0 and row["amp/grad_scale"] == 1.0 for row in got[0])
    assert_same_training(got, run_three(make_trainer("kuhn", amp=AmpConfig())))


def forced_fp16(init_scale: float = 65536.0) -> MixedPrecision:
    """fp16 + GradScaler really active on the CPU (GradScaler("cpu") exists)."""
    amp = MixedPrecision(AmpConfig(dtype="fp16", init_scale=init_scale), "cpu", allow_cpu=True)
    assert amp.active and amp.scaler is not None
    return amp


def test_non_finite_loss_is_skipped_and_counted():
    amp = forced_fp16()
    net = torch.nn.Linear(3, 1)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.1)
    before = [p.detach().clone() for p in net.parameters()]
    loss = net(torch.ones(2, 3)).sum() * float("inf")
    assert not amp.step(loss, optimizer, net.parameters(), grad_clip=1.0)
    assert amp.nonfinite_loss_count == 1
    assert all(p.grad is None for p in net.parameters())  # no backward either
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    assert amp.metrics() == {
        "amp/active": 1.0,
        "amp/grad_scale": 65536.0,
        "amp/nonfinite_loss_count": 1,
    }
    # and the next, finite step trains
    assert amp.step(net(torch.ones(2, 3)).sum(), optimizer, net.parameters(), grad_clip=1.0)
    assert not all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))


def test_scaler_skips_an_overflowing_step_lowers_the_scale_and_recovers():
    amp = forced_fp16(init_scale=65536.0)
    net = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    before = [p.detach().clone() for p in net.parameters()]
    # finite loss (~1e34), but its scaled gradient 65536 * 1e35 overflows fp32
    loss = net(torch.full((1, 1), 1e35)).sum()
    assert math.isfinite(loss.item())
    amp.step(loss, optimizer, net.parameters(), grad_clip=1.0)
    assert amp.nonfinite_loss_count == 0  # the loss was finite: the scaler's skip
    assert amp.metrics()["amp/grad_scale"] == 32768.0
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    optimizer.zero_grad(set_to_none=True)
    assert amp.step(net(torch.ones(1, 1)).sum(), optimizer, net.parameters(), grad_clip=1.0)
    assert not all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))


def test_unscale_before_clipping_clips_the_true_gradient():
    amp = forced_fp16(init_scale=1024.0)
    net = torch.nn.Linear(4, 1, bias=False)
    with torch.no_grad():
        net.weight.zero_()
    optimizer = torch.optim.SGD(net.parameters(), lr=1.0)
    loss = net(torch.full((1, 4), 10.0)).sum()  # gradient (10, 10, 10, 10): norm 20
    assert amp.step(loss, optimizer, net.parameters(), grad_clip=1.0)
    # SGD moved the weights by the clipped (norm 1), unscaled gradient
    torch.testing.assert_close(net.weight.norm().item(), 1.0)


def test_forced_amp_run_skips_an_injected_inf_and_continues(monkeypatch):
    trainer = make_trainer("kuhn")
    trainer.step.amp = forced_fp16()
    calls = []

    def sometimes_inf(pred, masks, targets, weights):
        calls.append(pred.dtype)
        loss = regret_loss(pred, masks, targets, weights)
        return loss * float("inf") if len(calls) == 3 else loss

    monkeypatch.setattr(targets_module, "regret_loss", sometimes_inf)
    first = trainer.run_iteration()
    second = trainer.run_iteration()
    assert calls[0] == torch.float16  # the forward ran under fp16 autocast
    assert first["amp/active"] == 1.0
    assert first["amp/nonfinite_loss_count"] == second["amp/nonfinite_loss_count"] == 1
    assert math.isfinite(first["loss/advantage"]) and math.isfinite(second["loss/advantage"])
    assert trainer.iteration == 2
    state = trainer.state_dict()["amp"]
    assert state["nonfinite_loss_count"] == 1 and state["scaler"]["scale"] > 0
    resumed = make_trainer("kuhn")
    resumed.step.amp = forced_fp16(init_scale=2.0)
    resumed.load_state_dict(trainer.state_dict())
    assert resumed.step.amp.metrics() == trainer.step.amp.metrics()


def test_losses_are_computed_in_fp32_under_low_precision():
    masks = torch.ones(2, 3, dtype=torch.bool)
    weights = torch.ones(2)
    pred = torch.full((2, 3), 300.0, dtype=torch.float16)  # 300^2 overflows fp16
    loss = regret_loss(pred, masks, torch.zeros(2, 3), weights)
    assert loss.dtype == torch.float32 and loss.item() == pytest.approx(90000.0)
    logits = torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.bfloat16)
    masks = torch.tensor([[True, True, False]])
    sigma = torch.tensor([[0.5, 0.5, 0.0]])
    loss = policy_loss(logits, masks, sigma, torch.ones(1))
    want = -(0.5 * torch.log_softmax(torch.tensor([0.0, 1.0]), 0)).sum()
    assert loss.dtype == torch.float32 and loss.item() == pytest.approx(want.item())


def test_bf16_cpu_opt_in_is_active_without_a_warning_and_fp16_stays_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the opt-in warns about nothing
        bf16 = MixedPrecision(AmpConfig(name="bf16_cpu", dtype="bf16", on_cpu=True), "cpu")
    assert bf16.active and bf16.scaler is None and bf16.dtype == torch.bfloat16
    with pytest.warns(UserWarning, match="amp=fp16 requested.*fp16 autocast is many times slower"):
        fp16 = MixedPrecision(AmpConfig(dtype="fp16", on_cpu=True), "cpu")
    assert not fp16.active and fp16.scaler is None


def test_bf16_cpu_composes_as_bf16_with_the_cpu_opt_in():
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from lostcities.config import register_configs
    from lostcities.config_checks import typed_config

    register_configs()
    with initialize_config_module(config_module="lostcities.conf", version_base="1.3"):
        cfg = typed_config(compose("train", overrides=["amp=bf16_cpu"]))
        default = OmegaConf.to_object(compose("train", overrides=["amp=bf16"]))
    assert (cfg.amp.name, cfg.amp.dtype, cfg.amp.on_cpu) == ("bf16_cpu", "bf16", True)
    assert default.amp.on_cpu is False  # amp=bf16 keeps the CPU fallback


@pytest.mark.filterwarnings("error:amp=")  # neither run may fall back with a warning
@pytest.mark.parametrize("game", ["kuhn", "leduc"])
def test_bf16_cpu_trains_a_short_run_in_bf16(game, tmp_path, monkeypatch):
    calls = []

    def recording(pred, *args):
        calls.append(pred.dtype)
        return regret_loss(pred, *args)

    monkeypatch.setattr(targets_module, "regret_loss", recording)
    rows = train_run(
        [
            f"game={game}",
            "amp=bf16_cpu",
            "network=small",
            "traversal.traversals_per_player=20",
            "optim.advantage_steps=8",
            "optim.strategy_steps=8",
            "optim.advantage_batch_size=64",
            "optim.strategy_batch_size=64",
            "eval.every=2",
            "run.iterations=2",
            "run.progress=false",
            "tracking.enabled=false",
        ],
        tmp_path,
    )
    assert calls and set(calls) == {torch.bfloat16}  # every advantage forward ran in bf16
    assert [row["amp/active"] for row in rows] == [1.0, 1.0]
    assert all(
        row["amp/grad_scale"] == 1.0 and row["amp/nonfinite_loss_count"] == 0 for row in rows
    )
    for row in rows:
        assert math.isfinite(row["loss/advantage"])
    assert math.isfinite(rows[-1]["loss/strategy"])
    assert math.isfinite(rows[-1]["eval/exploitability"])
