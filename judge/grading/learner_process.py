"""The learner's Python runs in a process of its own, behind the kernel's namespaces where it can.

A CPU exercise's check.py runs in the judge's worker process (judge.grading.check_child). When it
asks for the learner's functions (sub.learner_module("schedule", ...)) it gets a proxy: each
attribute is a callable that runs in the learner process, started by this module:

    worker (check.py, the reference, judge.*)  --pickled call-->  learner process (your file only)
                                               <--plain values--

Threat model. The learner's file is treated as hostile.
  It may: compute, print (shown as "your output"), use its own temporary folder (/tmp, private).
  It may not: read any file of the course other than its own submission (solutions, checks, the
  judge, the workspace, the kernel cache); learn the course's location from anything the judge
  hands it (argv, working directory, environment, its __main__, its frames, its parent's /proc);
  talk to the grader except through its return values; forge or replace a result; turn its own
  death or the grader's into a PASS.

How, on Linux with unprivileged user namespaces (judge.grading.learner_process._enter_boundary):
  - the process starts as `python -E -S -P -B -u -c <this file's learner side> FD FD` in an empty
    temp folder with an environment built from scratch; its file arrives as bytes on a pipe;
  - it enters new user, mount, PID, network and IPC namespaces. There the course checkout, the
    workspace and the kernel cache are covered by empty tmpfs mounts (any file descriptor or
    relative path with dir_fd finds nothing: the files are not in its world), every mount is made
    read-only (it cannot plant code in the venv or ~ for the grader's next run) except a private
    tmpfs /tmp, and a fresh /proc shows only its own namespace (no /proc/<ppid>/fd, cmdline, cwd);
  - its first process forks the namespace's PID 1, which enters a second user + mount namespace
    below the first (every inherited mount is then locked: even as root there it cannot unmount
    what hides the course), starts a session of its own (kill(0, ...) reaches nothing outside), and
    executes a fresh Python, so nothing of the setup (paths included) is left in its memory;
  - the worker is non-dumpable and its result channel carries a per-run secret; a result counts
    only if the worker then exits 0 (judge.grading.check_process).
  What stays visible: the Python environment it runs on (read-only), which may name its own
  location; the rest of the file system outside the hidden folders, read-only.
  Landlock and seccomp are not used: mount namespaces already remove the files and PID
  namespaces the processes, for under 0.1 s per check (tests/grading/test_sandbox.py measures it).

Where the kernel refuses (not Linux, user namespaces disabled, a container's seccomp profile), or
with JUDGE_ISOLATION=best-effort, the learner process runs without namespaces behind an audit hook
(sys.addaudithook) and a meta-path finder that refuse the course's folders by path and any
program start; the verdict then says "isolation: best effort on this system". A hook sees a path
as written, so this mode is a fence against mistakes, not against a deliberate attack.

In both modes it cannot import the judge (judge.*), has no way to report progress or results (those
travel from the worker on a pipe it does not inherit), and answers each call within a time limit
(JUDGE_TIMEOUT, 10 s for CPU exercises): a call that does not return in time is a HANG, and the
learner process is killed (its namespace's PID 1 dies with its parent, and everything in it).

Values coming back are plain data only (numbers, strings, tuples, lists, dicts, sets, NumPy arrays),
read with a restricted unpickler; anything else arrives as an Opaque stand-in showing its repr.
An exception raised by learner code is raised again in the worker as the same type (a subclass of
the nearest built-in type for the learner's own classes), with the learner's line in
`learner_where` ("timeline.py line 12"), which judge.grading.submission.learner_error shows.

Not run by hand: the learner's side (everything above "the worker's side") imports only the
standard library and runs as -c text. Tests: tests/grading/test_sandbox.py, tests/grading/test_isolation.py.
"""
from __future__ import annotations

import os
import struct
import sys

MAX_MESSAGE = 64 << 20          # a learner's value larger than this is refused (bytes, pickled)
_HEADER = struct.Struct("<4sQ")   # magic, length
_MAGIC = b"LRN1"
_SELF = globals().get("__file__", "<string>")   # the learner process runs this file's text with -c


# ============================================================== framing (both sides)
def _write_msg(fd: int, obj) -> None:
    import pickle
    _write_raw(fd, pickle.dumps(obj, protocol=4))


