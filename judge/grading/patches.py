"""Patches: a fixture stored as a unified diff against its exercise's solution, and the file it makes.

The format and the file behind exercise.fixture_path; judge.grading.fixtures says why fixtures are
patches, converts whole copies and checks them. This module imports nothing of the grading wing, so
that judge.grading.exercise can use it (exercise -> patches; fixtures -> exercise, patches).
A patch applies as `patch` would, without fuzz: every context and removed line must match the current
solution exactly (an offset is allowed), so a solution change that touches a fixture's mistake says so
instead of grading a different program.
"""
from __future__ import annotations

import difflib
import hashlib
import os
import re
import tempfile
from pathlib import Path

from judge import config

PATCH_SUFFIX = ".patch"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"


class PatchError(ValueError):
    """A fixture's patch does not apply to the current solution: names the fixture and the line."""


# ------------------------------------------------------------------------------------------ diffs
def make_patch(solution: str, fixture: str, name: str, solution_name: str = "solution") -> str:
    """A unified diff (3 lines of context) that turns `solution` into `fixture`."""
    a, b = solution.splitlines(keepends=True), fixture.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(a, b, f"a/{solution_name}", f"b/{name}", n=3):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + _NO_NEWLINE + "\n")
    return "".join(out)


def apply_patch(text: str, patch: str, where: str = "patch") -> str:
    """`text` with the unified diff `patch` applied; PatchError when a hunk does not match exactly."""
    lines = text.splitlines(keepends=True)
    plines = patch.splitlines(keepends=True)
    out, pos, i, offset = [], 0, 0, 0
    while i < len(plines) and not plines[i].startswith("@@"):
        i += 1                                          # the ---/+++ header
    while i < len(plines):
        m = _HUNK.match(plines[i])
        if not m:
            raise PatchError(f"{where}: line {i + 1} should start a hunk (@@ -a,b +c,d @@): {plines[i]!r}")
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        i += 1
        old, new, prev = [], [], " "
        while i < len(plines) and not plines[i].startswith("@@"):
            p = plines[i]
            if p.startswith(_NO_NEWLINE[:10]):
                for side in (old, new) if prev == " " else (old,) if prev == "-" else (new,):
                    side[-1] = side[-1].rstrip("\n")
            elif p[:1] in (" ", "-", "+"):
                prev = p[0]
                if p[0] in " -":
                    old.append(p[1:])
                if p[0] in " +":
                    new.append(p[1:])
            elif p.strip() == "":
                prev = " "
                old.append("\n")
                new.append("\n")
            else:
                raise PatchError(f"{where}: line {i + 1} is neither context, removal nor addition: {p!r}")
            i += 1
        at = _find(lines, old, start + offset, pos)
        if at is None:
            raise PatchError(f"{where}: the hunk at solution line {start + 1} does not match the solution "
                             f"(first line expected: {old[0].rstrip() if old else '(none)'!r}); the solution "
                             f"changed there: rewrite the fixture as the new solution plus its mistake")
        offset = at - start
        out.extend(lines[pos:at])
        out.extend(new)
        pos = at + len(old)
    out.extend(lines[pos:])
    return "".join(out)


def _find(lines, block, guess, lo):
    """Where `block` sits in `lines` at or after `lo`, nearest to `guess`; None if nowhere."""
    n = len(block)
    cands = [guess] + [guess + d * s for d in range(1, len(lines) + 1) for s in (-1, 1)]
    for at in cands:
        if lo <= at <= len(lines) - n and lines[at:at + n] == block:
            return at
    return None


# ------------------------------------------------------------------------------------------ an exercise's fixtures
def patch_path(ex, name: str) -> Path:
    return ex.folder / "fixtures" / (name + PATCH_SUFFIX)


def stored_path(ex, name: str) -> Path:
    return ex.folder / "fixtures" / name


def is_patch(ex, name: str) -> bool:
    return patch_path(ex, name).exists()


def text(ex, name: str) -> str:
    """The fixture's source: the stored file, or the solution with its patch applied."""
    whole = stored_path(ex, name)
    if whole.exists():
        return whole.read_text()
    p = patch_path(ex, name)
    if not p.exists():
        raise FileNotFoundError(f"{ex.id}: fixture {name} is declared in exercise.toml but neither "
                                f"fixtures/{name} nor fixtures/{name}{PATCH_SUFFIX} exists")
    return apply_patch(ex.solution_path.read_text(), p.read_text(), f"{ex.id}/fixtures/{p.name}")


def materialize(ex, name: str) -> Path:
    """A file holding fixture `name` under its own name: the stored file, or one written into the cache."""
    whole = stored_path(ex, name)
    if whole.exists():
        return whole
    src = text(ex, name)
    key = hashlib.sha256(f"{ex.id}\0{name}\0{src}".encode()).hexdigest()[:16]
    dest = config.cache_dir() / "fixtures" / ex.id / key / name
    if not dest.exists() or dest.read_text() != src:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent)      # written, then renamed into place
        with os.fdopen(fd, "w") as f:
            f.write(src)
        os.replace(tmp, dest)
    return dest


def on_disk(ex) -> set[str]:
    """Names of the fixtures stored in the folder (a patch counts under the name it produces)."""
    out = set()
    for p in (ex.folder / "fixtures").iterdir() if (ex.folder / "fixtures").is_dir() else ():
        if not p.is_file():
            continue
        name = p.name[:-len(PATCH_SUFFIX)] if p.name.endswith(PATCH_SUFFIX) else p.name
        if Path(name).suffix in (".py", ".cu"):
            out.add(name)
    return out


def changed_lines(patch: str) -> int:
    """Lines a patch adds or removes."""
    return sum(1 for l in patch.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---")))
