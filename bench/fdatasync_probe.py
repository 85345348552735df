#!/usr/bin/env python3
"""Samples the disk while a benchmark runs: writes 4 KiB and times its fdatasync every 100 ms, and
prints the count, p50 and p99 when stopped (SIGTERM or Ctrl-C). The disk of the benchmark VMs
switches between about 0.2 ms and about 4 ms per fdatasync within minutes, so each run is read
beside the disk latency it ran on.

    python3 bench/fdatasync_probe.py [FILE] & P=$!; <run>; kill $P; wait $P

FILE (default ./fdatasync-probe.dat) is overwritten in place. Python's standard library only.
"""

import os
import signal
import statistics
import sys
import time

INTERVAL_S = 0.1
BLOCK = b"x" * 4096


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "fdatasync-probe.dat"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    samples = []

    def report(*_):
        if samples:
            ordered = sorted(samples)
            p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
            print(f"fdatasync n={len(samples)} p50={statistics.median(samples):.2f}ms p99={p99:.2f}ms")
        else:
            print("fdatasync n=0")
        sys.exit(0)

    signal.signal(signal.SIGTERM, report)
    signal.signal(signal.SIGINT, report)
    while True:
        os.pwrite(fd, BLOCK, 0)
        started = time.perf_counter()
        os.fdatasync(fd)
        samples.append((time.perf_counter() - started) * 1000)
        time.sleep(INTERVAL_S)


if __name__ == "__main__":
    main()
