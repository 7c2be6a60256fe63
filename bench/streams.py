#!/usr/bin/env python3
"""Many concurrent streams through one citegate worker (HTTP/1.1 both ways).

Starts tests/tools/mock_upstream.py and build/citegate, opens N streaming
chat requests at once (the mock paces each answer so all N are open
together), records citegate's RSS before and while they are open, then
checks every client's content against the fixture's expected view.

usage: bench/streams.py [--streams N] [--h2-upstream] [--dialect D] [--citegate build/citegate]
With --dialect anthropic|responses the mock answers as that upstream (the
answer of tests/fixtures/dialects/e2e/D_stream.sse) and citegate translates.
With --dialect bedrock a stand-in of this script's own (the mock serves no
AWS event stream) answers every request with
tests/fixtures/dialects/answers/bedrock_citations.bin as
application/vnd.amazon.eventstream, paced like the mock's answers (HTTP/1.1
upstream only); --dialect bedrock-kb the same with the Knowledge Bases answer
answers/bedrock_kb_grounded.bin (citegate signs with placeholder AWS keys,
which the stand-in does not check). Every message straddles the 16-byte
pieces, so each stream holds its event-stream reader's buffer.
With --h2-upstream a second citegate (profile off, an h2c server in front of
the mock) is the upstream and the measured one speaks HTTP/2 to it; the
number of upstream h2 connections it used is printed too.
Prints RSS per open stream and a final line
  streams: dialect=D n=N ok=K lost=L rss_base_kib=B rss_open_kib=O per_stream_kib=P
"""
import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
import client_view  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
# dialect: (the mock's answer, under FIXTURES; the client view it must give,
# openwebui; the client's request, None: a one-line question)
ANSWERS = {
    "openai": ("azure_oyd_stream.sse", "expected/azure_oyd_stream.openwebui.json", None),
    "anthropic": ("dialects/e2e/anthropic_stream.sse",
                  "dialects/e2e/anthropic_stream.openwebui.json", "openwebui_rag_request.json"),
    "responses": ("dialects/e2e/responses_stream.sse",
                  "dialects/e2e/responses_stream.openwebui.json", "chat_request.json"),
    "bedrock": ("dialects/answers/bedrock_citations.bin",
                "dialects/e2e/bedrock_stream.openwebui.json",
                "dialects/answers/bedrock_documents.request.json"),
    "bedrock-kb": ("dialects/answers/bedrock_kb_grounded.bin",
                   "dialects/expected/bedrock_kb_grounded_stream.openwebui.json",
                   "dialects/answers/bedrock_kb.request.json"),
}
# What bedrock-kb needs to start: keys to sign with and a knowledge base.
KB_ENV = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "bench-secret",
          "AWS_REGION": "us-east-1",
          "CITEGATE_BEDROCK_KB": json.dumps({"type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {
              "knowledgeBaseId": "KB12345678", "modelArn": "anthropic.claude-3-haiku"}})}
EVENT_STREAMS = ("bedrock", "bedrock-kb")
# The pieces every answer is written in, and the pause between them.
SPLIT, DELAY_MS = 16, 25


