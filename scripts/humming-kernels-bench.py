#!/usr/bin/env python3
"""Times the Python reference implementation, humming-kernels, and cuBLAS fp16 on the same GEMMs.

The reference half of scripts/bench-h200.sh: it writes humming_py_bench.json, which
`.gpu/bench --from bench.json --reference humming_py_bench.json` (examples/bench.rs) merges with our
results. It drives humming-kernels only through its public API, the way its README uses it:
`humming.layer.HummingLayer(shape_n, shape_k, weight_config={"dtype", "group_size"}, torch_dtype)`,
`.cuda()`, `.load_from_unquantized(w)`, `.transform()`, then `layer(x)`.

Method (the same as examples/bench.rs, so that the two runs compare):
- per format and shape N x K: one random fp16 weight W (N x K, std 0.02), quantized by humming-kernels
  into as many layers ("copies") as it takes to hold more than --rotate-mib (512) MiB of packed
  weights and scales, at least 2, at most --max-copies (16); the cuBLAS anchor gets as many copies of
  the unquantized fp16 W by the same rule. Successive launches use successive copies (and successive
  activations), so the weights come from DRAM, not from the L2 cache;
- one CUDA graph of at least --reps (20) launches, rounded up to a whole number of turns through the
  copies, replayed --trials (15) times after a warm-up, each replay timed with CUDA events: the median
  per launch is reported (with min, quartiles, max). If capture fails: events around as many
  back-to-back launches, and the row says "events";
- cuBLAS: torch.matmul (x @ W.T) in fp16 on the unquantized copies, the same way;
- the DRAM floor: (packed weights + scales + A + C bytes) / the device-to-device copy bandwidth
  measured in the same run with a --copy-gib (4) GiB copy, counting bytes read and written;
- checks: the relative Frobenius error of the first and the last copy's output against
  x.float() @ W.float().T (humming-kernels' quantization error; NaN or > 0.25 marks the row not ok),
  and of the first copy's output against torch.matmul in fp16 of x and the dequantized weights
  (humming-kernels' own dequantization of what it packed; NaN or > 0.02 marks the row not ok).

Formats come from the FORMATS table below, all with fp16 activations; --formats takes the table's keys
or our names (in parentheses, as in examples/bench.rs's --kernels):
- uint4:128 (w4a16): humming-kernels' "uint4" (symmetric: it stores q + 8 and computes s * (q - 8)),
  group 128, fp16 scales, which is our `w4a16` (`b: i4`). The default.
- e4m3:channel (w8a16_e4m3): "float8e4m3" weights, one fp16 scale per output channel (W8A16 FP8);
- mxfp4: "float4e2m1" weights, an e8m0 (power of two) scale per 32 along K (OCP MX);
- nvfp4: "float4e2m1" weights, an e4m3 scale per 16 along K and one f32 tensor scale;
- mxfp8: "float8e4m3" weights, an e8m0 scale per 32; mxfp6: "float6e2m3" weights, an e8m0 scale per 32.
The layers are built as in /work/shared/bench/humming_py_bench_ext.py (weight_config "dtype",
"group_size", "scale_dtype", "scale_2_type").

    python3 scripts/humming-kernels-bench.py [--shapes 4096x4096,...] [--ms 1,8,...]
                                             [--formats uint4:128,mxfp4,...] [--out DIR] [--dry-run]

Needs PyTorch with CUDA and humming-kernels (scripts/fetch-bench-wheels.sh downloads its wheel;
scripts/bench-h200.sh installs it on the GPU machine). --dry-run prints the planned cases and needs
neither (nor a GPU). Output: humming_py_bench.json in --out (default $OUT, else the current folder),
rewritten after every shape; exit status 1 if a case failed or its check did not pass, 2 on a usage
or environment error.

JSON: {"copy_bw_tbs": TB/s, "meta": {...}, "errors": [...], "rows": [{"format": "w4a16", "w": "uint4",
"g": 128, "a": "float16", "bits": 4, "scale_dtype": "float16", "tensor_scale": false, "n", "k", "m",
"humming_us", "cublas_us", "floor_us", "weight_bytes", "rel_err_vs_fp16", "rel_err_vs_dequant", "ok",
...}]}. "format" is our kernel name; "w" is humming-kernels' weight dtype; "g" is the scale group along
K, 0 for a per-channel scale; weight_bytes = packed weights + scales (+ the 4-byte tensor scale), the
weight part of floor_us. examples/bench.rs matches a row on n, k, m, g and the bits in w (the digits
after its letters: none for the float dtypes, so it matches only the integer rows today) and reads
humming_us and cublas_us (shown as "cuBLAS (torch)"), and copy_bw_tbs; the rest is for people.
"""

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass

