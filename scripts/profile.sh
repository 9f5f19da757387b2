#!/usr/bin/env bash
# Profiles `acp-green serve` under bench workloads with cProfile and prints the top costs.
# usage: scripts/profile.sh [-w WORKLOAD]... [-o OUTDIR]
#   -w W1..W8 (repeatable; default W1 and W2), -o where the .prof files go (default bench-results/profile)
# For start-up (W5) an import listing is usually clearer: python -X importtime -m acp_green serve.
# For sampled profiles without cProfile's per-call overhead, install py-spy and run e.g.
#   .venv/bin/acp-green bench -w W1 --repeat 1 --no-ceiling \
#     --agent "pyspy=.venv/bin/py-spy record -r 500 -f raw -o OUT.txt -- .venv/bin/python -m acp_green serve --ephemeral"
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench-results/profile
workloads=()
while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workload) workloads+=("$2"); shift 2 ;;
    -o|--out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#workloads[@]} -gt 0 ] || workloads=(W1 W2)
mkdir -p "$out"
for w in "${workloads[@]}"; do
  case "$w" in W[1-8]) ;; *) echo "no workload $w (W1-W8)" >&2; exit 2 ;; esac
  prof="$out/acp-green-$w.prof"
  rm -f "$prof"
  # Named acp-green-...: W7 and W8, which run on acp-green only, run on it too. Each start of the
  # process writes the profile; the last one (the measured run) is what is left.
  .venv/bin/acp-green bench -w "$w" --repeat 1 --no-ceiling \
    --agent "acp-green-cprofile=.venv/bin/python -m cProfile -o $prof -m acp_green serve --ephemeral" >&2
  echo "== $w: top functions by own time ($prof)"
  .venv/bin/python -c "import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats('tottime').print_stats(25)" "$prof" \
    | sed -n '/ncalls/,$p'
done
