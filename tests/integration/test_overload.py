"""Overload and hostile HTTP/1.1 input (SPEC §3, §4, §6 rule 6, §9, §11), each attack
measured together with a neighbour client's answer and latency.

run:  cd tests/integration && CITEGATE_BIN=../../build/citegate python3 -m unittest -v test_overload
"""
import json
import os
import re
import resource
import socket
import sys
import threading
import time
import unittest

sys.dont_write_bytecode = True
import harness as H  # noqa: E402

MOCK = None
CHAT = "/v1/chat/completions"


def setUpModule():
    global MOCK
    MOCK = H.MockUpstream().start()


def tearDownModule():
    if MOCK:
        MOCK.cleanup()


def metric(cg, name, labels=""):
    """Value of one series in /metrics (0 when absent)."""
    _, _, body = cg.admin("GET", "/metrics")
    pat = re.compile(r"^citegate_%s%s (\S+)$" % (re.escape(name), re.escape(labels)), re.M)
    m = pat.search(body.decode())
    return float(m.group(1)) if m else 0.0


def chat(cg, stream=True, headers=None, timeout=10):
    return cg.request("POST", CHAT, body=H.chat_body(stream=stream), headers=headers or {},
                      timeout=timeout)


class Neighbour:
    """A well-behaved client asking for /v1/models every 10 ms in a thread; records
    each status and latency. admin=True asks the admin listener's /healthz instead (for
    cases that hold every upstream connection on purpose): the same worker's loop."""

    def __init__(self, cg, admin=False):
        self.cg, self.admin, self.results, self.stop_flag = cg, admin, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop_flag.is_set():
            t = time.monotonic()
            try:
                if self.admin:
                    status, _, _ = self.cg.admin("GET", "/healthz", timeout=5)
                else:
                    status, _, _ = self.cg.request("GET", "/v1/models", timeout=5)
            except OSError:
                status = None
            self.results.append((status, time.monotonic() - t))
            time.sleep(0.01)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        # A short attack still gets a few of the neighbour's requests beside it.
        H.wait_for(lambda: len(self.results) >= 3, 5)
        self.stop_flag.set()
        self.thread.join(10)

    def check(self, test, max_latency):
        test.assertGreater(len(self.results), 2, "the neighbour made too few requests")
        bad = [r for r in self.results if r[0] != 200]
        test.assertEqual(bad, [], "the neighbour got errors")
        worst = max(lat for _, lat in self.results)
        test.assertLess(worst, max_latency, f"the neighbour waited {worst * 1000:.0f} ms")
        return worst


class Case(H.DaemonCase):
    env = {}
    upstream = True

    @classmethod
    def setUpClass(cls):
        cls.cg = H.Citegate(upstream=MOCK.url if cls.upstream else None, env=dict(cls.env)).start()


class QueueFull(Case):
    """One upstream connection, one waiting place: the third request is refused at once."""
    env = {"CITEGATE_UPSTREAM_MAX_CONNECTIONS": "1", "CITEGATE_UPSTREAM_MAX_PENDING": "1",
           "CITEGATE_UPSTREAM_QUEUE_TIMEOUT_MS": "5000"}

    def test_full_queue_gets_503_upstream_busy(self):
        with Neighbour(self.cg, admin=True) as n:
            self.full_queue()
        n.check(self, 1.0)

    def full_queue(self):
        MOCK.reset()
        hold = H.RawClient(self.cg.port)
        hold.send_request("POST", CHAT, body=H.chat_body(stream=True),
                          headers={"X-Mock-Fault": "stall"})
        H.wait_for(lambda: MOCK.stats()["requests"] == 1, 5)
        waiter = H.RawClient(self.cg.port)
        waiter.send_request("POST", CHAT, body=H.chat_body(stream=True))
        H.wait_for(lambda: metric(self.cg, "upstream_queue_length") == 1, 5)
        self.assertEqual(metric(self.cg, "upstream_queue_length"), 1)
        t = time.monotonic()
        status, headers, body = chat(self.cg)
        self.assertLess(time.monotonic() - t, 1.0, "a full queue must answer at once")
        self.assertEqual(status, 503)
        self.assertEqual(headers.get("Retry-After"), "1")
        self.assertEqual(json.loads(body)["error"]["code"], "upstream_busy")
        self.assertEqual(metric(self.cg, "upstream_queue_rejections_total", '{reason="full"}'), 1)
        self.assertEqual(MOCK.stats()["requests"], 1, "the refused request reached the upstream")
        hold.abort()
        # the waiting request gets the freed connection and its whole answer
        resp = H.RawResponse(waiter, time.monotonic()).read_head()
        self.assertEqual(resp.status, 200)
        resp.read_all()
        self.assertTrue(resp.complete)
        waiter.close()


