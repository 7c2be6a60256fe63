#!/usr/bin/env python3
"""Soak: rounds of many concurrent streams with random client aborts, for minutes.

Starts tests/tools/mock_upstream.py and build/citegate with default settings (SPEC §3),
then, until --seconds have passed, runs rounds of --streams concurrent streaming chat
requests (the mock paces each answer); a random --abort-share of the clients reset their
connection (SO_LINGER 0) at a random point of the answer, the others read it to the end
and are checked against the fixture's expected view. Between rounds it records
citegate's RSS and open file descriptors; memory and fds must level off, nothing may be
lost. Not a ctest: it runs for minutes.

usage: bench/soak.py [--seconds 300] [--streams 1000] [--abort-share 0.3] [--seed 1]
Prints one line per round and at the end
  soak: rounds=R streams=S aborted=A complete=C lost=L rss_kib=start/middle/end
        fds=start/middle/end
"""
import argparse
import asyncio
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_view  # noqa: E402
from streams import dechunk, free_port, rss_kib, wait_port  # noqa: E402

FIXTURE = "azure_oyd_stream.sse"
EXPECTED = os.path.join(ROOT, "tests", "fixtures", "expected", "azure_oyd_stream.openwebui.json")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


async def one_stream(port, abort_after):
    """Reads one answer; with abort_after (bytes), resets the connection once that many
    arrived. Returns 'aborted', 'complete' or 'lost'."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"X-Mock-Fixture: " + FIXTURE.encode() + b"\r\nX-Mock-Split: 64\r\n"
                 b"X-Mock-Delay-Ms: 10\r\nConnection: close\r\nContent-Length: " +
                 str(len(body)).encode() + b"\r\n\r\n" + body)
    await writer.drain()
    data = bytearray()
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        data += chunk
        if abort_after is not None and len(data) >= abort_after:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return "aborted", None
    writer.close()
    head, _, rest = bytes(data).partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return "lost", head[:80]
    return "complete", dechunk(rest)


async def one_round(port, n, share, rng, expected):
    aborts = [rng.randint(1, 6000) if rng.random() < share else None for _ in range(n)]
    results = await asyncio.gather(*(one_stream(port, a) for a in aborts), return_exceptions=True)
    counts = {"aborted": 0, "complete": 0, "lost": 0}
    for r in results:
        if isinstance(r, Exception):
            counts["lost"] += 1
            continue
        kind, payload = r
        if kind == "complete":
            view = client_view.view_of_stream(payload.decode("utf-8"))
            if view.get("content") != expected["content"]:
                kind = "lost"
        counts[kind] += 1
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--abort-share", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--citegate", default=os.path.join(ROOT, "build", "citegate"))
    args = ap.parse_args()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with open(EXPECTED) as f:
        expected = json.load(f)

    tmp = tempfile.mkdtemp(prefix="cg-soak-")
    ready = os.path.join(tmp, "ready")
    mock = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "tools", "mock_upstream.py"),
                             "--port", "0", "--fixtures", os.path.join(ROOT, "tests", "fixtures"),
                             "--ready-file", ready], stderr=subprocess.DEVNULL)
    while not os.path.exists(ready):
        time.sleep(0.05)
    with open(ready) as f:
        mport = int(f.read())
    port, aport = free_port(), free_port()
    env = dict(os.environ, CITEGATE_LISTEN=f"127.0.0.1:{port}", CITEGATE_ADMIN_LISTEN=f"127.0.0.1:{aport}",
               CITEGATE_UPSTREAM=f"http://127.0.0.1:{mport}", CITEGATE_UPSTREAM_PROTOCOL="http1.1",
               CITEGATE_LOG_LEVEL="error", SEMANTIC_MEMORY_DB_PATH=os.path.join(tmp, "memory.db"))
    cg = subprocess.Popen([args.citegate], env=env, stderr=subprocess.DEVNULL)
    rng = random.Random(args.seed)
    samples, totals, rounds = [], {"aborted": 0, "complete": 0, "lost": 0}, 0
    try:
        wait_port(port)
        time.sleep(0.3)
        samples.append((rss_kib(cg.pid), fds(cg.pid)))
        print(f"start: rss_kib={samples[0][0]} fds={samples[0][1]}", flush=True)
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            t = time.monotonic()
            c = asyncio.run(one_round(port, args.streams, args.abort_share, rng, expected))
            rounds += 1
            for k in totals:
                totals[k] += c[k]
            time.sleep(0.5)  # let closes settle before sampling
            samples.append((rss_kib(cg.pid), fds(cg.pid)))
            print(f"round {rounds}: {time.monotonic() - t:.1f} s aborted={c['aborted']} "
                  f"complete={c['complete']} lost={c['lost']} rss_kib={samples[-1][0]} "
                  f"fds={samples[-1][1]}", flush=True)
        if cg.poll() is not None:
            raise SystemExit(f"citegate died: {cg.returncode}")
    finally:
        cg.terminate()
        mock.terminate()
        cg.wait(30)
        mock.wait(10)
    mid = samples[len(samples) // 2]
    print(f"soak: rounds={rounds} streams={rounds * args.streams} aborted={totals['aborted']} "
          f"complete={totals['complete']} lost={totals['lost']} "
          f"rss_kib={samples[0][0]}/{mid[0]}/{samples[-1][0]} fds={samples[0][1]}/{mid[1]}/{samples[-1][1]}")
    return 1 if totals["lost"] or cg.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
