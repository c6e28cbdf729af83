"""The learner's workspace: their copies of starters, and their progress. Never overwritten.

    workspace/<exercise id>/<learner file>    what `start` copies and `check` grades
    workspace/<exercise id>/figures/          pictures a check of that file drew
    workspace/progress.json                   the best result per exercise

A progress file that cannot be read (not JSON, or JSON of the wrong shape) is kept aside as
progress.json.corrupt-<time>[-N] (never overwriting an earlier one) and the entries that could
be read are kept; the learner's files are never touched by that.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from judge import config
from judge.grading.exercise import Exercise

STATUS_RANK = {"started": 0, "failed": 1, "skipped": 2, "passed": 3}


class BadFile(ValueError):
    """A file that cannot be graded as it is (a folder, not text, too large, the wrong language)."""


def learner_path(ex: Exercise) -> Path:
    return config.workspace_dir() / ex.id / ex.learner_file


def validate_file(ex: Exercise, path: Path) -> None:
    """Raise BadFile, saying what to do, unless `path` is a file this exercise can grade."""
    path = Path(path)
    if not path.exists():
        raise BadFile(f"no file {path}")
    if path.is_dir():
        raise BadFile(f"{path} is a folder: give the file to grade, e.g. {path / ex.learner_file}")
    if not path.is_file():
        raise BadFile(f"{path} is not a regular file")
    kind = {".py": "Python", ".cu": "CUDA"}
    if path.suffix != ex.ext:
        got = f"a {kind.get(path.suffix, repr(path.suffix or 'extension-less'))} file" \
            if path.suffix else "a file without an extension"
        raise BadFile(f"{ex.id} grades a {kind.get(ex.ext, ex.ext)} file ({ex.learner_file}); {path.name} is {got}")
    size = path.stat().st_size
    if size > config.MAX_SOURCE_BYTES:
        raise BadFile(f"{path.name} is {size / 1e6:.1f} MB; a graded file is at most "
                      f"{config.MAX_SOURCE_BYTES / 1e6:.1f} MB of source (is it the right file?)")
    data = path.read_bytes()
    if b"\0" in data:
        raise BadFile(f"{path.name} is not a text file (it holds NUL bytes): give the {ex.ext} source file")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise BadFile(f"{path.name} is not UTF-8 text (byte 0x{data[e.start]:02x} on line {line}): "
                      f"save it as UTF-8") from None


def start(ex: Exercise) -> tuple[Path, bool]:
    """Copy the starter into the workspace. Returns (path, created); never overwrites."""
    dest = learner_path(ex)
    if dest.exists():
        return dest, False
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "x") as f:           # "x": fails rather than overwrite, even in a race
        f.write(ex.starter_path.read_text())
    record_progress(ex.id, status="started")
    return dest, True


def _progress_file() -> Path:
    return config.workspace_dir() / "progress.json"


def _entry_ok(v) -> bool:
    if not isinstance(v, dict):
        return False
    if "status" in v and (not isinstance(v["status"], str) or v["status"] not in STATUS_RANK):
        return False
    if "hints_seen" in v and (not isinstance(v["hints_seen"], int) or isinstance(v["hints_seen"], bool)
                              or v["hints_seen"] < 0):
        return False
    return all(isinstance(v.get(k, ""), str) for k in ("verdict", "last", "when", "source")) \
        and isinstance(v.get("tier"), (str, type(None)))


def _keep_aside(p: Path) -> Path:
    """Move the unreadable file to a name no earlier copy has."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        aside = p.with_name(f"progress.json.corrupt-{stamp}" + (f"-{n}" if n else ""))
        try:
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL)   # claims the name, even in a race
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(p.read_bytes())
        p.unlink()
        return aside
    raise OSError(f"too many saved copies of {p.name} in {p.parent}")


def load_progress(warn=print) -> dict:
    p = _progress_file()
    if not p.exists():
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"it holds a JSON {type(data).__name__}, not an object")
        bad = [k for k, v in data.items() if not _entry_ok(v)]
        if not bad:
            return data
        why = f"entries of the wrong shape: {', '.join(map(str, bad[:3]))}"
        data = {k: v for k, v in data.items() if k not in bad}
    except (ValueError, OSError) as e:          # UnicodeDecodeError and JSONDecodeError are ValueErrors
        why, data = str(e), {}
    aside = _keep_aside(p)
    kept = f"the {len(data)} readable entries were kept" if data else "a fresh one started"
    warn(f"warning: your progress file could not be read ({why}); it was kept as {aside.name} "
         f"and {kept}. Your exercise files are untouched.")
    if data:
        _save_progress(data)
    return data


def record_progress(ex_id: str, *, status: str, verdict: str = "", tier: str | None = None,
                    source: str = "") -> None:
    data = load_progress()
    entry = data.get(ex_id, {})
    if STATUS_RANK.get(status, 0) >= STATUS_RANK.get(entry.get("status", "started"), 0) or status == "passed":
        entry.update(status=status, verdict=verdict, tier=tier, source=source)
    entry["last"] = verdict or status
    entry["when"] = time.strftime("%Y-%m-%d %H:%M")
    data[ex_id] = entry
    _save_progress(data)


def _save_progress(data: dict) -> None:
    """Write the progress file whole, then rename it into place: a crash never leaves half a file."""
    p = _progress_file()
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, p)


def note_hint(ex_id: str, seen: int) -> None:
    """Remember how many hints of an exercise the learner has read (reading one does not start it)."""
    data = load_progress()
    data.setdefault(ex_id, {})["hints_seen"] = seen
    _save_progress(data)