class QueueTimeout(Case):
    env = {"CITEGATE_UPSTREAM_MAX_CONNECTIONS": "1", "CITEGATE_UPSTREAM_QUEUE_TIMEOUT_MS": "300",
           "CITEGATE_CONNECT_TIMEOUT_MS": "5000"}

    def test_wait_beyond_queue_timeout_gets_503_not_connect_error(self):
        with Neighbour(self.cg, admin=True) as n:
            self.timed_out()
        n.check(self, 1.0)

    def timed_out(self):
        MOCK.reset()
        hold = H.RawClient(self.cg.port)
        hold.send_request("POST", CHAT, body=H.chat_body(stream=True),
                          headers={"X-Mock-Fault": "stall"})
        H.wait_for(lambda: MOCK.stats()["requests"] == 1, 5)
        t = time.monotonic()
        status, headers, body = chat(self.cg)
        waited = time.monotonic() - t
        self.assertEqual(status, 503)
        self.assertEqual(headers.get("Retry-After"), "1")
        err = json.loads(body)["error"]
        self.assertEqual(err["code"], "upstream_busy")
        self.assertNotIn("connect timed out", err["message"])
        self.assertNotIn("connect failed", err["message"])
        self.assertGreater(waited, 0.25)
        self.assertLess(waited, 2.0)
        self.assertEqual(metric(self.cg, "upstream_queue_rejections_total", '{reason="timeout"}'), 1)
        self.assertEqual(metric(self.cg, "upstream_queue_length"), 0)
        hold.abort()


class SilentClients(Case):
    """Connections that never finish a request head are closed after the request timeout,
    and an idle keep-alive one too; a neighbour is served all along."""
    env = {"CITEGATE_REQUEST_TIMEOUT_MS": "400"}

    def closed_within(self, sock, seconds):
        sock.settimeout(seconds)
        t = time.monotonic()
        try:
            while sock.recv(4096):
                pass
        except socket.timeout:
            return None
        except OSError:
            pass
        return time.monotonic() - t

    def test_silent_and_slow_heads_are_closed(self):
        with Neighbour(self.cg) as n:
            silent = [socket.create_connection(("127.0.0.1", self.cg.port)) for _ in range(20)]
            slow = socket.create_connection(("127.0.0.1", self.cg.port))
            stop = time.monotonic() + 2.0

            def dribble():  # one byte every 100 ms: never a whole head
                for b in b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n":
                    if time.monotonic() > stop:
                        return
                    try:
                        slow.send(bytes([b]))
                    except OSError:
                        return
                    time.sleep(0.1)

            th = threading.Thread(target=dribble, daemon=True)
            th.start()
            for s in silent:
                took = self.closed_within(s, 3.0)
                self.assertIsNotNone(took, "a silent connection stayed open")
            self.assertIsNotNone(self.closed_within(slow, 3.0), "a 1 byte/100 ms head stayed open")
            th.join(5)
        n.check(self, 1.0)

    def test_idle_h2_connection_gets_goaway(self):
        import h2frames as F
        c = F.H2Client(self.cg.port)
        c.wait_settings()
        t = time.monotonic()
        c.read_until(lambda: c.eof, 3.0)
        self.assertTrue(c.eof, "an idle h2 connection stayed open")
        self.assertLess(time.monotonic() - t, 2.0)
        self.assertEqual(c.goaway and c.goaway[1], F.NO_ERROR)
        c.close()

    def test_idle_keepalive_is_closed(self):
        c = H.RawClient(self.cg.port)
        resp = c.request("GET", "/v1/models")
        self.assertEqual(resp.status, 200)
        resp.read_all()
        self.assertIsNotNone(self.closed_within(c.sock, 3.0), "an idle keep-alive connection stayed open")


