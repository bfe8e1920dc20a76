"""Merges `examples/bench.rs` runs of the 8-bit-activation kernels (w4a16, w4a8, w4a8_int8, w8a8_fp8, w8a8_fp8_block) with
humming-kernels' dense W4A8 / W8A8 sections (`humming_py_bench_ext.json`) into markdown tables.

    python3 dev/merge-act8.py BENCH_JSON [BENCH_JSON ...] HUMMING_EXT_JSON > merged.md

A kernel's rows of a later BENCH_JSON replace those of an earlier one.
"""
import json, math, sys
runs = [json.load(open(p))['rows'] for p in sys.argv[1:-1]]
ours = []
for rows in runs:
    kernels = {r['kernel'] for r in rows}
    ours = [r for r in ours if r['kernel'] not in kernels] + rows
hk = json.load(open(sys.argv[-1]))
anch = {}
for r in hk['rows']:
    anch[(r['fmt'], r['n'], r['k'], r['m'])] = r
pairs = [('w4a8', 'w4a8_uint4g128_fp8e4m3_tok'), ('w4a8_int8', 'w4a8_uint4g128_int8_tok'), ('w8a8_fp8', 'w8a8_fp8e4m3_channel_tok'), ('w8a8_fp8_block', 'w8a8_fp8e4m3_block128x128_g128'), ('w8a8_fp8_ss', 'w8a8_fp8e4m3_channel_tok'), ('w8a8_fp8_block_ss', 'w8a8_fp8e4m3_block128x128_g128'), ('w4a8_ss', 'w4a8_uint4g128_fp8e4m3_tok'), ('w4a8_int8_ss', 'w4a8_uint4g128_int8_tok')]
w4a16 = {(r['n'], r['k'], r['m']): r['ours']['median_us'] for r in ours if r['kernel'] == 'w4a16'}
out = []
for ok, hf in pairs:
    out.append(f"\n### {ok} (ours) vs humming-kernels `{hf}`\n")
    out.append("| N x K | M | floor | ours | ours, quantized A | quantization | humming-kernels | ours / HK | our W4A16 | ours / our W4A16 | " + ("scaled_mm rowwise | ours / scaled_mm | cuBLASLt FP8 (ours) | ours / cuBLASLt |" if ok.startswith('w8a8_fp8') else "cuBLAS f16 |"))
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|---:|" if ok.startswith('w8a8_fp8') else "---:|"))
    rat = []
    for r in ours:
        if r['kernel'] != ok: continue
        key = (hf, r['n'], r['k'], r['m'])
        h = anch.get(key)
        o = r['ours']['median_us']
        pre = r['ours_prequantized']['median_us'] if r.get('ours_prequantized') else float('nan')
        q = r['quantize']['median_us'] if r.get('quantize') else float('nan')
        hu = h['humming_us'] if h else float('nan')
        if h: rat.append(o / hu)
        w16 = w4a16.get((r['n'], r['k'], r['m']), float('nan'))
        line = f"| {r['n']}x{r['k']} | {r['m']} | {r['floor_us']:.1f} | {o:.1f} | {pre:.1f} | {q:.1f} | {hu:.1f} | {o/hu:.2f} | {w16:.1f} | {o/w16:.2f} |"
        if ok.startswith('w8a8_fp8'):
            sm = h['scaled_mm_rowwise_us'] if h else float('nan')
            lt = r['cublaslt_fp8']['median_us'] if r.get('cublaslt_fp8') else float('nan')
            line += f" {sm:.1f} | {o/sm:.2f} | {lt:.1f} | {o/lt:.2f} |"
        else:
            line += f" {r['cublas']['median_us']:.1f} |" if r.get('cublas') else " - |"
        out.append(line)
    if not rat: continue
    g = math.exp(sum(map(math.log, rat)) / len(rat))
    out.append(f"\nGeomean ours / humming-kernels over {len(rat)} cells: {g:.2f}; ours faster in {sum(1 for x in rat if x < 1)}.")
print("\n".join(out))
