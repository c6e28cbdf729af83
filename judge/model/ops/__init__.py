"""judge.model.ops - the PTX instructions of the CPU model, one module per instruction family.

Importing this package registers every family with judge.model.registry (longest dotted prefix
wins). Each family uses the machine's state (judge.model.state), the checks (judge.model.checks),
the completions (judge.model.completion) and the scheduler (judge.model.scheduler), never another
family (one exception, named in tests/model/test_model_layout.py EXTENDS: tcgen05_cp extends tcgen05
and uses its helpers). To add an instruction: write `@op("name") def factory(m, ins) -> run(ins, mask, full)` in
its family (or a new module in this folder) and a test in tests/test_model_ops_*.py (and a breaking case in tests/model/test_model_rules.py for a new rule).

    alu        add ... fma (and on .f16x2/.bf16x2, .u16x2/.s16x2), setp, selp, mov, bfe, bfi, bfind, lop3, prmt,
               shf, copysign, sad, dp4a, dp2a, vabsdiff4
    convert    cvt (FP8 pairs too), cvta
    memory     ld, ldu, st, atom, red, ldmatrix, stmatrix, wmma.load / wmma.store (m16n16k16)
    control    bra, exit, ret, trap, and hints with no observable effect
    barriers   bar / barrier (block), bar.warp.sync, barrier.cluster, fence
    warp       shfl.sync, vote, activemask, elect.sync, redux.sync, match.sync
    cluster    mapa, getctarank
    cp_async   cp.async, commit_group, wait_group / wait_all, cp.async.mbarrier.arrive
    mbarrier   mbarrier.init / inval / arrive / arrive_drop / expect_tx / complete_tx / try_wait / test_wait
    bulk       cp.async.bulk(.tensor), cp.reduce.async.bulk.tensor, bulk commit/wait groups
    st_async   st.async, red.async (a register into a cluster block's shared memory, counted on its mbarrier)
    wgmma      wgmma.fence / mma_async / commit_group / wait_group
    mma        mma.sync (the warp-level tensor core: m16n8k16 / m16n8k8 with bf16, f16, tf32), wmma.mma
    tcgen05    tcgen05.alloc / dealloc / relinquish_alloc_permit / mma / commit / ld / st / wait / fence
               (tensor memory: judge.model.tensor_memory; block-scaled kinds: judge.model.block_scale)
    tcgen05_cp tcgen05.cp (shared memory -> tensor memory; uses tcgen05's helpers and state)
    clc        clusterlaunchcontrol.try_cancel / query_cancel, mov.b128 (cluster launch control, sm_100)
    tensormap  tensormap.replace, tensormap.cp_fenceproxy, fence.proxy.tensormap::generic (judge.model.tensormaps)
    setmaxnreg setmaxnreg.inc / dec (warpgroup-aligned, the CTA's register pool)
    calls      call sequences: st.param of a call's arguments, call __assertfail (a failed assert), call vprintf
               (printf, into report.printed), ld.param of a call's return value

A module added to this folder registers itself: every module here but `common` is imported below.
"""
import importlib
import pkgutil

FAMILIES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "common"))
for _name in FAMILIES:
    importlib.import_module(f"{__name__}.{_name}")
