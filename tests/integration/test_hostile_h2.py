"""Hostile HTTP/2 clients (SPEC §9), raw frames (h2frames.py), each attack run while a
neighbour client on its own connection is measured: its answers must stay right and its
latency must not grow by more than the SPEC's 10 ms (medians; see NEIGHBOUR_SLACK_MS).

run:  cd tests/integration && CITEGATE_BIN=../../build/citegate python3 -m unittest -v test_hostile_h2
"""
import json
import re
import socket
import statistics
import struct
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True
import h2frames as F  # noqa: E402
import harness as H  # noqa: E402

COMPRESSION_ERROR = 0x9
ENHANCE_YOUR_CALM = 0xB
# The SPEC's bound is 10 ms added to a neighbour; the median of its requests is compared
# with the same client's median just before, on this shared 2-core machine.
NEIGHBOUR_SLACK_MS = 10.0
CHAT = "/v1/chat/completions"
BODY = json.dumps({"stream": False, "messages": [{"role": "user", "content": "hi"}]}).encode()


def metric(cg, name, labels=""):
    _, _, body = cg.admin("GET", "/metrics")
    m = re.search(r"^citegate_%s%s (\S+)$" % (re.escape(name), re.escape(labels)), body.decode(), re.M)
    return float(m.group(1)) if m else 0.0


def pseudo(sid_client, path=CHAT):
    return [(":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", sid_client.authority), ("content-type", "application/json")]


def header_frames(sid, fields, end_stream=True):
    """A header block as HEADERS + CONTINUATION frames of at most 16 KiB."""
    block, out = F.encode_headers(fields), b""
    for i in range(0, len(block), 16384):
        last = i + 16384 >= len(block)
        ftype = F.HEADERS if i == 0 else F.CONTINUATION
        flags = (F.END_HEADERS if last else 0) | (F.END_STREAM if i == 0 and end_stream else 0)
        out += F.frame(ftype, flags, sid, block[i:i + 16384])
    return out


def new_stream(c):
    sid = c.next_sid
    c.next_sid += 2
    c.streams[sid] = F.Stream(sid)
    return sid


class Neighbour:
    """An h2 client asking the embedded demo for a non-streaming answer, one request at a
    time on its own connection, from a thread; records latencies."""

    def __init__(self, port):
        self.port, self.lat, self.errors = port, [], []
        self.stop = threading.Event()

    def one(self, c):
        sid = c.request("POST", CHAT, BODY)
        t = time.monotonic()
        st = c.response(sid, timeout=5)
        lat = time.monotonic() - t
        if st.status != 200 or b"X100" not in st.body:
            self.errors.append((st.status, st.body[:100]))
        return lat

    def measure(self, n):
        with F.H2Client(self.port) as c:
            c.wait_settings()
            return [self.one(c) for _ in range(n)]

    def run(self):
        with F.H2Client(self.port) as c:
            c.wait_settings()
            while not self.stop.is_set():
                self.lat.append(self.one(c))
                time.sleep(0.005)

    def __enter__(self):
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)


class Attacks(H.DaemonCase):
    """One citegate (embedded demo upstream) for a class of attacks, and how to measure
    a neighbour during one."""
    env = {}

    @classmethod
    def setUpClass(cls):
        cls.cg = H.Citegate(upstream=None, env={"CITEGATE_LOG_LEVEL": "error", **cls.env}).start()

    def attacked(self, attack, rounds):
        """Runs attack() `rounds` times while the neighbour is measured; returns the
        neighbour's median latency before and during, in ms."""
        before = Neighbour(self.cg.port).measure(30)
        with Neighbour(self.cg.port) as n:
            time.sleep(0.05)
            for _ in range(rounds):
                attack()
            time.sleep(0.05)
        self.assertEqual(n.errors, [], "the neighbour got wrong answers")
        self.assertGreater(len(n.lat), 5, "the neighbour was starved")
        med_before, med_during = statistics.median(before) * 1000, statistics.median(n.lat) * 1000
        self.assertLess(med_during - med_before, NEIGHBOUR_SLACK_MS,
                        f"neighbour median {med_before:.2f} -> {med_during:.2f} ms")
        return med_before, med_during

    def goaway_then_closed(self, c, timeout=5):
        """Reads until the server's GOAWAY and its end of the connection."""
        c.read_until(lambda: c.eof, timeout)
        self.assertTrue(c.eof, "the hostile connection stayed open")
        return c.goaway


