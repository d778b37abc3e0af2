#!/usr/bin/env bash
# End-to-end throughput of a Watchpost binary: start it with its default configuration in a
# scratch directory, drive it at full speed with watchpost-loadgen, wait until everything it
# accepted is stored, and report sent/accepted/stored rates, CPU and peak memory.
#
# Usage: benches/scripts/e2e.sh [WATCHPOST_BIN [LOADGEN_BIN]]
#
# Binaries default to $CARGO_TARGET_DIR/release (or target/release at the repository root); build
# them first with `cargo build --release -p watchpost -p watchpost-benches`.
#
# Environment:
#   DURATION=20        seconds of load
#   CONNECTIONS=2      load generator connections
#   FORMAT=syslog      syslog (tcp://127.0.0.1:5514) or json (tcp://127.0.0.1:5515)
#   FRAMING=newline    newline or octet
#   RATE=0             events/s over all connections, 0 = as fast as possible
#   SEED=1             load generator seed
#   DISTINCT_SOURCES=0 1: every internet client address is new (each a new UEBA entity)
#   TARGET=...         override the load generator target (e.g. udp://127.0.0.1:5514)
#   API=http://127.0.0.1:8080
#   SETTLE_S=3         stored_total must stay unchanged this long to count as drained
#   DRAIN_TIMEOUT_S=300  give up waiting for the store to catch up after this long
#   KEEP=1             keep the scratch directory (data and service log)
#
# Rates: sent/s is the load generator's own figure over its run; accepted/s and stored/s are
# deltas of the service's received_total and stored_total over one wall window, from the start
# of the load to the last change of stored_total (so slow storage shows up as a lower stored/s
# rather than being cut off); accepted/s while the load ran is also given.
#
# Output: a table on stderr and one JSON line on stdout.

set -euo pipefail

