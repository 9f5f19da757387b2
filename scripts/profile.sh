#!/usr/bin/env bash
# Profiles `acp-green serve` under bench workloads with cProfile and prints the top costs.
# usage: scripts/profile.sh [-w WORKLOAD]... [-o OUTDIR] [--stages]
#   -w W1..W8 (repeatable; default W1 and W2), -o where the .prof files go (default bench-results/profile)
#   --stages: instead of cProfile, time the stages a request goes through (decode, dispatch, handler,
#   answer, the writer's write; scripts/stage_timing.py) and print microseconds per call
# For start-up (W5) an import listing is usually clearer: python -X importtime -m acp_green serve.
# For sampled profiles without cProfile's per-call overhead, install py-spy and run e.g.
#   .venv/bin/acp-green bench -w W1 --repeat 1 --no-ceiling \
#     --agent "pyspy=.venv/bin/py-spy record -r 500 -f raw -o OUT.txt -- .venv/bin/python -m acp_green serve --ephemeral"
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench-results/profile
workloads=()
stages=0
while [ $# -gt 0 ]; do
  case "$1" in
    -w|--workload) workloads+=("$2"); shift 2 ;;
    -o|--out) out=$2; shift 2 ;;
    --stages) stages=1; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#workloads[@]} -gt 0 ] || workloads=(W1 W2)
mkdir -p "$out"
for w in "${workloads[@]}"; do
  case "$w" in W[1-8]) ;; *) echo "no workload $w (W1-W8)" >&2; exit 2 ;; esac
  if [ "$stages" = 1 ]; then
    report="$out/acp-green-$w.stages.txt"
    .venv/bin/acp-green bench -w "$w" --repeat 1 --no-ceiling \
      --agent "acp-green-stages=.venv/bin/python scripts/stage_timing.py $report serve --ephemeral" >&2
    echo "== $w: stages of a request, mean per call ($report)"
    cat "$report"
    continue
  fi
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
