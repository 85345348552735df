"""Restate peer: starts restate-server and a hypercorn-served Python service, registers the
service, and drives W1/W2 through the ingress HTTP API (request/response: the call blocks
until the handler's result). Run via ./run, which installs everything into the cache dir."""

import ctypes
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import peerbench  # noqa: E402

CACHE = peerbench.cache_dir("restate")
SERVER = os.path.join(CACHE, "npm", "node_modules", "@restatedev",
                      "restate-server-linux-x64", "bin", "restate-server")
PARTITIONS = 2
SERVICE_WORKERS = 2
EXPECTED = {"W1": {"ok": True}, "W2": [{"ok": True}] * 3}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, check, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def die_with_parent():
    """Runs in the child before exec: SIGTERM it if bench.py dies, even by SIGKILL."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def signal_group(proc, sig):
    try:
        os.killpg(proc.pid, sig)  # each child was started in its own session/group
    except ProcessLookupError:
        pass


def http_json(method, url, body=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read() or b"null")


class Ingress:
    """One keep-alive HTTP/1.1 connection per load-generator thread."""

    def __init__(self, port, path):
        self.port, self.path, self.local = port, path, threading.local()
        self.seq, self.lock = 0, threading.Lock()

    def call(self, body):
        for attempt in (0, 1):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPConnection(
                    "127.0.0.1", self.port, timeout=120)
            try:
                conn.request("POST", self.path, body=body,
                             headers={"content-type": "application/json"})
                resp = conn.getresponse()
                return resp.status, resp.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self.local.conn = None
                if attempt:  # a fresh connection failed too
                    raise
        raise AssertionError("unreachable")

    def run_one(self, expected):
        with self.lock:
            self.seq += 1
            n = self.seq
        status, body = self.call(str(n).encode())
        if status != 200:
            peerbench.progress(f"ingress {status}: {body[:200]!r}")
            return False
        return json.loads(body) == expected


def durability(env, log_path):
    """Read back what is in effect: the effective config (same env) and the partitions the
    server reported starting."""
    cfg = subprocess.run([SERVER, "--bind-ip", "127.0.0.1", "--dump-config"], env=env,
                         capture_output=True, text=True, check=True).stdout

    def key(section, name):
        m = re.search(rf"^\[{re.escape(section)}\]\n(?:(?!\[).*\n)*?{name} = (.*)$", cfg, re.M)
        return m.group(1).strip('"') if m else "?"

    provider = key("bifrost", "default-provider")
    fsync = {"false": "on", "true": "off"}.get(key("log-server", "rocksdb-disable-wal-fsync"), "?")
    repl = re.search(r"^default-replication = (.*)$", cfg, re.M).group(1)
    with open(log_path, errors="replace") as f:
        started = set(re.findall(r"Partition (\d+) started", f.read()))
    return (f"restate default: bifrost {provider} loglet (replication {repl}, in-node "
            f"log-server, rocksdb WAL fsync={fsync} per write batch) + rocksdb partition "
            f"store, {len(started)} partitions")


def main():
    args = peerbench.parse_args()
    version = subprocess.run([SERVER, "--version"], capture_output=True,
                             text=True).stdout.split()[-1]
    ingress, admin, node, svc = (free_port() for _ in range(4))
    data = os.path.join(CACHE, f"data-{os.getpid()}")
    shutil.rmtree(data, ignore_errors=True)
    log_path = os.path.join(CACHE, "restate-server.log")
    env = dict(os.environ,
               RESTATE_DEFAULT_NUM_PARTITIONS=str(PARTITIONS),
               RESTATE_LISTEN_MODE="tcp",
               RESTATE_DISABLE_TELEMETRY="true",
               RESTATE_LOG_DISABLE_ANSI_CODES="true",
               RESTATE_INGRESS__BIND_ADDRESS=f"127.0.0.1:{ingress}",
               RESTATE_ADMIN__BIND_ADDRESS=f"127.0.0.1:{admin}",
               RESTATE_BIND_ADDRESS=f"127.0.0.1:{node}")
    procs = []

    def stop(*_):
        raise SystemExit("interrupted")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        peerbench.progress(f"starting restate-server {version} (ingress {ingress}, admin {admin})")
        with open(log_path, "w") as log:
            procs.append(subprocess.Popen(
                [SERVER, "--bind-ip", "127.0.0.1", "--base-dir", data, "--no-logo"],
                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=CACHE,
                start_new_session=True, preexec_fn=die_with_parent))
            procs.append(subprocess.Popen(
                [os.path.join(CACHE, "venv", "bin", "hypercorn"), "service:app",
                 "--config", "hypercorn.toml", "--bind", f"127.0.0.1:{svc}",
                 "--workers", str(SERVICE_WORKERS),
                 "--log-level", "warning"],
                cwd=HERE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=die_with_parent))

        def alive():
            for p in procs:
                if p.poll() is not None:
                    raise SystemExit(f"{p.args[0]} exited with {p.returncode}; see {log_path}")
            return True

        wait_for("admin API", lambda: alive() and
                 http_json("GET", f"http://127.0.0.1:{admin}/health")[0] == 200)
        wait_for("service endpoint", lambda: alive() and
                 socket.create_connection(("127.0.0.1", svc), timeout=1).close() is None)
        status, reg = http_json("POST", f"http://127.0.0.1:{admin}/deployments",
                                {"uri": f"http://127.0.0.1:{svc}"})
        peerbench.progress(f"registered deployment ({status}): "
                           f"{[s['name'] for s in reg.get('services', [])]}")

        client = Ingress(ingress, "/flow/w1" if args.workload == "W1" else "/flow/w2")
        expected = EXPECTED[args.workload]

        def ready():  # the ingress sees the new schema shortly after registration
            status, _ = client.call(b"0")
            return status == 200

        wait_for("ingress to route to the service", lambda: alive() and ready())
        result = peerbench.measure(args, lambda: client.run_one(expected),
                                   [p.pid for p in procs],
                                   1 if args.workload == "W1" else 3)
        peerbench.emit(
            "restate", version, durability(env, log_path),
            f"python restate-sdk {metadata.version('restate-sdk')} handlers under hypercorn "
            f"{metadata.version('hypercorn')}, {SERVICE_WORKERS} worker processes "
            f"(server -> service over HTTP/2)",
            result,
            f"W1 = service handler flow.w1 calling task.run once; W2 = flow.w2 making 3 calls "
            f"to task.run then awaiting all (restate.gather); invoked via ingress HTTP "
            f"request/response, one keep-alive connection per client thread; data dir fresh "
            f"each run; {PARTITIONS} partitions (default 24); hypercorn "
            f"keep_alive_max_requests raised (its default 1000 breaks in-flight streams)")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for p in reversed(procs):
            signal_group(p, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            signal_group(p, signal.SIGKILL)  # anything of its group still left
            p.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
