"""The learner's Python runs in a process of its own, apart from the grader.

A CPU exercise's check.py runs in the judge's worker process (judge.grading.check_child). When it asks for the
learner's functions (sub.learner_module("schedule", ...)) it gets a proxy: each attribute is a
callable that runs in a second child, the learner process, started by this module:

    worker (check.py, the reference, judge.*)  --pickled call-->  learner process (your file only)
                                               <--plain values--

The learner process
  - imports a copy of the learner's file from an empty temporary folder (its working directory);
  - cannot import the judge (judge.*) nor anything of the course checkout (exercises/*/solution*,
    the checks), and cannot open, list or run files there: a meta-path finder and an audit hook
    (sys.addaudithook) refuse them, and it may not start other programs;
  - has no way to report progress or results: those travel from the worker to judge.grading.check_process on a
    private pipe the learner process does not inherit. Its stdout and stderr are shown as
    "your output";
  - answers each call within a time limit (JUDGE_TIMEOUT, 10 s for CPU exercises): a call that
    does not return in time is a HANG, and the learner process is killed.

Values coming back are plain data only (numbers, strings, tuples, lists, dicts, sets, NumPy arrays),
read with a restricted unpickler; anything else arrives as an Opaque stand-in showing its repr.
An exception raised by learner code is raised again in the worker as the same type (a subclass of
the nearest built-in type for the learner's own classes), with the learner's line in
`learner_where` ("timeline.py line 12"), which judge.grading.submission.learner_error shows.

This fence is against a learner's program reaching for the answers, not a security boundary
against deliberate attacks through ctypes or native code.

Run directly, this file is the learner process itself (`python -E -P -B judge/grading/learner_process.py FD FD`);
that side imports nothing but the standard library.
"""
from __future__ import annotations

import os
import pickle
import struct
import sys

MAX_MESSAGE = 64 << 20          # a learner's value larger than this is refused (bytes, pickled)
_HEADER = struct.Struct("<4sQ")   # magic, length
_MAGIC = b"LRN1"


# ============================================================== framing (both sides)
def _write_msg(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=4)
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
    text = [l for f in frames if f.filename != __file__
            for l in traceback.format_list([f])]
    return {"type": type(e).__name__, "bases": bases, "text": str(e), "args": args, "where": where,
            "traceback": ("".join(text) + "".join(traceback.format_exception_only(type(e), e)))[-4000:],
            "syntax": (e.msg, e.lineno, e.offset) if isinstance(e, SyntaxError) else None}


def _fence(root: str, learner_file: str) -> None:
    """Keep the learner's code out of the course checkout and away from other processes."""
    import importlib.abc
    import importlib.machinery

    root = os.path.realpath(root)
    allowed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    me = str(os.getpid())
    own_file = os.path.realpath(__file__)

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
        if p == root or p.startswith(root + os.sep):
            return not any(p == a or p.startswith(a + os.sep) for a in allowed)
        return p == own_file

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
    for name in [m for m in sys.modules if m.partition(".")[0] == "judge"]:
        del sys.modules[name]

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


def _child_main(cmd_fd: int, reply_fd: int) -> int:
    import importlib.util
    init = pickle.loads(_read_exact(cmd_fd, _HEADER.unpack(_read_exact(cmd_fd, _HEADER.size, None))[1], None))
    learner_file, name = init["file"], init["module"]
    os.chdir(os.path.dirname(learner_file))
    sys.argv = [learner_file]
    _fence(init["root"], learner_file)

    def reply(obj):
        try:
            _write_msg(reply_fd, obj)
        except (TypeError, pickle.PicklingError, AttributeError):
            _write_msg(reply_fd, ("opaque", repr(obj[1])[:300]))

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
                fn, args, kwargs = rest
                answer(getattr(mod, fn)(*args, **kwargs))
            elif op == "get":
                answer(getattr(mod, rest[0]))
        except BaseException as e:  # noqa: BLE001
            failed(e)


# ============================================================== the worker's side
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

    # ---------------------------------------------------------------- the process
    def _start(self):
        import subprocess
        from judge import config
        copy = os.path.join(self._tmp.name, self.path.name)
        with open(copy, "wb") as f:
            f.write(self.path.read_bytes())
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("JUDGE_", "PYTHON")) or k == "PYTHONIOENCODING"}
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("MPLBACKEND", "Agg")
        self._proc = subprocess.Popen(
            [sys.executable, "-E", "-P", "-B", "-u", os.path.abspath(__file__), str(cmd_r), str(rep_w)],
            pass_fds=(cmd_r, rep_w), stdin=subprocess.DEVNULL, cwd=self._tmp.name, env=env)
        os.close(cmd_r)
        os.close(rep_w)
        self._cmd, self._rep = cmd_w, rep_r
        stem = "".join(c if c.isalnum() else "_" for c in self.path.stem)
        _write_msg(self._cmd, {"file": copy, "module": f"{stem}", "root": str(config.ROOT)})

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
        try:
            if msg is not None:
                _write_msg(self._cmd, msg)
            deadline = time.monotonic() + self.call_limit
            magic, n = _HEADER.unpack(_read_exact(self._rep, _HEADER.size, deadline))
            if magic != _MAGIC:
                self._end(Result(Verdict.CRASH, f"during {what}, your code wrote into the pipe that carries "
                                 f"its answers to the judge; the answers could not be read",
                                 details=["write to stdout (print) or files of your own, not to file "
                                          "descriptors your program did not open"]))
            if n > MAX_MESSAGE:
                self._end(Result(Verdict.WRONG, f"{what} returned a value of {n >> 20} MB: more than "
                                 f"the {MAX_MESSAGE >> 20} MB a graded answer may be"))
            data = _read_exact(self._rep, n, deadline)
        except TimeoutError:
            self._end(Result(Verdict.HANG, f"{what} did not finish within {self.call_limit:.0f} s; the "
                             f"process running your code was stopped",
                             details=["a loop that never ends looks like this: a condition that never "
                                      "becomes true, or a wait for something only later code would do"]))
        except (EOFError, BrokenPipeError, OSError):
            try:
                self._proc.wait(timeout=2)
            except Exception:  # noqa: BLE001
                pass
            self._end(Result(Verdict.CRASH, f"your code ended its own process during {what} "
                             f"({self._exit_status()})",
                             details=["a graded file must not end the process (os._exit, os.kill, "
                                      "a fault in native code): return a value or raise an exception"]))
        try:
            answer = _loads_plain(data)
        except Exception as e:  # noqa: BLE001 - anything not plain is refused
            return ("opaque", f"<a value that is not plain data: {e}>")
        if self.on_call is not None:
            self.on_call()
        return answer

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
            self._start()
            what = f"importing your {self.label}"
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


if __name__ == "__main__":
    sys.exit(_child_main(int(sys.argv[1]), int(sys.argv[2])))
