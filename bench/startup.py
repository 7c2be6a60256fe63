#!/usr/bin/env python3
"""Start-up time and idle memory of citegate.

Starts citegate N times (default 20), each with a SQLite store in a new
folder (the file and its tables are created on that start: the slower case)
and the embedded demo upstream, and times each start from just before the
exec to the first `GET /readyz` that answers 200 (a new connection tried
every 0.5 ms). The store must exist once ready: its recall connection is
opened before the event loop runs. Then one more start, left idle for
--idle seconds, gives the resident memory of every citegate process (the
parent and its workers) and their proportional share (Pss, shared library
pages divided among the processes that map them).

With --root DIR (an image's root filesystem, as docker/image.sh exports it;
needs root) citegate runs inside DIR through chroot as uid 10001, so the
image's own loader and shared objects are what start; the stores are made
under DIR/var/lib/citegate and removed afterwards.

With --dialect D, citegate starts with CITEGATE_UPSTREAM_DIALECT=D (its
demo then answers in that dialect); the default is openai, as when unset.

usage: bench/startup.py [--citegate build/citegate | --root DIR] [--runs 20]
                        [--workers 1] [--idle 3] [--reuse-store] [--max-ms MS]
                        [--dialect D]
Prints one line per start, then
  startup: runs=N workers=W dialect=D median_ms=M p90_ms=P min_ms=A max_ms=B
  idle: processes=K rss_kib=R pss_kib=S
With --max-ms, exits 1 when the median is above it.
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLEAN_PREFIXES = ("CITEGATE_", "AZURE_AI_", "ENABLE_", "SEMANTIC_MEMORY_")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def readyz(port):
    """The status of GET /readyz, or None when nothing answers yet."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
            c.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            head = c.recv(64)
    except OSError:
        return None
    parts = head.split(b" ", 2)
    return int(parts[1]) if len(parts) > 2 and parts[0].startswith(b"HTTP/1.") else None


IMAGE_BINARY = "/usr/local/bin/citegate"
IMAGE_DATA = "/var/lib/citegate"


class Start:
    """One citegate process started with its own ports and store folder (a path
    as citegate sees it: inside `root` when there is one)."""

    def __init__(self, args, store_dir):
        self.admin = free_port()
        db = os.path.join(store_dir, "semantic-memory.db")
        self.db = (args.root or "") + db  # where this script finds it
        env = {k: v for k, v in os.environ.items() if not k.startswith(CLEAN_PREFIXES)}
        env.update({"CITEGATE_LISTEN": f"127.0.0.1:{free_port()}",
                    "CITEGATE_ADMIN_LISTEN": f"127.0.0.1:{self.admin}",
                    "CITEGATE_WORKERS": str(args.workers),
                    "CITEGATE_UPSTREAM_DIALECT": args.dialect,
                    "SEMANTIC_MEMORY_DB_PATH": db})
        cmd = [args.citegate]
        if args.root:  # chroot execs citegate in its own process: the pid is citegate's
            cmd = ["chroot", "--userspec=10001:10001", args.root, IMAGE_BINARY]
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def wait_ready(self, timeout=10.0):
        """Milliseconds from the exec to the first 200."""
        deadline = self.t0 + timeout
        while time.perf_counter() < deadline:
            if readyz(self.admin) == 200:
                return (time.perf_counter() - self.t0) * 1000
            if self.proc.poll() is not None:
                raise RuntimeError(f"citegate exited with {self.proc.returncode}: "
                                   f"{self.proc.stderr.read().decode(errors='replace')[-800:]}")
            time.sleep(0.0005)
        raise RuntimeError(f"/readyz not 200 within {timeout} s")

    def pids(self):
        """citegate's processes: the parent and the children it forked (workers)."""
        out = [self.proc.pid]
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        if int(f.read().rpartition(")")[2].split()[1]) == self.proc.pid:
                            out.append(int(d))
                except (OSError, IndexError, ValueError):
                    pass
        return out

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc.stderr.close()
        if rc != 0:
            raise RuntimeError(f"citegate exited with {rc} on SIGTERM")


def memory_kib(pid):
    """(Rss, Pss) of a process in KiB, from /proc/PID/smaps_rollup."""
    vals = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Rss", "Pss"):
                vals[k] = int(v.split()[0])
    return vals["Rss"], vals["Pss"]


def time_starts(args, base):
    times = []
    shared = os.path.join(base, "shared")
    for i in range(args.runs):
        store = shared if args.reuse_store else os.path.join(base, f"run{i}")
        s = Start(args, store)
        try:
            ms = s.wait_ready()
            if not os.path.exists(s.db):
                raise RuntimeError(f"ready, but the SQLite store {s.db} does not exist")
        finally:
            s.stop()
        times.append(ms)
        print(f"start {i + 1:2d}: {ms:7.2f} ms")
    return times


def idle_memory(args, base):
    s = Start(args, os.path.join(base, "idle"))
    try:
        s.wait_ready()
        time.sleep(args.idle)
        pids = s.pids()
        mem = [memory_kib(p) for p in pids]
    finally:
        s.stop()
    return len(pids), sum(r for r, _ in mem), sum(p for _, p in mem)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--citegate", default=os.path.join(ROOT, "build", "citegate"))
    ap.add_argument("--root", help="an image's root filesystem: run its citegate through chroot")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--idle", type=float, default=3.0, help="seconds idle before memory is read")
    ap.add_argument("--reuse-store", action="store_true",
                    help="one store for every start (created by the first)")
    ap.add_argument("--max-ms", type=float, help="exit 1 when the median is above this")
    ap.add_argument("--dialect", default="openai",
                    help="CITEGATE_UPSTREAM_DIALECT: openai, anthropic, responses, gemini, "
                    "vertex or bedrock")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if args.root:
        args.root = os.path.abspath(args.root)
        if os.geteuid() != 0:
            ap.error("--root needs root (chroot)")
        if not os.access(args.root + IMAGE_BINARY, os.X_OK):
            ap.error(f"{args.root}{IMAGE_BINARY} is not there")
        base = os.path.join(IMAGE_DATA, f"startup-{os.getpid()}")
        host_base = args.root + base
    else:
        base = host_base = tempfile.mkdtemp(prefix="cg-startup-")
    try:
        times = time_starts(args, base)
        nproc, rss, pss = idle_memory(args, base)
    finally:
        shutil.rmtree(host_base, ignore_errors=True)
    med = statistics.median(times)
    p90 = sorted(times)[min(len(times) - 1, int(len(times) * 0.9))]
    print(f"startup: runs={len(times)} workers={args.workers} dialect={args.dialect} "
          f"median_ms={med:.2f} "
          f"p90_ms={p90:.2f} min_ms={min(times):.2f} max_ms={max(times):.2f}")
    print(f"idle: processes={nproc} rss_kib={rss} pss_kib={pss}")
    if args.max_ms is not None and med > args.max_ms:
        print(f"startup: FAILED: median {med:.2f} ms is above {args.max_ms:g} ms", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
