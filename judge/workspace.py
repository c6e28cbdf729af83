"""The learner's workspace: their copies of starters, and their progress. Never overwritten.

    workspace/<exercise id>/<learner file>    what `start` copies and `check` grades
    workspace/<exercise id>/figures/          pictures a check drew
    workspace/progress.json                   the best result per exercise

A progress file that cannot be read is kept aside as progress.json.corrupt-<time>
and a fresh one started; the learner's files are never touched by that.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from . import config
from .exercise import Exercise


def learner_path(ex: Exercise) -> Path:
    return config.workspace_dir() / ex.id / ex.learner_file


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


def load_progress(warn=print) -> dict:
    p = _progress_file()
    if not p.exists():
        return {}
    try:
        data = json.loads(p.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data
    except (ValueError, OSError) as e:
        aside = p.with_name(f"progress.json.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.move(str(p), aside)
        warn(f"warning: your progress file could not be read ({e}); it was kept as {aside.name} "
             f"and a fresh one started. Your exercise files are untouched.")
        return {}


def record_progress(ex_id: str, *, status: str, verdict: str = "", tier: str | None = None) -> None:
    data = load_progress()
    entry = data.get(ex_id, {})
    rank = {"started": 0, "failed": 1, "skipped": 2, "passed": 3}
    if rank.get(status, 0) >= rank.get(entry.get("status", "started"), 0) or status == "passed":
        entry.update(status=status, verdict=verdict, tier=tier)
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
    """Remember how many hints of an exercise the learner has read."""
    data = load_progress()
    data.setdefault(ex_id, {"status": "started"})["hints_seen"] = seen
    _save_progress(data)
