"""Grader of ws_ring_phases: python practice/judge.py check ws_ring_phases

The learner's empty_arrivals(), start() and advance() drive a simulation of the warp-specialized
ring: a producer, 1 to 3 consumers and a TMA engine over a model of mbarriers (arrival count,
pending arrivals, transaction bytes, phase; try_wait.parity as the PTX ISA defines it), for S = 1..6
and several schedules (producer first, consumers first, one consumer lagging, random). It names
what goes wrong on the GPU and where:
  - a deadlock: who waits on which barrier with which parity, and what that barrier has seen;
  - an overwrite: the producer refilling a slot a consumer has not released (which lap, slot, who);
  - an early read: a consumer passing full[s] before that lap's tile landed;
  - phase aliasing: a barrier two phases ahead of a waiter, whose parity then names the wrong phase.
Then each function of the statement is called on its own, through the Python flow
(judge.grading.cpu_flow), against the rule written below (no solution file is needed): empty_arrivals
for 1..16 consumers, start for both roles, and advance on arbitrary states drawn per run (any slot
and phase of rings of 1..64 slots), not only on the states that follow each other from start().
Counts, slots and phases may be of any integer type (numpy.int64 included).
"""
import random

from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow
from judge.grading.result import Result, Verdict
from judge.grading.submission import learner_error

SLOTS = range(1, 7)
CONSUMERS = (1, 2, 3)
ITERS = 24
TILE_BYTES = 16384


def _n(c):
    return f"{c} consumer" + ("s" if c != 1 else "")


# ----------------------------------------------------------------------------- the rule
def empty_arrivals_ref(consumers):
    """Every consumer warpgroup reads every slot; one elected thread of each arrives on empty[s]."""
    return consumers


def start_ref(role):
    """The producer's first lap must not block (parity 1: the phase before phase 0, complete from
    init); a consumer's first wait on full[0] must block until phase 0 completes (parity 0)."""
    return (0, 1) if role == "producer" else (0, 0)


def advance_ref(state, S):
    """The next slot; the phase flips when the slot wraps from S - 1 to 0 (one lap: one phase)."""
    slot, phase = state
    return ((slot + 1) % S, phase ^ 1) if slot + 1 == S else (slot + 1, phase)


class Failure(Exception):
    pass


class MBarrier:
    """init(count) starts phase 0; a phase completes when its arrivals and its bytes are all in."""

    def __init__(self, name, count):
        self.name, self.count, self.pending, self.tx, self.phase = name, count, count, 0, 0
        self.arrived = []                 # who arrived in the current phase

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending, self.arrived = self.count, []
            return True
        return False

    def arrive(self, who, expect_tx=0):
        self.tx += expect_tx
        self.pending -= 1
        self.arrived.append(who)
        return self._maybe_complete()

    def complete_tx(self, nbytes):
        self.tx -= nbytes
        return self._maybe_complete()

    def try_wait_parity(self, p):
        """True once the phase of parity p completed: the current phase's parity differs from p."""
        return p != self.phase % 2

    def status(self):
        return (f"phase {self.phase} is current, {self.count - self.pending} of {self.count} arrivals in"
                + (f", {self.tx} bytes outstanding" if self.tx else ""))


def states(mod, role, S, n):
    """The learner's (slot, phase) for iterations 0..n-1 of `role`; Failure on a malformed state."""
    out = []
    try:
        st = mod.start(role)
    except Exception as e:  # noqa: BLE001
        raise Failure(learner_error(e, f"start({role!r})")) from None
    for i in range(n):
        if (not isinstance(st, (tuple, list)) or len(st) != 2 or checks.as_integer(st[0]) not in range(S)
                or checks.as_integer(st[1]) not in (0, 1)):
            how = f"start({role!r})" if i == 0 else f"advance({out[-1]}, S={S})"
            raise Failure(f"{how} returned {st!r} at {role} iteration {i}: a state is (slot, phase) with slot "
                          f"0..{S - 1} and phase 0 or 1 (the only parities try_wait.parity takes)")
        out.append((checks.as_integer(st[0]), checks.as_integer(st[1])))
        if i + 1 < n:
            try:
                st = mod.advance(tuple(out[-1]), S)
            except Exception as e:  # noqa: BLE001
                raise Failure(learner_error(e, f"advance({out[-1]}, S={S})")) from None
    return out


