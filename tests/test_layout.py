"""The package's shape (docs/architecture.md): imports follow the flow model → adapter →
kernel → ledger → result, and no module imports one that imports it back."""

import ast
import os
import subprocess
import sys

from pathlib import Path

import pymc_dp

PACKAGE = Path(pymc_dp.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Every pymc_dp module, and the pymc_dp modules it imports anywhere in its body (also
    inside functions: a deferred import is still a dependency)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found |= {t for t in targets if t in modules and t != name}
        graph[name] = found
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return groups


def test_no_module_imports_one_that_imports_it_back():
    assert _cycles(_imports()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _outside(graph, package: str, allowed: tuple[str, ...]) -> dict[str, set[str]]:
    return {
        m: {t for t in deps if not t.startswith(allowed)}
        for m, deps in graph.items() if m.startswith(package)
        and {t for t in deps if not t.startswith(allowed)}
    }


def test_kernels_know_nothing_of_pymc_or_the_accounting():
    # (the kernels are the algorithms' math; steps wire them to PyMC and the ledger)
    graph = _imports()
    assert _outside(graph, "pymc_dp.kernels", ("pymc_dp.kernels", "pymc_dp.validation")) == {}


def test_the_accounting_imports_no_sampler():
    graph = _imports()
    allowed = ("pymc_dp.accounting", "pymc_dp.validation", "pymc_dp.errors", "pymc_dp.kernels")
    assert _outside(graph, "pymc_dp.accounting", allowed) == {}


def test_nothing_in_the_package_imports_the_testing_tools():
    graph = _imports()
    users = {m for m, deps in graph.items()
             if not m.startswith("pymc_dp.testing") and any(d.startswith("pymc_dp.testing")
                                                             for d in deps)}
    assert users == set()


def test_the_plots_are_optional():
    # pymc_dp.plots (matplotlib, the plots extra) is imported by no other module of the
    # package, and no other module imports matplotlib
    graph = _imports()
    assert {m for m, deps in graph.items() if "pymc_dp.plots" in deps} == set()
    plotting = set()
    for path in PACKAGE.rglob("*.py"):
        if _module_name(path) == "pymc_dp.plots":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] in ("matplotlib", "arviz_plots") for n in names):
                plotting.add(_module_name(path))
    assert plotting == set()


def test_import_pymc_dp_imports_no_plotting_library():
    # (arviz 1.3 imports arviz_plots and with it matplotlib where installed: pymc_dp imports
    # arviz only where it uses it)
    code = ("import sys, pymc_dp\n"
            "print(sorted(m for m in ('matplotlib', 'arviz_plots', 'pymc_dp.plots') "
            "if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PACKAGE.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]"
