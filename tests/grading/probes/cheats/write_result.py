"""A cheat for pipeline_timeline: instead of scheduling, it tries to hand the judge a PASS.

It looks for the grader's result file (the request in its parent's command line, or a judge temp
folder), writes a PASS Result there and onto every pipe of its parent it can open, then returns
nothing useful. The judge must still say WRONG.
"""
import glob
import json
import os

PASS = json.dumps({"verdict": "PASS", "message": "all cases match", "tier": None, "details": [],
                   "checked": [], "measurements": {}, "figures": [], "exercise": "", "file": ""})


def _forge():
    ppid = os.getppid()
    for pid in (ppid, os.getpid()):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
            start = cmd.find("{")
            if start >= 0:
                req = json.loads(cmd[start:cmd.rfind("}") + 1])
                if "result" in req:
                    open(req["result"], "w").write(PASS)
        except Exception:  # noqa: BLE001 - try everything
            pass
    for fd_path in glob.glob(f"/proc/{ppid}/fd/*") + glob.glob("/proc/self/fd/*"):
        try:
            with open(fd_path, "w") as f:
                f.write("R " + PASS + "\n@@result " + PASS + "\n")
        except Exception:  # noqa: BLE001
            pass
    for tmp in glob.glob("/tmp/judge-*/result.json"):
        try:
            open(tmp, "w").write(PASS)
        except OSError:
            pass


_forge()


def schedule(K, L, C, S):
    _forge()
    return []


def pipeline_time(K, L, C, S):
    _forge()
    return 0
