"""notes.py - the sentences of chapter 3 that quote figures, computed from the record (markdown), and the
column order of every recorded table.

chapters/ch03_clusters.ipynb displays them with IPython.display.Markdown; no figure is typed by hand, and
every "why" cites a counter from record section ch03.counters (Nsight Compute on the H200, a separate
profiling pass: counters, not times). Any machine (pure Python):

    from chapters.ch03_clusters import notes
    notes.table(rows, "where")                  # recorded rows, columns in the order run.py measured them
    notes.occupancy_findings(occ, predicted)    # section 2: the group rule against every count the H200 gave
    notes.dsmem_findings(dsmem, counters)       # section 4: latency, streaming rate, and what limits it
    notes.histogram_findings(hist, counters)    # section 5: who won, and the counters behind it
    notes.multicast_findings(mc, counters)      # section 6: the times, the copies' bytes and L2's counters
"""
from __future__ import annotations

#: The columns of each recorded table in the order chapters/ch03_clusters/run.py builds its rows (the record
#: stores JSON with sorted keys: a table built from it must name its columns).
COLUMNS = {
    "where": ("block", "rank", "cluster", "clusters", "size", "sm", "t0", "t1"),
    "occupancy": ("smem KiB", "cluster", "blocks/SM", "clusters", "blocks resident", "idle slots", "idle SMs",
                  "predicted"),
    "residency": ("cluster", "max_active_clusters", "seen at once", "SMs used"),
    "sums": ("cluster", "ok", "rel err", "path"),
    "latency": ("target", "ns/load", "cycles/load", "clock GHz"),
    "bandwidth": ("target", "threads", "readers", "GB/s per SM (median)", "GB/s all readers", "B/cycle per SM"),
    "histogram": ("bins", "input", "variant", "ms", "spread", "G elements/s", "speed-up vs global"),
    "multicast": ("variant", "L2 flushed", "ms", "spread", "L2->SM MB", "L2->SM GB/s", "speed-up"),
}


def table(rows, kind: str) -> list[dict]:
    """rows with the columns of COLUMNS[kind], in that order (any other column after them)."""
    cols = COLUMNS[kind]
    return [{**{k: r[k] for k in cols if k in r}, **{k: v for k, v in r.items() if k not in cols}} for r in rows]


def counters(section: dict | None) -> dict:
    """{row id: summary} of a counters section (ch03.counters)."""
    return {r["id"]: r["summary"] for r in (section or {}).get("rows", [])}


def _stall(s: dict, reason: str) -> float:
    return next((t["warps per issue"] for t in s["top stalls"] if t["reason"] == reason), 0.0)


def _top(s: dict) -> str:
    t = s["top stalls"][0]
    return f"{t['reason']} ({100 * t['share']:.0f} % of stall samples)"


def occupancy_findings(occ: dict | None, predicted) -> str:
    """Section 2: the group rule against every count the H200 gave. `predicted(gpc_sizes, cluster,
    blocks_per_sm)` is run.predicted_clusters. The cases are counted once: the driver's max_active_clusters
    for each (cluster size, shared memory) and the launches at one block per SM, joined on (size, blocks/SM)."""
    if not occ:
        return "*(not recorded yet on an H200)*"
    lay = occ["layout"]
    sizes = lay["gpc_sizes"]
    cases = {}
    for r in occ["rows"]:
        if r.get("clusters") is not None:
            cases[(r["cluster"], r["blocks/SM"])] = ("max_active_clusters", r["clusters"])
    for c, n in lay["fits_one_per_sm"].items():
        if n:
            cases.setdefault((int(c), 1), ("launched", n))
    n_driver = sum(1 for v in cases.values() if v[0] == "max_active_clusters")
    n_launch = len(cases) - n_driver
    miss = [f"clusters of {c} at {b} block(s)/SM: {n} by the {how}, {predicted(sizes, c, b)} predicted"
            for (c, b), (how, n) in sorted(cases.items()) if n != predicted(sizes, c, b)]
    gpcs = 8                                      # GPCs of a full GH100 (NVIDIA H100 whitepaper)
    out = [f"- The H200 showed {len(sizes)} groups of SMs, of sizes {sorted(sizes, reverse=True)} ({sum(sizes)} SMs): "
           + (f"more groups than a full GH100 has GPCs ({gpcs}), so not every group is a whole GPC."
              if len(sizes) > gpcs else f"no more groups than a full GH100 has GPCs ({gpcs})."),
           f"- {len(cases)} distinct cases (cluster size, blocks per SM): {n_driver} `max_active_clusters` values and "
           f"{n_launch} more cluster sizes launched at one block per SM. The rule reproduced "
           f"{len(cases) - len(miss)} of {len(cases)}" + ("." if not miss else "; it missed " + "; ".join(miss) + ".")]
    sms = sum(sizes)
    fits = {int(c): n for c, n in lay["fits_one_per_sm"].items() if n}
    out.append("- At one block per SM: " + "; ".join(f"clusters of {c}: {n} fit, {sms - n * c} SMs idle"
                                                     for c, n in sorted(fits.items()) if c > 1) + ".")
    res = occ.get("residency", [])
    if res:
        same = [r["cluster"] for r in res if r["seen at once"] == r["max_active_clusters"]]
        other = [f"size {r['cluster']}: {r['seen at once']} at once, {r['max_active_clusters']} allowed"
                 for r in res if r["cluster"] not in same]
        out.append("- Residency: the most clusters running at one moment was "
                   + (f"exactly `max_active_clusters` for sizes {same}" if same else "never `max_active_clusters`")
                   + ("" if not other else "; it differed for " + "; ".join(other)) + ".")
    return "\n".join(out)