die() {
    printf 'e2e: %s\n' "$*" >&2
    exit 1
}
say() { printf 'e2e: %s\n' "$*" >&2; }

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd -- "$script_dir/../.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$repo_root/target}
# A relative CARGO_TARGET_DIR is relative to where cargo ran, i.e. here.
[[ $target_dir == /* ]] || target_dir=$PWD/$target_dir

watchpost=${1:-${WATCHPOST:-$target_dir/release/watchpost}}
loadgen=${2:-${LOADGEN:-$target_dir/release/watchpost-loadgen}}
duration=${DURATION:-20}
connections=${CONNECTIONS:-2}
format=${FORMAT:-syslog}
framing=${FRAMING:-newline}
rate=${RATE:-0}
seed=${SEED:-1}
api=${API:-http://127.0.0.1:8080}
settle_s=${SETTLE_S:-3}
drain_timeout_s=${DRAIN_TIMEOUT_S:-300}

case $format in
    syslog) default_target=tcp://127.0.0.1:5514 ;;
    json) default_target=tcp://127.0.0.1:5515 ;;
    *) die "FORMAT must be syslog or json, not '$format'" ;;
esac
target=${TARGET:-$default_target}

for bin in "$watchpost" "$loadgen"; do
    [[ -x $bin ]] || die "$bin is not an executable; build it or pass its path"
done
watchpost=$(cd -- "$(dirname -- "$watchpost")" && pwd)/$(basename -- "$watchpost")
loadgen=$(cd -- "$(dirname -- "$loadgen")" && pwd)/$(basename -- "$loadgen")
command -v curl >/dev/null || die "curl is required"
command -v python3 >/dev/null || die "python3 is required"

clk_tck=$(getconf CLK_TCK)
workdir=$(mktemp -d "${TMPDIR:-/tmp}/watchpost-e2e.XXXXXX")
service_pid=

cleanup() {
    local status=$?
    if [[ -n $service_pid ]] && kill -0 "$service_pid" 2>/dev/null; then
        kill -TERM "$service_pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$service_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$service_pid" 2>/dev/null || true
    fi
    if [[ $status -ne 0 && -f $workdir/watchpost.log ]]; then
        say "last lines of the service log:"
        tail -n 20 "$workdir/watchpost.log" >&2 || true
    fi
    if [[ ${KEEP:-0} == 1 || $status -ne 0 ]]; then
        say "scratch directory kept: $workdir"
    else
        rm -rf -- "$workdir"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now() { date +%s.%N; }

# Integer field of a JSON object read from stdin ("" when absent or unparsable).
json_field() {
    python3 -c '
import json, sys
try:
    v = json.load(sys.stdin)[sys.argv[1]]
    print(v)
except Exception:
    pass' "$1"
}

stats() { curl -fsS --max-time 5 "$api/api/v1/stats"; }

# utime+stime of the service in clock ticks (fields 14 and 15 of /proc/PID/stat, counted after
# the parenthesised command name, which may itself contain spaces).
cpu_ticks() {
    local stat rest
    stat=$(<"/proc/$service_pid/stat")
    rest=${stat##*') '}
    # shellcheck disable=SC2086 # word splitting into fields is the point
    set -- $rest
    echo $((${12} + ${13}))
}

vm_hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$service_pid/status"; }

if curl -fsS --max-time 1 "$api/api/v1/health" >/dev/null 2>&1; then
    die "something already answers on $api; stop it first"
fi

say "starting $watchpost run in $workdir"
(cd -- "$workdir" && exec "$watchpost" run) >"$workdir/watchpost.log" 2>&1 &
service_pid=$!

deadline=$((SECONDS + 60))
until curl -fsS --max-time 1 "$api/api/v1/health" >/dev/null 2>&1; do
    kill -0 "$service_pid" 2>/dev/null || die "the service exited during start-up"
    ((SECONDS < deadline)) || die "no healthy answer from $api/api/v1/health within 60 s"
    sleep 0.2
done
say "service healthy (pid $service_pid)"

before=$(stats) || die "GET $api/api/v1/stats failed"
received0=$(json_field received_total <<<"$before")
stored0=$(json_field stored_total <<<"$before")
[[ $received0 =~ ^[0-9]+$ && $stored0 =~ ^[0-9]+$ ]] ||
    die "stats lack integer received_total/stored_total: $before"

say "load: $target format=$format framing=$framing connections=$connections rate=$rate duration=${duration}s"
cpu0=$(cpu_ticks)
t0=$(now)
extra=()
[[ ${DISTINCT_SOURCES:-0} == 1 ]] && extra+=(--distinct-sources)
loadgen_out=$("$loadgen" --target "$target" --format "$format" --framing "$framing" \
    --connections "$connections" --rate "$rate" --duration "$duration" --seed "$seed" "${extra[@]}") ||
    die "the load generator failed"
t1=$(now)
sent=$(json_field sent <<<"$loadgen_out")
sent_rate=$(json_field rate <<<"$loadgen_out")
sent_bytes=$(json_field bytes <<<"$loadgen_out")
[[ $sent =~ ^[0-9]+$ ]] || die "unexpected load generator output: $loadgen_out"

# Drained once stored_total has not moved for SETTLE_S; the window ends when it last moved.
say "load done; waiting for stored_total to settle"
last_stored=-1
received_at_t1=
t_end=$t1
cpu_end=$(cpu_ticks)
stable_since=$SECONDS
drain_deadline=$((SECONDS + drain_timeout_s))
while :; do
    kill -0 "$service_pid" 2>/dev/null || die "the service died while draining"
    cur=$(stats) || die "GET $api/api/v1/stats failed while draining"
    received1=$(json_field received_total <<<"$cur")
    received_at_t1=${received_at_t1:-$received1}
    stored1=$(json_field stored_total <<<"$cur")
    if [[ $stored1 != "$last_stored" ]]; then
        last_stored=$stored1
        t_end=$(now)
        cpu_end=$(cpu_ticks)
        stable_since=$SECONDS
    elif ((SECONDS - stable_since >= settle_s)); then
        break
    fi
    if ((SECONDS >= drain_deadline)); then
        say "stored_total still moving after ${drain_timeout_s}s; reporting what was stored so far"
        break
    fi
    sleep 0.5
done
hwm_kib=$(vm_hwm_kib)

say "stopping the service (SIGTERM)"
kill -TERM "$service_pid"
exit_status=0
wait_deadline=$((SECONDS + 60))
while kill -0 "$service_pid" 2>/dev/null; do
    if ((SECONDS >= wait_deadline)); then
        say "still running 60 s after SIGTERM; killing it"
        kill -KILL "$service_pid" 2>/dev/null || true
        break
    fi
    sleep 0.1
done
wait "$service_pid" || exit_status=$?
service_pid=

python3 - "$sent" "$sent_rate" "$sent_bytes" "$received0" "$received_at_t1" "$received1" \
    "$stored0" "$stored1" \
    "$t0" "$t1" "$t_end" "$cpu0" "$cpu_end" "$clk_tck" "$hwm_kib" "$exit_status" \
    "$format" "$connections" "$duration" <<'PY'
import json, sys
(sent, sent_rate, sent_bytes, r0, r_t1, r1, s0, s1, t0, t1, t_end, c0, c1, tck, hwm, status,
 fmt, conns, duration) = sys.argv[1:]
window = float(t_end) - float(t0)
load_window = float(t1) - float(t0)
accepted_during_load = int(r_t1) - int(r0)
accepted = int(r1) - int(r0)
stored = int(s1) - int(s0)
cpu_s = (int(c1) - int(c0)) / int(tck)
report = {
    "format": fmt,
    "connections": int(conns),
    "duration_s": float(duration),
    "sent": int(sent),
    "sent_bytes": int(sent_bytes),
    "sent_per_s": round(float(sent_rate), 1),
    "accepted": accepted,
    "stored": stored,
    "window_s": round(window, 3),
    "drain_s": round(float(t_end) - float(t1), 3),
    "accepted_per_s": round(accepted / window, 1),
    "load_window_s": round(load_window, 3),
    "accepted_during_load_per_s": round(accepted_during_load / load_window, 1),
    "stored_per_s": round(stored / window, 1),
    "cpu_s": round(cpu_s, 2),
    "cpu_pct": round(100 * cpu_s / window, 1),
    "peak_rss_mib": round(int(hwm) / 1024, 1),
    "exit_status": int(status),
}
rows = [
    ("sent", f"{report['sent']:,}", f"{report['sent_per_s']:,.0f}/s (loadgen)"),
    ("accepted", f"{accepted:,}", f"{report['accepted_per_s']:,.0f}/s over the window"),
    ("", "", f"{report['accepted_during_load_per_s']:,.0f}/s while the load ran"),
    ("stored", f"{stored:,}", f"{report['stored_per_s']:,.0f}/s over the window"),
    ("window", f"{window:.2f} s", f"load start to last stored_total change ({report['drain_s']:.2f} s drain)"),
    ("service CPU", f"{cpu_s:.2f} s", f"{report['cpu_pct']:.0f}% of one core"),
    ("peak RSS", f"{report['peak_rss_mib']:.1f} MiB", "VmHWM"),
    ("exit status", str(report["exit_status"]), "after SIGTERM"),
]
for name, value, note in rows:
    print(f"  {name:<12} {value:>16}  {note}", file=sys.stderr)
print(json.dumps(report))
PY
