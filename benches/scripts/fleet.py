#!/usr/bin/env python3
"""The fleet's data path, measured end to end (docs/cluster.md, issue 53).

Starts a three-server JetStream cluster (scripts/cluster), one sensor, one detector and one
console of the given binary on loopback, then:

1. load: drives the sensor with watchpost-loadgen for DURATION seconds (default traffic) and
   waits until every event is stored on the sensor and every record the sensor queued has been
   scored by the detector. Reports events/s stored, events/s through the detector (events of
   the run over the time until the detector's lag is back to zero), and the CPU seconds of each
   process per event (sensor, detector, console, the three servers);
2. alert latency: during the load, every half second three SSH attempts for users that do not
   exist from a new address go to the sensor on their own connection; the console is polled
   every 100 ms for the alert naming that address; p50 and p99 of send-to-visible;
3. outage (OUTAGE_S > 0): at a steady RATE, two of the three servers are stopped for OUTAGE_S
   seconds; reports the spool's peak bytes, the records dropped, and how long the spool took to
   drain once the servers were back (bytes/s and records/s).

Usage: benches/scripts/fleet.py [WATCHPOST_BIN [LOADGEN_BIN]]
Environment: DURATION=20, LOAD_RATE=0 (events/s of the load, 0 = as fast as possible),
PARTITIONS=64, OUTAGE_S=60, RATE=20000 (events/s during the outage), KEEP=1.
Prints a table on stderr and one JSON line on stdout. Compare with benches/scripts/e2e.sh on the
same machine for the single node.
"""
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
WATCHPOST = sys.argv[1] if len(sys.argv) > 1 else os.path.join(TARGET, "release/watchpost")
LOADGEN = sys.argv[2] if len(sys.argv) > 2 else os.path.join(TARGET, "release/watchpost-loadgen")
DURATION = int(os.environ.get("DURATION", "20"))
PARTITIONS = int(os.environ.get("PARTITIONS", "64"))
OUTAGE_S = int(os.environ.get("OUTAGE_S", "60"))
RATE = int(os.environ.get("RATE", "20000"))
LOAD_RATE = int(os.environ.get("LOAD_RATE", "0"))
NATS_BASE = 7222
CLK_TCK = os.sysconf("SC_CLK_TCK")


