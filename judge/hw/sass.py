"""Read SASS: answer "does this kernel use feature X?" and which rules its machine code shows broken.

The proof that a kernel used a Hopper feature is in its machine code, not its source (disassembled by
judge.gpu.build; read here):
a cp.async that the compiler turned into ordinary loads shows no LDGSTS. Each
feature below is a set of SASS mnemonics seen on sm_90a (and sm_100a for tcgen05).

    from judge.hw import sass
    sass.uses(text, "tma.load")      # True if UTMALDG appears
    sass.FEATURES["wgmma"].describe  # what the mnemonic means
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Feature:
    pattern: str      # regular expression over SASS instruction text
    describe: str     # what it proves, for messages

    def count(self, sass: str) -> int:
        return len(re.findall(self.pattern, sass))


FEATURES: dict[str, Feature] = {
    "cp.async": Feature(r"\bLDGSTS\b", "cp.async global->shared copies (LDGSTS)"),
    "cp.async.commit": Feature(r"\bLDGDEPBAR\b", "cp.async commit groups (LDGDEPBAR)"),
    "cp.async.wait": Feature(r"(?<!WARPGROUP\.)\bDEPBAR\.LE\b", "cp.async group waits (DEPBAR.LE)"),
    "clc.try_cancel": Feature(r"\bUGETNEXTWORKID\b", "cluster launch control: try_cancel (UGETNEXTWORKID)"),
    "tma.load": Feature(r"\bUTMALDG\b", "TMA tensor loads (UTMALDG)"),
    "tma.store": Feature(r"\bUTMASTG\b", "TMA tensor stores (UTMASTG)"),
    "tma.reduce": Feature(r"\bUTMAREDG\b", "TMA tensor reductions into global memory (UTMAREDG)"),
    "tma.multicast": Feature(r"\bUTMALDG\S*\.MULTICAST\b", "TMA multicast loads (UTMALDG...MULTICAST)"),
    "bulk.copy": Feature(r"\bUBLKCP\b", "1-D bulk copies (UBLKCP)"),
    "mbarrier": Feature(r"\bSYNCS\.", "mbarrier operations (SYNCS.*)"),
    "mbarrier.expect_tx": Feature(r"\bSYNCS\.ARRIVE\.TRANS64\b", "mbarrier arrive / expect_tx (SYNCS.ARRIVE.TRANS64)"),
    "mbarrier.wait": Feature(r"\bSYNCS\.PHASECHK\b", "mbarrier phase waits (SYNCS.PHASECHK)"),
    "proxy.fence": Feature(r"\bFENCE\.VIEW\.ASYNC\b", "async-proxy fences (FENCE.VIEW.ASYNC)"),
    "cluster.barrier": Feature(r"\bUCGABAR_(?:ARV|WAIT)\b", "cluster barriers (UCGABAR_ARV / UCGABAR_WAIT)"),
    "wgmma": Feature(r"\b[HQI]GMMA\b", "warpgroup MMA (HGMMA / QGMMA / IGMMA)"),
    "wgmma.rs": Feature(r"\b[HQI]GMMA\.\S+\s+R\d+,\s*R\d+,\s*gdesc\[", "warpgroup MMA with A from registers (HGMMA ... Rd, Ra, gdesc[B])"),
    "setmaxnreg": Feature(r"\bUSETMAXREG\b", "register reallocation (USETMAXREG)"),
    "mma.sync": Feature(r"\bHMMA\b", "warp-level MMA (HMMA), the pre-Hopper tensor-core path"),
    "tcgen05": Feature(r"\bUTC[HQ]MMA\b", "Blackwell tcgen05 MMA (UTCHMMA / UTCQMMA)"),
    "local.memory": Feature(r"\b(?:LDL|STL)\b", "local-memory loads/stores (LDL/STL: spills or dynamic indexing)"),
    # sm_100a (Blackwell), as nvdisasm prints them for NVRTC 13.5 cubins (chapter 5):
    "tcgen05.f8f6f4": Feature(r"\bUTCQMMA\b", "tcgen05 MMA on 8/6/4-bit inputs, kind::f8f6f4 / mxf8f6f4 (UTCQMMA)"),
    "tcgen05.f4": Feature(r"\bUTCOMMA\b", "tcgen05 block-scaled 4-bit MMA, kind::mxf4nvf4 (UTCOMMA)"),
    "tcgen05.commit": Feature(r"\bUTCBAR\b", "tcgen05.commit: MMA completion arrives on an mbarrier (UTCBAR)"),
    "tmem.alloc": Feature(r"\bUTCATOMSWS(?:\.2CTA)?\.FIND_AND_SET\b", "tensor-memory allocation, tcgen05.alloc (UTCATOMSWS[.2CTA].FIND_AND_SET)"),
    "tmem.dealloc": Feature(r"\bUTCATOMSWS(?:\.2CTA)?\.AND\b", "tensor-memory release, tcgen05.dealloc (UTCATOMSWS[.2CTA].AND)"),
    "tmem.relinquish": Feature(r"\bUVIRTCOUNT\.DEALLOC\.SMPOOL\b", "tcgen05.relinquish_alloc_permit (UVIRTCOUNT.DEALLOC.SMPOOL)"),
    "tmem.ld": Feature(r"\bLDTM\b", "tensor memory -> registers, tcgen05.ld (LDTM)"),
    "tmem.st": Feature(r"\bSTTM\b", "registers -> tensor memory, tcgen05.st (STTM)"),
    "tmem.cp": Feature(r"\bUTCCP\b", "shared memory -> tensor memory, tcgen05.cp (UTCCP)"),
    "tcgen05.2cta": Feature(r"\bUTC[HQO]MMA\S*\.2CTA\b", "2-SM tcgen05 MMA, cta_group::2 (UTCHMMA.2CTA)"),
}


def _feature(name: str) -> Feature:
    try:
        return FEATURES[name]
    except KeyError:
        raise KeyError(f"unknown SASS feature {name!r}; known: {', '.join(FEATURES)}") from None


def uses(sass: str, feature: str) -> bool:
    return _feature(feature).count(sass) > 0


def feature_counts(sass: str) -> dict[str, int]:
    """How many instructions of each known feature appear (only those present)."""
    counts = {name: f.count(sass) for name, f in FEATURES.items()}
    return {k: v for k, v in counts.items() if v}


def lines_with(sass: str, feature: str, limit: int = 8) -> list[str]:
    """The first few SASS lines that prove the feature, for display."""
    pat = re.compile(_feature(feature).pattern)
    found = [l.strip() for l in sass.splitlines() if pat.search(l)]
    return found[:limit]


def kernel_section(sass: str, kernel: str) -> str:
    """The part of a module's SASS that belongs to one kernel (by its symbol name)."""
    marker = re.compile(r"^\s*\.section\s+\.text\.(\S+?),", re.M)
    starts = [(m.start(), m.group(1)) for m in marker.finditer(sass)]
    for i, (pos, name) in enumerate(starts):
        if name == kernel:
            end = starts[i + 1][0] if i + 1 < len(starts) else len(sass)
            return sass[pos:end]
    names = ", ".join(n for _, n in starts) or "none"
    raise KeyError(f"no kernel {kernel!r} in this module (kernels: {names}); "
                   f"declare it extern \"C\" so its name is not mangled")


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    """cuobjdump -res-usage -> {kernel: {"REG": .., "SHARED": .., "STACK": .., "LOCAL": .., ...}}."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        if cur is not None and "REG:" in line:
            cur.update({k: int(v) for k, v in re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", line)})
            cur = None
    return out


_PTXAS_ENTRY = re.compile(r"Compiling entry function '(\S+)' for")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")
_PTXAS_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas_log(log: str) -> dict[str, dict[str, int]]:
    """ptxas -v info lines -> {kernel: {registers, shared, stack, spill_stores, spill_loads}}."""
    out: dict[str, dict[str, int]] = {}
    cur = None
    for line in log.splitlines():
        m = _PTXAS_ENTRY.search(line)
        if m:
            cur = out.setdefault(m.group(1), {"registers": 0, "shared": 0, "stack": 0,
                                             "spill_stores": 0, "spill_loads": 0})
            continue
        if cur is None:
            continue
        if (m := _PTXAS_FRAME.search(line)):
            cur["stack"], cur["spill_stores"], cur["spill_loads"] = map(int, m.groups())
        if (m := _PTXAS_REGS.search(line)):
            cur["registers"] = int(m.group(1))
        if (m := _PTXAS_SMEM.search(line)):
            cur["shared"] = int(m.group(1))
    return out


# ------------------------------------------------------------------ rules the SASS can prove broken
_ADDR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_LINE = re.compile(r"^\s*(?:(\.L\w+):|/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;)")
_PRED = re.compile(r"^@!?U?P\w+\s+")


def instructions(sass: str) -> list[tuple[int, str]]:
    """(address, instruction text) of every instruction, in address order."""
    return [(int(a, 16), t) for a, t in _ADDR.findall(sass)]


def control_flow(sass: str) -> tuple[list[tuple[int, str]], list[list[int]]]:
    """The instructions of one kernel and, for each, the indices of the instructions that may run next.

    A predicated BRA (some threads take it, some do not) and BRA.U.ANY have two successors; an
    unpredicated BRA one; an unpredicated EXIT none; a predicated EXIT falls through for the threads
    that stay. Thread identity is not known here: a path may combine branches no single thread takes."""
    ins, label_at, pending = [], {}, []
    for line in sass.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        if m.group(1):
            pending.append(m.group(1))
            continue
        for lab in pending:
            label_at[lab] = len(ins)
        pending = []
        ins.append((int(m.group(2), 16), m.group(3)))
    succ: list[list[int]] = []
    for i, (_, t) in enumerate(ins):
        pred = bool(_PRED.match(t))
        op = _PRED.sub("", t)
        nxt = [i + 1] if i + 1 < len(ins) else []
        if op.startswith("EXIT"):
            succ.append(nxt if pred else [])
        elif op.startswith("BRA"):
            m = re.search(r"`\((\.L\w+)\)", op)
            tgt = [label_at[m.group(1)]] if m and m.group(1) in label_at else []
            succ.append(tgt + nxt if pred or ".ANY" in op.split()[0] or not tgt else tgt)
        else:
            succ.append(nxt)
    return ins, succ


def _reach(succ, start: int, stop=lambda i: False) -> set[int]:
    """Instructions reachable from `start` (excluded) on paths that do not pass an instruction `stop`."""
    seen, todo = set(), list(succ[start])
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        if not stop(i):
            todo.extend(succ[i])
    return seen


def rule_violations(sass: str) -> list[str]:
    """Hardware rules whose omission the SASS of one kernel proves, each named (empty: none proven).

    - TMA store after ordinary shared-memory stores with no async-proxy fence on any path between them:
      the threads' STS writes are in the generic proxy, the bulk store reads through the async proxy, and
      only `fence.proxy.async.shared::cta` (FENCE.VIEW.ASYNC.S) in each writing thread, before the
      barrier, makes them visible to it (PTX ISA 9.7.12.15 membar/fence, "proxy fence"; memory
      consistency model: proxies).
    - A TMA store from which no wait on its bulk group (`cp.async.bulk.wait_group.read`, DEPBAR.LE SB0)
      can be reached before an exit: the store may still read shared memory that the exiting block gives
      back (PTX ISA 9.7.9.25.4.3, cp.async.bulk.wait_group).
    The SASS cannot see which thread runs which path, so only a rule broken on EVERY path is reported:
    a kernel where the issuing thread waits in an `if` block of its own, after other code (as CUTLASS
    does), is not rejected here. judge.model checks both rules exactly, thread by thread, by running the
    kernel; judge.grading.cuda_flow uses these only where the model could not run it.
    """
    ins, succ = control_flow(sass)
    out = []
    stores = [i for i, (_, t) in enumerate(ins) if re.match(r"UTMASTG\b", _PRED.sub("", t))]
    if not stores:
        return out
    is_fence = {i for i, (_, t) in enumerate(ins) if "FENCE.VIEW.ASYNC" in t}
    is_wait = {i for i, (_, t) in enumerate(ins) if re.match(r"DEPBAR\.LE\s+SB0", _PRED.sub("", t))}
    is_exit = {i for i, (_, t) in enumerate(ins) if t.startswith("EXIT")}
    sts = [i for i, (_, t) in enumerate(ins) if re.match(r"STS(?:\.|\s|$)", _PRED.sub("", t))]
    for s_i in sts:
        reach = _reach(succ, s_i)
        hit = [u for u in stores if u in reach]
        if hit and not any(f in reach and hit[0] in _reach(succ, f) for f in is_fence):
            out.append("proxy fence: threads write shared memory with ordinary stores (STS at "
                       f"/*{ins[s_i][0]:04x}*/) and a TMA store (UTMASTG at /*{ins[hit[0]][0]:04x}*/) then "
                       "reads it with no fence.proxy.async.shared::cta (FENCE.VIEW.ASYNC) on any path between "
                       "them: each writing thread must run the fence before the barrier that precedes the store "
                       "(PTX ISA, memory consistency model: proxies)")
            break
    for u in stores:
        reach = _reach(succ, u, stop=lambda i: i in is_wait)
        if not any(w in reach for w in is_wait) and any(x in reach for x in is_exit):
            x = min(i for i in reach if i in is_exit)
            out.append(f"store before exit: no path from the TMA store (UTMASTG at /*{ins[u][0]:04x}*/) waits "
                       f"for it to finish reading shared memory before the block exits (EXIT at "
                       f"/*{ins[x][0]:04x}*/): commit the store and wait for it (cp.async.bulk.commit_group; "
                       "cp.async.bulk.wait_group.read 0) in the thread that issued it, before the block ends "
                       "(PTX ISA, cp.async.bulk.wait_group)")
            break
    return out
