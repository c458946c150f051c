#!/usr/bin/env bash
# Runs the official azure-cosmos Python SDK test suite (shipped in its source distribution)
# against strata, the way the SDK's own CI runs it against the emulator: on
# https://localhost:8081/ with the well-known key. strata starts with --gateway-compat, so
# cross-partition queries that need client-side merging answer 400/1004 as the gateway does.
#
#   bash tests/official/run.sh                 # the core files below
#   bash tests/official/run.sh --tiers         # the core files and the further tiers below
#   bash tests/official/run.sh test_crud.py    # chosen files
#   STRATA_STORE=postgres://… bash tests/official/run.sh   # strata on PostgreSQL (an empty database)
#   STRATA_REGIONS="West US,East US,North Europe" bash tests/official/run.sh \
#       -m "cosmosMultiRegion or cosmosCircuitBreaker or cosmosCircuitBreakerMultiRegion" \
#       test_per_partition_circuit_breaker_mm.py
#       # a multi-write account whose regions are reached by host name (--region-hosts:
#       # localhost-westus, ...; each must resolve to 127.0.0.1, e.g. in /etc/hosts), the
#       # certificate trusted for those names, and the SDK's circuit breaker on, as the SDK's
#       # live-account pipeline sets it (AZURE_COSMOS_ENABLE_CIRCUIT_BREAKER); the
#       # availability-strategy, effective-preferred-locations and service-request-retry
#       # files assume two regions ("West US,East US"). STRATA_MULTI_WRITE=false
#       # makes the account single-write, STRATA_PER_PARTITION_FAILOVER=true turns on
#       # per-partition failover (strata reads both variables as its flags);
#       # STRATA_HOST=acct.documents.test reaches the account by that name (and its regions
#       # as acct-westus.documents.test, ...), as the per-partition failover tests need
#   STRATA_AAD=true bash tests/official/run.sh -m semanticReranker \
#       test_semantic_reranker.py test_semantic_reranker_async.py
#       # the suite's AAD mode (COSMOS_TEST_DATA_AUTH_MODE=aad) against https://127.0.0.1:8081/,
#       # with the semantic reranker's inference endpoint on strata (see docs/search.md)
#   STRATA_STORE=postgres://… STRATA_PROCESSES=2 bash tests/official/run.sh
#       # two strata processes over that store behind a round-robin balancer on 8081
#       # (balance.py: each new connection goes to the next process; one serves the store,
#       # the other forwards to it)
#
# Not part of CI: it takes several minutes and some tests need what strata does not offer
# (multi-region accounts, a server slower than localhost for the read-timeout tests).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
work=target/official
version=4.17.1
mkdir -p "$work"

if [ ! -x target/pyenv/bin/python ]; then
    python3 -m venv target/pyenv
fi
target/pyenv/bin/python -m pip install --quiet --disable-pip-version-check \
    azure-cosmos==$version pytest==9.2.0 pytest-asyncio==1.5.0 aiohttp==3.14.5 requests==2.34.2
if [ ! -d "$work/azure_cosmos-$version/tests" ]; then
    target/pyenv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps \
        --no-binary :all: -d "$work" azure-cosmos==$version
    tar -xzf "$work/azure_cosmos-$version.tar.gz" -C "$work"
fi

if (exec 3<>/dev/tcp/127.0.0.1/8081) 2>/dev/null; then
    echo "port 8081 is in use; stop what listens there first" >&2
    exit 1
fi
cargo build --release -q -p strata-server
# In memory, or on PostgreSQL when STRATA_STORE names one (the flag reads the variable).
storage=(--in-memory)
if [ -n "${STRATA_STORE:-}" ]; then
    rm -rf "$work/strata-data"
    storage=(--data-dir "$work/strata-data")
