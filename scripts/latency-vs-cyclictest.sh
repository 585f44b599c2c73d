#!/usr/bin/env bash
# Runs Debian's cyclictest (apt-get install rt-tests) and `timehands latency`
# back to back with the same flags, three times, and prints each one's Avg
# (cyclictest's "# Avg Latencies") and p99 (from its -h histogram, overflows
# counted above the last bucket): the two measure the same kernel, so their
# figures should agree within the machine's noise.
#
#   scripts/latency-vs-cyclictest.sh -p 80 -i 1000 -l 10000
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cyclictest >/dev/null || { echo "cyclictest is not installed (apt-get install rt-tests)" >&2; exit 1; }
cargo build --release -q -p timehands-cli
timehands=target/release/timehands

p99() {
    awk '/^[0-9]+[ \t]+[0-9]+/ { b = $1 + 0; h[b] = $2 + 0; n += $2; if (b > max) max = b }
         /Overflows:/ { over = $NF + 0 }
         END { need = (n + over) * 0.99; s = 0
               for (i = 0; i <= max; i++) { s += h[i]; if (s >= need) { print i; exit } }
               print ">" max }'
}
avg() { awk '/# Avg Latencies/ { print $NF + 0 }'; }

flags=("$@" -h 2000 -q)
for pair in 1 2 3; do
    c=$(cyclictest "${flags[@]}" 2>/dev/null)
    t=$("$timehands" latency "${flags[@]}" 2>/dev/null)
    echo "pair $pair: cyclictest Avg $(avg <<<"$c") p99 $(p99 <<<"$c") | timehands Avg $(avg <<<"$t") p99 $(p99 <<<"$t")"
done
