"""A warm process that forks check children with the grader's modules already imported.

    proc = check_server.spawn(env, cwd, chan_fd)   # a handle like subprocess.Popen's, or None
    python -m judge.grading.check_server FD        # the server itself: judge.grading.check_process starts it

Every check runs in a child process of its own (judge.grading.check_process). Started as a fresh Python,
that child spends about half a second importing NumPy, hypothesis, the judge and the CPU model before it
reads its request: on a class, a notebook or the test suite, the larger part of a Python exercise's
grading. So, from a process's second check on, the child is forked from this server instead: a process
that imported those modules once (PRELOAD), then does nothing but fork. The child then runs
judge.grading.check_child.main exactly as a fresh one would: its request on stdin, the private channel,
its output on one pipe. What makes it the same child:

  - environment, working directory, argv: the caller's for this check, set in the child before any
    code of the check runs. A server serves only callers whose environment equals the one it was
    started with but for JUDGE_* and PYTEST_* (read when a check runs, never while importing), with the
    same interpreter and working directory; for any other the caller starts another server;
  - a session of its own, entered before the caller learns its pid: os.killpg from check_process
    reaches it and everything it started (its learner processes), as before;
  - no descriptor but stdin, stdout/stderr (one pipe) and the channel: the server's own sockets are
    closed in the child before anything else, so neither the check nor the learner processes it starts
    can reach them;
  - dumpable, as a freshly executed process is (check_child makes itself not dumpable before any
    learner code runs). The server itself is not dumpable: no process of the same user may read its
    memory or its descriptors, nor trace it;
  - fresh random states: Python's random reseeds itself in a forked child; NumPy's global state is
    drawn again here;
  - the exit status: the child is the server's, so the server reaps it and sends its status, as
    subprocess reports it (the exit code, or minus the signal), on a socket of that run's own. A
    status that does not come (the server died) is reported as a kill after the child's whole group is
    killed: check_process counts a result only from a child that exits 0, so this is never a PASS;
  - the same code: before each fork the server compares the files of every module it imported with
    what they were when it imported them; once one changed it answers "stale" to every request (the
    caller then starts a fresh interpreter for that check, retires the server and starts a new one
    for the next);
  - no CUDA: nothing it imports initialises a GPU (the child of a GPU check does that for itself), and
    the server refuses to serve if a CUDA library is in its memory map after importing.

The first check of a process starts a fresh interpreter as before (a one-shot `course check` pays
nothing for a server); JUDGE_CHECK_SERVER=0 makes every check do so, and so does any system but Linux. A server takes no more requests
once its caller closes the control socket (the caller retired it, or died), and exits when the last
check it forked has ended; a check whose caller closed that run's status socket (the caller died, or
let it go) is killed with its whole group, as nobody reads its result. Tests:
tests/grading/test_check_server.py (and every isolation test of tests/grading/test_isolation.py and
test_sandbox.py after a worker's first check).
"""
from __future__ import annotations

import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading

#: what the server imports once: everything a Python or a CUDA check imports before its exercise's own
#: check.py, CuPy aside (a forked CUDA context is unusable; the child imports CuPy for itself), and
#: ml_dtypes (1.3 s to import: the block-scaled formats' and bfloat16's checks and model runs cast with it)
PRELOAD = ("numpy", "ml_dtypes", "hypothesis", "hypothesis.strategies", "hypothesis.extra.numpy",
           "judge.grading.check_child", "judge.grading.exercise", "judge.grading.submission",
           "judge.grading.learner_process", "judge.grading.result", "judge.grading.cpu_flow",
           "judge.grading.cuda_flow", "judge.grading.compare", "judge.grading.workspace",
           "judge.hw.formats", "judge.hw.mma_layout", "judge.hw.pipesim",
           "judge.hw.tma", "judge.hw.tma_plan", "judge.hw.tmem", "judge.hw.umma", "judge.hw.wgmma",
           "judge.model", "judge.gpu.build", "judge.gpu.launch", "judge.gpu.timing")
#: variables a check reads when it runs, never while importing: a server serves any values of them
PER_CHECK = ("JUDGE_", "PYTEST_")
ENV_VAR = "JUDGE_CHECK_SERVER"      # 0: every check in a fresh interpreter
AFTER = 1                           # checks a process runs in fresh interpreters before it starts a server
READY_S = 120.0                     # a server not ready (its imports done), or not forking, by then is given up
_MAX_MSG = 1 << 20


# ============================================================== the caller's side
class ForkedCheck:
    """A check child forked by the server: what judge.grading.check_process uses of a subprocess.Popen."""

    def __init__(self, pid: int, stdin, stdout, status: socket.socket):
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self.returncode: int | None = None
        self._status = status
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        if self.returncode is None:
            r, _, _ = select.select([self._status], [], [], 0)
            if r:
                self.wait()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self._lock:
            if self.returncode is None:
                self._status.settimeout(timeout)
                try:
                    msg = self._status.recv(256)
                except TimeoutError:
                    raise subprocess.TimeoutExpired("check child", timeout) from None
                except OSError:
                    msg = b""
                self.returncode = _exit_code(msg, self.pid)
                self._status.close()
        return self.returncode


