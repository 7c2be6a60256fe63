"""Every stored expectation (every fixture x profile) over HTTP/2 on each side:
h2c and h2-over-TLS clients (nghttp) in front of citegate, and citegate in
front of an h2c upstream (a second citegate with profile off, serving the
mock). Each answer must give the stored client view exactly."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import harness as H

sys.path.insert(0, os.path.join(H.ROOT, "tests", "tools"))
import oracle  # noqa: E402

EXPECTED = sorted(glob.glob(os.path.join(H.FIXTURES, "expected", "*.json")) +
                  glob.glob(os.path.join(H.FIXTURES, "expected", "profiles", "*.json")))


def mock_name(rel):
    """The flat name a fixture has in the mock's folder."""
    return rel.replace("/", "__")


def stored_view(exp):
    """A stored expected file in the shape of oracle.client_view()."""
    end = "body"
    if exp.get("ends_with_done"):
        end = "done"
    elif exp.get("ends_with_error_event"):
        end = "error"
    return {"content": exp["content"], "end": end, "sources": exp.get("sources", []),
            "annotations": exp.get("annotations", {}), "citations": exp.get("citations", []),
            "entities": exp.get("entities", [])}


def same_content(profile, got, want):
    if profile != "structured":
        return got == want
    if got.keys() != want.keys():
        return False
    for k in want:
        try:
            if json.loads(got[k]) != json.loads(want[k]):
                return False
        except ValueError:
            if got[k] != want[k]:
                return False
    return True


class H2ProfileMatrix(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="cg-h2prof-")
        fx = os.path.join(cls.dir, "fixtures")
        os.makedirs(fx)
        for path in glob.glob(os.path.join(H.FIXTURES, "*")) + \
                glob.glob(os.path.join(H.FIXTURES, "profiles", "*")):
            if os.path.isfile(path):
                shutil.copy(path, os.path.join(fx, mock_name(os.path.relpath(path, H.FIXTURES))))
        cls.cert, cls.key = H.make_cert(cls.dir)
        cls.mock = H.MockUpstream(fixtures=fx).start()
        cls.procs = []
        many = {"CITEGATE_UPSTREAM_MAX_CONNECTIONS": "64"}
        cls.h2c = cls.start(upstream=cls.mock.url, env=many)
        cls.tls = cls.start(upstream=cls.mock.url,
                            env=dict(many, CITEGATE_TLS_CERT=cls.cert, CITEGATE_TLS_KEY=cls.key))
        cls.back = cls.start(upstream=cls.mock.url, env=dict(many, CITEGATE_PROFILE="off"))
        cls.front = cls.start(upstream=f"http://127.0.0.1:{cls.back.port}",
                              env={"CITEGATE_UPSTREAM_PROTOCOL": "h2"})

    @classmethod
    def start(cls, upstream, env):
        cg = H.Citegate(upstream=upstream, env=env).start()
        cls.procs.append(cg)
        return cg

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            shutil.rmtree(cls.dir, ignore_errors=True)

    def cases(self):
        for path in EXPECTED:
            with open(path, encoding="utf-8") as f:
                exp = json.load(f)
            body = {"messages": [{"role": "user", "content": "q"}]}
            if exp.get("request"):
                with open(os.path.join(H.FIXTURES, exp["request"]), encoding="utf-8") as f:
                    body = json.load(f)
            body["stream"] = exp["fixture"].endswith(".sse")
            req = os.path.join(self.dir, "req-" + os.path.basename(path))
            with open(req, "w", encoding="utf-8") as f:
                json.dump(body, f)
            headers = {"X-Mock-Fixture": mock_name(exp["fixture"]),
                       "X-Citegate-Profile": exp.get("profile", "openwebui")}
            yield os.path.basename(path), exp, req, headers

    def nghttp(self, url, req, headers):
        cmd = ["nghttp", "-d", req]
        for k, v in headers.items():
            cmd += ["-H", f"{k}: {v}"]
        p = subprocess.run(cmd + [url], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr.decode()[-500:])
        return p.stdout

    def check(self, name, transport, exp, out):
        got, want = oracle.client_view(out), stored_view(exp)
        # An upstream's own annotations reach the client first, unchanged, in
        # every profile (SPEC §6); a stream's stored file holds the profile's
        # own only (a body's holds the message's whole list).
        with open(os.path.join(H.FIXTURES, exp["fixture"]), "rb") as f:
            upstream = oracle.client_view(f.read())["annotations"]
        if got["annotations"] != want["annotations"]:
            for idx, theirs in upstream.items():
                anns = got["annotations"].get(idx, [])
                self.assertEqual(anns[:len(theirs)], theirs, f"{name} over {transport}: forwarded")
                if anns[len(theirs):]:
                    got["annotations"][idx] = anns[len(theirs):]
                else:
                    got["annotations"].pop(idx, None)
        profile = exp.get("profile", "openwebui")
        msg = f"{name} over {transport}"
        self.assertTrue(same_content(profile, got["content"], want["content"]),
                        f"{msg}: content\n got  {got['content']}\n want {want['content']}")
        for k in ("end", "sources", "annotations", "citations", "entities"):
            self.assertEqual(got[k], want[k], f"{msg}: {k}")

    def test_h2c_clients(self):
        n = 0
        for name, exp, req, headers in self.cases():
            out = self.nghttp(f"http://127.0.0.1:{self.h2c.port}/v1/chat/completions", req, headers)
            self.check(name, "h2c", exp, out)
            n += 1
        self.assertGreaterEqual(n, 70)

    def test_h2_tls_clients(self):
        for name, exp, req, headers in self.cases():
            out = self.nghttp(f"https://localhost:{self.tls.port}/v1/chat/completions", req, headers)
            self.check(name, "h2 over TLS", exp, out)

    def test_h2c_upstream(self):
        checked_header = 0
        for name, exp, req, headers in self.cases():
            with open(req, "rb") as f:
                body = f.read()
            st, hd, out = H.request(self.front.port, "POST", "/v1/chat/completions", body, headers)
            self.assertEqual(st, 200, f"{name}: {out[:300]!r}")
            self.check(name, "an h2c upstream", exp, out)
            if exp.get("profile") == "structured" and exp.get("citations_removed"):
                self.assertEqual(hd.get("X-Citegate-Citations-Removed"),
                                 str(exp["citations_removed"]), name)
                checked_header += 1
        self.assertGreaterEqual(checked_header, 2)  # the body and the stream fixture


if __name__ == "__main__":
    unittest.main()
