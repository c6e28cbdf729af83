"""judge/draw/house.py - the engine's house: its wings, their layers, and the imports between them.

    python -m judge.draw.house      # writes docs/house.png (the picture) and docs/house.json (what it drew)

Every import statement anywhere in a module counts, those inside functions included (read from the
AST, nothing is imported). The wings are the folders of judge/; the modules at the top of judge/ are
the wing "top" (judge itself, __main__, cli), except config, the floor everything stands on.
LAYERS orders the wings from the floor up: a module may import its own wing and the wings below it.
tests/test_house.py holds the code to that, to no cycle between modules, and docs/house.json to the code.

reaches() lists where the engine could reach outside itself: an import of the course's chapters or exercises,
a call that loads code by a name or a path chosen at run time, an edit of sys.path. The test allows the last
two only at the grading wing's plugin loader and the few places it names, and the first nowhere.
"""
from __future__ import annotations

import ast
import json
import sys
from collections import Counter
from pathlib import Path

from judge import config

PACKAGE = config.ROOT / "judge"
#: the wings from the floor up: each may import those before it, never those after it
LAYERS = ["config", "hw", "draw", "model", "gpu", "grading", "record", "top"]
JOBS = {"config": "every default", "hw": "hardware rules in Python", "draw": "timelines, tables, this picture",
        "model": "the CPU model of the machine", "gpu": "build, launch, time", "grading": "exercises and verdicts",
        "record": "the Hopper record", "top": "judge, cli, __main__"}
DOCS = config.ROOT / "docs"


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package."""
    out = {}
    for p in sorted(package.rglob("*.py")):
        parts = list(p.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere (function level included). `from a import b`
    counts as importing a.b when a.b is a module, else a; relative imports are resolved."""
    mods = modules(package)
    root = package.name
    out = {}
    for name, path in mods.items():
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    deps.add(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base)
        out[name] = {d for d in deps if d in mods and d != name and d.split(".")[0] == root}
    return out


#: calls that load code by a name or a path chosen at run time
LOADERS = ("import_module", "__import__", "spec_from_file_location", "run_path", "run_module", "SourceFileLoader",
           "load_source", "import_file", "exec")
#: the course's folders beside the engine, which it never imports
OUTSIDE = ("chapters", "exercises")


def _called(func) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_sys_path(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
            and node.value.id == "sys")


def reaches(package: Path = PACKAGE) -> list[dict]:
    """Every place a module of the package imports chapters/ or exercises/ ("import"), calls a loader of
    LOADERS ("load"; "args": its arguments' source) or edits sys.path ("sys.path"): module, function (the
    innermost def around it, or "<module>"), line, kind, text."""
    out = []
    for mod, path in modules(package).items():
        def visit(node, where):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                where = node.name
            hit = None
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.split(".")[0] in OUTSIDE]
                hit = ("import", f"import {', '.join(names)}") if names else None
            elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in OUTSIDE:
                hit = ("import", f"from {node.module} import {', '.join(a.name for a in node.names)}")
            elif isinstance(node, ast.Call) and _called(node.func) in LOADERS:
                args = ", ".join(ast.unparse(a) for a in [*node.args, *node.keywords])
                hit = ("load", f"{_called(node.func)}({args})")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_sys_path(node.func.value):
                hit = ("sys.path", f"sys.path.{node.func.attr}(...)")
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_is_sys_path(t) or (isinstance(t, ast.Subscript) and _is_sys_path(t.value)) for t in targets):
                    hit = ("sys.path", ast.unparse(node)[:120])
            if hit:
                out.append({"module": mod, "function": where, "line": node.lineno, "kind": hit[0], "text": hit[1]})
            for child in ast.iter_child_nodes(node):
                visit(child, where)
        visit(ast.parse(path.read_text(), str(path)), "<module>")
    return out


def wing_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return "config" if parts[-1] == "config" else "top"


