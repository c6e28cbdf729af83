"""tests/model/test_model_rules.py - every rule the CPU model enforces has a PTX snippet that breaks it, and a
PTX ISA section in judge.model.checks.RULES that its message cites.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_rules.py -q

Each case is a few hand-written PTX lines (judge.model.snippet makes them a module) run on the
model; the Violation must name the rule, and its message must end with the rule's citation. A
second test reads judge/model's source: every rule id passed to fail()/abort() has an entry in
RULES, and every entry has a case here.
"""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from judge import model
from judge.hw import tma
from judge.hw import wgmma as hw_wgmma
from judge.model import checks, snippet

ROOT = Path(__file__).resolve().parents[2]

SHARED = "    .shared .align 128 .b8 buf[4096];\n    .shared .align 8 .b64 bar;\n"
IO = (("in", "u64"), ("out", "u64"))
# thread index, the shared buffer's address, the global input and output
PROLOGUE = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, buf;
    mov.u32 %r3, bar;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    setp.eq.u32 %p1, %r0, 0;
    setp.eq.u32 %p2, %r0, 32;
"""


# threads 0..31 read word %r0 of the tensor-map parameter (%r5), with its shared (%r6) and global (%rd10) places
TMAP_COPY = """
    setp.lt.u32 %p3, %r0, 32;
    mov.u64 %rd6, tmap;
    shl.b32 %r4, %r0, 2;
    cvt.u64.u32 %rd9, %r4;
    add.u64 %rd13, %rd6, %rd9;
    @%p3 ld.param.u32 %r5, [%rd13];
    add.u32 %r6, %r1, %r4;
    add.u64 %rd10, %rd2, %rd9;
    cvt.u64.u32 %rd12, %r1;
"""


# thread 0 asks to cancel a cluster (try_cancel), waits for the response and holds it in %q1
CLC_ASK = """
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 16;
    @%p1 clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r1], [%r3];
    @%p1 mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r3], 0;
    @%p1 ld.shared.v2.u64 {%rd20, %rd21}, [%r1];
    @%p1 mov.b128 %q1, {%rd20, %rd21};
"""


def _io(rng):
    return rng.standard_normal(256).astype(np.float32), np.full(256, np.nan, np.float32)


# rule -> (PTX body after PROLOGUE, launch keywords, extra parameters and arguments builder)
CASES = {
    "cp.async-wait": ("""
    @%p1 cp.async.ca.shared.global [%r1], [%rd1], 4;
    cp.async.commit_group;
    @%p1 ld.shared.u32 %r2, [%r1];          // no cp.async.wait_group before the read
""", {}),
    "cp.async-visibility": ("""
    @%p1 cp.async.ca.shared.global [%r1], [%rd1], 4;
    cp.async.commit_group;
    cp.async.wait_group 0;                  // covers thread 0's own copy only
    @%p2 ld.shared.u32 %r2, [%r1];          // thread 32 reads it with no barrier after that wait
""", {}),
    "async-overwrite-race": ("""
    @%p2 ld.shared.u32 %r2, [%r1];          // warp 1 reads the buffer
    @%p1 cp.async.ca.shared.global [%r1], [%rd1], 4;    // thread 0 refills it with no barrier between
""", {}),
    "async-read-overwritten": ("""
    @%p1 cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r1], 16;
    @%p1 cp.async.bulk.commit_group;
    @%p1 st.shared.u32 [%r1], %r0;          // before cp.async.bulk.wait_group.read
""", {}),
    "exit-before-bulk-read": ("""
    @%p1 cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r1], 16;
    @%p1 cp.async.bulk.commit_group;        // and exits without waiting for the read
""", {}),
    "exit-before-tma-load": ("""
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r3], 16;
    @%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 16, [%r3];
""", {}),                                   # and the block exits with no wait on that phase
    "proxy-fence": ("""
    @%p1 st.shared.u32 [%r1], %r0;
    @%p1 cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r1], 16;   // no fence.proxy.async
    @%p1 cp.async.bulk.commit_group;
    @%p1 cp.async.bulk.wait_group.read 0;
""", {}),
    "proxy-fence-barrier": ("""
    @%p2 st.shared.u32 [%r1], %r0;
    fence.proxy.async.shared::cta;          // fenced by its writer, but no barrier after the fence
    @%p1 cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r1], 16;
    @%p1 cp.async.bulk.commit_group;
    @%p1 cp.async.bulk.wait_group.read 0;
