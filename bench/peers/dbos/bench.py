"""DBOS Transact peer: starts worker processes (app.py), drives W1/W2 through a DBOSClient,
prints one JSON line (see ../peerbench.py). Run through ./run, which installs DBOS and
prepares the database."""

import os
import signal
import subprocess
import sys
import threading
import traceback
from importlib.metadata import version

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import peerbench  # noqa: E402

from dbos import DBOSClient  # noqa: E402

WORKERS = int(os.environ.get("DBOS_BENCH_WORKERS", "2"))
# Seconds between two polls: of the queue by each worker, of a child's result by a W2 parent
# (both in app.py), and of the results of the workflows in flight by this load generator.
QUEUE_POLL = float(os.environ.get("DBOS_BENCH_QUEUE_POLL", "0.02"))
RESULT_POLL = float(os.environ.get("DBOS_BENCH_RESULT_POLL", "0.05"))
CLIENT_POLL = float(os.environ.get("DBOS_BENCH_CLIENT_POLL", "0.005"))
FORK = os.environ.get("DBOS_BENCH_FORK", "queue")  # see app.py
CONCURRENCY = int(os.environ.get("DBOS_BENCH_CONCURRENCY", "8"))  # see app.py


def pg_facts(url):
    with psycopg.connect(url, autocommit=True) as c:
        show = lambda k: c.execute(f"SHOW {k}").fetchone()[0]  # noqa: E731
        facts = {k: show(k) for k in ("fsync", "synchronous_commit", "wal_sync_method",
                                      "server_version", "data_directory")}
    try:
        with open(os.path.join(facts["data_directory"], "postmaster.pid")) as f:
            facts["postmaster"] = int(f.readline())
    except OSError:
        out = subprocess.run(["pgrep", "-o", "postgres"], capture_output=True, text=True)
        facts["postmaster"] = int(out.stdout.split()[0])
    return facts


def start_workers(url, workload):
    """Starts the worker processes: the first one alone (it creates DBOS's schema), then the
    others together."""
    def spawn(i):
        return subprocess.Popen([sys.executable, os.path.join(HERE, "app.py"), url, f"w{i}",
                                 workload],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ready(i, p):
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"worker w{i} did not start (exit {p.poll()})")
        peerbench.progress(f"worker w{i} ready (pid {p.pid})")

    procs = [spawn(0)]
    try:
        ready(0, procs[0])
        procs += [spawn(i) for i in range(1, WORKERS)]
        for i, p in enumerate(procs[1:], 1):
            ready(i, p)
    except BaseException:
        stop_workers(procs)
        raise
    return procs


class Results:
    """Tells the load generator's threads when their workflow has finished. One thread polls
    the status of every workflow in flight with one cheap query each CLIENT_POLL seconds,
    instead of one polling loop per handle (handle.get_result polls alone), so the
    client's cost does not grow with the number of workflows in flight; the result itself
    is then read through the DBOS handle."""

    def __init__(self, url):
        self.conn = psycopg.connect(url, autocommit=True)
        self.waiting = {}  # workflow id -> threading.Event
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def wait(self, handle):
        """The workflow's result (DBOS raises if it failed); None if stopped first."""
        done = threading.Event()
        with self.lock:
            if self.stopped.is_set():
                return None
            self.waiting[handle.get_workflow_id()] = done
        done.wait()
        with self.lock:
            if handle.get_workflow_id() in self.waiting:  # released by stop()
                return None
        return handle.get_result()

    def _poll(self):
        while not self.stopped.wait(CLIENT_POLL):
            with self.lock:
                ids = list(self.waiting)
            if not ids:
                continue
            try:
                rows = self.conn.execute(
                    "SELECT workflow_uuid FROM dbos.workflow_status WHERE workflow_uuid = ANY(%s)"
                    " AND status NOT IN ('PENDING', 'ENQUEUED', 'DELAYED')", (ids,)).fetchall()
            except Exception as e:  # keep polling; a lost workflow shows as not completed
                peerbench.progress(f"result poll failed: {e!r}")
                continue
            with self.lock:
                for (workflow_id,) in rows:
                    self.waiting.pop(workflow_id).set()

    def stop(self):
        """Stops polling and releases every waiter still blocked (as not completed)."""
        with self.lock:
            self.stopped.set()
            for done in self.waiting.values():
                done.set()
        self.thread.join()
        self.conn.close()


