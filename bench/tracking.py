#!/usr/bin/env python3
"""Citation tracking on vs off, side by side, under N concurrent streams.

The bar: "1,000 concurrent streams with tracking on vs off, side by
side: p99 per-event latency within 10%, zero event-loop stalls over 5 ms
attributable to SQLite."

One mock upstream (tests/tools/mock_upstream.py, run with its full garbage
collections off: see MOCK_WRAPPER) serves every round. Each round starts a
fresh citegate (one worker, HTTP/1.1 both ways, a private copy of the binary)
in each mode and puts the same load through it:
  on     ENABLE_CITATION_TRACKING=true, ENABLE_SEMANTIC_MEMORY=true,
         SEMANTIC_MEMORY_DB_PATH in the round's own temporary folder
  off    ENABLE_CITATION_TRACKING=false
  nomem  (optional) tracking on, ENABLE_SEMANTIC_MEMORY=false: all but SQLite
  emb    (optional) "on" with semantic recall: CITEGATE_EMBEDDINGS_MODEL, every
         stored answer's question embedded by the mock's /v1/embeddings, which
         answers after --emb-delay-ms (default 200: a remote endpoint), so the
         8 calls in flight and the queue of 1024 fill and drop (SPEC §8)
  pg     (optional) tracking on into PostgreSQL (CITEGATE_TRACKING_DSN): a server
         this script starts (tests/integration/pgserver.py, Debian postgresql),
         a fresh database per round
  direct (optional) no citegate, clients straight to the mock: the floor
Every other round runs the modes in reverse order, so drift hits all of them.

Load: N clients (one keep-alive connection each, started evenly over --ramp
seconds) each ask --requests streaming questions one after another, every
question different, so every answer ends in a pattern write when tracking is
on. The answer is azure_oyd_stream.sse stretched to dozens of events (its
context event, its 5 content events repeated --repeat times, finish, [DONE]),
written by the mock one event per write, --delay-ms apart.

Measured at the clients: the gap between consecutive event arrivals of one
answer (a read that completes at least one SSE event; events that arrive in
the same read count once), p50 and p99 per round. From citegate: the
citegate_event_loop_lag_seconds histogram (lateness of a 10 ms loop tick)
before and after the load: ticks later than 5 ms = count - bucket{le="0.005"};
citegate_tracking_failures_total; /v1/citations/stats; the loop thread's CPU
time and run-queue wait and the other threads' CPU (/proc/PID/task/*/schedstat);
and after an "on" round the rows of the SQLite patterns table (read with the
sqlite3 module once citegate has stopped, the writer having drained its queue)
against the rows expected from the fixture; after a "pg" round the rows of
citegate_patterns (psql), and rows written per second of load. With --perf, perf records the loop
thread's scheduler events and every interval over 5 ms is named: blocked in the
kernel (with the stack), waiting for a CPU, or running.

Every answer is checked: status 200, content and sources equal to the
expected client view (tests/fixtures/expected/azure_oyd_stream.openwebui.json,
content repeated), ends with [DONE]. The exit status is 1 when an answer is
lost or wrong or a request fails, never because of the latency ratio (a
measurement, not a test).

usage: bench/tracking.py [--streams 1000] [--requests 3] [--rounds 3]
                         [--delay-ms 125] [--repeat 4] [--ramp 2]
                         [--modes on,off[,pg][,nomem][,emb][,direct]] [--perf]
                         [--citegate build/citegate] [--log-level info]
Final line (p50/p99: median over rounds; stalls: summed over rounds):
  tracking: streams=N rounds=R answers_on=A rows=W p50_ms=on/off p99_ms=on/off
            ratio_p50=X ratio_p99=Y stalls_over_5ms=on/off failures_on=F lost=L
and with mode pg (on may then be left out):
  tracking_pg: streams=N rounds=R answers_pg=A rows=W rows_per_s=X p50_ms=pg/off
            p99_ms=pg/off ratio_p50=X ratio_p99=Y stalls_over_5ms=pg/off failures_pg=F lost=L
and with mode emb:
  tracking_emb: streams=N rounds=R answers_emb=A rows=W embedded=E dropped=D p50_ms=emb/off
            p99_ms=emb/off ratio_p50=X ratio_p99=Y stalls_over_5ms=emb/off failures_emb=F lost=L
"""
import argparse
import collections
import errno
import gc
import heapq
import json
import os
import re
import resource
import selectors
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness as H  # noqa: E402  (MockUpstream, Citegate, client_view)
import pgserver  # noqa: E402  (PostgresServer)

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "azure_oyd_stream.sse")
EXPECTED = os.path.join(ROOT, "tests", "fixtures", "expected", "azure_oyd_stream.openwebui.json")
BENCH_FIXTURE = "tracking_bench.sse"
TOPICS = ["charge the X100 battery", "X100 warranty cover", "swap the battery at a service centre",
          "battery life of the X100", "manufacturing defects", "USB-C charging time",
          "authorised service centres", "mixed use battery hours"]