def _exit_code(msg: bytes, pid: int) -> int:
    """The child's exit code from the server's "exit N", or: the server is gone, so the child is killed
    (its whole group, as a HANG would be) and reported as killed, which no result survives."""
    words = msg.decode("ascii", "replace").split()
    if len(words) == 2 and words[0] == "exit":
        try:
            return int(words[1])
        except ValueError:
            pass
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return -signal.SIGKILL


class _Server:
    """The caller's end of one server process."""

    def __init__(self, key, env: dict, cwd: str):
        self.key = key
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "judge.grading.check_server", str(theirs.fileno())],
                                         cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                                         start_new_session=True)
        finally:
            theirs.close()
        self.sock = mine
        self.lock = threading.Lock()
        self.sock.settimeout(READY_S)
        try:
            self.alive = self.sock.recv(256) == b"ready"      # after its imports; b"" if it gave up
        except OSError:
            self.alive = False
        self.sock.settimeout(None)

    def fork(self, env: dict, cwd: str, chan_w: int) -> ForkedCheck | None:
        """One check child, or None when the server cannot give one (then it is finished)."""
        stdin_r, stdin_w = os.pipe()
        out_r, out_w = os.pipe()
        status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        request = json.dumps({"env": env, "cwd": cwd}).encode()
        try:
            with self.lock:
                socket.send_fds(self.sock, [request], [stdin_r, out_w, chan_w, theirs.fileno()])
        except OSError:
            self.alive = False
        finally:
            for fd in (stdin_r, out_w):
                os.close(fd)
            theirs.close()
        msg = b""
        if self.alive:
            status.settimeout(READY_S)             # a fork takes milliseconds: a server that does not answer is stuck
            try:
                msg = status.recv(256)
            except OSError:
                msg = b""
            status.settimeout(None)
        words = msg.decode("ascii", "replace").split()
        if len(words) != 2 or words[0] != "pid":
            self.alive = False           # stale, or gone
            status.close()
            os.close(stdin_w)
            os.close(out_r)
            return None
        return ForkedCheck(int(words[1]), os.fdopen(stdin_w, "wb"), os.fdopen(out_r, "rb"), status)

    def retire(self) -> None:
        """No more checks from it: it exits once the checks it runs now have ended (their statuses sent)."""
        self.alive = False
        self.sock.close()
        _retired.append(self.proc)

    def ready(self) -> bool:
        return self.alive and self.proc.poll() is None


_server: _Server | None = None
_started = 0                         # checks this process started
_refused: set = set()                # keys for which a server never became ready: fresh interpreters only
_retired: list = []                  # servers told to go, reaped once they have
_lock = threading.Lock()


def _key(env: dict, cwd: str):
    return (sys.executable, cwd, tuple(sorted((k, v) for k, v in env.items() if not k.startswith(PER_CHECK))))


def wanted(env: dict) -> bool:
    """Whether checks may be forked: on Linux (fork, descriptors passed on a SOCK_SEQPACKET socket), unless
    JUDGE_CHECK_SERVER=0."""
    return sys.platform.startswith("linux") and env.get(ENV_VAR, "").strip().lower() not in ("0", "no", "off")


def spawn(env: dict, cwd: str, chan_w: int) -> ForkedCheck | None:
    """A check child forked by this process's server (started or replaced as needed), or None: start a
    fresh interpreter (the first AFTER checks, JUDGE_CHECK_SERVER=0, or no server could give one)."""
    global _server, _started
    with _lock:
        _started += 1
        _retired[:] = [p for p in _retired if p.poll() is None]
        key = _key(env, cwd)
        if not wanted(env) or _started <= AFTER or key in _refused:
            return None
        if _server is not None and (_server.key != key or not _server.ready()):
            _server.retire()
            _server = None
        if _server is None:
            try:
                _server = _Server(key, env, cwd)
            except OSError:
                _refused.add(key)
                return None
            if not _server.alive:
                _refused.add(key)
                _server.retire()
                _server = None
                return None
        server = _server
    child = server.fork(env, cwd, chan_w)
    if child is None:
        with _lock:
            if _server is server:
                _server.retire()
                _server = None
    return child


def shutdown(timeout: float = 30.0) -> None:
    """Retire this process's server and wait for every retired one to end (a test's way to start from none)."""
    global _server, _started
    with _lock:
        if _server is not None:
            _server.retire()
        _server, _started = None, 0
        _refused.clear()
        for p in _retired:
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        _retired.clear()


def _forget_in_child() -> None:
    """A process forked from a caller starts with no server: the ones it inherited answer its parent."""
    global _server, _started, _lock, _retired
    _server, _started, _lock, _retired = None, 0, threading.Lock(), []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


