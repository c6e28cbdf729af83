"""A learner file that tries to leave code for the grader's next run: it writes a file into its own
site-packages, the user's site-packages, the real home folder, the course (ROOT, filled in by
tests/grading/test_sandbox.py) and the kernel cache. A sitecustomize.py there would run inside the next
worker, with its channel. This probe writes only a harmless marker named by the test, and says
where it could write. Behind the boundary it can write nowhere but its own /tmp.
"""
import os
import pwd
import site
import sys

ROOT = "@ROOT@"


def places():
    home = pwd.getpwuid(os.getuid()).pw_dir
    out = [os.path.join(p, "") for p in site.getsitepackages()]
    out += [site.getusersitepackages(), home, os.path.join(home, ".cache", "hopper-course"), sys.prefix,
            ROOT, os.path.join(ROOT, "judge"), "/var/tmp", "/dev/shm"]
    return [p for p in out if p and not p.startswith("@")]


def plant(marker):
    wrote = []
    for d in places():
        path = os.path.join(d, marker)
        try:
            with open(path, "w") as f:
                f.write("planted by tests/grading/probes/cheats/plant_for_grader.py\n")
            wrote.append(path)
        except OSError:
            pass
    return wrote


def schedule(K, L, C, S):
    return []


def pipeline_time(K, L, C, S):
    return 0
