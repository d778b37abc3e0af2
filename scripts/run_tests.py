#!/usr/bin/env python3
"""Runs every test executable of the build twice, today and a week ahead, side by side.

Usage: run_tests.py ARTIFACTS.json
  ARTIFACTS.json: the messages of `cargo test --no-run --message-format=json...`, so the
  executables run are exactly those `cargo test` would run (unit tests of each library and
  binary, and the integration tests), each as cargo runs it: from its package's folder, with
  CARGO_MANIFEST_DIR and the package's name and version set.

Why not two `cargo test` runs: cargo runs one test executable at a time, and most of them
spend their time waiting on the service they start (sockets, RocksDB's fsyncs, timers), so
one run keeps about one core busy: on two cores the week-ahead run fits beside the first. The
few executables that load the machine by themselves (HEAVY: a browser, a language model on the
CPU, the soak) never run beside each other, only beside light ones; one of them timing out
when two ran together is why. The browser test runs alone (ALONE): its waits are for what a
person would see, and it timed out beside light executables too.

The week-ahead run: each executable runs under libfaketime, whose wall clock is seven days on,
as is that of the service and everything else it starts. A test that stamps its data with a
fixed date and counts back from now fails there, not on the first CI run a week after it was
written. Monotonic clocks stay real, so timeouts keep their length.

Output: each executable's output in one piece when it ends (never interleaved), then a
summary: the slowest, and every failure with the command that reruns it. Exit status 1 when
any failed; every executable runs whatever failed before it (cargo's --no-fail-fast).
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

# Executables that load the machine by themselves: never two at once (fleet: eight processes).
HEAVY = {"dashboard", "fleet", "llm", "soak"}
# Executables that run with nothing beside them: the browser test's waits are for what a person
# would see, and a loaded machine made them time out (twice in three side-by-side runs).
ALONE = {"dashboard"}
CLOCKS = [("today", []), ("a week ahead", ["faketime", "-f", "+7d"])]


def executables(messages):
    """The test executables in `messages`, in cargo's order, with how cargo runs each."""
    found = []
    for line in messages:
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if not m.get("profile", {}).get("test"):
            continue
        package = m["package_id"].split("#", 1)[-1]
        name, _, version = package.partition("@")
        target = m["target"]
        found.append({
            "name": target["name"],
            "src": target["src_path"],
            "exe": m["executable"],
            "dir": os.path.dirname(m["manifest_path"]),
            # A package whose folder is its name: the id holds the version only.
            "package": name if version else os.path.basename(os.path.dirname(m["manifest_path"])),
            "version": version or name,
        })
    return found


class Scheduler:
    """Hands out jobs: those that run alone first, back to back while nothing else is running,
    then the heavy ones (the longest), never two heavy at once, beside the light ones."""

    def __init__(self, jobs):
        self.queue = sorted(jobs, key=lambda j: (not j["alone"], not j["heavy"]))
        self.heavy_running = False
        self.alone_running = False
        self.running = 0
        self.lock = threading.Condition()

    def fits(self, job):
        if self.alone_running:
            return False
        if job["alone"]:
            return self.running == 0
        return not (job["heavy"] and self.heavy_running)

    def take(self):
        with self.lock:
            while True:
                if not self.queue:
                    return None
                # A job that must run alone waits for the others to end; nothing starts
                # beside it meanwhile, or it could wait for ever.
                if self.queue[0]["alone"] and not self.fits(self.queue[0]):
                    self.lock.wait()
                    continue
                for i, job in enumerate(self.queue):
                    if self.fits(job):
                        self.heavy_running |= job["heavy"]
                        self.alone_running |= job["alone"]
                        self.running += 1
                        return self.queue.pop(i)
                self.lock.wait()

    def done(self, job):
        with self.lock:
            self.running -= 1
            if job["heavy"]:
                self.heavy_running = False
            if job["alone"]:
                self.alone_running = False
            self.lock.notify_all()


def run(job, out_lock, results):
    exe = job["exe"]
    env = dict(os.environ)
    env.update({
        "CARGO_MANIFEST_DIR": job["dir"],
        "CARGO_PKG_NAME": job["package"],
        "CARGO_PKG_VERSION": job["version"],
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    })
    command = job["prefix"] + [exe]
    start = time.monotonic()
    with tempfile.TemporaryFile() as log:
        try:
            code = subprocess.call(command, cwd=job["dir"], env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
        except OSError as e:
            # A missing faketime (set-up not run) or executable is a failure, never a job
            # that silently did not run.
            log.write(f"run_tests: cannot start {command[0]}: {e}\n".encode())
            code = 127
        log.seek(0)
        output = log.read().decode("utf-8", "replace")
    took = time.monotonic() - start
    rel = os.path.relpath(job["src"], os.getcwd())
    with out_lock:
        sys.stdout.write(f"     Running {rel} ({exe}), {job['clock']}, {took:.1f} s\n{output}\n")
        sys.stdout.flush()
        results.append((job, code, took))


def main():
    with open(sys.argv[1]) as f:
        found = executables(f)
    if not found:
        sys.exit("run_tests: no test executables in the build's messages")
    jobs = [
        dict(e, clock=clock, prefix=prefix, heavy=e["name"] in HEAVY, alone=e["name"] in ALONE)
        for clock, prefix in CLOCKS
        for e in found
    ]
    scheduler = Scheduler(jobs)
    out_lock = threading.Lock()
    results = []

    def worker():
        while (job := scheduler.take()) is not None:
            try:
                run(job, out_lock, results)
            finally:
                scheduler.done(job)

    slots = max(2, os.cpu_count() or 2)
    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(slots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    wall = time.monotonic() - start
    busy = sum(took for _, _, took in results)
    print(f"{len(results)} test executables ({len(found)} twice) in {wall:.0f} s "
          f"on {slots} slots ({busy:.0f} s of executable time)")
    for job, _, took in sorted(results, key=lambda r: -r[2])[:8]:
        print(f"  {took:6.1f} s  {job['name']}, {job['clock']}")
    failed = [(job, code) for job, code, _ in results if code != 0]
    for job, code in failed:
        rerun = " ".join(job["prefix"] + [job["exe"]])
        if job["prefix"]:
            rerun = "FAKETIME_DONT_FAKE_MONOTONIC=1 " + rerun
        print(f"FAILED ({code}): {job['name']}, {job['clock']}: cd {job['dir']} && {rerun}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
