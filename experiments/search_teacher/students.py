"""Students of one teacher's data, arm by arm: which target and which start learn best.

    python experiments/search_teacher/students.py RUN/checkpoints/ckpt_000008.pt \
        RUN/teacher/round_01.npz --out students --arms search:fresh,move:fresh,search:continued

For each arm ``TARGET:START`` (``teacher.target``: move | search; ``teacher.student``:
fresh | continued) a student is fitted on the same decisions with the stage's own code
(lostcities/teacher/student.py; the other ``teacher.*`` settings as conf/teacher/
search.yaml, or ``--passes``) and written as an agent file ``OUT/TARGET_START.pt``:
the checkpoint's agent with the student as its policy net. Evaluate them like any agent
file, on the same deals:

    python -m lostcities.cli.evaluate OUT/search_fresh.pt --agents policy --play greedy \
        --bots cautious,committer --games 400
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import torch

from lostcities.checkpoint import load_checkpoint, save_checkpoint
from lostcities.config import AmpConfig, GameConfig, NetworkConfig, TeacherConfig
from lostcities.games import make_game
from lostcities.perf.step import TrainingStep
from lostcities.teacher.games import load_games
from lostcities.teacher.student import train_student

IDENTITY_KEYS = ("game", "encoding_size", "num_actions", "network", "seed")
AGENT_KEYS = ("iteration", "network", "policy_net", "advantage_nets", "iteration_advantage_nets")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="the blueprint's training checkpoint or agent file")
    parser.add_argument("data", nargs="+", help="teacher data files (teacher/round_RR.npz)")
    parser.add_argument("--out", required=True, help="directory of the students' agent files")
    parser.add_argument("--arms", default="search:fresh,move:fresh,search:continued")
    parser.add_argument("--passes", type=float, default=TeacherConfig().passes)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    state = load_checkpoint(args.checkpoint, required=("config",))
    agent = state.get("agent") or {k: state["trainer"][k] for k in AGENT_KEYS}
    network = NetworkConfig(**agent["network"])
    seed = int(state["seed"])
    game = make_game(GameConfig())
    games = [g for path in args.data for g in load_games(path)]
    decisions = sum(len(g.masks) for g in games)
    print(f"{len(games)} games, {decisions} decisions")
    step = TrainingStep(AmpConfig(), None, network, torch.device("cpu"), grad_clip=1.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for arm in args.arms.split(","):
        target, start = arm.split(":")
        cfg = replace(TeacherConfig(), target=target, student=start, passes=args.passes)
        began = time.perf_counter()
        weights, loss, steps = train_student(
            game, network, seed, 1, agent["policy_net"], games, cfg, step, torch.device("cpu")
        )  # round 1's student, as the stage makes it
        identity = {k: state[k] for k in IDENTITY_KEYS}
        path = out / f"{target}_{start}.pt"
        save_checkpoint(
            path, {**identity, "agent": {**agent, "policy_net": weights}, "config": state["config"]}
        )
        print(
            f"{arm}: loss {loss:.4f}, {steps} steps, {time.perf_counter() - began:.0f} s -> {path}"
        )


if __name__ == "__main__":
    main()
