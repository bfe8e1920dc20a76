"""Development aid: where a kernel's warps wait, from an ncu source-page export.

    ncu -i report.ncu-rep --page source --csv --print-source sass > src.csv
    python3 dev/ncu-stalls.py src.csv [--loop 0x1710:0x2a50] [--per N] [--top 25]

Prints the warp-stall samples per stall reason and the busiest instructions. With `--loop START:END`
(SASS offsets from the kernel's first instruction, as `cuobjdump -sass` numbers them), the samples and
executed instructions are split into prologue (before START), main loop and tail (from END); `--per N`
divides the main loop's executed instructions by N (e.g. warps x iterations) to give instructions per
warp and iteration. Reads the CSV columns ncu 2025.3 writes ("Address", "Source", "Warp Stall
Sampling (All Samples)", "Instructions Executed", "stall_*"), of the first kernel in the export.
"""

import argparse
import csv


def num(text: str) -> float:
    """A cell as a number: "1,024" -> 1024.0, "" -> 0.0; anything else is an error."""
    text = text.replace(",", "").strip()
    return float(text) if text else 0.0


def is_hex(text: str) -> bool:
    try:
        int(text, 16)
        return True
    except ValueError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--loop", help="START:END SASS offsets of the main loop, e.g. 0x1710:0x2a50")
    ap.add_argument("--per", type=float, help="divide the main loop's executed instructions by this")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()

    with open(args.csv, newline="") as f:
        rows = list(csv.reader(f))
    header_at = next(i for i, r in enumerate(rows) if "Address" in r)
    hdr = rows[header_at]
    col = {h: i for i, h in enumerate(hdr)}
    # The first kernel of the export: its rows up to the next kernel's "Kernel Name" line.
    data = []
    for r in rows[header_at + 1 :]:
        if r and r[0] == "Kernel Name":
            break
        if len(r) == len(hdr) and is_hex(r[col["Address"]]):
            data.append(r)
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    samples_col = col["Warp Stall Sampling (All Samples)"]
    base = int(data[0][col["Address"]], 16)
    start, end = (int(x, 16) for x in args.loop.split(":")) if args.loop else (None, None)

    def region(off: int) -> str:
        if start is None:
            return "kernel"
        return "prologue" if off < start else ("main" if off < end else "tail")

    total = sum(num(r[samples_col]) for r in data) or 1
    by_region: dict = {}
    executed: dict = {}
    reason_sum: dict = {}
    busiest = []
    for r in data:
        off = int(r[col["Address"]], 16) - base
        reg = region(off)
        s = num(r[samples_col])
        by_region[reg] = by_region.get(reg, 0) + s
        executed[reg] = executed.get(reg, 0) + num(r[col["Instructions Executed"]])
        for h in reasons:
            reason_sum[(reg, h)] = reason_sum.get((reg, h), 0) + num(r[col[h]])
        busiest.append((s, off, r[col["Source"]].strip()))

    print(f"{total:.0f} stall samples, {len(data)} SASS instructions")
    for reg, s in by_region.items():
        top = sorted(((v, h[6:]) for (g, h), v in reason_sum.items() if g == reg and v), reverse=True)
        line = ", ".join(f"{name} {100 * v / total:.1f}%" for v, name in top[:8])
        print(f"  {reg}: {100 * s / total:.1f}% of samples, {executed[reg]:.0f} instructions executed; {line}")
    if args.per and "main" in executed:
        print(f"  main loop: {executed['main'] / args.per:.1f} instructions per warp and iteration")
    print("busiest instructions (samples, offset, SASS):")
    for s, off, src in sorted(busiest, reverse=True)[: args.top]:
        print(f"  {s:6.0f} {100 * s / total:5.1f}%  {off:#07x}  {src}")


if __name__ == "__main__":
    main()
