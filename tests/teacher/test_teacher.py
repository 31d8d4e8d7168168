"""Search as the teacher: teacher games keyed by game ID (the same data for 1 and 2
workers and Ray under determinism=strict), the targets a decision teaches, and the stage
end to end on a tiny budget: a round checked, played, learned and gated, the stop line of
a teacher that does not beat its blueprint, and the stage on a finished run's
checkpoint."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest
from conftest import LOST_CITIES_TINY, train_run

from lostcities.cfr.executors import InlineExecutor, run_all
from lostcities.cfr.executors.processes import ProcessExecutor
from lostcities.cfr.executors.scheduler import describe_ids
from lostcities.cfr.executors.tasks import TaskPayload
from lostcities.cfr.networks import build_network
from lostcities.cfr.traversal import TraversalSpec
from lostcities.config import DeterminismConfig, GameConfig, NetworkConfig, TraversalConfig
from lostcities.eval.agents import agents_from_checkpoint
from lostcities.eval.search import SearchConfig
from lostcities.games import lost_cities_spec as spec
from lostcities.teacher.games import TASK, TeacherGame, TeacherGameId, load_games, save_games
from lostcities.teacher.student import teacher_targets

STRICT = DeterminismConfig(name="strict", torch_deterministic=True, batch_invariant_inference=True)
NETWORK = NetworkConfig(name="small", hidden=32, layers=2)
FIELDS = ("states", "masks", "players", "candidates", "means", "errors", "prior", "played")


def teacher_payload(redeals: int = 3) -> TaskPayload:
    net = build_network(NETWORK, spec.ENCODING_SIZE, spec.NUM_ACTIONS, seed=7)
    return TaskPayload(
        TASK,
        {
            "network": asdict(NETWORK),
            "weights": {k: v.detach().numpy() for k, v in net.state_dict().items()},
            "search": asdict(SearchConfig(determinizations=redeals, candidates=3, seed=11)),
            "seed": 5,
            "max_turns": spec.DEFAULT_MAX_TURNS,
            "batch_invariant": True,
        },
    )


def traversal_spec() -> TraversalSpec:
    return TraversalSpec(GameConfig(), NETWORK, TraversalConfig(), 0, STRICT)


def assert_same_games(a: list[TeacherGame], b: list[TeacherGame]) -> None:
    assert [g.id for g in a] == [g.id for g in b]
    for x, y in zip(a, b, strict=True):
        assert x.scores == y.scores
        for name in FIELDS:
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)


@pytest.fixture(scope="module")
def inline_games() -> list[TeacherGame]:
    ids = [TeacherGameId(1, k) for k in range(5)]
    with InlineExecutor(traversal_spec()) as inline:
        return run_all(inline, ids, teacher_payload())


def test_teacher_games_record_every_decision(inline_games):
    for game in inline_games:
        n = len(game.masks)
        assert n > 40  # a Lost Cities game is ~90 decisions
        assert game.states.shape == (n, 64) and game.candidates.shape == (n, 3)
        rows = np.arange(n)
        played = game.candidates[rows, game.played]
        assert (played >= 0).all()
        assert game.masks[rows, played].all()  # the played move was legal
        tried = game.candidates >= 0
        assert (game.masks[rows[:, None].repeat(3, 1)[tried], game.candidates[tried]] == 1).all()
        assert ((game.errors > 0) | ~tried | (tried.sum(axis=1, keepdims=True) == 1)).any()
    # different deals: the games differ
    assert len({g.scores for g in inline_games}) > 1


def test_teacher_data_does_not_depend_on_the_worker_count(inline_games):
    ids = [g.id for g in inline_games]
    for workers, chunk in ((1, 0), (2, 1)):
        with ProcessExecutor(traversal_spec(), num_workers=workers, chunk_size=chunk) as pool:
            assert_same_games(inline_games, run_all(pool, ids, teacher_payload()))


def test_teacher_data_on_ray_equals_inline(inline_games):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    from lostcities.cfr.executors.ray_actors import RayExecutor

    ids = [g.id for g in inline_games]
    with RayExecutor(traversal_spec(), num_workers=2, chunk_size=2) as ray_pool:
        assert_same_games(inline_games, run_all(ray_pool, ids, teacher_payload()))


def test_saved_games_load_as_they_were(inline_games, tmp_path):
    path = save_games(tmp_path / "round_01.npz", inline_games)
    assert not list(tmp_path.glob("*.tmp"))
    assert_same_games(inline_games, load_games(path))
    (tmp_path / "bad.npz").write_bytes(b"not a file")
    with pytest.raises(ValueError, match="bad.npz: not a teacher data file"):
        load_games(tmp_path / "bad.npz")


def test_a_chunk_of_teacher_games_is_named_by_its_ids():
    ids = [TeacherGameId(2, k) for k in range(3)]
    assert describe_ids(ids) == "teacher game IDs (2, 0)..(2, 2) (3 IDs)"


def test_targets_move_and_search():
    game = TeacherGame(
        TeacherGameId(1, 0),
        states=np.zeros((2, 64), dtype=np.uint8),
        masks=np.zeros((2, 106), dtype=np.uint8),
        players=np.zeros(2, dtype=np.int8),
        candidates=np.array([[4, 9, 2], [7, -1, -1]], dtype=np.int16),
        means=np.array([[1.0, 3.0, -2.0], [0.0, 0.0, 0.0]], dtype=np.float32),
        errors=np.zeros((2, 3), dtype=np.float32),
        prior=np.array([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0]], dtype=np.float32),
        played=np.array([1, 0], dtype=np.int8),
        scores=(0, 0),
    )
    move = teacher_targets([game], "move", 1.0, 0.0)
    assert move[0, 9] == 1 and move[0].sum() == 1 and move[1, 7] == 1 and move[1].sum() == 1
    search = teacher_targets([game], "search", 2.0, 2.0)
    logits = (np.array([1.0, 3.0, -2.0]) + 2.0 * np.log([0.5, 0.25, 0.25])) / 2.0
    expected = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(search[0, [4, 9, 2]], expected, rtol=1e-6)
    assert search[0].sum() == pytest.approx(1.0) and np.count_nonzero(search[0]) == 3
    assert search[1, 7] == 1 and search[1].sum() == 1  # one candidate: that move
    # the prior moves mass towards the blueprint's move; without it the best mean leads
    plain = teacher_targets([game], "search", 2.0, 0.0)
    assert plain[0, 9] > search[0, 9] and plain[0, 4] < search[0, 4]


TEACHER_TINY = [
    "+teacher=search",
    "teacher.rounds=1",
    "teacher.games=4",
    "teacher.redeals=4",
    "teacher.check_games=8",
    "teacher.gate_games=8",
    "teacher.passes=2",
]


def test_a_round_end_to_end(tmp_path):
    rows = train_run([*LOST_CITIES_TINY, *TEACHER_TINY, "teacher.gate_margin=0"], tmp_path)
    (teacher,) = [r for r in rows if "teacher/check/win_rate" in r]
    assert teacher["step"] == 3  # round 1 after the run's 2 iterations
    assert teacher["teacher/check/games"] == 8 and teacher["teacher/gate/games"] == 8
    data = load_games(tmp_path / "teacher" / "round_01.npz")
    assert [g.id for g in data] == [TeacherGameId(1, k) for k in range(4)]
    assert sum(len(g.masks) for g in data) == teacher["teacher/data_decisions"] > 4 * 40
    accepted = teacher["teacher/gate/win_rate"] > 0.5  # gate_margin 0
    assert teacher["teacher/accepted"] == float(accepted)
    assert (tmp_path / "student.pt").exists() == accepted
    if accepted:  # the student file plays like any agent file, its policy net the student
        agent = agents_from_checkpoint(tmp_path / "student.pt", ["policy"])["policy"]
        masks = np.zeros((1, spec.NUM_ACTIONS), dtype=np.uint8)
        masks[0, :3] = 1
        probs = agent.probs(np.zeros(1), np.zeros(1), np.zeros((1, spec.ENCODING_SIZE)), masks)
        assert probs[0, :3].sum() == pytest.approx(1.0)


def test_a_teacher_that_does_not_win_stops_the_stage(tmp_path, capsys):
    rows = train_run([*LOST_CITIES_TINY, *TEACHER_TINY, "teacher.gate_margin=1000"], tmp_path)
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("teacher stage stopped")]
    assert line.startswith("teacher stage stopped at round 1: the teacher won ")
    assert "teacher.gate_margin=1000" in line
    (teacher,) = [r for r in rows if "teacher/check/win_rate" in r]
    assert "teacher/data_decisions" not in teacher
    assert not (tmp_path / "teacher").exists() and not (tmp_path / "student.pt").exists()


def test_the_stage_runs_on_a_finished_runs_checkpoint(tmp_path, lost_cities_checkpoint):
    rows = train_run(
        [*LOST_CITIES_TINY, *TEACHER_TINY, f"run.resume={lost_cities_checkpoint}"], tmp_path
    )
    assert [r["step"] for r in rows if "teacher/check/win_rate" in r] == [3]
    # the finished run's two iterations, carried over from its metrics file, and no more
    assert [r["step"] for r in rows if "loss/advantage" in r] == [1, 2]


def test_a_checkpoint_from_before_a_network_option_resumes(tmp_path, lost_cities_checkpoint):
    """A checkpoint written before ``network.normalize_last`` existed was written with its
    default: it resumes (here into the teacher stage); a real mismatch still fails."""
    from lostcities.checkpoint import load_checkpoint, save_checkpoint

    state = load_checkpoint(lost_cities_checkpoint)
    del state["network"]["normalize_last"]
    old = tmp_path / "old.pt"
    save_checkpoint(old, state)
    rows = train_run([*LOST_CITIES_TINY, *TEACHER_TINY, f"run.resume={old}"], tmp_path / "run")
    assert [r["step"] for r in rows if "teacher/check/win_rate" in r] == [3]
    with pytest.raises(Exception, match="checkpoint is for network"):
        train_run(
            [*LOST_CITIES_TINY, f"run.resume={old}", "network.normalize_last=true"],
            tmp_path / "other",
        )


def test_the_stage_continues_after_its_finished_rounds(tmp_path, lost_cities_checkpoint):
    """Two rounds in one go, or one round and then the second in the same run directory:
    the same rounds, the same metrics; other settings in that directory fail in one line."""
    common = [*LOST_CITIES_TINY, *TEACHER_TINY, "teacher.gate_margin=0"]
    # 20 check games: this seed's second teacher passes its check, so round 2 plays whole
    common += ["teacher.check_games=20", f"run.resume={lost_cities_checkpoint}"]
    whole = train_run([*common, "teacher.rounds=2"], tmp_path / "whole")
    train_run([*common, "teacher.rounds=1"], tmp_path / "parts")
    parts = train_run([*common, "teacher.rounds=2"], tmp_path / "parts")

    def teacher_rows(rows):
        return [
            {k: v for k, v in r.items() if k.startswith("teacher/") and "seconds" not in k}
            for r in rows
            if "teacher/check/win_rate" in r
        ]

    assert len(teacher_rows(whole)) == 2 and "teacher/gate/win_rate" in teacher_rows(whole)[-1]
    assert teacher_rows(parts) == teacher_rows(whole)  # round 1's row logged again
    assert [r["step"] for r in parts] == [1, 2, 3, 4]  # one row per step
    assert_same_games(
        load_games(tmp_path / "whole" / "teacher" / "round_02.npz"),
        load_games(tmp_path / "parts" / "teacher" / "round_02.npz"),
    )
    with pytest.raises(ValueError, match=r"rounds.json: its rounds were played with other .*games"):
        train_run([*common, "teacher.rounds=3", "teacher.games=6"], tmp_path / "parts")
