#!/usr/bin/env bash
# The engine on a Cortex-M4: builds the firmware in examples/cortex-m and runs
# it on QEMU's mps2-an386 board, where it keeps time on a hardware timer with
# windups from that board's timer interrupt, and checks itself (see the
# firmware's src/main.rs).
#
# Installs what it needs when it can: qemu-system-arm through apt-get (as
# root), the thumbv7em-none-eabihf target through rustup.
#
# Exit status: 0 when every check passed; 1 when a check failed or the build
# or the run went wrong; 77 when the tools cannot be installed here (the
# reason is printed). The last line is `cortex-m: N checks passed`, or what
# failed.
set -uo pipefail
cd "$(dirname "$0")/.."

readonly TARGET=thumbv7em-none-eabihf
# Where cargo builds the firmware: CARGO_TARGET_DIR if set (relative to the
# firmware's folder, where cargo runs), else the firmware's own target/.
case ${CARGO_TARGET_DIR:-} in
    "") TARGET_DIR=examples/cortex-m/target ;;
    /*) TARGET_DIR=$CARGO_TARGET_DIR ;;
    *) TARGET_DIR=examples/cortex-m/$CARGO_TARGET_DIR ;;
esac
readonly FIRMWARE=$TARGET_DIR/$TARGET/release/timehands-cortex-m
# Emulated time: the run covers 370 s of it (two windups 150 s apart, 40 s of PPS); it
# takes about a second of host time.
readonly RUN_LIMIT_SECONDS=120

unavailable() {
    printf 'cortex-m: cannot run here: %s\n' "$*"
    exit 77
}
failed() {
    printf 'cortex-m: FAILED: %s\n' "$*"
    exit 1
}

if ! command -v qemu-system-arm >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        unavailable "qemu-system-arm is missing, and installing it needs root and apt-get"
    fi
    echo "installing qemu-system-arm with apt-get"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-system-arm; } >/dev/null 2>&1; then
        unavailable "apt-get could not install qemu-system-arm"
    fi
fi
if ! qemu-system-arm -machine help | grep -q '^mps2-an386 '; then
    unavailable "this qemu-system-arm ($(qemu-system-arm --version | head -n 1)) has no mps2-an386 board (QEMU 6.0 added it)"
fi
if ! command -v rustup >/dev/null 2>&1; then
    unavailable "rustup is missing: the $TARGET target cannot be added"
fi
if ! rustup target add "$TARGET" >/dev/null 2>&1; then
    unavailable "rustup could not add the $TARGET target"
fi

# The firmware is a workspace of its own, and its .cargo/config.toml (the
# target, the linker script) applies from its directory. Not `--locked`: the
# engine's dependencies may change without its lock file.
if ! (cd examples/cortex-m && cargo build --release); then
    failed "the firmware did not build"
fi

# -icount: the CPU's instructions drive the virtual clock (2^10 ns each), so
# the timers count emulated time, the run takes a second of host time however
# slow the host is, and every run prints the same numbers. Without it the
# timers follow the host's clock: 370 s of waiting, and reads that depend on
# the host's load.
output=$(mktemp)
trap 'rm -f "$output"' EXIT
timeout "$RUN_LIMIT_SECONDS" qemu-system-arm \
    -machine mps2-an386 \
    -display none -monitor none -serial none \
    -icount shift=10,align=off,sleep=off \
    -semihosting-config enable=on,target=native \
    -kernel "$FIRMWARE" </dev/null | tee "$output"
status=${PIPESTATUS[0]}

if [ "$status" -eq 124 ]; then
    failed "the firmware did not finish within $RUN_LIMIT_SECONDS s"
fi
first_failure=$(grep -m 1 '^FAIL' "$output")
if [ -n "$first_failure" ]; then
    failed "$first_failure"
fi
if [ "$status" -ne 0 ]; then
    failed "QEMU exited with status $status"
fi
passed=$(sed -n 's/^checks: \([0-9][0-9]*\) passed, 0 failed$/\1/p' "$output")
if [ -z "$passed" ]; then
    failed "the firmware exited without its tally of checks"
fi
echo "cortex-m: $passed checks passed"
