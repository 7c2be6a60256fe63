"""A client that stops reading must not make citegate buffer its answer:
the upstream is paused at the client's high-water mark, memory stays
bounded, and when the client reads again every byte arrives in order.
Each pause is counted (citegate_client_stalls_total), and
citegate_streams_paused holds the streams paused now: back to 0 however the
stream ends (the client reads again, leaves, or the idle timeout ends it)."""
import json
import os
import shutil
import socket
import tempfile
import time
import unittest

import h2frames as F
import harness as H
from test_metrics import parse, value

EVENTS = 40000  # ~8 MB of SSE


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def big_stream():
    out = []
    for i in range(EVENTS):
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": f"word{i:06d} " + "x" * 150},
                              "finish_reason": None}]}
        out.append("data: " + json.dumps(chunk) + "\n\n")
    out.append('data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    return "".join(out).encode()


class SlowClient(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        cls.fixtures = tempfile.mkdtemp(prefix="cg-big-")
        cls.body = big_stream()
        with open(os.path.join(cls.fixtures, "big.sse"), "wb") as f:
            f.write(cls.body)
        cls.mock = H.MockUpstream(fixtures=cls.fixtures).start()
        cls.cg = H.Citegate(upstream=cls.mock.url).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            shutil.rmtree(cls.fixtures, ignore_errors=True)

    def test_paused_client_bounds_memory_and_loses_nothing(self):
        base = rss_kib(self.cg.proc.pid)
        sock = H.slow_reader(self.cg.port)
        body = json.dumps({"stream": True, "messages": [{"role": "user", "content": "hi"}]})
        sock.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "X-Mock-Fixture: big.sse\r\nConnection: close\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        time.sleep(2.0)  # the client reads nothing
        paused = rss_kib(self.cg.proc.pid)
        self.assertLess(paused - base, 4096,
                        f"citegate grew {paused - base} KiB while its client was not reading")
        head, _, rest = H.read_to_eof(sock).partition(b"\r\n\r\n")
        self.assertIn(b"200 OK", head.split(b"\r\n")[0])
        out = H.dechunk(rest)
        # No reference in the answer: every upstream byte comes through unchanged.
        self.assertEqual(bytes(out), self.body)


def request_big(cg):
    """A client that asks for the big stream and reads nothing yet."""
    sock = H.slow_reader(cg.port)
    body = json.dumps({"stream": True, "messages": [{"role": "user", "content": "hi"}]})
    sock.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "X-Mock-Fixture: big.sse\r\nConnection: close\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    return sock


def backpressure_metrics(cg):
    st, _, body = cg.admin("GET", "/metrics")
    assert st == 200, st
    fams = parse(body.decode())
    return (value(fams, "citegate_client_stalls_total"), value(fams, "citegate_streams_paused"),
            value(fams, "citegate_client_disconnects_total"))


class Stalls(H.DaemonCase):
    """The two backpressure series, on every way a paused stream can end."""

    @classmethod
    def setUpClass(cls):
        cls.fixtures = tempfile.mkdtemp(prefix="cg-big-")
        cls.body = big_stream()
        with open(os.path.join(cls.fixtures, "big.sse"), "wb") as f:
            f.write(cls.body)
        shutil.copy(os.path.join(H.FIXTURES, "azure_oyd_stream.sse"), cls.fixtures)
        cls.mock = H.MockUpstream(fixtures=cls.fixtures).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            shutil.rmtree(cls.fixtures, ignore_errors=True)

    def citegate(self, env=None):
        cg = H.Citegate(upstream=self.mock.url, env=env).start()
        self.addCleanup(cg.cleanup)
        return cg

    def wait_paused(self, cg, n):
        got = H.wait_for(lambda: backpressure_metrics(cg)[1] == n, 10, 0.01)
        self.assertTrue(got, f"streams_paused is not {n}: {backpressure_metrics(cg)}")

    def test_client_that_stops_reading_is_counted_until_it_reads(self):
        cg = self.citegate()
        # An answer its client reads at once never stalls.
        st, _, _ = cg.request("POST", "/v1/chat/completions", H.chat_body(stream=True),
                              {"X-Mock-Fixture": "azure_oyd_stream.sse"})
        self.assertEqual(st, 200)
        self.assertEqual(backpressure_metrics(cg)[:2], (0, 0))
        sock = request_big(cg)
        self.wait_paused(cg, 1)
        stalls, _, _ = backpressure_metrics(cg)
        self.assertGreaterEqual(stalls, 1)
        # Paused, the stream stays paused: no more stalls while nothing is read.
        time.sleep(0.5)
        self.assertEqual(backpressure_metrics(cg)[:2], (stalls, 1))
        head, _, rest = H.read_to_eof(sock).partition(b"\r\n\r\n")
        self.assertIn(b"200 OK", head.split(b"\r\n")[0])
        self.assertEqual(H.dechunk(rest), self.body)
        self.wait_paused(cg, 0)
        after, _, disconnects = backpressure_metrics(cg)
        # Reading at its own pace the client fell behind again and again: each pause counts.
        self.assertGreaterEqual(after, stalls)
        self.assertEqual(disconnects, 0)

    def test_client_that_leaves_while_paused(self):
        cg = self.citegate()
        sock = request_big(cg)
        self.wait_paused(cg, 1)
        stalls, _, _ = backpressure_metrics(cg)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()
        self.wait_paused(cg, 0)
        self.assertTrue(H.wait_for(lambda: backpressure_metrics(cg)[2] == 1, 5))
        self.assertEqual(backpressure_metrics(cg), (stalls, 0, 1))

    def test_paused_stream_ended_by_the_idle_timeout(self):
        """Paused, the upstream sends nothing: the idle timeout ends the stream (SPEC §6's
        error event), and the gauge falls with it."""
        cg = self.citegate({"CITEGATE_IDLE_TIMEOUT_MS": "1500"})
        sock = request_big(cg)
        self.wait_paused(cg, 1)
        stalls, _, _ = backpressure_metrics(cg)
        time.sleep(2.5)
        self.assertEqual(backpressure_metrics(cg)[:2], (stalls, 0))
        data = H.read_to_eof(sock)
        self.assertIn(b"upstream went idle", data[-4096:])
        self.assertEqual(backpressure_metrics(cg)[1], 0)

    def test_h2_client_that_stops_reading_gets_every_byte(self):
        """An h2 client with wide windows that leaves its socket unread: the frames wait,
        then the stream's queue, until the stream pauses; once the client reads again, the
        answer arrives whole, in order, and ends."""
        cg = self.citegate()
        # Its windows hold the whole answer, so it sends no WINDOW_UPDATE: one per frame
        # would look like a flood of control frames (SPEC §9) once 8 MB arrive at once.
        c = F.H2Client(cg.port, rcvbuf=16384, window_updates=False)
        self.addCleanup(c.abort)
        sid = c.request("POST", "/v1/chat/completions",
                        json.dumps({"stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode(),
                        {"x-mock-fixture": "big.sse"})
        self.wait_paused(cg, 1)
        st = c.response(sid, timeout=60)
        self.assertEqual((st.status, st.ended, st.reset), (200, True, None))
        self.assertEqual(bytes(st.body), self.body)
        self.wait_paused(cg, 0)

    def test_h2_stream_reset_while_paused(self):
        """An h2 client that opens no window beyond the first 64 KiB: its stream's queue
        passes the high-water mark and the stream pauses; its RST_STREAM ends it."""
        cg = self.citegate()
        c = F.H2Client(cg.port, handshake=False)
        self.addCleanup(c.abort)
        c.send(F.PREFACE + F.settings([(F.SETTINGS_ENABLE_PUSH, 0)]))
        sid = c.request("POST", "/v1/chat/completions",
                        json.dumps({"stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode(),
                        {"x-mock-fixture": "big.sse"})
        self.wait_paused(cg, 1)
        stalls, _, _ = backpressure_metrics(cg)
        self.assertGreaterEqual(stalls, 1)
        c.send(F.rst_stream(sid))
        self.wait_paused(cg, 0)
        self.assertEqual(backpressure_metrics(cg)[:2], (stalls, 0))


if __name__ == "__main__":
    unittest.main()