# --------------------------------------------------------------------------- fixture

def make_fixture(directory, repeat):
    """azure_oyd_stream.sse with its content events repeated; returns
    (content events, procedural rows per answer, episodic rows per answer)."""
    with open(FIXTURE, encoding="utf-8") as f:
        events = [e for e in f.read().split("\n\n") if e.strip()]
    ctx, done = events[0], events[-1]
    finish = events[-2]
    content = events[1:-2]
    assert done == "data: [DONE]" and '"finish_reason":"stop"' in finish, "fixture changed shape"
    body = [ctx] + content * repeat + [finish, done]
    with open(os.path.join(directory, BENCH_FIXTURE), "w", encoding="utf-8") as f:
        f.write("\n\n".join(body) + "\n\n")
    # The rows SPEC §8 asks for, computed here from the fixture (as test_tracking.py does).
    available = len(json.loads(ctx[6:])["choices"][0]["delta"]["context"]["citations"])
    text = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content", "") for e in content)
    cited = {int(n) for n in re.findall(r"\[doc([0-9]{1,4})\]", text) if 1 <= int(n) <= available}
    proc = 1 if available and cited else 0
    epi = 1 if available and (available - len(cited)) * 2 >= available else 0
    return len(content) * repeat, proc, epi


# --------------------------------------------------------------------------- mock

# Runs tests/tools/mock_upstream.py unchanged, in an interpreter that never starts a
# full (oldest generation) garbage collection: with 1,000 open connections one full
# collection stops the mock for 100-200 ms, every stream sees that as one long gap,
# and the p99 of the gaps becomes the size of the mock's worst collection.
MOCK_WRAPPER = ("import gc, runpy, sys; gc.set_threshold(700, 10, 1 << 30); sys.argv = sys.argv[1:]; "
                "runpy.run_path(sys.argv[0], run_name='__main__')")


class Mock(H.MockUpstream):
    """harness.MockUpstream, started through MOCK_WRAPPER unless full_gc."""

    def __init__(self, fixtures, full_gc=False):
        super().__init__(fixtures=fixtures)
        self.full_gc = full_gc

    def start(self, timeout=H.DEFAULT_TIMEOUT):
        if self.full_gc:
            return super().start(timeout)
        ready = os.path.join(self.dir, "ready")
        self.log = open(os.path.join(self.dir, "mock.log"), "wb")
        self.proc = subprocess.Popen([sys.executable, "-c", MOCK_WRAPPER, H.MOCK, "--port", "0",
                                      "--fixtures", self.fixtures, "--ready-file", ready,
                                      "--parent-pid", str(os.getpid())],
                                     stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=H._die_with_parent)
        if not H.wait_for(lambda: os.path.exists(ready) or self.proc.poll() is not None, timeout) \
                or not os.path.exists(ready):
            self.stop()
            raise RuntimeError("mock upstream did not start: " + self.output())
        with open(ready) as f:
            self.port = int(f.read().strip())
        return self


# --------------------------------------------------------------------------- load

class Client:
    """One keep-alive connection asking `left` questions in turn (non-blocking)."""
    __slots__ = ("idx", "sock", "left", "asked", "state", "head", "cbuf", "rem", "tail",
                 "last_ev", "t_sent", "parts", "status", "answers", "error", "out")

    def __init__(self, idx, requests):
        self.idx, self.left, self.asked = idx, requests, 0
        self.sock = None
        self.answers = []  # (status, body bytes)
        self.error = None
        self.out = b""


