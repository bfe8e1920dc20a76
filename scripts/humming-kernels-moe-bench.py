#!/usr/bin/env python3
"""Times the Python reference, humming-kernels, on the indexed MoE GEMMs of examples/bench_moe.rs.

The reference half of `scripts/bench-h200.sh --moe`: it writes humming_moe_bench.json, which
`.gpu/bench_moe --from bench_moe.json --reference humming_moe_bench.json` merges with our results
into merged_moe.md. It drives humming-kernels through its public API: a
`humming.layer.HummingLayer(shape_n, shape_k, weight_config={"dtype": "uint4", "group_size": 128},
num_experts=E, torch_dtype=float16)` loaded with `load_from_tensors` and `transform()`ed, then
`humming.forward.humming_forward(config, inputs, weights..., sorted_ids, expert_ids,
num_tokens_padded, top_k, compute_config={"gemm_type": "indexed"}, tuning_config)`, with the
kernel humming-kernels' own heuristic picks for M * top_k rows
(`humming.tune.get_heuristics_config(config, shape_m=M * top_k, gemm_type="indexed")`, given as a
one-row tuning table), whose block M the routing (vLLM's moe_align layout, built here with torch:
humming-kernels has no routing kernel) is padded to.

Method (the same as examples/bench_moe.rs, so that the two runs compare):
- shapes (--models): qwen3_30b_a3b (E = 128, top_k = 8; gate_up N x K = 1536 x 2048, down 2048 x 768)
  and deepseek_v3 (E = 256, top_k = 8; gate_up 4096 x 7168, down 7168 x 2048); gate_up reads A
  [M, K] with top_k = top_k, down A [M * top_k, K] with top_k = 1; C is [M * top_k, N];
- --distinct (8) random fp16 experts (std 0.02) quantized by humming-kernels and tiled to E (expert e
  is distinct expert e % 8); all E experts copied as many times as hold at most --rotate-mib (512)
  MiB, 1 to --max-copies (8);
- --routings (8) uniform random routings per M (each token's top_k distinct experts: the top_k of
  uniform random scores), shared by both projections of a model, each with its own A and C;
- timing: scripts/humming-kernels-bench.py's time_us (CUDA-graph replay of at least --reps (20)
  launches, a whole number of turns through the weight copies and routings, --trials (15) timed
  replays, the median per launch), and its device-to-device copy bandwidth (--copy-gib (4) GiB, bytes
  read + written);
- the DRAM floor: (distinct experts in the routing (mean over the routings) x the weight bytes of
  one expert, plus A and C) / that bandwidth;
- the check: routing 0's output (C filled with NaN first) against x.float() @ W_deq[e].T for every
  slot (W_deq: humming-kernels' dequantization of the distinct experts); a relative error above 0.02,
  or a value left NaN, marks the row not ok.

    python3 scripts/humming-kernels-moe-bench.py [--models qwen3_30b_a3b,deepseek_v3] [--ms 1,16,128,1024]
                                                 [--out DIR] [--dry-run]

Needs PyTorch with CUDA and humming-kernels (scripts/fetch-bench-wheels.sh downloads its wheel;
scripts/bench-h200.sh installs it); --dry-run prints the planned cases and needs neither. Output:
humming_moe_bench.json in --out (default $OUT, else the current folder), rewritten after every
projection; exit status 1 if a case failed or its check did not pass, 2 on a usage or environment
error.

JSON: {"copy_bw_tbs": TB/s, "meta": {...}, "errors": [{"where", "error"}], "rows": [{"format": "w4a16",
"w": "uint4", "g": 128, "model", "proj", "E", "top_k", "kernel_top_k", "n", "k", "m", "humming_us",
"floor_us", "experts_touched", "weight_bytes" (of the touched experts), "weight_bytes_per_expert",
"weight_bytes_all_experts", "block_m", "rel_err_vs_dequant", "nonfinite", "ok", ...}]}.
examples/common/moe_report.rs matches a row on model, proj, E, n, k and m and reads humming_us,
floor_us, experts_touched, block_m, ok and copy_bw_tbs; the rest is for people.
"""

