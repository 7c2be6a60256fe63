"""A client that resets its TCP connection while citegate writes the reply.

A reset (SO_LINGER {1, 0}, then close) makes citegate's next write to that
socket fail. The moments that matter are those where the failing write happens
inside a callback whose caller keeps going (the llhttp/nghttp2 callbacks, the
upstream's read callback, the demo's timer): the connection must be torn down
without anyone touching freed memory.

Moments, over HTTP/1.1 and over h2c (prior knowledge, same port):
  stopped_before_accept  citegate is SIGSTOPped; the client connects, sends the
                         whole request and resets; then SIGCONT. citegate
                         accepts, reads the request, and its reply write fails.
  stopped_after_accept   the connection is served (h2: a PING round trip) when
                         citegate is stopped; then request, reset, SIGCONT.
  stopped_after_send     the request goes out, citegate is stopped 0-25 ms later
                         (varied), reset, SIGCONT: wherever it was, it goes on.
  mid_stream             the answer is flowing (first body bytes arrived); reset
                         0-90 ms later.
  mid_stream_stopped     the answer is flowing; citegate is stopped, the reset
                         arrives while it is stopped, answer bytes pile up
                         (demo ticks, upstream reads), SIGCONT.

Some repetitions send two requests in one write (h2: two streams; HTTP/1.1:
pipelined), so that whatever a failed write of the first one tore down is
still in use when the second one is parsed: inside nghttp2, which ASan does
not instrument, that is where a freed session becomes visible (our callbacks
run with its freed user data).

Requests: one that is rejected (a chat body that is not JSON: 400), and one
served by the embedded demo (`--demo`, a token every 20 ms), by
tests/tools/mock_upstream.py (HTTP/1.1, 64 bytes every 20 ms) and by the C
h2 mock (tests/tools/h2mock.c, CITEGATE_UPSTREAM_PROTOCOL=h2, 20 ms pacing).

After every repetition: citegate is alive, a normal request on a fresh
connection gets the right answer, and its stderr holds no sanitizer report.
Each test runs its own citegate and ends it with SIGTERM: exit status 0 and
(under ASan, which also checks leaks at exit) still no report. In a release
build the same tests check liveness only.
"""
import http.client
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import harness as H
import client_view
import h2frames as F

H2MOCK = os.environ.get("H2MOCK_BIN", os.path.join(H.ROOT, "build", "tests", "h2mock"))
CHAT = "/v1/chat/completions"
STREAM_BODY = H.chat_body(stream=True)
PLAIN_BODY = H.chat_body(stream=False)
NOT_JSON = b"this is not JSON {"
OP_TIMEOUT = 10.0