def dsmem_findings(d: dict | None, ctr: dict | None, names: dict) -> str:
    """Section 4. `names` is run.TARGET_NAMES ({"local": ..., "peer": ..., "l2": ...})."""
    if not d:
        return "*(not recorded yet on an H200)*"
    lat = {r["target"]: r for r in d["latency"]}
    own, peer, l2 = lat[names["local"]], lat[names["peer"]], lat[names["l2"]]
    out = [f"- Latency of a dependent load: {own['ns/load']:.0f} ns ({own['cycles/load']:.0f} cycles) from the block's own "
           f"shared memory, {peer['ns/load']:.0f} ns ({peer['cycles/load']:.0f} cycles) from a peer's through DSMEM, "
           f"{l2['ns/load']:.0f} ns ({l2['cycles/load']:.0f} cycles) from L2: DSMEM's is "
           f"{l2['ns/load'] / peer['ns/load']:.1f}× lower than L2's."]

    def bw(t, threads, alone=True):
        return next((r for r in d["bandwidth"] if r["target"] == names[t] and r.get("threads", 512) == threads
                     and (r["readers"] == 1) == alone), None)
    parts = [f"{names[t]} " + " / ".join(f"{bw(t, th)['GB/s per SM (median)']:.0f}" for th in (512, 1024) if bw(t, th))
             + " GB/s" for t in ("local", "peer", "l2") if bw(t, 512)]
    out.append("- Streaming (each thread one 16-byte load in flight; one block of 512 / 1024 threads): "
               + ", ".join(parts) + ". One load in flight per thread measures how many loads a block keeps in "
               "flight divided by their latency, not the network's capacity; bulk DSMEM copies "
               "(`cp.async.bulk.shared::cluster`) were not tried, so this chapter makes no claim about DSMEM's "
               "bandwidth beyond these loads.")
    c = counters(ctr)
    p, g = c.get("ch03.dsmem_bandwidth_peer"), c.get("ch03.dsmem_bandwidth_l2")
    if p and g:
        out.append(f"- Nsight Compute (every SM reading at once): the DSMEM run moved {p['DSMEM bytes'] / 1e6:.0f} MB "
                   f"through DSMEM and its warps waited on long_scoreboard {_stall(p, 'long_scoreboard'):.0f} warps per "
                   f"issue (the L2 run: {_stall(g, 'long_scoreboard'):.0f}); top stall {_top(p)}, issue slots busy "
                   f"{p['issue slots busy %']:.1f} %: the loads wait on their latency, the issue rate is not the limit.")
    return "\n".join(out)


