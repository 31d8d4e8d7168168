"""Checkpoints: round trip, atomic writes, and one-line errors for every bad file."""

from __future__ import annotations

import os
import signal
from collections import OrderedDict
from enum import IntEnum

import numpy as np
import pytest
import torch

from lostcities import checkpoint as ckpt_mod
from lostcities.checkpoint import (
    CheckpointError,
    checkpoint_path,
    latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)


def payload() -> dict:
    net = torch.nn.Linear(4, 3)
    opt = torch.optim.Adam(net.parameters())
    net(torch.ones(2, 4)).sum().backward()
    opt.step()
    return {
        "game": "leduc",
        "encoding_size": 30,
        "iteration": 12,
        "nets": {"advantage": [net.state_dict()]},
        "optimizers": {"advantage": [opt.state_dict()]},
        "memory": {"features": np.arange(12, dtype=np.float32).reshape(3, 4), "count": np.int64(3)},
        "rng": {"torch": torch.get_rng_state(), "stream": 2**64 - 1},
        "config": {"game": {"name": "leduc"}, "eval": {"opponents": ["random"]}},
    }


def one_line_error(path, expect=None, **kwargs) -> str:
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path, expect, **kwargs)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return message


def test_round_trip(tmp_path):
    path = tmp_path / "ckpt.pt"
    original = payload()
    save_checkpoint(path, original)
    loaded = load_checkpoint(path, expect={"game": "leduc", "encoding_size": 30})
    assert set(loaded) == set(original)  # the header is not part of the payload
    assert loaded["iteration"] == 12 and loaded["rng"]["stream"] == 2**64 - 1
    state = loaded["nets"]["advantage"][0]
    assert isinstance(state, OrderedDict)
    for key, tensor in original["nets"]["advantage"][0].items():
        assert torch.equal(state[key], tensor)
    net = torch.nn.Linear(4, 3)
    net.load_state_dict(state)
    opt = torch.optim.Adam(net.parameters())
    opt.load_state_dict(loaded["optimizers"]["advantage"][0])
    # numpy arrays come back as tensors (.numpy() without a copy), numpy scalars as Python.
    assert np.array_equal(loaded["memory"]["features"].numpy(), original["memory"]["features"])
    assert loaded["memory"]["count"] == 3 and type(loaded["memory"]["count"]) is int
    assert torch.equal(loaded["rng"]["torch"], original["rng"]["torch"])
    assert loaded["config"] == original["config"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


def test_save_creates_directory_and_converts_views(tmp_path):
    path = tmp_path / "a" / "b" / "ckpt.pt"
    view = np.arange(10)[::-2]  # negative strides: not something torch.from_numpy takes
    save_checkpoint(path, {"v": view})
    assert load_checkpoint(path)["v"].tolist() == view.tolist()


class Color(IntEnum):
    RED = 0


@pytest.mark.parametrize(
    "bad, where",
    [
        ({"net": torch.nn.Linear(2, 2)}, "payload['net']"),
        ({"deep": {"x": [1, object()]}}, "payload['deep']['x'][1]"),
        ({"enum": Color.RED}, "payload['enum']"),
        ({"arr": np.array([object()])}, "payload['arr']"),
        ({"key": {(1, 2): 3}}, "payload['key']"),
    ],
)
def test_unloadable_values_fail_at_save_naming_the_key(tmp_path, bad, where):
    path = tmp_path / "ckpt.pt"
    with pytest.raises(TypeError) as info:
        save_checkpoint(path, bad)
    assert str(info.value).startswith(where)
    assert list(tmp_path.iterdir()) == []


def test_header_keys_are_reserved(tmp_path):
    with pytest.raises(ValueError, match="header"):
        save_checkpoint(tmp_path / "ckpt.pt", {"version": 3})


def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"iteration": 1})
    before = path.read_bytes()

    def crash_midway(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash_midway)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"iteration": 2})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert load_checkpoint(path)["iteration"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temp file left


def test_ctrl_c_during_the_write_waits_for_it(tmp_path, monkeypatch):
    # CI saw SIGTERM land inside torch.save's zip writer: the writer's clean-up then
    # failed with a RuntimeError that hid the interrupt, and the checkpoint was lost.
    path = tmp_path / "ckpt.pt"
    real_save = torch.save

    def interrupted_midway(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04")
        f.seek(0)
        signal.raise_signal(signal.SIGINT)  # without the deferral: KeyboardInterrupt here
        real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", interrupted_midway)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, payload())
    monkeypatch.undo()
    assert load_checkpoint(path)["iteration"] == payload()["iteration"]  # written in full
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]


def test_overwrite_replaces(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"iteration": 1})
    save_checkpoint(path, {"iteration": 2})
    assert load_checkpoint(path)["iteration"] == 2


def test_missing_file(tmp_path):
    assert "not found" in one_line_error(tmp_path / "nope.pt")


