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
# runs beside it when installed. ClockBound 3's daemon (`clockbound` 3.x,
# built with `test-side-by-side`, which leaves the system clock alone; run
# without CAP_SYS_TIME all the same) runs beside both where installed
# (CLOCKBOUND3=path, /opt/clockbound3/bin/clockbound unless said):
#
#   cargo install --locked clock-bound --version =3.0.0-rc.0 \
#       --features daemon,test-side-by-side --root /opt/clockbound3
#
# in a mount namespace of its own, with a private tmpfs over
# /var/run/clockbound, so that its pages (shm1, and the shm0 it writes for
# 2.x's clients) do not collide with 2.0.3's, and with a second truth
# server on 127.0.0.1:123 (its NTP servers must be on port 123). Where it
# cannot run (not installed, not a 3.x built with `test-side-by-side`, port
# 123 taken, no namespaces) the script says why and goes on without it.
# `bounds_truth sample` samples all of them every 20 ms, one process a
# phase, times a call of each (and of `now()`), and prints a JSON line of
# figures a phase; ClockBound 3's client reads its page through
# /proc/PID/root of its namespace:
#
#   start     the clock is put 0.3 s behind the truth, chronyd starts and
#             steps it (makestep), unsynchronized until it says otherwise
#   steady    synchronized
#   restart   the server's replies leave 4 ms late (an asymmetric path that
#             NTP cannot see, but its delay bounds), and chronyd is stopped
#             and started again: the new one slews the clock 2 ms off
#   slew      as it goes on so
#   back      the path symmetric again, chronyd restarted: it slews back
#   clockbound3-restart  ClockBound 3's daemon stopped and started again
#   stopped   chronyd is stopped: free-running, the bounds still hold
#   via-clockbound  chronyd again, with `rtcsync` and no UDP command port:
#             timehands takes ClockBound's bound (where its daemon runs)
#   via-clockbound3  the sampler in ClockBound 3's namespace: timehands
#             takes ClockBound 3's page (and ClockBound 2's client reads
#             the shm0 that ClockBound 3 writes for 2.x's clients)
#   clockbound3-stopped  ClockBound 3's daemon stopped, its page left
#   kernel    ClockBound's daemon stopped: timehands takes the kernel's
#             maxerror, which chronyd keeps with `rtcsync`
#   settle    chronyd on its UDP port again, both ClockBounds started again
#   truth-step  the truth steps 20 ms ahead, on both servers and in the
#             sampler at once (5 s into the phase, which runs three times
#             as long): a fault of the reference itself, which no client
#             sees before its next exchange with it, and after which
#             chronyd's own estimate of its error stays short for seconds
#             (last, so that no other phase is measured after it)
#
# Every phase but truth-step with a false bound of timehands' fails the
# script (exit 1); the truth-step phase's are counted and printed, every
# source's alike. Both ClockBounds' false bounds are reported. A machine it cannot run on (not
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
    # ClockBound 3's client needs Rust 1.87; without it, no ClockBound 3.
    cargo build --release -q -p timehands-cli --example bounds_truth --features clockbound3 ||
        cargo build --release -q -p timehands-cli --example bounds_truth
    truth=${CARGO_TARGET_DIR:-target}/release/examples/bounds_truth
fi
[ -x "$truth" ] || fail "BOUNDS_TRUTH=$truth: not an executable"
# Absolute: the sampler runs in ClockBound 3's namespace too.
truth=$(readlink -f "$truth")
clockbound=$(command -v clockbound || true)
[ -n "$clockbound" ] || echo "ClockBound's daemon is not installed (cargo install clock-bound-d): timehands alone"
seconds=${BOUNDS_SECONDS:-20}
port=12323

# ClockBound 3: why not, where it cannot run here (empty where it can).
clockbound3=${CLOCKBOUND3:-/opt/clockbound3/bin/clockbound}
why_no_cb3=
if ! "$truth" clients | grep -qw clockbound3; then
    why_no_cb3="$truth was built without ClockBound 3's client (its feature clockbound3, which needs Rust 1.87)"
elif [ ! -x "$clockbound3" ]; then
    why_no_cb3="$clockbound3 is not installed (CLOCKBOUND3=path)"
elif ! "$clockbound3" --version 2>/dev/null | grep -q '^clock-bound 3\.'; then
    why_no_cb3="$clockbound3 is not ClockBound 3 ($("$clockbound3" --version 2>&1 | head -n 1))"