JSON_NAME = "humming_py_bench.json"
DEFAULT_SHAPES = "4096x4096,8192x8192,28672x4096,4096x14336"
DEFAULT_MS = "1,8,16,32,64,128,256"
DEFAULT_FORMATS = "uint4:128"
# A row whose humming-kernels output is further than this from the fp16 product is marked not ok.
MAX_REL_ERR = 0.25


@dataclass(frozen=True)
class Format:
    """One quantization format of humming-kernels, as this driver runs it."""

    name: str  # our name for it (as in examples/bench.rs's --kernels): the JSON's "format"
    weight_dtype: str  # humming-kernels' weight dtype ("uint4", "float4e2m1", ...): the JSON's "w"
    group: int  # weight scale group size along K, 0 for one scale per output channel: the JSON's "g"
    act_dtype: str  # activation dtype (a torch dtype name): the JSON's "a"
    bits: int  # bits per weight
    scale_dtype: str = "float16"  # humming-kernels' scale dtype ("float16": the activations' dtype)
    scale_bytes: int = 2  # bytes per weight scale
    tensor_scale: bool = False  # a second, f32 per-tensor scale (NVFP4)

    def weight_config(self):
        """HummingLayer's weight_config, as humming_py_bench_ext.py gives it."""
        c = {"dtype": self.weight_dtype}
        if self.group:
            c["group_size"] = self.group
        if self.scale_dtype != "float16":
            c["scale_dtype"] = self.scale_dtype
        if self.tensor_scale:
            c["scale_2_type"] = "tensor"
        return c

    def label(self):
        scale = f"g{self.group}" if self.group else "channel"
        return (f"{self.weight_dtype} {scale} {self.scale_dtype} scales"
                + (" + f32 tensor scale" if self.tensor_scale else ""))

    def packed_bytes(self, n, k):
        """Weight and scale bytes that one launch reads once (the DRAM floor's weight part)."""
        groups = k // self.group if self.group else 1
        return n * k * self.bits // 8 + n * groups * self.scale_bytes + (4 if self.tensor_scale else 0)


# The formats this driver knows, by the name --formats takes (our names are accepted too: ALIASES).
# Another format is one more entry here (and, if its activations are not fp16, an input_config in
# make_layer; examples/bench.rs matches rows on w, g, n, k and m only, so a second activation dtype
# with the same weights also needs the merge to read "a").
E8M0 = dict(scale_dtype="float8e8m0", scale_bytes=1)
FORMATS = {
    "uint4:128": Format(name="w4a16", weight_dtype="uint4", group=128, act_dtype="float16", bits=4),
    "e4m3:channel": Format(name="w8a16_e4m3", weight_dtype="float8e4m3", group=0, act_dtype="float16",
                           bits=8),
    "mxfp4": Format(name="mxfp4", weight_dtype="float4e2m1", group=32, act_dtype="float16", bits=4, **E8M0),
    "nvfp4": Format(name="nvfp4", weight_dtype="float4e2m1", group=16, act_dtype="float16", bits=4,
                    scale_dtype="float8e4m3", scale_bytes=1, tensor_scale=True),
    "mxfp8": Format(name="mxfp8", weight_dtype="float8e4m3", group=32, act_dtype="float16", bits=8, **E8M0),
    "mxfp6": Format(name="mxfp6", weight_dtype="float6e2m3", group=32, act_dtype="float16", bits=6, **E8M0),
}
ALIASES = {f.name: key for key, f in FORMATS.items() if f.name != key}
# The output of a row is checked against the fp16 product with the dequantized weights to this.
MAX_REL_ERR_DEQUANT = 0.02


