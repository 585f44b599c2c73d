#!/usr/bin/env bash
# ns per event of a minimal LTTng-UST tracepoint with LTTng's own clock and
# with timehands' (libtimehands_lttng.so), in one run, under a session daemon
# of its own: see crates/timehands-lttng/examples/bench.rs.
#
#     scripts/lttng-bench.sh [EVENTS [ROUNDS]]     (defaults 1000000 and 7)
#
# Needs lttng-tools, liblttng-ust-dev and babeltrace2 (apt-get install ...).
set -euo pipefail
cd "$(dirname "$0")/.."
# The plugin is a cdylib, which `cargo run --example` does not build.
cargo build --quiet --release -p timehands-lttng --lib --example bench
exec "${CARGO_TARGET_DIR:-target}/release/examples/bench" "$@"