class ClientCap(Case):
    """At CITEGATE_MAX_CLIENT_CONNECTIONS the worker stops accepting (without spinning) and
    takes the next connection once one closes."""
    env = {"CITEGATE_MAX_CLIENT_CONNECTIONS": "4"}

    def cpu_seconds(self):
        with open(f"/proc/{self.cg.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def test_accept_pauses_at_cap(self):
        with Neighbour(self.cg, admin=True) as n:
            self.at_cap()
        n.check(self, 1.0)

    def at_cap(self):
        held = [H.RawClient(self.cg.port) for _ in range(4)]
        for c in held:
            c.send_request("GET", "/v1/models")
        H.wait_for(lambda: metric(self.cg, "client_connections") == 4, 5)
        self.assertEqual(metric(self.cg, "client_connections"), 4)
        extra = H.RawClient(self.cg.port, timeout=5)  # the kernel completes the handshake
        extra.send_request("GET", "/v1/models")
        cpu = self.cpu_seconds()
        extra.sock.settimeout(0.8)
        with self.assertRaises(socket.timeout):
            extra.sock.recv(100)
        self.assertLess(self.cpu_seconds() - cpu, 0.3, "the worker spins at the cap")
        held[0].close()
        extra.sock.settimeout(5)
        resp = H.RawResponse(extra, time.monotonic()).read_head()
        self.assertEqual(resp.status, 200)
        for c in held[1:] + [extra]:
            c.close()


class StrictHTTP1(Case):
    """SPEC §4: malformed or ambiguous requests get 400 and nothing is sent upstream."""

    def raw_status(self, data):
        s = socket.create_connection(("127.0.0.1", self.cg.port), timeout=5)
        s.sendall(data)
        out = b""
        try:
            while b"\r\n" not in out:
                d = s.recv(4096)
                if not d:
                    break
                out += d
        finally:
            s.close()
        return out.split(b"\r\n")[0]

    def test_bad_requests_get_400_and_nothing_upstream(self):
        body = H.chat_body(stream=True)
        cases = {
            "XX after chunk": b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                              b"%x\r\n%sXX0\r\n\r\n" % (CHAT.encode(), len(body), body),
            "no Host": b"POST %s HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (CHAT.encode(), len(body), body),
            "two Hosts": b"POST %s HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: %d\r\n\r\n%s"
                         % (CHAT.encode(), len(body), body),
            "dot-dot": b"GET /v1/../../x HTTP/1.1\r\nHost: a\r\n\r\n",
            "encoded dot-dot": b"GET /v1/%2e%2E/x HTTP/1.1\r\nHost: a\r\n\r\n",
            "dot": b"GET /v1/./models HTTP/1.1\r\nHost: a\r\n\r\n",
            "obs-fold in TE": b"POST %s HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n"
                              % CHAT.encode(),
            "CL and TE": b"POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                         % CHAT.encode(),
        }
        MOCK.reset()
        with Neighbour(self.cg) as n:
            for name, data in cases.items():
                with self.subTest(name):
                    self.assertEqual(self.raw_status(data), b"HTTP/1.1 400 Bad Request")
        n.check(self, 1.0)
        refused = [r for r in MOCK.requests() if r["path"] != "/v1/models"]
        self.assertEqual(refused, [], "a refused request reached the upstream")
        # the same shapes done right are served
        status, _, _ = self.cg.request("GET", "/v1/models")
        self.assertEqual(status, 200)

    def test_deep_nesting_400_fast(self):
        """JSON nested deeper than 64 levels is refused before it is parsed: jsmn's cost
        grows with the depth at each closing bracket, and 80 KB of brackets used to hold
        the loop for seconds. 2 MB of them get a clear 400 while a neighbour is served;
        a tool output nested that deep in a request is a string to the request, and goes
        upstream as it came."""
        deep = b'{"messages":[{"role":"user","content":"q"}],"x":' + b"[" * 1000000 + b"]" * 1000000 + b"}"
        MOCK.reset()
        with Neighbour(self.cg) as n:
            t = time.monotonic()
            status, _, body = self.cg.request("POST", CHAT, body=deep, timeout=30)
            took = time.monotonic() - t
        self.assertEqual(status, 400, body[:300])
        err = json.loads(body)["error"]
        self.assertEqual(err["code"], "invalid_json")
        self.assertIn("deeper than 64 levels", err["message"])
        self.assertLess(took, 2.0)
        n.check(self, 1.0)
        self.assertEqual([r for r in MOCK.requests() if r["path"] == CHAT], [])
        # 64 levels are fine
        ok = json.loads(H.chat_body(stream=False))
        ok["x"] = json.loads("[" * 63 + "]" * 63)
        status, _, body = self.cg.request("POST", CHAT, body=json.dumps(ok).encode(), timeout=10)
        self.assertEqual(status, 200, body[:300])

    def raw_status_in_pieces(self, pieces):
        """Like raw_status, each piece in its own read (the server sees the cut)."""
        s = socket.create_connection(("127.0.0.1", self.cg.port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        out = b""
        try:
            for p in pieces:
                s.sendall(p)
                time.sleep(0.05)
            while b"\r\n" not in out:
                d = s.recv(4096)
                if not d:
                    break
                out += d
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            s.close()
        return out.split(b"\r\n")[0]

    def test_obs_fold_in_framing_headers_400(self):
        """SPEC §4: obs-fold in Content-Length or Transfer-Encoding gets 400, whole or cut
        anywhere around the fold, and a valid body behind it never goes upstream."""
        body = H.chat_body(stream=False)
        head = b"POST %s HTTP/1.1\r\nHost: a\r\n" % CHAT.encode()
        cl = head + b"Content-Length:\r\n %d\r\n\r\n%s" % (len(body), body)
        te = head + b"Transfer-Encoding:\r\n chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        tab = head + b"Content-Length:\r\n\t%d\r\n\r\n%s" % (len(body), body)
        MOCK.reset()
        for name, data in {"CL": cl, "TE": te, "tab": tab}.items():
            fold = data.index(b":\r\n") + 3
            for cut in (None, fold, fold + 1):
                with self.subTest(name, cut=cut):
                    pieces = [data] if cut is None else [data[:cut], data[cut:]]
                    self.assertEqual(self.raw_status_in_pieces(pieces), b"HTTP/1.1 400 Bad Request")
        self.assertEqual(MOCK.requests(), [], "a folded request reached the upstream")
        # an unfolded one is served, and a fold elsewhere is read as a space (RFC 9112 §5.2)
        ok = head + b"X-A: b\r\n c\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        self.assertEqual(self.raw_status_in_pieces([ok]), b"HTTP/1.1 200 OK")

    def test_unknown_transfer_coding_501(self):
        """RFC 9112 §6.1: a transfer coding citegate does not decode gets 501 and goes
        nowhere; it would be read, or forwarded, as if the body had none."""
        body = H.chat_body(stream=False)
        chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        MOCK.reset()
        for path in (CHAT.encode(), b"/echo"):
            for te in (b"gzip, chunked", b"deflate,chunked",
                       b"x-custom, chunked"):
                with self.subTest(path=path, te=te):
                    req = b"POST %s HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: %s\r\n\r\n%s" % (
                        path, te, chunked)
                    self.assertEqual(self.raw_status_in_pieces([req]),
                                     b"HTTP/1.1 501 Not Implemented")
        self.assertEqual(MOCK.requests(), [], "a request in another coding reached the upstream")
        ok = b"POST %s HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:  Chunked \r\n\r\n%s" % (
            CHAT.encode(), chunked)
        self.assertEqual(self.raw_status_in_pieces([ok]), b"HTTP/1.1 200 OK")


class UpstreamInterim(Case):
    def test_101_and_102_are_502(self):
        with Neighbour(self.cg) as n:
            for code in (101, 102):
                with self.subTest(code):
                    status, _, body = chat(self.cg, headers={"X-Mock-Fault": f"interim:{code}"})
                    self.assertEqual(status, 502)
                    self.assertEqual(json.loads(body)["error"]["type"], "upstream_error")
        n.check(self, 1.0)

    def test_100_and_103_are_waited_out(self):
        for code in (100, 103):
            with self.subTest(code):
                status, _, body = chat(self.cg, stream=False, headers={"X-Mock-Fault": f"interim:{code}"})
                self.assertEqual(status, 200)
                self.assertIn(b"choices", body)


class EncodedAnswer(Case):
    def test_gzip_answer_is_forwarded_unchanged(self):
        import gzip
        before = metric(self.cg, "passthrough_total", '{reason="encoded"}')
        with Neighbour(self.cg) as n:
            for stream in (True, False):
                with self.subTest(stream=stream):
                    status, headers, body = chat(self.cg, stream=stream,
                                                 headers={"X-Mock-Fault": "gzip"})
                    self.assertEqual(status, 200)
                    self.assertEqual(headers.get("Content-Encoding"), "gzip")
                    fixture = "azure_oyd_stream.sse" if stream else "azure_oyd_response.json"
                    self.assertEqual(gzip.decompress(body), H.fixture_bytes(fixture))
        n.check(self, 1.0)
        self.assertEqual(metric(self.cg, "passthrough_total", '{reason="encoded"}'), before + 2)


class Cors(Case):
    env = {"CITEGATE_CORS_ORIGINS": "https://app.example, https://other.example"}

    def test_preflight_answered_here(self):
        MOCK.reset()
        status, headers, body = self.cg.request("OPTIONS", CHAT, headers={
            "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization"})
        self.assertEqual(status, 204)
        self.assertEqual(body, b"")
        self.assertEqual(headers.get("Access-Control-Allow-Origin"), "https://app.example")
        self.assertEqual(headers.get("Access-Control-Allow-Methods"), "GET, POST, OPTIONS")
        self.assertEqual(headers.get("Access-Control-Allow-Headers"), "content-type, authorization")
        self.assertEqual(headers.get("Access-Control-Max-Age"), "600")
        self.assertIn("Origin", headers.get("Vary"))
        self.assertIsNone(headers.get("Content-Length"))
        self.assertEqual(MOCK.stats()["requests"], 0, "a preflight was forwarded")

    def test_answers_to_allowed_origins(self):
        status, headers, _ = chat(self.cg, headers={"Origin": "https://other.example"})
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("Access-Control-Allow-Origin"), "https://other.example")
        self.assertEqual(headers.get("Access-Control-Expose-Headers"), "X-Request-Id")
        status, headers, _ = chat(self.cg, headers={"Origin": "https://evil.example"})
        self.assertEqual(status, 200)
        self.assertIsNone(headers.get("Access-Control-Allow-Origin"))

    def parse_response(self, raw):
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        hdrs = H.Headers((k.strip(), v.strip()) for k, _, v in (l.partition(":") for l in lines[1:]))
        return lines[0], hdrs, body

    def raw_response(self, data):
        """Sends data and reads the response to EOF (a refusal closes)."""
        s = socket.create_connection(("127.0.0.1", self.cg.port), timeout=5)
        out = b""
        try:
            s.sendall(data)
            while True:
                d = s.recv(65536)
                if not d:
                    break
                out += d
        except ConnectionResetError:
            pass
        finally:
            s.close()
        return self.parse_response(out)

    def test_parser_refusals_carry_request_id_and_cors(self):
        """SPEC §4: X-Request-Id and, for an allowed Origin, CORS headers on every answer,
        also the parser's own 400, 413 and 431; the 400 says what was wrong."""
        o = b"Origin: https://app.example\r\n"
        cases = {
            "CL+TE": (400, b"POST %s HTTP/1.1\r\nHost: a\r\n%sX-Request-Id: rid-clte\r\n"
                           b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", None),
            "bad chunk": (400, b"POST %s HTTP/1.1\r\nHost: a\r\n%sX-Request-Id: rid-chunk\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n3\r\nabcXX0\r\n\r\n", None),
            "no Host": (400, b"POST %s HTTP/1.1\r\n%sX-Request-Id: rid-nohost\r\n"
                             b"Content-Length: 2\r\n\r\n{}", "Host"),
            "two Hosts": (400, b"GET %s HTTP/1.1\r\nHost: a\r\nHost: b\r\n%s"
                               b"X-Request-Id: rid-twohosts\r\n\r\n", "Host"),
            "413": (413, b"POST %s HTTP/1.1\r\nHost: a\r\n%sX-Request-Id: rid-413\r\n"
                         b"Content-Length: 999999999999\r\n\r\n", None),
            "413 no id": (413, b"POST %s HTTP/1.1\r\nHost: a\r\n%s"
                               b"Content-Length: 999999999999\r\n\r\n", None),
        }
        MOCK.reset()
        for name, (status, data, says) in cases.items():
            with self.subTest(name):
                line, hdrs, body = self.raw_response(data % (CHAT.encode(), o))
                self.assertTrue(line.startswith("HTTP/1.1 %d " % status), line)
                rid = re.search(rb"X-Request-Id: (\S+)\r\n", data)
                if rid:
                    self.assertEqual(hdrs.get("X-Request-Id"), rid.group(1).decode())
                else:
                    self.assertTrue(hdrs.get("X-Request-Id"), hdrs)
                self.assertEqual(hdrs.get("Access-Control-Allow-Origin"), "https://app.example")
                self.assertEqual(hdrs.get("Access-Control-Expose-Headers"), "X-Request-Id")
                msg = json.loads(body)["error"]["message"]
                self.assertNotIn("callback", msg)
                if says:
                    self.assertIn(says, msg)
        # 431: the id and the Origin were read before the headers grew too large
        status, raw = H.send_oversized(self.cg.port, b"GET /v1/models HTTP/1.1\r\nHost: a\r\n" + o
                                       + b"X-Request-Id: rid-431\r\nX-Big: ", b"x" * (80 << 10))
        self.assertEqual(status, 431)
        _, hdrs, _ = self.parse_response(raw)
        self.assertEqual(hdrs.get("X-Request-Id"), "rid-431")
        self.assertEqual(hdrs.get("Access-Control-Allow-Origin"), "https://app.example")
        self.assertEqual(MOCK.requests(), [])


class OwnFixtures(H.DaemonCase):
    """A case with its own mock upstream serving the answers fixtures()
    returns ({file name: bytes}) and its own citegate with env."""
    env = {}

    @classmethod
    def fixtures(cls):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.dir = tempfile.mkdtemp(prefix="cg-own-")
        for name, data in cls.fixtures().items():
            with open(os.path.join(cls.dir, name), "wb") as f:
                f.write(data)
        cls.mock = H.MockUpstream(fixtures=cls.dir).start()
        cls.cg = H.Citegate(upstream=cls.mock.url, env=dict(cls.env)).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            import shutil
            shutil.rmtree(cls.dir, ignore_errors=True)


class OversizedEvent(OwnFixtures):
    """SPEC §6 rule 6: an event over CITEGATE_MAX_EVENT_BYTES goes through unchanged and is
    counted; the events around it are still transformed."""
    # Above the context event (about 2 KB), below the big one (6 KB).
    env = {"CITEGATE_MAX_EVENT_BYTES": "4096"}
    big = (b'data: {"id":"big","choices":[{"index":0,"delta":{"content":" ' + b"x" * 6000 +
           b'"},"finish_reason":null}]}')

    @classmethod
    def fixtures(cls):
        events = H.fixture_bytes("azure_oyd_stream.sse").split(b"\n\n")
        return {"oversized.sse": b"\n\n".join(events[:2] + [cls.big] + events[2:])}

    def test_oversized_event_forwarded_and_counted(self):
        status, _, body = chat(self.cg, headers={"X-Mock-Fixture": "oversized.sse"})
        self.assertEqual(status, 200)
        self.assertIn(self.big, body, "the oversized event was not forwarded unchanged")
        self.assertIn(b'"type":"source"', body, "the rest of the stream was not transformed")
        self.assertTrue(body.rstrip().endswith(b"data: [DONE]"))
        self.assertEqual(metric(self.cg, "sse_oversized_total"), 1)


def chunk_sizes(body):
    """The sizes of a chunked HTTP/1.1 body's chunks, the last (0) left out."""
    sizes, i = [], 0
    while i < len(body):
        j = body.index(b"\r\n", i)
        size = int(body[i:j], 16)
        if size == 0:
            break
        sizes.append(size)
        i = j + 2 + size + 2
    return sizes


class TinyChunks(OwnFixtures):
    """A hostile upstream sends its answer as one-byte chunks, thousands in
    each read. llhttp reports them one by one; citegate hands one read's
    chunks to the transformer and the client together, so the work and the
    client's writes follow the reads, not the chunks or the events (a write
    per event would be EVENTS chunks downstream). Every byte arrives, and a
    neighbour is served meanwhile."""

    EVENTS = 2000

    @classmethod
    def fixtures(cls):
        out = []
        for i in range(cls.EVENTS):
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                     "choices": [{"index": 0, "delta": {"content": f" w{i}"}, "finish_reason": None}]}
            out.append("data: " + json.dumps(chunk) + "\n\n")
        out.append('data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
                   "data: [DONE]\n\n")
        cls.body = "".join(out).encode()
        return {"tiny.sse": cls.body}

    def test_one_byte_chunks_cost_a_write_per_read(self):
        body = json.dumps({"stream": True, "messages": [{"role": "user", "content": "hi"}]})
        # 1-byte chunks (6 bytes each on the wire), written 1 MiB at a time.
        head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "X-Mock-Fixture: tiny.sse\r\nX-Mock-Split: 1\r\nX-Mock-Split-Wire: 1048576\r\n"
                f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode()
        with Neighbour(self.cg) as nb:
            sock = socket.create_connection(("127.0.0.1", self.cg.port), timeout=30)
            sock.sendall(head)
            data = H.read_to_eof(sock)
        status, _, rest = data.partition(b"\r\n\r\n")
        self.assertIn(b" 200 ", status.split(b"\r\n")[0])
        # No reference in it: the answer comes through byte for byte.
        self.assertEqual(H.dechunk(rest), self.body)
        writes = len(chunk_sizes(rest))
        self.assertLess(writes, self.EVENTS // 4,
                        f"{writes} chunks downstream for {self.EVENTS} events in {len(self.body)} "
                        "one-byte upstream chunks: not one write per read")
        nb.check(self, 1.0)


class NoCors(Case):
    def test_preflight_forwarded_when_unset(self):
        MOCK.reset()
        status, headers, _ = self.cg.request("OPTIONS", "/echo", headers={
            "Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
        self.assertEqual(MOCK.stats()["requests"], 1)
        self.assertIsNone(headers.get("Access-Control-Allow-Origin"))


class DefaultsCarryManyStreams(Case):
    """SPEC §3 defaults (1024 connections): 300 concurrent streams get their whole answers;
    bench/streams.py runs 1,000."""

    def test_many_concurrent_streams_with_defaults(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 1024:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
        clients = []
        for _ in range(300):
            c = H.RawClient(self.cg.port, timeout=30)
            c.send_request("POST", CHAT, body=H.chat_body(stream=True), headers={"X-Mock-Delay-Ms": "20"})
            clients.append(c)
        done = 0
        for c in clients:
            resp = H.RawResponse(c, time.monotonic()).read_head()
            self.assertEqual(resp.status, 200)
            resp.read_all(timeout=30)
            done += resp.complete
            c.close()
        self.assertEqual(done, 300)


if __name__ == "__main__":
    unittest.main()