def die(msg, code=2):
    print(f"humming-kernels-bench: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="humming-kernels-bench.py",
        description="Time humming-kernels (Python) and cuBLAS fp16 on the GEMMs of examples/bench.rs "
        "and write humming_py_bench.json for its --reference merge.",
    )
    p.add_argument("--shapes", default=DEFAULT_SHAPES, help="N x K list, e.g. 4096x4096,8192x8192")
    p.add_argument("--ms", default=DEFAULT_MS, help="values of M (rows of A), comma separated")
    p.add_argument(
        "--formats",
        default=DEFAULT_FORMATS,
        help="formats, comma separated; known: " + ", ".join(FORMATS) + " (or our names: "
        + ", ".join(ALIASES) + ")",
    )
    p.add_argument("--out", default=None, help="folder for humming_py_bench.json [default: $OUT, else .]")
    p.add_argument("--trials", type=int, default=15, help="timed graph replays per case (median reported)")
    p.add_argument("--reps", type=int, default=20, help="launches per graph, at least (whole turns)")
    p.add_argument("--rotate-mib", type=int, default=512, help="rotate through more than this many MiB")
    p.add_argument("--max-copies", type=int, default=16, help="most copies of the weights")
    p.add_argument("--copy-gib", type=int, default=4, help="size of the bandwidth-measuring copy, GiB")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights and activations")
    p.add_argument("--no-cublas", action="store_true", help="skip the torch.matmul anchor")
    p.add_argument("--dry-run", action="store_true", help="print the planned cases; no torch, no GPU")
    a = p.parse_args(argv)

    shapes = []
    for s in filter(None, (x.strip() for x in a.shapes.split(","))):
        parts = s.lower().split("x")
        if len(parts) != 2 or not all(x.isdigit() and int(x) > 0 for x in parts):
            die(f"--shapes: {s!r} is not NxK (e.g. 4096x4096)")
        shapes.append((int(parts[0]), int(parts[1])))
    ms = []
    for s in filter(None, (x.strip() for x in a.ms.split(","))):
        if not s.isdigit() or int(s) <= 0:
            die(f"--ms: {s!r} is not a positive integer")
        ms.append(int(s))
    formats = []
    for s in filter(None, (x.strip() for x in a.formats.split(","))):
        key = ALIASES.get(s, s)
        if key not in FORMATS:
            die(f"--formats: {s!r} is not a known format; known: {', '.join(FORMATS)} "
                f"(or {', '.join(ALIASES)})")
        if FORMATS[key] not in formats:
            formats.append(FORMATS[key])
    if not shapes or not ms or not formats:
        die("--shapes, --ms and --formats must each name at least one value")
    for f in formats:
        for n, k in shapes:
            if f.group and k % f.group:
                die(f"--shapes: K = {k} of {n}x{k} is not a multiple of {f.name}'s group {f.group}")
    for name in ("trials", "reps", "rotate_mib", "max_copies", "copy_gib"):
        if getattr(a, name) < 1:
            die(f"--{name.replace('_', '-')} must be at least 1")
    a.shape_list, a.m_list, a.format_list = shapes, ms, formats
    a.out = a.out or os.environ.get("OUT") or "."
    return a


