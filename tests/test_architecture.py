"""The shape of the package: no import cycle anywhere, small modules, a runtime of few parts.

The import graph is grimp's (the library import-linter builds its contracts on): every import
counts, at module top, inside a function, or under ``TYPE_CHECKING``, since each one says the
importing module needs the other.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "proctor"


def _graph() -> dict[str, set[str]]:
    graph = grimp.build_graph("proctor", cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def import_cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (each a cycle), in import order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        # iterative Tarjan: (node, iterator over its successors)
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert import_cycles(edges) == [["a", "b", "c"]]
    assert import_cycles({"x": {"y"}, "y": set()}) == []


def test_no_import_cycle_between_any_two_modules() -> None:
    cycles = import_cycles(_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_runtime_is_a_few_parts_with_few_loose_modules() -> None:
    runtime = SRC / "runtime"
    loose = sorted(p.name for p in runtime.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 8, loose
    for part in (p for p in runtime.iterdir() if p.is_dir() and p.name != "__pycache__"):
        init = part / "__init__.py"
        assert init.is_file(), f"{part.name} is not a package"
        doc = init.read_text(encoding="utf-8")
        assert '"""' in doc and "import" in doc.lower(), f"{part.name}/__init__.py says nothing"


def test_modules_stay_small() -> None:
    """No module past 800 lines, and nine in ten at most 450: a module is split along a seam
    its docstring names, never to meet the number (STYLE.md, habit 4)."""
    sizes = {str(p.relative_to(SRC)): _lines(p) for p in SRC.rglob("*.py")}
    too_big = {name: n for name, n in sizes.items() if n > 800}
    assert not too_big, too_big
    p90 = statistics.quantiles(sorted(sizes.values()), n=10)[-1]
    assert p90 <= 450, p90


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("proctor.runtime.records.audit", "proctor.runtime.engine.session"),
        ("proctor.runtime.tools.fs", "proctor.runtime.admission.governor"),
        ("proctor.runtime.boundary.workspace", "proctor.runtime.tools.base"),
    ],
)
def test_the_contracts_refuse_an_upward_import(
    tmp_path: Path, importer: str, imported: str
) -> None:
    """A copy of the package with one forbidden import added breaks a contract."""
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "src"
    shutil.copytree(SRC, copy / "proctor", ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / Path(*importer.split(".")).with_suffix(".py")
    target.write_text(target.read_text(encoding="utf-8") + f"\nimport {imported}\n")
    shutil.copy(SRC.parents[1] / "pyproject.toml", tmp_path / "pyproject.toml")
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0, done.stdout
    assert "BROKEN" in done.stdout