def test_directory_instead_of_file(tmp_path):
    assert "cannot read" in one_line_error(tmp_path)


@pytest.mark.parametrize("content", [b"", b"garbage" * 50, b"PK\x03\x04" + b"\0" * 40])
def test_not_a_torch_file(tmp_path, content):
    path = tmp_path / "ckpt.pt"
    path.write_bytes(content)
    assert "not a readable checkpoint" in one_line_error(path)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, 0.999])
def test_truncated(tmp_path, keep):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, payload())
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    assert "not a readable checkpoint" in one_line_error(path)


def test_flipped_bytes(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, payload())
    data = bytearray(path.read_bytes())
    for i in range(0, len(data), 97):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    one_line_error(path)


# Files that torch reads but that save_checkpoint did not write: made with torch.save
# directly, which only this test module (besides checkpoint.py) does.


def test_pickled_code_is_refused(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"format": "lostcities-checkpoint", "version": 1, "obj": Color.RED}, path)
    assert "not a readable checkpoint" in one_line_error(path)


def test_not_a_dict(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save([1, 2], path)
    assert "holds a list" in one_line_error(path)


def test_no_header(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"nets": {}}, path)
    assert "no format header" in one_line_error(path)


def test_wrong_format(tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"format": "something-else", "version": 1}, path)
    assert "format 'something-else'" in one_line_error(path)


def test_wrong_version(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    monkeypatch.setattr(ckpt_mod, "FORMAT_VERSION", 2)
    save_checkpoint(path, {"iteration": 1})
    monkeypatch.undo()
    assert one_line_error(path) == f"{path}: checkpoint format version 2, this code reads version 1"


def test_expect_mismatch(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"game": "kuhn", "encoding_size": 30})
    message = one_line_error(path, {"game": "leduc", "encoding_size": 30})
    assert message == f"{path}: checkpoint is for game 'kuhn', expected 'leduc'"
    message = one_line_error(path, {"game": "leduc", "encoding_size": 31})
    assert message.count("expected") == 2


def test_missing_keys(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"game": "kuhn"})
    message = one_line_error(path, {"encoding_size": 30}, required=["nets"])
    assert message == f"{path}: checkpoint lacks required keys ['encoding_size', 'nets']"


def test_latest_checkpoint(tmp_path):
    assert latest_checkpoint(tmp_path / "absent") is None
    assert latest_checkpoint(tmp_path) is None
    for it in (2, 10, 9):
        save_checkpoint(checkpoint_path(tmp_path, it), {"iteration": it})
    (tmp_path / ".ckpt_000099.pt.abc.tmp").write_bytes(b"")  # an interrupted save
    (tmp_path / "notes.pt").write_bytes(b"")
    assert latest_checkpoint(tmp_path) == tmp_path / "ckpt_000010.pt"
    assert checkpoint_path(tmp_path, 10).name == "ckpt_000010.pt"


def write_checkpoints(directory, iterations):
    """Checkpoints whose mtimes run against their iterations: the first listed is oldest."""
    for i, it in enumerate(iterations):
        path = checkpoint_path(directory, it)
        save_checkpoint(path, {"iteration": it})
        os.utime(path, (1_000_000 + i, 1_000_000 + i))


def test_prune_keeps_the_newest_by_iteration_not_mtime(tmp_path):
    # 2_000_000 outgrows the 6-digit padding: as strings, ckpt_2000000 < ckpt_300000
    write_checkpoints(tmp_path, [2_000_000, 300_000, 20, 9, 3])
    (tmp_path / ".ckpt_000099.pt.abc.tmp").write_bytes(b"")  # an interrupted save
    (tmp_path / "agent.pt").write_bytes(b"")
    (tmp_path / "ckpt_latest.pt").write_bytes(b"")
    deleted = prune_checkpoints(tmp_path, keep=2)
    assert [p.name for p in deleted] == ["ckpt_000003.pt", "ckpt_000009.pt", "ckpt_000020.pt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".ckpt_000099.pt.abc.tmp",
        "agent.pt",
        "ckpt_2000000.pt",
        "ckpt_300000.pt",
        "ckpt_latest.pt",
    ]
    assert latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, 2_000_000)
    assert prune_checkpoints(tmp_path, keep=2) == []  # nothing left to delete
    assert prune_checkpoints(tmp_path, keep=5) == []  # fewer than keep: all stay


def test_prune_keep_zero_keeps_all(tmp_path):
    write_checkpoints(tmp_path, [1, 2, 3])
    assert prune_checkpoints(tmp_path, keep=0) == []
    assert len(list(tmp_path.iterdir())) == 3
    assert prune_checkpoints(tmp_path / "absent", keep=1) == []


def test_prune_rejects_negative_keep(tmp_path):
    write_checkpoints(tmp_path, [1, 2])
    with pytest.raises(ValueError, match="keep must be >= 0"):
        prune_checkpoints(tmp_path, keep=-1)
    assert len(list(tmp_path.iterdir())) == 2
