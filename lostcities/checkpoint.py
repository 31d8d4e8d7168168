"""Checkpoint files: the only module that calls ``torch.save`` / ``torch.load``.

A checkpoint is one dict (nets, optimizers, memories, iteration, RNG states,
resolved config: whatever resume needs) written by :func:`save_checkpoint`
and read back by :func:`load_checkpoint`.

Safety: files are loaded with ``torch.load(weights_only=True)``, so loading
never runs pickled code, even from a file that did not come from us. The price
is a restricted payload, checked when saving (a bad value fails at save time,
naming its key, rather than at resume time): nested dict / list / tuple / set
of str, bytes, int, float, complex, bool, None, tensors, ``torch.dtype``,
``torch.device``. Numpy arrays are stored as tensors (they come back as
tensors: ``.numpy()`` gives the array back without a copy) and numpy scalars as
Python numbers.

Durability: the file is written to a temporary file in the same directory,
fsynced, and moved onto the target with ``os.replace`` (atomic on POSIX), so a
crash or a failed write leaves either the old checkpoint or the new one, never
a truncated file, and never deletes the previous checkpoint; a write that fails (a
full disk, a quota) raises :class:`CheckpointWriteError`, one line naming the file and
the cause. Ctrl-C and SIGTERM
are held back while the file is written (lostcities/interrupts.py): a write that
has begun finishes, and the interrupt then acts as if it came just after it.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

from lostcities.interrupts import deferred_interrupts

FORMAT = "lostcities-checkpoint"
"""Value of the ``format`` header key in every checkpoint."""
FORMAT_VERSION = 1
"""Bumped when the payload layout changes incompatibly."""
HEADER_KEYS = ("format", "version")

_NAME_RE = re.compile(r"^ckpt_(\d+)\.pt$")
# Scalars torch's weights_only unpickler accepts as they are.
_PLAIN = (str, bytes, int, float, complex, bool, type(None), torch.dtype, torch.device)


class CheckpointError(ValueError):
    """A checkpoint cannot be used. The message is one line naming the file and the problem."""


class CheckpointWriteError(OSError):
    """A checkpoint file could not be written (a full disk, a quota, a failing device); any
    earlier file at that path is untouched. ``str()`` is one line: the file and the cause
    (the OS error's text when one is behind it, e.g. torch's zip writer failing after an
    ``ENOSPC``)."""

    def __init__(self, path: str | os.PathLike[str], cause: BaseException) -> None:
        os_error = _os_error_in(cause)
        reason = os_error.strerror if os_error is not None and os_error.strerror else None
        super().__init__(
            None if os_error is None else os_error.errno, reason or _one_line(cause), str(path)
        )

    def __str__(self) -> str:
        return f"could not write {self.filename} ({self.strerror})"


def checkpoint_path(directory: str | os.PathLike[str], iteration: int) -> Path:
    """Canonical file name of the checkpoint taken after ``iteration`` (``ckpt_000012.pt``)."""
    return Path(directory) / f"ckpt_{iteration:06d}.pt"


def latest_checkpoint(directory: str | os.PathLike[str]) -> Path | None:
    """The checkpoint of the highest iteration in ``directory``, or None if it holds none.

    Only names written by :func:`checkpoint_path` count (temporary files of an
    interrupted save and unrelated files are ignored). Ordering by the
    iteration in the name, not by mtime, keeps it right after files are copied.
    """
    found = _checkpoints(directory)
    return found[-1] if found else None


def prune_checkpoints(directory: str | os.PathLike[str], keep: int) -> list[Path]:
    """Delete all but the ``keep`` highest-iteration checkpoints in ``directory``; return
    the deleted paths, oldest first.

    Same rules as :func:`latest_checkpoint`: only ``ckpt_<iteration>.pt`` names count,
    ordered by the iteration in the name (not mtime); other files are left alone.
    ``keep=0`` keeps all (deletes nothing). A missing directory deletes nothing.
    Raises ``ValueError`` for a negative ``keep``.
    """
    if keep < 0:
        raise ValueError(f"{directory}: checkpoint.keep must be >= 0 (0 keeps all), got {keep}")
    found = _checkpoints(directory)
    doomed = found[:-keep] if keep else []
    for path in doomed:
        path.unlink(missing_ok=True)  # gone already (a concurrent prune): nothing to do
    return doomed


def _checkpoints(directory: str | os.PathLike[str]) -> list[Path]:
    """The files named by :func:`checkpoint_path` in ``directory``, lowest iteration first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in directory.iterdir()
        if (m := _NAME_RE.match(p.name)) and p.is_file()
    ]
    return [p for _, p in sorted(found)]


