"""tests/model/test_model_layout.py - the CPU model's house: no import cycle, families that never import each other.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_layout.py -q

Imports are read from the source with ast, function-level imports included, so a cycle hidden
inside a function still counts.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "judge" / "model"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every judge.* module this file imports, at any depth (`from judge.x import y` counts judge.x.y
    when that is a module, else judge.x)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("judge")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("judge"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if _exists(sub) else node.module)
    return out


def _exists(mod: str) -> bool:
    p = ROOT.joinpath(*mod.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _graph() -> dict[str, set[str]]:
    files = sorted((ROOT / "judge").rglob("*.py"))
    return {_module_name(f): _imports(f) for f in files}


def test_no_module_of_the_model_is_on_an_import_cycle():
    g = _graph()
    edges = {m: {d for d in deps if d in g and d != m} for m, deps in g.items()}
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def visit(v):                       # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(comp)

    import sys
    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    # a package's __init__ importing its own submodules is how packages work: leave those edges out
    bad = []
    for comp in sccs:
        if len(comp) < 2 or not any(c.startswith("judge.model") for c in comp):
            continue
        inner = {c for c in comp}
        real = [(a, b) for a in comp for b in edges[a] & inner
                if not (b.startswith(a + ".") or a.startswith(b + "."))]
        if real:
            bad.append(sorted(comp))
    assert not bad, f"import cycles through judge.model: {bad}"


# A module that extends one family's instructions with more of the same family (its state, its descriptors,
# its ordering checks) may use that family's helpers, and only that family's: module -> (family, why).
EXTENDS = {"tcgen05_cp.py": ("judge.model.ops.tcgen05",
                             "tcgen05.cp writes the tcgen05 family's tensor memory, reads shared memory through the "
                             "same matrix descriptor as tcgen05.mma and is ordered by the same commits and fences")}


def test_instruction_families_never_import_each_other():
    fams = sorted(p for p in (MODEL / "ops").glob("*.py") if p.name not in ("__init__.py", "common.py"))
    assert len(fams) >= 10
    for f in fams:
        others = {i for i in _imports(f) if i.startswith("judge.model.ops.") and i != "judge.model.ops.common"}
        others -= {EXTENDS[f.name][0]} if f.name in EXTENDS else set()
        assert not others, f"{f.name} imports {others}: families use the state, checks, completion and scheduler only"


def test_a_family_extension_imports_its_family_and_is_imported_by_nobody():
    for name, (family, _why) in EXTENDS.items():
        assert family in _imports(MODEL / "ops" / name), f"{name} no longer uses {family}: drop it from EXTENDS"
        users = [p.name for p in (MODEL / "ops").glob("*.py") if f"judge.model.ops.{name[:-3]}" in _imports(p)]
        assert not users, f"{users} import {name}"


def test_the_engine_imports_no_family():
    for name in ("state", "checks", "completion", "scheduler", "registry", "errors", "ptx"):
        deps = _imports(MODEL / f"{name}.py")
        assert not {d for d in deps if d.startswith("judge.model.ops")}, f"judge.model.{name} imports a family"


@pytest.mark.parametrize("path", sorted(MODEL.rglob("*.py")), ids=lambda p: str(p.relative_to(MODEL)))
def test_every_module_and_public_function_has_a_docstring(path):
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree), f"{path} has no module docstring"
    missing = []
    for node in tree.body:
        methods = node.body if isinstance(node, ast.ClassDef) and not node.name.startswith("_") else []
        for n in [node] + methods:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_") \
                    and not ast.get_docstring(n):
                missing.append(n.name)
    assert not missing, f"{path}: no docstring on {missing}"


def test_no_two_inner_functions_of_a_family_share_the_name_run():
    for f in sorted((MODEL / "ops").glob("*.py")):
        names = [n.name for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.FunctionDef)]
        assert "run" not in names, f"{f.name}: name inner functions after what they do"
