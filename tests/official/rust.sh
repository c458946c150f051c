#!/usr/bin/env bash
# Runs the official Rust SDK's emulator test suite (`azure_data_cosmos` 1.0.0 from crates.io,
# tests/emulator_tests: the `emulator` test category) against strata, with the SDK's defaults:
# Cosmos binary JSON on the wire. strata listens where the SDK's emulator tests look for the
# emulator, https://127.0.0.1:8081/, with the well-known key and --gateway-compat.
#
#   bash tests/official/rust.sh                   # the emulator suite
#   bash tests/official/rust.sh --binary-suite    # also the live binary-encoding tests
#   bash tests/official/rust.sh cosmos_items      # only tests whose names match a filter
#   STRATA_BIN=target/debug/strata bash tests/official/rust.sh   # a strata already built
#
# The first run downloads the crate and builds its tests (several minutes on 2 cores); later
# runs reuse target/official-rust. It prints the test harness's own summary and a line
# `rust-sdk: N passed, N failed`, and exits non-zero if any test failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
version=1.0.0
work=$root/target/official-rust
src=$work/azure_data_cosmos-$version
mkdir -p "$work"

binary_suite=false
filter=()
for arg in "$@"; do
    case "$arg" in
        --binary-suite) binary_suite=true ;;
        *) filter+=("$arg") ;;
    esac
done

# The crate's source, tests included, as crates.io publishes it: cargo fetches it for a
# throwaway package that depends on it, and cargo metadata says where it landed.
if [ ! -f "$src/Cargo.toml" ]; then
    mkdir -p "$work/fetch/src"
    cat > "$work/fetch/Cargo.toml" <<EOF
[package]
name = "fetch-azure-data-cosmos"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
azure_data_cosmos = "=$version"

[workspace]
EOF
    echo "" > "$work/fetch/src/lib.rs"
    (cd "$work/fetch" && cargo fetch -q)
    dir=$(cd "$work/fetch" && cargo metadata --format-version 1 | python3 -c "
import json, os, sys
m = json.load(sys.stdin)
print(next(os.path.dirname(p['manifest_path']) for p in m['packages']
           if p['name'] == 'azure_data_cosmos' and p['version'] == '$version'))")
    rm -rf "$src.tmp" && cp -r "$dir" "$src.tmp"
    # Built on its own, not as a member of strata's workspace above it.
    printf '\n[workspace]\n' >> "$src.tmp/Cargo.toml"
    mv "$src.tmp" "$src"
fi

features=key_auth,control_plane,fault_injection
# Without debug info or incremental caches, which nobody uses here: these are two full builds
# of the SDK and its dependencies (aws-lc among them), and a runner's disk may be small.
build() { # category, test target (a target folder per category: RUSTFLAGS differ)
    (cd "$src" && CARGO_TARGET_DIR="$work/target-$1" RUSTFLAGS="--cfg test_category=\"$1\"" \
        CARGO_PROFILE_DEV_DEBUG=false CARGO_PROFILE_TEST_DEBUG=false CARGO_INCREMENTAL=0 \
        cargo test --locked --features $features --test "$2" --no-run --message-format json -q) |
        python3 -c "
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get('reason') == 'compiler-artifact' and m.get('executable') and m['target']['name'] == '$2':
        print(m['executable'])" | tail -n 1
}
echo "building the azure_data_cosmos $version emulator tests..." >&2
suite=$(build emulator emulator)
if $binary_suite; then
    binsuite=$(build binary_encoding binary_encoding)
fi

if (exec 3<>/dev/tcp/127.0.0.1/8081) 2>/dev/null; then
    echo "port 8081 is in use; stop what listens there first" >&2
    exit 1
fi
# STRATA_BIN: a strata binary already built (CI passes its debug build); else a release one.
if [ -z "${STRATA_BIN:-}" ]; then
    cargo build --release -q -p strata-server
    STRATA_BIN=./target/release/strata
fi
"$STRATA_BIN" --tls --in-memory --gateway-compat --cert-dir "$work/cert" --log warn \
    > "$work/strata.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8081) 2>/dev/null && break; sleep 0.1; done

export AZURE_COSMOS_CONNECTION_STRING="AccountEndpoint=https://127.0.0.1:8081/;AccountKey=C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==;"
export AZURE_COSMOS_TEST_MODE=required
export AZURE_COSMOS_ALLOW_INVALID_CERT=true
# Most tests accept the self-signed certificate through that switch; a few build clients of
# their own that verify it, so, as the official emulator's CI imports its certificate, the
# SDK's TLS stack trusts strata's — set up by `strata trust`, as the README tells users: a
# bundle of the system's roots plus strata's, and SSL_CERT_FILE naming it (which
# rustls-native-certs reads), the system store untouched.
"$STRATA_BIN" ready --endpoint https://127.0.0.1:8081/ --wait 30 > /dev/null
eval "$("$STRATA_BIN" trust --endpoint https://127.0.0.1:8081/ --dir "$work/trust")"
export RUST_LOG=${RUST_LOG:-off}

status=0
rm -f "$work"/*.results
run() { # executable, log name, then harness arguments
    local exe=$1 name=$2
    shift 2
    # The harness's own summary line ("test result: ..."), and each failure, land in the log.
    (cd "$src" && "$exe" "$@") > "$work/$name.log" 2>&1 || status=1
    grep -E '^test .* (FAILED|ok|ignored)$' "$work/$name.log" | sort > "$work/$name.results" || true
    grep -E '^test result:' "$work/$name.log" || true
}
# The proxy tests point the process-wide HTTPS_PROXY at listeners of their own, so two of
# them running at once can take each other's connection: they run alone, after the rest.
if [ ${#filter[@]} -eq 0 ]; then
    run "$suite" emulator --test-threads 4 --skip emulator_tests::cosmos_proxy
    run "$suite" emulator-proxy --test-threads 1 emulator_tests::cosmos_proxy
else
    run "$suite" emulator --test-threads 4 "${filter[@]}"
fi
if $binary_suite; then
    run "$binsuite" binary_encoding --test-threads 4
fi
passed=$(cat "$work"/*.results | grep -c ' ok$' || true)
failed=$(cat "$work"/*.results | grep -c ' FAILED$' || true)
grep ' FAILED$' "$work"/*.results | sed 's/^.*test /failed: /; s/ \.\.\. FAILED$//' || true
echo "rust-sdk: $passed passed, $failed failed"
exit $status
