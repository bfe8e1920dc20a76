#!/usr/bin/env bash
# Development aid, run on the GPU machine: times several builds of examples/tune.rs with the same
# arguments in interleaved rounds (A B C, A B C, ...: drift in clocks or temperature falls on every
# build alike) and prints, per case, each build's median over the rounds and its ratio to the first.
#   bash scripts/tune-ab.sh [--rounds N] <build> [<build> ...] -- <tune arguments>
#   e.g. bash scripts/tune-ab.sh .gpu/tune .gpu/tune_wide -- --ms 1,8 --tiles 8,128,256,3
# A build may carry arguments of its own after '@' (commas for spaces): .gpu/tune_x@--deterministic,
# .gpu/tune@--splits,8 (the same binary under several settings).
# Raw output of every run in $OUT/tune-ab/ (or ./tune-ab-out/); the table also in table.txt there.
set -uo pipefail
rounds=2
if [ "${1:-}" = "--rounds" ]; then rounds="$2"; shift 2; fi
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
if [ ${#bins[@]} -eq 0 ]; then
  echo "usage: bash scripts/tune-ab.sh [--rounds N] <build> [<build> ...] -- <tune arguments>" >&2
  exit 2
fi
out="${OUT:-tune-ab-out}/tune-ab"
mkdir -p "$out"
export HUMMING_CACHE_DIR="${HUMMING_CACHE_DIR:-/tmp/humming-cache}"
# NVRTC compiles each build's kernels once (cached): for all builds at once, before timing, on one
# small case with the same --format and --tiles.
warm=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --tiles|--format) warm+=("${args[i]}" "${args[i+1]:-}"); i=$((i + 1)) ;;
    --tiles=*|--format=*) warm+=("${args[i]}") ;;
  esac
done
# label: the build's file name and its own arguments; run_build <build> <log> <tune arguments...>
label() { local b="${1%%@*}" own=""; [[ "$1" == *@* ]] && own="@${1#*@}"; echo "$(basename "$b")$own" | tr -c 'A-Za-z0-9_@,.=\n-' '_'; }
run_build() {
  local spec="$1" log="$2"; shift 2
  local b="${spec%%@*}" own=()
  if [[ "$spec" == *@* ]]; then IFS=',' read -r -a own <<< "${spec#*@}"; fi
  "$b" "${own[@]}" "$@" > "$log" 2>&1
}
for b in "${bins[@]}"; do
  run_build "$b" "$out/warm_$(label "$b").log" "${warm[@]}" --shapes 4096x4096 --ms 1 &
done
wait
for r in $(seq 1 "$rounds"); do
  for b in "${bins[@]}"; do
    run_build "$b" "$out/$(label "$b")_round$r.log" "$@" || echo "tune-ab: $b failed in round $r" >&2
  done
done
labels=(); for b in "${bins[@]}"; do labels+=("$(label "$b")"); done
python3 - "$out" "$rounds" "${labels[@]}" <<'PY' | tee "$out/table.txt"
import re, statistics, sys
out, rounds, bins = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
# tune prints "  NxK   M=m   <tile> splits=s [global|cluster|sk..]   t us  floor ..."
line = re.compile(r"^\s*(\d+x\d+)\s+M=(\d+)\s+(\S+)\s+splits=(\d+)\s*(\S*)\s+([\d.]+) us")
times, modes, order = {}, {}, []
for b in bins:
    for r in range(1, rounds + 1):
        try:
            text = open(f"{out}/{b}_round{r}.log").read()
        except OSError:
            continue
        for l in text.splitlines():
            m = line.match(l)
            if not m:
                continue
            # (The split mode, global / cluster / atomic / sk<G>, may differ between builds.)
            key = (m[1], int(m[2]), m[3], int(m[4]))
            if key not in times:
                times[key] = {}
                modes[key] = set()
                order.append(key)
            times[key].setdefault(b, []).append(float(m[6]))
            if m[5] and not re.match(r"^[\d.]+$", m[5]):
                modes[key].add(m[5])
head = ["N x K", "M", "tile", "splits"] + bins + [f"{b} / {bins[0]}" for b in bins[1:]]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for key in order:
    med = {b: statistics.median(v) for b, v in times[key].items()}
    cells = [key[0], str(key[1]), key[2], f"{key[3]} {'/'.join(sorted(modes[key]))}".strip()]
    cells += [f"{med[b]:.2f}" if b in med else "-" for b in bins]
    base = med.get(bins[0])
    cells += [f"{med[b] / base:.3f}" if b in med and base else "-" for b in bins[1:]]
    print("| " + " | ".join(cells) + " |")
PY
