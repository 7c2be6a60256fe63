#!/usr/bin/env python3
"""Citation tracking on vs off, side by side, under N concurrent streams (issue 6).

Bar from the issue: "1,000 concurrent streams with tracking on vs off, side by
side: p99 per-event latency within 10%, zero event-loop stalls over 5 ms
attributable to SQLite."

One mock upstream (tests/tools/mock_upstream.py) serves every round. Each
round starts a fresh citegate (one worker, HTTP/1.1 both ways) in one of two
modes and puts the same load through it:
  on   ENABLE_CITATION_TRACKING=true, ENABLE_SEMANTIC_MEMORY=true,
       SEMANTIC_MEMORY_DB_PATH in the round's own temporary folder
  off  ENABLE_CITATION_TRACKING=false
Rounds alternate the order (on/off, off/on, ...) so drift hits both modes.

Load: N clients (one keep-alive connection each, starts spread over --ramp
seconds) each ask --requests streaming questions one after another, every
question different, so every answer ends in a pattern write when tracking is
on. The answer is azure_oyd_stream.sse stretched to dozens of events (its
context event, its content events repeated --repeat times, finish, [DONE]),
written by the mock one event per write, --delay-ms apart.

Measured at the clients: the gap between consecutive event arrivals of one
answer (a read that completes at least one SSE event; events that arrive in
the same read count once), p50 and p99 per round. From citegate: the
citegate_event_loop_lag_seconds histogram (lateness of a 10 ms loop tick)
before and after the load: ticks later than 5 ms = count - bucket{le="0.005"};
citegate_tracking_failures_total; /v1/citations/stats; and after an "on"
round the rows of the SQLite patterns table (read with the sqlite3 module
once citegate has stopped, the writer having drained its queue), against the
rows expected from the answers.

Every answer is checked: status 200, content and sources equal to the
expected client view (tests/fixtures/expected/azure_oyd_stream.openwebui.json,
content repeated), ends with [DONE]. The exit status is 1 when an answer is
lost or wrong or a request fails, never because of the latency ratio (a
measurement, not a test).

usage: bench/tracking.py [--streams 1000] [--requests 3] [--rounds 2]
                         [--delay-ms 50] [--repeat 8] [--ramp 2]
                         [--citegate build/citegate] [--log-level info]
Final line:
  tracking: streams=N rounds=R answers_on=A rows=W p50_ms=on/off p99_ms=on/off
            ratio_p50=X ratio_p99=Y stalls_over_5ms=on/off failures_on=F lost=L
"""
import argparse
import heapq
import json
import os
import re
import resource
import selectors
import shutil
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
import errno

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness as H  # noqa: E402  (MockUpstream, Citegate, client_view)

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
            if not mask & selectors.EVENT_READ:
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
                fail(c, f"closed by citegate in answer {c.asked} ({c.state})")
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
    env = {"CITEGATE_UPSTREAM_PROTOCOL": "http1.1", "CITEGATE_WORKERS": "1",
           "CITEGATE_UPSTREAM_MAX_CONNECTIONS": str(args.streams + 10),
           "CITEGATE_LOG_LEVEL": args.log_level, "CITEGATE_LOG_FORMAT": "text"}
    if mode == "on":
        env.update(ENABLE_CITATION_TRACKING="true", ENABLE_SEMANTIC_MEMORY="true")
    else:
        env.update(ENABLE_CITATION_TRACKING="false")
    cg = H.Citegate(upstream=mock.url, env=env, binary=binary)
    db = cg.env["SEMANTIC_MEMORY_DB_PATH"]
    try:
        cg.start()
        time.sleep(0.3)
        pid = cg.proc.pid
        m0 = metrics(cg)
        th0, busy0 = threads(pid), sys_busy()
        own0 = proc_cpu(pid) + proc_cpu(mock.proc.pid) + sum(os.times()[:2])
        clients, gaps, ttfb, secs = run_load(cg.port, args)
        th1, busy1 = threads(pid), sys_busy()
        own1 = proc_cpu(pid) + proc_cpu(mock.proc.pid) + sum(os.times()[:2])
        m1 = metrics(cg)
        st = stats(cg)
        rc = cg.stop(timeout=30)
        if rc not in (0, None):
            raise RuntimeError(f"citegate ({mode}) stopped with {H.describe_exit(rc)}: {cg.stderr()[-1500:]}")
        rows = {}
        if mode == "on":
            if os.path.exists(db):
                con = sqlite3.connect(db)
                rows = dict(con.execute("SELECT kind, count(*) FROM patterns GROUP BY kind").fetchall())
                con.close()
    finally:
        cg.cleanup()
    # correctness of every answer
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
                good = (status == 200 and v["content"] == want["content"] and
                        v["sources"] == want["sources"] and v["ends_with_done"])
                seen[body] = good
            if good:
                ok += 1
            else:
                lost += 1
                errors.append(f"client {c.idx}: wrong answer")
    l0, l1 = lag(m0), lag(m1)
    # The loop thread (tid == pid): CPU it used and time it waited runnable for a CPU;
    # every other thread of citegate (the SQLite writer when tracking is on).
    loop_cpu = th1[pid][1] - th0.get(pid, th1[pid])[1]
    loop_wait = th1[pid][2] - th0.get(pid, th1[pid])[2]
    other_cpu = sum(v[1] - th0.get(t, (None, 0, 0))[1] for t, v in th1.items() if t != pid)
    others = max(0.0, (busy1 - busy0) - (own1 - own0)) / (secs * (os.cpu_count() or 1)) * 100
    fails = m1.get("citegate_tracking_failures_total", 0) - m0.get("citegate_tracking_failures_total", 0)
    return {"mode": mode, "ok": ok, "lost": lost, "errors": errors, "secs": secs,
            "gaps": len(gaps), "p50": statistics.median(gaps) if gaps else float("nan"),
            "p99": pct(gaps, 0.99), "p999": pct(gaps, 0.999), "max": max(gaps) if gaps else 0,
            "ttfb_p99": pct(ttfb, 0.99),
            "ticks": int(l1[0] - l0[0]), "stalls5": int(l1[1] - l0[1]), "stalls20": int(l1[2] - l0[2]),
            "lag_ms": (l1[3] - l0[3]) * 1000, "loop_cpu": loop_cpu, "loop_wait": loop_wait,
            "thread_cpu": other_cpu, "others": others, "failures": int(fails), "stats": st, "rows": rows}


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
    ap.add_argument("--citegate", default=os.path.join(ROOT, "build", "citegate"))
    args = ap.parse_args()

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

    mock = H.MockUpstream(fixtures=tmp)
    results = []
    try:
        mock.start()
        print(f"{args.streams} clients x {args.requests} answers per round; each answer {events + 3} upstream "
              f"events {args.delay_ms} ms apart (~{(events + 2) * args.delay_ms / 1000:.1f} s); "
              f"{args.rounds} on/off pairs; {os.cpu_count()} CPUs, load average "
              f"{open('/proc/loadavg').read().split()[0]}", flush=True)
        for r in range(args.rounds):
            for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
                res = run_round(mode, mock, binary, args, want)
                res["round"] = r + 1
                results.append(res)
                st = res["stats"]
                extra = (f"; answers={st.get('answers')} rows={sum(res['rows'].values())} "
                         f"failures={res['failures']}" if mode == "on" else f"; answers={st.get('answers')}")
                print(f"  round {r + 1} {mode:3}: {res['ok']} ok, {res['lost']} lost in {res['secs']:.1f} s; "
                      f"gaps p50 {res['p50']:.1f} p99 {res['p99']:.1f} max {res['max']:.0f} ms; "
                      f"loop ticks >5 ms {res['stalls5']} of {res['ticks']}{extra}", flush=True)
                for e in res["errors"][:5]:
                    print(f"    {e}", file=sys.stderr)
    finally:
        mock.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)

    on = [x for x in results if x["mode"] == "on"]
    off = [x for x in results if x["mode"] == "off"]

    def med(rs, k):
        return statistics.median(x[k] for x in rs)

    p50_on, p50_off, p99_on, p99_off = med(on, "p50"), med(off, "p50"), med(on, "p99"), med(off, "p99")
    s_on, s_off = sum(x["stalls5"] for x in on), sum(x["stalls5"] for x in off)
    answers_on = sum(x["stats"].get("answers", 0) for x in on)
    rows = sum(sum(x["rows"].values()) for x in on)
    rows_want = sum(x["ok"] for x in on) * (proc_rows + epi_rows)
    fails = sum(x["failures"] for x in on)
    lost = sum(x["lost"] for x in results)
    print()
    print("gaps: between consecutive event arrivals of one answer at the client (nominal "
          f"{args.delay_ms} ms); >5ms/>20ms: loop ticks that late; loop cpu/wait: citegate's loop thread "
          "on CPU / runnable but waiting for a CPU; thr cpu: its other threads (SQLite writer); "
          "other%: CPU of processes outside this benchmark, % of the machine")
    print(f"{'mode':4} {'rnd':>3} {'answers':>7} {'gaps':>6} {'p50_ms':>6} {'p99_ms':>6} {'p99.9':>6} "
          f"{'max_ms':>6} {'>5ms':>4} {'>20ms':>5} {'loop_cpu_s':>10} {'loop_wait_s':>11} {'thr_cpu_s':>9} "
          f"{'other%':>6} {'rows':>5} {'fail':>4}")
    for x in sorted(results, key=lambda x: (x["mode"] != "on", x["round"])):
        print(f"{x['mode']:4} {x['round']:>3} {x['ok']:>7} {x['gaps']:>6} {x['p50']:>6.1f} {x['p99']:>6.1f} "
              f"{x['p999']:>6.1f} {x['max']:>6.0f} {x['stalls5']:>4} {x['stalls20']:>5} "
              f"{x['loop_cpu']:>10.2f} {x['loop_wait']:>11.2f} {x['thread_cpu']:>9.2f} {x['others']:>6.0f} "
              f"{sum(x['rows'].values()) if x['mode'] == 'on' else '-':>5} {x['failures']:>4}")
    print(f"median over rounds: p50 {p50_on:.1f}/{p50_off:.1f} ms, p99 {p99_on:.1f}/{p99_off:.1f} ms (on/off); "
          f"patterns rows {rows}, expected {rows_want} ({proc_rows} procedural + {epi_rows} episodic "
          f"per answer); answers tracked {answers_on}")
    print(f"tracking: streams={args.streams} rounds={args.rounds} answers_on={answers_on} rows={rows} "
          f"p50_ms={p50_on:.1f}/{p50_off:.1f} p99_ms={p99_on:.1f}/{p99_off:.1f} "
          f"ratio_p50={p50_on / p50_off:.2f} ratio_p99={p99_on / p99_off:.2f} "
          f"stalls_over_5ms={s_on}/{s_off} failures_on={fails} lost={lost}")
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