def _write_raw(fd: int, data: bytes) -> None:
    view = memoryview(_HEADER.pack(_MAGIC, len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    import select
    import time
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                raise TimeoutError
        b = os.read(fd, min(n - got, 1 << 20))
        if not b:
            raise EOFError
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


# ============================================================== the learner process
def _plain(v, depth=0):
    """v made of plain data only (what the worker will accept), or raise TypeError."""
    if depth > 50:
        raise TypeError("nested too deeply")
    if v is None or type(v) in (bool, int, float, complex, str, bytes):
        return v
    if isinstance(v, bool):
        return bool(v)
    for base in (int, float, complex, str, bytes):       # IntEnum, str subclasses, ...
        if isinstance(v, base):
            return base(v)
    if isinstance(v, (tuple, list)):
        items = [_plain(x, depth + 1) for x in v]
        return items if isinstance(v, list) else tuple(items)
    if isinstance(v, (set, frozenset)):
        items = {_plain(x, depth + 1) for x in v}
        return items if isinstance(v, set) else frozenset(items)
    if isinstance(v, dict):
        return {_plain(k, depth + 1): _plain(x, depth + 1) for k, x in v.items()}
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(v, np.ndarray):
            return _plain(v.tolist(), depth + 1) if v.dtype.hasobject else v
        if isinstance(v, np.generic):
            return v
    raise TypeError(type(v).__name__)


def _describe_exception(e: BaseException, learner_file: str) -> dict:
    import traceback
    frames = traceback.extract_tb(e.__traceback__)
    mine = [f for f in frames if os.path.abspath(f.filename) == learner_file]
    where = None
    if isinstance(e, SyntaxError) and e.filename and os.path.abspath(e.filename) == learner_file:
        where = (os.path.basename(learner_file), e.lineno, (e.text or "").rstrip())
    elif mine:
        where = (os.path.basename(learner_file), mine[-1].lineno, mine[-1].line or "")
    bases = [c.__name__ for c in type(e).__mro__ if c.__module__ == "builtins"]
    try:
        args = _plain(e.args)
    except TypeError:
        args = None
    text = [l for f in frames if f.filename != _SELF
            for l in traceback.format_list([f])]
    return {"type": type(e).__name__, "bases": bases, "text": str(e), "args": args, "where": where,
            "traceback": ("".join(text) + "".join(traceback.format_exception_only(type(e), e)))[-4000:],
            "syntax": (e.msg, e.lineno, e.offset) if isinstance(e, SyntaxError) else None}


def _fence(hidden: list[str]) -> None:
    """The audit hook and import guard, inside any boundary (and the only fence without one).

    `hidden` is empty inside the OS boundary (the course is not there to refuse); in the best-effort
    mode it lists the folders to refuse by path: a hook sees the path as written, so a relative
    path opened with dir_fd slips past it. That is why it is best effort.
    """
    import importlib.abc
    import importlib.machinery

    hidden = [os.path.realpath(h) for h in hidden]
    allowed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    me = str(os.getpid())

    def blocked(path) -> bool:
        if isinstance(path, int):
            return False
        try:
            p = os.path.realpath(os.fsdecode(os.fspath(path)))
        except (TypeError, ValueError):
            return False
        if p.startswith("/proc/"):
            parts = p.split("/")
            return len(parts) > 3 and parts[2].isdigit() and (parts[2] != me or parts[3] == "fd")
        inside = any(p == h or p.startswith(h + os.sep) for h in hidden)
        return inside and not any(p == a or p.startswith(a + os.sep) for a in allowed)

    class _Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in ("judge", "exercises", "tests", "practice", "chapters"):
                raise ImportError(f"the graded code may not import {name}: it runs apart from the judge")
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is not None and spec.origin and blocked(spec.origin):
                raise ImportError(f"the graded code may not import {name} from the course's own files")
            return None                      # let the usual finders do the work

    sys.meta_path.insert(0, _Refuse())
    sys.path[:] = [p for p in sys.path if p and not blocked(p)]

    no_programs = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                   "os.fork", "os.forkpty", "pty.spawn")

    def hook(event, args):
        if event in ("open", "os.listdir", "os.scandir", "os.chdir", "shutil.copyfile") and args:
            if blocked(args[0]):
                raise PermissionError(f"the graded code may not read {args[0]}: it runs apart from "
                                      f"the judge and the course's files")
        elif event in no_programs:
            raise PermissionError("the graded code may not start other programs")
        elif event == "ctypes.dlopen" and args and args[0] is not None:
            raise PermissionError("the graded code may not load native libraries")
        elif event in ("ctypes.dlsym", "ctypes.dlsym/handle"):
            raise PermissionError("the graded code may not call into native libraries")

    sys.addaudithook(hook)


# ============================================================== the OS boundary (Linux, learner side)
# Numbers from <linux/sched.h>, <linux/mount.h>, <linux/prctl.h>; the same on x86-64 and arm64.
_NEWNS, _NEWIPC, _NEWUSER, _NEWPID, _NEWNET = 0x20000, 0x8000000, 0x10000000, 0x20000000, 0x40000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_BIND, _MS_REC, _MS_PRIVATE = 0x1000, 0x4000, 0x40000
_AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = -100, 0x8000, 1
_SYS_MOUNT_SETATTR = {"x86_64": 442, "aarch64": 442}       # mount_setattr(2), Linux 5.12+
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
WORK_DIR = "/tmp/learner"       # the learner's working directory (and HOME) inside the boundary
INSIDE = ("namespaces of its own (user, mount, PID, network, IPC): the course's folders hidden, "
          "every file read-only except its private /tmp, no view of other processes")


class _Linux:
    """The Linux calls Python 3.11's os module lacks (unshare, mount, mount_setattr, prctl), via libc."""

    def __init__(self):
        if not sys.platform.startswith("linux"):
            raise OSError(f"no user namespaces on {sys.platform}")
        import ctypes
        self._ct = ctypes
        self._libc = libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
        libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
        libc.syscall.restype = ctypes.c_long
        self._setattr_nr = _SYS_MOUNT_SETATTR.get(os.uname().machine)
        if self._setattr_nr is None:
            raise OSError(f"no mount_setattr number known for {os.uname().machine}")

    def _ok(self, r: int, what: str) -> None:
        if r < 0:
            e = self._ct.get_errno()
            raise OSError(e, f"{what}: {os.strerror(e)}")

    def unshare(self, flags: int) -> None:
        self._ok(self._libc.unshare(flags), "unshare")

    def mount(self, src, target, fstype, flags: int, data=None) -> None:
        enc = (lambda s: None if s is None else os.fsencode(s))
        self._ok(self._libc.mount(enc(src), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")

    def read_only(self, path: str, *, recursive: bool, on: bool = True) -> None:
        ct = self._ct
        attr = (ct.c_uint64 * 4)(_MOUNT_ATTR_RDONLY if on else 0, 0 if on else _MOUNT_ATTR_RDONLY, 0, 0)
        r = self._libc.syscall(ct.c_long(self._setattr_nr), ct.c_int(_AT_FDCWD), ct.c_char_p(os.fsencode(path)),
                               ct.c_uint(_AT_RECURSIVE if recursive else 0), ct.byref(attr), ct.c_size_t(32))
        self._ok(r, f"mount_setattr {path}")

    def prctl(self, option: int, arg: int) -> None:
        self._ok(self._libc.prctl(option, arg, 0, 0, 0), f"prctl {option}")


def _map_ids(uid: int, gid: int, proc_self: int) -> None:
    """In a fresh user namespace: be the same uid/gid as outside (setgroups must be denied first)."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        fd = os.open(name, os.O_WRONLY, dir_fd=proc_self)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def _enter_boundary(init: dict, cmd_fd: int, rep_fd: int) -> None:
    """Put the learner's code behind the kernel's namespaces; Linux, unprivileged.

    This process (A) builds a user + mount + PID + network + IPC namespace, hides the course there,
    makes every mount read-only but a private /tmp, and forks B, the first process of the new PID
    namespace. A waits for B and exits as B did. B mounts a /proc that shows only its own namespace,
    enters a second user + mount namespace below the first (so every mount it inherits is locked:
    even as root there it cannot unmount what hides the course), and executes a fresh Python that
    knows nothing of A's memory. Raises OSError (in A, or in B before the exec) when the kernel
    refuses a step: the caller falls back to the best-effort fence and says so.
    """
    import select
    import signal
    linux = _Linux()
    uid, gid = os.getuid(), os.getgid()
    for k in init["keep"]:
        if any(h == k or h.startswith(k + os.sep) for h in init["hide"]):
            raise OSError(f"the Python environment {k} holds the course itself")
    linux.unshare(_NEWUSER | _NEWNS | _NEWPID | _NEWNET | _NEWIPC)
    proc_self = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    _map_ids(uid, gid, proc_self)
    os.close(proc_self)
    linux.mount(None, "/", None, _MS_REC | _MS_PRIVATE)          # nothing we mount leaks back out
    # held open before hiding, in this namespace (a bind's source must be a mount of the caller's)
    keep = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in init["keep"] if os.path.isdir(p)]
    linux.mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode=1777,size={init['tmp_bytes']}")
    for p in init["hide"]:
        if os.path.isdir(p):                                        # not already under a hidden one
            linux.mount("tmpfs", p, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=755,size=64k")
    for p, fd in keep:                                              # the Python it runs on, if hidden
        os.makedirs(p, exist_ok=True)
        linux.mount(f"/proc/self/fd/{fd}", p, None, _MS_BIND | _MS_REC)
        os.close(fd)
    linux.read_only("/", recursive=True)                            # no writes into the venv, ~, ...
    linux.read_only("/tmp", recursive=False, on=False)              # ...except its own /tmp
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid:                                                         # A: wait, then end as B ended
        os.close(alive_r)
        os.close(cmd_fd)
        os.close(rep_fd)
        status = os.waitpid(pid, 0)[1]
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    # B: PID 1 of the new namespace; it dies with A (and everything in the namespace dies with it)
    os.close(alive_w)
    linux.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if select.select([alive_r], [], [], 0)[0]:                      # A died before the line above
        os._exit(1)
    os.close(alive_r)
    proc_note = ""
    try:
        linux.mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        proc_self = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:                                                 # e.g. a container masks parts of /proc
        proc_self = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        linux.mount("tmpfs", "/proc", "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_RDONLY, "size=4k")
        proc_note = "; no /proc at all (the kernel refused a fresh one)"
    linux.unshare(_NEWUSER | _NEWNS)                                # every inherited mount now locked
    _map_ids(uid, gid, proc_self)
    os.close(proc_self)
    linux.prctl(_PR_SET_NO_NEW_PRIVS, 1)
    os.setsid()             # its own process group: kill(0, ...) reaches nothing outside the namespace
    os.makedirs(WORK_DIR, exist_ok=True)
    os.chdir(WORK_DIR)
    path = os.path.join(WORK_DIR, init["name"])
    with open(path, "wb") as f:
        f.write(init["source"])
    env = dict(init["env"], HOME=WORK_DIR, TMPDIR="/tmp")
    os.set_inheritable(cmd_fd, True)
    os.set_inheritable(rep_fd, True)
    argv = sys.orig_argv
    code = argv[argv.index("-c") + 1]
    os.execve(sys.executable, [sys.executable, "-E", "-P", "-B", "-u", "-c", code,
                               str(cmd_fd), str(rep_fd), path, init["module"], INSIDE + proc_note,
                               repr(init["alarm"])], env)


def _child_main(argv: list[str]) -> int:
    cmd_fd, rep_fd = int(argv[1]), int(argv[2])
    if len(argv) > 3:                     # started again inside the boundary: it knows only this
        learner_file, name, isolation = argv[3:6]
        alarm = float(argv[6]) if len(argv) > 6 else 0.0
        hidden, best_effort_why = [], ""
    else:                                 # the first message: marshal (built in, quick), from the worker
        import marshal
        init = marshal.loads(_read_exact(cmd_fd, _HEADER.unpack(_read_exact(cmd_fd, _HEADER.size, None))[1], None))
        why = "the boundary was turned off: JUDGE_ISOLATION=best-effort"
        if init["boundary"]:
            try:
                _enter_boundary(init, cmd_fd, rep_fd)     # returns only by raising
            except OSError as e:
                why = f"the kernel refused it: {e}"
            except Exception as e:  # noqa: BLE001 - any failure here means: no boundary
                why = f"{type(e).__name__}: {e}"
        import site                     # started with -S (the boundary needs only the standard library):
        site.main()                     # the learner's code gets its site-packages here
        if not os.path.isdir(os.getcwd()):             # a boundary that failed half-way hid it
            os.makedirs(WORK_DIR, exist_ok=True)
            os.chdir(WORK_DIR)
        learner_file = os.path.join(os.getcwd(), init["name"])
        with open(learner_file, "wb") as f:
            f.write(init["source"])
        isolation, hidden, name = f"best effort on this system ({why})", init["hide"], init["module"]
        best_effort_why = why
        alarm = init["alarm"]
        del init
    import importlib.util
    import pickle
    import signal
    sys.argv = [learner_file]
    _write_msg(rep_fd, ("isolation", isolation, best_effort_why))   # before any learner code runs
    _fence(hidden)
    replying = [False]

    def where_now(signum, frame):
        """SIGALRM, shortly before the worker's time limit: tell it where the learner's code is (the
        innermost frame of the learner's file), so that a HANG can name the file, line and function."""
        if replying[0]:
            return
        f = frame
        while f is not None and os.path.abspath(f.f_code.co_filename) != learner_file:
            f = f.f_back
        if f is None:
            return
        import linecache
        try:
            _write_msg(rep_fd, ("where", (os.path.basename(learner_file), f.f_lineno, f.f_code.co_name,
                                          linecache.getline(learner_file, f.f_lineno).strip()[:200])))
        except OSError:
            pass

    def alarm_at(seconds):
        try:
            signal.setitimer(signal.ITIMER_REAL, seconds)
        except (OSError, ValueError):
            pass

    signal.signal(signal.SIGALRM, where_now)

    def reply(obj):
        replying[0] = True
        alarm_at(0)
        try:
            _write_msg(rep_fd, obj)
        except (TypeError, pickle.PicklingError, AttributeError):
            _write_msg(rep_fd, ("opaque", repr(obj[1])[:300]))
        finally:
            replying[0] = False

    def answer(value):
        try:
            value = _plain(value)
        except TypeError:
            try:
                text = repr(value)[:300]
            except Exception:  # noqa: BLE001 - a repr that fails still needs an answer
                text = f"<{type(value).__name__} object>"
            reply(("opaque", text))
            return
        reply(("ok", value))

    def failed(e: BaseException):
        if isinstance(e, SystemExit):
            reply(("exit", e.code if isinstance(e.code, (int, type(None))) else str(e.code),
                   _describe_exception(e, learner_file)["where"]))
        else:
            reply(("err", _describe_exception(e, learner_file)))

    try:
        spec = importlib.util.spec_from_file_location(name, learner_file)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        alarm_at(alarm)
        spec.loader.exec_module(mod)
    except BaseException as e:  # noqa: BLE001 - everything the learner's file does is reported
        failed(e)
        return 0
    names = {k: callable(v) for k, v in vars(mod).items() if not k.startswith("__")}
    reply(("ok", names))
    while True:
        try:
            n = _HEADER.unpack(_read_exact(cmd_fd, _HEADER.size, None))[1]
            op, *rest = pickle.loads(_read_exact(cmd_fd, n, None))
        except EOFError:
            return 0
        if op == "quit":
            return 0
        try:
            if op == "call":
                fn, args, kwargs = rest[:3]
                alarm_at(alarm)
                answer(getattr(mod, fn)(*args, **kwargs))
            elif op == "get":
                answer(getattr(mod, rest[0]))
        except BaseException as e:  # noqa: BLE001
            alarm_at(0)
            failed(e)


# ============================================================== the worker's side
import pickle  # noqa: E402 - the worker's side only: the learner's side imports it after the boundary

_RUNNER_CODE: str | None = None
_WORKER_SIDE = "\n# ============================================================== the worker's side\n"


def _runner_code() -> str:
    """The learner's side of this file, given to the learner process as -c text (no path in its argv)."""
    global _RUNNER_CODE
    if _RUNNER_CODE is None:
        with open(__file__, encoding="utf-8") as f:
            text = f.read()
        _RUNNER_CODE = text[:text.index(_WORKER_SIDE)] + "\nsys.exit(_child_main(sys.argv))\n"
    return _RUNNER_CODE


def _worker_not_dumpable() -> None:
    """Linux: from now on no process of this user without CAP_SYS_PTRACE (a learner's process
    outside any namespace among them) may open this worker's /proc files (fd, mem, environ, cwd)
    or ptrace it: prctl(PR_SET_DUMPABLE, 0)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)      # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def _learner_env() -> dict:
    """The learner process's environment, from scratch: nothing in it names the course or the venv."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "MPLBACKEND": "Agg",
           "LANG": os.environ.get("LANG", "C.UTF-8")}
    for k in ("LC_ALL", "LC_CTYPE", "TZ", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        if k in os.environ and os.sep not in os.environ[k]:
            env[k] = os.environ[k]
    return env


def _hidden_paths() -> list[str]:
    """The folders the learner's code must not see: the course, its workspace and cache, and any
    other checkout of the course that this Python environment installs in editable mode."""
    import glob
    import json
    import site
    from judge import config
    paths = [config.ROOT, config.workspace_dir(), config.cache_dir()]
    for sp in site.getsitepackages():
        for f in glob.glob(os.path.join(sp, "*.dist-info", "direct_url.json")):
            try:
                with open(f, encoding="utf-8") as fh:
                    info = json.load(fh)
            except (OSError, ValueError):
                continue
            url = info.get("url", "") if isinstance(info, dict) else ""
            if url.startswith("file://") and (info.get("dir_info") or {}).get("editable"):
                src = url[len("file://"):]
                if os.path.isdir(os.path.join(src, "exercises")) and os.path.isdir(os.path.join(src, "judge")):
                    paths.append(src)
    out: list[str] = []
    for p in paths:
        r = os.path.realpath(p)
        if r != "/" and r not in out:
            out.append(r)
    return out


def _keep_paths(hidden: list[str]) -> list[str]:
    """The Python the learner's code runs on, where it lies under a hidden folder or under /tmp
    (e.g. the course's own .venv): bound back, read-only, at the same path."""
    import site
    import tempfile
    cands = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))}
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user and os.path.isdir(user):
        cands.add(user)
    covers = hidden + ["/tmp", os.path.realpath(tempfile.gettempdir())]
    keep = []
    for c in sorted({os.path.realpath(c) for c in cands}):
        if any(c == h or c.startswith(h + os.sep) for h in covers) and c not in keep:
            keep.append(c)
    return keep

class Ended(BaseException):
    """The learner process hung or died: the check ends with this Result (HANG or CRASH).

    A BaseException, so that a check's `except Exception` around a learner call cannot take it
    for an answer; judge.grading.check_child turns it into the verdict.
    """

    def __init__(self, result):
        super().__init__(result.message)
        self.result = result


class Opaque:
    """A value the learner's code returned that is not plain data: equal to nothing, shows its repr."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self):
        return self.text

    def __eq__(self, other):
        return False

    __hash__ = None


_ALLOWED = {("builtins", n) for n in ("set", "frozenset", "complex", "bytearray", "slice", "range")} | {
    ("_codecs", "encode"), ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer")}


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def _loads_plain(data: bytes):
    import io
    return _PlainUnpickler(io.BytesIO(data)).load()


def _rebuild(info: dict) -> BaseException:
    """The learner's exception, raised again on this side (same type name, its message, its line)."""
    import builtins
    base = next((getattr(builtins, b) for b in info["bases"]
                 if isinstance(getattr(builtins, b, None), type)
                 and issubclass(getattr(builtins, b), Exception)), Exception)
    cls = base if base.__name__ == info["type"] else type(info["type"], (base,), {"__module__": "learner"})
    e = None
    if info.get("args") is not None:
        try:
            e = cls(*info["args"])
        except Exception:  # noqa: BLE001 - some types need arguments the learner's did not keep
            e = None
    if e is None or str(e) != info["text"]:
        try:
            e = cls(info["text"])
        except Exception:  # noqa: BLE001
            e = type(info["type"], (Exception,), {"__module__": "learner"})(info["text"])
    where = info.get("where")
    e.learner_where = f"{where[0]} line {where[1]}" if where else ""
    e.learner_line = where[2] if where else ""
    e.learner_traceback = info.get("traceback", "")
    if where:
        e.add_note(f"  {where[0]}, line {where[1]}: {where[2].strip()}")
    return e


def _call_text(fn: str, args, kwargs) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    text = f"{fn}({', '.join(parts)})"
    return text if len(text) <= 120 else text[:117] + "..."


class LearnerProcess:
    """The learner's file, imported in a process of its own. `module()` gives the proxy."""

    def __init__(self, path, *, call_limit: float, label: str | None = None, on_call=None):
        import tempfile
        from pathlib import Path
        self.path = Path(path)
        self.label = label or self.path.name
        self.call_limit = float(call_limit)
        self.on_call = on_call                 # called after each answered call (the worker's heartbeat)
        self._tmp = tempfile.TemporaryDirectory(prefix="learner-")
        self._proc = None
        self._ended = None                     # the Result once the process hung or died
        self._names: dict[str, bool] | None = None
        self._import_error: BaseException | None = None
        self._import_exit = None
        self.isolation: str | None = None      # what the learner process says it runs behind
        self.best_effort_why = ""              # why it runs without the boundary, as it says ("" when behind one)

    # ---------------------------------------------------------------- the process
    def _start(self):
        """Start the learner process; the first message it gets holds its file's bytes, never a path."""
        import subprocess
        from judge import config
        _worker_not_dumpable()
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        # argv, cwd and environment say nothing of the course: the code arrives as -c text, the
        # working directory is an empty temp folder, the environment is built from scratch
        self._proc = subprocess.Popen(
            [sys.executable, "-E", "-S", "-P", "-B", "-u", "-c", _runner_code(), str(cmd_r), str(rep_w)],
            pass_fds=(cmd_r, rep_w), stdin=subprocess.DEVNULL, cwd=self._tmp.name,
            env=dict(_learner_env(), HOME=self._tmp.name, TMPDIR=self._tmp.name))
        os.close(cmd_r)
        os.close(rep_w)
        self._cmd, self._rep = cmd_w, rep_r
        name = "".join(c if c.isalnum() or c in "._-" else "_" for c in self.path.name).lstrip(".") or "file.py"
        stem = "".join(c if c.isalnum() else "_" for c in self.path.stem)
        import marshal
        hidden = _hidden_paths()
        # the learner's side says where its code is this long after a call began (a HANG's place)
        alarm = max(self.call_limit - min(0.5, self.call_limit / 5), 0.001)
        return marshal.dumps({"source": self.path.read_bytes(), "name": name, "module": stem, "alarm": alarm,
                "boundary": config.isolation_wanted(), "hide": hidden, "keep": _keep_paths(hidden),
                "tmp_bytes": config.LEARNER_TMP_BYTES, "env": _learner_env()})

    def _exit_status(self) -> str:
        rc = self._proc.poll() if self._proc else None
        if rc is None:
            return "it stopped answering"
        return f"killed by signal {-rc}" if rc < 0 else f"exit {rc}"

    def _end(self, result) -> None:
        self._ended = result
        self.close()
        raise Ended(result)

    def _request(self, msg, what: str):
        """Send one request, wait for its answer (at most call_limit seconds)."""
        import time
        from judge.grading.result import Result, Verdict
        if self._ended is not None:
            raise Ended(self._ended)
        where = None
        try:
            if isinstance(msg, bytes):
                _write_raw(self._cmd, msg)
            elif msg is not None:
                _write_msg(self._cmd, msg)
            deadline = time.monotonic() + self.call_limit
            while True:
                try:
                    answer = _loads_plain(self._read_message(deadline, what))
                except (TimeoutError, EOFError, OSError):
                    raise
                except Exception as e:  # noqa: BLE001 - anything not plain is refused
                    answer = ("opaque", f"<a value that is not plain data: {e}>")
                if isinstance(answer, tuple) and len(answer) == 2 and answer[0] == "where":
                    where = answer[1]             # where the learner's code was just before the limit
                    continue
                break
        except TimeoutError:
            self._end(self._hang(what, where))
        except (EOFError, BrokenPipeError, OSError):
            try:
                self._proc.wait(timeout=2)
            except Exception:  # noqa: BLE001
                pass
            self._end(Result(Verdict.CRASH, f"your code ended its own process during {what} "
                             f"({self._exit_status()})",
                             details=["a graded file must not end the process (os._exit, os.kill, "
                                      "a fault in native code): return a value or raise an exception"]))
        if self.on_call is not None:
            self.on_call()
        return answer

    def _hang(self, what: str, where):
        """The HANG Result: the learner's file, line and function first, where its code was when time ran out."""
        from judge.grading.result import Result, Verdict
        try:
            file, line, func, text = where
            at = f"{file} line {int(line)}" + (f", in {func}" if func and func != "<module>" else "") + \
                (f" (`{text}`)" if text else "") + ": "
        except (TypeError, ValueError):
            at = ""
        return Result(Verdict.HANG, f"{at}{what} did not finish within {self.call_limit:.0f} s"
                      + (" (your code was there when the time ran out)" if at else "")
                      + "; the process running your code was stopped",
                      details=["a loop that never ends looks like this: a condition that never "
                               "becomes true, or a wait for something only later code would do"])

    def _read_message(self, deadline, what: str) -> bytes:
        """One framed message from the learner process (TimeoutError past the deadline)."""
        from judge.grading.result import Result, Verdict
        magic, n = _HEADER.unpack(_read_exact(self._rep, _HEADER.size, deadline))
        if magic != _MAGIC:
            self._end(Result(Verdict.CRASH, f"during {what}, your code wrote into the pipe that carries "
                             f"its answers to the judge; the answers could not be read",
                             details=["write to stdout (print) or files of your own, not to file "
                                      "descriptors your program did not open"]))
        if n > MAX_MESSAGE:
            self._end(Result(Verdict.WRONG, f"{what} returned a value of {n >> 20} MB: more than "
                             f"the {MAX_MESSAGE >> 20} MB a graded answer may be"))
        return _read_exact(self._rep, n, deadline)

    def _handle(self, answer, what: str):
        from judge.grading.result import Result, Verdict
        kind = answer[0] if isinstance(answer, tuple) and answer else None
        if kind == "ok":
            return answer[1]
        if kind == "opaque":
            return Opaque(str(answer[1]))
        if kind == "err":
            raise _rebuild(answer[1])
        if kind == "exit":
            code, where = answer[1], answer[2]
            at = f" ({where[0]} line {where[1]})" if where else ""
            self._end(Result(Verdict.CRASH, f"your code called sys.exit({code!r}) during {what}{at}",
                             details=["a graded file must not end the process: return a value or "
                                      "raise an exception instead"]))
        raise Ended(Result(Verdict.CRASH, f"the process running your code answered {what} with "
                                          f"something that is not an answer"))

    # ---------------------------------------------------------------- what the check uses
    def module(self) -> "LearnerModule":
        """Import the file (once); the proxy. Raises the learner's exception if the import failed."""
        if self._names is None and self._import_error is None:
            what = f"importing your {self.label}"
            init = self._start()
            first = self._request(init, what)
            if not (isinstance(first, tuple) and len(first) == 3 and first[0] == "isolation"):
                from judge.grading.result import Result, Verdict
                self._end(Result(Verdict.CRASH, "the process for your code did not start as it should"))
            self.isolation = str(first[1])      # sent before any learner code ran: it cannot be forged
            self.best_effort_why = str(first[2])    # why no boundary stands ("" when one does)
            answer = self._request(None, what)
            try:
                self._names = dict(self._handle(answer, what))
            except Ended:
                raise
            except Exception as e:  # noqa: BLE001 - the learner's exception, rebuilt
                self._import_error = e
        if self._import_error is not None:
            raise self._import_error
        return LearnerModule(self)

    @property
    def best_effort(self) -> bool:
        """True when the kernel gave no boundary and only the process and the audit hook stood."""
        return bool(self.best_effort_why)

    def call(self, fn: str, args, kwargs):
        what = _call_text(fn, args, kwargs)
        return self._handle(self._request(("call", fn, tuple(args), dict(kwargs)), what), what)

    def get(self, name: str):
        return self._handle(self._request(("get", name), name), name)

    def close(self) -> None:
        p = self._proc
        if p is not None and p.poll() is None:
            try:
                p.kill()
            except ProcessLookupError:
                pass
            p.wait()
        for fd in (getattr(self, "_cmd", None), getattr(self, "_rep", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._cmd = self._rep = None
        self._tmp.cleanup()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


class LearnerModule:
    """The learner's module as the check sees it: functions run in the learner process."""

    def __init__(self, proc: LearnerProcess):
        object.__setattr__(self, "_proc", proc)

    def __dir__(self):
        return sorted(self._proc._names)

    def __getattr__(self, name: str):
        names = self._proc._names
        if name.startswith("__") or name not in names:
            raise AttributeError(f"{self._proc.label} defines no {name}")
        if not names[name]:
            return self._proc.get(name)
        proc = self._proc

        def learner_function(*args, **kwargs):
            return proc.call(name, args, kwargs)
        learner_function.__name__ = learner_function.__qualname__ = name
        return learner_function

    def __repr__(self):
        return f"<your {self._proc.label}, running in its own process>"

