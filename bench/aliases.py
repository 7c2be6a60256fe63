#!/usr/bin/env python3
"""Citation aliases (SPEC §7 "structured", "Aliases"): bytes saved and time added.

Input: a document-extraction tool output as a RAG agent gets it. Each field carries the
data-lake path of its document (abfss://…dfs.core.windows.net/contracts/2024/…pdf, about
90 bytes) and its Document Intelligence `source`: 1 to 3 regions D(page,x1,y1,…,x4,y4) with
2-decimal numbers joined by ';'. The "realistic" output has 40 fields over 6 documents; the
"large" one repeats that shape (other documents, other boxes) to over 1 MiB.

One citegate (one worker, profile structured, CITEGATE_CITATION_ALIASES=on) in front of a
local upstream written here: a thread per connection that reads the request and answers at
once with a small {response, citations} chat completion (citing by alias when the request
came aliased, by the strings themselves otherwise). Every request goes with
X-Citegate-Aliases: on or off, so both modes run through the same process side by side.

1. Bytes: the realistic request in each mode; the tool output's bytes as the upstream
   received them (the content string, decoded) and the whole body. Goal: 60% fewer.
2. Time: the large request, --runs times in each mode, the modes interleaved (alternately
   first) after --warmup rounds, over one keep-alive connection. Per request: the client's
   time from the first byte sent to the last byte read, and citegate's CPU time (the sum of
   /proc/PID/task/*/schedstat before and after). Medians and p99; the added time is on minus
   off. Goal: 1 ms or less added to a request with a 1 MB tool output. With aliases on the
   upstream also receives fewer bytes, so the wall-clock difference is the aliasing's cost
   net of the shorter write; the CPU difference shows the cost alone more closely.

Every answer is checked (status, X-Citegate-Aliases, the citations expanded back to the
strings, none removed); a wrong one ends the run with status 1.

usage: bench/aliases.py [--citegate build/citegate] [--runs 300] [--warmup 30]
Final line:
  aliases: tool_bytes=OFF/ON saved=P% body_bytes=OFF/ON large_tool_bytes=N
           p50_ms=OFF/ON p99_ms=OFF/ON added_p50_ms=D added_p99_ms=D
           cpu_p50_ms=OFF/ON added_cpu_p50_ms=D
"""
import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SUPPLIERS = ["acme-industrial", "northwind-logistics", "contoso-energy", "fabrikam-metals",
             "tailspin-aero", "wingtip-retail", "litware-systems", "proseware-health"]
KINDS = ["msa", "purchase-order", "sow", "amendment", "nda", "invoice"]
FIELDS = ["effective_date", "expiry_date", "total_amount", "currency", "payment_terms",
          "governing_law", "supplier_name", "buyer_name", "signatory", "termination_notice",
          "liability_cap", "renewal", "po_number", "delivery_date", "incoterms"]


def region(rng, page):
    x, y = rng.uniform(0.4, 6.0), rng.uniform(0.5, 10.2)
    w, h = rng.uniform(0.6, 2.4), rng.uniform(0.12, 0.3)
    pts = [x, y, x + w, y, x + w, y + h, x, y + h]
    return f"D({page}," + ",".join(f"{v:.2f}" for v in pts) + ")"


def documents(rng, n, first=0):
    out = []
    for d in range(first, first + n):
        sup, kind = SUPPLIERS[d % len(SUPPLIERS)], KINDS[d % len(KINDS)]
        path = (f"abfss://contracts@lakeprod.dfs.core.windows.net/contracts/2024/{sup}/"
                f"{kind}-{2024000 + d}.pdf")
        out.append((path, rng.randint(2, 14)))
    return out


def tool_output(rng, ndocs=6, nfields=40, first=0):
    """{"documents": …, "fields": [{name, value, confidence, path, source}]}: nfields
    fields spread over ndocs documents."""
    docs = documents(rng, ndocs, first)
    fields = []
    for i in range(nfields):
        path, pages = docs[i % ndocs]
        page = rng.randint(1, pages)
        source = ";".join(region(rng, page) for _ in range(rng.choice((1, 1, 2, 3))))
        fields.append({"name": FIELDS[i % len(FIELDS)], "value": f"value {first}-{i}",
                       "confidence": round(rng.uniform(0.8, 1.0), 3), "path": path,
                       "source": source})
    return {"documents": [{"path": p, "pages": n} for p, n in docs], "fields": fields}


