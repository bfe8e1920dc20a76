"""Times torch._scaled_mm (cuBLASLt FP8, e4m3 x e4m3, row-wise scales, bf16 out, no fast accumulation) on the
given shapes as the benchmarks do: a CUDA graph of 20 launches rotating over weight copies, median of 15.

    python3 dev/scaled_mm_anchor.py 256,1024,4096 8192x8192,28672x4096,4096x14336
"""
import sys

import torch

ms = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "256,1024,4096").split(",")]
shapes = [tuple(int(v) for v in s.split("x")) for s in (sys.argv[2] if len(sys.argv) > 2 else "8192x8192,28672x4096,4096x14336").split(",")]
FP8 = torch.float8_e4m3fn


def graph_us(fns, reps=20, trials=15):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for f in fns:
            f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(reps):
            fns[i % len(fns)]()
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(trials):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1000 / reps)
    return sorted(ts)[len(ts) // 2]


for n, k in shapes:
    copies = max(1, min(6, (400 << 20) // (n * k)))
    ws = [(torch.randn(n, k, device="cuda") * 20).to(FP8) for _ in range(copies)]
    sb = torch.rand(1, n, device="cuda") + 0.5
    for m in ms:
        xs = [(torch.randn(m, k, device="cuda") * 20).to(FP8) for _ in range(copies)]
        sa = torch.rand(m, 1, device="cuda") + 0.5
        fns = [lambda i=i: torch._scaled_mm(xs[i], ws[i].t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16) for i in range(copies)]
        t = graph_us(fns)
        print(f"scaled_mm rowwise N={n:6d} K={k:6d} M={m:5d} {t:8.1f} us {2 * m * n * k / t / 1e6:6.0f} TFLOP/s", flush=True)
