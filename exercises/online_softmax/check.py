"""Grader of online_softmax: python practice/judge.py check online_softmax

online_softmax(scores, values, block) is called directly through the Python flow (judge.grading.cpu_flow)
and compared with a float64 softmax of the whole row (reference below), within a tolerance derived from
float64's arithmetic: first the statement's cases (a fully masked row, -inf entries, a first block all
-inf, logits in the hundreds and up to 1e300 that grow from block to block, blocks that do not divide the
row, a block of 1 and a block longer than the row), then inputs drawn per run (hypothesis: rows of
finite and -inf scores at scales from 1 to 1e300, any block size). A failure names the row, the element,
the value got and the value expected, and the rule.

The tolerance. Every step is float64 (unit roundoff u = 2^-53): each exp, each rescale, each addition
of the N terms of a row rounds once, so l and every acc[i, c] carry a relative error of at most about
(N + 3 * blocks + 8) u (first order: Higham's gamma_n bound of a sum of positive terms, plus the rescales);
and each exponent's argument (score - m, m_old - m_new) is rounded too, an absolute error of u |argument|,
where only arguments above -745 matter (below, exp is 0 in float64): at most 745 u per subtraction, one per
block a term passes through, which becomes a relative error of the term. out = acc / l doubles the lot,
relative to the sum of |terms|: atol[i, c] = (4 (N + 3 blocks + 8) + 4 * 745 (blocks + 1)) u (P |V|)[i, c]
with P the exact softmax, plus 4 (N + 3 blocks + 8) times 2^-1074 (in the subnormal range a rounding errs by
half of 2^-1074 absolutely, whatever the value); lse = m + log(l) the same in absolute terms plus 4 u |lse|. Any of the mistakes the
fixtures make errs by a share of |out| (or gives NaN or inf), many orders above.
"""

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from judge.grading import checks
from judge.grading import cpu_flow as flow

U = 2.0 ** -53


