"""Development aid, run on the GPU machine (PyTorch there): time of one read-only kernel launch
(torch.sum over a float16 buffer) per buffer size, in a CUDA graph of back-to-back launches rotated
over more memory than the L2 cache, like our benchmark. It shows the fixed cost of a launch that
streams a given number of bytes (launch, ramp-up, tail), which the DRAM floor of bench.rs (bytes /
copy bandwidth) leaves out. torch.sum is itself slower than a plain read: dev/stream_probe.cu
(bulk copies, PDL) reads 33.5 MB in 8.3 us on the H200 where torch.sum took 15.6 us for 33 MiB.

    python3 dev/read-floor.py [MiB ...]     (default: 8 16 33 58 128)
"""

import sys

import torch


def time_us(nbytes: int, launches: int = 20) -> float:
    n = nbytes // 2
    copies = max(2, min(16, (512 << 20) // max(nbytes, 1)))
    bufs = [torch.randn(n, device="cuda", dtype=torch.float16) for _ in range(copies)]
    for b in bufs[:3]:
        torch.sum(b, dtype=torch.float32)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(launches):
            torch.sum(bufs[i % copies], dtype=torch.float32)
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(15):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e3 / launches)
    ts.sort()
    return ts[len(ts) // 2]


def main() -> None:
    sizes = [float(x) for x in sys.argv[1:]] or [8, 16, 33, 58, 128]
    print(torch.cuda.get_device_name())
    for mib in sizes:
        nbytes = int(mib * (1 << 20)) // 16 * 16
        us = time_us(nbytes)
        print(f"read {mib:7.1f} MiB: {us:8.2f} us  {nbytes / us / 1e6:6.2f} TB/s")


if __name__ == "__main__":
    main()