def large_output(rng, target=1 << 20):
    out = {"documents": [], "fields": []}
    k = 0
    while len(json.dumps(out)) < target:
        part = tool_output(rng, first=k * 6)
        out["documents"] += part["documents"]
        out["fields"] += part["fields"]
        k += 1
    return out


def request(tool):
    return json.dumps({"model": "gpt-4o", "messages": [
        {"role": "system", "content": "Answer as JSON {response, citations}: cite [path, source] "
                                      "pairs copied from the tool output."},
        {"role": "user", "content": "What are the payment terms of each contract?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "extract_fields", "arguments": "{\"collection\":\"2024\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(tool)}],
        "response_format": {"type": "json_object"}}).encode()


def aliases_of(tool):
    """The reference numbering: P/B in order of first appearance among string values."""
    alias, n = {}, {"P": 0, "B": 0}

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str) and v not in alias:
            kind = "P" if "://" in v else "B" if v.startswith("D(") else None
            if kind:
                n[kind] += 1
                alias[v] = f"{kind}{n[kind]}"
    walk(tool)
    return alias


# --------------------------------------------------------------------------- the upstream

class Upstream:
    """HTTP/1.1, a thread per connection, keep-alive; answers every POST at once."""

    def __init__(self, answers):
        self.answers = answers  # (aliased answer, plain answer) bodies
        self.last_body = None
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            c, _ = self.sock.accept()
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = c.recv(1 << 20)
                    if not d:
                        return
                    buf += d
                head, _, buf = buf.partition(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        n = int(v)
                parts = [buf]
                have = len(buf)
                while have < n:
                    d = c.recv(1 << 20)
                    if not d:
                        return
                    parts.append(d)
                    have += len(d)
                data = b"".join(parts)
                body, buf = data[:n], data[n:]
                self.last_body = body
                answer = self.answers[0] if b'\\"P1\\"' in body else self.answers[1]
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(answer) + answer)
        except OSError:
            return
        finally:
            c.close()


def answer_pair(tool, alias, k=8):
    fields = tool["fields"][:k]
    cited = [[f["path"], f["source"]] for f in fields]
    response = " ".join(f"{f['name']} is {f['value']} [{i + 1}]." for i, f in enumerate(fields))

    def body(cits):
        content = json.dumps({"response": response, "citations": cits})
        return json.dumps({"id": "chatcmpl-b", "object": "chat.completion", "created": 1,
                           "model": "gpt-4o", "choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": content}}]}).encode()
    return body([[alias[p], alias[b]] for p, b in cited]), body(cited), cited