def save_checkpoint(path: str | os.PathLike[str], payload: Mapping[str, object]) -> None:
    """Atomically write ``payload`` (plus the format header) to ``path``.

    Creates the parent directory. Raises ``TypeError`` naming the key of any
    value that ``torch.load(weights_only=True)`` could not read back, before
    anything is written; ``ValueError`` if the payload uses a header key.
    """
    path = Path(path)
    clash = [k for k in HEADER_KEYS if k in payload]
    if clash:
        raise ValueError(f"checkpoint payload must not use the header keys {clash}")
    data: dict[str, object] = {"format": FORMAT, "version": FORMAT_VERSION}
    data.update(_safe(dict(payload), "payload"))  # type: ignore[arg-type]

    write_atomically(path, lambda f: torch.save(data, f))


def write_atomically(path: str | os.PathLike[str], write: Callable[[BinaryIO], None]) -> None:
    """Write a file of the run atomically: ``write(f)`` fills a temporary file beside
    ``path`` (parent created), which is fsynced and then renamed over ``path``, so a reader
    sees the old file or the whole new one; a failure removes the temporary file and an
    OSError becomes :class:`CheckpointWriteError` (a run ends on it in one line). Ctrl-C
    waits until the file is written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Same directory as the target: os.replace is only atomic within one file system.
    with deferred_interrupts():  # an interrupt inside torch.save's zip writer breaks it
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())  # the bytes are on disk before the rename makes them visible
            os.replace(tmp_name, path)
        except BaseException as e:
            # Never leave a half-written temp file behind.
            Path(tmp_name).unlink(missing_ok=True)
            if isinstance(e, OSError | RuntimeError):  # RuntimeError: torch's zip writer
                raise CheckpointWriteError(path, e) from None
            raise
        _fsync_directory(path.parent)


def _read_checked_header(
    path: str | os.PathLike[str], name: str, map_location: str | torch.device | None
) -> dict:
    """The file's whole dict, after checking that it is a lostcities checkpoint of this
    format version (CheckpointError, one line, otherwise)."""
    # Opening first separates "no such file" from "bad contents": torch.load on a
    # truncated file can itself raise OSError (a seek past the start: EINVAL).
    try:
        f = open(path, "rb")  # closed by the with below
    except FileNotFoundError:
        raise CheckpointError(f"{name}: checkpoint file not found") from None
    except OSError as e:
        raise CheckpointError(f"{name}: cannot read checkpoint file ({e.strerror or e})") from e
    with f:
        try:
            data = torch.load(f, map_location=map_location, weights_only=True)
        except Exception as e:
            # A damaged file can fail with almost anything (RuntimeError from the zip
            # reader, UnpicklingError, EOFError, OSError or ValueError on a bad seek);
            # they all mean the same thing to the caller.
            raise CheckpointError(
                f"{name}: not a readable checkpoint (corrupt, truncated, or not written by "
                f"save_checkpoint): {_one_line(e)}"
            ) from e

    if not isinstance(data, dict):
        raise CheckpointError(
            f"{name}: not a lostcities checkpoint (holds a {type(data).__name__}, not a dict)"
        )
    if data.get("format") != FORMAT:
        found = f"format {data['format']!r}" if "format" in data else "no format header"
        raise CheckpointError(f"{name}: not a lostcities checkpoint ({found}, expected {FORMAT!r})")
    if data.get("version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{name}: checkpoint format version {data.get('version')!r}, "
            f"this code reads version {FORMAT_VERSION}"
        )
    return data


def load_checkpoint(
    path: str | os.PathLike[str],
    expect: Mapping[str, object] | None = None,
    *,
    required: Iterable[str] = (),
    map_location: str | torch.device | None = "cpu",
) -> dict[str, object]:
    """Read a checkpoint written by :func:`save_checkpoint`; return its payload (no header).

    ``expect``: top-level metadata the caller needs to match, e.g.
    ``{"game": "leduc", "encoding_size": 30}`` (compared with ``==``; a missing
    key is an error too). ``required``: further top-level keys that must exist.
    ``map_location``: where tensors go (CPU by default; the caller moves nets to
    its device).

    Raises :class:`CheckpointError` with a one-line message naming the file for a
    missing or unreadable file, a corrupt / truncated / non-torch file, a wrong
    format header or version, missing keys and ``expect`` mismatches.
    """
    name = str(path)
    data = _read_checked_header(path, name, map_location)
    payload = {k: v for k, v in data.items() if k not in HEADER_KEYS}

    expect = dict(expect or {})
    missing = [k for k in (*required, *expect) if k not in payload]
    if missing:
        raise CheckpointError(f"{name}: checkpoint lacks required keys {sorted(set(missing))}")
    wrong = [
        f"checkpoint is for {k} {payload[k]!r}, expected {v!r}"
        for k, v in expect.items()
        if not _equal(payload[k], v)
    ]
    if wrong:
        raise CheckpointError(f"{name}: " + "; ".join(wrong))
    return payload


def _os_error_in(error: BaseException) -> OSError | None:
    """The first OSError in ``error``'s chain (itself, then what it was raised from or
    while handling), or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _safe(value: object, where: str) -> object:
    """Return ``value`` with numpy converted to torch / Python; TypeError if not loadable.

    Exact types only: a subclass (an IntEnum, a namedtuple, a DictConfig) would be
    pickled by class and then refused by the weights_only loader at resume time.
    """
    kind = type(value)
    if kind in _PLAIN or kind in (torch.Tensor, torch.nn.Parameter, torch.Size):
        return value
    if kind is np.ndarray:
        if value.dtype == object:
            raise TypeError(f"{where}: numpy arrays of Python objects cannot go in a checkpoint")
        if not (value.flags.writeable and value.flags.c_contiguous):
            value = np.ascontiguousarray(value).copy()  # from_numpy needs a plain writable buffer
        return torch.from_numpy(value)
    if isinstance(value, np.generic):
        return value.item()
    if kind in (dict, OrderedDict):
        out = kind()
        for k, v in value.items():
            if type(k) not in (str, int):
                raise TypeError(f"{where}: key {k!r} is not a str or int")
            out[k] = _safe(v, f"{where}[{k!r}]")
        return out
    if kind in (list, tuple, set):
        return kind(_safe(v, f"{where}[{i}]") for i, v in enumerate(value))
    raise TypeError(
        f"{where}: {kind.__name__} cannot be stored in a checkpoint (use tensors, numpy "
        "arrays and plain dict/list/tuple/str/int/float/bool/None, e.g. module.state_dict())"
    )


def _equal(actual: object, expected: object) -> bool:
    try:
        return bool(actual == expected)
    except Exception:  # e.g. a tensor compared with a list: ambiguous, so not a match
        return False


def _one_line(e: BaseException) -> str:
    """First sentence of an exception message, short enough for a one-line error."""
    text = " ".join(str(e).split())
    unsafe = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if unsafe:  # torch's weights_only refusal is a page long; the class is what matters
        return f"it pickles code ({unsafe.group(1)}), which weights_only loading refuses"
    text = text.split(". ", 1)[0]
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable (POSIX); a no-op where directories can't be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