def stop_workers(procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    args = peerbench.parse_args()
    # ./run stops us with SIGTERM: unwind through `finally` so the workers stop too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    url = os.environ["DBOS_BENCH_DB_URL"]
    facts = pg_facts(url)
    procs = []
    client = results = None
    try:
        procs = start_workers(url, args.workload)
        client = DBOSClient(system_database_url=url, application_name="baton-bench",
                            system_database_pool_size=10)
        results = Results(url)
        name = "w1" if args.workload == "W1" else "w2"

        def run_one():
            if results.stopped.is_set():  # stopping: start nothing more
                return False
            h = client.enqueue({"workflow_name": name, "queue_name": "bench",
                                "app_version": "bench"})
            return results.wait(h) == {"ok": True}

        pids = [p.pid for p in procs] + [facts["postmaster"]]
        # CPU split for stderr; the load generator's tree contains the workers: subtract them.
        split = lambda: (peerbench.cpu_ms(pids[:-1]), peerbench.cpu_ms(pids[-1:]),  # noqa: E731
                         peerbench.cpu_ms([os.getpid()]) - peerbench.cpu_ms(pids[:-1]))
        before = split()
        result = peerbench.measure(args, run_one, pids,
                                   steps_per_workflow=1 if args.workload == "W1" else 3)
        used = [a - b for a, b in zip(split(), before)]
        peerbench.progress("cpu ms incl. warm-up: workers {}, postgres {}, "
                           "load generator (not reported) {}".format(*used))
        durability = (f"postgres {facts['server_version'].split()[0]} fsync={facts['fsync']} "
                      f"synchronous_commit={facts['synchronous_commit']} "
                      f"wal_sync_method={facts['wal_sync_method']}")
        workers = (f"{WORKERS} worker processes running DBOS in-process, each running up to "
                   f"{CONCURRENCY} client-enqueued workflows at once (one executor thread "
                   "each; steps run inline in it)")
        if args.workload == "W1":
            shape = "W1: client enqueues a workflow on a DBOS queue; it runs one @DBOS.step"
        elif FORK == "queue":
            shape = ("W2: client enqueues a workflow that enqueues 3 child workflows (one "
                     "@DBOS.step each) on a second queue (no cap) and waits on the 3 handles")
        else:
            shape = ("W2: client enqueues a workflow that starts 3 child workflows (one "
                     "@DBOS.step each) in its own process (DBOS.start_workflow) and joins them")
        join = ("" if args.workload == "W1" else
                f", a parent polls a child's result every {RESULT_POLL * 1000:g} ms")
        notes = (f"library, no server: {shape}; workers pick work by polling each queue "
                 f"every {QUEUE_POLL * 1000:g} ms{join} (DBOS defaults: 1 s); the load "
                 "generator is a separate DBOSClient process, not measured (it polls the "
                 "results of all workflows in flight in one query every "
                 f"{CLIENT_POLL * 1000:g} ms; its "
                 "Postgres backends are measured); cpu/rss = worker processes + the whole "
                 "postmaster tree (rss counts shared buffers once per backend)")
        peerbench.emit("dbos", f"dbos {version('dbos')}", durability, workers, result, notes)
    finally:
        if results is not None:
            results.stop()
        if client is not None:
            client.destroy()
        stop_workers(procs)


if __name__ == "__main__":
    code = 1
    try:
        main()
        code = 0
    except SystemExit as e:
        if isinstance(e.code, int):
            code = e.code
        elif e.code is not None:
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        # Threads of the open loop still blocked on a lost workflow must not hold the exit.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
