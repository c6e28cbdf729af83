"""tests/chapters/ch04_wgmma/test_regalloc.py - chapter 4's register split: what the kernels declare against the rules of
setmaxnreg (exercises/setmaxnreg_split/reference.py, PTX ISA, setmaxnreg), ptxas and the CPU model holding to the same rules, and the
exercise setmaxnreg_split (python practice/judge.py check setmaxnreg_split).

Run: python -m pytest tests/chapters/ch04_wgmma/test_regalloc.py -q      (no GPU: kernels are compiled with NVRTC)
"""
import re

import numpy as np
import pytest

from judge import config, model
from judge.gpu import build
from judge.grading import cpu_flow as flow
from judge.grading import exercise, grade
from judge.grading.result import Verdict

regalloc = exercise.get("setmaxnreg_split").reference_module()

from tests.checking import graded_here

HERE = config.ROOT / "chapters" / "ch04_wgmma"
from chapters.ch04_wgmma import ladder  # noqa: E402

EX = exercise.get("setmaxnreg_split")
SPLITTING = sorted(p for p in HERE.glob("*.cu") if "regs_dec<" in p.read_text())


# ----------------------------------------------------------------------------- what the kernels declare
def _defines(text):
    """The first #define of each name: the defaults a build without defines gets."""
    out = {}
    for name, value in re.findall(r"^#define (\w+) (.+?)\s*(?://.*)?$", text, re.M):
        out.setdefault(name, value)
    return out


def _value(expr, defines):
    """A macro expression of the file's #defines, as an int (C's / on ints is //)."""
    for _ in range(10):
        expr = re.sub(r"[A-Za-z_]\w*", lambda m: f"({defines[m.group(0)]})" if m.group(0) in defines else m.group(0),
                      expr)
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}))


def declared(path):
    """(threads, blocks per SM of __launch_bounds__, the producers' .dec counts, the consumers' .inc counts)."""
    text = path.read_text()
    bounds = re.search(r"__launch_bounds__\((\w+)(?:,\s*(\d+))?\)", text)
    threads = _value(bounds.group(1), _defines(text))
    decs = {int(n) for n in re.findall(r"regs_dec<(\d+)>", text)}
    incs = {int(n) for n in re.findall(r"regs_inc<(\d+)>", text)}
    return threads, int(bounds.group(2) or 0), decs, incs