# ============================================================== the server's side
def _dumpable(flag: bool) -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, int(flag), 0, 0, 0)      # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def _module_files() -> dict[str, tuple[int, int]]:
    """Every imported module's file -> (mtime_ns, size) as it is now."""
    out = {}
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if f and f not in out:
            try:
                st = os.stat(f)
            except OSError:
                continue
            out[f] = (st.st_mtime_ns, st.st_size)
    return out


def _changed(files: dict[str, tuple[int, int]]) -> bool:
    for f, sig in files.items():
        try:
            st = os.stat(f)
        except OSError:
            return True
        if (st.st_mtime_ns, st.st_size) != sig:
            return True
    return False


def _cuda_mapped() -> bool:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any("libcuda" in line or "libcudart" in line for line in f)
    except OSError:
        return False


def _exit_like_python(code) -> int:
    """The status a `python -m` run ends with after its main returned `code` or raised SystemExit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:  # noqa: BLE001 - a code that cannot be printed still ends the run with 1
        pass
    return 1


def _child(request: dict, stdin_r: int, out_w: int, chan_w: int) -> None:
    """In the forked child: become what `python -m judge.grading.check_child FD` is, then run it. Never returns."""
    code = 1
    try:
        os.dup2(stdin_r, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        chan = os.dup(chan_w) if chan_w <= 2 else chan_w
        os.closerange(3, chan)
        os.closerange(chan + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
        os.set_inheritable(chan, False)
        _dumpable(True)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        from judge.grading import check_child
        sys.argv = [check_child.__file__, str(chan)]
        try:
            code = _exit_like_python(check_child.main(sys.argv))
        except SystemExit as e:
            code = _exit_like_python(e.code)
        except BaseException:  # noqa: BLE001 - as the interpreter would: the traceback on stderr, status 1
            import traceback
            traceback.print_exc()
            code = 1
        for t in threading.enumerate():          # as at the interpreter's exit: wait for non-daemon threads
            if t is not threading.current_thread() and not t.daemon:
                t.join()
        import atexit
        atexit._run_exitfuncs()
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:  # noqa: BLE001 - a closed stream is nothing to flush
                pass
    finally:
        os._exit(code)


def serve(sock: socket.socket) -> int:
    """Import PRELOAD, say "ready", then fork one child per request until the caller goes."""
    _dumpable(False)
    for name in PRELOAD:
        importlib.import_module(name)
    if _cuda_mapped():
        return 1                                  # the caller reads b"" and starts fresh interpreters
    import gc
    files = _module_files()
    gc.collect()
    gc.freeze()                                   # the children share the imported modules' pages
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}     # pid -> the socket its status goes to
    orphans: set[int] = set()                     # children whose caller closed its end: killed, not yet reaped
    open_, stale = True, False
    sock.send(b"ready")

    def reap():
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            orphans.discard(pid)
            s = children.pop(pid, None)
            if s is not None:
                try:
                    s.send(f"exit {os.waitstatus_to_exitcode(status)}".encode())
                except OSError:
                    pass
                s.close()

    # until the caller closes the control socket (it went, or retired this server), then until the last
    # child it started has ended and its status is sent
    while open_ or children:
        watched = [s for pid, s in children.items() if pid not in orphans]
        r, _, _ = select.select([wake_r, *watched] + ([sock] if open_ else []), [], [])
        if wake_r in r:
            try:
                while os.read(wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
            reap()
        for pid, s in list(children.items()):
            if s in r and pid not in orphans:     # the caller closed its end: nobody waits for this check
                orphans.add(pid)
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if not open_ or sock not in r:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MAX_MSG, 4)
        except OSError:
            data, fds = b"", []
        if not data or len(fds) != 4:
            for fd in fds:
                os.close(fd)
            open_ = open_ and bool(data)
            continue
        stdin_r, out_w, chan_w, status_fd = fds
        status = socket.socket(fileno=status_fd)
        stale = stale or _changed(files)
        try:
            request = json.loads(data)
        except ValueError:
            request = None
        if stale or not isinstance(request, dict):  # every request from now on: start a fresh interpreter
            try:
                status.send(b"stale")
            except OSError:
                pass
            for fd in (stdin_r, out_w, chan_w):
                os.close(fd)
            status.close()
            continue
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for s in (sock, status, *children.values()):
                    s.detach()                    # closed with every other descriptor in _child, by number
                os.setsid()
                os.close(ready_w)                 # the server learns: the session exists
            except BaseException:  # noqa: BLE001 - a child that cannot become one ends at once
                os._exit(1)
            _child(request, stdin_r, out_w, chan_w)
        os.close(ready_w)
        for fd in (stdin_r, out_w, chan_w):
            os.close(fd)
        os.read(ready_r, 1)                       # EOF once the child leads its session (or died)
        os.close(ready_r)
        children[pid] = status
        try:
            status.send(f"pid {pid}".encode())
        except OSError:
            pass
        reap()                                    # a child that ended before it was registered
    return 0

if __name__ == "__main__":
    sys.exit(serve(socket.socket(fileno=int(sys.argv[1]))))
