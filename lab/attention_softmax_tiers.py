"""On an H100/H200: grade exercise attention_softmax's solution once and set the exercise's tiers from the fraction
of SDPA flash it measured (gold 0.85x, silver 0.70x, bronze 0.50x of it, each rounded down to 0.05), as the other
GPU exercises' tiers sit under their solutions. Rewrites exercises/attention_softmax/exercise.toml in place and
copies it to $OUT; run the record's exercises part after it, so that the record grades the tiers it ships with:

    PYTHONPATH=$PWD OUT=/tmp/out python -m lab.attention_softmax_tiers && \
        python -m judge.record.hopper_run --part exercises --only attention_softmax --out $OUT
"""
import math
import os
import re
import shutil

from judge import gpu
from judge.grading import exercise, grade

ex = next(e for e in exercise.all_exercises() if e.id == "attention_softmax")
r = grade.check(ex.id, ex.solution_path, quiet=True)
print("solution:", r.verdict.value, r.tier, r.measurements, r.message[:300], flush=True)
f = float(r.measurements["fraction"])


def down(x):
    return math.floor(x * 20) / 20


tiers = {"bronze": down(0.50 * f), "silver": down(0.70 * f), "gold": down(0.85 * f)}
path = ex.folder / "exercise.toml"
text = path.read_text()
block = ("# the solution ran at %.2f of SDPA flash on an %s when these were set: gold 0.85x, silver 0.70x, bronze "
         "0.50x of it\n[tiers]\nbronze = %.2f\nsilver = %.2f\ngold = %.2f\n"
         % (f, gpu.info().name.replace("NVIDIA ", ""), tiers["bronze"], tiers["silver"], tiers["gold"]))
new = re.sub(r"(# [^\n]*\n)?\[tiers\]\nbronze = [0-9.]+\nsilver = [0-9.]+\ngold = [0-9.]+\n", block, text)
assert new != text, "no [tiers] block of three lines in exercise.toml"
path.write_text(new)
if os.environ.get("OUT"):
    shutil.copy(path, os.path.join(os.environ["OUT"], "exercise.toml"))
print(tiers)