""", {}),
    "tma-read-before-complete": ("""
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    @%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 16, [%r3];
    @%p1 ld.shared.u32 %r2, [%r1];          // the phase has not completed (no arrival yet)
""", {}),
    "tma-visibility": ("""
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r3], 16;
    @%p1 cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 16, [%r3];
    @%p2 ld.shared.u32 %r2, [%r1];          // the phase completed, but thread 32 never waited on it
""", {}),
    "mbarrier-uninitialized": ("""
    @%p1 mbarrier.arrive.shared::cta.b64 %rd5, [%r3];      // no mbarrier.init
""", {}),
    "mbarrier-reinit": ("""
    mbarrier.init.shared::cta.b64 [%r3], 64;               // every thread initializes the one barrier
""", {}),
    "mbarrier-arrivals": ("""
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r3], 16;
    @%p1 mbarrier.arrive.shared::cta.b64 %rd5, [%r3];      // a second arrival on a count of 1
""", {}),
    "alignment": ("""
    @%p1 cp.async.cg.shared.global [%r1+4], [%rd1], 16;     // 16 bytes to an offset of 4
""", {}),
    "shared-bounds": ("""
    @%p1 ld.shared.u32 %r2, [%r1+65536];
""", {}),
    "global-bounds": ("""
    @%p1 ld.global.u32 %r2, [%rd1+4096];    // the input has 1024 bytes
""", {}),
    "shared-window": ("""
    mapa.shared::cluster.u32 %r4, %r1, 0;
    @%p1 cp.async.ca.shared.global [%r4], [%rd1], 4;        // cp.async takes .shared::cta addresses
""", {}),
    "mapa-address": ("""
    @%p1 mapa.u64 %rd4, %rd1, 0;            // a global address, not a shared variable's
""", {}),
    "dsmem-unordered": ("""
    mov.u32 %r5, %cluster_ctarank;
    setp.eq.u32 %p3, %r5, 1;
    setp.eq.u32 %p4, %r5, 0;
    mapa.shared::cluster.u32 %r4, %r1, 0;
    @%p3 st.shared::cluster.u32 [%r4], %r0;  // block 1 writes block 0's buffer ...
    @%p4 ld.shared::cluster.u32 %r2, [%r4];  // ... block 0 reads it, no cluster barrier between
""", {"grid": (2, 1, 1), "cluster": (2, 1, 1)}),
    "dsmem-after-exit": ("""
    mov.u32 %r5, %cluster_ctarank;
    setp.eq.u32 %p3, %r5, 1;
    mapa.shared::cluster.u32 %r4, %r1, 0;
    @%p3 st.shared::cluster.u32 [%r4+64], %r0;   // block 1 writes block 0's memory; block 0 exits
""", {"grid": (2, 1, 1), "cluster": (2, 1, 1)}),
    "trap": ("""
    @%p2 trap;
""", {}),
    "tma-barrier-cta": ("""
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    mov.u32 %r5, %cluster_ctarank;
    xor.b32 %r5, %r5, 1;
    mapa.shared::cluster.u32 %r6, %r3, %r5;   // the peer block's mbarrier, without .cta_group::2
    mov.u64 %rd6, tmap;
    mov.u32 %r7, 0;
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd6, {%r7, %r7}], [%r6];
""", {"tmap": True, "grid": (2, 1, 1), "cluster": (2, 1, 1)}),
    "tma-rank": ("""
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    mov.u64 %rd6, tmap;
    @%p1 cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd6, {%r0}], [%r3];
""", {"tmap": True}),
    "tensormap-object": ("""
    @%p1 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r1], %rd1;   // buf holds no map
""", {}),
    "tensormap-space": (TMAP_COPY + """
    @%p3 st.shared.u32 [%r6], %r5;          // the map's 128 bytes into shared memory
    bar.sync 0;
    cvta.shared.u64 %rd11, %rd12;
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1+2048], [%rd11, {%r0, %r0}], [%r3];
""", {"tmap": True}),
    "tensormap-proxy-fence": (TMAP_COPY + """
    @%p3 st.global.u32 [%rd10], %r5;         // the map's 128 bytes into global memory (out)
    bar.sync 0;
    @%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1+2048], [%rd2, {%r0, %r0}], [%r3];
""", {"tmap": True}),
    "clc-response": ("""
    mov.b128 %q1, {%rd1, %rd2};             // two pointers, not a try_cancel response
    clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p4, %q1;