def start_h2mock(directory, delay_ms=20):
    """The C h2 mock upstream; returns (process, port)."""
    ready = os.path.join(directory, "h2mock.ready")
    proc = subprocess.Popen([H2MOCK, "--fixtures", H.FIXTURES, "--ready-file", ready,
                             "--delay-ms", str(delay_ms)], preexec_fn=H._die_with_parent,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not H.wait_for(lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, 10):
        proc.kill()
        raise RuntimeError("h2mock did not start")
    with open(ready) as f:
        return proc, int(f.read())


def h1_request_bytes(port, method, path, body, hdrs):
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{k}: {v}" for k, v in hdrs.items()]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def rst_close(sock):
    """Close with RST: SO_LINGER {1, 0}, then close."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class ResetCase(H.DaemonCase):
    """One citegate per test; subclasses pick the upstream."""
    upstream = "demo"

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cg-reset-")
        cls.mock = cls.h2mock = None
        if cls.upstream == "mock":
            cls.mock = H.MockUpstream().start()
        elif cls.upstream == "h2mock":
            cls.h2mock, cls.h2mock_port = start_h2mock(cls.dir)

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            if cls.mock:
                cls.mock.cleanup()
            if cls.h2mock:
                cls.h2mock.terminate()
                cls.h2mock.wait(timeout=5)
            shutil.rmtree(cls.dir, ignore_errors=True)

    # --- citegate -------------------------------------------------------------
    def citegate(self):
        if self.upstream == "demo":
            return H.Citegate(args=["--demo"])
        if self.upstream == "mock":
            return H.Citegate(upstream=self.mock.url)
        return H.Citegate(upstream=f"http://127.0.0.1:{self.h2mock_port}",
                          env={"CITEGATE_UPSTREAM_PROTOCOL": "h2"})

    def setUp(self):
        self.cg = self.citegate().start()
        self.baseline = None
        self.baseline = self.clean_view("h1", "baseline")
        if self.upstream == "demo":
            self.assertIn("[[doc1]](https://docs.example.com/x100/manual.pdf)",
                          self.baseline["content"]["0"])
        else:
            exp = H.expected("azure_oyd_response.openwebui.json")
            self.assertEqual(self.baseline["content"], exp["content"])
            self.assertEqual(self.baseline["sources"], exp["sources"])

    def tearDown(self):
        self.cg.resume()
        if os.environ.get("CG_KEEP"):
            self.cg.stop()
            print(f"\n{self.id()}: kept {self.cg.dir}")
        else:
            self.cg.cleanup()

    def died(self, what, settle=0.0):
        """A description of citegate's state for a failure message; with settle, first give a
        dying process (a sanitizer report takes a while to print) that long to exit."""
        if settle:
            H.wait_for(lambda: self.cg.proc.poll() is not None, settle)
        rc = self.cg.proc.poll()
        reports = self.cg.sanitizer_reports()
        return (f"{what}: citegate {H.describe_exit(rc)}; sanitizer reports: "
                f"{reports[:2] if reports else 'none'}; stderr tail: {self.cg.stderr()[-1500:]}")

    def check_healthy(self, what):
        """citegate is alive, answers a fresh connection right, and reported nothing."""
        self.clean_view("h2c" if "h2c" in what else "h1", what)
        self.assertIsNone(self.cg.proc.poll(), self.died(what))
        self.assertEqual(self.cg.sanitizer_reports(), [], self.died(what))

    def finish(self):
        """SIGTERM: exit 0 and no sanitizer report (leaks included under ASan)."""
        self.assertIsNone(self.cg.proc.poll(), self.died("before SIGTERM"))
        rc = self.cg.stop(timeout=15)
        self.assertEqual(rc, 0, self.died("SIGTERM"))
        self.assertEqual(self.cg.sanitizer_reports(), [], self.died("after SIGTERM"))

    # --- requests ---------------------------------------------------------------
    def served(self):
        """(method, path, body, headers) of a streaming chat request."""
        if self.upstream == "mock":
            return "POST", CHAT, STREAM_BODY, {"X-Mock-Fixture": "azure_oyd_filters_crlf.sse",
                                               "X-Mock-Split": "64", "X-Mock-Delay-Ms": "20"}
        if self.upstream == "h2mock":
            return "POST", CHAT, STREAM_BODY, {"X-Mock-Fixture": "azure_oyd_stream.sse"}
        return "POST", CHAT, STREAM_BODY, {}

    def rejected(self):
        return "POST", CHAT, NOT_JSON, {}

    def clean_view(self, proto, what):
        """A non-streaming chat request on a fresh connection; its client view, checked
        against the baseline."""
        hdrs = {} if self.upstream == "demo" else {"X-Mock-Fixture": "azure_oyd_response.json"}
        try:
            if proto == "h1":
                st, _, body = H.request(self.cg.port, "POST", CHAT, PLAIN_BODY, hdrs,
                                        timeout=OP_TIMEOUT)
            else:
                with F.H2Client(self.cg.port, timeout=OP_TIMEOUT) as c:
                    s = c.response(c.request("POST", CHAT, PLAIN_BODY, hdrs))
                    st, body = s.status, bytes(s.body)
        except (OSError, http.client.HTTPException) as e:
            self.fail(self.died(f"{what}: clean request over {proto} failed ({e!r})", settle=5))
        self.assertEqual(st, 200, f"{what}: {body[:300]!r}")
        v = client_view.view(body.decode("utf-8", "replace"))
        if self.baseline is not None:
            self.assertEqual(v["content"], self.baseline["content"], what)
            self.assertEqual(v["sources"], self.baseline["sources"], what)
        return v

    # --- clients ------------------------------------------------------------------
    def open(self, proto):
        """A connected client socket wrapper: ('h1', socket) or ('h2c', H2Client)."""
        if proto == "h1":
            s = socket.create_connection(("127.0.0.1", self.cg.port), timeout=OP_TIMEOUT)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # see H2Client
            return s
        return F.H2Client(self.cg.port, timeout=OP_TIMEOUT)

    def send(self, proto, conn, req, streams=1):
        method, path, body, hdrs = req
        if proto == "h1":  # more than one: pipelined, in one write
            conn.sendall(h1_request_bytes(self.cg.port, method, path, body, hdrs) * streams)
            return None
        frames = [conn.request_frames(method, path, body, hdrs) for _ in range(streams)]
        conn.send(b"".join(b for _, b in frames))  # one write: one read for citegate
        return [sid for sid, _ in frames]

    def reset(self, proto, conn):
        rst_close(conn) if proto == "h1" else conn.abort()

    def first_body_bytes(self, proto, conn, sids):
        """Waits until the answer flows: for HTTP/1.1 the head and the first body bytes,
        for h2 a DATA frame on the first stream."""
        if proto == "h2c":
            return conn.first_data(sids[0], OP_TIMEOUT)
        got, deadline = b"", time.monotonic() + OP_TIMEOUT
        while time.monotonic() < deadline:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            got += chunk
            head, sep, rest = got.partition(b"\r\n\r\n")
            if sep and rest:
                return head.startswith(b"HTTP/1.1 200")
        return False

    # --- moments ------------------------------------------------------------------
    def stopped_before_accept(self, proto, req, clients=1, streams=1):
        self.cg.pause()
        try:
            for _ in range(clients):
                conn = self.open(proto)
                self.send(proto, conn, req, streams)
                self.reset(proto, conn)
            time.sleep(0.01)
        finally:
            self.cg.resume()

    def stopped_after_accept(self, proto, req, delay=0, streams=1):
        conn = self.open(proto)
        if proto == "h2c":
            conn.sync()  # the preface and SETTINGS are handled and answered
        time.sleep(0.05 if proto == "h1" else delay)  # accepted, waiting for bytes
        self.cg.pause()
        try:
            self.send(proto, conn, req, streams)
            self.reset(proto, conn)
            time.sleep(0.01)
        finally:
            self.cg.resume()

    def stopped_after_send(self, proto, req, delay, streams=1):
        conn = self.open(proto)
        if proto == "h2c":
            conn.sync()
        self.send(proto, conn, req, streams)
        if delay:
            time.sleep(delay)
        self.cg.pause()
        try:
            self.reset(proto, conn)
            time.sleep(0.01)
        finally:
            self.cg.resume()

    def mid_stream(self, proto, req, delay, stop=False):
        conn = self.open(proto)
        sids = self.send(proto, conn, req, streams=2)  # h2: two streams share the connection
        try:
            self.assertTrue(self.first_body_bytes(proto, conn, sids), "the answer did not start")
        except BaseException:
            self.reset(proto, conn)
            raise
        if stop:
            self.cg.pause()
            try:
                self.reset(proto, conn)
                time.sleep(delay)  # answer bytes pile up meanwhile
            finally:
                self.cg.resume()
        else:
            if delay:
                time.sleep(delay)
            self.reset(proto, conn)

    def mid_stream_stopped(self, proto, req, delay):
        self.mid_stream(proto, req, delay, stop=True)

    # --- the cases ----------------------------------------------------------------
    def run_case(self, proto, kind, moment):
        req = self.served() if kind == "served" else self.rejected()
        plans = {
            "stopped_before_accept": [dict(clients=c, streams=n) for c, n in
                                      ((1, 1), (3, 1), (1, 2), (2, 2))],
            "stopped_after_accept": [dict(delay=d, streams=n) for d, n in
                                     ((0, 1), (0.005, 2), (0.02, 1), (0, 2))],
            "stopped_after_send": [dict(delay=d, streams=n) for d, n in
                                   ((0, 1), (0, 2), (0.002, 2), (0.005, 1), (0.010, 2),
                                    (0.025, 1), (0, 2), (0.001, 2))],
            "mid_stream": [dict(delay=d) for d in (0, 0.03, 0.09)],
            "mid_stream_stopped": [dict(delay=d) for d in (0.03, 0.08, 0.15)],
        }
        for i, kw in enumerate(plans[moment]):
            what = f"{proto} {kind} {moment} #{i + 1} {kw}"
            getattr(self, moment)(proto, req, **kw)
            self.check_healthy(what)
        self.finish()


def make_tests(cls, kinds, moments):
    for proto in ("h1", "h2c"):
        for kind in kinds:
            for moment in moments:
                def t(self, proto=proto, kind=kind, moment=moment):
                    self.run_case(proto, kind, moment)
                t.__name__ = f"test_{proto}_{kind}_{moment}"
                t.__doc__ = f"{cls.upstream}: {proto}, {kind} request, reset {moment}"
                setattr(cls, t.__name__, t)
    return cls


ALL = ("stopped_before_accept", "stopped_after_accept", "stopped_after_send", "mid_stream",
       "mid_stream_stopped")
STOPPED = ("stopped_before_accept", "stopped_after_accept", "stopped_after_send")


class Rejected(ResetCase):
    """A chat body that is not JSON: citegate's 400 is the write that fails."""
    upstream = "demo"


class Demo(ResetCase):
    upstream = "demo"


class MockUpstream(ResetCase):
    upstream = "mock"


class H2MockUpstream(ResetCase):
    upstream = "h2mock"


make_tests(Rejected, ("rejected",), STOPPED)
make_tests(Demo, ("served",), ALL)
make_tests(MockUpstream, ("served",), ALL)
make_tests(H2MockUpstream, ("served",), ALL)

if __name__ == "__main__":
    unittest.main()
