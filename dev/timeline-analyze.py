#!/usr/bin/env python3
"""Summarises a timeline CSV of `tune --timeline` (built with dev/timeline-probe.patch applied).

Each row: label, slot, blockIdx.x, .y, .z, smid, launch (index of the weight copy, i.e. the launch in
the graph), then %globaltimer (ns) at: entry, after griddepcontrol.wait (W), after the main loop, after
the K-warp sum, exit, after the atomic tail's C-zeroed wait, after split 0's claim CAS and release
(0 where not reached). Per case, over the steady-state launches (the first and last two dropped),
prints medians [min .. max] in us of: the wait release after the previous launch's last exit, the
main loop's end after W per K split (p50 / max), the SMs' finish (last loop end of their CTAs), the
tail (last exit after the last loop end), and per slot (the first and second CTA to enter an SM, or
one alone on it) the entry and the loop end after W.

    python3 dev/timeline-analyze.py timeline.csv     (or timeline.csv.gz)
"""
import collections
import csv
import gzip
import sys


def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


def main(path):
    # One recorded replay per case; a case starts where the slot counter starts again at 0 (two runs
    # of one label stay apart).
    cases = []
    for r in csv.reader(gzip.open(path, "rt") if path.endswith(".gz") else open(path)):
        v = [int(x) for x in r[1:]]
        if v[0] == 0 or not cases:
            cases.append((r[0], []))
        cases[-1][1].append(v)
    for label, rows in cases:
        launches = collections.defaultdict(list)
        for v in rows:
            launches[v[5]].append(dict(z=v[3], sm=v[4], t0=v[6], w=v[7], loop=v[8], ksum=v[9], end=v[10],
                                       cas=v[12] if len(v) > 12 else 0, rel=v[13] if len(v) > 13 else 0))
        ks = sorted(launches)
        ends = {k: max(c["end"] for c in launches[k]) for k in ks}
        agg = collections.defaultdict(list)
        for k in ks[2:-2]:
            cs = [c for c in launches[k] if c["w"] > 0]
            if not cs or k - 1 not in ends:
                continue
            w = min(c["w"] for c in cs)
            last_loop = max(c["loop"] for c in cs)
            agg["wait release after previous launch's end"].append((w - ends[k - 1]) / 1e3)
            agg["last loop end - W"].append((last_loop - w) / 1e3)
            agg["exit after last loop end"].append((ends[k] - last_loop) / 1e3)
            agg["launch end - W"].append((ends[k] - w) / 1e3)
            by_sm = collections.defaultdict(list)
            for c in cs:
                by_sm[c["sm"]].append(c)
                agg[f"split {c['z']}: loop end - W"].append((c["loop"] - w) / 1e3)
                if c["cas"] > 0:
                    agg["claim: CAS + barrier"].append((c["cas"] - c["w"]) / 1e3)
                    agg["claim: zeroing + release"].append((c["rel"] - c["cas"]) / 1e3)
            for v in by_sm.values():
                agg["SM finish (last loop end) - W"].append((max(c["loop"] for c in v) - w) / 1e3)
                # The SM's CTAs in the order they entered it: the slot a CTA took decides when it
                # starts (with PDL it enters as a CTA of the previous launch leaves that SM).
                v.sort(key=lambda c: c["t0"])
                if len(v) == 1:
                    agg["slot: alone on its SM, loop end - W"].append((v[0]["loop"] - w) / 1e3)
                    continue
                for i, c in enumerate(v[:2]):
                    agg[f"slot {i + 1} of 2: entry - W"].append((c["t0"] - w) / 1e3)
                    agg[f"slot {i + 1} of 2: loop end - W"].append((c["loop"] - w) / 1e3)
        print(f"== {label}: {len(ks)} launches, {len(launches[ks[0]])} CTAs each")
        for key in sorted(agg, key=lambda s: (s.startswith("split"), s.startswith("slot"), s)):
            v = agg[key]
            print(f"   {key:42s} p50 {q(v, .5):6.2f}  p90 {q(v, .9):6.2f}  [{min(v):6.2f} .. {max(v):6.2f}]")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
