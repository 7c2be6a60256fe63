"""`citegate health [--admin-listen ADDR:PORT]`, the image's health probe: exit 0
when GET /readyz answers 200 within 1 s, else 1 with one line on stderr.

Against a live citegate (ready, then draining), and against stub listeners the
test controls: nothing listening, a listener that never answers, one that
answers too late, closes at once, answers garbage or answers 503."""
import os
import socket
import subprocess
import threading
import time
import unittest

import harness as H


def health(args=(), env=None, timeout=10):
    """Runs `citegate health ARGS` with a clean environment (plus env); returns
    (exit status, stdout, stderr, seconds taken)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(H.Citegate.CLEAN_PREFIXES)}
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([H.citegate_bin(), "health"] + list(args), env=e, capture_output=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout.decode(), p.stderr.decode(), time.monotonic() - t0


class Stub:
    """A listener on 127.0.0.1 that handles each connection with `behave(sock)`
    in a thread, and records the first line of every request it read."""

    def __init__(self, behave):
        self.behave = behave
        self.lines = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.stopping = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self.behave, args=(self, c), daemon=True).start()

    def read_head(self, c):
        data = b""
        c.settimeout(5)
        while b"\r\n\r\n" not in data:
            piece = c.recv(4096)
            if not piece:
                break
            data += piece
        self.lines.append(data.split(b"\r\n", 1)[0].decode("latin-1"))
        return data

    def close(self):
        self.stopping = True
        self.sock.close()
        for c in self.conns:
            c.close()


def answer(status, delay=0.0):
    def behave(stub, c):
        stub.read_head(c)
        time.sleep(delay)
        try:
            c.sendall(f"HTTP/1.1 {status} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                      .encode())
        except OSError:
            pass
    return behave


def silent(stub, c):
    stub.read_head(c)  # reads the request, never answers


def closing(stub, c):
    stub.read_head(c)
    c.close()


def garbage(stub, c):
    stub.read_head(c)
    c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")


class Health(H.DaemonCase):
    def assert_unhealthy(self, result, needle):
        rc, out, err, _ = result
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "")
        self.assertEqual(err.count("\n"), 1, f"not one line: {err!r}")
        self.assertTrue(err.startswith("citegate health: ") and err.endswith("\n"), err)
        self.assertIn(needle, err)

    def stub(self, behave):
        s = Stub(behave)
        self.addCleanup(s.close)
        return s

    def test_ready_citegate(self):
        cg = H.Citegate().start()
        self.addCleanup(cg.cleanup)
        rc, out, err, _ = health(["--admin-listen", f"127.0.0.1:{cg.admin_port}"])
        self.assertEqual((rc, out, err), (0, "", ""))
        rc, out, err, _ = health([f"--admin-listen=127.0.0.1:{cg.admin_port}"])
        self.assertEqual((rc, err), (0, ""))
        # The variable the daemon reads; a wildcard address means this host's loopback.
        rc, out, err, _ = health(env={"CITEGATE_ADMIN_LISTEN": f"0.0.0.0:{cg.admin_port}"})
        self.assertEqual((rc, err), (0, ""))
        # The flag wins over the variable.
        rc, _, err, _ = health(["--admin-listen", f"127.0.0.1:{cg.admin_port}"],
                               env={"CITEGATE_ADMIN_LISTEN": f"127.0.0.1:{H.free_port()}"})
        self.assertEqual((rc, err), (0, ""))
        # The client port answers /readyz with a forwarded 404/502, never a 200 of its own.
        self.assert_unhealthy(health(["--admin-listen", f"127.0.0.1:{cg.port}"]), "/readyz answered")

    def test_draining_citegate_is_unhealthy(self):
        mock = H.MockUpstream().start()
        self.addCleanup(mock.cleanup)
        cg = H.Citegate(upstream=mock.url, env={"CITEGATE_SHUTDOWN_GRACE_MS": "20000"}).start()
        self.addCleanup(cg.cleanup)
        # A stream that runs for seconds keeps the draining citegate (and its admin listener) up.
        c = cg.raw(timeout=20)
        self.addCleanup(c.close)
        r = c.request("POST", "/v1/chat/completions", H.chat_body(stream=True),
                      {"X-Mock-Fixture": "azure_oyd_stream.sse", "X-Mock-Split": "512",
                       "X-Mock-Delay-Ms": "400"})
        self.assertEqual(r.status, 200)
        self.assertEqual(health(["--admin-listen", f"127.0.0.1:{cg.admin_port}"])[0], 0)
        cg.signal(15)
        self.assertTrue(H.wait_for(lambda: cg.admin("GET", "/readyz")[0] == 503, 5))
        self.assert_unhealthy(health(["--admin-listen", f"127.0.0.1:{cg.admin_port}"]),
                              "/readyz answered 503")
        r.read_all(timeout=60)
        self.assertTrue(r.complete, r.text[-300:])
        self.assertIn("data: [DONE]", r.text, "the draining stream ran to its end")
        self.assertEqual(cg.wait(30), 0)

    def test_nothing_listening(self):
        port = H.free_port()
        result = health(["--admin-listen", f"127.0.0.1:{port}"])
        self.assert_unhealthy(result, "cannot connect")
        self.assertLess(result[3], 1.0, "a refused connection needs no timeout")

    def test_listener_that_never_answers(self):
        s = self.stub(silent)
        result = health(["--admin-listen", f"127.0.0.1:{s.port}"])
        self.assert_unhealthy(result, "within 1000 ms")
        self.assertGreaterEqual(result[3], 0.95)
        self.assertLess(result[3], 2.0, "the probe waited beyond its second")
        self.assertEqual(s.lines, ["GET /readyz HTTP/1.1"])

    def test_backlog_never_accepted(self):
        """A listener whose backlog is never accepted: the connect itself completes in the
        kernel, and the probe still gives up at its second."""
        sock = socket.socket()
        self.addCleanup(sock.close)
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        result = health(["--admin-listen", f"127.0.0.1:{sock.getsockname()[1]}"])
        self.assert_unhealthy(result, "within 1000 ms")
        self.assertLess(result[3], 2.0)

    def test_answer_after_the_second_is_too_late(self):
        s = self.stub(answer(200, delay=1.5))
        self.assert_unhealthy(health(["--admin-listen", f"127.0.0.1:{s.port}"]), "within 1000 ms")

    def test_stub_answers(self):
        ok = self.stub(answer(200))
        rc, out, err, _ = health(["--admin-listen", f"127.0.0.1:{ok.port}"])
        self.assertEqual((rc, out, err), (0, "", ""))
        self.assertEqual(ok.lines, ["GET /readyz HTTP/1.1"])
        self.assert_unhealthy(health(["--admin-listen", f"127.0.0.1:{self.stub(answer(503)).port}"]),
                              "/readyz answered 503")
        self.assert_unhealthy(health(["--admin-listen", f"127.0.0.1:{self.stub(answer(204)).port}"]),
                              "/readyz answered 204")
        self.assert_unhealthy(health(["--admin-listen", f"127.0.0.1:{self.stub(closing).port}"]),
                              "closed before an answer")
        self.assert_unhealthy(health(["--admin-listen", f"127.0.0.1:{self.stub(garbage).port}"]),
                              "not an HTTP answer")

    def test_help(self):
        rc, out, err, _ = health(["--help"])
        self.assertEqual((rc, err), (0, ""))
        self.assertTrue(out.startswith("usage: citegate health [--admin-listen ADDR:PORT]\n"), out)

    def test_bad_arguments(self):
        for args, env, needle in (
                (["--admin-listen"], None, "needs a value"),
                (["--listen", "127.0.0.1:1"], None, "unknown argument '--listen'"),
                (["--admin-listen", "localhost"], None, "'localhost' is not ADDRESS:PORT"),
                (["--admin-listen", "127.0.0.1:0"], None, "is not ADDRESS:PORT"),
                (["--admin-listen", "127.0.0.1:99999"], None, "is not ADDRESS:PORT"),
                (["--admin-listen", "example.com:9901"], None, "is not ADDRESS:PORT"),
                ([], {"CITEGATE_ADMIN_LISTEN": "nonsense"}, "'nonsense' is not ADDRESS:PORT")):
            with self.subTest(args=args, env=env):
                self.assert_unhealthy(health(args, env), needle)


if __name__ == "__main__":
    unittest.main()
