#!/usr/bin/env bash
# Stepwise against LangGraph.js on the standard agent loop, interleaved
# A B A B, each run a fresh process (README.md explains the step matching).
#
#   bench/peers/langgraph/run.sh                 # 3 pairs per kind at 1,000 steps
#   STEPS=5000 PAIRS=1 KINDS=sqlite bench/peers/langgraph/run.sh
#
# Environment:
#   STEPS    steps per run (1000)
#   PAIRS    pairs per kind (3)
#   KINDS    which pairings, space-separated (sqlite memory):
#              sqlite  stepwise --store sqlite  vs  LangGraph SqliteSaver
#              memory  stepwise --store memory  vs  LangGraph, no saver, then MemorySaver
#   TIMEOUT  seconds before a run counts as "did not finish" (120)
#   SYNC     SQLite synchronous mode of both sides (NORMAL)
#   STEPWISE a stepwise binary (default: built from this checkout into a temp dir)
#   DURABILITY  LangGraph's durability: async (its default), sync or exit
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
STEPS=${STEPS:-1000}
PAIRS=${PAIRS:-3}
KINDS=${KINDS:-sqlite memory}
TIMEOUT=${TIMEOUT:-120}
SYNC=${SYNC:-NORMAL}
DURABILITY=${DURABILITY:-async}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -z "${STEPWISE:-}" ]; then
  echo "building stepwise" >&2
  (cd "$root" && go build -o "$tmp/stepwise" ./cmd/stepwise)
  STEPWISE=$tmp/stepwise
fi
if [ ! -d "$here/node_modules/@langchain/langgraph" ]; then
  echo "installing the LangGraph.js packages (npm ci)" >&2
  npm ci --prefix "$here" --no-audit --no-fund --loglevel=error
fi

# show NAME FILE: one result (stepwise's JSON or bench.mjs's) as a line.
show() {
  node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
    const r = j.results ? j.results[0] : j;
    const f = (x, w) => x.toFixed(1).padStart(w);
    console.log(`  ${process.argv[1].padEnd(24)} per step ${f(r.per_step_us, 9)} µs  first/last decile ${f(r.first_decile_us, 9)} / ${f(r.last_decile_us, 9)} µs  ` +
      `wall ${(r.per_step_us * r.steps / 1e6).toFixed(2).padStart(7)} s  CPU ${(r.cpu_per_step_us * r.steps / 1e6).toFixed(2).padStart(7)} s (${f(r.cpu_per_step_us, 8)} µs/step)  peak RSS ${r.peak_rss_mb.toFixed(0)} MB`);' "$1" "$2"
}

# run NAME OUT CMD...: runs CMD under the timeout, its JSON into OUT; prints a
# line and returns 1 when it did not finish.
run() {
  local name=$1 out=$2
  shift 2
  local rc=0
  timeout "$TIMEOUT" "$@" >"$out" 2>"$out.err" || rc=$?
  if [ "$rc" = 124 ]; then
    printf '  %-24s did not finish in %s s\n' "$name" "$TIMEOUT"
    return 1
  elif [ "$rc" != 0 ]; then
    printf '  %-24s failed (exit %s): %s\n' "$name" "$rc" "$(tail -n 3 "$out.err" | tr '\n' ' ')"
    return 1
  fi
  show "$name" "$out"
}

# ratio A B: LangGraph (B) per step over Stepwise (A), wall and CPU.
ratio() {
  node -e '
    const [a, b] = process.argv.slice(1).map((f) => { const j = JSON.parse(require("fs").readFileSync(f, "utf8")); return j.results ? j.results[0] : j; });
    console.log(`  ratio LangGraph ÷ Stepwise: wall ${(b.per_step_us / a.per_step_us).toFixed(1)}×  CPU ${(b.cpu_per_step_us / a.cpu_per_step_us).toFixed(1)}×`);' "$1" "$2"
}

echo "steps=$STEPS pairs=$PAIRS timeout=${TIMEOUT}s sync=$SYNC durability=$DURABILITY"
echo "cpu: $(grep -m1 -E '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $(grep -m1 -E '^cpu family' /proc/cpuinfo | tr -s ' \t' ' '), $(grep -m1 -E '^model\s' /proc/cpuinfo | tr -s ' \t' ' '); nproc $(nproc)"
echo "stepwise: $STEPWISE (checkout $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'))  node $(node --version)"
echo "load before: $(uptime | sed 's/.*load average/load average/')"

lg=(node "$here/bench.mjs" --steps "$STEPS" --sync "$SYNC" --durability "$DURABILITY" --json)
for kind in $KINDS; do
  for i in $(seq 1 "$PAIRS"); do
    echo "$kind pair $i ($(uptime | sed 's/.*load average: //'))"
    case $kind in
      sqlite)
        run "stepwise sqlite" "$tmp/a.json" "$STEPWISE" bench --store sqlite --sync "$SYNC" --steps "$STEPS" --json || continue
        run "langgraph SqliteSaver" "$tmp/b.json" "${lg[@]}" --saver sqlite && ratio "$tmp/a.json" "$tmp/b.json"
        ;;
      memory)
        run "stepwise memory" "$tmp/a.json" "$STEPWISE" bench --store memory --steps "$STEPS" --json || continue
        run "langgraph no saver" "$tmp/b.json" "${lg[@]}" --saver none && ratio "$tmp/a.json" "$tmp/b.json"
        run "langgraph MemorySaver" "$tmp/c.json" "${lg[@]}" --saver memory && ratio "$tmp/a.json" "$tmp/c.json"
        ;;
      *)
        echo "unknown kind $kind (want sqlite or memory)" >&2
        exit 2
        ;;
    esac
  done
done
echo "load after: $(uptime | sed 's/.*load average/load average/')"
