#!/usr/bin/env bash
# The quanta drop-in (compat/quanta) under its users' own test suites: each
# crate below, as published on crates.io, with the one `[patch.crates-io]`
# line a program adds, its lock file moved onto the drop-in, and its tests
# run. `cargo tree -i quanta` must show the drop-in, or the run fails.
#
# The crates come through cargo (`cargo fetch` of a throwaway manifest that
# names them), so their checksums are crates.io's. Where crates.io cannot be
# reached, what cargo's cache holds runs offline, and a crate it does not
# hold is skipped with the reason printed; with no cache at all the script
# says so and passes.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { printf 'skipped: %s\n' "$*"; }
root=$PWD
work=${CARGO_TARGET_DIR:-$root/target}/quanta-users
export CARGO_TARGET_DIR=$work/target

# Each user: the crate, its version, its features, and which of its own
# tests run (all of them where nothing is said).
#   governor: quanta is its default clock (and `QuantaUpkeepClock` starts an
#     `Upkeep`); all of its tests and doctests.
#   moka: the cache's clock with feature `quanta`; all of its tests and doctests.
#   metrics-exporter-prometheus: its summaries' tests move a mocked `Clock`
#     under `with_clock`. Without its default features (an HTTP server and
#     TLS), whose doctests need them: its library and integration tests.
users=(
    "governor 0.10.4 |"
    "moka 0.12.16 --features sync,future,quanta |"
    "metrics-exporter-prometheus 0.18.3 --no-default-features | --lib --tests"
)

fetch_dir=$work/fetch
mkdir -p "$fetch_dir/src"
: >"$fetch_dir/src/lib.rs"
{
    printf '[package]\nname = "quanta-users"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
    printf '[workspace]\n\n[dependencies]\n'
    for user in "${users[@]}"; do
        read -r name version _ <<<"$user"
        printf '%s = "=%s"\n' "$name" "$version"
    done
} >"$fetch_dir/Cargo.toml"
offline=
if ! fetched=$(cargo fetch --manifest-path "$fetch_dir/Cargo.toml" 2>&1); then
    if ! cargo fetch --offline --manifest-path "$fetch_dir/Cargo.toml" >/dev/null 2>&1; then
        skip "cargo could not fetch the quanta users from crates.io: $(tail -n 1 <<<"$fetched")"
        exit 0
    fi
    offline=--offline
    echo "crates.io cannot be reached ($(tail -n 1 <<<"$fetched")): what cargo's cache holds runs offline"
fi

cargo_home=${CARGO_HOME:-$HOME/.cargo}
for user in "${users[@]}"; do
    read -r name version features <<<"${user%|*}"
    targets=${user#*|}
    printf '\n-- %s %s with the drop-in: cargo test %s%s\n' "$name" "$version" "$features" "$targets"
    crate_file=$(find "$cargo_home/registry/cache" -name "$name-$version.crate" -print -quit 2>/dev/null)
    if [ -z "$crate_file" ]; then
        skip "$name-$version.crate is not in $cargo_home/registry/cache (a vendored or replaced source?)"
        continue
    fi
    src=$work/src/$name-$version
    rm -rf "$src"
    mkdir -p "$work/src"
    tar -xzf "$crate_file" -C "$work/src"
    # The line a program adds (a TOML literal string: the path as it is);
    # `[workspace]` keeps the crate out of ours.
    printf "\n[patch.crates-io]\nquanta = { path = '%s/compat/quanta' }\n\n[workspace]\n" \
        "$root" >>"$src/Cargo.toml"
    cd "$src"
    # Its lock file moved onto the drop-in, and its dev-dependencies at hand.
    if ! prepared=$(cargo update $offline -p quanta 2>&1 && cargo fetch $offline 2>&1); then
        if [ -n "$offline" ]; then
            skip "$name $version: not all in cargo's cache: $(tail -n 1 <<<"$prepared")"
            cd "$root"
            continue
        fi
        printf '%s\n' "$prepared" >&2
        exit 1
    fi
    # Every edge a test build follows (normal, build and dev): a second quanta
    # anywhere makes `-i quanta` ambiguous, an error.
    # shellcheck disable=SC2086 # the arguments are words
    if ! tree=$(cargo tree $offline --quiet -i quanta $features 2>&1); then
        printf '%s\n' "$tree" >&2
        exit 1
    fi
    tree=${tree%%$'\n'*}
    echo "cargo tree -i quanta: $tree"
    if [[ $tree != *"($root/compat/quanta)"* ]]; then
        echo "error: $name $version does not build on the drop-in" >&2
        exit 1
    fi
    # shellcheck disable=SC2086
    cargo test $offline --quiet $features $targets
    cd "$root"
done