# --------------------------------------------------------------------------- citegate

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_citegate(binary, upstream_port, workdir):
    port, admin = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEGATE_", "AZURE_AI_", "ENABLE_"))}
    env.update({"CITEGATE_UPSTREAM": f"http://127.0.0.1:{upstream_port}",
                "CITEGATE_LISTEN": f"127.0.0.1:{port}", "CITEGATE_ADMIN_LISTEN": f"127.0.0.1:{admin}",
                "CITEGATE_PROFILE": "structured", "CITEGATE_CITATION_ALIASES": "on",
                "CITEGATE_WORKERS": "1", "CITEGATE_LOG_LEVEL": "warn",
                "SEMANTIC_MEMORY_DB_PATH": os.path.join(workdir, "mem.db")})
    err = open(os.path.join(workdir, "stderr.log"), "wb")
    p = subprocess.Popen([binary], env=env, cwd=workdir, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", admin, timeout=1)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            pass
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    sys.exit("citegate did not start: " + open(os.path.join(workdir, "stderr.log")).read()[-500:])


def cpu_ns(pid):
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


class Client:
    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(self, body, mode):
        self.conn.putrequest("POST", "/v1/chat/completions", skip_accept_encoding=True)
        self.conn.putheader("Content-Type", "application/json")
        self.conn.putheader("Content-Length", str(len(body)))
        self.conn.putheader("X-Citegate-Aliases", mode)
        self.conn.endheaders()
        t0 = time.perf_counter_ns()
        self.conn.send(body)
        r = self.conn.getresponse()
        data = r.read()
        t1 = time.perf_counter_ns()
        return r, data, t1 - t0


def check(r, data, mode, want_count, cited):
    if r.status != 200:
        sys.exit(f"{mode}: status {r.status}: {data[:300]!r}")
    content = json.loads(json.loads(data)["choices"][0]["message"]["content"])
    got = r.getheader("X-Citegate-Aliases")
    want = str(want_count) if mode == "on" else None
    if got != want or r.getheader("X-Citegate-Citations-Removed") != "0" or content["citations"] != cited:
        sys.exit(f"{mode}: wrong answer: X-Citegate-Aliases={got} (want {want}), removed="
                 f"{r.getheader('X-Citegate-Citations-Removed')}, citations {content['citations'][:2]}")


def upstream_tool_bytes(body):
    req = json.loads(body)
    tool = [m for m in req["messages"] if m["role"] == "tool"][0]["content"]
    return len(tool.encode())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--citegate", default=os.path.join(ROOT, "build", "citegate"))
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    a.citegate = os.path.abspath(a.citegate)
    rng = random.Random(a.seed)

    small, large = tool_output(rng), large_output(rng)
    small_alias, large_alias = aliases_of(small), aliases_of(large)
    small_req, large_req = request(small), request(large)
    s_on, s_off, s_cited = answer_pair(small, small_alias)
    l_on, l_off, l_cited = answer_pair(large, large_alias)

    up = Upstream((s_on, s_off))
    work = tempfile.mkdtemp(prefix="cg-bench-aliases-")
    cg, port = start_citegate(a.citegate, up.port, work)
    try:
        cl = Client(port)
        # 1. bytes
        sizes = {}
        for mode in ("off", "on"):
            r, data, _ = cl.post(small_req, mode)
            check(r, data, mode, len(small_alias), s_cited)
            sizes[mode] = (upstream_tool_bytes(up.last_body), len(up.last_body))
        saved = 1 - sizes["on"][0] / sizes["off"][0]
        print(f"realistic tool output: {len(small['fields'])} fields, {len(small['documents'])} "
              f"documents, {sum(1 for k in small_alias if k.startswith('D('))} boxes "
              f"({sum(f['source'].count('D(') for f in small['fields'])} regions)")
        print(f"  tool output upstream: off {sizes['off'][0]} bytes, on {sizes['on'][0]} bytes "
              f"({saved:.1%} fewer); whole body: off {sizes['off'][1]}, on {sizes['on'][1]}")

        # 2. time
        up.answers = (l_on, l_off)
        ltool = len(json.dumps(large).encode())
        print(f"large tool output: {ltool} bytes, {len(large['fields'])} fields, "
              f"{len(large['documents'])} documents, {len(large_alias)} strings to alias; "
              f"request body {len(large_req)} bytes")
        wall = {"on": [], "off": []}
        cpu = {"on": [], "off": []}
        for i in range(a.warmup + a.runs):
            for mode in (("on", "off") if i % 2 == 0 else ("off", "on")):
                c0 = cpu_ns(cg.pid)
                r, data, ns = cl.post(large_req, mode)
                c1 = cpu_ns(cg.pid)
                check(r, data, mode, len(large_alias), l_cited)
                if i >= a.warmup:
                    wall[mode].append(ns / 1e6)
                    cpu[mode].append((c1 - c0) / 1e6)
        p50 = {m: statistics.median(wall[m]) for m in wall}
        p99 = {m: pct(wall[m], 0.99) for m in wall}
        c50 = {m: statistics.median(cpu[m]) for m in cpu}
        for m in ("off", "on"):
            print(f"  {m:3}: wall p50 {p50[m]:.3f} ms p99 {p99[m]:.3f} ms; citegate CPU p50 "
                  f"{c50[m]:.3f} ms p99 {pct(cpu[m], 0.99):.3f} ms ({len(wall[m])} requests)")
        print(f"aliases: tool_bytes={sizes['off'][0]}/{sizes['on'][0]} saved={saved:.1%} "
              f"body_bytes={sizes['off'][1]}/{sizes['on'][1]} large_tool_bytes={ltool} "
              f"p50_ms={p50['off']:.3f}/{p50['on']:.3f} p99_ms={p99['off']:.3f}/{p99['on']:.3f} "
              f"added_p50_ms={p50['on'] - p50['off']:.3f} added_p99_ms={p99['on'] - p99['off']:.3f} "
              f"cpu_p50_ms={c50['off']:.3f}/{c50['on']:.3f} added_cpu_p50_ms={c50['on'] - c50['off']:.3f}")
    finally:
        cg.terminate()
        rc = cg.wait(10)
        if rc != 0:
            print(f"citegate exited {rc}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