def request_bytes(idx, k, delay_ms):
    q = (f"Client {idx} question {k}: how do I {TOPICS[(idx + k) % len(TOPICS)]}? "
         f"(ticket {idx * 7919 + k * 104729})")
    body = json.dumps({"stream": True, "messages": [{"role": "system", "content": "Be brief."},
                                                     {"role": "user", "content": q}]}).encode()
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nX-Mock-Fixture: " + BENCH_FIXTURE.encode() +
            b"\r\nX-Mock-Delay-Ms: " + str(delay_ms).encode() +
            b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def run_load(port, args):
    """Returns (clients, gaps_ms, ttfb_ms, seconds)."""
    sel = selectors.DefaultSelector()
    clients = [Client(i, args.requests) for i in range(args.streams)]
    gaps, ttfb = [], []
    t0 = time.monotonic()
    starts = [(t0 + args.ramp * i / max(1, args.streams), i) for i in range(args.streams)]
    heapq.heapify(starts)
    active = 0
    deadline = t0 + args.timeout

    def send_next(c):
        c.out = request_bytes(c.idx, c.asked, args.delay_ms)
        c.asked += 1
        c.state, c.head, c.cbuf, c.rem, c.tail, c.last_ev = "head", b"", b"", -1, b"", None
        c.parts, c.status = [], None
        c.t_sent = time.monotonic()
        flush(c)

    def flush(c):
        try:
            n = c.sock.send(c.out)
        except BlockingIOError:
            n = 0
        except OSError as e:
            fail(c, f"send: {e}")
            return
        c.out = c.out[n:]
        sel.modify(c.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if c.out else 0), c)

    def fail(c, why):
        nonlocal active
        c.error = why
        sel.unregister(c.sock)
        c.sock.close()
        active -= 1

    def finish_answer(c):
        nonlocal active
        c.answers.append((c.status, b"".join(c.parts)))
        c.left -= 1
        if c.left > 0:
            send_next(c)
        else:
            sel.unregister(c.sock)
            c.sock.close()
            active -= 1

    def on_body(c, data, t):
        buf = c.cbuf + data if c.cbuf else data
        i, n, out = 0, len(buf), []
        while i < n:
            if c.rem > 0:
                take = min(c.rem, n - i)
                out.append(buf[i:i + take])
                i += take
                c.rem -= take
                if c.rem == 0:
                    c.rem = -2  # chunk's CRLF next
                continue
            if c.rem == -2:
                if n - i < 2:
                    break
                i += 2
                c.rem = -1
                continue
            j = buf.find(b"\r\n", i)
            if j < 0:
                break
            if c.rem == -3:  # after the last chunk: trailer lines until an empty one
                empty = j == i
                i = j + 2
                if empty:
                    c.state = "done"
                    break
                continue
            size = int(buf[i:j].split(b";")[0], 16)
            i = j + 2
            c.rem = size if size else -3
        c.cbuf = buf[i:]
        if out:
            d = b"".join(out)
            c.parts.append(d)
            if (c.tail + d).count(b"\n\n"):
                if c.last_ev is None:
                    ttfb.append((t - c.t_sent) * 1000)
                else:
                    gaps.append((t - c.last_ev) * 1000)
                c.last_ev = t
            c.tail = d[-1:]
        if c.state == "done":
            finish_answer(c)

    while (starts or active) and time.monotonic() < deadline:
        now = time.monotonic()
        while starts and starts[0][0] <= now:
            _, i = heapq.heappop(starts)
            c = clients[i]
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            err = s.connect_ex(("127.0.0.1", port))
            if err not in (0, errno.EINPROGRESS):
                c.error = f"connect: {os.strerror(err)}"
                s.close()
                continue
            c.sock = s
            active += 1
            sel.register(s, selectors.EVENT_WRITE, c)
            c.state = "connecting"
        timeout = max(0.0, starts[0][0] - now) if starts else 0.5
        for key, mask in sel.select(min(timeout, 0.5)):
            c = key.data
            if c.state == "connecting":
                err = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    fail(c, f"connect: {os.strerror(err)}")
                    continue
                send_next(c)
                continue
            if mask & selectors.EVENT_WRITE and c.out:
                flush(c)
            if c.error or not mask & selectors.EVENT_READ:
                continue
            try:
                data = c.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError as e:
                fail(c, f"recv: {e}")
                continue
            t = time.monotonic()
            if not data:
                fail(c, f"connection closed by the server in answer {c.asked} ({c.state})")
                continue
            if c.state == "head":
                c.head += data
                k = c.head.find(b"\r\n\r\n")
                if k < 0:
                    continue
                head, rest = c.head[:k], c.head[k + 4:]
                c.status = int(head.split(b" ", 2)[1])
                if c.status != 200 or b"chunked" not in head.lower():
                    fail(c, f"answer {c.asked}: status {c.status}")
                    continue
                c.state = "body"
                c.rem = -1
                if rest:
                    on_body(c, rest, t)
            else:
                on_body(c, data, t)
    secs = time.monotonic() - t0
    for c in clients:
        if c.sock is not None and c.sock.fileno() >= 0:
            if c.error is None and c.left > 0:
                c.error = f"timed out in answer {c.asked}"
            try:
                sel.unregister(c.sock)
            except (KeyError, ValueError):
                pass
            c.sock.close()
    sel.close()
    return clients, gaps, ttfb, secs