def request_body(dialect):
    """The streaming chat request the clients send."""
    name = ANSWERS[dialect][2]
    req = {"messages": [{"role": "user", "content": "hi"}]}
    if name:
        with open(os.path.join(FIXTURES, name)) as f:
            req = json.load(f)
    req["stream"] = True
    return json.dumps(req).encode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_port(port, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


def dechunk(rest):
    """The payload of a chunked HTTP/1.1 body."""
    out, i = bytearray(), 0
    while i < len(rest):
        j = rest.index(b"\r\n", i)
        size = int(rest[i:j], 16)
        if size == 0:
            break
        out += rest[j + 2:j + 2 + size]
        i = j + 2 + size + 2
    return bytes(out)


def serve_event_stream(path, ready):
    """The upstream of --dialect bedrock: each request (HTTP/1.1, kept alive)
    is answered 200 with the AWS event stream in `path`, chunked, SPLIT bytes
    every DELAY_MS, as the mock paces its answers; the port goes to `ready`."""
    with open(path, "rb") as f:
        answer = f.read()

    async def read_request(reader):
        head = await reader.readuntil(b"\r\n\r\n")
        fields = {}
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            fields[k.strip().lower()] = v.strip()
        if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                await reader.readexactly(size + 2)
                if size == 0:
                    break
        else:
            await reader.readexactly(int(fields.get(b"content-length", b"0")))

    async def handle(reader, writer):
        try:
            while True:
                await read_request(reader)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.amazon.eventstream\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")
                for i in range(0, len(answer), SPLIT):
                    if i:
                        await asyncio.sleep(DELAY_MS / 1000)
                    piece = answer[i:i + SPLIT]
                    writer.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            pass
        writer.close()

    async def serve():
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
        with open(ready + ".tmp", "w") as f:
            f.write(str(server.sockets[0].getsockname()[1]))
        os.rename(ready + ".tmp", ready)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


async def one_stream(port, fixture, body, opened, release):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    # Split 16 bytes, 25 ms apart: the answer takes ~6 s, so all streams overlap.
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"X-Mock-Fixture: " + fixture.encode() + b"\r\nX-Mock-Split: %d\r\n"
                 b"X-Mock-Delay-Ms: %d\r\nConnection: close\r\nContent-Length: " % (SPLIT, DELAY_MS) +
                 str(len(body)).encode() + b"\r\n\r\n" + body)
    await writer.drain()
    data = bytearray()
    first = True
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        data += chunk
        if first and b"\r\n\r\n" in data and len(data) > data.index(b"\r\n\r\n") + 10:
            first = False
            opened()
            await release.wait()
    writer.close()
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    return head, dechunk(rest)


