#!/usr/bin/env bash
# timehands' bounds on UTC beside AWS ClockBound's, on one real chronyd,
# against an NTP server on loopback whose true time is known: root only.
#
# The truth is CLOCK_MONOTONIC_RAW plus the offset CLOCK_REALTIME had from
# it when the script started (`bounds_truth save`); the server
# (`bounds_truth serve`) answers NTP on 127.0.0.1 with it. chronyd runs
# with a private config (no `rtcsync`: the kernel keeps STA_UNSYNC, so the
# kernel alone gives no bound), its pidfile and log in a private directory,
# its command socket at /run/chrony/chronyd.sock (where ClockBound's daemon
# asks) and its UDP command port on 127.0.0.1 (where timehands asks).
# ClockBound's daemon (`clockbound -d`, from `cargo install clock-bound-d`)
# runs beside it when installed. `bounds_truth sample` samples both every
# 20 ms, one process a phase, and prints a JSON line of figures a phase:
#
#   start     the clock is put 0.3 s behind the truth, chronyd starts and
#             steps it (makestep), unsynchronized until it says otherwise
#   steady    synchronized
#   restart   the server's replies leave 4 ms late (an asymmetric path that
#             NTP cannot see, but its delay bounds), and chronyd is stopped
#             and started again: the new one slews the clock 2 ms off
#   slew      as it goes on so
#   back      the path symmetric again, chronyd restarted: it slews back
#   stopped   chronyd is stopped: free-running, the bounds still hold
#   via-clockbound  chronyd again, with `rtcsync` and no UDP command port:
#             timehands takes ClockBound's bound (where its daemon runs)
#   kernel    ClockBound's daemon stopped: timehands takes the kernel's
#             maxerror, which chronyd keeps with `rtcsync`
#
# Every phase with a false bound of timehands' fails the script (exit 1);
# ClockBound's false bounds are reported. A machine it cannot run on (not
# root, no chronyd, a time daemon running) exits 77 with the reason. Whatever happens, the kernel's
# tick, frequency and status are set back as found and CLOCK_REALTIME is
# stepped onto the truth (the timeline it would have kept), and the
# daemons stopped. No leap second: the kernel would insert it at the next
# midnight UTC, on a clock others share.
#
#   sudo scripts/bounds-vs-clockbound.sh
#   sudo BOUNDS_TRUTH=target/release/examples/bounds_truth scripts/bounds-vs-clockbound.sh
#   BOUNDS_SECONDS=10 ...   seconds a phase (20)
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
    printf 'bounds-vs-clockbound: %s\n' "$*" >&2
    exit 77
}
[ "$(id -u)" = 0 ] || fail "root only: chronyd steps and slews the kernel's clock"
[ "$(uname -s)" = Linux ] || fail "Linux only (adjtimex, CLOCK_MONOTONIC_RAW)"
command -v chronyd >/dev/null && command -v chronyc >/dev/null ||
    fail "chronyd and chronyc are not installed (apt: chrony)"
for daemon in chronyd ntpd systemd-timesyncd ptp4l phc2sys clockbound; do
    pgrep -x "${daemon:0:15}" >/dev/null &&
        fail "$daemon runs already: it keeps this machine's time (or its bound), stop it first"
done
[ -e /run/chrony/chronyd.sock ] && fail "/run/chrony/chronyd.sock exists: another chronyd's socket"

truth=${BOUNDS_TRUTH:-}
if [ -z "$truth" ]; then
    command -v cargo >/dev/null ||
        fail "no cargo here: build the example first and give it as BOUNDS_TRUTH=path"
    cargo build --release -q -p timehands-cli --example bounds_truth
    truth=${CARGO_TARGET_DIR:-target}/release/examples/bounds_truth
fi
[ -x "$truth" ] || fail "BOUNDS_TRUTH=$truth: not an executable"
clockbound=$(command -v clockbound || true)
[ -n "$clockbound" ] || echo "ClockBound's daemon is not installed (cargo install clock-bound-d): timehands alone"
seconds=${BOUNDS_SECONDS:-20}
port=12323

# One test that changes the machine's clock at a time: the others that do
# take the same lock (flock(1) on it, as here).
lock=/run/lock/timehands-clock.lock
exec 9>"$lock"
flock -w 600 9 || fail "$lock: another test has held the machine's clock for 10 minutes"

read -r tick freq status k < <("$truth" save)
# The truth is taken from the clock as found: a clock someone else is
# stepping now (another test) would make a wrong truth, which chronyd
# would then step the machine onto. It must hold still for 2 s.
for _ in 1 2; do
    sleep 1
    read -r _ _ _ again < <("$truth" save)
    moved=$((again - k))
    [ "${moved#-}" -lt 1000000 ] ||
        fail "CLOCK_REALTIME moved ${moved} ns against CLOCK_MONOTONIC_RAW in a second: someone else steps the clock now"
done