def simulate(prod, cons, count, S, n, C, policy, seed=0):
    """Run n iterations with the given state tables; raise Failure with the story, or return None."""
    full = [MBarrier(f"full[{s}]", 1) for s in range(S)]
    empty = [MBarrier(f"empty[{s}]", count) for s in range(S)]
    tile = [None] * S                   # which iteration's tile has landed in each slot
    filled = [None] * S                 # the iteration the producer last filled the slot for
    released = [set(range(C)) for _ in range(S)]   # consumers done with the slot's current tile
    inflight = []
    p_i, c_i = 0, [0] * C
    rng = random.Random(seed)

    def lap_slot(i):
        return f"iteration {i} (lap {i // S}, slot {i % S})"

    def aliasing(bar, s, who_needs):
        """A waiter needing phase k of bar while bar is already past phase k + 1: its parity aliases."""
        for who, need in who_needs:
            if bar.phase >= need + 2:
                raise Failure(f"S={S}: phase aliasing on {bar.name}: it completed phase {bar.phase - 1} while "
                              f"{who} still had to observe phase {need}: parity {need % 2} now names the current, "
                              f"incomplete phase {bar.phase}. Each phase needs a successful wait before the next "
                              f"phase's arrivals: a barrier may run at most one phase ahead of any waiter")

    def producer_step():
        nonlocal p_i
        s, p = prod[p_i]
        if not empty[s].try_wait_parity(p):
            return False
        missing = sorted(set(range(C)) - released[s])
        if filled[s] is not None and missing:
            lap = p_i // S
            who = ", ".join(f"consumer {c}" for c in missing)
            raise Failure(f"S={S}, {_n(C)}: overwrite at lap {lap}, slot {s}: the producer passed empty[{s}] "
                          f"(parity {p}) at {lap_slot(p_i)} and refilled slot {s} while {who} had not released "
                          f"iteration {filled[s]}'s tile (empty[{s}] counts {count} arrival(s); "
                          f"{_n(C)} read every slot)")
        filled[s], released[s] = p_i, set()
        full[s].arrive("producer", expect_tx=TILE_BYTES)
        inflight.append((s, p_i))
        p_i += 1
        return True

    def consumer_step(c):
        i = c_i[c]
        s, p = cons[i]
        if not full[s].try_wait_parity(p):
            return False
        if tile[s] != i:
            what = "nothing yet" if tile[s] is None else f"iteration {tile[s]}'s tile"
            raise Failure(f"S={S}: early read at lap {i // S}, slot {s}: consumer {c} passed full[{s}] (parity {p}) "
                          f"at {lap_slot(i)} while the slot held {what}: it read before that iteration's TMA "
                          f"load landed")
        released[s].add(c)
        empty[s].arrive(f"consumer {c}")
        aliasing(empty[s], s, [("the producer", (p_i // S) - 1)] if p_i < n and prod[p_i][0] == s else [])
        c_i[c] += 1
        return True

    def tma_step(k=0):
        s, it = inflight.pop(k)
        tile[s] = it
        full[s].complete_tx(TILE_BYTES)
        aliasing(full[s], s, [(f"consumer {c}", c_i[c] // S) for c in range(C)
                              if c_i[c] < n and cons[c_i[c]][0] == s])

    while min(c_i) < n:
        moves = [producer_step] if p_i < n else []
        order_c = list(range(C))
        if policy == "consumer 0 lags":
            order_c = order_c[1:] + order_c[:1]
        cmoves = [(lambda c=c: consumer_step(c)) for c in order_c if c_i[c] < n]
        if policy == "consumers first":
            moves = cmoves + moves
        elif policy == "consumer 0 lags":
            moves = moves + cmoves[:-1]
            lagging = cmoves[-1:] if c_i[0] < n else []
        else:
            moves = moves + cmoves
        if policy == "random":
            rng.shuffle(moves)
            if inflight and rng.random() < 0.4:
                tma_step(rng.randrange(len(inflight)))
                continue
        if any(step() for step in moves):
            continue
        if inflight:
            tma_step(0)
            continue
        if policy == "consumer 0 lags" and any(step() for step in lagging):
            continue
        waits = []
        if p_i < n:
            s, p = prod[p_i]
            waits.append(f"the producer, at {lap_slot(p_i)}, waits on empty[{s}] with parity {p} "
                         f"({empty[s].status()})")
        for c in range(C):
            if c_i[c] < n:
                s, p = cons[c_i[c]]
                waits.append(f"consumer {c}, at {lap_slot(c_i[c])}, waits on full[{s}] with parity {p} "
                             f"({full[s].status()})")
        raise Failure(f"S={S}, {_n(C)}: deadlock: " + "; ".join(waits))


POLICIES = [("producer first", 0), ("consumers first", 0), ("consumer 0 lags", 0)] + \
           [("random", seed) for seed in range(3)]


def _explain_advance(call, got, want):
    (slot, phase), S = call.args[0], call.args[1]
    return ["advance computes the next state from the state it is given and S alone: the judge calls it on any "
            "state, not only on those that follow each other from start()",
            f"from slot {slot} of {S} the next slot is {want[0]}" + (
                f"; the slot wraps from {S - 1} to 0, so the phase flips ({phase} -> {want[1]}): one lap of the ring "
                f"is one phase of every barrier" if slot == S - 1 else
                f"; the phase stays {phase}: it flips only when the slot wraps from {S - 1} back to 0")]


EMPTY = flow.Function(
    "empty_arrivals", reference=empty_arrivals_ref, args=st.tuples(st.integers(1, 16)),
    edges=[flow.Edge((c,), "the simulated kernels' consumer counts") for c in CONSUMERS],
    explain=lambda call, got, want: f"each of the {call.args[0]} consumer warpgroups reads every slot and one "
                                    f"elected thread of each arrives: empty[s] counts {want} arrivals")
START = flow.Function(
    "start", reference=start_ref, edges=[flow.Edge(("producer",), "the producer's first state"),
                                         flow.Edge(("consumer",), "a consumer's first state")],
    explain=lambda call, got, want: "both sides start at slot 0; a fresh barrier is in phase 0: parity 1 passes at "
                                    "once (the producer's first lap must not block), parity 0 blocks until the first "
                                    "tile lands (the consumers must)")
ADVANCE = flow.Function(
    "advance", reference=advance_ref, explain=_explain_advance,
    args=st.integers(1, 64).flatmap(lambda S: st.tuples(st.tuples(st.integers(0, S - 1), st.integers(0, 1)),
                                                         st.just(S))),
    edges=[flow.Edge(((s, p), S), "a state taken out of order")
           for S, s in ((5, 3), (4, 3), (1, 0), (6, 0), (2, 1), (7, 6), (1000, 999), (1000, 17)) for p in (1, 0)])


def check(sub) -> Result:
    sub.progress("importing ring.py")
    mod = sub.learner_module("empty_arrivals", "start", "advance")
    seed = flow.seed_for_run()
    policies = POLICIES + [("random", seed)]
    mismatch = None
    try:
        for S in SLOTS:
            sub.progress(f"states of a {S}-slot ring")
            prod, cons = states(mod, "producer", S, ITERS), states(mod, "consumer", S, ITERS)
            for role, got in (("producer", prod), ("consumer", cons)):
                want = [start_ref(role)]
                while len(want) < ITERS:
                    want.append(advance_ref(want[-1], S))
                diff = next((i for i in range(ITERS) if got[i] != want[i]), None)
                if mismatch is None and diff is not None:
                    mismatch = (f"{role}, S={S}, iteration {diff}: (slot, phase) {got[diff]}, expected {want[diff]}")
            for C in CONSUMERS:
                try:
                    got = mod.empty_arrivals(C)
                except Exception as e:  # noqa: BLE001
                    return Result(Verdict.WRONG, learner_error(e, f"empty_arrivals({C})"))
                count = checks.as_integer(got)
                if count is None or count < 1:
                    return Result(Verdict.WRONG, f"empty_arrivals({C}) returned {checks.show(got)}: an mbarrier's "
                                  "arrival count is a positive integer")
                for policy, pseed in policies:
                    try:
                        simulate(prod, cons, count, S, ITERS, C, policy, pseed)
                    except Failure as f:
                        details = [f"schedule: {policy}" + (f" (seed {pseed})" if policy == "random" else "")]
                        if "overwrite" in str(f):
                            details.append("had the consumer kept reading, full[s] would complete the next phase "
                                           "before it observed this one: a producer may run at most one phase "
                                           "ahead of every consumer, and empty[s] is what holds it back")
                        if mismatch:
                            details.append(f"first difference from the rule: {mismatch}")
                        return Result(Verdict.WRONG, str(f), details=details)
    except Failure as f:
        return Result(Verdict.WRONG, str(f))
    if mismatch:
        return Result(Verdict.WRONG, mismatch, details=[
            ("the simulation found no deadlock, overwrite or early read, but the exercise fixes the convention: "
             "both sides start at slot 0 and walk the slots in order")])
    return flow.run(sub, [EMPTY, START, ADVANCE], seed=seed,
                    note=f"the simulation found no deadlock, overwrite, early read or aliasing for S = 1..6 with 1-3 consumers "
                         f"under {len(policies)} schedules",
                    checked=[f"simulated {ITERS} iterations x {len(policies)} schedules x 1-3 consumers for S = 1..6",
                             f"states in order from start(): S = 1..6 x {ITERS} iterations, both roles"])