def histogram_findings(h: dict | None, ctr: dict | None) -> str:
    """Section 5: the recorded times, then the counters that explain the cluster histogram's step."""
    if not h:
        return "*(not recorded yet on an H200)*"
    rows = h["rows"]
    groups = list(dict.fromkeys((r["bins"], r["input"]) for r in rows))
    out = []
    for bins, dist in groups:
        rs = [r for r in rows if r["bins"] == bins and r["input"] == dist]
        g = next(r for r in rs if r["variant"] == "global atomics")
        out.append(f"- {bins} bins, {dist}: global atomics {g['ms']:.2f} ms; "
                   + "; ".join(f"{r['variant']} {r['ms']:.2f} ms ({r['speed-up vs global']:.2f}×)" for r in rs if r is not g) + ".")
    c = counters(ctr)
    c2, c4, gl = c.get("ch03.hist_cluster2"), c.get("ch03.hist_cluster4"), c.get("ch03.hist_global")
    if c2 and c4:
        ratio = c4["DSMEM atom sectors"] / c2["DSMEM atom sectors"]
        out.append(f"- Nsight Compute, 65,536 bins, uniform input: every element is one 4-byte atomic add "
                   f"(`red.shared::cluster` to a peer, a plain shared atomic to the block's own slice). DSMEM atomic "
                   f"sectors: {c2['DSMEM atom sectors'] / 1e6:.1f} M with clusters of 2, {c4['DSMEM atom sectors'] / 1e6:.1f} M "
                   f"with 4 ({ratio:.2f}×; the remote share (c−1)/c predicts 1.50×). The warps waiting on those adds "
                   f"(long_scoreboard) went from {_stall(c2, 'long_scoreboard'):.1f} to {_stall(c4, 'long_scoreboard'):.1f} "
                   f"warps per issue, and short_scoreboard from {_stall(c2, 'short_scoreboard'):.1f} to "
                   f"{_stall(c4, 'short_scoreboard'):.1f}: more remote adds, each waited for longer.")
    if gl:
        out.append(f"- The global-atomics kernel, for comparison: {gl['L2 bytes'] / 1e9:.1f} GB through L2, stalls "
                   f"long_scoreboard {_stall(gl, 'long_scoreboard'):.0f} and lg_throttle {_stall(gl, 'lg_throttle'):.0f} "
                   f"warps per issue (its atomics queue at the L2).")
    return "\n".join(out)


def multicast_findings(mc: dict | None, ctr: dict | None) -> str:
    """Section 6: times, the bytes the issued copies ask of L2, and what L2's own counter saw."""
    if not mc:
        return "*(not recorded yet on an H200)*"
    out = []
    for flushed, how in ((False, "operands in L2"), (True, "L2 flushed before every run")):
        rs = [r for r in mc["rows"] if r.get("L2 flushed") == flushed]
        if rs:
            wide = [r["variant"] for r in rs if r["spread"] > 0.3]
            out.append(f"- {how}: " + "; ".join(f"{r['variant']} {r['ms']:.2f} ms ({r['speed-up']:.2f}×, spread "
                                                 f"{100 * r['spread']:.0f} %)" for r in rs) + "."
                       + (f" Spread over 30 % for {wide}: not figures to lean on." if wide else ""))
    fl = {r["variant"]: r["ms"] for r in mc["rows"] if r.get("L2 flushed")}
    hot = {r["variant"]: r["ms"] for r in mc["rows"] if r.get("L2 flushed") is False}
    both = [k for k in fl if k in hot]
    if both:
        out.append("- With L2 flushed before every run the same loops ran "
                   + ", ".join(f"{hot[k] / fl[k]:.1f}× faster ({k})" for k in both)
                   + " than with the operands left in L2. No counter recorded here explains that: it is reported, "
                   "not understood.")
    rs = [r for r in mc["rows"] if not r.get("L2 flushed")] or mc["rows"]
    out.append("- Bytes the issued copies ask of L2 (counted from the copies, not measured): "
               + ", ".join(f"{r['variant']} {r['L2->SM MB']:.0f} MB" for r in rs) + ".")
    c = counters(ctr)
    ids = [("plain TMA", "ch03.multicast_1"), ("multicast to 2", "ch03.multicast_2"), ("multicast to 4", "ch03.multicast_4")]
    got = [(k, c[i]) for k, i in ids if i in c]
    if got:
        out.append("- Nsight Compute (one profiled launch each): L2 bytes (lts__t_bytes) "
                   + ", ".join(f"{k} {s['L2 bytes'] / 1e6:.0f} MB" for k, s in got)
                   + "; top stall " + ", ".join(f"{k}: {_top(s)}" for k, s in got)
                   + ". The multicast runs stall most on `membar`: the `MEMBAR.ALL.GPU` that the cluster barrier's "
                   "`arrive.release` puts before every k-step's arrive (section 1's SASS; the plain build has no cluster "
                   "barrier and no `MEMBAR.ALL.GPU`). L2's own byte counter does not fall the way the copies' bytes do.")
    return "\n".join(out)