async def run(args, cg_pid, port):
    n_open = 0
    all_open = asyncio.Event()
    release = asyncio.Event()

    def opened():
        nonlocal n_open
        n_open += 1
        if n_open == args.streams:
            all_open.set()

    fixture, body = ANSWERS[args.dialect][0], request_body(args.dialect)
    tasks = [asyncio.create_task(one_stream(port, fixture, body, opened, release))
             for _ in range(args.streams)]
    try:
        await asyncio.wait_for(all_open.wait(), timeout=60)
    except asyncio.TimeoutError:
        print(f"only {n_open} of {args.streams} streams opened", file=sys.stderr)
    rss_open = rss_kib(cg_pid)
    release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    return rss_open, n_open, results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--citegate", default=os.path.join(ROOT, "build", "citegate"))
    ap.add_argument("--h2-upstream", action="store_true")
    ap.add_argument("--dialect", choices=sorted(ANSWERS), default="openai")
    ap.add_argument("--h2mock", help="path of build/tests/h2mock: use it (100 streams per "
                    "connection) as the h2 upstream, and add as many h2 client streams (h2load)")
    ap.add_argument("--serve-event-stream", nargs=2, metavar=("FILE", "READY"),
                    help=argparse.SUPPRESS)  # the stand-in upstream of the event-stream dialects
    args = ap.parse_args()
    if args.serve_event_stream:
        serve_event_stream(*args.serve_event_stream)
        return 0
    if args.dialect in EVENT_STREAMS and (args.h2_upstream or args.h2mock):
        ap.error(f"--dialect {args.dialect} has an HTTP/1.1 upstream only")
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))

    tmp = tempfile.mkdtemp(prefix="cg-streams-")
    ready = os.path.join(tmp, "ready")
    stats = os.path.join(tmp, "stats.json")
    if args.h2mock:
        args.h2_upstream = False
        mock = subprocess.Popen([args.h2mock, "--fixtures", FIXTURES,
                                 "--ready-file", ready, "--max-streams", "100", "--stats-file", stats,
                                 "--delay-ms", "400"])
    elif args.dialect in EVENT_STREAMS:
        mock = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve-event-stream",
                                 os.path.join(FIXTURES, ANSWERS[args.dialect][0]), ready])
    else:
        mock = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "tools", "mock_upstream.py"),
                                 "--port", "0", "--fixtures", FIXTURES,
                                 "--ready-file", ready], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.exists(ready) and open(ready).read().strip():
            break
        time.sleep(0.05)
    mport = int(open(ready).read())
    port, aport = free_port(), free_port()
    back = None
    upstream = f"http://127.0.0.1:{mport}"
    if args.h2_upstream:
        bport, baport = free_port(), free_port()
        benv = dict(os.environ, CITEGATE_LISTEN=f"127.0.0.1:{bport}",
                    CITEGATE_ADMIN_LISTEN=f"127.0.0.1:{baport}", CITEGATE_UPSTREAM=upstream,
                    CITEGATE_PROFILE="off", CITEGATE_LOG_LEVEL="warn",
                    CITEGATE_UPSTREAM_MAX_CONNECTIONS=str(args.streams + 10))
        back = subprocess.Popen([args.citegate], env=benv, stderr=subprocess.DEVNULL)
        wait_port(bport)
        upstream = f"http://127.0.0.1:{bport}"
    env = dict(os.environ, CITEGATE_LISTEN=f"127.0.0.1:{port}", CITEGATE_ADMIN_LISTEN=f"127.0.0.1:{aport}",
               CITEGATE_UPSTREAM=upstream,
               CITEGATE_UPSTREAM_PROTOCOL="h2" if args.h2_upstream or args.h2mock else "http1.1",
               CITEGATE_UPSTREAM_DIALECT=args.dialect,
               CITEGATE_LOG_LEVEL="warn", ENABLE_SEMANTIC_MEMORY="false")
    if args.dialect == "bedrock-kb":
        env.update(KB_ENV)
    # The defaults (1024 upstream connections, 1024 pending) carry 1,000
    # streams; only a larger run raises the cap.
    if args.streams > 1000:
        env["CITEGATE_UPSTREAM_MAX_CONNECTIONS"] = str(args.streams + 10)
    cg = subprocess.Popen([args.citegate], env=env, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        time.sleep(0.2)
        base = rss_kib(cg.pid)
        h2load = None
        if args.h2mock:
            req = os.path.join(tmp, "req.json")
            with open(req, "w") as f:
                f.write(json.dumps({"stream": True, "messages": [{"role": "user", "content": "hi"}]}))
            h2load = subprocess.Popen(["h2load", "-n", str(args.streams), "-c", "10", "-m",
                                       str(max(1, args.streams // 10)), "-d", req,
                                       f"http://127.0.0.1:{port}/v1/chat/completions"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        rss_open, n_open, results = asyncio.run(run(args, cg.pid, port))
        if h2load:
            h2out = h2load.communicate(timeout=120)[0].decode()
            print("h2 clients (h2load):", [l.strip() for l in h2out.splitlines() if "requests:" in l])
            with open(stats) as f:
                print(f"h2 mock upstream connections: {json.load(f)['connections']} "
                      f"(peer allows 100 streams each)")
        import urllib.request
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{aport}/metrics", timeout=5).read().decode()
        h2conns = [l for l in metrics.splitlines() if l.startswith('citegate_upstream_connections{protocol="h2"}')]
    finally:
        if back:
            back.send_signal(signal.SIGTERM)
            back.wait(timeout=20)
        cg.send_signal(signal.SIGTERM)
        cg.wait(timeout=20)
        mock.terminate()
        mock.wait(timeout=5)
    with open(os.path.join(FIXTURES, ANSWERS[args.dialect][1])) as f:
        want = json.load(f)
    ok = lost = 0
    for r in results:
        if isinstance(r, Exception):
            lost += 1
            continue
        v = client_view.view(r[1].decode("utf-8", "replace"))
        heads = [x["source"] for x in v["sources"]]
        if (v["content"] == want["content"] and v["sources"] == want.get("sources", v["sources"])
                and heads == want.get("source_heads", heads) and v["ends_with_done"]):
            ok += 1
        else:
            lost += 1
    per = (rss_open - base) / max(n_open, 1)
    print(f"citegate RSS: {base} KiB idle, {rss_open} KiB with {n_open} streams open "
          f"-> {per:.1f} KiB per open stream (HTTP/1.1 client, "
          f"{'h2' if args.h2_upstream or args.h2mock else 'HTTP/1.1'} {args.dialect} upstream, plaintext"
          f"{'; as many h2 client streams open too' if args.h2mock else ''})")
    if args.h2_upstream:
        print(f"upstream h2 connections after the run: {h2conns}")
    print(f"streams: dialect={args.dialect} n={args.streams} ok={ok} lost={lost} rss_base_kib={base} "
          f"rss_open_kib={rss_open} per_stream_kib={per:.1f}")
    return 0 if ok == args.streams else 1


if __name__ == "__main__":
    sys.exit(main())