""", {}),
    "clc-after-failure": (CLC_ASK + """
    @%p1 clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p5, %q1;   // false: one block, none left
    @%p1 clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r1+16], [%r3];
""", {}),
    "async-store-mbarrier": ("""
    mov.u32 %r10, %cluster_ctarank;
    xor.b32 %r14, %r10, 1;
    mapa.shared::cluster.u32 %r15, %r1, %r14;            // the peer's buffer ...
    st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%r15], %r0, [%r3];   // ... this block's mbarrier
""", {"grid": (2, 1, 1), "cluster": (2, 1, 1)}),
    "warp-aligned": ("""
    @%p1 stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r0};   // thread 0 alone
""", {}),
    "wgmma-aligned": ("""
    wgmma.fence.sync.aligned;
    @%p1 wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd7, %rd8, 0, 1, 1, 0, 0;
""", {"wgmma": True}),
    "wgmma-fence": ("""
    wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd7, %rd8, 0, 1, 1, 0, 0;
""", {"wgmma": True}),
    "wgmma-descriptor": ("""
    wgmma.fence.sync.aligned;
    not.b64 %rd9, 0;
    wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd9, %rd8, 0, 1, 1, 0, 0;
""", {"wgmma": True}),
    "wgmma-accumulator": ("""
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1, %f2, %f3, %f4}, %rd7, %rd8, 0, 1, 1, 0, 0;
    wgmma.commit_group.sync.aligned;
    add.f32 %f5, %f1, %f2;                  // before wgmma.wait_group
    wgmma.wait_group.sync.aligned 0;
