"""check.py - the grader of setmaxnreg_split: python practice/judge.py check setmaxnreg_split

The three functions of the statement are called directly, through the Python flow (judge.grading.cpu_flow),
and compared with reference.py beside this file, where the rules of setmaxnreg are written once (PTX ISA,
setmaxnreg; a learners' release leaves it out):
1. cta_pool on the ladder's launch (384 threads at 168), counts that are not a multiple of 8, the whole
   register file; then launches drawn per run (1-8 warpgroups, any count that launches);
2. best_split with every argument at its default (the ladder's (40, 232)), then producers keeping 24 or 40,
   two producers, a warpgroup that is neither, one consumer that would pass 256; then drawn splits;
3. outcome on plans of the statement: the ladder's, with its producer last, with one warp of a warpgroup
   skipping its setmaxnreg or executing another one, asking more than the pool (one of them exactly the
   SM's 65536), counts below 24, above 256 and not a multiple of 8, a .dec up and an .inc down; then plans
   drawn per run: producer/consumer splits in any warpgroup order at the pool's edge, one past it or
   anywhere, warpgroups on their own, and now and then one warp out of step, a count off a multiple of 8,
   below 24, the wrong way or anything at all.
A wrong outcome is explained by the rule the plan breaks, in the reference's words, with the plan in words.
"""
import inspect

from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.grading import exercise

regalloc = exercise.get("setmaxnreg_split").reference_module()

D = lambda n: [("dec", n)] * 4                     # noqa: E731 - all four warps of a warpgroup .dec to n
I = lambda n: [("inc", n)] * 4                     # noqa: E731
NONE = [None] * 4
EDGY = (0, 8, 16, 20, 24, 40, 48, 100, 168, 228, 232, 236, 240, 248, 252, 255, 256, 260, 264)


def _bound(fn, call):
    """The call's arguments by name, defaults filled in."""
    b = inspect.signature(fn).bind(*call.args, **call.kwargs)
    b.apply_defaults()
    return b.arguments


# ------------------------------------------------------------------ cta_pool
POOL_EDGES = [
    ((384, 168), "the ladder's warp-specialized kernels: 384 threads at 168 registers"),
    ((384, 165), "165 registers per thread are allocated as 168"),
    ((128, 255), "255 registers per thread (the most a kernel launches with) are allocated as 256"),
    ((1024, 64), "1024 threads at 64: the whole register file"),
    ((256, 1), "one register per thread is allocated as 8"),
    ((640, 95), "5 warpgroups at 95, allocated as 96"),
]


def explain_pool(call, got, want):
    a = _bound(regalloc.cta_pool, call)
    r8 = regalloc.launch_count(a["regs_at_launch"])
    out = []
    if r8 != a["regs_at_launch"]:
        out.append(f"{a['regs_at_launch']} registers per thread are allocated as {r8}: per warp, in units of 256 "
                   f"registers, which is 8 per thread")
    out.append(f"the pool is every register the CTA holds: {a['threads']} threads x {r8} = {want}; setmaxnreg moves "
               f"them between its warpgroups and takes none from the rest of the SM ({regalloc.SECTION}: a pool of "
               f"registers is kept per CTA)")
    return out


# ------------------------------------------------------------------ best_split
SPLIT_EDGES = [
    (flow.Args(384, 168), "the ladder's kernels, every argument at its default: regs_dec<40> / regs_inc<232>"),
    (flow.Args(384, 168, producer_regs=24), "the producer keeps 24, the least legal count"),
    (flow.Args(384, 165, producer_regs=40), "launched at 165 registers, allocated as 168"),
    (flow.Args(384, 100, producer_regs=24), "launched at 100, allocated as 104: 24 + 2 x 144 = 3 x 104"),
    (flow.Args(256, 168, consumers=1, producer_regs=40), "one consumer: 2 x 168 - 40 = 296, but a warp holds at most 256"),
    (flow.Args(512, 128, producer_regs=40), "a fourth warpgroup executes no setmaxnreg and keeps its 128"),
    (flow.Args(512, 128, producers=2, consumers=2, producer_regs=24), "two producer warpgroups"),
    (flow.Args(1024, 64, producers=1, consumers=7, producer_regs=24),
     "40 registers freed by one producer, shared by seven consumers, do not reach the next multiple of 8"),
]


