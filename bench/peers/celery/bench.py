"""Celery 5 on Redis as a peer of Baton: starts its own redis-server and one prefork celery
worker, runs W1 (`t.delay().get()`) or W2 (`chord([t.s(i) for i in range(3)], join.s())`)
through peerbench, prints one JSON line and stops everything it started."""

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # peerbench
sys.path.insert(0, HERE)  # tasks

import peerbench  # noqa: E402
from peerbench import progress  # noqa: E402

PORT = int(os.environ.setdefault("CELERY_PEER_REDIS_PORT", "16379"))
CONCURRENCY = int(os.environ.get("CELERY_PEER_CONCURRENCY", "4"))

import celery  # noqa: E402
import kombu  # noqa: E402
import redis  # noqa: E402
from celery import chord  # noqa: E402

from tasks import app, join, t  # noqa: E402

_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    # In the child, before exec: own process group (Ctrl-C goes to us, we stop it in order)
    # and SIGKILL if this script dies without cleaning up.
    os.setsid()
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _port_free(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


class System:
    def __init__(self, cache):
        self.cache = cache
        self.procs = []

    def start_redis(self):
        if not _port_free(PORT):
            raise SystemExit(f"port {PORT} is already in use (set CELERY_PEER_REDIS_PORT)")
        data = os.path.join(self.cache, "redis-data")
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(data)
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(PORT), "--bind", "127.0.0.1",
             "--dir", data, "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--logfile", os.path.join(self.cache, "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        self.procs.append(self.redis)
        r = redis.Redis(port=PORT)
        for _ in range(200):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                if self.redis.poll() is not None:
                    raise SystemExit("redis-server exited; see " + self.cache + "/redis.log")
                time.sleep(0.05)
        cfg = {k: r.config_get(k)[k] for k in ("appendonly", "appendfsync", "save")}
        self.redis_version = r.info("server")["redis_version"]
        r.close()
        return cfg

    def start_worker(self):
        env = dict(os.environ, PYTHONPATH=HERE)
        self.worker_log = os.path.join(self.cache, "worker.log")
        with open(self.worker_log, "wb") as log:
            self.worker = subprocess.Popen(
                [os.path.join(os.path.dirname(sys.executable), "celery"), "-A", "tasks",
                 "worker", "--pool", "prefork", "--concurrency", str(CONCURRENCY),
                 "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
                 "--without-heartbeat", "--hostname", f"peer{PORT}@%h"],
                cwd=self.cache, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                preexec_fn=_die_with_parent)
        self.procs.append(self.worker)
        # The first task waits in the queue until the worker consumes it.
        deadline = time.monotonic() + 120
        while True:
            if self.worker.poll() is not None:
                raise SystemExit("celery worker exited; see " + self.worker_log)
            try:
                if t.delay().get(timeout=2) == {"ok": True}:
                    return
            except celery.exceptions.TimeoutError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("celery worker not ready after 120 s; see " + self.worker_log)

    def worker_conf(self):
        """task_acks_late / prefetch as the running worker reports them."""
        try:
            reply = app.control.inspect(timeout=2.0, limit=1).conf() or {}
            conf = next(iter(reply.values()))
            return conf.get("task_acks_late"), conf.get("worker_prefetch_multiplier")
        except Exception as e:  # remote control unavailable: fall back to our config
            progress(f"inspect conf failed ({e!r}); using the app's own config")
            return app.conf.task_acks_late, app.conf.worker_prefetch_multiplier

    def stop(self):
        for p in reversed(self.procs):  # worker first (warm shutdown), then redis
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            try:  # the group's leftovers (e.g. pool children), if any
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.procs = []


def _on_signal(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main():
    args = peerbench.parse_args()
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    cache = peerbench.cache_dir("celery")
    system = System(cache)
    stopping = []
    try:
        cfg = system.start_redis()
        progress(f"redis-server {system.redis_version} on 127.0.0.1:{PORT}: {cfg}")
        system.start_worker()
        acks_late, prefetch = system.worker_conf()
        progress(f"celery worker ready: concurrency {CONCURRENCY}, acks_late={acks_late}, "
                 f"prefetch_multiplier={prefetch}")
        # W2: a workflow still waiting when the drain ends is lost; don't wait much longer.
        timeout = args.secs + args.drain_secs + 5 if args.workload == "W2" else 60

        def quietly(fn):
            # After the measurement, stragglers fail when Redis stops: not worth a log line each.
            def run_one():
                try:
                    return fn()
                except Exception:
                    if stopping:
                        return False
                    raise
            return run_one

        if args.workload == "W1":
            steps = 1

            @quietly
            def run_one():
                return t.delay().get(timeout=timeout) == {"ok": True}
        else:
            steps = 3

            @quietly
            def run_one():
                res = chord([t.s(i) for i in range(3)], join.s())()
                # follow_parents=False: otherwise every waiting thread polls the 3 header
                # results (GETs) each second, which feeds back into a backlog. A failed
                # branch still fails the chord (the join gets a ChordError).
                return res.get(timeout=timeout, follow_parents=False) == {"ok": True, "n": 3}

        pids = [system.redis.pid, system.worker.pid]
        r = redis.Redis(port=PORT)
        r.config_set("latency-monitor-threshold", 10)  # records fsyncs slower than 10 ms
        result = peerbench.measure(args, run_one, pids, steps)
        slow_fsync = {e[0].decode(): e[3] for e in r.latency_latest()}.get("aof-fsync-always")
        r.close()
        durability = (f"redis appendonly {cfg['appendonly']} appendfsync {cfg['appendfsync']} "
                      f"save '{cfg['save']}'; celery task_acks_late={acks_late} "
                      f"prefetch_multiplier={prefetch}")
        version = (f"celery {celery.__version__} (kombu {kombu.__version__}, redis-py "
                   f"{redis.__version__}), redis-server {system.redis_version}")
        workers = (f"1 celery worker, {CONCURRENCY} prefork processes; broker and result "
                   f"backend on one redis-server")
        notes = ("Celery keeps no durable workflow state: a chord's progress lives in Redis "
                 "counters/lists (a Lua script per header task) and the join runs as a 4th task "
                 "published by the worker that finishes the last branch. Results via the Redis "
                 "result backend (pub/sub). Redis transport acks_late = unacked hash + "
                 "visibility timeout (1 h default). pids: redis-server and the worker tree; the "
                 "load generator is a separate process, not counted. Client waits with "
                 "get(follow_parents=False). Slowest redis AOF fsync in the run: "
                 + (f"{slow_fsync} ms." if slow_fsync else "under 10 ms."))
        peerbench.emit("celery", version, durability, workers, result, notes)
    finally:
        stopping.append(True)
        system.stop()


if __name__ == "__main__":
    code = 0
    try:
        main()
    except KeyboardInterrupt as e:
        progress(f"interrupted: {e}")
        code = 130
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            progress(str(e.code))
            code = 1
    except Exception:
        traceback.print_exc()
        code = 1
    # Exit now: W2 stragglers may still sit in load-generator threads, which the interpreter
    # would otherwise join at exit.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
