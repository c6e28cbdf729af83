#!/usr/bin/env python3
"""The course's exercises, from the command line (the same as the `course` command).

    python3 practice/judge.py list                 every exercise, with your status
    python3 practice/judge.py start ID             copy its starter into workspace/ID/ (never overwrites)
    python3 practice/judge.py check ID [FILE]      grade your file (default: workspace/ID/<file>)
    python3 practice/judge.py hint ID              the next hint (hint ID N: hint number N)
    python3 practice/judge.py solution ID          the reference solution
    python3 practice/judge.py sass ID [FILE]       the SASS of your kernel, required instructions marked
    python3 practice/judge.py progress             what you have passed so far (and where each verdict came from)
    python3 practice/judge.py grade-class CLASS --out REPORT   grade a whole class on Dask (instructors)
    python3 practice/judge.py release DIR          a copy of the course for learners, without solutions

Any Python may run this file: when it lacks the course's packages, it runs itself again with the
course's own .venv/bin/python (made by README.md's first command). The commands live in judge/cli.py.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NEEDED = ("numpy", "matplotlib", "cupy")          # what the judge imports on every machine


def _missing() -> list[str]:
    if sys.version_info < (3, 11):
        return [f"Python 3.11+ (this is {sys.version.split()[0]})"]
    out = []
    for name in NEEDED:
        try:
            if importlib.util.find_spec(name) is None:
                out.append(name)
        except (ImportError, ValueError):
            out.append(name)
    return out


def _venv_python() -> Path | None:
    for p in (ROOT / ".venv" / "bin" / "python", ROOT / ".venv" / "Scripts" / "python.exe"):
        if p.exists():
            return p
    return None


def main() -> int:
    missing = _missing()
    if missing:
        venv = _venv_python()
        if venv is not None and not os.environ.get("COURSE_REEXEC"):
            os.environ["COURSE_REEXEC"] = "1"          # never loop if the venv lacks them too
            os.execv(str(venv), [str(venv), str(Path(__file__).resolve())] + sys.argv[1:])
        print(f"error: {sys.executable} lacks what the course needs ({', '.join(missing)}).\n"
              f"Install the course once, from {ROOT}:\n"
              f"  python3 -m venv .venv && .venv/bin/python -m pip install -q -e \".[dev]\"\n"
              f"then run `.venv/bin/course ...` or `python3 practice/judge.py ...` again.",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from judge import cli
    return cli.main(prog="python3 practice/judge.py")


if __name__ == "__main__":
    sys.exit(main())