def explain_split(call, got, want):
    a = _bound(regalloc.best_split, call)
    threads, regs, p, c, keep = a["threads"], a["regs_at_launch"], a["producers"], a["consumers"], a["producer_regs"]
    r8, pool = regalloc.launch_count(regs), regalloc.cta_pool(threads, regs)
    others = threads // 128 - p - c
    left = pool - 128 * (p * keep + others * r8)
    per = left // (128 * c)
    out = [f"the pool: {threads} x {r8} = {pool} registers" + (f" ({regs} allocated as {r8})" if r8 != regs else ""),
           f"{p} producer warpgroup(s) keep 128 x {keep} each"
           + ("" if "producer_regs" in call.kwargs or len(call.args) > 4 else " (producer_regs defaults to 40)")]
    if others:
        out.append(f"{others} other warpgroup(s) execute no setmaxnreg and keep 128 x {r8} each")
    out.append(f"{c} consumer warpgroup(s) share the {left} left: {left} // (128 x {c}) = {per} per thread, down to "
               f"a multiple of 8: {per // 8 * 8}" + (f", and a warp holds at most {regalloc.MAX_COUNT}"
                                                     if per // 8 * 8 > regalloc.MAX_COUNT else ""))
    return out


# ------------------------------------------------------------------ outcome
OUTCOME_EDGES = [
    ((384, 168, [D(40), I(232), I(232)]), "the ladder's kernels: 128 x 40 + 256 x 232 = 64512, the whole pool"),
    ((384, 168, [D(24), I(240), I(240)]), "24 / 240: 24 is the least legal count"),
    ((384, 168, [I(232), I(232), D(40)]), "the producer is the last warpgroup: the .inc wait for its .dec"),
    ((384, 168, [D(40)[:3] + [None], I(232), I(232)]), "warp 3 of the producer warpgroup skips its setmaxnreg"),
    ((384, 168, [D(40)[:3] + [("dec", 32)], I(232), I(232)]), "warp 3 of the producer executes another setmaxnreg"),
    ((384, 168, [D(48), I(232), I(232)]),
     "128 x 48 + 256 x 232 = 65536: the SM's whole register file, 1024 more than the CTA's pool"),
    ((384, 168, [D(40), I(240), I(240)]), "the consumers ask for 240 after a .dec to 40"),
    ((1024, 64, [I(72)] + [NONE] * 7), "an .inc with no .dec to feed it"),
    ((384, 168, [D(16), I(232), I(232)]), "a count of 16: below 24"),
    ((384, 168, [D(40), I(228), I(228)]), "a count of 228: not a multiple of 8"),
    ((256, 168, [D(40), I(256)]), "256: the most a warp may hold after setmaxnreg"),
    ((256, 168, [D(40), I(264)]), "264: above 256"),
    ((384, 168, [D(176), I(168), I(168)]), "a .dec to 176 from 168"),
    ((384, 168, [D(40), I(160), I(160)]), "an .inc to 160 from 168"),
    ((384, 168, [D(168), I(168), I(168)]), "a .dec and an .inc to the count held: nothing moves"),
    ((384, 165, [D(40), I(232), I(232)]), "launched at 165 registers, allocated as 168"),
    ((128, 64, [NONE]), "no setmaxnreg at all"),
    ((384, 168, [D(20)[:3] + [None], I(232), I(232)]), "an illegal count in a warpgroup that would also hang"),
]


def validate_outcome(call, got):
    if not isinstance(got, str) or got not in regalloc.VERDICTS:
        return f"outcome returns one of 'ok', 'hang' or 'illegal', got {checks.show(got)}"
    return None


def explain_outcome(call, got, want):
    threads, regs, plan = call.args[:3]
    return [regalloc.judge(threads, regs, plan).why, "the plan: " + regalloc.describe(threads, plan)]


# ------------------------------------------------------------------ inputs drawn per run
def _top(threads):
    """The most registers per thread a CTA of `threads` launches with (allocated in units of 8)."""
    return min(regalloc.MAX_AT_LAUNCH, regalloc.SM_REGISTERS // threads // 8 * 8)


@st.composite
def _launch(draw, min_wgs=1, least=1):
    threads = 128 * draw(st.integers(min_wgs, 8))
    top = _top(threads)
    regs = draw(st.one_of(st.integers(least, top), st.just(top), st.integers(max(least, top - 12), top)))
    return threads, regs


def _legal(r8, action):
    """The counts a .dec (at most r8) or an .inc (at least r8) may name."""
    return [n for n in range(regalloc.MIN_COUNT, regalloc.MAX_COUNT + 1, 8) if n == r8 or (n < r8) == (action == "dec")]


ANY_COUNT = st.one_of(st.sampled_from(EDGY), st.integers(0, 280))


@st.composite
def _splits(draw):
    threads, regs = draw(_launch(min_wgs=2, least=17))
    wgs, r8 = threads // 128, regalloc.launch_count(regs)
    producers = draw(st.integers(1, wgs - 1))
    consumers = draw(st.integers(1, wgs - producers))
    kw = {}
    if producers != 1 or draw(st.booleans()):
        kw["producers"] = producers
    if consumers != 2 or draw(st.booleans()):
        kw["consumers"] = consumers
    if r8 < 40 or draw(st.booleans()):
        kw["producer_regs"] = draw(st.sampled_from(range(regalloc.MIN_COUNT, r8 + 1, 8)))
    return flow.Args(threads, regs, **kw)


@st.composite
def _plans(draw):
    threads, regs = draw(_launch())
    wgs, r8 = threads // 128, regalloc.launch_count(regs)

    def count(action):
        legal = _legal(r8, action)
        return draw(st.sampled_from(legal)) if legal else draw(ANY_COUNT)

    if wgs >= 2 and draw(st.integers(0, 3)):        # a producer / consumer split, three times in four
        producers = draw(st.integers(1, wgs - 1))
        consumers = draw(st.integers(1, wgs - producers))
        p = count("dec")
        c = regalloc.best_split(threads, regs, producers, consumers, p)[1] if p in _legal(r8, "dec") else r8
        c = draw(st.sampled_from([c, c, c, c + 8, c - 8, count("inc")]))    # at the pool's edge, past it, or anywhere
        roles = [D(p)] * producers + [I(c)] * consumers + [NONE] * (wgs - producers - consumers)
        order = draw(st.sampled_from(["producers first", "producers last", "any"]))
        if order == "any":
            order = draw(st.permutations(range(wgs)))
        else:                                         # "last": the .inc come before the .dec that feeds them
            order = range(wgs) if order == "producers first" else [*range(producers, wgs), *range(producers)]
        plan = [list(roles[i]) for i in order]
    else:                                             # every warpgroup on its own
        plan = []
        for _ in range(wgs):
            action = draw(st.sampled_from([None, "dec", "inc"]))
            plan.append(list(NONE) if action is None else [(action, count(action))] * 4)
    change = draw(st.sampled_from(["none"] * 5 + ["skip", "skip", "other", "other", "count", "backwards", "backwards",
                                                  "ragged", "low"]))
    g, w = draw(st.integers(0, wgs - 1)), draw(st.integers(0, 3))
    ins = plan[g][w]
    action = ins[0] if ins is not None else draw(st.sampled_from(["dec", "inc"]))
    legal = _legal(r8, action)
    if change in ("skip", "other"):                   # one warp out of step: it executes none, or another one
        others = [n for n in legal if ins is None or n != ins[1]] or [r8 + 8]
        plan[g][w] = None if change == "skip" and ins is not None else (action, draw(st.sampled_from(others)))
    elif change == "count":                           # one warpgroup names any count at all
        plan[g] = [(action, draw(ANY_COUNT))] * 4
    elif change == "backwards":                       # a .dec above the count held, an .inc below it
        wrong_way = [n for n in _legal(r8, "inc" if action == "dec" else "dec") if n != r8] or [r8 + 8]
        plan[g] = [(action, draw(st.sampled_from(wrong_way)))] * 4
    elif change == "ragged" and legal:                # a count the right way, off a multiple of 8
        off = draw(st.integers(1, 7))
        plan[g] = [(action, draw(st.sampled_from(legal)) + (off if action == "inc" else -off))] * 4
    elif change == "low":                             # a .dec to a multiple of 8 below 24
        plan[g] = [("dec", draw(st.sampled_from([0, 8, 16])))] * 4
    return (threads, regs, plan)


POOL = flow.Function("cta_pool", reference=regalloc.cta_pool, args=_launch(), explain=explain_pool,
                     edges=[flow.Edge(a, why) for a, why in POOL_EDGES])
SPLIT = flow.Function("best_split", reference=regalloc.best_split, args=_splits(), explain=explain_split,
                      edges=[flow.Edge(a, why) for a, why in SPLIT_EDGES])
OUTCOME = flow.Function("outcome", reference=regalloc.outcome, args=_plans(), validate=validate_outcome,
                        explain=explain_outcome, edges=[flow.Edge(a, why) for a, why in OUTCOME_EDGES],
                        examples=400)         # plans are many-sided: more of them, within the same time budget
FUNCTIONS = [POOL, SPLIT, OUTCOME]


def check(sub):
    return flow.run(sub, FUNCTIONS,
                    checked=["the rules of setmaxnreg as exercises/setmaxnreg_split/reference.py states them (PTX ISA, setmaxnreg)",
                             "launches, splits and plans drawn per run: 1-8 warpgroups, any count that launches, "
                             "warpgroups in any order, one warp now and then out of step"])
