"""The check server (judge.grading.check_server): a check child forked from it is the child a fresh interpreter was.

Run: python -m pytest tests/grading/test_check_server.py -q

The module asks for the server from the first check (check_server.AFTER = 0) and shares one server
where it can (a server's start is most of a test's time). What the forked child is, as it sees itself
(tests/grading/probes/isolation_probes.py whoami): a session of its own, no descriptor but its stdio
and channel, this check's environment and directory, fresh random state. What the caller sees: the
exit status and the kills of a fresh child, a result voided when the server dies under a check,
another server for another import path, a fresh interpreter when a module the server imported
changed, the server and its checks gone with their caller. The verdicts themselves through the
server: tests/grading/test_isolation.py and test_sandbox.py, whose checks after a worker's first one
are served.
"""
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from judge import config
from judge.grading import check_process as isolate
from judge.grading import check_server
from judge.grading.result import Verdict

PROBES = Path(__file__).parent / "probes" / "isolation_probes.py"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the server is tested on Linux")


@pytest.fixture(autouse=True, scope="module")
def served():
    """The server from the first check, none left over from another module, none left behind. The tests
    share one server where they can (a server's start is most of a test's time here)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(check_server.ENV_VAR, raising=False)
        mp.setattr(check_server, "AFTER", 0)
        check_server.shutdown()
        yield
        check_server.shutdown()


def _whoami():
    r = isolate.run_function(PROBES, "whoami")
    assert r.verdict == Verdict.PASS, r
    return r.measurements["value"]


def _server_pid() -> int:
    assert check_server._server is not None and check_server._server.alive
    return check_server._server.proc.pid


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return True


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return _gone(pid)


def test_a_served_check_is_the_servers_child_leading_a_session_of_its_own():
    me = _whoami()
    assert me["ppid"] == _server_pid() != os.getpid()
    assert me["sid"] == me["pgid"] == me["pid"]            # os.killpg(pid) reaches it and all it starts
    assert me["dumpable"] == 1                             # as a fresh process, until it starts learner code


def test_a_served_check_holds_its_stdio_and_its_channel_and_nothing_else():
    me = _whoami()
    assert Path(me["argv"][0]) == Path(isolate.__file__).with_name("check_child.py")
    chan = int(me["argv"][1])
    assert me["fds"] == [0, 1, 2, chan], me["fds"]          # no socket of the server, no other run's pipes


def test_a_served_check_gets_this_checks_environment_and_directory(monkeypatch):
    monkeypatch.setenv("JUDGE_PROBE_SETTING", "first")
    first = _whoami()
    server = _server_pid()
    monkeypatch.setenv("JUDGE_PROBE_SETTING", "second")
    monkeypatch.setenv("JUDGE_TIMEOUT", "7")
    second = _whoami()
    assert _server_pid() == server                         # JUDGE_* is read per check: one server serves both
    assert first["env"]["JUDGE_PROBE_SETTING"] == "first" and second["env"]["JUDGE_PROBE_SETTING"] == "second"
    assert second["env"]["JUDGE_TIMEOUT"] == "7" and "JUDGE_TIMEOUT" not in first["env"]
    assert second["cwd"] == str(config.ROOT)
    monkeypatch.setenv(check_server.ENV_VAR, "0")           # the same check in a fresh interpreter
    fresh = _whoami()
    assert fresh["ppid"] == os.getpid()
    for env in (second["env"], fresh["env"]):
        env.pop(check_server.ENV_VAR, None)
    assert second["env"] == fresh["env"]
    assert second["cwd"] == fresh["cwd"] and second["argv"][0] == fresh["argv"][0]


def test_each_served_check_draws_numpys_global_random_state_afresh():
    draws = {_whoami()["np_random"] for _ in range(3)}
    assert len(draws) == 3, draws


def test_exit_statuses_come_back_as_from_a_fresh_child():
    r = isolate.run_function(PROBES, "python_dies")
    assert r.verdict == Verdict.CRASH and "exit 3" in r.message, r
    r = isolate.run_function(PROBES, "sends_a_result_then_dies")
    assert r.verdict == Verdict.CRASH and "killed by signal 9" in r.message, r
    r = isolate.run_function(PROBES, "python_raises")
    assert r.verdict == Verdict.CRASH and "ValueError" in r.message, r
    r = isolate.run_function(PROBES, "worker_dumpable")
    assert r.verdict == Verdict.PASS and r.measurements["value"] == [1, 0], r
    assert isolate.run_function(PROBES, "python_returns").measurements["value"] == 42


def test_a_hang_kills_the_served_check_and_everything_it_started(tmp_path):
    pid_file = tmp_path / "sleeper.pid"
    t = time.monotonic()
    r = isolate.run_function(PROBES, "starts_a_sleeper_then_loops", timeout=2, pid_file=str(pid_file))
    assert r.verdict == Verdict.HANG and time.monotonic() - t < 10, r
    assert _wait_gone(int(pid_file.read_text())), "the check's own child outlived the HANG"
    assert isolate.run_function(PROBES, "python_returns").verdict == Verdict.PASS


def test_checks_from_several_threads_share_one_server():
    with ThreadPoolExecutor(max_workers=4) as pool:
        seen = list(pool.map(lambda _: _whoami(), range(8)))
    assert {m["ppid"] for m in seen} == {_server_pid()}
    assert len({m["pid"] for m in seen}) == 8


def test_a_server_that_dies_under_a_check_voids_its_result(tmp_path):
    mark = tmp_path / "child.pid"
    results = []
    worker = threading.Thread(target=lambda: results.append(
        isolate.run_function(PROBES, "sleeps_then_returns", timeout=10, seconds=1.0, mark=str(mark))))
    worker.start()
    end = time.monotonic() + 30
    while not mark.exists() and time.monotonic() < end:
        time.sleep(0.05)
    server = check_server._server.proc
    server.kill()                                          # the status of the running check is lost with it
    worker.join(60)
    r = results[0]
    assert r.verdict == Verdict.CRASH and "killed by signal 9" in r.message, r   # never the PASS it sent
    assert _wait_gone(int(mark.read_text()))
    me = _whoami()                                         # the next check gets a new server
    assert me["ppid"] == _server_pid() != server.pid


def test_another_import_path_starts_another_server_and_a_changed_module_file_a_fresh_interpreter(
        tmp_path, monkeypatch):
    _whoami()
    old = check_server._server.proc
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("PROBE = 1\n")  # imported by every interpreter started with it
    monkeypatch.setenv("PYTHONPATH", str(site))           # read while importing: another server
    first = _whoami()
    server = check_server._server.proc
    assert first["ppid"] == server.pid != old.pid
    assert old.wait(timeout=10) == 0                       # the old one was told to go, and went
    (site / "sitecustomize.py").write_text("PROBE = 22\n")
    stale = _whoami()
    assert stale["ppid"] == os.getpid()                    # not forked from code that changed since
    assert server.wait(timeout=10) == 0
    again = _whoami()
    assert again["ppid"] == _server_pid() != server.pid


def test_the_first_check_of_a_process_and_judge_check_server_0_start_a_fresh_interpreter(monkeypatch):
    check_server.shutdown()
    monkeypatch.setattr(check_server, "AFTER", 1)
    assert _whoami()["ppid"] == os.getpid() and check_server._server is None
    assert _whoami()["ppid"] == _server_pid()
    monkeypatch.setenv(check_server.ENV_VAR, "0")
    assert _whoami()["ppid"] == os.getpid()


def test_the_server_and_a_check_it_runs_leave_with_their_caller(tmp_path):
    """The caller dies during its second check: the check, what it started and the server go too."""
    pid_file = tmp_path / "sleeper.pid"
    code = ("import os, threading, time\n"
            "from judge.grading import check_process as isolate, check_server\n"
            "check_server.AFTER = 0\n"
            f"assert isolate.run_function({str(PROBES)!r}, 'python_returns').measurements['value'] == 42\n"
            f"threading.Thread(target=isolate.run_function, args=({str(PROBES)!r}, 'starts_a_sleeper_then_loops'),\n"
            f"                 kwargs=dict(timeout=600, pid_file={str(pid_file)!r}), daemon=True).start()\n"
            f"while not os.path.exists({str(pid_file)!r}): time.sleep(0.05)\n"
            "print(check_server._server.proc.pid, flush=True)\n"
            "os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=config.ROOT, capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=str(config.ROOT)))
    assert out.returncode == 0, out.stderr
    assert _wait_gone(int(pid_file.read_text())), "the check's own child outlived its caller"
    assert _wait_gone(int(out.stdout.split()[-1])), "the server outlived the process that started it"
