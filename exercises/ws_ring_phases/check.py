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
Then the states are compared with the reference convention (the slot and parity of each iteration).
"""
import random

from judge.grading.grade import Result, Verdict, learner_error

SLOTS = range(1, 7)
CONSUMERS = (1, 2, 3)
ITERS = 24
TILE_BYTES = 16384


def _n(c):
    return f"{c} consumer" + ("s" if c != 1 else "")


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
        if (not isinstance(st, (tuple, list)) or len(st) != 2 or st[0] not in range(S) or st[1] not in (0, 1)
                or isinstance(st[0], bool)):
            how = f"start({role!r})" if i == 0 else f"advance({out[-1]}, S={S})"
            raise Failure(f"{how} returned {st!r} at {role} iteration {i}: a state is (slot, phase) with slot "
                          f"0..{S - 1} and phase 0 or 1 (the only parities try_wait.parity takes)")
        out.append((int(st[0]), int(st[1])))
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


def check(sub) -> Result:
    sub.progress("importing ring.py")
    mod = sub.learner_module("empty_arrivals", "start", "advance")
    ref = sub.exercise.reference()
    mismatch = None
    try:
        for S in SLOTS:
            sub.progress(f"states of a {S}-slot ring")
            prod, cons = states(mod, "producer", S, ITERS), states(mod, "consumer", S, ITERS)
            want_p, want_c = states(ref, "producer", S, ITERS), states(ref, "consumer", S, ITERS)
            for role, got, want in (("producer", prod, want_p), ("consumer", cons, want_c)):
                diff = next((i for i in range(ITERS) if got[i] != want[i]), None)
                if mismatch is None and diff is not None:
                    mismatch = (f"{role}, S={S}, iteration {diff}: (slot, phase) {got[diff]}, expected {want[diff]}")
            for C in CONSUMERS:
                try:
                    count = mod.empty_arrivals(C)
                except Exception as e:  # noqa: BLE001
                    return Result(Verdict.WRONG, learner_error(e, f"empty_arrivals({C})"))
                if not isinstance(count, int) or count < 1:
                    return Result(Verdict.WRONG, f"empty_arrivals({C}) returned {count!r}: an mbarrier's arrival "
                                  "count is a positive integer")
                for policy, seed in POLICIES:
                    try:
                        simulate(prod, cons, count, S, ITERS, C, policy, seed)
                    except Failure as f:
                        details = [f"schedule: {policy}" + (f" (seed {seed})" if policy == "random" else "")]
                        if "overwrite" in str(f):
                            details.append("had the consumer kept reading, full[s] would complete the next phase "
                                           "before it observed this one: a producer may run at most one phase "
                                           "ahead of every consumer, and empty[s] is what holds it back")
                        if mismatch:
                            details.append(f"first difference from the reference: {mismatch}")
                        return Result(Verdict.WRONG, str(f), details=details)
    except Failure as f:
        return Result(Verdict.WRONG, str(f))
    if mismatch:
        return Result(Verdict.WRONG, mismatch, details=[
            ("the simulation found no deadlock, overwrite or early read, but the exercise fixes the convention: "
            "both sides start at slot 0 and walk the slots in order")])
    return Result(Verdict.PASS, f"no deadlock, overwrite, early read or aliasing for S = 1..6 with 1-3 consumers "
                  f"under {len(POLICIES)} schedules",
                  checked=[f"states: S = 1..6 x {ITERS} iterations, both roles, against the reference",
                           f"simulated {ITERS} iterations x {len(POLICIES)} schedules x 1-3 consumers for each S"])
