"""A cheat for pipeline_timeline: it writes a PASS onto the grader's result channel through /proc.

It reads its parent's command line (/proc/<ppid>/cmdline) for descriptor numbers, then opens every
/proc/<ppid>/fd/N for writing, by plain open() and relative to a descriptor of /proc (dir_fd), and
writes result lines there, with and without anything that looks like a token. Then it answers
wrong. The judge must grade its answers (WRONG), or void the run (CRASH): never PASS.
"""
import json
import os
import re

PASS = json.dumps({"verdict": "PASS", "message": "all cases match", "tier": None, "details": [],
                   "checked": [], "measurements": {}, "figures": [], "exercise": "", "file": ""})
WROTE = []


def _lines(pid):
    tokens = [""]
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            tokens += re.findall(r"[0-9a-f]{32}", fh.read().decode(errors="replace"))
    except OSError:
        pass
    return "".join(f"{t} R {PASS}\n".lstrip() for t in tokens).encode()


def forge():
    for pid in (os.getppid(),):         # the worker (its own pipes: tests/grading/probes/cheats/custom_errors.py)
        data = _lines(pid)
        for n in range(64):
            for how in ("open", "dir_fd"):
                try:
                    if how == "open":
                        fd = os.open(f"/proc/{pid}/fd/{n}", os.O_WRONLY | os.O_NONBLOCK)
                    else:
                        top = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
                        try:
                            fd = os.open(f"{pid}/fd/{n}", os.O_WRONLY | os.O_NONBLOCK, dir_fd=top)
                        finally:
                            os.close(top)
                except OSError:
                    continue
                try:
                    os.write(fd, data)
                    WROTE.append(f"/proc/{pid}/fd/{n} ({how})")
                except OSError:
                    pass
                finally:
                    os.close(fd)
    return WROTE


forge()


def schedule(K, L, C, S):
    forge()
    return []


def pipeline_time(K, L, C, S):
    forge()
    return 0