elif ! grep -q '"clock-bound 3\.[^"]*":{[^}]*"features":\[[^]]*"test-side-by-side"' \
    "$(dirname "$clockbound3")/../.crates2.json" 2>/dev/null; then
    # Without the feature it would discipline the clock against chronyd.
    why_no_cb3="$clockbound3: cargo install's record beside it does not say it was built with test-side-by-side"
else
    for tool in unshare nsenter setpriv; do
        command -v "$tool" >/dev/null || why_no_cb3="no $tool (util-linux)"
    done
fi

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
server= server123= cbd= cb3d= cb3ns= sampler=
results=$dir/results.jsonl
k0=$k delay=0 step_args=()
# ClockBound's pages, wherever /var/run points.
mkdir -p /var/run/clockbound
pages=$(readlink -f /var/run/clockbound)

# Stops what runs, sets the kernel's clock back on the truth, as found.
restore() {
    for pid in $sampler $server $server123 $cbd $cb3d $cb3ns; do kill "$pid" 2>/dev/null || true; done
    [ -f "$dir/chronyd.pid" ] && kill "$(cat "$dir/chronyd.pid")" 2>/dev/null && sleep 0.5
    # The truth as found, whatever step the run gave its servers.
    "$truth" restore "$tick" "$freq" "$status" "$k0" ||
        echo "bounds-vs-clockbound: could not restore the clock (tick $tick freq $freq status $status)" >&2
    [ -n "$cbd" ] && rm -f /var/run/clockbound/shm0
    rm -rf "$dir"
}
trap restore EXIT
trap 'exit 130' INT TERM

serve() { # reply delay, µs
    delay=$1
    [ -n "$server" ] && kill "$server" && wait "$server" 2>/dev/null || true
    "$truth" serve --port "$port" --k "$k" --reply-delay-us "$delay" "${step_args[@]}" &
    server=$!
    [ -n "$server123" ] && serve123
    true
}

# ClockBound 3's truth, the same on port 123.
serve123() {
    kill "$server123" 2>/dev/null && wait "$server123" 2>/dev/null || true
    "$truth" serve --port 123 --k "$k" --reply-delay-us "$delay" "${step_args[@]}" \
        2>>"$dir/server123.log" &
    server123=$!
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
    # Gone, not only told: a new chronyd refuses to start beside it, and a
    # loaded machine takes seconds to let one exit.
    local pid
    pid=$(cat "$dir/chronyd.pid")
    kill "$pid"
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    echo "bounds-vs-clockbound: chronyd (pid $pid) did not exit in 30 s" >&2
    return 1
}

