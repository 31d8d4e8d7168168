"""House rules of the package, read from its source with ``ast`` (``nox -s lint`` runs this).

- Only the tracking module (``lostcities/tracking.py``, or a ``lostcities/tracking/``
  package) imports mlflow: one owner of the run store, and no mlflow import cost elsewhere.
- Only ``lostcities/checkpoint.py`` calls ``torch.save`` / ``torch.load``: one place that
  writes atomically and loads with ``weights_only=True``.
- The package's import graph has no cycle: every import counts, at module level or inside a
  function, absolute or relative, resolved to the package's own modules. A Cython kernel
  (.pyx) is a module others import; its own imports are not read (it is not Python).

Each checker takes a package directory, so the tests run it on crafted packages too and
see it report a violation. Standard library and pytest only: the lint session installs
nothing else, and nothing here imports the package.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lostcities"
TORCH_IO = frozenset(
    {"torch.save", "torch.load", "torch.serialization.save", "torch.serialization.load"}
)


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. lostcities.cfr.trainer; a package's __init__ is the package
    path: Path
    tree: ast.Module | None  # None: a Cython kernel (.pyx), a node with no imports read

    @property
    def package(self) -> str:
        """The package a relative import in this module starts from."""
        return self.name if self.path.stem == "__init__" else self.name.rpartition(".")[0]


def package_modules(root: Path) -> dict[str, Module]:
    """Every module under the package directory ``root`` by dotted name: its .py files,
    parsed, and its .pyx kernels, so that imports of a kernel resolve to it."""
    modules = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.pyx")]):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        tree = ast.parse(path.read_text(), str(path)) if path.suffix == ".py" else None
        modules[".".join(parts)] = Module(".".join(parts), path, tree)
    return modules


def _from_base(node: ast.ImportFrom, module: Module) -> str:
    """The absolute name ``from X import ...`` imports from (``from ..a import b`` in
    pkg.sub.c: pkg.a)."""
    if not node.level:
        return node.module or ""
    package = module.package.split(".")
    start = ".".join(package[: len(package) - node.level + 1])
    return f"{start}.{node.module}" if node.module else start


def imported_names(module: Module) -> list[tuple[str, int]]:
    """(absolute dotted name, line) of everything ``module`` imports, anywhere in it: for
    ``from a import b``, both ``a`` and ``a.b`` (b may be a module or an attribute)."""
    names = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, module)
            names.append((base, node.lineno))
            names += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return names


def _relative(module: Module, root: Path) -> str:
    return str(module.path.relative_to(root.parent))


def mlflow_imports(root: Path) -> list[str]:
    """``path:line`` of each mlflow import outside the package's tracking module."""
    tracking = f"{root.name}.tracking"
    found = []
    for module in package_modules(root).values():
        if module.tree is None or module.name == tracking:
            continue
        if module.name.startswith(f"{tracking}."):
            continue
        # importlib.import_module("mlflow") and __import__("mlflow") count as imports too
        bound = _bindings(module.tree)
        dynamic = [
            (node.args[0].value, node.lineno)
            for node in ast.walk(module.tree)
            if isinstance(node, ast.Call)
            and _dotted(node.func, bound) in ("importlib.import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ]
        lines = {
            line
            for name, line in [*imported_names(module), *dynamic]
            if name == "mlflow" or name.startswith("mlflow.")
        }
        found += [f"{_relative(module, root)}:{line}" for line in sorted(lines)]
    return found


def _bindings(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it is bound to by an import anywhere in the module
    (``import torch as th``: th -> torch; ``from torch import save``: save -> torch.save)."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:  # ``import a.b`` binds ``a``
                    top = alias.name.partition(".")[0]
                    bound[top] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """The dotted name an expression stands for (``th.save`` -> ``torch.save``), or None.
    An unbound name stands for itself (a builtin such as ``__import__``)."""
    if isinstance(node, ast.Name):
        return bound.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, bound)
        return None if base is None else f"{base}.{node.attr}"
    return None


def torch_io_uses(root: Path) -> list[str]:
    """``path:line`` of each use of torch.save / torch.load (called, or passed on) outside
    the package's checkpoint module."""
    checkpoint = f"{root.name}.checkpoint"
    found = []
    for module in package_modules(root).values():
        if module.tree is None or module.name == checkpoint:
            continue
        bound = _bindings(module.tree)
        lines = {
            node.lineno
            for node in ast.walk(module.tree)
            if isinstance(node, ast.Name | ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and _dotted(node, bound) in TORCH_IO
        }
        found += [f"{_relative(module, root)}:{line}" for line in sorted(lines)]
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports. ``from a import b`` is an import of the
    module ``a.b`` when there is one, else of ``a``; ``import a.b.c`` of the longest of
    a.b.c, a.b, a that is a module here."""
    modules = package_modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for module in modules.values():
        if module.tree is None:
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _from_base(node, module)
                members = [f"{base}.{alias.name}" for alias in node.names]
                targets = [name if name in modules else base for name in members]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module.name:
                    graph[module.name].add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (its modules in import order, the first repeated at the end) through each
    group of modules that import one another, the groups in name order."""
    cycles = []
    for group in _strongly_connected(graph):
        if len(group) < 2:
            continue
        start = min(group)
        # breadth first from start, inside the group, to the nearest module importing start
        parent: dict[str, str | None] = {start: None}
        frontier = [start]
        while not (closing := [m for m in frontier if start in graph[m]]):
            reached = []
            for m in frontier:
                for n in sorted(graph[m] & group):
                    if n not in parent:
                        parent[n] = m
                        reached.append(n)
            frontier = reached
        path = [closing[0]]
        while (previous := parent[path[-1]]) is not None:
            path.append(previous)
        cycles.append([*reversed(path), start])
    return sorted(cycles)


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


# --- the rules on the package ---------------------------------------------------------


def test_only_the_tracking_module_imports_mlflow():
    assert mlflow_imports(PACKAGE) == []


def test_only_the_checkpoint_module_calls_torch_save_or_load():
    assert torch_io_uses(PACKAGE) == []


def test_the_package_has_no_import_cycle():
    assert import_cycles(import_graph(PACKAGE)) == []


def test_the_import_graph_sees_the_package():
    # a graph of nothing would pass the cycle rule: check it holds known edges
    graph = import_graph(PACKAGE)
    assert "lostcities.cfr.trainer" in graph["lostcities.train"] | graph["lostcities.run"]
    assert "lostcities.rng" in graph["lostcities.cfr.trainer"]
    assert "lostcities.games._state" in graph["lostcities.games.small_game"]


# --- each rule can fail: crafted packages ---------------------------------------------


def write_package(root: Path, files: dict[str, str]) -> Path:
    """A package ``pkg`` under ``root`` with the given files (paths relative to it)."""
    package = root / "pkg"
    for name, source in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(source)
    return package


TRACKING_LAYOUTS = {
    "module": {"tracking.py": "import mlflow\n"},
    "package": {
        "tracking/__init__.py": "from mlflow import MlflowClient\n",
        "tracking/store.py": "def open():\n    import mlflow.entities\n",
    },
}


@pytest.mark.parametrize("layout", TRACKING_LAYOUTS)
def test_an_mlflow_import_outside_tracking_is_reported(tmp_path, layout):
    package = write_package(
        tmp_path,
        {
            **TRACKING_LAYOUTS[layout],
            "run.py": "def log():\n    from mlflow.entities import Metric\n",
            "eval/report.py": "from importlib import import_module\nml = import_module('mlflow')\n",
            "train.py": "import mlflow as ml\n",
            "clean.py": "import mlflowish\nfrom . import tracking\n",
        },
    )
    assert mlflow_imports(package) == ["pkg/eval/report.py:2", "pkg/run.py:2", "pkg/train.py:1"]


def test_torch_save_or_load_outside_checkpoint_is_reported(tmp_path):
    package = write_package(
        tmp_path,
        {
            "checkpoint.py": "import torch\ntorch.save({}, 'f')\ntorch.load('f')\n",
            "memory.py": "import torch\n\ndef dump(x):\n    torch.save(x, 'f')\n",
            "nets.py": "import torch as th\nweights = th.load('f', weights_only=True)\n",
            "io.py": "from torch import load as read\nread('f')\n",
            "pool.py": "import torch.serialization\nwrite = torch.serialization.save\n",
            "clean.py": "import numpy as np\nimport torch\nnp.load('f')\ntorch.ones(1)\n",
        },
    )
    assert torch_io_uses(package) == [
        "pkg/io.py:2",
        "pkg/memory.py:4",
        "pkg/nets.py:2",
        "pkg/pool.py:2",
    ]


def test_an_import_cycle_is_reported_with_its_modules(tmp_path):
    package = write_package(
        tmp_path,
        {
            # a -> b (module level) -> c (inside a function, relative) -> a
            "a.py": "from pkg import b\n",
            "b.py": "def make():\n    from .sub import c\n",
            "sub/__init__.py": "",
            "sub/c.py": "from ..a import thing\n",
            # x <-> y through ``import pkg.x`` and ``from pkg import y``
            "x.py": "from pkg import y\n",
            "y.py": "import pkg.x\n",
            # no cycle: a module importing its package's module, which imports nothing back
            "sub/d.py": "from pkg.sub import c\n",
        },
    )
    assert import_cycles(import_graph(package)) == [
        ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"],
        ["pkg.x", "pkg.y", "pkg.x"],
    ]


def test_a_package_without_cycles_reports_none(tmp_path):
    package = write_package(
        tmp_path,
        {
            "a.py": "from pkg import b\nfrom pkg.b import helper\n",
            "b.py": "from . import c, _kernel\n",
            "c.py": "import os\nimport pkg\n",
            "_kernel.pyx": "",  # a Cython kernel is a module: imports of it resolve to it
        },
    )
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.c", "pkg._kernel"}
    assert graph["pkg.c"] == {"pkg"}
    assert import_cycles(graph) == []