class Hostile(Attacks):
    # --- HPACK bomb: one 4 KB table entry referenced thousands of times --------------
    def bomb(self):
        c = F.H2Client(self.cg.port)
        c.wait_settings()
        block = F.encode_headers(pseudo(c))
        block += b"\x40" + F._hpack_str("x-bomb") + F._hpack_str("a" * 4000)  # indexed: 62
        block += bytes([0x80 | 62]) * 16000
        frames = []
        for i in range(0, len(block), 16384):
            part = block[i:i + 16384]
            last = i + 16384 >= len(block)
            ftype = F.HEADERS if i == 0 else F.CONTINUATION
            flags = (F.END_HEADERS if last else 0) | (F.END_STREAM if i == 0 else 0)
            frames.append(F.frame(ftype, flags, 1, part))
        try:
            c.send(b"".join(frames))
        except OSError:
            pass
        goaway = self.goaway_then_closed(c)
        c.close()
        return goaway

    def test_hpack_bomb_gets_goaway_calm(self):
        before = metric(self.cg, "http2_goaway_sent_total", '{reason="enhance_your_calm"}')
        goaways = []
        self.attacked(lambda: goaways.append(self.bomb()), 20)
        self.assertTrue(all(g is not None and g[1] == ENHANCE_YOUR_CALM for g in goaways), goaways)
        self.assertGreaterEqual(metric(self.cg, "http2_goaway_sent_total",
                                       '{reason="enhance_your_calm"}') - before, 20)

    # --- control frame floods ---------------------------------------------------------
    def flood(self):
        c = F.H2Client(self.cg.port)
        c.wait_settings()
        burst = (F.window_update(0, 1) + F.frame(F.PRIORITY, 0, 3, struct.pack(">IB", 0, 15))) * 1000
        try:
            for _ in range(100):  # up to 200,000 frames (the kernel may buffer them all)
                c.send(burst)
        except OSError:
            pass
        goaway = self.goaway_then_closed(c)
        c.close()
        return goaway

    def test_control_frame_flood_gets_goaway_calm(self):
        before = metric(self.cg, "http2_goaway_sent_total", '{reason="enhance_your_calm"}')
        goaways = []
        self.attacked(lambda: goaways.append(self.flood()), 5)
        self.assertTrue(all(g is not None and g[1] == ENHANCE_YOUR_CALM for g in goaways), goaways)
        self.assertEqual(metric(self.cg, "http2_goaway_sent_total", '{reason="enhance_your_calm"}') - before, 5)

    # --- header lists beyond SETTINGS_MAX_HEADER_LIST_SIZE (65536) -----------------------
    def oversized(self, fields):
        c = F.H2Client(self.cg.port)
        c.wait_settings()
        sid = new_stream(c)
        try:
            c.send(header_frames(sid, [(":method", "GET"), (":scheme", "http"), (":path", "/v1/models"),
                                       (":authority", c.authority)] + fields))
        except OSError:
            pass
        goaway = self.goaway_then_closed(c)
        c.close()
        return goaway, c.streams[sid].status

    def test_header_list_beyond_limit_gets_goaway_calm(self):
        before = metric(self.cg, "http2_goaway_sent_total", '{reason="enhance_your_calm"}')
        got = []
        two_big = [("x-big-1", "v" * 40000), ("x-big-2", "v" * 40000)]  # 80 KB decoded
        self.attacked(lambda: got.append(self.oversized(two_big)), 10)
        self.assertTrue(all(g is not None and g[1] == ENHANCE_YOUR_CALM for g, _ in got), got)
        self.assertEqual([st for _, st in got], [None] * 10, "a request beyond the limit was answered")
        self.assertEqual(metric(self.cg, "http2_goaway_sent_total", '{reason="enhance_your_calm"}') - before, 10)

    def test_one_field_beyond_limit_ends_the_connection(self):
        """One field longer than 65536 bytes: nghttp2's inflater refuses its length before
        any callback sees it, so the GOAWAY says COMPRESSION_ERROR, not ENHANCE_YOUR_CALM
        (the SPEC's code; a known difference). The connection still goes at once."""
        goaway, _ = self.oversized([("x-huge", "v" * 66000)])
        self.assertIsNotNone(goaway)
        self.assertIn(goaway[1], (ENHANCE_YOUR_CALM, COMPRESSION_ERROR))

    def test_large_but_allowed_headers_are_served(self):
        c = F.H2Client(self.cg.port)
        c.wait_settings()
        sid = new_stream(c)
        c.send(header_frames(sid, pseudo(c) + [("x-pad", "p" * 30000)], end_stream=False) +
               F.data(sid, BODY, end_stream=True))
        st = c.response(sid)
        self.assertEqual(st.status, 200)
        self.assertIsNone(c.goaway)
        c.close()

    # --- Rapid Reset (held up before; must keep holding) ---------------------------------
    def rapid_reset(self):
        c = F.H2Client(self.cg.port)
        c.wait_settings()
        out = b""
        for _ in range(2000):
            sid, frames = c.request_frames("POST", CHAT, BODY)
            out += frames + F.rst_stream(sid)
        try:
            c.send(out)
        except OSError:
            pass
        c.read_until(lambda: c.eof, 3)
        c.close()

    def test_rapid_reset_neighbour_unharmed(self):
        self.attacked(self.rapid_reset, 3)
        status, _, _ = self.cg.admin("GET", "/healthz")
        self.assertEqual(status, 200)


