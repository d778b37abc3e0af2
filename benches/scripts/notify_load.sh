#!/usr/bin/env bash
# Notifications under load: the service with one webhook channel (every alert, no digest) and
# the load generator at RATE events/s. Phase 1: LOAD_S seconds with the receiver up, then the
# latency from each alert's triggering event to its arrival at the receiver (p50, p99). Phase 2:
# the receiver down for OUTAGE_S seconds while the load goes on, then up again: every alert
# queued during the outage must arrive (sent = received, no duplicates).
#
# Usage: benches/scripts/notify_load.sh [WATCHPOST_BIN [LOADGEN_BIN]]
# Environment: RATE=100000 LOAD_S=30 OUTAGE_S=60 KEEP=1 (keep the scratch directory)
set -euo pipefail
script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
target_dir=${CARGO_TARGET_DIR:-$script_dir/../../target}
watchpost=${1:-$target_dir/release/watchpost}
loadgen=${2:-$target_dir/release/watchpost-loadgen}
rate=${RATE:-100000}
load_s=${LOAD_S:-30}
outage_s=${OUTAGE_S:-60}
work=$(mktemp -d)
sink_port=18090
api=http://127.0.0.1:18080
cleanup() {
    kill "${sink_pid:-}" "${svc_pid:-}" 2>/dev/null || true
    wait 2>/dev/null || true
    [[ ${KEEP:-0} == 1 ]] && echo "notify_load: kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
# Short cooldowns: repeats more than 10 s apart raise new alerts, so the outage's traffic
# (the same rules firing) gives alerts of its own to queue.
cat > "$work/watchpost.toml" <<TOML
dashboard_port = 18080
health_port = 0
[detection]
ml_alert_cooldown_seconds = 10
sigma_alert_cooldown_seconds = 10
correlation_alert_cooldown_seconds = 10
ioc_alert_cooldown_seconds = 10
[[notifications]]
name = "bench"
kind = "webhook"
url = "http://127.0.0.1:$sink_port/hook"
min_severity = 0
rate_limit = "100000/minute"
max_backoff_s = 5.0
TOML
start_sink() {
    python3 "$script_dir/webhook_sink.py" "$sink_port" "$work/received.jsonl" &
    sink_pid=$!
}
start_sink
(cd "$work" && exec "$watchpost" run --config watchpost.toml > service.log 2>&1) &
svc_pid=$!
for _ in $(seq 100); do curl -sf "$api/api/v1/health" > /dev/null 2>&1 && break; sleep 0.1; done
stats() { curl -sf "$api/api/v1/stats"; }
channel() { stats | python3 -c "import json,sys; c=json.load(sys.stdin)['notifications']['channels'][0]; print(c['$1'])"; }

echo "notify_load: phase 1, $load_s s at $rate events/s, receiver up" >&2
"$loadgen" --rate "$rate" --duration "$load_s" --connections 2 --quiet > "$work/load1.json"
sleep 5
python3 - "$work/received.jsonl" <<'PY'
import json, sys
lat = sorted((m["arrived_ns"] - a[1]) / 1e6 for m in map(json.loads, open(sys.argv[1])) for a in m["alerts"] if m["kind"] == "alert")
if lat:
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
    print(f"notify_load: {len(lat)} alerts delivered; event to receiver p50 {q(0.5):.0f} ms, p99 {q(0.99):.0f} ms, max {lat[-1]:.0f} ms", file=sys.stderr)
PY
sent1=$(stats | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['stored_total'])")
echo "notify_load: stored $sent1 events; channel messages $(channel messages), failures $(channel failures)" >&2

echo "notify_load: phase 2, receiver down for $outage_s s under the same load" >&2
kill "$sink_pid"; wait "$sink_pid" 2>/dev/null || true
# Another seed, and every client address new: traffic that raises alerts of its own rather than
# repeats that fold into phase 1's.
"$loadgen" --rate "$rate" --duration "$outage_s" --connections 2 --seed 2 --distinct-sources \
    --quiet > "$work/load2.json"
echo "notify_load: pending $(channel pending), failures $(channel failures), status $(channel status)" >&2
start_sink
for _ in $(seq 600); do
    [[ $(channel pending) == 0 ]] && break
    sleep 0.5
done
sleep 2
python3 - "$work/received.jsonl" "$api" <<'PY'
import json, sys, urllib.request
msgs = [json.loads(l) for l in open(sys.argv[1])]
ids = [a[0] for m in msgs for a in m["alerts"]]
stats = json.load(urllib.request.urlopen(sys.argv[2] + "/api/v1/stats"))
c = stats["notifications"]["channels"][0]
raised = sum(stats["detection"]["alerts"].values()) if isinstance(stats["detection"]["alerts"], dict) else sum(stats["detection"]["alerts"])
print(f"notify_load: alerts raised {raised}, queued {c['queued']}, received {len(ids)} "
      f"({len(set(ids))} distinct) in {len(msgs)} messages; digests {c['digests']}; "
      f"pending {c['pending']}, dropped {c['dropped']}, failures {c['failures']}", file=sys.stderr)
print(json.dumps({"raised": raised, "queued": c["queued"], "received": len(ids), "distinct": len(set(ids)),
                  "messages": len(msgs), "pending": c["pending"], "dropped": c["dropped"], "failures": c["failures"]}))
PY