dir=$(mktemp -d)
chmod 700 "$dir"
server= cbd= sampler=
results=$dir/results.jsonl

# Stops what runs, sets the kernel's clock back on the truth, as found.
restore() {
    for pid in $sampler $server $cbd; do kill "$pid" 2>/dev/null || true; done
    [ -f "$dir/chronyd.pid" ] && kill "$(cat "$dir/chronyd.pid")" 2>/dev/null && sleep 0.5
    "$truth" restore "$tick" "$freq" "$status" "$k" ||
        echo "bounds-vs-clockbound: could not restore the clock (tick $tick freq $freq status $status)" >&2
    [ -n "$cbd" ] && rm -f /var/run/clockbound/shm0
    rm -rf "$dir"
}
trap restore EXIT
trap 'exit 130' INT TERM

serve() { # reply delay, µs
    [ -n "$server" ] && kill "$server" && wait "$server" 2>/dev/null || true
    "$truth" serve --port "$port" --k "$k" --reply-delay-us "$1" &
    server=$!
}

start_chronyd() { # extra config lines
    cat >"$dir/chrony.conf" <<EOF
server 127.0.0.1 port $port minpoll 0 maxpoll 0 iburst
makestep 0.1 3
port 0
pidfile $dir/chronyd.pid
bindcmdaddress 127.0.0.1
bindcmdaddress /run/chrony/chronyd.sock
EOF
    for line in "$@"; do echo "$line" >>"$dir/chrony.conf"; done
    # chronyd refuses a socket directory others can write to.
    mkdir -p /run/chrony && chmod 750 /run/chrony
    chronyd -u root -f "$dir/chrony.conf" -l "$dir/chronyd.log"
}

stop_chronyd() {
    kill "$(cat "$dir/chronyd.pid")"
    for _ in $(seq 50); do [ -f "$dir/chronyd.pid" ] || break; sleep 0.1; done
}

# One phase: the sampler in the background, `action` a second into it.
phase() { # name action...
    local name=$1
    shift
    "$truth" sample --k "$k" --seconds "$seconds" --phase "$name" --pairs "$dir/$pairs" >>"$results" &
    sampler=$!
    sleep 1
    "$@"
    wait "$sampler"
    sampler=
    tail -n 1 "$results"
    # The clock is put 0.3 s off at the start, and chronyd slews it 2 ms:
    # more is a step by someone else, which voids every bound measured.
    local off
    off=$(tail -n 1 "$results" | sed 's/.*"max_kernel_offset_ns":\(-\{0,1\}[0-9]*\).*/\1/')
    if [ "${off#-}" -gt 1000000000 ]; then
        echo "bounds-vs-clockbound: the clock was ${off} ns off the truth in phase $name: someone else stepped it; no figure of this run holds" >&2
        exit 77
    fi
}

# The clock 0.3 s behind the truth: a step for chronyd to make.
"$truth" restore "$tick" "$freq" "$status" "$((k - 300000000))"
serve 0
if [ -n "$clockbound" ]; then
    # A segment no daemon writes (a run killed before) would be read.
    mkdir -p /var/run/clockbound && rm -f /var/run/clockbound/shm0
    "$clockbound" -d >"$dir/clockbound.log" 2>&1 &
    cbd=$!
fi
restart_chronyd() { # the server's reply delay, µs; extra config lines
    serve "$1"
    shift
    stop_chronyd
    start_chronyd "$@"
}
stop_clockbound() {
    kill "$cbd"
    wait "$cbd" 2>/dev/null || true # killed: 143
    cbd=
    rm -f /var/run/clockbound/shm0
}
# Half-widths side by side, where timehands asks chronyd, as ClockBound does.
pairs=pairs
phase start start_chronyd
phase steady true
phase restart restart_chronyd 4000
phase slew true
phase back restart_chronyd 0
phase stopped stop_chronyd
pairs=pairs-other-sources
phase via-clockbound start_chronyd rtcsync "cmdport 0"
[ -n "$cbd" ] && phase kernel stop_clockbound

echo "chronyd's log:"
sed 's/^/  /' "$dir/chronyd.log"
# Over every sample of the phases on chronyd where both gave a bound.
if [ -s "$dir/pairs" ]; then
    sort -n -k1,1 "$dir/pairs" | awk '{ a[NR] = $1 } END { printf "half-width median, every phase on chronyd (start to stopped): timehands %d ns", a[int(NR / 2) + 1] }'
    sort -n -k2,2 "$dir/pairs" | awk '{ b[NR] = $2 } END { printf ", ClockBound %d ns, over %d samples\n", b[int(NR / 2) + 1], NR }'
fi
# The verdict: timehands' false bounds, and how its bound compares.
awk '{ if (match($0, /"timehands":\{[^}]*"false":[0-9]+/)) { s = substr($0, RSTART, RLENGTH); sub(/.*"false":/, "", s); f += s } }
     END { printf "timehands false bounds, all phases: %d\n", f; exit f > 0 }' "$results"
