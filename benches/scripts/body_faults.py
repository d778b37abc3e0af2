#!/usr/bin/env python3
"""Slow, stalled and dense request bodies from many loopback addresses against one service, while
a well-behaved client keeps ingesting (issue 51's "done when").

Starts WATCHPOST_BIN on its embedded defaults (only the API port set, and the TCP and UDP inputs
off) in a scratch directory and, for SECONDS, runs from each of ADDRESSES addresses 127.0.0.10, .11, ...:

- stalled ingest: POST /api/v1/ingest declaring 16,000,000 bytes, 8 MB sent, then silence;
- trickling ingest: a declared 100 KB ingest body sent at 200 bytes per second;
- stalled rule upload: POST /api/v1/sigma/rules declaring 1 MiB, 900 KB sent, then silence;
- oversized rule upload: POST /api/v1/sigma/rules declaring 16,000,000 bytes (the issue's case);
- dense ingest: 16.5 MB of `[{},{},...]` (5.5 million empty events), sent whole;
- dense OTLP: one ExportLogsServiceRequest of 499,000 empty log records (about 1 MB);

each in a loop (a new connection when the last is answered or closed, after Retry-After when
there is one). Meanwhile 127.0.0.1 posts ten events to /api/v1/ingest every 100 ms and the
service's resident memory (VmRSS) is sampled every 250 ms against `memory.budget_bytes` of
/api/v1/stats.

Usage: python3 benches/scripts/body_faults.py [WATCHPOST_BIN] [SECONDS] [ADDRESSES]
Defaults: $CARGO_TARGET_DIR/release/watchpost (or target/release/watchpost), 90 s, 32 addresses.
Output: a table on stderr, one JSON line on stdout.
"""

import asyncio
import collections
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
binary = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else os.path.join(target, "release", "watchpost")
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 90
addresses = int(sys.argv[3]) if len(sys.argv) > 3 else 32


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(number, payload):
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


# ExportLogsServiceRequest{resource_logs: [ResourceLogs{scope_logs: [ScopeLogs{log_records:
# 499,000 x LogRecord{}}]}]}, encoded by hand (no protobuf package needed).
OTLP_DENSE = field(1, field(2, b"\x12\x00" * 499_000))
DENSE_INGEST = b"[" + b",".join([b"{}"] * 5_500_000) + b"]"
RULE_PART = b"title: x\n" + b"#" * (900_000 - 9)

counts = collections.defaultdict(collections.Counter)  # scenario -> status -> n
answered_after = collections.defaultdict(list)  # scenario -> seconds to answer
stop_at = 0.0


async def one_request(ip, port, scenario, head, body, send_now, then_rate=None):
    """Sends `head` and the first `send_now` bytes of `body`, then (with `then_rate`) the rest at
    that many bytes per second, or nothing more; returns (status, retry-after)."""
    started = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, local_addr=(ip, 0)), 10
        )
    except (OSError, asyncio.TimeoutError):
        counts[scenario]["connect_failed"] += 1
        return None, 1

    async def send():
        writer.write(head)
        writer.write(body[:send_now])
        await writer.drain()
        if then_rate:
            at = send_now
            while at < len(body):
                await asyncio.sleep(1)
                writer.write(body[at : at + then_rate])
                await writer.drain()
                at += then_rate

    sender = asyncio.ensure_future(send())
    status, retry = None, 0
    try:
        line = await asyncio.wait_for(reader.readline(), max(1, stop_at - time.monotonic() + 60))
        if line.startswith(b"HTTP/1.1 "):
            status = int(line[9:12])
            while True:
                h = await asyncio.wait_for(reader.readline(), 10)
                if h in (b"\r\n", b""):
                    break
                if h.lower().startswith(b"retry-after:"):
                    retry = int(h.split(b":")[1].strip() or 0)
    except (OSError, asyncio.TimeoutError, ValueError):
        pass
    sender.cancel()
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    counts[scenario][status or "closed"] += 1
    answered_after[scenario].append(time.monotonic() - started)
    return status, retry


def post_head(path, port, length, content_type="application/json"):
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


async def loop(ip, port, scenario, make):
    while time.monotonic() < stop_at:
        head, body, send_now, rate = make(port)
        status, retry = await one_request(ip, port, scenario, head, body, send_now, rate)
        await asyncio.sleep(max(retry, 0.2 if status is None or status >= 400 else 0))


