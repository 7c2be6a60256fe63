"""System calls per stream over HTTP/1.1 on both sides, counted with strace on
the loop thread (docs/performance.md, "Beside nginx, HAProxy, h2o and
nghttpx"): each event is one upstream read and one client writev, the head
leaves with the first event and the end with the last, and a stream's set-up
and tear-down cost no more than libuv needs.

Streams start one at a time (a ramp), where each one's own calls show. The
bench's pacing upstream and client (bench/versus_upstream, versus_client)
drive them. The upper bounds hold whatever the timing (events that share a
read only help); the lower bounds fail a count that measured nothing or too
little: a strace table that did not parse, a thread that was not the loop, a
count that missed streams."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from harness import Citegate, DaemonCase, wait_for

STREAMS = 20
EVENTS = 8


def bench_bin(name):
    path = os.environ.get(name.upper() + "_BIN")
    if not path:
        raise RuntimeError(f"{name.upper()}_BIN is not set (ctest sets it)")
    return path


ROW = re.compile(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:(\d+)\s+)?(\w+)\s*$")


def strace_table(text):
    """({system call: (calls, errors)}, the total row's calls or None) from `strace -c`
    output."""
    rows, total = {}, None
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        calls, errors = int(m.group(1)), int(m.group(2) or 0)
        if m.group(3) == "total":
            total = calls
        else:
            rows[m.group(3)] = (calls, errors)
    return rows, total


def strace_counts(text):
    """calls per system call from `strace -c` output."""
    return {name: calls for name, (calls, _) in strace_table(text)[0].items()}


class SyscallsPerStream(DaemonCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cg-syscalls-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        ready = os.path.join(self.dir, "ready")
        self.up = subprocess.Popen([bench_bin("versus_upstream"), "--port", "0", "--events", str(EVENTS),
                                    "--interval-ms", "20", "--ready-file", ready],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(self.stop, self.up)
        self.assertTrue(wait_for(lambda: os.path.exists(ready), 10), "versus_upstream did not start")
        with open(ready) as f:
            port = int(f.readline())
        self.cg = Citegate(upstream=f"http://127.0.0.1:{port}", env={"CITEGATE_LOG_LEVEL": "warn"}).start()
        self.addCleanup(self.cg.stop)

    @staticmethod
    def stop(proc):
        proc.kill()
        proc.wait()
        if proc.stderr:
            proc.stderr.close()

    def count(self):
        """Runs the streams with strace counting the loop thread's calls."""
        out = os.path.join(self.dir, "strace")
        st = subprocess.Popen(["strace", "-c", "-o", out, "-p", str(self.cg.proc.pid)],
                              stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop, st)
        line = st.stderr.readline()  # "Process N attached" once it counts
        self.assertIn("attached", line, "strace could not attach: " + line)
        client = subprocess.run([bench_bin("versus_client"), "--port", str(self.cg.port),
                                 "--streams", str(STREAMS), "--events", str(EVENTS),
                                 "--interval-ms", "20", "--ramp-ms", "15"],
                                capture_output=True, text=True, timeout=60)
        time.sleep(0.2)  # the last connections' closes
        st.send_signal(signal.SIGINT)
        st.wait(timeout=10)
        self.assertEqual(client.returncode, 0, client.stderr)
        result = json.loads(client.stdout.strip().splitlines()[-1])
        self.assertEqual((result["ok"], result["lost"]), (STREAMS, 0), client.stdout)
        with open(out) as f:
            text = f.read()
        return strace_counts(text), text

    def test_http1_floor(self):
        calls, text = self.count()
        # The table was read: rows, a total row, and rows that add up to it (a row the
        # pattern missed would be calls counted nowhere).
        rows, total = strace_table(text)
        self.assertTrue(calls, "no system call row in the strace -c output:\n" + text)
        self.assertIsNotNone(total, "no total row in the strace -c output:\n" + text)
        self.assertGreater(total, 0, text)
        self.assertEqual(sum(calls.values()), total, text)
        per = {k: v / STREAMS for k, v in calls.items()}
        writes = per.get("writev", 0) + per.get("write", 0)
        # One write per event: the head goes with the first, the terminator with the last.
        self.assertLessEqual(writes, EVENTS, text)
        # TCP_NODELAY: accepted sockets take it from the listener, upstream ones once.
        self.assertLessEqual(per.get("setsockopt", 0), 1, text)
        # epoll: client ADD and DEL, upstream ADD (both directions) and MOD after connect.
        self.assertLessEqual(per.get("epoll_ctl", 0), 4, text)
        self.assertLessEqual(per.get("getsockopt", 0), 1, text)
        # Reads: the request and the client's EOF, one per event upstream.
        self.assertLessEqual(per.get("read", 0), EVENTS + 2, text)

        # Lower bounds. Each stream is a connection of its own (versus_client), and every
        # one answered in full (count()): this thread accepted it and added it to epoll.
        accepted = sum(c - e for name, (c, e) in rows.items() if name in ("accept", "accept4"))
        self.assertGreaterEqual(accepted, STREAMS, text)
        self.assertGreaterEqual(calls.get("epoll_ctl", 0), STREAMS, text)
        self.assertGreater(calls.get("epoll_wait", 0), 0, text)
        self.assertGreater(calls.get("connect", 0), 0, text)  # the upstream pool's
        # A read per event: each stream's request, and its events from upstream.
        reads = calls.get("read", 0)
        self.assertGreaterEqual(reads, STREAMS * EVENTS, text)
        # A writev per event. The upstream paces on a schedule and catches up after a
        # stall, and a loop thread that was off the CPU finds two events waiting: such
        # events come in one read and leave in one writev, and each of those reads is one
        # fewer than EVENTS + 2 per stream. So: one write per read beside the request and
        # the client's EOF, which is STREAMS * EVENTS when no events shared a read.
        writes = calls.get("writev", 0) + calls.get("write", 0)
        self.assertGreaterEqual(writes, reads - 2 * STREAMS, text)


if __name__ == "__main__":
    unittest.main()
