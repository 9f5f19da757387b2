#!/usr/bin/env bash
# Profiles `acp-green serve` under the bench's W1 and W2 with cProfile and prints the top costs.
# usage: scripts/profile.sh [OUTDIR]   (profiles land in OUTDIR, default bench-results/profile)
# For sampled profiles without cProfile's per-call overhead, install py-spy and run e.g.
#   .venv/bin/acp-green bench -w W1 --repeat 1 --no-ceiling \
#     --agent "pyspy=.venv/bin/py-spy record -r 500 -f raw -o OUT.txt -- .venv/bin/python -m acp_green serve --ephemeral"
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results/profile}
mkdir -p "$out"
for w in W1 W2; do
  prof="$out/acp-green-$w.prof"
  .venv/bin/acp-green bench -w "$w" --repeat 1 --no-ceiling \
    --agent "acp-green-cprofile=.venv/bin/python -m cProfile -o $prof -m acp_green serve --ephemeral" >&2
  echo "== $w: top functions by own time ($prof)"
  .venv/bin/python -c "import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats('tottime').print_stats(25)" "$prof" \
    | sed -n '/ncalls/,$p'
done