fi
regions=()
if [ -n "${STRATA_REGIONS:-}" ]; then
    regions=(--regions "$STRATA_REGIONS" --region-hosts --cert-dir "$work/certs")
    # Multi-write unless STRATA_MULTI_WRITE=false (the flag's own variable): the
    # per-partition automatic failover tests drive a single-write account.
    if [ "${STRATA_MULTI_WRITE:-true}" != false ]; then
        regions+=(--multi-write)
    fi
    # STRATA_HOST names the account as the service's host names do (its first label the
    # account, e.g. acct.documents.test): the suite's fault-injection predicates look for
    # "documents" in request URLs (predicate_is_write_operation(r, "documents")), which
    # the service's *.documents.azure.com carries and localhost does not.
    account=${STRATA_HOST:-localhost}
    if [ "$account" != localhost ]; then
        regions+=(--public-host "$account")
        export ACCOUNT_HOST="https://$account:8081/"
    fi
    label=${account%%.*}
    rest=${account#"$label"}
    IFS=, read -ra names <<< "$STRATA_REGIONS"
    for host in "$account" $(for name in "${names[@]}"; do
        echo "$label-$(echo "$name" | tr -d '[:space:]' | tr '[:upper:]' '[:lower:]')$rest"; done); do
        if ! getent hosts "$host" > /dev/null; then
            echo "$host does not resolve; add it to /etc/hosts: 127.0.0.1 $host" >&2
            exit 1
        fi
    done
    export REQUESTS_CA_BUNDLE="$root/$work/certs/tls-cert.pem" SSL_CERT_FILE="$root/$work/certs/tls-cert.pem"
    export AZURE_COSMOS_ENABLE_CIRCUIT_BREAKER=true
fi
aad=()
if [ "${STRATA_AAD:-}" = true ]; then
    # The suite's AAD mode: data clients with Entra ID credentials (devtools_testutils'
    # emulator tokens, signed with the account key), on a host other than the default one
    # (the suite gives the default host the key), and the semantic reranker's inference
    # endpoint at strata's own address, whose certificate the sync client must trust.
    if [ ${#regions[@]} -eq 0 ]; then
        aad=(--cert-dir "$work/certs")
    fi
    export ACCOUNT_HOST=https://127.0.0.1:8081/ COSMOS_TEST_DATA_AUTH_MODE=aad \
        AZURE_COSMOS_SEMANTIC_RERANKER_INFERENCE_ENDPOINT=https://127.0.0.1:8081 \
        REQUESTS_CA_BUNDLE="$root/$work/certs/tls-cert.pem" SSL_CERT_FILE="$root/$work/certs/tls-cert.pem"
fi
processes=${STRATA_PROCESSES:-1}
if [ "$processes" -eq 1 ]; then
    ./target/release/strata --tls "${storage[@]}" "${regions[@]}" "${aad[@]}" --gateway-compat --log warn > "$work/strata.log" 2>&1 &
    pids=($!)
else
    if [ -z "${STRATA_STORE:-}" ]; then
        echo "STRATA_PROCESSES needs STRATA_STORE (processes share a PostgreSQL store)" >&2
        exit 1
    fi
    # Each on its own port and data folder, one certificate folder; the first to start serves.
    pids=()
    ports=()
    for i in $(seq "$processes"); do
        port=$((8081 + i))
        rm -rf "$work/strata-data-$i"
        ./target/release/strata --tls --port $port --data-dir "$work/strata-data-$i" \
            --cert-dir "$work/strata-data" --gateway-compat --log warn > "$work/strata-$i.log" 2>&1 &
        pids+=($!)
        ports+=($port)
        for _ in $(seq 50); do
            (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break
            sleep 0.1
        done
    done
    python3 "$root/tests/official/balance.py" 8081 "${ports[@]}" > "$work/balance.log" 2>&1 &
    pids+=($!)
fi
trap 'kill "${pids[@]}" 2>/dev/null || true
      [ -f "$work/balance.log" ] && [ "$processes" -gt 1 ] && sort "$work/balance.log" | uniq -c' EXIT
for _ in $(seq 50); do
    (exec 3<>/dev/tcp/127.0.0.1/8081) 2>/dev/null && break
    sleep 0.1
done

core=(test_crud_database.py test_crud_container.py test_crud_subpartition.py test_crud.py
        test_query.py test_transactional_batch.py test_ttl.py test_change_feed.py test_session.py
        test_headers.py test_aggregate.py test_orderby.py test_multi_orderby.py
        test_query_cross_partition.py test_partition_key.py test_read_items.py test_feed_range.py
        test_query_feed_range.py test_none_options.py test_encoding.py test_auto_scale.py
        test_query_response_headers.py)
# Further tiers the fidelity work is measured on (splits, feed ranges, session tokens).
tiers=(test_query_feed_range_async.py test_query_feed_range_multipartition.py
    test_query_feed_range_multipartition_async.py test_changefeed_partition_key_variation.py
    test_change_feed_all_versions.py test_backwards_compatibility.py test_user_configs.py
    test_partition_split_query.py test_change_feed_split.py test_read_items_partition_split.py
    test_latest_session_token.py test_computed_properties.py test_computed_properties_async.py)
if [ $# -eq 0 ]; then
    files=("${core[@]}")
elif [ "$1" = "--tiers" ]; then
    files=("${core[@]}" "${tiers[@]}")
else
    files=("$@")
fi
cd "$work/azure_cosmos-$version/tests"
PYTHONPATH="$root/tests/official" "$root/target/pyenv/bin/python" -m pytest -q -p no:cacheprovider \
    -W ignore -rf "${files[@]}"
