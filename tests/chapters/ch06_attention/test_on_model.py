"""Chapter 6 (attention) on any machine: the kernels on the CPU model against float64, broken variants
caught, the online softmax's numbers. Small sizes (several query tiles and key blocks, a tail, causal and
not): a few seconds each.

Run: PYTHONPATH=$PWD python -m pytest tests/chapters/ch06_attention -q
"""
import pytest

from chapters.ch06_attention import attention, online
from judge.gpu import build
from judge.model.errors import Hang, Violation

pytest.importorskip("ml_dtypes")
RUNG2 = "one warpgroup"


@pytest.mark.parametrize("B, H, S, d, causal", [(1, 2, 200, 64, True), (1, 1, 150, 128, False)])
def test_rung2_matches_float64_on_the_cpu_model(B, H, S, d, causal):
    # S = 200: four query tiles (the last with 8 rows), two key blocks of 128 (the second with 72 keys)
    co, cl = attention.model_check(RUNG2, B, H, S, d, causal)
    assert co.ok, co.message
    assert cl.ok, cl.message


@pytest.mark.parametrize("name", ["warp specialized", "ping-pong", "intra-warpgroup overlap"])
def test_rungs_3_to_5_match_float64_on_the_cpu_model(name):
    # causal with 64-key blocks: consumer 0 of a 128-row tile needs one block fewer than consumer 1, and
    # waits for and releases the block it skips (else the producer would wait on its empty barrier forever)
    co, cl = attention.model_check(name, 1, 1, 330, 64, True, extra={"BLOCK_N": 64})
    assert co.ok, co.message
    assert cl.ok, cl.message


def _variant(old: str, new: str, d: int = 64, name: str = RUNG2):
    src = (attention.HERE / attention.rung(name)["file"]).read_text()
    assert old in src, old
    return build.compile(src.replace(old, new), defines=attention.defines(name, d), name="variant.cu")


def test_a_ping_pong_turn_never_given_is_a_hang_on_the_cpu_model():
    b = _variant("if (c == 0 ? j < other : j + 1 < other) turn_give(BAR + 1 - c);",
                 "if (c == 0 && j < other) turn_give(BAR + 1 - c);", name="ping-pong")
    with pytest.raises(Hang, match="barrier 2"):
        attention.model_check("ping-pong", 1, 1, 300, 64, False, build=b)


@pytest.mark.parametrize("what, old, new, causal", [
    ("O not rescaled when the maximum grows", "o[i] *= alpha[(i / 2) % 2];", "{}", False),
    ("causal mask off by one (a key equal to the query masked)", "(causal && key > row)", "(causal && key >= row)", True),
    ("the last key block never read", "for (int j = 0; j < n_blocks; ++j) {", "for (int j = 0; j < n_blocks - 1; ++j) {", False),
])
def test_a_broken_rung2_fails_on_the_cpu_model(what, old, new, causal):
    # two full key blocks: the maximum grows in the second for about half the rows, by a share of |O|
    try:
        co, cl = attention.model_check(RUNG2, 1, 1, 256, 64, causal, build=_variant(old, new))
    except Violation as e:
        # a key block never read was still loaded (the ring runs one block ahead): the block exits with that
        # TMA load unobserved, and the model names the rule before any output is compared
        assert e.rule == "exit-before-tma-load" and "never read" in what, (what, e)
        return
    assert not (co.ok and cl.ok), f"{what}: passed the float64 check"


def test_the_kernels_arithmetic_stays_inside_the_derived_tolerance_and_bf16_p_is_what_costs():
    rows = online.error_table(B=1, H=1, S=256, d=64, causal=True, seed=1)
    fp32, p_bf16, kernel, allowance = rows
    assert fp32["O rel. error"] < 1e-5 < p_bf16["O rel. error"]         # the rounding of P is the cost
    for r in (fp32, p_bf16, kernel):
        assert r["O largest share of the allowance"] < 1
        assert r["LSE largest share of the allowance"] < 1
    assert kernel["O rel. error"] < allowance["O rel. error"]


def test_the_timed_problems_hold_16k_tokens_and_count_flops_as_the_paper():
    for p in attention.problems():
        assert p["batch"] * p["seq_len"] == 16384 and p["heads"] * p["head_dim"] == 2048
        full = 4.0 * p["batch"] * p["heads"] * p["seq_len"] ** 2 * p["head_dim"]
        assert attention.flops(p) == (full / 2 if p["causal"] else full)



def test_rung5_rescaling_o_while_its_wgmma_runs_is_a_race_on_the_cpu_model():
    # O rescaled (and pinned there) before wgmma.wait_group 0: P_{j-1} V_{j-1} may still add into it
    b = _variant("      wg::wait<0>();\n      attn::fence_operand(o);                                // no rescale",
                 "      rescale(o, alpha);\n      attn::fence_operand(o);\n      wg::wait<0>();\n      attn::fence_operand(o);  // no rescale",
                 name="intra-warpgroup overlap")
    with pytest.raises(Violation, match="wgmma-accumulator"):
        attention.model_check("intra-warpgroup overlap", 1, 1, 300, 64, False, build=b)
