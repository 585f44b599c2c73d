#!/usr/bin/env bash
# timehands beyond x86_64 Linux with glibc: lints for every target a Rust
# crate is expected to build on, and the library's tests where they can run
# here (natively for musl, under Wine for Windows, under qemu-user for
# aarch64 Linux).
#
# Installs what it needs when it can (rustup targets; musl-tools, wine64,
# gcc-mingw-w64-x86-64, qemu-user, gcc-aarch64-linux-gnu through apt-get as
# root). A target or a runtime that cannot be installed is skipped with the
# reason printed, never failed; a lint or a test that fails fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { printf 'skipped: %s\n' "$*"; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}/other-platforms

# What is linted where: the library, the timer service and the quanta
# drop-in everywhere; the command, the C library and peer-bench where they
# are ported.
everywhere=(aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-linux-android x86_64-apple-darwin
    aarch64-apple-darwin aarch64-apple-ios x86_64-pc-windows-gnu x86_64-unknown-freebsd
    x86_64-unknown-netbsd x86_64-unknown-illumos wasm32-wasip1)
tools_too=" x86_64-unknown-linux-musl x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-gnu x86_64-unknown-freebsd "

for target in "${everywhere[@]}"; do
    printf '\n-- clippy --target %s\n' "$target"
    if ! rustup target add "$target" >/dev/null 2>&1; then
        skip "rustup could not add the $target target on this machine"
        continue
    fi
    # The drop-in by its path: peer-bench depends on crates.io's quanta too.
    packages=(-p timehands -p timehands-timer -p "path+file://$PWD/compat/quanta")
    if [[ $tools_too == *" $target "* ]]; then
        packages+=(-p timehands-cli -p timehands-ffi -p peer-bench)
    fi
    cargo clippy "${packages[@]}" --all-targets --target "$target" -- -D warnings
done

# Debian packages for the runtimes, when root and apt-get can have them.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    missing=()
    command -v musl-gcc >/dev/null || missing+=(musl-tools)
    command -v wine >/dev/null || missing+=(wine64)
    command -v x86_64-w64-mingw32-gcc >/dev/null || missing+=(gcc-mingw-w64-x86-64)
    command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
    command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
    if [ ${#missing[@]} -gt 0 ]; then
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq "${missing[@]}"; } >/dev/null 2>&1 \
            || echo "apt-get could not install ${missing[*]}"
    fi
fi

printf '\n-- the library'"'"'s tests on musl, natively\n'
if rustup target add x86_64-unknown-linux-musl >/dev/null 2>&1; then
    cargo test -p timehands --target x86_64-unknown-linux-musl
else
    skip "rustup could not add the x86_64-unknown-linux-musl target"
fi

printf '\n-- the library'"'"'s and the quanta drop-in'"'"'s tests on Windows, under Wine\n'
if ! command -v wine >/dev/null || ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
    skip "wine and the MinGW-w64 compiler are not installed (apt: wine64 gcc-mingw-w64-x86-64)"
elif ! rustup target add x86_64-pc-windows-gnu >/dev/null 2>&1; then
    skip "rustup could not add the x86_64-pc-windows-gnu target"
else
    export WINEPREFIX=$PWD/$CARGO_TARGET_DIR/wine WINEDEBUG=-all
    mkdir -p "$WINEPREFIX"
    wineboot --init >/dev/null 2>&1 || true
    x86_64-w64-mingw32-gcc -shared -O2 -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
        scripts/wine/bcryptprimitives.c scripts/wine/bcryptprimitives.def -ladvapi32
    CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine \
        cargo test -p timehands -p "path+file://$PWD/compat/quanta" --target x86_64-pc-windows-gnu
fi

printf '\n-- the library'"'"'s tests on aarch64 Linux, under qemu-user\n'
if ! command -v qemu-aarch64 >/dev/null || ! command -v aarch64-linux-gnu-gcc >/dev/null; then
    skip "qemu-user and the aarch64 cross compiler are not installed (apt: qemu-user gcc-aarch64-linux-gnu)"
elif ! rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1; then
    skip "rustup could not add the aarch64-unknown-linux-gnu target"
else
    runner="qemu-aarch64 -L /usr/aarch64-linux-gnu"
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=$runner \
        TIMEHANDS_TEST_RUNNER=$runner \
        TIMEHANDS_TEST_NO_FORK="qemu-user aborts on a fork in a process with threads" \
        cargo test -p timehands --target aarch64-unknown-linux-gnu
    # qemu-user's CNTVCT_EL0 reads the host's wall clock, so the library
    # refuses it; forced, it is a counter that steps back with Realtime:
    # the leap second (as root) then checks every read through a counter
    # gone back and forward.
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=$runner \
        TIMEHANDS_COUNTER=tsc \
        cargo test -p timehands --target aarch64-unknown-linux-gnu --test leap_second
fi
