"""A cheat for pipeline_timeline: it forges a PASS (as forge_via_proc.py does), then kills the
grader's worker, its parent, with SIGKILL (and its whole process group, kill(0, SIGKILL)), hoping
the judge takes the forged result of a worker that died. The judge must say CRASH where the kill
lands (best effort), and WRONG where the worker is out of its reach (the namespaces).
"""
import os
import signal

# tests/grading/test_sandbox.py puts forge_via_proc.py's text above this line (a graded file comes alone)


def schedule(K, L, C, S):
    forge()  # noqa: F821 - defined by forge_via_proc.py's text, inlined above
    for pid in (os.getppid(), 0):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return []


def pipeline_time(K, L, C, S):
    return schedule(K, L, C, S)
