"""TLS on the client listener (CITEGATE_TLS_CERT/KEY): streaming and
non-streaming answers, keep-alive over one TLS connection, bad handshakes."""
import json
import shutil
import socket
import ssl
import tempfile
import unittest

import harness as H
import client_view


class ClientTLS(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cg-ctls-")
        cls.cert, cls.key = H.make_cert(cls.dir)
        cls.mock = H.MockUpstream().start()
        cls.cg = H.Citegate(upstream=cls.mock.url,
                            env={"CITEGATE_TLS_CERT": cls.cert, "CITEGATE_TLS_KEY": cls.key}).start()
        cls.ctx = ssl.create_default_context(cafile=cls.cert)

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            shutil.rmtree(cls.dir, ignore_errors=True)

    def exchange(self, sock, fixture, stream):
        body = json.dumps({"stream": stream, "messages": [{"role": "user", "content": "q"}]})
        sock.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                      f"Content-Type: application/json\r\nX-Mock-Fixture: {fixture}\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, rest = data.partition(b"\r\n\r\n")
        headers = head.decode().lower()
        if "transfer-encoding: chunked" in headers:
            while not rest.endswith(b"0\r\n\r\n"):
                rest += sock.recv(65536)
            return head, H.dechunk(rest)
        length = int([l for l in headers.split("\r\n") if l.startswith("content-length:")][0].split(":")[1])
        while len(rest) < length:
            rest += sock.recv(65536)
        return head, rest

    def test_stream_and_body_on_one_tls_connection(self):
        raw = socket.create_connection(("127.0.0.1", self.cg.port), timeout=10)
        sock = self.ctx.wrap_socket(raw, server_hostname="localhost")
        try:
            for fixture, name in (("azure_oyd_stream.sse", "azure_oyd_stream"),
                                  ("azure_oyd_response.json", "azure_oyd_response"),
                                  ("azure_oyd_stream.sse", "azure_oyd_stream")):
                head, body = self.exchange(sock, fixture, fixture.endswith(".sse"))
                self.assertIn(b"200", head.split(b"\r\n")[0])
                want = H.expected(name + ".openwebui.json")
                got = client_view.view(body.decode())
                self.assertEqual(got["content"], want["content"])
                self.assertEqual(got["sources"], want["sources"])
        finally:
            sock.close()

    def test_plaintext_on_tls_port_is_refused_and_server_survives(self):
        s = socket.create_connection(("127.0.0.1", self.cg.port), timeout=5)
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            data = s.recv(4096)
        except (ConnectionResetError, socket.timeout):
            data = b""
        s.close()
        self.assertNotIn(b"HTTP/1.1 200", data)
        st, _, _ = H.request(self.cg.admin_port, "GET", "/healthz")
        self.assertEqual(st, 200)


if __name__ == "__main__":
    unittest.main()
