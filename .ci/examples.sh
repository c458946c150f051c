#!/usr/bin/env bash
# Runs every example against a freshly started strata and checks that its output is sane.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p strata-server -p strata-examples --examples --bins
port=18181
# A process already on the port would answer in the examples' server's place (and without
# its flags): say so rather than fail on an example's output.
taken() { (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if taken "$port"; then echo "examples: port $port is taken by another process; stop it first"; exit 1; fi
./target/debug/strata --in-memory --port "$port" --enforce-throughput --log warn &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
# The examples find the server by its port, as a user who started it with STRATA_PORT would.
export STRATA_PORT="$port"

check() { # name, then patterns the output must contain
  local name=$1; shift
  local out
  out=$(cargo run -q -p strata-examples --example "$name" 2>&1)
  echo "--- example $name"; echo "$out" | tail -12
  for p in "$@"; do
    grep -qE "$p" <<<"$out" || { echo "example $name: output lacks /$p/"; exit 1; }
  done
}
check quickstart 'under 100: \["Lamp", "Helmet"\]'
check multi_tenant 'into 4 physical partitions' 'TenantId \+ UserId \+ SessionId +single' \
  'TenantId \+ UserId +targeted' '^TenantId +targeted' 'UserId alone +fanout +0,1,2,3' 'SessionId alone +fanout +0,1,2,3'
check search "nearest to 'something to ride': \\[\"2\", \"1\"\\]" "ranked for 'bright tea': \\[\"5\"" "hybrid for 'a cup of tea': \\[\"4\""
check materialized_view 'acme +events=21 +amount=2100' 'initech +events=18'
check retry_on_throttle '300 writes' 'retrying request'
check change_feed_processor 'feed ranges: 1 before the split, [3-9] after' 'changes handled: 200 of 200, 0 more than once' \
  'worker-1 handled [1-9]' 'worker-2 handled [1-9]'
echo "examples: 6 passed, 0 failed"

# The README's Python quickstart exactly as written (its port aside), twice, across a restart
# of a durable server: the second run meets the first one's data and must still pass.
py=target/pyenv/bin/python
[ -x "$py" ] || { echo "quickstart: needs $py with azure-cosmos (made by .ci/run)"; exit 1; }
qport=18183
if taken "$qport"; then echo "quickstart: port $qport is taken by another process; stop it first"; exit 1; fi
qdata=$(mktemp -d)
quickstart=$(awk '/^## Quickstart with the official Python SDK/{f=1} f&&/^```python/{p=1;next} p&&/^```/{exit} p' README.md)
grep -q "127.0.0.1:8081" <<<"$quickstart" || { echo "quickstart: block not found in README.md"; exit 1; }
for run in 1 2; do
  ./target/debug/strata --port "$qport" --data-dir "$qdata" --log warn > /dev/null &
  q=$!
  for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$qport) 2>/dev/null && break; sleep 0.1; done
  out=$(sed "s#127.0.0.1:8081#127.0.0.1:$qport#" <<<"$quickstart" | "$py" - 2>&1) || {
    echo "quickstart run $run failed:"; echo "$out"; kill $q; exit 1; }
  kill $q; wait $q || true
  grep -q "'TenantId': 'contoso'" <<<"$out" || { echo "quickstart run $run: $out"; exit 1; }
done
rm -rf "$qdata"
echo "quickstart: ran twice across a restart"