class Expected:
    """The float64 answer of one call and the tolerance of each of its numbers."""

    def __init__(self, scores, values, block):
        s = np.asarray(scores, dtype=np.float64)
        v = np.asarray(values, dtype=np.float64)
        R, N = s.shape
        m = s.max(axis=1)
        masked = np.isneginf(m)
        e = np.exp(s - np.where(masked, 0.0, m)[:, None])
        l = e.sum(axis=1)
        p = e / np.where(masked, 1.0, l)[:, None]
        self.out = p @ v
        self.lse = np.where(masked, -np.inf, m + np.log(np.where(masked, 1.0, l)))
        blocks = -(-N // block)
        gamma = (4 * (N + 3 * blocks + 8) + 4 * 745 * (blocks + 1)) * U
        # below 2^-1022 a rounding errs by up to half of 2^-1074 absolutely, not relatively: one such per step
        self.atol_out = gamma * (p @ np.abs(v)) + 4 * (N + 3 * blocks + 8) * 2.0 ** -1074
        self.atol_lse = gamma + 4 * U * np.abs(np.where(masked, 0.0, self.lse))
        self.masked = masked

    def __repr__(self):
        return f"(out {self.out!r}, lse {self.lse!r})"


def reference(scores, values, block):
    return Expected(scores, values, block)


def _as_array(x, shape, what):
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        return None, f"{what} is not an array of numbers ({type(x).__name__}: {e})"
    if a.shape != shape:
        return None, f"{what} has shape {a.shape}, expected {shape}"
    return a, None


def compare(got, want: Expected):
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"returned {type(got).__name__} {checks.show(got)}; expected a pair (out, lse)"
    out, err = _as_array(got[0], want.out.shape, "out")
    if err:
        return err
    lse, err = _as_array(got[1], want.lse.shape, "lse")
    if err:
        return err
    for r in range(len(want.lse)):
        if want.masked[r]:
            if not (np.isneginf(lse[r]) and np.all(out[r] == 0)):
                return (f"row {r} is fully masked (every score -inf): out[{r}] must be 0 and lse[{r}] -inf; got "
                        f"out[{r}] = {checks.show(out[r])}, lse[{r}] = {lse[r]!r}")
            continue
        if not abs(lse[r] - want.lse[r]) <= want.atol_lse[r]:
            return f"lse[{r}] = {lse[r]!r}, expected {want.lse[r]!r} (tolerance {want.atol_lse[r]:.3g})"
        bad = ~(np.abs(out[r] - want.out[r]) <= want.atol_out[r])     # NaN is bad too
        if bad.any():
            c = int(np.argmax(bad))
            return (f"out[{r}, {c}] = {out[r, c]!r}, expected {want.out[r, c]!r} (tolerance {want.atol_out[r, c]:.3g}; "
                    f"{int(bad.sum())} of row {r}'s {bad.size} elements differ)")
    return None


def explain(call, got, want):
    scores, values, block = call.args
    s = np.asarray(scores, dtype=np.float64)
    N = s.shape[1]
    out = [f"the row is read in blocks of {block} keys" + (f"; {N} is not a multiple of it: the last block has "
                                                            f"{N % block}" if N % block else "")]
    if np.isneginf(s).any():
        out.append("a -inf score adds exp(-inf) = 0; while every score seen in a row is -inf its maximum is -inf "
                   "and must not be subtracted (-inf - (-inf) is NaN)")
    if np.isfinite(s).any() and np.abs(s[np.isfinite(s)]).max() > 700:
        out.append("logits this large overflow exp unless the maximum of everything read so far, this block "
                   "included, is subtracted first")
    out.append("when a block raises a row's maximum from m to m', l and acc are multiplied by exp(m - m') "
               "before its terms are added; lse = m + log(l)")
    return out


def _edges():
    rng = np.random.default_rng(6)
    v4 = rng.uniform(-2, 2, (8, 3))
    example = np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]])
    masked = rng.standard_normal((3, 8))
    masked[1] = -np.inf                                   # a fully masked row between two others
    holes = rng.standard_normal((2, 8))
    holes[0, [1, 4, 5]] = -np.inf
    holes[1, :3] = -np.inf                                # the first block of row 1 all -inf
    huge = np.array([[0.0, 1.0, 800.0, 2.0, 5000.0, 3.0, 1e300, 4.0],
                     [-1e300, 2.0, 700.0, 710.0, 720.0, 730.0, 740.0, 750.0]])
    rising = np.arange(24.0).reshape(2, 12) * 3.0           # the maximum grows in every block
    v12 = rng.uniform(-2, 2, (12, 2))
    return [
        flow.Edge((example, v4, 4), "the statement's example: two rows, blocks of 4"),
        flow.Edge((example, v4, 3), "blocks of 3 over 8 keys: the last block has 2"),
        flow.Edge((rising, v12, 5), "the maximum grows in every block, blocks of 5 over 12 keys"),
        flow.Edge((masked, v4, 3), "row 1 fully masked (every score -inf): out 0, lse -inf"),
        flow.Edge((holes, v4, 3), "-inf entries, and a first block all -inf in row 1"),
        flow.Edge((huge, v4, 2), "logits of 800, 5000 and 1e300 arriving in later blocks"),
        flow.Edge((huge, v4, 3), "the same logits in blocks of 3"),
        flow.Edge((example, v4, 1), "blocks of 1"),
        flow.Edge((example, v4, 20), "one block longer than the row"),
    ]


@st.composite
def _inputs(draw):
    R, N, d = draw(st.integers(1, 4)), draw(st.integers(1, 40)), draw(st.integers(1, 4))
    scale = draw(st.sampled_from([1.0, 30.0, 1e3, 1e300]))
    s = draw(hnp.arrays(np.float64, (R, N), elements=st.floats(-1, 1))) * scale
    if draw(st.booleans()):
        ramp = draw(st.sampled_from([1.0, 50.0, 1e3]))     # the maximum grows along the row
        s = s + ramp * np.arange(N)[None, :]
    keep = draw(hnp.arrays(np.bool_, (R, N), elements=st.sampled_from([True, True, True, False])))
    s = np.where(keep, s, -np.inf)
    if draw(st.booleans()):
        s[draw(st.integers(0, R - 1))] = -np.inf           # a fully masked row
    v = draw(hnp.arrays(np.float64, (N, d), elements=st.floats(-100, 100)))
    block = draw(st.integers(1, N + 3))
    return (s, v, block)


FUNCTIONS = [flow.Function("online_softmax", reference=reference, args=_inputs(), edges=_edges(),
                           compare=compare, explain=explain)]


def check(sub):
    return flow.run(sub, FUNCTIONS, checked=[
        "the statement's cases: a fully masked row, -inf entries, a first block all -inf, logits up to 1e300 "
        "growing from block to block, blocks that do not divide the row, blocks of 1 and longer than the row",
        "rows of finite and -inf scores at scales 1 to 1e300, values in [-100, 100], any block size, drawn per run"])
