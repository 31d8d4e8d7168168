"""Search as the teacher: rounds that teach a policy network what the search plays.

Expert iteration on top of Deep CFR. The current agent starts as the run's policy
network; each round r:

1. **check**: the teacher (the play-time search over the current agent,
   lostcities/eval/search.py) plays the current agent alone, ``teacher.check_games``
   games on the round's deals. A teacher that does not beat its blueprint by
   ``teacher.gate_margin`` standard errors stops the stage with one line: a student
   learns nothing good from it.
2. **data**: ``teacher.games`` games of the teacher in both seats, every decision
   recorded (lostcities/teacher/games.py), run on the traversal executor as chunks of
   game IDs: the data does not depend on the worker count. Saved to
   ``teacher/round_RR.npz`` in the run directory.
3. **student**: a policy network, fresh or continued from the current agent's, trained
   on the decisions of the latest ``teacher.data_rounds`` rounds (lostcities/teacher/
   student.py).
4. **gate**: the student alone against the current agent alone, and against the
   teacher, ``teacher.gate_games`` games each; the student replaces the current agent
   only if it wins head to head by more than ``teacher.gate_margin`` standard errors of
   its win rate. An accepted student is written as an agent file (``student.pt``: the
   run's agent file with the student as its policy net), which evaluate, arena and play
   take like any other (``--agents policy``, with or without ``--search``).

Every round logs ``teacher/*`` metrics (the run logs round r at step T + r, after its T
iterations): each match's win rate, its standard error and score difference, the data's
size, the student's loss and steps, whether it was accepted, and the seconds of each
phase.

A finished round is recorded in ``teacher/rounds.json`` (with the settings it was played
with). A run started again in the same run directory (``hydra.run.dir``, with
``run.resume`` of the run's last checkpoint and a larger ``teacher.rounds``) continues
after its finished rounds: their data is read back and the current agent is the last
accepted student (``student.pt``); the finished rounds' metrics, kept in the rounds file,
are logged again, so the run's metrics file and MLflow run hold every round.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from lostcities.cfr.executors import Executor
from lostcities.cfr.executors.contract import ordered_results
from lostcities.cfr.executors.tasks import TaskPayload
from lostcities.cfr.traversal import TraversalSpec
from lostcities.checkpoint import write_atomically
from lostcities.config import TeacherConfig
from lostcities.eval.agents import policy_agent
from lostcities.eval.match import MatchResult, play_match
from lostcities.eval.players import AgentPlayer
from lostcities.eval.search import SearchAgent, SearchConfig
from lostcities.games import GameSpec
from lostcities.perf.step import TrainingStep
from lostcities.rng import Purpose, stream_key
from lostcities.teacher.games import (
    TASK,
    TeacherGame,
    TeacherGameId,
    load_games,
    save_games,
)
from lostcities.teacher.student import train_student

DATA_DIR = "teacher"
ROUNDS_FILE = "rounds.json"  # the finished rounds, and the settings they were played with


class TeacherStopped(Exception):
    """The stage stopped early: the round's teacher did not beat its blueprint."""


def win_rate_and_error(result: MatchResult) -> tuple[float, float]:
    """Player A's win rate (a draw is half a win) and its standard error over the games."""
    points = np.array([1.0 if d > 0 else 0.5 if d == 0 else 0.0 for d in result.diffs])
    error = points.std(ddof=1) / math.sqrt(len(points)) if len(points) > 1 else math.inf
    return float(points.mean()), float(error)


def passes_gate(result: MatchResult, margin: float) -> bool:
    rate, error = win_rate_and_error(result)
    return rate - 0.5 > margin * error


