#!/usr/bin/env bash
# A real chronyd slewing the kernel's clock under ours, and back: root only.
#
# chronyd (4.x, its default `maxslewrate` of 83 333 ppm) runs with a manual
# reference and nothing else, its command socket in a private directory.
# `chronyc settime` tells it the time is 1.3 s ahead: it slews the kernel's
# clock forward through the tick length (8.33 % fast for some 15 s). A fresh
# chronyd then is told the opposite and slews it back. Each daemon has one
# manual sample, so it changes no frequency: the kernel's clock ends about
# where it began (some tens of ms apart: chronyd measures each offset at its
# own moment). A daemon stopped cleanly ends its slew; where `adjtimex` is
# installed, the tick and frequency found at the start are set again at the
# end, however the script ends.
#
# Meanwhile `timehands track --busy` samples our clock against
# CLOCK_MONOTONIC every 100 ms, with a thread reading `now()` all the while;
# its summary is printed, and every sample more than 1 µs off.
#
#   sudo scripts/chronyd-slew.sh
#   sudo TIMEHANDS=target/release/timehands scripts/chronyd-slew.sh
#                                       a binary built beforehand (root may
#                                       have no cargo)
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
    printf 'chronyd-slew: %s\n' "$*" >&2
    exit 2
}
[ "$(id -u)" = 0 ] || fail "root only: chronyd steers the kernel's clock"
command -v chronyd >/dev/null && command -v chronyc >/dev/null ||
    fail "chronyd and chronyc are not installed (apt: chrony)"
for daemon in chronyd ntpd systemd-timesyncd ptp4l phc2sys; do
    # A process's name is its first 15 characters.
    pgrep -x "${daemon:0:15}" >/dev/null &&
        fail "$daemon runs already: it keeps this machine's time, stop it first"
done

timehands=${TIMEHANDS:-}
if [ -z "$timehands" ]; then
    command -v cargo >/dev/null ||
        fail "no cargo here: build timehands first and give it as TIMEHANDS=path"
    cargo build --release -q -p timehands-cli
    timehands=${CARGO_TARGET_DIR:-target}/release/timehands
fi
[ -x "$timehands" ] || fail "TIMEHANDS=$timehands: not an executable"

dir=$(mktemp -d)
chmod 700 "$dir"
socket=$dir/chronyd.sock
track=
saved=
if command -v adjtimex >/dev/null; then
    saved=$(adjtimex -p | awk '$1 == "tick:" { t = $2 } $1 == "frequency:" { f = $2 } END { print t, f }')
fi

# Stops what still runs (a daemon stopped cleanly ends its slew), and sets
# the kernel's tick and frequency back as they were found.
restore() {
    [ -n "$track" ] && kill "$track" 2>/dev/null
    [ -f "$dir/chronyd.pid" ] && kill "$(cat "$dir/chronyd.pid")" 2>/dev/null && sleep 0.5
    if [ -n "$saved" ]; then
        read -r tick frequency <<<"$saved"
        adjtimex --tick "$tick" --frequency "$frequency"
    fi
    rm -rf "$dir"
}
trap restore EXIT

# One slew by a fresh chronyd: the time is `sign` 1.3 s from now. `settime`
# takes whole seconds, so it is said 0.7 s into a second (+) or 0.3 s into
# one (-), in UTC for chronyc and date alike.
slew() {
    local sign=$1 tenth offset now fraction
    if [ "$sign" = + ]; then tenth=7 offset=2; else tenth=3 offset=-1; fi
    printf 'manual\nbindcmdaddress %s\npidfile %s\n' "$socket" "$dir/chronyd.pid" >"$dir/chrony.conf"
    chronyd -u root -f "$dir/chrony.conf" -l "$dir/chronyd.log"
    for _ in $(seq 50); do chronyc -h "$socket" manual on >/dev/null 2>&1 && break; sleep 0.1; done
    while now=$(date +%s.%N) && fraction=${now#*.} && [ "${fraction:0:1}" != "$tenth" ]; do
        sleep 0.01
    done
    TZ=UTC chronyc -h "$socket" settime "$(date -u -d "@$((${now%.*} + offset))" '+%Y-%m-%d %H:%M:%S')" | tail -1
    # The slew: 1.3 s at 8.33 %, some 16 s, then a few seconds more.
    sleep 20
    kill "$(cat "$dir/chronyd.pid")"
    sleep 0.5
}

"$timehands" track --busy --interval 100 -D 50 >"$dir/track.txt" &
track=$!
sleep 3
slew +
slew -
wait "$track"
track=
awk '/^summary/ { s = 1 } s { print } !s && $2 ~ /^-?[0-9]+$/ && ($2 > 1000 || $2 < -1000) { far = far "\n  " $0 }
     END { print "samples more than 1 µs off:" (far == "" ? " none" : far) }' "$dir/track.txt"
