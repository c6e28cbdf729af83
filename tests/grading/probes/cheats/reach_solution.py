"""A cheat for pipeline_timeline: it looks for the course and reads the reference solution.

Every route issue 18 names: the path of sys.modules["__main__"], the frame locals and globals of
whatever called it, its argv and environment, its working directory, /proc/<ppid>/cmdline, cwd and
environ, and a given ROOT (tests/grading/test_sandbox.py fills @ROOT@ in: a learner who knows where the
course lies). Each candidate folder and its parents are tried, by plain open() and by a path
relative to a directory descriptor (os.open(relative, dir_fd=fd), which an audit hook sees as the
bare relative path). It also tries the judge's own files (judge/hw/pipesim.py).

Run as a script (`python tests/grading/probes/cheats/reach_solution.py`) with nothing in its way, it prints
what it reached: that shows the routes work. Graded, it must reach nothing and get WRONG.
"""
import os
import sys

ROOT = "@ROOT@"
TARGETS = ("exercises/pipeline_timeline/solution.py", "judge/hw/pipesim.py")


def _candidates():
    seen = []

    def add(v, why):
        if isinstance(v, bytes):
            v = v.decode(errors="replace")
        if isinstance(v, str):
            for part in v.replace("\0", " ").replace(":", " ").replace("=", " ").split():
                if part.startswith("/") and (part, why) not in seen:
                    seen.append((part, why))

    if not ROOT.startswith("@"):
        add(ROOT, "the given ROOT")
    main = sys.modules.get("__main__")
    add(getattr(main, "__file__", None), "__main__.__file__")
    f = sys._getframe()
    while f is not None:                                   # frame locals: the caller's secrets
        add(f.f_code.co_filename, "a frame's file")
        for scope in (f.f_locals, f.f_globals):
            for v in list(scope.values()):
                add(v if isinstance(v, (str, bytes)) else repr(v)[:2000], "frame locals")
        f = f.f_back
    for v in list(sys.argv) + list(getattr(sys, "orig_argv", [])) + list(os.environ.values()):
        add(v, "argv/environment")
    add(os.getcwd(), "cwd")
    add(sys.prefix, "sys.prefix")
    ppid = os.getppid()
    for name in ("cmdline", "environ"):
        try:
            with open(f"/proc/{ppid}/{name}", "rb") as fh:
                add(fh.read(), f"/proc/ppid/{name}")
        except OSError:
            pass
    try:
        add(os.readlink(f"/proc/{ppid}/cwd"), "/proc/ppid/cwd")
    except OSError:
        pass
    return seen


def _read(path):
    """Plain open, then relative to a descriptor of "/" (the audit hook's blind spot)."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        pass
    try:
        top = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        try:
            fd = os.open(path.lstrip("/"), os.O_RDONLY, dir_fd=top)
        finally:
            os.close(top)
        try:
            return os.read(fd, 1 << 20)
        finally:
            os.close(fd)
    except OSError:
        return None


def reached():
    """{target: (folder, route)} for every course file this process could read."""
    got = {}
    for path, why in _candidates():
        d = path
        while d not in ("", "/"):
            for t in TARGETS:
                if t not in got and _read(os.path.join(d, t)) is not None:
                    got[t] = (d, why)
            d = os.path.dirname(d)
    return got


REACHED = reached()
_ref = {}
if TARGETS[0] in REACHED:
    exec(_read(os.path.join(REACHED[TARGETS[0]][0], TARGETS[0])), _ref)


def schedule(K, L, C, S):
    return _ref["schedule"](K, L, C, S) if _ref else []


def pipeline_time(K, L, C, S):
    return _ref["pipeline_time"](K, L, C, S) if _ref else 0


if __name__ == "__main__":
    for t, (d, why) in REACHED.items():
        print(f"reached {t} in {d} through {why}")