class TeacherStage:
    """The rounds of the module docstring, for the run of ``spec`` (its network, seed,
    turn cap and batch invariance). ``write_agent(weights, round)``: write the
    agent file of an accepted student (its policy net's weights); ``log(metrics, round)``:
    log a round's metrics; ``say(line)``: a line for the user; ``progress(phase, done, total)``:
    the run's progress display (None: none)."""

    def __init__(
        self,
        cfg: TeacherConfig,
        game: GameSpec,
        spec: TraversalSpec,
        executor: Executor,
        step: TrainingStep,
        device: torch.device,
        run_dir: Path,
        write_agent: Callable[[dict, int], Path],
        log: Callable[[dict, int], None],
        say: Callable[[str], None] = print,
        augment_symmetries: bool = True,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.game = game
        self.network = spec.network
        self.seed = spec.seed
        self.batch_invariant = spec.batch_invariant
        self.max_turns = spec.game.max_turns
        self.executor = executor
        self.step = step
        self.device = device
        self.run_dir = Path(run_dir)
        self.write_agent = write_agent
        self.log = log
        self.say = say
        self.augment_symmetries = augment_symmetries
        self.progress = progress
        self.data: list[list[TeacherGame]] = []  # per round played

    # --- the agents of a round ---------------------------------------------------------

    def search_config(self, round_: int, purpose_slot: int) -> SearchConfig:
        cfg = self.cfg
        return SearchConfig(
            determinizations=cfg.redeals,
            candidates=cfg.candidates,
            margin=cfg.margin,
            seed=stream_key(self.seed, round_, purpose_slot, 0, Purpose.TEACHER_SEARCH),
        )

    def agent(self, weights: dict, name: str):
        return policy_agent(self.network, weights, self.batch_invariant, name)

    def match(self, a, play_a: str, b, play_b: str, games: int, round_: int, slot: int):
        """``a`` against ``b``, ``games`` games on the round's deals for this ``slot``."""
        self._phase(f"teacher match {slot}", 0, 1)  # a match reports no steps of its own
        seed = stream_key(self.seed, round_, slot, 0, Purpose.TEACHER_MATCH)
        player_a = AgentPlayer(a, play_a, lambda i: stream_key(seed, i, 1, 0, Purpose.EVALUATION))
        player_b = AgentPlayer(b, play_b, lambda i: stream_key(seed, i, 2, 0, Purpose.EVALUATION))
        return play_match(player_a, player_b, games, seed, self.max_turns, batch_size=games)

    # --- the stage -----------------------------------------------------------------------

    def run(self, blueprint: dict, accepted: dict | None = None) -> dict[str, float]:
        """Rounds 1..``teacher.rounds`` from ``blueprint`` (a policy net's weights);
        returns the last round's metrics. A run directory that holds finished rounds
        (``teacher/rounds.json``, their data files) continues after them, from
        ``accepted`` (the last accepted student's weights, None if none was)."""
        done = self.finished_rounds()
        start = accepted if accepted is not None and any(r["accepted"] for r in done) else blueprint
        current = {k: v.detach().cpu().clone() for k, v in start.items()}
        for record in done:
            self.data.append(load_games(self.data_path(record["round"])))
            self.log(record["metrics"], record["round"])
        if done:
            self.say(
                f"teacher stage: rounds 1..{len(done)} done, continuing with round {len(done) + 1}"
            )
        last: dict[str, float] = {}
        for round_ in range(len(done) + 1, self.cfg.rounds + 1):
            try:
                metrics, current = self.round(round_, current)
            except TeacherStopped as stop:
                self.say(str(stop))
                break
            accepted = bool(metrics["teacher/accepted"])
            done.append({"round": round_, "accepted": accepted, "metrics": metrics})
            self.write_rounds(done)
            last = metrics
        return last

    def rounds_path(self) -> Path:
        return self.run_dir / DATA_DIR / ROUNDS_FILE

    def data_path(self, round_: int) -> Path:
        return self.run_dir / DATA_DIR / f"round_{round_:02d}.npz"

    def finished_rounds(self) -> list[dict]:
        """The rounds this run directory has finished (``teacher/rounds.json``), if it was
        written with the same teacher settings (one-line ValueError otherwise)."""
        path = self.rounds_path()
        if not path.exists():
            return []
        saved = json.loads(path.read_text())
        settings = self.settings()
        if saved["settings"] != settings:
            changed = sorted(k for k in settings if saved["settings"].get(k) != settings[k])
            raise ValueError(
                f"{path}: its rounds were played with other teacher settings "
                f"({', '.join(changed)}); use another run directory"
            )
        return saved["rounds"]

    def write_rounds(self, rounds: list[dict]) -> None:
        text = json.dumps({"settings": self.settings(), "rounds": rounds}, indent=1)
        write_atomically(self.rounds_path(), lambda f: f.write(text.encode()))

    def settings(self) -> dict:
        """The teacher settings a round is played with (all but how many rounds)."""
        return {k: v for k, v in asdict(self.cfg).items() if k != "rounds"}

    def round(self, round_: int, current: dict) -> tuple[dict[str, float], dict]:
        cfg = self.cfg
        metrics: dict[str, float] = {}
        agent = self.agent(current, "current")
        teacher = SearchAgent(agent, self.search_config(round_, 0))

        start = time.perf_counter()
        check = self.match(teacher, "greedy", agent, cfg.play, cfg.check_games, round_, 0).result
        metrics.update(_match_metrics("teacher/check", check))
        metrics["teacher/check_seconds"] = time.perf_counter() - start
        if not passes_gate(check, cfg.gate_margin):
            self.log(metrics, round_)
            rate, error = win_rate_and_error(check)
            raise TeacherStopped(
                f"teacher stage stopped at round {round_}: the teacher won {rate:.3f} "
                f"(standard error {error:.3f}) of {check.games} games against its blueprint, "
                f"not above 1/2 by teacher.gate_margin={cfg.gate_margin:g} standard errors"
            )

        start = time.perf_counter()
        games = self.teacher_games(round_, current)
        self.data.append(games)
        self.save_data(round_, games)
        metrics["teacher/data_games"] = len(games)
        metrics["teacher/data_decisions"] = sum(len(g.masks) for g in games)
        metrics["teacher/data_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        student_weights, loss, steps = self.student(round_, current)
        metrics["teacher/student_loss"] = loss
        metrics["teacher/student_steps"] = steps
        metrics["teacher/student_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        student = self.agent(student_weights, "student")
        versus_teacher = self.match(
            student, cfg.play, teacher, "greedy", cfg.gate_games, round_, 1
        ).result
        metrics.update(_match_metrics("teacher/student_vs_teacher", versus_teacher))
        gate = self.match(student, cfg.play, agent, cfg.play, cfg.gate_games, round_, 2).result
        metrics.update(_match_metrics("teacher/gate", gate))
        accepted = passes_gate(gate, cfg.gate_margin)
        metrics["teacher/accepted"] = float(accepted)
        metrics["teacher/gate_seconds"] = time.perf_counter() - start
        self.log(metrics, round_)
        rate, error = win_rate_and_error(gate)
        verdict = "accepted" if accepted else "rejected"
        self.say(
            f"teacher round {round_}/{cfg.rounds}: teacher vs blueprint "
            f"{metrics['teacher/check/win_rate']:.3f}, student vs teacher "
            f"{metrics['teacher/student_vs_teacher/win_rate']:.3f}, student vs current "
            f"{rate:.3f} (se {error:.3f}): {verdict}"
        )
        if accepted:
            path = self.write_agent(student_weights, round_)
            self.say(f"student of round {round_} written to {path}")
            return metrics, student_weights
        return metrics, current

    def teacher_games(self, round_: int, blueprint: dict) -> list[TeacherGame]:
        """The round's teacher games on the executor, in game order."""
        ids = [TeacherGameId(round_, k) for k in range(self.cfg.games)]
        payload = TaskPayload(
            TASK,
            {
                "network": asdict(self.network),
                "weights": {k: v.numpy() for k, v in blueprint.items()},
                "search": asdict(self.search_config(round_, 1)),
                "seed": self.seed,
                "max_turns": self.max_turns,
                "batch_invariant": self.batch_invariant,
            },
        )
        self._phase("teacher games", 0, len(ids))
        on_progress = (
            None
            if self.progress is None
            else (lambda done: self._phase("teacher games", done, len(ids)))
        )
        return list(ordered_results(self.executor, ids, payload, on_progress))

    def _phase(self, name: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(name, done, total)

    def student(self, round_: int, current: dict) -> tuple[dict, float, int]:
        """A student trained on the latest rounds' data; (weights, loss, steps)."""
        games = [g for data in self.data[-self.cfg.data_rounds :] for g in data]
        return train_student(
            self.game,
            self.network,
            self.seed,
            round_,
            current,
            games,
            self.cfg,
            self.step,
            self.device,
            self.augment_symmetries,
            None
            if self.progress is None
            else lambda done, total: self._phase("student", done, total),
        )

    def save_data(self, round_: int, games: list[TeacherGame]) -> Path:
        """``teacher/round_RR.npz`` in the run directory (lostcities/teacher/games.py
        save_games)."""
        return save_games(self.data_path(round_), games)


def _match_metrics(prefix: str, result: MatchResult) -> dict[str, float]:
    rate, error = win_rate_and_error(result)
    return {
        f"{prefix}/win_rate": rate,
        f"{prefix}/win_rate_se": error,
        f"{prefix}/score_diff": result.mean_diff(),
        f"{prefix}/games": float(result.games),
    }