# One phase: the sampler in the background (in ClockBound 3's namespace
# where `in_cb3ns` says so), `action` a second into it.
in_cb3ns=
phase() { # name action...
    local name=$1 where=() page=()
    shift
    if [ -n "$in_cb3ns" ]; then
        where=(nsenter -t "$cb3ns" -m --)
        page=(--clockbound3 "$pages/shm1" --pairs-clockbound3 "$dir/$pairs-clockbound3")
    elif [ -n "$cb3ns" ]; then
        page=(--clockbound3 "/proc/$cb3ns/root$pages/shm1" --pairs-clockbound3 "$dir/$pairs-clockbound3")
    fi
    "${where[@]}" "$truth" sample --k "$k" "${step_args[@]}" --seconds "$seconds" --phase "$name" \
        --pairs "$dir/$pairs" "${page[@]}" >>"$results" &
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
start_clockbound() {
    # A segment no daemon writes (a run killed before) would be read.
    rm -f /var/run/clockbound/shm0
    "$clockbound" -d >>"$dir/clockbound.log" 2>&1 &
    cbd=$!
}
[ -n "$clockbound" ] && start_clockbound

start_clockbound3() {
    # No CAP_SYS_TIME: whatever it was built with, it cannot touch the clock.
    nsenter -t "$cb3ns" -m -- setpriv --bounding-set -sys_time -- \
        "$clockbound3" -c "$dir/clockbound3.toml" >>"$dir/clockbound3.log" 2>&1 &
    cb3d=$!
}
stop_clockbound3() {
    kill "$cb3d"
    wait "$cb3d" 2>/dev/null || true # killed: 143
    cb3d=
}
restart_clockbound3() {
    stop_clockbound3
    start_clockbound3
}
if [ -z "$why_no_cb3" ]; then
    serve123
    sleep 0.2
    kill -0 "$server123" 2>/dev/null || {
        why_no_cb3="no NTP server on port 123: $(cat "$dir/server123.log")"
        server123=
    }
fi
if [ -z "$why_no_cb3" ]; then
    # The namespace: a process that holds it, with the tmpfs mounted.
    unshare -m --propagation private sh -c "mount -t tmpfs -o mode=755 tmpfs $pages && exec sleep infinity" &
    cb3ns=$!
    for _ in $(seq 50); do
        grep -q " $pages " "/proc/$cb3ns/mountinfo" 2>/dev/null && break
        sleep 0.1
    done
    if grep -q " $pages " "/proc/$cb3ns/mountinfo" 2>/dev/null; then
        printf '[[sources.ntp]]\nserver = "127.0.0.1"\n' >"$dir/clockbound3.toml"
        start_clockbound3
    else
        why_no_cb3="no private tmpfs over $pages in a mount namespace (unshare -m)"
        kill "$cb3ns" 2>/dev/null || true
        cb3ns=
    fi
fi
[ -z "$why_no_cb3" ] || [ -z "$server123" ] || {
    kill "$server123"
    server123=
}
[ -z "$why_no_cb3" ] || echo "ClockBound 3 skipped: $why_no_cb3"
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
[ -n "$cb3d" ] && phase clockbound3-restart restart_clockbound3
phase stopped stop_chronyd
pairs=pairs-other-sources
phase via-clockbound start_chronyd rtcsync "cmdport 0"
if [ -n "$cb3d" ]; then
    in_cb3ns=1
    phase via-clockbound3 true
    phase clockbound3-stopped stop_clockbound3
    in_cb3ns=
fi
[ -n "$cbd" ] && phase kernel stop_clockbound
# Last, the truth's step, as no source's bound holds for a while after it:
# chronyd on its own port again, both ClockBounds started again.
pairs=pairs-settle
restart_chronyd 0
[ -n "$clockbound" ] && start_clockbound
[ -n "$cb3ns" ] && start_clockbound3
phase settle true
# Both servers and the sampler step the truth 5 s into the phase, which
# runs three phases' time to see the sources take it.
step_args=(--step-ns 20000000 --step-at-raw-ns "$(($("$truth" raw) + 5000000000))")
serve "$delay"
seconds=$((seconds * 3))
pairs=pairs-truth-step
phase truth-step true

echo "chronyd's log:"
sed 's/^/  /' "$dir/chronyd.log"
if [ -s "$dir/clockbound3.log" ]; then
    echo "ClockBound 3's log (its DNS look-ups left out):"
    grep -v 'DNS resolution failed' "$dir/clockbound3.log" | sed 's/^/  /'
fi
# Over every sample of the phases on chronyd where both gave a bound.
if [ -s "$dir/pairs" ]; then
    sort -n -k1,1 "$dir/pairs" | awk '{ a[NR] = $1 } END { printf "half-width median, every phase on chronyd (start to stopped): timehands %d ns", a[int(NR / 2) + 1] }'
    sort -n -k2,2 "$dir/pairs" | awk '{ b[NR] = $2 } END { printf ", ClockBound %d ns, over %d samples\n", b[int(NR / 2) + 1], NR }'
fi
if [ -s "$dir/pairs-clockbound3" ]; then
    sort -n -k1,1 "$dir/pairs-clockbound3" | awk '{ a[NR] = $1 } END { printf "half-width median, every phase on chronyd (start to stopped) where ClockBound 3 gave one: timehands %d ns", a[int(NR / 2) + 1] }'
    sort -n -k2,2 "$dir/pairs-clockbound3" | awk '{ b[NR] = $2 } END { printf ", ClockBound 3 %d ns, over %d samples\n", b[int(NR / 2) + 1], NR }'
fi
# The verdict: timehands' false bounds but where the truth itself stepped.
awk '{ if (match($0, /"timehands":\{[^}]*"false":[0-9]+/)) { s = substr($0, RSTART, RLENGTH); sub(/.*"false":/, "", s); if ($0 ~ /"phase":"truth-step"/) t += s; else f += s } }
     END { printf "timehands false bounds where the truth stepped (not held against it): %d\n", t
           printf "timehands false bounds, all other phases: %d\n", f; exit f > 0 }' "$results"