def say(msg):
    print(f"fleet: {msg}", file=sys.stderr, flush=True)


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return json.load(r)


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(") ", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def wait(what, within, ready):
    t = time.time()
    while not ready():
        if time.time() - t > within:
            raise SystemExit(f"fleet: {what}: not within {within} s")
        time.sleep(0.2)


class Node:
    def __init__(self, work, name, roles, api, syslog=None):
        self.name, self.api = name, api
        inputs = (
            f'[inputs.syslog_tcp]\naddress = "127.0.0.1:{syslog}"\n'
            if syslog
            else "[inputs.syslog_tcp]\nenabled = false\n"
        )
        servers = ", ".join(f'"nats://127.0.0.1:{NATS_BASE + i}"' for i in range(3))
        roles = ", ".join(f'"{r}"' for r in roles)
        config = os.path.join(work, f"{name}.toml")
        with open(config, "w") as f:
            f.write(
                f'detection.sigma_alert_min_level = "low"\n'
                f"detection.alert_group_after_entities = 10000\n"
                f"dashboard_port = {api}\nhealth_port = 0\n"
                f'api_list_rate_limit = "1000000/minute"\n'
                f'[storage]\ndata_dir = "{work}/data-{name}"\n'
                f"[inputs.syslog_udp]\nenabled = false\n[inputs.json_tcp]\nenabled = false\n"
                f"{inputs}"
                f"[cluster]\nservers = [{servers}]\nnode_name = \"{name}\"\nroles = [{roles}]\n"
                f"partitions = {PARTITIONS}\n"
            )
        self.log = os.path.join(work, f"{name}.log")
        log = open(self.log, "w")
        self.proc = subprocess.Popen(
            [WATCHPOST, "run", "--config", config], cwd=work, stdout=log, stderr=log
        )
        t = time.time()
        while not self.answers():
            if self.proc.poll() is not None or time.time() - t > 60:
                raise SystemExit(f"fleet: {name} did not start:\n" + open(self.log).read()[-2000:])
            time.sleep(0.2)

    def answers(self):
        try:
            get(self.api, "/api/v1/cluster")
            return True
        except Exception:
            return False

    def path(self):
        return get(self.api, "/api/v1/cluster")["data_path"]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def nats_pids():
    out = subprocess.run(["pgrep", "-f", "nats-server -c"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def attack(port, address, tag):
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".000Z"
    lines = "".join(
        f"<38>{stamp} edge-01 sshd[7{i}]: Invalid user {tag}{i} from {address} port 6100{i}\n"
        for i in range(3)
    )
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(lines.encode())


def latency_probe(sensor_syslog, console, stop, out):
    """Attacks from new addresses every 0.5 s; the time until the console lists an alert
    naming each address (polled every 0.1 s, so the figures are 0.1 s coarse at most)."""
    sent = {}
    n = 0
    seen = set()
    while not stop.is_set() or (sent and time.time() - max(sent.values()) < 30 and len(seen) < len(sent)):
        if not stop.is_set() and (not sent or time.time() - max(sent.values()) >= 0.5):
            n += 1
            address = f"198.18.{n // 250}.{n % 250 + 1}"
            attack(sensor_syslog, address, f"lat{n}x")
            sent[address] = time.time()
        for address in [a for a in sent if a not in seen]:
            try:
                found = get(console, f"/api/v1/alerts?type=sigma&entity={address}&limit=1")
            except Exception:
                continue
            if found["meta"]["total"] > 0:
                seen.add(address)
                out.append(time.time() - sent[address])
        time.sleep(0.1)
    out.append(("unseen", len(sent) - len(seen)))


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def main():
    for b in (WATCHPOST, LOADGEN):
        if not os.access(b, os.X_OK):
            raise SystemExit(f"fleet: {b} is not an executable; build it first")
    work = tempfile.mkdtemp(prefix="watchpost-fleet.")
    cluster = subprocess.Popen(
        [os.path.join(REPO, "scripts/cluster"), os.path.join(work, "nats")],
        env={**os.environ, "NATS_PORT": str(NATS_BASE)},
        stdout=subprocess.PIPE,
        stderr=open(os.path.join(work, "cluster.log"), "w"),
        text=True,
    )
    cluster.stdout.readline()  # the URL list: the servers are up
    nodes = []
    result = {"partitions": PARTITIONS, "duration_s": DURATION}
    try:
        sensor = Node(work, "sensor", ["sensor"], 8181, syslog=5614)
        detector = Node(work, "detector", ["detector"], 8182)
        console = Node(work, "console", ["console"], 8183)
        nodes = [sensor, detector, console]
        wait("the detector owns every partition", 60,
             lambda: len(detector.path()["partitions"]) == PARTITIONS)
        say(f"fleet up in {work}: 3 servers, sensor, detector, console; {PARTITIONS} partitions")

        # 1 and 2: load, with the latency probe beside it.
        stored0 = get(sensor.api, "/api/v1/stats")["stored_total"]
        cpu0 = {n.name: cpu_s(n.proc.pid) for n in nodes}
        nats0 = sum(cpu_s(p) for p in nats_pids())
        stop, latencies = threading.Event(), []
        probe = threading.Thread(target=latency_probe, args=(5614, console.api, stop, latencies))
        probe.start()
        t0 = time.time()
        gen = subprocess.run(
            [LOADGEN, "--target", "tcp://127.0.0.1:5614", "--format", "syslog",
             "--connections", "2", "--duration", str(DURATION), "--seed", "1",
             "--rate", str(LOAD_RATE)],
            capture_output=True, text=True, check=True)
        stop.set()

        def drained():
            s, d = sensor.path(), detector.path()
            return (s["spool_bytes"] == 0 and s["records_published"] == s["records_queued"]
                    and all(p["pending"] == 0 for p in d["partitions"]))

        last, t_end = None, time.time()
        while True:
            cur = (get(sensor.api, "/api/v1/stats")["stored_total"], detector.path()["records_scored"])
            if cur != last:
                last, t_end = cur, time.time()
            elif drained() and time.time() - t_end > 3:
                break
            if time.time() - t0 > DURATION + 600:
                say("still moving after 10 minutes; reporting so far")
                break
            time.sleep(0.5)
        probe.join()
        events = last[0] - stored0
        wall = t_end - t0
        cpu = {n.name: cpu_s(n.proc.pid) - cpu0[n.name] for n in nodes}
        cpu["nats"] = sum(cpu_s(p) for p in nats_pids()) - nats0
        unseen = [x for x in latencies if isinstance(x, tuple)]
        lat = [x for x in latencies if not isinstance(x, tuple)]
        sp = sensor.path()
        result.update({
            "sent": json.loads(gen.stdout)["sent"],
            "events": events,
            "through_per_s": round(events / wall),
            "records_published": sp["records_published"],
            "records_per_event": round(sp["records_published"] / max(events, 1), 2),
            "records_scored": detector.path()["records_scored"],
            "cpu_us_per_event": {k: round(v / max(events, 1) * 1e6, 2) for k, v in cpu.items()},
            "alert_latency_s": {"p50": percentile(lat, 0.5), "p99": percentile(lat, 0.99),
                                "max": max(lat) if lat else None, "alerts": len(lat),
                                "unseen": unseen[0][1] if unseen else 0},
        })
        say(f"load: {events} events in {wall:.1f} s = {events / wall:,.0f}/s through the detector; "
            f"CPU us/event {result['cpu_us_per_event']}")
        say(f"alert latency: {result['alert_latency_s']}")

        # 3: outage.
        if OUTAGE_S > 0:
            pids = sorted(nats_pids())
            gen = subprocess.Popen(
                [LOADGEN, "--target", "tcp://127.0.0.1:5614", "--format", "syslog",
                 "--connections", "1", "--rate", str(RATE),
                 "--duration", str(OUTAGE_S + 10), "--seed", "2"],
                stdout=subprocess.PIPE, text=True)
            time.sleep(5)
            confs = {}
            for pid in pids[1:]:
                confs[pid] = open(f"/proc/{pid}/cmdline").read().split("\0")[:3]
                os.kill(pid, signal.SIGTERM)
            say(f"outage: two servers stopped for {OUTAGE_S} s at {RATE} events/s")
            peak, t_out = 0, time.time()
            while time.time() - t_out < OUTAGE_S:
                peak = max(peak, sensor.path()["spool_bytes"])
                time.sleep(1)
            held = sensor.path()
            restarted = [subprocess.Popen(c, cwd=os.path.join(work, "nats"),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                         for c in confs.values()]
            t_back = time.time()
            published0 = held["records_published"]
            wait("the spool drained", 600, lambda: sensor.path()["spool_bytes"] == 0)
            drain = time.time() - t_back
            gen.wait()
            after = sensor.path()
            result["outage"] = {
                "seconds": OUTAGE_S, "rate": RATE,
                "spool_peak_bytes": max(peak, held["spool_peak_bytes"]),
                "records_dropped": after["records_dropped"],
                "drain_s": round(drain, 1),
                "drain_records_per_s": round((after["records_published"] - published0) / drain),
            }
            say(f"outage: {result['outage']}")
            for p in restarted:
                p.terminate()
    finally:
        for n in nodes:
            n.stop()
        cluster.send_signal(signal.SIGINT)
        try:
            cluster.wait(20)
        except subprocess.TimeoutExpired:
            cluster.kill()
        if os.environ.get("KEEP") == "1":
            say(f"kept {work}")
        else:
            subprocess.run(["rm", "-rf", work])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