""", {"wgmma": True}),
}


def _run_case(rule, seed):
    body, kw = CASES[rule]
    kw = dict(kw)
    rng = np.random.default_rng(seed)
    x, y = _io(rng)
    params, args = list(IO), [x, y]
    if kw.pop("tmap", False):
        params.insert(0, ("tmap[128]", "align 64 .b8"))
        t2 = rng.standard_normal((16, 64)).astype(np.float32)
        args.insert(0, tma.tensor_map_spec(t2, box=(16, 4)))
    if kw.pop("wgmma", False):
        params += [("da", "u64"), ("db", "u64")]
        body = "    ld.param.u64 %rd7, [da];\n    ld.param.u64 %rd8, [db];\n" + body
        args += [np.uint64(hw_wgmma.encode(0, 128, 256, "none")), np.uint64(hw_wgmma.encode(2048, 128, 256, "none"))]
        kw.setdefault("block", (128, 1, 1))
    kw.setdefault("block", (64, 1, 1))
    ptx = snippet.kernel(PROLOGUE + body, params=params, shared=SHARED)
    return model.run(ptx, "k", args=tuple(args), seed=seed, **kw)


@pytest.mark.parametrize("rule", sorted(CASES))
def test_the_snippet_breaks_its_rule_and_the_message_cites_the_ptx_isa(rule):
    with pytest.raises(model.Violation) as e:
        _run_case(rule, seed=int(np.random.default_rng().integers(2**31)))
    assert e.value.rule == rule, f"expected {rule}, got {e.value}"
    assert e.value.message.endswith(checks.cite(rule))
    assert "PTX ISA, " + checks.RULES[rule].section in e.value.message


def _rules_raised_in_source() -> dict[str, str]:
    """rule id -> file, for every rule id given to fail()/abort() in judge/model (a rule chosen from a
    table in the same function counts each string of that table)."""
    out = {}
    for path in sorted((ROOT / "judge" / "model").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef) or fn.name in ("fail", "abort"):
                continue                    # (fail and abort themselves pass a rule through)
            for call in ast.walk(fn):
                if not isinstance(call, ast.Call):
                    continue
                name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
                if name not in ("fail", "abort", "Violation"):
                    continue
                args = call.args
                rule = next((a for a in args[:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)), None)
                if rule is not None:
                    out.setdefault(rule.value, str(path.relative_to(ROOT)))
                elif args and any(isinstance(a, ast.Name) for a in args[:2]) and name != "Violation":
                    for t in ast.walk(fn):          # rule from a table: (STATE, "rule-id") pairs
                        if isinstance(t, ast.Tuple):
                            out.update({c.value: str(path.relative_to(ROOT)) for c in t.elts
                                        if isinstance(c, ast.Constant) and isinstance(c.value, str)})
    return out


def test_every_rule_raised_anywhere_has_an_entry_and_every_entry_a_breaking_case():
    raised = _rules_raised_in_source()
    assert len(raised) >= 20
    missing = {r: f for r, f in raised.items() if r not in checks.RULES}
    assert not missing, f"rule ids raised without an entry in judge.model.checks.RULES: {missing}"
    elsewhere = {r for r in checks.RULES if r.startswith("tcgen05-")}   # sm_100a: tests/model/test_model_tcgen05.py
    assert set(CASES) | elsewhere == set(checks.RULES), (
        f"RULES without a breaking case: {set(checks.RULES) - set(CASES) - elsewhere}; "
        f"cases of no rule: {set(CASES) - set(checks.RULES)}")
    unused = set(checks.RULES) - set(raised)
    assert not unused, f"RULES entries the model never raises: {unused}"


def test_a_violation_is_only_made_by_checks():
    for path in sorted((ROOT / "judge" / "model").rglob("*.py")):
        if path.name in ("errors.py", "checks.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Violation":
                pytest.fail(f"{path.relative_to(ROOT)}:{node.lineno} builds a Violation itself: use checks.fail / "
                            f"checks.abort so that the message cites its rule")


def test_an_unknown_rule_id_is_refused():
    class Probe:
        strict, violations = True, []

        def where(self, ins):
            return "here"

        def event(self, *a, **k):
            pass
    with pytest.raises(KeyError):
        checks.fail(Probe(), "no-such-rule", None, "x")


# the 256 bytes of a snippet's 16 x 4 float box expected on `bar`, and its phase waited for: without it the block
# exits while the load may still be writing (exit-before-tma-load)
WAIT_FOR_THE_BOX = ("    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r3], 256;\n"
                    "    @%p1 mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r3], 0;\n")


def test_without_the_mistake_the_same_snippets_run_clean():
    """The same lines with the missing wait, barrier or fence put back: no Violation."""
    ok = {
        "cp.async-wait": CASES["cp.async-wait"][0].replace("cp.async.commit_group;", "cp.async.commit_group;\n"
                                                           "    cp.async.wait_group 0;"),
        "cp.async-visibility": CASES["cp.async-visibility"][0].replace("cp.async.wait_group 0;",
                                                                       "cp.async.wait_group 0;\n    bar.sync 0;"),
        "async-overwrite-race": CASES["async-overwrite-race"][0].replace("    @%p1 cp.async", "    bar.sync 0;\n"
                                                                         "    @%p1 cp.async"),
        "proxy-fence-barrier": CASES["proxy-fence-barrier"][0].replace("fence.proxy.async.shared::cta;",
                                                                       "fence.proxy.async.shared::cta;\n    bar.sync 0;"),
        "exit-before-bulk-read": CASES["exit-before-bulk-read"][0] + "    @%p1 cp.async.bulk.wait_group.read 0;\n",
        "exit-before-tma-load": CASES["exit-before-tma-load"][0]
        + "    @%p1 mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r3], 0;\n",
        "mbarrier-reinit": CASES["mbarrier-reinit"][0].replace("    mbarrier.init", "    @%p1 mbarrier.init"),
        # each block's load completes the peer's phase (.cta_group::2), each block waits for its own phase (256
        # bytes of the peer's box): no load is left unobserved at exit (exit-before-tma-load)
        "tma-barrier-cta": CASES["tma-barrier-cta"][0].replace("complete_tx::bytes [", "complete_tx::bytes.cta_group::2 [")
        .replace("    mov.u32 %r5, %cluster_ctarank;",
                 "    barrier.cluster.arrive.release.aligned;\n    barrier.cluster.wait.acquire.aligned;\n"
                 "    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r3], 256;\n    mov.u32 %r5, %cluster_ctarank;")
        + "    @%p1 mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r3], 0;\n"
        + "    barrier.cluster.arrive.release.aligned;\n    barrier.cluster.wait.acquire.aligned;\n",
        "tensormap-proxy-fence": CASES["tensormap-proxy-fence"][0].replace(
            "bar.sync 0;", "fence.proxy.tensormap::generic.release.gpu;\n    bar.sync 0;\n"
            "    @%p1 fence.proxy.tensormap::generic.acquire.gpu [%rd2], 128;") + WAIT_FOR_THE_BOX,
    }
    for rule, body in ok.items():
        saved = CASES[rule]
        CASES[rule] = (body, saved[1])
        try:
            rep = _run_case(rule, seed=1)
        finally:
            CASES[rule] = saved
        assert not rep.violations, (rule, rep.violations)