import argparse
import concurrent.futures as cf
import importlib.util
import json
import math
import os
import sys
import time

JSON_NAME = "humming_moe_bench.json"
MODELS = {
    "qwen3_30b_a3b": dict(E=128, top_k=8, projs=[("gate_up", 1536, 2048), ("down", 2048, 768)]),
    "deepseek_v3": dict(E=256, top_k=8, projs=[("gate_up", 4096, 7168), ("down", 7168, 2048)]),
}
DEFAULT_MS = "1,16,128,1024"
# humming-kernels' "uint4" g128 (symmetric: it stores q + 8 and computes s * (q - 8)): our `b: i4`.
WEIGHT_CONFIG = {"dtype": "uint4", "group_size": 128}
COMPUTE_INDEXED = json.dumps({"gemm_type": "indexed"})
# The tensors HummingLayer's forward passes to humming_forward, those the layer has.
PARAM_NAMES = ("weight", "weight_scale", "zero_point", "bias", "weight_scale_2")
# A row further than this from the f32 product with the dequantized weights is marked not ok.
MAX_REL_ERR = 0.02


def die(msg, code=2):
    print(f"humming-kernels-moe-bench: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="humming-kernels-moe-bench.py",
        description="Time humming-kernels' indexed MoE GEMM (W4A16 uint4 g128) on the shapes of "
        "examples/bench_moe.rs and write humming_moe_bench.json for its --reference merge.",
    )
    p.add_argument("--models", default=",".join(MODELS), help="models, comma separated: " + ", ".join(MODELS))
    p.add_argument("--ms", default=DEFAULT_MS, help="values of M (tokens), comma separated")
    p.add_argument("--out", default=None, help="folder for humming_moe_bench.json [default: $OUT, else .]")
    p.add_argument("--trials", type=int, default=15, help="timed graph replays per case (median reported)")
    p.add_argument("--reps", type=int, default=20, help="launches per graph, at least (whole turns)")
    p.add_argument("--routings", type=int, default=8, help="random routings per M, launched in turn")
    p.add_argument("--distinct", type=int, default=8, help="distinct random experts (E must be a multiple)")
    p.add_argument("--rotate-mib", type=int, default=512, help="copies of all experts holding at most this")
    p.add_argument("--max-copies", type=int, default=8, help="most copies of all experts' weights")
    p.add_argument("--copy-gib", type=int, default=4, help="size of the bandwidth-measuring copy, GiB")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights, activations, routings")
    p.add_argument("--dry-run", action="store_true", help="print the planned cases; no torch, no GPU")
    a = p.parse_args(argv)

    models = []
    for s in filter(None, (x.strip() for x in a.models.split(","))):
        if s not in MODELS:
            die(f"--models: {s!r} is not a known model; known: {', '.join(MODELS)}")
        if s not in models:
            models.append(s)
    ms = []
    for s in filter(None, (x.strip() for x in a.ms.split(","))):
        if not s.isdigit() or int(s) <= 0:
            die(f"--ms: {s!r} is not a positive integer")
        ms.append(int(s))
    if not models or not ms:
        die("--models and --ms must each name at least one value")
    for name in ("trials", "reps", "routings", "distinct", "rotate_mib", "max_copies", "copy_gib"):
        if getattr(a, name) < 1:
            die(f"--{name.replace('_', '-')} must be at least 1")
    for model in models:
        if MODELS[model]["E"] % a.distinct:
            die(f"--distinct {a.distinct} does not divide E = {MODELS[model]['E']} of {model}")
    a.model_list, a.m_list = models, ms
    a.out = a.out or os.environ.get("OUT") or "."
    return a