def copies_for(nbytes, args):
    """Copies of an `nbytes` buffer needed to rotate through more than --rotate-mib MiB (as bench.rs)."""
    return max(2, min((args.rotate_mib << 20) // max(nbytes, 1) + 1, max(args.max_copies, 2)))


def launches_for(copies, args):
    """Launches per graph: at least --reps, a whole number of turns through the copies."""
    return math.ceil(args.reps / copies) * copies


def dry_run(args):
    print(f"dry run: {len(args.format_list)} format(s) x {len(args.shape_list)} shape(s) x "
          f"{len(args.m_list)} M = {len(args.format_list) * len(args.shape_list) * len(args.m_list)} cases; "
          f"would write {os.path.join(args.out, JSON_NAME)}")
    print(f"bandwidth: {args.copy_gib} GiB device-to-device copy; timing: median of {args.trials} graph "
          f"replays; copies: more than {args.rotate_mib} MiB, 2..{max(args.max_copies, 2)}")
    for f in args.format_list:
        for n, k in args.shape_list:
            wb, fb = f.packed_bytes(n, k), n * k * 2
            c, fc = copies_for(wb, args), copies_for(fb, args)
            print(f"{f.name} ({f.label()}, {f.act_dtype} activations) N={n} K={k}: "
                  f"{c} humming copies of {wb / 2**20:.1f} MiB ({launches_for(c, args)} launches per graph)"
                  + ("" if args.no_cublas else
                     f", {fc} fp16 copies of {fb / 2**20:.1f} MiB ({launches_for(fc, args)} launches)"))
            print("    M = " + ", ".join(str(m) for m in args.m_list))
    return 0


# ----------------------------------------------------------------------------------------------------
# Everything below needs torch, CUDA and humming-kernels (imported in main, not at the top, so that
# --dry-run and --help work without them).

torch = None
HummingLayer = None
HummingWeightSchema = None


def import_deps():
    global torch, HummingLayer, HummingWeightSchema
    try:
        import torch as _torch
    except Exception as e:  # noqa: BLE001
        die(f"PyTorch cannot be imported ({type(e).__name__}: {e}); this benchmark needs PyTorch (>= 2.7) "
            f"with CUDA in {sys.executable}")
    torch = _torch
    if not torch.cuda.is_available():
        die(f"PyTorch {torch.__version__} sees no CUDA device (torch.version.cuda = {torch.version.cuda}); "
            "run this on a GPU machine with a CUDA build of PyTorch")
    try:
        import humming
        from humming.layer import HummingLayer as _HummingLayer
        from humming.schema import HummingWeightSchema as _HummingWeightSchema
    except Exception as e:  # noqa: BLE001
        missing = getattr(e, "name", None)
        if isinstance(e, ImportError) and missing and missing.split(".")[0] != "humming":
            hint = (f"its dependency {missing!r} is missing (scripts/bench-h200.sh installs the wheel "
                    "without dependencies; it declares torch, triton, numpy, safetensors, jinja2, "
                    "cuda-bindings, tqdm and tabulate)")
        else:
            hint = ("install its wheel (scripts/fetch-bench-wheels.sh downloads it into .whl/; "
                    "scripts/bench-h200.sh installs it and puts it on PYTHONPATH)")
        die(f"humming-kernels cannot be imported ({type(e).__name__}: {e}); {hint}")
    HummingLayer = _HummingLayer
    HummingWeightSchema = _HummingWeightSchema
    return getattr(humming, "__version__", "unknown")


def new_layer(f, n, k):
    if f.act_dtype != "float16":
        raise NotImplementedError(f"{f.name}: activations other than float16 are not implemented")
    return HummingLayer(shape_n=n, shape_k=k, weight_config=f.weight_config(), torch_dtype=torch.float16).cuda()


def quantize(f, n, k, w):
    """W quantized by humming-kernels in format f (what load_from_unquantized loads), and its dequantization
    in fp16 by humming-kernels (the weights the kernel should multiply by)."""
    schema = new_layer(f, n, k).weight_schema
    tensors = HummingWeightSchema.quant_tensor(w, schema, torch.float16)
    return tensors, schema.dequant_tensors(tensors).to(torch.float16)


def make_layer(f, n, k, tensors):
    """One humming-kernels layer holding the quantized tensors of format f, ready to run."""
    layer = new_layer(f, n, k)
    layer.load_from_tensors(tensors)
    layer.transform()
    return layer


def layer_bytes(layer):
    """Bytes of the layer's parameters (packed weights and scales; not the Stream-K locks buffer)."""
    return sum(p.numel() * p.element_size() for p in layer.parameters())


def summary(ts, launches, copies, how):
    ts = sorted(ts)
    q = lambda x: ts[min(len(ts) - 1, int(x * (len(ts) - 1) + 0.5))]  # noqa: E731
    return dict(median_us=ts[len(ts) // 2], min_us=ts[0], p25_us=q(0.25), p75_us=q(0.75), max_us=ts[-1],
                launches=launches, copies=copies, timing=how)


def time_us(fns, args):
    """Per-launch time of rotating through fns (callables), by CUDA-graph replay (events if capture fails)."""
    copies = len(fns)
    launches = launches_for(copies, args)
    # Warm-up (and humming-kernels' JIT compilation for this M) outside the capture, on a side stream
    # as torch.cuda.graphs asks.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    def timed(run):
        ts = []
        for _ in range(args.trials):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            run()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) * 1e3 / launches)
        return ts

    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(launches):
                fns[i % copies]()
        g.replay()
        torch.cuda.synchronize()
        ts = timed(g.replay)
        del g
        return summary(ts, launches, copies, "graph")
    except Exception as e:  # noqa: BLE001
        print(f"  warning: graph capture failed ({type(e).__name__}: {e}); timing back-to-back launches "
              "with events", flush=True)
        torch.cuda.synchronize()

        def run():
            for i in range(launches):
                fns[i % copies]()

        run()
        torch.cuda.synchronize()
        return summary(timed(run), launches, copies, "events")


def copy_bandwidth(nbytes):
    """Median device-to-device copy bandwidth, bytes read + written per second (as bench.rs)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    ts = []
    for _ in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        dst.copy_(src)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e-3)
    del src, dst
    torch.cuda.empty_cache()
    return 2.0 * nbytes / sorted(ts)[len(ts) // 2]


def rel_err(out, ref):
    e = ((out.float() - ref).norm() / ref.norm()).item()
    return e if math.isfinite(e) else None


def write_json(args, result):
    import json

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, JSON_NAME)
    with open(path + ".tmp", "w") as fh:
        json.dump(result, fh, indent=1)
    os.replace(path + ".tmp", path)
    return path


def bench_shape(f, n, k, args, bw, result):
    t0 = time.time()
    w = torch.randn((n, k), dtype=torch.float16, device="cuda") * 0.02
    wb = f.packed_bytes(n, k)
    copies = copies_for(wb, args)
    tensors, w_deq = quantize(f, n, k, w)
    layers = [make_layer(f, n, k, tensors) for _ in range(copies)]
    del tensors
    fp = [] if args.no_cublas else [w] + [w.clone() for _ in range(copies_for(n * k * 2, args) - 1)]
    torch.cuda.synchronize()
    prep = time.time() - t0
    print(f"{f.name} N={n} K={k}: {copies} humming-kernels copies of {layer_bytes(layers[0]) / 2**20:.1f} "
          f"MiB, {len(fp)} fp16 copies of {n * k * 2 / 2**20:.1f} MiB; prep {prep:.1f} s", flush=True)
    for m in args.m_list:
        xs = [torch.randn((m, k), dtype=torch.float16, device="cuda") for _ in range(max(copies, len(fp)))]
        ref = xs[0].float() @ w.float().t()
        err = rel_err(layers[0](xs[0]), ref)
        err_last = rel_err(layers[-1](xs[0]), ref)
        err_deq = rel_err(layers[0](xs[0]), torch.matmul(xs[0], w_deq.t()).float())
        ok = all(e is not None and e <= MAX_REL_ERR for e in (err, err_last))
        ok = ok and err_deq is not None and err_deq <= MAX_REL_ERR_DEQUANT
        th = time_us([lambda i=i: layers[i](xs[i]) for i in range(copies)], args)
        tc = None
        if fp:
            tc = time_us([lambda i=i: torch.matmul(xs[i], fp[i].t()) for i in range(len(fp))], args)
        floor_us = (wb + m * k * 2 + m * n * 2) / bw * 1e6
        row = dict(
            format=f.name, w=f.weight_dtype, g=f.group, a=f.act_dtype, bits=f.bits, scale_dtype=f.scale_dtype,
            tensor_scale=f.tensor_scale, n=n, k=k, m=m,
            humming_us=th["median_us"], cublas_us=tc["median_us"] if tc else None, floor_us=floor_us,
            rel_err_vs_fp16=err, rel_err_last_copy=err_last, rel_err_vs_dequant=err_deq, ok=ok,
            humming=th, cublas=tc, weight_bytes=wb, layer_param_bytes=layer_bytes(layers[0]), prep_s=prep,
        )
        result["rows"].append(row)
        ctxt = f"cublas {tc['median_us']:8.1f}us  x{tc['median_us'] / th['median_us']:5.2f}  " if tc else ""
        print(f"{f.name:10s} N={n:6d} K={k:6d} M={m:5d}  humming {th['median_us']:8.1f}us"
              f"{'' if th['timing'] == 'graph' else ' (events)'}  {ctxt}floor {floor_us:6.1f}us "
              f"({floor_us / th['median_us'] * 100:4.0f}%)  err {err if err is not None else float('nan'):.2e}"
              f" (vs dequant {err_deq if err_deq is not None else float('nan'):.2e})"
              f"{'' if ok else '  NOT OK'}", flush=True)
        if not ok:
            result["errors"].append(dict(where=f"{f.name} {n}x{k} M={m}",
                                         error=f"relative error {err} / {err_last} (limit {MAX_REL_ERR}), "
                                         f"{err_deq} vs the dequantized weights (limit {MAX_REL_ERR_DEQUANT})"))
        del xs, ref
    del layers, fp, w, w_deq
    torch.cuda.empty_cache()


def main(argv):
    args = parse_args(argv)
    if args.dry_run:
        return dry_run(args)
    humming_version = import_deps()
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False  # the f32 check product is true f32
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    device = dict(
        name=props.name, capability=f"{props.major}.{props.minor}", sms=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None), memory_bytes=props.total_memory,
    )
    print(f"{device['name']} (sm {device['capability']}), {device['sms']} SMs; torch {torch.__version__} "
          f"(CUDA {torch.version.cuda}), humming-kernels {humming_version}", flush=True)
    copy_bytes = args.copy_gib << 30
    bw = copy_bandwidth(copy_bytes)
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s (read + write, {args.copy_gib} GiB device-to-device copy)",
          flush=True)
    result = dict(
        copy_bw_tbs=bw / 1e12,
        meta=dict(
            tool="scripts/humming-kernels-bench.py", humming_kernels=humming_version, torch=torch.__version__,
            cuda=torch.version.cuda, device=device, copy_bytes=copy_bytes, trials=args.trials,
            min_launches=args.reps, rotate_mib=args.rotate_mib, max_copies=args.max_copies, seed=args.seed,
            fp16_reduced_precision_reduction=torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            formats=[vars(f) for f in args.format_list], shapes=[f"{n}x{k}" for n, k in args.shape_list],
            ms=args.m_list,
            notes=[
                "times: median per launch over trials graph replays; floor_us = (weight_bytes + A + C bytes) "
                "/ copy_bw, copy_bw counting bytes read + written",
                "cublas_us: torch.matmul in fp16 on the unquantized weights",
                "rel_err_vs_fp16: against x.float() @ W.float().T (unquantized W); rel_err_vs_dequant: against "
                "torch.matmul(x, W_deq.T) in fp16, W_deq = humming-kernels' dequantization of the packed weights",
            ],
        ),
        errors=[],
        rows=[],
    )
    path = write_json(args, result)
    for f in args.format_list:
        for n, k in args.shape_list:
            try:
                bench_shape(f, n, k, args, bw, result)
            except Exception as e:  # noqa: BLE001  (report it, go on with the next shape)
                msg = f"{type(e).__name__}: {e}".strip()
                print(f"ERROR {f.name} {n}x{k}: {msg}", file=sys.stderr, flush=True)
                result["errors"].append(dict(where=f"{f.name} {n}x{k}", error=msg[:2000]))
                torch.cuda.empty_cache()
            write_json(args, result)
    print(f"wrote {path} ({len(result['rows'])} rows, {len(result['errors'])} errors)", flush=True)
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