SCENARIOS = {
    "stalled ingest 16 MB": lambda p: (
        post_head("/api/v1/ingest", p, 16_000_000),
        b"[" + b" " * 8_000_000,
        8_000_001,
        None,
    ),
    "trickling ingest": lambda p: (
        post_head("/api/v1/ingest", p, 100_000),
        b"[" + b" " * 99_998 + b"]",
        10,
        200,
    ),
    "stalled rule upload": lambda p: (
        post_head("/api/v1/sigma/rules", p, 1 << 20, "application/yaml"),
        RULE_PART,
        len(RULE_PART),
        None,
    ),
    "rule upload 16 MB": lambda p: (
        post_head("/api/v1/sigma/rules", p, 16_000_000, "application/yaml"),
        b"",
        0,
        None,
    ),
    "dense ingest": lambda p: (
        post_head("/api/v1/ingest", p, len(DENSE_INGEST)),
        DENSE_INGEST,
        len(DENSE_INGEST),
        None,
    ),
    "dense otlp": lambda p: (
        post_head("/v1/logs", p, len(OTLP_DENSE), "application/x-protobuf"),
        OTLP_DENSE,
        len(OTLP_DENSE),
        None,
    ),
}


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    global stop_at
    work = tempfile.mkdtemp(prefix="watchpost-body-faults-")
    port = free_port()
    with open(os.path.join(work, "watchpost.toml"), "w") as f:
        # The TCP/UDP inputs are off so that another service on their default ports does not
        # stop this one; they play no part here.
        f.write(
            f"dashboard_port = {port}\nhealth_port = 0\n"
            + "".join(f"[inputs.{i}]\nenabled = false\n" for i in ("syslog_udp", "syslog_tcp", "json_tcp"))
        )
    log = open(os.path.join(work, "service.log"), "w")
    service = subprocess.Popen(
        [binary, "run", "--config", "watchpost.toml"], cwd=work, stdout=log, stderr=log
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        api = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        api.request("GET", "/api/v1/stats")
        budget = json.loads(api.getresponse().read())["memory"]["budget_bytes"]
        idle_rss = rss_bytes(service.pid)

        rss = []
        legit = collections.Counter()
        legit_ms = []
        stop_at = time.monotonic() + seconds
        done = threading.Event()

        def sample():
            while not done.is_set():
                rss.append(rss_bytes(service.pid))
                time.sleep(0.25)

        def well_behaved():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            body = json.dumps(
                [{"message": f"well-behaved {i}", "host.name": "good"} for i in range(10)]
            )
            while not done.is_set():
                t = time.monotonic()
                try:
                    c.request("POST", "/api/v1/ingest", body, {"Content-Type": "application/json"})
                    r = c.getresponse()
                    r.read()
                    legit[r.status] += 1
                    legit_ms.append((time.monotonic() - t) * 1000)
                except (OSError, http.client.HTTPException):
                    legit["error"] += 1
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                time.sleep(0.1)

        threads = [threading.Thread(target=sample), threading.Thread(target=well_behaved)]
        for t in threads:
            t.start()

        async def attack():
            tasks = []
            for a in range(addresses):
                ip = f"127.0.0.{10 + a}"
                for scenario, make in SCENARIOS.items():
                    copies = 2 if scenario.startswith("stalled ingest") else 1
                    for _ in range(copies):
                        tasks.append(loop(ip, port, scenario, make))
            await asyncio.gather(*tasks)

        asyncio.run(attack())
        # Everything has been answered: give memory a moment and sample once more.
        time.sleep(5)
        after_rss = rss_bytes(service.pid)
        done.set()
        for t in threads:
            t.join()
        api = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        api.request("GET", "/api/v1/stats")
        stats = json.loads(api.getresponse().read())
        alive = service.poll() is None
    finally:
        service.terminate()
        try:
            service.wait(40)
        except subprocess.TimeoutExpired:
            service.kill()
        log.close()
    legit_ms.sort()
    pct = lambda q: round(legit_ms[min(len(legit_ms) - 1, int(q * len(legit_ms)))], 1)
    out = {
        "seconds": seconds,
        "addresses": addresses,
        "budget_bytes": budget,
        "idle_rss_bytes": idle_rss,
        "peak_rss_bytes": max(rss),
        "rss_after_bytes": after_rss,
        "well_behaved": dict(legit),
        "well_behaved_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": round(legit_ms[-1], 1)},
        "attacks": {k: dict(v) for k, v in counts.items()},
        "attack_answer_max_s": {k: round(max(v), 1) for k, v in answered_after.items()},
        "bodies": stats["api"]["bodies"],
        "service_alive": alive,
    }
    mib = lambda b: f"{b / 2**20:,.0f} MiB"
    print(f"budget {mib(budget)}  idle {mib(idle_rss)}  peak {mib(max(rss))}  "
          f"5 s after {mib(after_rss)}", file=sys.stderr)
    print(f"well-behaved ingest: {dict(legit)}  p50 {pct(0.5)} ms  p99 {pct(0.99)} ms  "
          f"max {legit_ms[-1]:.0f} ms", file=sys.stderr)
    for k, v in counts.items():
        print(f"  {k:24} {dict(v)}  slowest answer {max(answered_after[k]):.1f} s", file=sys.stderr)
    print(f"/stats api.bodies: {stats['api']['bodies']}", file=sys.stderr)
    print(json.dumps(out))
    if os.environ.get("KEEP") != "1":
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work}", file=sys.stderr)


main()