def wing_graph(edges: dict[str, set[str]]) -> Counter:
    """(from wing, to wing) -> how many module imports go that way (within a wing not counted)."""
    return Counter((wing_of(a), wing_of(b)) for a, bs in edges.items() for b in bs if wing_of(a) != wing_of(b))


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Module imports that go from a lower wing to a higher one (against LAYERS)."""
    rank = {w: i for i, w in enumerate(LAYERS)}
    return sorted((a, b) for a, bs in edges.items() for b in bs if rank[wing_of(a)] < rank[wing_of(b)])


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: each strongly connected group of more than one module, sorted (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges) + 100))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def data(package: Path = PACKAGE) -> dict:
    """What the picture shows: the wings with their modules, and the imports between wings."""
    edges = imports(package)
    wings: dict[str, list[str]] = {w: [] for w in LAYERS}
    for m in sorted(edges):
        wings[wing_of(m)].append(m)
    return {"layers": LAYERS, "wings": wings,
            "imports": sorted([a, b, n] for (a, b), n in wing_graph(edges).items()),
            "upward": [list(e) for e in upward(edges)], "cycles": cycles(edges)}


def draw(d: dict | None = None):
    """The picture: one box per wing, floor at the bottom; an arrow per pair of wings that import, with
    the number of module imports; arrows against the layers in red."""
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    d = d or data()
    layers = d["layers"]
    fig = Figure(figsize=(9, 10))
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.6, len(layers) - 0.2)
    ax.axis("off")
    x = {w: 2.6 + 4.8 * (i % 2) for i, w in enumerate(layers)}          # zigzag, so arrows do not hide
    pos = {w: (x[w], i) for i, w in enumerate(layers)}
    for w, (cx, cy) in pos.items():
        n = len(d["wings"][w])
        ax.add_patch(FancyBboxPatch((cx - 1.7, cy - 0.28), 3.4, 0.56, boxstyle="round,pad=0.02",
                                    fc="#e8eef7" if w not in ("config", "top") else "#f2f2f2", ec="#34495e"))
        ax.text(cx, cy + 0.08, f"{w}/" if w not in ("config", "top") else w, ha="center", va="center",
                fontsize=11, weight="bold")
        ax.text(cx, cy - 0.14, f"{JOBS.get(w, '')} ({n} module{'s' if n != 1 else ''})", ha="center",
                va="center", fontsize=8)
    rank = {w: i for i, w in enumerate(layers)}
    for a, b, n in d["imports"]:
        if b == "config":
            continue                                      # everything stands on config: said once, below
        (x0, y0), (x1, y1) = pos[a], pos[b]
        up = rank[a] < rank[b]
        bend = 0.25 if up else -0.15
        ax.add_patch(FancyArrowPatch((x0, y0 - 0.28 if not up else y0 + 0.28), (x1, y1 + 0.28 if not up else y1 - 0.28),
                                     connectionstyle=f"arc3,rad={bend}", arrowstyle="-|>", mutation_scale=12,
                                     color="#c0392b" if up else "#7f8c8d", lw=1.0 + min(n, 12) / 6))
        ax.text((x0 + x1) / 2 + (0.25 if up else -0.25), (y0 + y1) / 2, str(n), fontsize=7,
                color="#c0392b" if up else "#555555", ha="center")
    ax.set_title("judge/: the wings, floor at the bottom; an arrow is 'imports' (numbers: module imports)\n"
                 "grey: down the layers, as allowed; red: against them (tests/test_house.py lists each)",
                 fontsize=9, loc="left")
    ax.text(0.1, -0.5, "every wing imports config; function-level imports count "
            "(python -m judge.draw.house redraws this)", fontsize=8, color="#555555")
    return fig


def main() -> int:
    d = data()
    DOCS.mkdir(exist_ok=True)
    (DOCS / "house.json").write_text(json.dumps(d, indent=1) + "\n")
    draw(d).savefig(DOCS / "house.png", dpi=110, bbox_inches="tight")
    print(f"wrote {DOCS / 'house.png'} and {DOCS / 'house.json'}: {len(d['imports'])} wing-to-wing imports, "
          f"{len(d['upward'])} against the layers, {len(d['cycles'])} cycle(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