class SlowHeads(Attacks):
    """Slowloris over h2 (SPEC §9): a connection whose request head never completes is
    closed at the request timeout, like an HTTP/1.1 one; a complete head whose body
    trickles in is served."""
    env = {"CITEGATE_REQUEST_TIMEOUT_MS": "1000"}

    def partial_heads(self, n):
        """n connections, each stuck inside a header block: half send a HEADERS frame
        without END_HEADERS, half a HEADERS frame shorter than its declared length."""
        conns = []
        for i in range(n):
            c = F.H2Client(self.cg.port)
            c.wait_settings()
            block = F.encode_headers(pseudo(c))
            if i % 2:
                c.send(F.frame(F.HEADERS, F.END_STREAM, 1, block))  # no END_HEADERS
            else:
                c.send(F.frame(F.HEADERS, F.END_STREAM | F.END_HEADERS, 1, block)[:9 + 10])
            conns.append((c, time.monotonic()))
        return conns

    def test_partial_header_block_is_closed(self):
        took = []

        def attack():
            for c, t in self.partial_heads(10):
                c.read_until(lambda: c.eof, 5)
                took.append(time.monotonic() - t if c.eof else None)
                c.close()

        self.attacked(attack, 1)
        self.assertNotIn(None, took, "a connection inside a header block stayed open")
        self.assertGreater(min(took), 0.7, took)  # the timeout, not a protocol error
        self.assertLess(max(took), 2.5, took)

    def test_slow_body_after_complete_head_is_served(self):
        c = F.H2Client(self.cg.port)
        c.wait_settings()
        sid = new_stream(c)
        c.send(F.headers(sid, pseudo(c)))
        for i in range(0, len(BODY), len(BODY) // 4 + 1):  # over 2.4 s, > 2 timeouts
            time.sleep(0.6)
            c.send(F.data(sid, BODY[i:i + len(BODY) // 4 + 1]))
        c.send(F.data(sid, b"", end_stream=True))
        st = c.response(sid)
        self.assertEqual(st.status, 200)
        self.assertIn(b"X100", st.body)
        c.close()


if __name__ == "__main__":
    unittest.main()