def copies_for(nbytes, args):
    """Copies of all experts (nbytes each) to rotate through, as examples/bench_moe.rs counts them."""
    return max(1, min((args.rotate_mib << 20) // max(nbytes, 1), args.max_copies))


def turn_of(copies, routings):
    """Launches that pair every weight copy with every routing once."""
    return copies * routings // math.gcd(copies, routings)


def planned_bytes(E, n, k):
    """All E experts' packed uint4 weights and fp16 group-128 scales (the layer's parameters)."""
    return E * (n * k // 2 + n * (k // WEIGHT_CONFIG["group_size"]) * 2)


def dry_run(args):
    cases = sum(len(MODELS[m]["projs"]) for m in args.model_list) * len(args.m_list)
    print(f"dry run: {cases} cases; would write {os.path.join(args.out, JSON_NAME)}")
    print(f"bandwidth: {args.copy_gib} GiB device-to-device copy; timing: median of {args.trials} graph "
          f"replays of at least {args.reps} launches; {args.routings} routings per M; {args.distinct} "
          f"distinct experts; copies: at most {args.rotate_mib} MiB, 1..{args.max_copies}")
    for model in args.model_list:
        spec = MODELS[model]
        for proj, n, k in spec["projs"]:
            wb = planned_bytes(spec["E"], n, k)
            c = copies_for(wb, args)
            turn = turn_of(c, args.routings)
            print(f"{model} {proj} E={spec['E']} top_k={spec['top_k']} N={n} K={k}: {c} copies of "
                  f"{wb / 2**20:.0f} MiB, {math.ceil(args.reps / turn) * turn} launches per graph; "
                  f"M = {', '.join(str(m) for m in args.m_list)}")
    return 0


def load_dense_bench():
    """scripts/humming-kernels-bench.py, for its timing, bandwidth and dependency checks (the same
    method as the dense benchmark)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "humming-kernels-bench.py")
    spec = importlib.util.spec_from_file_location("humming_kernels_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def plain(o):
    """JSON for the heuristic's config values: enums by value, tuples as lists."""
    item = getattr(o, "item", None)
    if callable(item):
        return item()
    v = getattr(o, "value", None)
    if v is not None:
        return v
    if isinstance(o, (tuple, set)):
        return list(o)
    return str(o)


class Bench:
    """The run's state: torch, humming-kernels' entry points, the bandwidth and the JSON."""

    def __init__(self, args, dense):
        self.args, self.dense = args, dense
        self.torch = dense.torch
        from humming.forward import humming_forward
        from humming.tune import get_heuristics_config

        self.forward, self.heuristics = humming_forward, get_heuristics_config
        try:
            from humming.kernel.humming import HummingKernel

            self.prepare_kernels = HummingKernel.prepare_kernels
        except Exception:  # noqa: BLE001  (then the first launch compiles)
            self.prepare_kernels = None

    # -- routing ----------------------------------------------------------------------------------

    def routings(self, m, E, top_k):
        """--routings uniform random routings of m tokens: [m, top_k] int32, and distinct experts of each."""
        torch = self.torch
        ids = [torch.rand((m, E), device="cuda").topk(top_k, dim=1).indices.to(torch.int32).contiguous()
               for _ in range(self.args.routings)]
        return ids, [int(torch.unique(t).numel()) for t in ids]

    def moe_align(self, topk_ids, E, block_m):
        """vLLM's moe_align layout, as humming.testing.data.generate_moe_tensors builds it: per expert in
        order, the flat slots routed to it, padded with M * top_k to a multiple of block_m; the expert of
        each block; the slots in use."""
        torch = self.torch
        flat = topk_ids.reshape(-1).long()
        slots = flat.numel()
        counts = torch.bincount(flat, minlength=E)
        padded = (counts + block_m - 1) // block_m * block_m
        used = int(padded.sum().item())
        order = torch.sort(flat, stable=True).indices
        first = (torch.cumsum(counts, 0) - counts)[flat[order]]
        first_padded = (torch.cumsum(padded, 0) - padded)[flat[order]]
        where = first_padded + torch.arange(slots, device=flat.device) - first
        sorted_ids = torch.full((used,), slots, dtype=torch.int32, device=flat.device)
        sorted_ids[where] = order.to(torch.int32)
        expert_ids = torch.repeat_interleave(torch.arange(E, dtype=torch.int32, device=flat.device),
                                             padded // block_m).to(torch.int32)
        used_t = torch.tensor([used], dtype=torch.int32, device=flat.device)
        return sorted_ids.contiguous(), expert_ids.contiguous(), used_t

    # -- one projection ---------------------------------------------------------------------------

    def build(self, E, n, k):
        """The layer of E experts (expert e a copy of distinct expert e % D), humming-kernels' dequantized
        distinct experts [D, n, k] in f32, and the layer's parameter tensors."""
        torch, dense, D = self.torch, self.dense, self.args.distinct
        kw = dict(shape_n=n, shape_k=k, weight_config=dict(WEIGHT_CONFIG), num_experts=E,
                  torch_dtype=torch.float16)
        try:
            with torch.device("cuda"):  # the parameter placeholders straight on the GPU
                layer = dense.HummingLayer(**kw)
        except (AttributeError, TypeError):
            layer = dense.HummingLayer(**kw)
        layer = layer.cuda()
        schema = layer.weight_schema
        w = torch.randn((D, n, k), dtype=torch.float16, device="cuda") * 0.02
        base = dense.HummingWeightSchema.quant_tensor(w, schema, torch.float16)
        del w
        w_deq = schema.dequant_tensors(base).float()
        tiled = {name: t.repeat(E // D, *([1] * (t.dim() - 1))).contiguous() for name, t in base.items()}
        del base
        layer.load_from_tensors(tiled)
        layer.transform()
        del tiled
        params = {}
        for name in PARAM_NAMES:
            t = getattr(layer, name, None)
            if t is not None:
                params[name] = t.data if isinstance(t, torch.nn.Parameter) else t
        return layer, w_deq, params

    def reference(self, x, topk_ids, w_deq, kernel_top_k):
        """f32 C: slot s is x[s // kernel_top_k] @ W_deq[expert(s) % D].T."""
        torch, D = self.torch, w_deq.size(0)
        flat = topk_ids.reshape(-1).long()
        ref = torch.empty((flat.numel(), w_deq.size(1)), dtype=torch.float32, device=x.device)
        src = torch.arange(flat.numel(), device=x.device) // kernel_top_k
        xf = x.float()
        for d in range(D):
            sel = torch.nonzero(flat % D == d).squeeze(1)
            if sel.numel():
                ref[sel] = xf[src[sel]] @ w_deq[d].T
        return ref

    def tuning(self, cfg, rows):
        """humming-kernels' heuristic config for `rows` GEMM rows, and it as a one-row tuning table."""
        c = json.loads(json.dumps(self.heuristics(cfg, shape_m=rows, gemm_type="indexed"), default=plain))
        return c, json.dumps([[0, 1 << 30, c]])

    def bench_proj(self, model, proj, n, k, per_m, result):
        torch, args, dense = self.torch, self.args, self.dense
        spec = MODELS[model]
        E, top_k = spec["E"], spec["top_k"]
        kernel_top_k = top_k if proj == "gate_up" else 1
        t0 = time.time()
        layer, w_deq, params = self.build(E, n, k)
        cfg = layer.humming_config
        all_bytes = sum(t.numel() * t.element_size() for t in params.values())
        copies = copies_for(all_bytes, args)
        wsets = [params] + [{name: t.clone() for name, t in params.items()} for _ in range(copies - 1)]
        tunings = {m: self.tuning(cfg, m * top_k) for m, _, _ in per_m}
        # Every M's kernel compiled at once, before any capture (humming-kernels compiles a kernel on
        # its first use otherwise, one after the other).
        t1 = time.time()
        if self.prepare_kernels is not None:
            todo = sorted({t for _, t in tunings.values()})
            dev = torch.cuda.current_device()
            with cf.ThreadPoolExecutor(max_workers=max(1, min(len(todo), os.cpu_count() or 1))) as pool:
                futures = [pool.submit(self.prepare_kernels, cfg.to_str(), COMPUTE_INDEXED, t, dev) for t in todo]
                for f in futures:
                    try:
                        f.result()
                    except Exception as e:  # noqa: BLE001  (the first launch compiles it then)
                        print(f"  note: prepare_kernels failed ({type(e).__name__}: {e})", flush=True)
        compile_s = time.time() - t1
        prep_s = time.time() - t0
        print(f"{model} {proj} E={E} N={n} K={k}: {copies} copies of {all_bytes / 2**20:.0f} MiB; "
              f"prep {prep_s:.1f} s (compile {compile_s:.1f} s)", flush=True)
        for m, topks, uniq in per_m:
            c, tstr = tunings[m]
            block_m = int(c["block_shape"][0])
            routings = len(topks)
            aligned = [self.moe_align(t, E, block_m) for t in topks]
            rows_in = m * top_k // kernel_top_k
            xs = [torch.randn((rows_in, k), dtype=torch.float16, device="cuda") for _ in topks]
            outs = [torch.empty((m * top_k, n), dtype=torch.float16, device="cuda") for _ in topks]
            turn = turn_of(copies, routings)
            locks = [torch.zeros((2048,), dtype=torch.int32, device="cuda") for _ in range(turn)]

            def launch(i, tstr=tstr, aligned=aligned, xs=xs, outs=outs, locks=locks):
                j, ws = i % routings, wsets[i % copies]
                sorted_ids, expert_ids, used = aligned[j]
                return self.forward(
                    cfg, inputs=xs[j], weight=ws["weight"], weight_scale=ws.get("weight_scale"),
                    zero_point=ws.get("zero_point"), bias=ws.get("bias"),
                    weight_scale_2=ws.get("weight_scale_2"), outputs=outs[j], sorted_ids=sorted_ids,
                    expert_ids=expert_ids, num_tokens_padded=used, locks=locks[i], top_k=kernel_top_k,
                    compute_config=COMPUTE_INDEXED, tuning_config=tstr)

            outs[0].fill_(float("nan"))
            out = launch(0)
            torch.cuda.synchronize()
            nonfinite = int((~torch.isfinite(out)).sum().item())
            err = dense.rel_err(out, self.reference(xs[0], topks[0], w_deq, kernel_top_k))
            ok = err is not None and err <= MAX_REL_ERR and nonfinite == 0
            th = dense.time_us([lambda i=i: launch(i) for i in range(turn)], args)
            per_expert = all_bytes / E
            touched = sum(uniq) / len(uniq)
            a_bytes, c_bytes = rows_in * k * 2, m * top_k * n * 2
            floor_us = (touched * per_expert + a_bytes + c_bytes) / self.bw * 1e6
            row = dict(
                format="w4a16", w=WEIGHT_CONFIG["dtype"], g=WEIGHT_CONFIG["group_size"], a="float16",
                model=model, proj=proj, E=E, top_k=top_k, kernel_top_k=kernel_top_k, n=n, k=k, m=m,
                a_rows=rows_in, humming_us=th["median_us"], floor_us=floor_us, experts_touched=touched,
                weight_bytes=touched * per_expert, weight_bytes_per_expert=per_expert,
                weight_bytes_all_experts=all_bytes, a_bytes=a_bytes, c_bytes=c_bytes, block_m=block_m,
                rel_err_vs_dequant=err, nonfinite=nonfinite, ok=ok, weight_copies=copies,
                routings=routings, humming=th, tuning=c, prep_s=prep_s, compile_s=compile_s,
            )
            result["rows"].append(row)
            print(f"{model:13s} {proj:7s} E={E:3d} N={n:5d} K={k:5d} M={m:5d}  humming {th['median_us']:8.1f}us"
                  f"{'' if th['timing'] == 'graph' else ' (events)'}  experts {touched:5.1f}  "
                  f"floor {floor_us:7.1f}us ({floor_us / th['median_us'] * 100:4.0f}%)  block_m {block_m:3d}  "
                  f"err {err if err is not None else float('nan'):.2e}{'' if ok else '  NOT OK'}", flush=True)
            if not ok:
                result["errors"].append(dict(where=f"{model} {proj} M={m}",
                                             error=f"relative error {err} (limit {MAX_REL_ERR}), "
                                             f"{nonfinite} values not finite"))
            del xs, outs, aligned, locks, out
        del layer, w_deq, params, wsets
        torch.cuda.empty_cache()


def write_json(args, result):
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, JSON_NAME)
    with open(path + ".tmp", "w") as fh:
        json.dump(result, fh, indent=1)
    os.replace(path + ".tmp", path)
    return path


def main(argv):
    args = parse_args(argv)
    if args.dry_run:
        return dry_run(args)
    dense = load_dense_bench()
    version = dense.import_deps()
    bench = Bench(args, dense)
    torch = bench.torch
    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = False  # the f32 check product is true f32
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    device = dict(name=props.name, capability=f"{props.major}.{props.minor}", sms=props.multi_processor_count,
                  l2_bytes=getattr(props, "L2_cache_size", None), memory_bytes=props.total_memory)
    print(f"{device['name']} (sm {device['capability']}), {device['sms']} SMs; torch {torch.__version__} "
          f"(CUDA {torch.version.cuda}), humming-kernels {version}", flush=True)
    bench.bw = dense.copy_bandwidth(args.copy_gib << 30)
    print(f"copy bandwidth {bench.bw / 1e12:.2f} TB/s (read + write, {args.copy_gib} GiB device-to-device "
          "copy)", flush=True)
    result = dict(
        copy_bw_tbs=bench.bw / 1e12,
        meta=dict(
            tool="scripts/humming-kernels-moe-bench.py", humming_kernels=version, torch=torch.__version__,
            cuda=torch.version.cuda, device=device, copy_bytes=args.copy_gib << 30, trials=args.trials,
            min_launches=args.reps, routings=args.routings, distinct_experts=args.distinct,
            rotate_mib=args.rotate_mib, max_copies=args.max_copies, seed=args.seed,
            weight_config=WEIGHT_CONFIG, models=args.model_list, ms=args.m_list,
            notes=[
                "humming_us: humming_forward on a routing built beforehand (moe_align), median per launch "
                "over trials graph replays",
                "floor_us = (experts_touched x weight_bytes_per_expert + a_bytes + c_bytes) / copy_bw, copy_bw "
                "counting bytes read + written",
                "rel_err_vs_dequant: against x.float() @ W_deq.T, W_deq = humming-kernels' dequantization",
            ],
        ),
        errors=[],
        rows=[],
    )
    path = write_json(args, result)
    for model in args.model_list:
        spec = MODELS[model]
        try:
            per_m = [(m, *bench.routings(m, spec["E"], spec["top_k"])) for m in args.m_list]
        except Exception as e:  # noqa: BLE001
            result["errors"].append(dict(where=f"{model} routings", error=f"{type(e).__name__}: {e}"[:2000]))
            continue
        for proj, n, k in spec["projs"]:
            try:
                bench.bench_proj(model, proj, n, k, per_m, result)
            except Exception as e:  # noqa: BLE001  (report it, go on with the next projection)
                msg = f"{type(e).__name__}: {e}".strip()
                print(f"ERROR {model} {proj}: {msg}", file=sys.stderr, flush=True)
                result["errors"].append(dict(where=f"{model} {proj}", error=msg[:2000]))
                torch.cuda.empty_cache()
            write_json(args, result)
    print(f"wrote {path} ({len(result['rows'])} rows, {len(result['errors'])} errors)", flush=True)
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
