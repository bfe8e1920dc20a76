#!/usr/bin/env python3
"""Merges one device run of dev/moe-h200.sh (no GPU needed): our per-GEMM W4A8 MoE times (bench_moe.json),
our whole-layer times (bench_moe_layer.json) and humming-kernels' MoE section (humming_ext json) into
Markdown tables: per GEMM, ours against humming-kernels' same format; per layer, ours (W4A8, W4A16)
against the sum of humming-kernels' two GEMMs in the same format.

  python3 dev/merge-moe-layer.py RUN_DIR > merged.md   (RUN_DIR: the unpacked moe-logs.tar.xz)
"""
import glob
import json
import sys

run = sys.argv[1]


def load(pattern):
    files = glob.glob(f"{run}/{pattern}")
    return json.load(open(files[0])) if files else None


ours = load("moe-w4a8/bench_moe.json")
layer = load("layer/bench_moe_layer.json")
hk_file = [f for f in glob.glob(f"{run}/*.json") if "humming" in f or "hk" in f]
hk = json.load(open(hk_file[0])) if hk_file else {"rows": []}
hk_rows = {(r["model"], r["proj"], r["fmt"], r["m"]): r["humming_us"] for r in hk.get("rows", []) if r.get("humming_us")}


def hk_us(model, proj, fmt, m):
    for (mo, p, f, mm), us in hk_rows.items():
        if mo == model and p == proj and mm == m and fmt in f:
            return us
    return None


if ours:
    print(f"### W4A8 MoE GEMM (`moe_indexed`, i4 g128, e4m3 per token), {ours['device'].get('name', '')}\n")
    print("| model | proj | M | floor | ours | ours + route | humming-kernels | ours / HK | % floor |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for r in ours["rows"]:
        h = hk_us(r["model"], r["proj"], "w4a8", r["m"])
        ratio = r["ours_us"] / h if h else None
        if ratio:
            ratios.append(ratio)
        print(f"| {r['model']} | {r['proj']} | {r['m']} | {r['floor_us']:.1f} | {r['ours_us']:.1f} | {r['total_us']:.1f} | "
              f"{h and f'{h:.1f}' or '-'} | {ratio and f'{ratio:.2f}' or '-'} | {100 * r['floor_us'] / r['ours_us']:.0f}% |")
    if ratios:
        g = 1.0
        for x in ratios:
            g *= x
        print(f"\nGeomean ours / humming-kernels {g ** (1 / len(ratios)):.3f} over {len(ratios)} cells; "
              f"ours faster in {sum(x < 1 for x in ratios)}.\n")
if layer:
    print("### Whole MoE layer (route, gate-up + SiLU-GLU, down, combine), us\n")
    print("| model | M | ours W4A8 | ours W4A16 | W4A8 / W4A16 | HK W4A8 (2 GEMMs) | ours W4A8 / HK | HK W4A16 (2 GEMMs) | ours W4A16 / HK | floor W4A8 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    by = {(r["model"], r["format"], r["m"]): r for r in layer}
    for (model, fmt, m), r in sorted(by.items()):
        if fmt != "w4a8":
            continue
        b = by.get((model, "w4a16", m))
        hk8 = [hk_us(model, p, "w4a8", m) for p in ("gate_up", "down")]
        hk16 = [hk_us(model, p, "w4a16", m) for p in ("gate_up", "down")]
        h8 = sum(hk8) if all(hk8) else None
        h16 = sum(hk16) if all(hk16) else None
        f = lambda v: f"{v:.1f}" if v else "-"
        q = lambda a, c: f"{a / c:.2f}" if a and c else "-"
        print(f"| {model} | {m} | {r['layer_us']:.1f} | {f(b and b['layer_us'])} | {q(r['layer_us'], b and b['layer_us'])} | "
              f"{f(h8)} | {q(r['layer_us'], h8)} | {f(h16)} | {q(b and b['layer_us'], h16)} | {r['floor_us']:.1f} |")
