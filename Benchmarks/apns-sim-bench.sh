#!/usr/bin/env bash
# Benchmark: h2load requests/s against `fanout apns-sim` with a valid JWT (release build).
#
# Usage: Benchmarks/apns-sim-bench.sh [requests] [connections] [streams-per-connection] [server-threads]
# Env:   SCRATCH=/path (swift build scratch dir), SKIP_BUILD=1 (reuse an existing release build)
#
# Prints h2load's summary and one final line: "apns-sim-bench: <requests/s> req/s ...".
# Every request is a valid Live Activity update over TLS + HTTP/2 to one of 1,000 tokens, so the
# simulator runs its full path (JWT check cached per connection, header and payload rules, token
# state, delivery record, device view) for each one.
set -euo pipefail
REQUESTS=${1:-1000000}
CONNECTIONS=${2:-4}
STREAMS=${3:-100}
THREADS=${4:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCRATCH=${SCRATCH:-/tmp/build-apns-sim-bench}
WORK=$(mktemp -d /tmp/apns-sim-bench.XXXXXX)
SIM_PID=""
cleanup() {
    if [ -n "$SIM_PID" ]; then kill "$SIM_PID" 2>/dev/null || true; wait "$SIM_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ -z "${SKIP_BUILD:-}" ]; then
    swift build -c release --package-path "$ROOT" --scratch-path "$SCRATCH" --product fanout >&2
fi
FANOUT="$SCRATCH/release/fanout"
APP=com.example.bench

"$FANOUT" apns-sim --app "$APP" --generate-test-key "$WORK/keys" --threads "$THREADS" --max-connections 1024 > "$WORK/sim.out" 2>&1 &
SIM_PID=$!
for _ in $(seq 1 100); do grep -q "device-url:" "$WORK/sim.out" 2>/dev/null && break; sleep 0.1; done
grep -q "device-url:" "$WORK/sim.out" || { cat "$WORK/sim.out" >&2; echo "apns-sim did not start" >&2; exit 1; }
URL=$(awk '/device-url:/ {print $2}' "$WORK/sim.out")
CONTROL=$(awk '/control-url:/ {print $2}' "$WORK/sim.out")
CA=$(awk '/ca-file:/ {print $2}' "$WORK/sim.out")
JWT=$(cat "$WORK/keys/provider-token.jwt")

printf '{"aps":{"timestamp":%d,"event":"update","content-state":{"progress":0.5,"stage":"rendering"}}}' "$(date +%s)" > "$WORK/body.json"
for i in $(seq 1 1000); do printf '%s/3/device/%064x%096d\n' "$URL" "$i" 0; done > "$WORK/uris.txt"

# Sanity: one request through curl with the simulator's CA (real TLS verification).
STATUS=$(curl -sS --http2 --cacert "$CA" -o /dev/null -w '%{http_code}' -H "authorization: bearer $JWT" \
    -H "apns-push-type: liveactivity" -H "apns-topic: $APP.push-type.liveactivity" --data-binary @"$WORK/body.json" \
    "$(head -1 "$WORK/uris.txt")")
[ "$STATUS" = 200 ] || { echo "sanity request got HTTP $STATUS" >&2; exit 1; }

h2load -n "$REQUESTS" -c "$CONNECTIONS" -m "$STREAMS" -t 1 -i "$WORK/uris.txt" -d "$WORK/body.json" \
    -H "authorization: bearer $JWT" -H "apns-push-type: liveactivity" -H "apns-topic: $APP.push-type.liveactivity" \
    -H "apns-priority: 5" | tee "$WORK/h2load.out"

RATE=$(awk '/^finished in/ {print $4}' "$WORK/h2load.out")
OK=$(awk '/^status codes:/ {print $3}' "$WORK/h2load.out")
ACCEPTED=$(curl -sS "$CONTROL/stats" | sed -n 's/.*"accepted":\([0-9]*\).*/\1/p')
echo "apns-sim-bench: ${RATE} req/s (h2load -c $CONNECTIONS -m $STREAMS, server threads $THREADS, $(nproc) cores); 2xx=$OK; simulator accepted=$ACCEPTED"
