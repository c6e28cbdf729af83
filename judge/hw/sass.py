"""Read SASS: disassemble a cubin and answer "does this kernel use feature X?".

The proof that a kernel used a Hopper feature is in its machine code, not its source:
a cp.async that the compiler turned into ordinary loads shows no LDGSTS. Each
feature below is a set of SASS mnemonics seen on sm_90a (and sm_100a for tcgen05).

    from judge.hw import sass
    sass.uses(text, "tma.load")      # True if UTMALDG appears
    sass.FEATURES["wgmma"].describe  # what the mnemonic means
"""
from __future__ import annotations

import re
import subprocess
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


def disassemble(cubin_path) -> str:
    from judge.gpu.toolkit import tool
    res = subprocess.run([tool("nvdisasm"), "-c", "-g", str(cubin_path)], capture_output=True, text=True)
    if res.returncode != 0:  # -g needs line info; retry plain
        res = subprocess.run([tool("nvdisasm"), "-c", str(cubin_path)], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"nvdisasm failed on {cubin_path}: {res.stderr.strip()}")
    return res.stdout


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


def instructions(sass: str) -> list[tuple[int, str]]:
    """(address, instruction text) of every instruction, in address order."""
    return [(int(a, 16), t) for a, t in _ADDR.findall(sass)]


def rule_violations(sass: str) -> list[str]:
    """Hardware rules whose omission the SASS of one kernel shows, each named (empty: none seen).

    - TMA store after ordinary shared-memory stores with no async-proxy fence between them: the threads'
      STS writes are in the generic proxy, the bulk store reads through the async proxy, and only
      `fence.proxy.async.shared::cta` (FENCE.VIEW.ASYNC.S) in each writing thread, before the barrier,
      makes them visible to it (PTX ISA, "Memory consistency model: proxies"). Without it the store may
      write stale bytes; on an H200 it usually does not, which is why the judge reads the SASS.
    - A block that exits after a TMA store with no wait on the bulk group (`cp.async.bulk.wait_group.read`,
      a DEPBAR on SB0 after the store): the store may still be reading shared memory that the exiting
      block gives back (PTX ISA, cp.async.bulk.wait_group).
    These are read in address order, which is program order for straight-line code; judge.model checks
    the same rules exactly, by running the kernel.
    """
    ins = instructions(sass)
    out = []
    stores = [i for i, (_, t) in enumerate(ins) if re.match(r"(@!?U?P\w+\s+)?UTMASTG\b", t)]
    if not stores:
        return out
    first = stores[0]
    sts = [i for i in range(first) if re.match(r"(@!?P\w+\s+)?STS(?:\.|\s|$)", ins[i][1])]
    if sts and not any("FENCE.VIEW.ASYNC" in ins[i][1] for i in range(sts[-1] + 1, first)):
        out.append("proxy fence: threads wrote shared memory with ordinary stores (STS at "
                   f"/*{ins[sts[-1]][0]:04x}*/) and a TMA store (UTMASTG at /*{ins[first][0]:04x}*/) then "
                   "reads it with no fence.proxy.async.shared::cta (FENCE.VIEW.ASYNC) between them: each "
                   "writing thread must run the fence before the barrier that precedes the store")
    for s in stores:
        nxt = next((i for i in range(s + 1, len(ins)) if re.match(r"(@!?P\w+\s+)?EXIT\b", ins[i][1])), None)
        if nxt is not None and not any(re.match(r"DEPBAR\.LE\s+SB0", ins[i][1]) for i in range(s + 1, nxt)):
            out.append(f"store before exit: the block can exit (EXIT at /*{ins[nxt][0]:04x}*/) while its TMA "
                       f"store (UTMASTG at /*{ins[s][0]:04x}*/) may still be reading shared memory: commit "
                       "the store and wait for it (cp.async.bulk.commit_group; cp.async.bulk.wait_group.read 0) "
                       "before the block ends")
            break
    return out