# --------------------------------------------------------------------------- citegate side

def perf_start(pid, path):
    """perf records the scheduler events of citegate's loop thread (tid == pid), with stacks."""
    p = subprocess.Popen(["perf", "record", "-q", "-g", "-a", "-o", path,
                          "-e", "sched:sched_switch", "--filter", f"prev_pid == {pid} || next_pid == {pid}",
                          "-e", "sched:sched_waking", "--filter", f"pid == {pid}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=H._die_with_parent)
    time.sleep(1.0)  # perf's set-up; events before it is ready are not recorded
    return p


def perf_stalls(path, loop, limit=0.005):
    """The loop thread's intervals over `limit` from a perf_start record: a list of
    (what, ms, kernel stack) with what "blocked" (asleep outside epoll_wait), "cpu wait"
    (preempted, or woken and not yet running) or "running" (on a CPU throughout)."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "tid,time,event,trace,ip,sym"],
                         capture_output=True, text=True, timeout=300).stdout
    events, cur = [], None
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+\.\d+):\s+(\S+):\s*(.*)$", line)
        if m:
            cur = (float(m.group(2)), m.group(3), m.group(4), [])
            events.append(cur)
        elif cur is not None and line.strip():
            cur[3].append(line.split()[-1])
    found = []
    t_in = t_out = t_wake = None
    out_state, out_stack = "", []
    for t, name, trace, stack in events:
        if name == "sched:sched_waking":
            if re.search(rf"\bpid={loop}\b", trace):
                t_wake = t
            continue
        m = re.search(r"prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+)", trace)
        if not m:
            continue
        if int(m.group(1)) == loop:
            if t_in is not None and t - t_in > limit:
                found.append(("running", (t - t_in) * 1000, ""))
            t_in, t_out, t_wake, out_state, out_stack = None, t, None, m.group(2), stack
        if int(m.group(3)) == loop and t_out is not None:
            if out_state.startswith("R"):
                if t - t_out > limit:
                    found.append(("cpu wait", (t - t_out) * 1000, ""))
            else:
                if t_wake is not None and t - t_wake > limit:
                    found.append(("cpu wait", (t - t_wake) * 1000, ""))
                if t - t_out > limit and not any("epoll_wait" in f for f in out_stack):
                    frames = [f for f in out_stack if not f.startswith(("__schedule", "schedule"))]
                    found.append(("blocked", (t - t_out) * 1000, " <- ".join(frames[:5])))
            t_in = t
    return found



def metrics(cg):
    st, _, body = cg.admin("GET", "/metrics")
    if st != 200:
        raise RuntimeError(f"/metrics answered {st}")
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def lag(m):
    """(ticks, ticks later than 5 ms, ticks later than 20 ms, summed lateness in s)."""
    p = "citegate_event_loop_lag_seconds"
    if p + "_count" not in m:
        raise RuntimeError("citegate has no citegate_event_loop_lag_seconds (an older binary?)")
    n = m[p + "_count"]
    return (n, n - m[p + '_bucket{le="0.005"}'], n - m[p + '_bucket{le="0.02"}'], m[p + "_sum"])


def stats(cg):
    st, _, body = cg.admin("GET", "/v1/citations/stats")
    return json.loads(body) if st == 200 else {"status": st}


def proc_cpu(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sys_busy():
    """Seconds of CPU time spent busy by the whole machine (all CPUs)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def threads(pid):
    """{tid: (name, cpu s, run-queue wait s)} from /proc/PID/task/*/schedstat."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu, wait, _ = (int(x) for x in f.read().split())
        except OSError:
            continue
        out[int(tid)] = (name, cpu / 1e9, wait / 1e9)
    return out


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


def run_round(mode, mock, binary, args, want):
    """One load through a fresh citegate ("on", "off", "pg" or "nomem"), or straight to the
    mock ("direct")."""
    mock.reset()  # the mock's request log would otherwise grow round after round (GC pauses)
    env = {"CITEGATE_UPSTREAM_PROTOCOL": "http1.1", "CITEGATE_WORKERS": "1",
           "CITEGATE_UPSTREAM_MAX_CONNECTIONS": str(args.streams + 10),
           "CITEGATE_LOG_LEVEL": args.log_level, "CITEGATE_LOG_FORMAT": "text"}
    pg_db = None
    if mode == "on":
        env.update(ENABLE_CITATION_TRACKING="true", ENABLE_SEMANTIC_MEMORY="true")
    elif mode == "emb":
        st, _, body = mock.request("POST", "/__mock/embeddings", {"delay_ms": args.emb_delay_ms})
        if st != 200:
            raise RuntimeError(f"the mock has no embeddings control ({st}): {body[:200]!r}")
        env.update(ENABLE_CITATION_TRACKING="true", ENABLE_SEMANTIC_MEMORY="true",
                   CITEGATE_EMBEDDINGS_MODEL="bench-embedding",
                   CITEGATE_EMBEDDINGS_URL=mock.url + "/v1/embeddings")
    elif mode == "pg":
        pg_db = f"bench_{os.getpid()}_{time.monotonic_ns()}"
        env.update(ENABLE_CITATION_TRACKING="true", ENABLE_SEMANTIC_MEMORY="true",
                   CITEGATE_TRACKING_DSN=args.pg.create_db(pg_db))
    elif mode == "nomem":
        env.update(ENABLE_CITATION_TRACKING="true", ENABLE_SEMANTIC_MEMORY="false")
    else:
        env.update(ENABLE_CITATION_TRACKING="false")
    cg = H.Citegate(upstream=mock.url, env=env, binary=binary) if mode != "direct" else None
    rows, st, m0, m1, stalls, perf = {}, {}, {}, {}, None, None
    try:
        if cg:
            cg.start()
            time.sleep(0.3)
        pid = cg.proc.pid if cg else None
        if cg and args.perf:
            perf = perf_start(pid, os.path.join(cg.dir, "perf.data"))
        if cg:
            m0 = metrics(cg)
        th0 = threads(pid) if cg else {}
        busy0 = sys_busy()
        own0 = (proc_cpu(pid) if cg else 0) + proc_cpu(mock.proc.pid) + sum(os.times()[:2])
        gc.disable()  # no collector pauses in the measuring client
        try:
            clients, gaps, ttfb, secs = run_load(cg.port if cg else mock.port, args)
        finally:
            gc.enable()
        th1 = threads(pid) if cg else {}
        busy1 = sys_busy()
        if perf:
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=60)
        own1 = (proc_cpu(pid) if cg else 0) + proc_cpu(mock.proc.pid) + sum(os.times()[:2])
        if cg:
            m1 = metrics(cg)
            # Tracking is written after the answers (batched, and fleet stats may be up to 2 s
            # behind): wait for it to catch up rather than report a count caught mid-flight.
            expect = args.streams * args.requests
            deadline = time.monotonic() + 3
            st = stats(cg)
            while st.get("answers", 0) < expect and time.monotonic() < deadline:
                time.sleep(0.1)
                st = stats(cg)
            db = cg.env["SEMANTIC_MEMORY_DB_PATH"]
            rc = cg.stop(timeout=30)  # the SQLite writer drains its queue before the worker exits
            if rc not in (0, None):
                raise RuntimeError(f"citegate ({mode}) stopped with {H.describe_exit(rc)}: "
                                   f"{cg.stderr()[-1500:]}")
            if perf:
                stalls = perf_stalls(os.path.join(cg.dir, "perf.data"), pid)
            if pg_db:
                rows = dict((k, int(v)) for k, v in args.pg.psql(
                    "SELECT kind, count(*) FROM citegate_patterns GROUP BY kind", pg_db))
            if mode in ("on", "emb") and os.path.exists(db):
                con = sqlite3.connect(db)
                rows = dict(con.execute("SELECT kind, count(*) FROM patterns GROUP BY kind").fetchall())
                if mode == "emb":
                    st["embedded"] = con.execute(
                        "SELECT count(*) FROM patterns WHERE embedding IS NOT NULL").fetchone()[0]
                con.close()
    finally:
        if perf and perf.poll() is None:
            perf.kill()
            perf.wait()
        if cg:
            cg.cleanup()
    # correctness of every answer (straight from the mock: the fixture untransformed)
    ok = lost = 0
    errors = []
    seen = {}
    for c in clients:
        if c.error:
            errors.append(f"client {c.idx}: {c.error}")
        lost += args.requests - len(c.answers)
        for status, body in c.answers:
            good = seen.get(body)
            if good is None:
                v = H.client_view.view(body.decode("utf-8", "replace"))
                good = status == 200 and v["ends_with_done"] and (
                    mode == "direct" or (v["content"] == want["content"] and v["sources"] == want["sources"]))
                seen[body] = good
            if good:
                ok += 1
            else:
                lost += 1
                errors.append(f"client {c.idx}: wrong answer")
    res = {"mode": mode, "ok": ok, "lost": lost, "errors": errors, "secs": secs,
           "gaps": len(gaps), "p50": statistics.median(gaps) if gaps else float("nan"),
           "p99": pct(gaps, 0.99), "p999": pct(gaps, 0.999), "max": max(gaps) if gaps else 0,
           "ttfb_p99": pct(ttfb, 0.99), "stats": st, "rows": rows, "perf": stalls,
           "others": max(0.0, (busy1 - busy0) - (own1 - own0)) / (secs * (os.cpu_count() or 1)) * 100}
    if cg:
        l0, l1 = lag(m0), lag(m1)
        # The loop thread (tid == pid): CPU it used and time it waited runnable for a CPU;
        # every other thread of citegate (the SQLite writer when tracking is on).
        res.update(ticks=int(l1[0] - l0[0]), stalls5=int(l1[1] - l0[1]), stalls20=int(l1[2] - l0[2]),
                   loop_cpu=th1[pid][1] - th0.get(pid, th1[pid])[1],
                   loop_wait=th1[pid][2] - th0.get(pid, th1[pid])[2],
                   thread_cpu=sum(v[1] - th0.get(t, (None, 0, 0))[1] for t, v in th1.items() if t != pid),
                   failures=int(m1.get("citegate_tracking_failures_total", 0) -
                                m0.get("citegate_tracking_failures_total", 0)),
                   emb_failures=int(m1.get("citegate_embedding_failures_total", 0) -
                                    m0.get("citegate_embedding_failures_total", 0)))
    return res


# --------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=1000, help="concurrent clients (default 1000)")
    ap.add_argument("--requests", type=int, default=3, help="answers per client, in turn (default 3)")
    ap.add_argument("--rounds", type=int, default=3, help="on/off pairs, order alternating (default 3)")
    ap.add_argument("--delay-ms", type=int, default=125, help="mock's pause between events (default 125)")
    ap.add_argument("--repeat", type=int, default=4,
                    help="times the fixture's 5 content events are repeated (default 4: 23 events)")
    ap.add_argument("--ramp", type=float, default=2.0, help="seconds over which clients start")
    ap.add_argument("--timeout", type=float, default=90.0, help="per-round limit in seconds")
    ap.add_argument("--log-level", default="info", help="CITEGATE_LOG_LEVEL (default info)")
    ap.add_argument("--mock-full-gc", action="store_true",
                    help="leave the mock's full garbage collections on (see MOCK_WRAPPER)")
    ap.add_argument("--modes", default="on,off",
                    help="modes run in each round, order reversed every other round: on, off, nomem "
                         "(tracking on, semantic memory off: everything but SQLite), direct (straight to "
                         "the mock: the floor of the mock and the measuring client); default on,off")
    ap.add_argument("--perf", action="store_true",
                    help="record citegate's loop thread with `perf record -e sched:...` and name "
                         "every interval over 5 ms it spent blocked (with the kernel stack), waiting "
                         "for a CPU or running (needs perf and root)")
    ap.add_argument("--emb-delay-ms", type=int, default=200,
                    help="mode emb: how long the mock's embeddings endpoint takes per call")
    ap.add_argument("--citegate", default=os.path.join(ROOT, "build", "citegate"))
    args = ap.parse_args()
    if args.perf and not shutil.which("perf"):
        ap.error("--perf: no perf on PATH")
    modes = args.modes.split(",")
    if "off" not in modes or not {"on", "pg", "emb"} & set(modes) \
            or not set(modes) <= {"on", "off", "pg", "nomem", "emb", "direct"}:
        ap.error("--modes: off, on, pg and/or emb, and optionally nomem and direct")

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 3 * args.streams + 256  # this process, and citegate (client + upstream side) inherits it
    if hard != resource.RLIM_INFINITY and hard < need:
        print(f"RLIMIT_NOFILE hard limit {hard} < {need} needed for {args.streams} streams", file=sys.stderr)
        return 2
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))

    tmp = tempfile.mkdtemp(prefix="cg-tracking-")
    # A private copy: a rebuild of build/citegate during the run cannot change the binary
    # between rounds.
    binary = os.path.join(tmp, "citegate")
    shutil.copy2(args.citegate, binary)
    events, proc_rows, epi_rows = make_fixture(tmp, args.repeat)
    with open(EXPECTED, encoding="utf-8") as f:
        want = json.load(f)
    want = {"content": {k: v * args.repeat for k, v in want["content"].items()}, "sources": want["sources"]}

    mock = Mock(tmp, full_gc=args.mock_full_gc)
    args.pg = None
    results = []
    try:
        if "pg" in modes:
            args.pg = pgserver.PostgresServer().start()
            print(f"PostgreSQL {args.pg.bindir.split('/')[-2]} on 127.0.0.1:{args.pg.port} (fsync off)",
                  flush=True)
        mock.start()
        print(f"{args.streams} clients x {args.requests} answers per round; each answer {events + 3} upstream "
              f"events {args.delay_ms} ms apart (~{(events + 2) * args.delay_ms / 1000:.1f} s); "
              f"{args.rounds} on/off pairs; {os.cpu_count()} CPUs, load average "
              f"{open('/proc/loadavg').read().split()[0]}", flush=True)
        plan = [(r + 1, m) for r in range(args.rounds) for m in (modes if r % 2 == 0 else modes[::-1])]
        for rnd, mode in plan:
            res = run_round(mode, mock, binary, args, want)
            res["round"] = rnd
            results.append(res)
            st = res["stats"]
            if mode in ("on", "nomem", "pg", "emb"):
                extra = (f"; loop ticks >5 ms {res['stalls5']} of {res['ticks']}; answers={st.get('answers')} "
                         f"rows={sum(res['rows'].values())} failures={res['failures']}")
            elif mode == "off":
                extra = f"; loop ticks >5 ms {res['stalls5']} of {res['ticks']}; answers={st.get('answers')}"
            else:
                extra = " (no citegate)"
            print(f"  round {rnd} {mode:5}: {res['ok']} ok, {res['lost']} lost in {res['secs']:.1f} s; "
                  f"gaps p50 {res['p50']:.1f} p99 {res['p99']:.1f} max {res['max']:.0f} ms{extra}", flush=True)
            for e in res["errors"][:5]:
                print(f"    {e}", file=sys.stderr)
            if res["perf"] is not None:
                kinds = collections.Counter(k for k, _, _ in res["perf"])
                print(f"    perf: loop thread > 5 ms: {kinds['blocked']} blocked, {kinds['cpu wait']} "
                      f"waiting for a CPU, {kinds['running']} running", flush=True)
                stacks = collections.defaultdict(list)
                for k, ms, stack in res["perf"]:
                    if k == "blocked":
                        stacks[stack].append(ms)
                for stack, v in stacks.items():
                    print(f"      blocked {len(v)}x, {min(v):.1f}-{max(v):.1f} ms: {stack}", flush=True)
    finally:
        mock.cleanup()
        if args.pg:
            args.pg.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    lost = sum(x["lost"] for x in results)
    print()
    print("gaps: between consecutive event arrivals of one answer at the client (nominal "
          f"{args.delay_ms} ms); >5ms/>20ms: loop ticks that late; loop cpu/wait: citegate's loop thread "
          "on CPU / runnable but waiting for a CPU; thr cpu: its other threads (SQLite writer); "
          "other%: CPU of processes outside this benchmark, % of the machine")
    print(f"{'mode':6} {'rnd':>3} {'answers':>7} {'gaps':>6} {'p50_ms':>6} {'p99_ms':>6} {'p99.9':>6} "
          f"{'max_ms':>6} {'>5ms':>4} {'>20ms':>5} {'loop_cpu_s':>10} {'loop_wait_s':>11} {'thr_cpu_s':>9} "
          f"{'other%':>6} {'rows':>5} {'fail':>4}")
    order = {"on": 0, "pg": 1, "emb": 2, "off": 3, "nomem": 4, "direct": 5}
    for x in sorted(results, key=lambda x: (order[x["mode"]], x["round"])):
        if x["mode"] == "direct":
            cg_cols = f"{'-':>4} {'-':>5} {'-':>10} {'-':>11} {'-':>9}"
        else:
            cg_cols = (f"{x['stalls5']:>4} {x['stalls20']:>5} {x['loop_cpu']:>10.2f} {x['loop_wait']:>11.2f} "
                       f"{x['thread_cpu']:>9.2f}")
        print(f"{x['mode']:6} {x['round']:>3} {x['ok']:>7} {x['gaps']:>6} {x['p50']:>6.1f} {x['p99']:>6.1f} "
              f"{x['p999']:>6.1f} {x['max']:>6.0f} {cg_cols} {x['others']:>6.0f} "
              f"{sum(x['rows'].values()) if x['mode'] in ('on', 'pg', 'emb') else '-':>5} "
              f"{x['failures'] if x['mode'] != 'direct' else '-':>4}")
    off = [x for x in results if x["mode"] == "off"]
    for mode in ("on", "pg", "emb"):
        tracked = [x for x in results if x["mode"] == mode]
        if tracked:
            summarize(mode, tracked, off, args, proc_rows + epi_rows, lost)
    return 1 if lost else 0


def summarize(mode, tracked, off, args, rows_per_answer, lost):
    """The final lines of a tracked mode ("on": SQLite, "pg": PostgreSQL) against "off"."""
    def med(rs, k):
        return statistics.median(x[k] for x in rs)

    p50_t, p50_off, p99_t, p99_off = med(tracked, "p50"), med(off, "p50"), med(tracked, "p99"), med(off, "p99")
    s_t, s_off = sum(x["stalls5"] for x in tracked), sum(x["stalls5"] for x in off)
    answers = sum(x["stats"].get("answers", 0) for x in tracked)
    rows = sum(sum(x["rows"].values()) for x in tracked)
    rows_want = sum(x["ok"] for x in tracked) * rows_per_answer
    rows_per_s = rows / sum(x["secs"] for x in tracked)
    fails = sum(x["failures"] for x in tracked)
    print(f"median over rounds: p50 {p50_t:.1f}/{p50_off:.1f} ms, p99 {p99_t:.1f}/{p99_off:.1f} ms "
          f"({mode}/off); patterns rows {rows}, expected {rows_want}, {rows_per_s:.0f} rows/s of load; "
          f"answers tracked {answers}")
    name, suffix = {"on": ("tracking", "on"), "pg": ("tracking_pg", "pg"),
                    "emb": ("tracking_emb", "emb")}[mode]
    extra = {"on": "", "pg": f" rows_per_s={rows_per_s:.0f}",
             "emb": f" embedded={sum(x['stats'].get('embedded', 0) for x in tracked)}"
                    f" dropped={sum(x['emb_failures'] for x in tracked)}"}[mode]
    print(f"{name}: streams={args.streams} rounds={args.rounds} answers_{suffix}={answers} rows={rows}"
          f"{extra} p50_ms={p50_t:.1f}/{p50_off:.1f} p99_ms={p99_t:.1f}/{p99_off:.1f} "
          f"ratio_p50={p50_t / p50_off:.2f} ratio_p99={p99_t / p99_off:.2f} "
          f"stalls_over_5ms={s_t}/{s_off} failures_{suffix}={fails} lost={lost}")


if __name__ == "__main__":
    sys.exit(main())
