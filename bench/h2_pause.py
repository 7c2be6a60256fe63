#!/usr/bin/env python3
"""Does a paused client slow its neighbours on a shared h2 upstream connection?

Chain: clients -> citegate (measured, h2 upstream) -> citegate (profile off,
h2c server) -> mock upstream. Twenty clients stream paced answers (an event
every 20 ms) and record when each event arrives. The same run is made twice,
side by side in one process: without, then with four clients that stop
reading 8 MB answers on the same upstream connection. Reported: median and
p99 of the gap between consecutive events as the clients see them.

usage: bench/h2_pause.py [--citegate build/citegate]
Final line: h2_pause: gap_p50_ms=A/B gap_p99_ms=C/D ratio_p99=D/C
"""
import argparse
import asyncio
import json
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
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import test_backpressure  # noqa: E402  (the 8 MB answer generator)

BODY = json.dumps({"stream": True, "messages": [{"role": "user", "content": "q"}]}).encode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


def request(fixture, extra=b""):
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"X-Mock-Fixture: " + fixture + b"\r\n" + extra + b"Connection: close\r\n"
            b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)


async def paced_client(port, gaps):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request(b"azure_oyd_filters_crlf.sse", b"X-Mock-Split: 64\r\nX-Mock-Delay-Ms: 20\r\n"))
    await writer.drain()
    last = None
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        now = time.monotonic()
        if last is not None:
            gaps.append((now - last) * 1000)
        last = now
    writer.close()


async def paused_client(port, stop):
    # The buffer is sized before connect (see tests/integration/harness.py
    # slow_reader): sized after, the kernel drops data it offered room for.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(request(b"big.sse"))
    await writer.drain()
    await stop.wait()
    writer.close()


async def run(port, paused):
    gaps = []
    stop = asyncio.Event()
    holders = [asyncio.create_task(paused_client(port, stop)) for _ in range(paused)]
    await asyncio.sleep(1.0 if paused else 0)
    await asyncio.gather(*[paced_client(port, gaps) for _ in range(20)])
    stop.set()
    await asyncio.gather(*holders)
    return gaps


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--citegate", default=os.path.join(ROOT, "build", "citegate"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cg-h2pause-")
    with open(os.path.join(tmp, "big.sse"), "wb") as f:
        f.write(test_backpressure.big_stream())
    shutil.copy(os.path.join(ROOT, "tests", "fixtures", "azure_oyd_filters_crlf.sse"), tmp)
    ready = os.path.join(tmp, "ready")
    mock = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "tools", "mock_upstream.py"),
                             "--port", "0", "--fixtures", tmp, "--ready-file", ready],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not (os.path.exists(ready) and open(ready).read().strip()):
        time.sleep(0.05)
    mport = int(open(ready).read())
    bport, fport = free_port(), free_port()
    base = dict(os.environ, CITEGATE_LOG_LEVEL="error")
    back = subprocess.Popen([args.citegate], stderr=subprocess.DEVNULL, env=dict(
        base, CITEGATE_LISTEN=f"127.0.0.1:{bport}", CITEGATE_ADMIN_LISTEN=f"127.0.0.1:{free_port()}",
        CITEGATE_UPSTREAM=f"http://127.0.0.1:{mport}", CITEGATE_PROFILE="off"))
    front = subprocess.Popen([args.citegate], stderr=subprocess.DEVNULL, env=dict(
        base, CITEGATE_LISTEN=f"127.0.0.1:{fport}", CITEGATE_ADMIN_LISTEN=f"127.0.0.1:{free_port()}",
        CITEGATE_UPSTREAM=f"http://127.0.0.1:{bport}", CITEGATE_UPSTREAM_PROTOCOL="h2"))
    try:
        wait_port(bport)
        wait_port(fport)
        free = asyncio.run(run(fport, 0))
        held = asyncio.run(run(fport, 4))
    finally:
        for p in (front, back, mock):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)
    a50, a99 = statistics.median(free), pct(free, 0.99)
    b50, b99 = statistics.median(held), pct(held, 0.99)
    print(f"event gaps without paused clients: median {a50:.1f} ms, p99 {a99:.1f} ms ({len(free)} gaps)")
    print(f"event gaps with 4 paused clients:  median {b50:.1f} ms, p99 {b99:.1f} ms ({len(held)} gaps)")
    print(f"h2_pause: gap_p50_ms={a50:.1f}/{b50:.1f} gap_p99_ms={a99:.1f}/{b99:.1f} ratio_p99={b99 / a99:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
