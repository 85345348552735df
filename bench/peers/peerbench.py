"""Shared harness for the peer systems `batonctl bench --peers` runs beside Baton.

Every peer lives in `bench/peers/<name>/` with an executable `run` that installs what it
needs into a cache directory (never into the repository), starts the system, runs one
workload and prints exactly one JSON line on stdout (see `emit`). Progress goes to stderr.

    run --workload W1 --count N --warmup N
    run --workload W2 --rate R --secs S --drain-secs D --warmup N

A step is one task scheduled, handed to a worker, completed and durably recorded. W1 is one
task per workflow, run one workflow at a time; W2 is a fork of three one-task branches and a
join, started open-loop at a constant rate. Latency is measured from the start request (W1)
or from the scheduled arrival (W2, so a backlog shows up: no coordinated omission) to the
moment the client sees the workflow's result.
"""

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def cache_dir(name):
    """Where a peer keeps its installs (venvs, npm packages, data directories)."""
    root = os.environ.get("BATON_PEERS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "baton-bench-peers"
    )
    path = os.path.join(root, name)
    os.makedirs(path, exist_ok=True)
    return path


def progress(line):
    print(f".. {line}", file=sys.stderr, flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--workload", choices=["W1", "W2"], required=True)
    p.add_argument("--count", type=int, default=200, help="W1: workflows measured")
    p.add_argument("--warmup", type=int, default=20, help="workflows run before measuring")
    p.add_argument("--rate", type=float, default=50.0, help="W2: arrivals per second")
    p.add_argument("--secs", type=float, default=10.0, help="W2: seconds of arrivals")
    p.add_argument("--drain-secs", type=float, default=30.0,
                   help="W2: how long to wait for stragglers after the last arrival")
    return p.parse_args(argv)


class Outcome:
    def __init__(self):
        self.started = 0
        self.completed = 0
        self.failed = 0
        self.latencies_ms = []
        self.elapsed_s = 0.0
        self.lock = threading.Lock()

    def record(self, ok, latency_ms):
        with self.lock:
            if ok:
                self.completed += 1
                self.latencies_ms.append(latency_ms)
            else:
                self.failed += 1

    def percentile(self, q):
        xs = sorted(self.latencies_ms)
        if not xs:
            return None
        i = min(len(xs) - 1, max(0, int(round(q * len(xs) + 0.5)) - 1))
        return xs[i]


def closed_loop(run_one, count):
    """Runs `count` workflows one after another. `run_one()` starts one workflow, waits for
    its result and returns True when it completed as expected."""
    out = Outcome()
    t0 = time.perf_counter()
    for _ in range(count):
        start = time.perf_counter()
        out.started += 1
        try:
            ok = bool(run_one())
        except Exception as e:  # a failed workflow, not a failed run
            progress(f"workflow failed: {e!r}")
            ok = False
        out.record(ok, (time.perf_counter() - start) * 1000.0)
    out.elapsed_s = time.perf_counter() - t0
    return out


def open_loop(run_one, rate, secs, drain_secs, max_in_flight=512):
    """Starts a workflow every 1/rate seconds for `secs` seconds, whatever the system's
    pace; each latency counts from the scheduled arrival. Workflows not finished
    `drain_secs` after the last arrival are lost."""
    out = Outcome()
    total = int(rate * secs)
    pool = ThreadPoolExecutor(max_workers=max_in_flight)
    last_done = [0.0]
    t0 = time.perf_counter()

    def one(scheduled):
        try:
            ok = bool(run_one())
        except Exception as e:
            progress(f"workflow failed: {e!r}")
            ok = False
        now = time.perf_counter()
        out.record(ok, (now - scheduled) * 1000.0)
        with out.lock:
            last_done[0] = max(last_done[0], now)

    futures = []
    next_report = t0 + 5.0
    for i in range(total):
        scheduled = t0 + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        out.started += 1
        futures.append(pool.submit(one, scheduled))
        if time.perf_counter() >= next_report:
            next_report += 5.0
            progress(f"{out.started} started, {out.completed} completed")
    deadline = time.perf_counter() + drain_secs
    for f in futures:
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        try:
            f.result(timeout=left)
        except Exception:
            break
    pool.shutdown(wait=False, cancel_futures=True)
    with out.lock:
        out.elapsed_s = max(last_done[0] - t0, 1e-9)
    return out


def _proc_tree(roots):
    """The pids of `roots` and all their descendants (from /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    seen, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo.extend(children.get(pid, []))
    return seen


def cpu_ms(roots):
    """User + system CPU time (ms) of `roots` and their live descendants, children reaped by
    them included."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in _proc_tree(roots):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is state (field 3); utime, stime, cutime, cstime are fields 14..17
        total += sum(int(x) for x in fields[11:15])
    return total * 1000 // ticks


def rss_mib(roots):
    """Memory of `roots` and their descendants as PSS (proportional set size): pages shared
    between processes (PostgreSQL's shared buffers, prefork workers) count once in total rather
    than once per process, as summing RSS would."""
    total = 0
    for pid in _proc_tree(roots):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
    return total / 1024.0


def measure(args, run_one, pids, steps_per_workflow):
    """Warms up, runs the workload named in `args` with `run_one`, and returns the result
    fields for `emit`. `pids` are the system's processes (server, workers, database);
    their CPU during the workload and RSS after it are reported."""
    progress(f"warm-up: {args.warmup} workflows")
    warm = closed_loop(run_one, args.warmup)
    if warm.completed != warm.started:
        raise SystemExit(f"warm-up: {warm.completed} of {warm.started} workflows completed")
    before = cpu_ms(pids)
    if args.workload == "W1":
        progress(f"W1: {args.count} workflows, one at a time")
        out = closed_loop(run_one, args.count)
    else:
        progress(f"W2: {args.rate}/s for {args.secs} s")
        out = open_loop(run_one, args.rate, args.secs, args.drain_secs)
    used = cpu_ms(pids) - before
    progress(f"{args.workload}: {out.completed}/{out.started} completed in {out.elapsed_s:.1f} s")
    return {
        "workload": args.workload,
        "steps_per_workflow": steps_per_workflow,
        "started": out.started,
        "completed": out.completed,
        "failed": out.failed,
        "elapsed_s": out.elapsed_s,
        "p50_ms": out.percentile(0.50),
        "p99_ms": out.percentile(0.99),
        "p999_ms": out.percentile(0.999),
        "cpu_ms": used,
        "rss_mib": rss_mib(pids),
    }


def emit(system, version, durability, workers, result, notes=""):
    """Prints the one JSON line `batonctl bench` reads."""
    line = dict(result)
    line.update(system=system, version=version, durability=durability, workers=workers,
                notes=notes)
    print(json.dumps(line), flush=True)