def launch_count(threads):
    """The most registers per thread __launch_bounds__(threads, 1) lets ptxas give: the SM's file, in units of 8."""
    return min(regalloc.MAX_AT_LAUNCH, regalloc.SM_REGISTERS // threads // 8 * 8)


def test_the_kernels_that_move_registers_are_the_warp_specialized_ones():
    names = {p.name for p in SPLITTING}
    assert {"gemm_03_warp_specialized.cu", "gemm_05_persistent.cu", "gemm_09_pingpong.cu"} <= names, names
    for p in sorted(HERE.glob("gemm_0*.cu")):
        threads, _, decs, incs = declared(p)
        if p not in SPLITTING:            # one warpgroup: nobody to give registers to
            judge_line = next(line for line in p.read_text().splitlines() if line.startswith("// judge:"))
            assert threads == 128 and not decs and not incs and "setmaxnreg" not in judge_line, p.name


@pytest.mark.parametrize("path", SPLITTING, ids=lambda p: p.name)
def test_each_kernel_s_split_is_ok_and_fills_its_pool(path):
    threads, blocks, decs, incs = declared(path)
    assert threads == 384 and blocks == 1, "__launch_bounds__(THREADS, 1): ptxas knows the count each warp starts with"
    assert len(decs) == len(incs) == 1, (decs, incs)
    dec, inc = decs.pop(), incs.pop()
    regs = launch_count(threads)
    assert regs == 168
    plan = regalloc.split_plan(threads, dec, inc)              # warpgroup 0 produces, 1 and 2 consume
    assert regalloc.outcome(threads, regs, plan) == "ok", regalloc.judge(threads, regs, plan)
    assert 128 * dec + (threads - 128) * inc == regalloc.cta_pool(threads, regs) == 64512   # not a register left
    assert regalloc.best_split(threads, regs) == (dec, inc) == (40, 232)
    # one producer register more, or one consumer unit more, and the kernel would hang
    assert regalloc.outcome(threads, regs, regalloc.split_plan(threads, dec + 8, inc)) == "hang"
    assert regalloc.outcome(threads, regs, regalloc.split_plan(threads, dec, inc + 8)) == "hang"


@pytest.mark.parametrize("r", [r for r in ladder.RUNGS + ladder.VARIANTS if r["threads"] > 128], ids=lambda r: r["name"])
def test_ptxas_starts_every_warp_specialized_rung_at_the_count_its_split_needs(r):
    b = ladder.build_rung(r["name"])
    regs = b.resources[r["kernel"]]["registers"]
    _, _, decs, incs = declared(HERE / r["file"])
    plan = regalloc.split_plan(r["threads"], min(decs), max(incs))
    assert regs == launch_count(r["threads"]) == 168, f"{r['name']}: ptxas starts each thread at {regs}"
    assert regalloc.outcome(r["threads"], regs, plan) == "ok", regalloc.judge(r["threads"], regs, plan)


# ----------------------------------------------------------------------------- the rules, held by ptxas and the model
def _count_kernel(n):
    return ('extern "C" __global__ void __launch_bounds__(256, 1) k(unsigned* out) {\n'
            '  if (threadIdx.x < 128) asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");\n'
            f'  else asm volatile("setmaxnreg.inc.sync.aligned.u32 {n};");\n'
            '  out[threadIdx.x] = 1;\n}\n')


@pytest.mark.parametrize("n", [16, 20, 228, 264, 24, 256])
def test_ptxas_refuses_the_counts_the_rules_call_illegal(n):
    """count.range is checked when the kernel is assembled: an illegal count never runs."""
    if regalloc.legal_count(n):
        build.compile(_count_kernel(n), target="sm_90a", name=f"count_{n}.cu")
    else:
        with pytest.raises(build.CompileError) as e:
            build.compile(_count_kernel(n), target="sm_90a", name=f"count_{n}.cu")
        assert "setmaxnreg" in str(e.value) and ("multiple of 8" in str(e.value) or "[24..256]" in str(e.value))


PLANS = r'''
extern "C" __global__ void __launch_bounds__(384, 1) plans(unsigned* out, int mode) {
  const int wg = threadIdx.x / 128, warp = threadIdx.x / 32 % 4;
  const bool producer = mode == 3 ? wg == 2 : wg == 0;      // mode 3: the producer is the last warpgroup
  if (producer) {
    if (mode == 1) { if (warp != 3) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;"); }
    else if (mode == 4) asm volatile("setmaxnreg.dec.sync.aligned.u32 48;");
    else asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
  } else {
    if (mode == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
    else if (mode == 5 && wg == 1 && warp == 3) asm volatile("setmaxnreg.inc.sync.aligned.u32 224;");
    else asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  }
  out[threadIdx.x] = threadIdx.x + 7;
}
'''
P, C = [("dec", 40)] * 4, [("inc", 232)] * 4
MODES = {
    0: ("the ladder's split", [P, C, C]),
    1: ("warp 3 of the producer skips its .dec", [P[:3] + [None], C, C]),
    2: ("the consumers ask 240: past the pool", [P, [("inc", 240)] * 4, [("inc", 240)] * 4]),
    3: ("the producer is the last warpgroup", [C, C, P]),
    4: ("the producer keeps 48: 65536 registers, the SM's, not the CTA's", [[("dec", 48)] * 4, C, C]),
    5: ("warp 3 of a consumer executes another .inc", [P, C[:3] + [("inc", 224)], C]),
}


@pytest.mark.parametrize("mode", sorted(MODES), ids=lambda m: MODES[m][0])
def test_the_cpu_model_runs_each_plan_as_the_rules_say(mode):
    b = build.compile(PLANS, target="sm_90a", name="plans.cu")
    regs = b.resources["plans"]["registers"]
    want = regalloc.outcome(384, regs, MODES[mode][1])
    out = np.full(384, 0xA5A5A5A5, np.uint32)
    try:
        model.run(b, "plans", grid=(1,), block=(384,), args=(out, np.int32(mode)))
        got = "ok"
    except model.Hang as e:
        got = "hang"
        assert "setmaxnreg" in str(e), str(e)
    assert got == want, f"{MODES[mode][0]}: the model says {got}, the rules {regalloc.judge(384, regs, MODES[mode][1])}"
    if got == "ok":
        assert (out == np.arange(384) + 7).all()


def test_the_rules_name_what_breaks_them():
    o = regalloc.judge(384, 168, [P[:3] + [None], C, C])
    assert o.rule == "warpgroup.aligned" and "warp 3 executes no setmaxnreg" in o.why and "PTX ISA, setmaxnreg" in o.why
    o = regalloc.judge(384, 168, [[("dec", 48)] * 4, C, C])
    assert o.rule == "pool.enough" and "65536" in o.why and "384 x 168 = 64512" in o.why
    o = regalloc.judge(384, 168, [[("dec", 176)] * 4, C, C])
    assert o.rule == "count.direction" and "cannot raise" in o.why
    o = regalloc.judge(384, 168, [[("dec", 20)] * 3 + [None], C, C])        # illegal first, though it would hang too
    assert o.verdict == "illegal" and o.rule == "count.range"
    with pytest.raises(ValueError):
        regalloc.cta_pool(384, 176)                                          # 67584 registers: cannot launch
    with pytest.raises(ValueError):
        regalloc.best_split(384, 168, producer_regs=176)                     # a .dec cannot raise the count


# ----------------------------------------------------------------------------- the exercise
def test_it_comes_after_the_warp_specialized_gemm_in_chapter_4():
    ch4 = sorted((e.order, e.id) for e in exercise.all_exercises() if e.chapter == 4)
    assert (5, "setmaxnreg_split") in ch4 and len({o for o, _ in ch4}) == len(ch4), ch4
    assert max(o for o, i in ch4 if i == "ws_gemm") < 5, ch4
    assert not EX.needs_gpu and EX.learner_file == "regalloc.py"


def test_the_statement_s_examples_are_what_the_rules_say():
    text = EX.statement()
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", text, re.M)
    assert len(rows) >= 15, rows
    names = {"P40": [("dec", 40)] * 4, "C232": [("inc", 232)] * 4, "NONE": [None] * 4}
    solution = EX.reference()
    for call, result in rows:
        want = eval(result, {})
        assert eval(call, {**names, **{f: getattr(regalloc, f) for f in ("cta_pool", "best_split", "outcome")}}) \
            == want, call
        assert eval(call, {**names, **vars(solution)}) == want, call


def test_the_untouched_starter_is_wrong_and_says_what_to_write():
    r = grade.check(EX.id, EX.starter_path, quiet=True)
    assert r.verdict == Verdict.WRONG and "NotImplementedError" in r.message and "cta_pool" in r.message, str(r)


def test_the_check_grades_against_its_reference_rules_not_the_solution():
    src = (EX.folder / "check.py").read_text()
    assert "reference_module()" in src and ".reference()" not in src and "solution" not in src


def _fails(mod, fn, edge):
    args = flow.as_args(edge.args)
    want = fn.reference(*args.args, **args.kwargs)
    try:
        got = getattr(mod, fn.name)(*args.args, **args.kwargs)
    except Exception:  # noqa: BLE001 - a mistake that raises is caught too
        return True
    return bool((fn.validate and fn.validate(args, got)) or flow.same(got, want))


#: each case the statement lists for a reason, and the mistake that it alone of all the listed cases catches
ONLY_IT_CATCHES = {
    "the ladder's kernels, every argument at its default": "wrong_split_default_24.py",
    "warp 3 of the producer warpgroup skips its setmaxnreg": "wrong_one_warp_enough.py",
    "warp 3 of the producer executes another setmaxnreg": "wrong_warps_may_differ.py",
    "128 x 48 + 256 x 232 = 65536": "wrong_pool_65536.py",
    "a count of 16: below 24": "wrong_no_minimum.py",
    "a count of 228: not a multiple of 8": "wrong_no_multiple_of_8.py",
    "24 / 240: 24 is the least legal count": "wrong_excludes_24.py",
    "256: the most a warp may hold": "wrong_excludes_256.py",
    "a .dec to 176 from 168": "wrong_dec_above_current.py",
    "the producer is the last warpgroup": "wrong_one_order.py",
    "two producer warpgroups": "wrong_split_one_producer.py",
    "a fourth warpgroup executes no setmaxnreg": "wrong_split_others_donate.py",
    "one consumer: 2 x 168 - 40 = 296": "wrong_split_no_cap.py",
}


@pytest.mark.parametrize("case", sorted(ONLY_IT_CATCHES))
def test_each_listed_case_is_the_only_one_to_catch_some_mistake(case):
    check = exercise.import_file(EX.folder / "check.py", "check_setmaxnreg_split_edges")
    name = ONLY_IT_CATCHES[case]
    mod = exercise.import_file(EX.fixture_path(name), f"fixture_{name[:-3]}")
    caught = [e.why for fn in check.FUNCTIONS for e in fn.edges if _fails(mod, fn, e)]
    assert len(caught) == 1 and caught[0].startswith(case), f"{name} is caught by {caught}"


@pytest.mark.parametrize("name", [n for n in EX.fixtures if n.startswith("wrong_")])
def test_drawn_inputs_alone_find_each_mistake(name):
    r = graded_here(EX.id, EX.fixture_path(name), drawn_only=True, seed=20261201)
    assert r.verdict == Verdict.WRONG, str(r)
    assert "drawn at random and shrunk" in " ".join(r.details) and "seed 20261201" in " ".join(r.details), str(r)


@pytest.mark.parametrize("name", ["<solution>", "correct_totals.py", "correct_numpy_scalars.py"])
def test_right_answers_pass_on_drawn_inputs_numpy_integers_included(name):
    path = EX.solution_path if name == "<solution>" else EX.fixture_path(name)
    r = graded_here(EX.id, path, drawn_only=True, seed=7)
    assert r.verdict == Verdict.PASS and "seed 7" in r.message, str(r)
    assert int(r.message.split(" inputs drawn")[0].split()[-1]) >= 300, r.message


def test_a_wrong_verdict_is_explained_by_the_rule_in_hardware_terms():
    r = graded_here(EX.id, EX.fixture_path("wrong_one_warp_enough.py"), seed=3)
    said = " ".join(r.details)
    assert r.message.startswith("outcome(threads=384, regs_at_launch=168") and "got 'ok', expected 'hang'" in r.message
    assert "warp 3 executes no setmaxnreg" in said and "the course judges it a hang" in said
    assert "PTX ISA, setmaxnreg" in said and "the plan: warpgroup 0: warps 0-2 setmaxnreg.dec 40" in said
    r = graded_here(EX.id, EX.fixture_path("wrong_pool_not_rounded.py"), seed=3)
    assert "allocated as 168" in " ".join(r.details) and "PTX ISA, setmaxnreg" in " ".join(r.details), str(r)
