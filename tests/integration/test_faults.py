"""Failure injection: the Nth write fails, for every N a fixed matrix of requests reaches.

Needs a citegate built with -DCITEGATE_FAULTS=ON (the ASan build of `make test-asan`):
CITEGATE_FAULT_WRITE=N makes the Nth socket write attempt of the process behave as if
the socket had failed (UV_EPIPE), CITEGATE_FAULT_TLS=N makes the Nth TLS encrypt
(cg_tls_write) fail, CITEGATE_FAULT_H2=N / CITEGATE_FAULT_H2_FATAL=N make the Nth checked
nghttp2 call (a submitted response, reset, SETTINGS, window update, ...: src/io/h2lib.h)
fail with a non-fatal / fatal error instead of being made; with a negative value citegate
only counts and prints "citegate-fault: writes=W tls=T h2=H" at exit (src/io/fault.h).

Each configuration (an upstream, a client side) has a fixed, sequential matrix of
requests. A dry run (N = -1) counts the write attempts W the matrix makes; then for
every N in 1..W a fresh citegate runs the matrix with the Nth attempt failing.
Requests may fail (that is the point); what must not happen:
  - a hang: every client operation is bounded (OP_TIMEOUT); running into it fails;
  - a crash: citegate is alive after the matrix;
  - lasting damage: a clean request afterwards is answered correctly;
  - an unclean end: SIGTERM gives exit status 0;
  - a sanitizer report (ASan, UBSan, LeakSanitizer at exit) in citegate's stderr.

Runs of different N are independent processes and go PARALLEL at a time. The runtime
is capped by MAX_RUNS_PER_CONFIG (N = 1..min(W, cap)); the cap is printed when it bites.
"""
import concurrent.futures
import http.client
import os
import re
import shutil
import socket
import ssl
import struct
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
OP_TIMEOUT = 5.0
PARALLEL = int(os.environ.get("CG_FAULT_PARALLEL", "4"))
MAX_RUNS_PER_CONFIG = int(os.environ.get("CG_FAULT_MAX_RUNS", "200"))
MOCK_STREAM = {"X-Mock-Fixture": "azure_oyd_stream.sse", "X-Mock-Delay-Ms": "5"}
REPORT_RE = re.compile(r"citegate-fault: writes=(\d+) tls=(\d+) h2=(\d+)")
# Which count of the report each variable's N runs over.
COUNT_OF = {"CITEGATE_FAULT_WRITE": 0, "CITEGATE_FAULT_TLS": 1, "CITEGATE_FAULT_H2": 2,
            "CITEGATE_FAULT_H2_FATAL": 2}


def fault_build():
    """Does the binary count faults? (A build without CITEGATE_FAULTS prints nothing.)"""
    p = H.run_citegate(["filter", "--request", os.path.join(H.FIXTURES, "chat_request.json")],
                       env={"CITEGATE_FAULT_WRITE": "-1"})
    return REPORT_RE.search(p.stderr.decode("utf-8", "replace")) is not None


class Hang(Exception):
    pass


# --------------------------------------------------------------------------- client ops
# Each returns a short outcome; a timeout raises Hang; other errors are allowed outcomes.

def _tls_ctx(cert, alpn):
    ctx = ssl.create_default_context(cafile=cert)
    ctx.set_alpn_protocols([alpn])
    return ctx


def op_h1(port, body, hdrs, cert=None, path=CHAT, method="POST"):
    try:
        c = H.RawClient(port, timeout=OP_TIMEOUT,
                        ssl_context=_tls_ctx(cert, "http/1.1") if cert else None)
    except (socket.timeout, TimeoutError) as e:
        raise Hang(f"h1 connect: {e}")
    except (OSError, ssl.SSLError) as e:
        return f"connect failed: {e.__class__.__name__}"
    try:
        r = c.request(method, path, body, dict(hdrs, Connection="close"))
        r.read_all(timeout=OP_TIMEOUT)
        return f"{r.status} {'complete' if r.done else 'cut'}"
    except (socket.timeout, TimeoutError) as e:
        raise Hang(f"h1 {method} {path}: {e}")
    except (OSError, ConnectionError, ValueError, IndexError) as e:
        return f"failed: {e.__class__.__name__}"
    finally:
        c.close()


def op_h2(port, body, hdrs, cert=None, path=CHAT, method="POST"):
    try:
        c = F.H2Client(port, timeout=OP_TIMEOUT, server_hostname="localhost",
                       ssl_context=_tls_ctx(cert, "h2") if cert else None)
    except (socket.timeout, TimeoutError) as e:
        raise Hang(f"h2 connect: {e}")
    except (OSError, ssl.SSLError) as e:
        return f"connect failed: {e.__class__.__name__}"
    try:
        sid = c.request(method, path, body, hdrs)
        deadline = time.monotonic() + OP_TIMEOUT
        st = c.streams[sid]
        while not st.closed and not c.eof:
            if time.monotonic() > deadline:
                raise Hang(f"h2 {method} {path}: stream open after {OP_TIMEOUT}s")
            try:
                if not c.pump_once(deadline):
                    break
            except (socket.timeout, TimeoutError):
                raise Hang(f"h2 {method} {path}: no frame for {OP_TIMEOUT}s")
        return f"{st.status} {'ended' if st.ended else 'reset' if st.reset is not None else 'cut'}"
    except (OSError, ConnectionError, ValueError, IndexError, struct.error) as e:
        return f"failed: {e.__class__.__name__}"
    finally:
        c.close()


def op_metrics(admin_port):
    try:
        st, _, _ = H.request(admin_port, "GET", "/metrics", timeout=OP_TIMEOUT)
        return str(st)
    except (socket.timeout, TimeoutError) as e:
        raise Hang(f"GET /metrics: {e}")
    except (OSError, http.client.HTTPException, ValueError) as e:
        return f"failed: {e.__class__.__name__}"


def _kind(problem):
    """What a problem is, without addresses and pids: its sanitizer SUMMARY line, or its
    first line."""
    m = re.search(r"SUMMARY: .*", problem)
    if m:
        return re.sub(r"0x[0-9a-f]+", "0x…", m.group(0))
    return re.sub(r"\d{3,}", "…", problem.splitlines()[0])[:160]


def describe(failed):
    """Failed runs grouped by kind of problem: the N values and one full example each."""
    groups = {}
    for r in failed:
        key = " + ".join(sorted({_kind(p) for p in r["problems"]}))
        groups.setdefault(key, []).append(r)
    out = []
    for key, rs in groups.items():
        ex = rs[0]
        out.append(f"- {key}\n  N = {[r['n'] for r in rs]}\n  example N={ex['n']}: "
                   + "\n    ".join(" | ".join(ex["problems"]).splitlines())
                   + f"\n    outcomes: {ex['outcomes']}"
                   + ("" if any(p.startswith("sanitizer:") for p in ex["problems"])
                      else "\n    stderr tail: " + ex.get("stderr_tail", "")[-500:])
                   + (f"\n    kept: {ex['dir']}" if ex.get("dir") else ""))
    return "\n".join(out)


# --------------------------------------------------------------------------- the test

class Faults(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        if not fault_build():
            raise AssertionError(f"{H.citegate_bin()} was not built with -DCITEGATE_FAULTS=ON; "
                                 "this module is registered only for such builds")
        cls.dir = tempfile.mkdtemp(prefix="cg-faults-")
        cls.cert, cls.key = H.make_cert(cls.dir)
        cls.mock = H.MockUpstream().start()
        cls.tls_mock = H.MockUpstream(tls_cert=cls.cert, tls_key=cls.key).start()
        ready = os.path.join(cls.dir, "h2mock.ready")
        cls.h2mock_log = open(os.path.join(cls.dir, "h2mock.log"), "wb")
        cls.h2mock = subprocess.Popen([H2MOCK, "--fixtures", H.FIXTURES, "--ready-file", ready,
                                       "--delay-ms", "5"], preexec_fn=H._die_with_parent,
                                      stdout=cls.h2mock_log, stderr=subprocess.STDOUT)
        if not H.wait_for(lambda: os.path.exists(ready) and os.path.getsize(ready) > 0, 10):
            raise RuntimeError("h2mock did not start")
        with open(ready) as f:
            cls.h2mock_port = int(f.read())
        # An h2 server over TLS for the h2-over-TLS upstream: a second citegate (no faults).
        cls.back = H.Citegate(upstream=cls.mock.url,
                              env={"CITEGATE_PROFILE": "off", "CITEGATE_TLS_CERT": cls.cert,
                                   "CITEGATE_TLS_KEY": cls.key}).start()
        cls.summary = []

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            for line in getattr(cls, "summary", []):
                print(line)
            for m in (getattr(cls, "mock", None), getattr(cls, "tls_mock", None)):
                if m:
                    m.cleanup()
            if getattr(cls, "h2mock", None):
                cls.h2mock.terminate()
                cls.h2mock.wait(timeout=5)
                cls.h2mock_log.close()
            shutil.rmtree(getattr(cls, "dir", ""), ignore_errors=True)

    # --- configurations -----------------------------------------------------------
    def citegate(self, config, fault_env):
        env = dict(fault_env)
        if config == "demo":
            return H.Citegate(args=["--demo"], env=env)
        if config == "mock":
            return H.Citegate(upstream=self.mock.url, env=env)
        if config == "mock_tls":  # auto: ALPN offers h2, the mock picks http/1.1 (fallback)
            env["CITEGATE_UPSTREAM_CA"] = self.cert
            return H.Citegate(upstream=f"https://localhost:{self.tls_mock.port}", env=env)
        if config == "h2mock":
            env["CITEGATE_UPSTREAM_PROTOCOL"] = "h2"
            return H.Citegate(upstream=f"http://127.0.0.1:{self.h2mock_port}", env=env)
        if config == "client_tls":
            env.update({"CITEGATE_TLS_CERT": self.cert, "CITEGATE_TLS_KEY": self.key})
            return H.Citegate(upstream=self.mock.url, env=env)
        if config == "h2_tls_upstream":  # auto on https: ALPN picks h2
            env["CITEGATE_UPSTREAM_CA"] = self.cert
            return H.Citegate(upstream=f"https://localhost:{self.back.port}", env=env)
        raise ValueError(config)

    def matrix(self, config, cg):
        """The configuration's requests, in order: [(label, callable)]."""
        p = cg.port
        if config == "demo":
            return [("h1 demo stream", lambda: op_h1(p, STREAM_BODY, {})),
                    ("h2c demo stream", lambda: op_h2(p, STREAM_BODY, {})),
                    ("h1 rejected", lambda: op_h1(p, NOT_JSON, {})),
                    ("h2c rejected", lambda: op_h2(p, NOT_JSON, {})),
                    ("admin /metrics", lambda: op_metrics(cg.admin_port))]
        if config == "client_tls":
            c = self.cert
            return [("h1/TLS stream", lambda: op_h1(p, STREAM_BODY, MOCK_STREAM, cert=c)),
                    ("h2/TLS stream", lambda: op_h2(p, STREAM_BODY, MOCK_STREAM, cert=c)),
                    ("h1/TLS rejected", lambda: op_h1(p, NOT_JSON, {}, cert=c)),
                    ("h2/TLS rejected", lambda: op_h2(p, NOT_JSON, {}, cert=c))]
        hdrs = {"X-Mock-Fixture": "azure_oyd_stream.sse"} if config == "h2mock" else MOCK_STREAM
        return [("h1 stream", lambda: op_h1(p, STREAM_BODY, hdrs)),
                ("h2c stream", lambda: op_h2(p, STREAM_BODY, hdrs))]

    def clean_request(self, config, cg):
        """A non-streaming chat request on a fresh connection: (ok, detail)."""
        hdrs = {} if config == "demo" else {"X-Mock-Fixture": "azure_oyd_response.json"}
        try:
            if config == "client_tls":
                st, _, body = H.request(cg.port, "POST", CHAT, PLAIN_BODY, hdrs, timeout=OP_TIMEOUT,
                                        ssl_context=_tls_ctx(self.cert, "http/1.1"))
            else:
                st, _, body = H.request(cg.port, "POST", CHAT, PLAIN_BODY, hdrs, timeout=OP_TIMEOUT)
        except (OSError, http.client.HTTPException, ValueError) as e:
            return False, f"clean request failed: {e!r}"
        if st != 200:
            return False, f"clean request: status {st}: {body[:200]!r}"
        try:
            v = client_view.view(body.decode("utf-8", "replace"))
        except ValueError:
            return False, f"clean request: not JSON: {body[:200]!r}"
        content = v["content"].get("0", "")
        if config == "demo":
            ok = "[[doc1]](https://docs.example.com/x100/manual.pdf)" in content
        else:
            ok = v["content"] == H.expected("azure_oyd_response.openwebui.json")["content"]
        return ok, ("" if ok else f"clean request: wrong answer {content[:200]!r}")

    # --- one run ----------------------------------------------------------------------
    def run_one(self, config, var, n, clean=True):
        try:
            return self._run_one(config, var, n, clean)
        except Exception as e:  # noqa: BLE001  a harness error still fails this N, visibly
            import traceback
            return {"n": n, "problems": [f"test error: {e!r}: {traceback.format_exc()[-800:]}"],
                    "outcomes": [], "counts": None}

    def _run_one(self, config, var, n, clean):
        """One citegate with var=n through the matrix (then, with clean, the clean request).
        Returns a dict: problems (list), outcomes, counts (writes, tls) from citegate's exit
        report."""
        res = {"n": n, "problems": [], "outcomes": [], "counts": None}
        cg = self.citegate(config, {var: str(n)})
        try:
            try:
                cg.start(timeout=15)
            except H.StartError as e:
                res["problems"].append(f"start: {e}")
                return res
            for label, op in self.matrix(config, cg):
                try:
                    res["outcomes"].append(f"{label}: {op()}")
                except Hang as e:
                    res["problems"].append(f"hang in {label}: {e}")
                    break
            if cg.proc.poll() is not None:
                res["problems"].append(f"citegate {H.describe_exit(cg.proc.poll())} after the matrix")
            else:
                ok, detail = self.clean_request(config, cg) if clean else (True, "")
                if not ok and n > 0:  # the injected failure may have hit this very request
                    ok, detail2 = self.clean_request(config, cg)
                    detail = f"{detail}; retry: {detail2}"
                if not ok:
                    res["problems"].append(detail)
                rc = cg.stop(timeout=15)
                if rc != 0:
                    res["problems"].append(f"SIGTERM: {H.describe_exit(rc)}")
            err = cg.stderr()
            for rep in H.sanitizer_reports(err):
                res["problems"].append("sanitizer: " + rep)
            m = REPORT_RE.search(err)
            res["counts"] = tuple(int(g) for g in m.groups()) if m else None
            if res["problems"]:
                res["stderr_tail"] = err[-1200:]
        finally:
            cg.stop(timeout=5)
            if os.environ.get("CG_KEEP") and res["problems"]:
                res["dir"] = cg.dir
            else:
                cg.cleanup()
        return res

    def sweep(self, config, var):
        """Dry run, then N = 1..K; fails with every N's problems."""
        t0 = time.monotonic()
        dry = self.run_one(config, var, -1, clean=False)
        self.assertEqual(dry["problems"], [], f"{config}: dry run: {dry}")
        self.assertIsNotNone(dry["counts"], f"{config}: no citegate-fault report: {dry}")
        w = dry["counts"][COUNT_OF[var]]
        self.assertGreater(w, 0, f"{config}: the matrix made no {var} attempts")
        k = min(w, MAX_RUNS_PER_CONFIG)
        with concurrent.futures.ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            results = list(pool.map(lambda n: self.run_one(config, var, n), range(1, k + 1)))
        if self.h2mock.poll() is not None:
            with open(os.path.join(self.dir, "h2mock.log"), errors="replace") as f:
                self.fail(f"the h2 mock died ({H.describe_exit(self.h2mock.poll())}): "
                          + f.read()[-2000:])
        self.assertIsNone(self.back.proc.poll(), "the h2-over-TLS back instance died: "
                          + self.back.stderr()[-2000:])
        idx = COUNT_OF[var]
        not_fired = [r["n"] for r in results if r["counts"] and r["counts"][idx] < r["n"]]
        failed = [r for r in results if r["problems"]]
        secs = time.monotonic() - t0
        line = (f"{var} {config}: attempts={w} K={k}{' (capped)' if k < w else ''} "
                f"runs={k} failed={len(failed)} not-fired={len(not_fired)} {secs:.1f}s")
        type(self).summary.append(line)
        if failed:
            self.fail(f"{var} {config}: {len(failed)} of {k} runs failed:\n" + describe(failed))
        # Nearly every N below the dry run's count must have been reached (the matrix is
        # sequential). HTTP/2 connections gather the frames of one loop turn into one write,
        # so how many writes an h2 matrix makes depends a little on timing: a few of its
        # last N may not be reached in a run.
        slack = k // 4 if "h2" in config else k // 10
        self.assertLessEqual(len(not_fired), max(1, slack), f"{var} {config}: the Nth attempt "
                             f"was never made for N in {not_fired}: the matrix is not deterministic")

    # --- the tests ------------------------------------------------------------------
    def test_write_demo(self):
        self.sweep("demo", "CITEGATE_FAULT_WRITE")

    def test_write_mock(self):
        self.sweep("mock", "CITEGATE_FAULT_WRITE")

    def test_write_mock_tls(self):
        self.sweep("mock_tls", "CITEGATE_FAULT_WRITE")

    def test_write_h2mock(self):
        self.sweep("h2mock", "CITEGATE_FAULT_WRITE")

    def test_write_client_tls(self):
        self.sweep("client_tls", "CITEGATE_FAULT_WRITE")

    def test_write_h2_tls_upstream(self):
        self.sweep("h2_tls_upstream", "CITEGATE_FAULT_WRITE")

    def test_tls_mock_tls(self):
        self.sweep("mock_tls", "CITEGATE_FAULT_TLS")

    def test_tls_client_tls(self):
        self.sweep("client_tls", "CITEGATE_FAULT_TLS")

    def test_tls_h2_tls_upstream(self):
        self.sweep("h2_tls_upstream", "CITEGATE_FAULT_TLS")

    # A refused nghttp2 call resets its stream, or closes its connection when it is
    # fatal or concerns the whole session (src/io/h2lib.h): h2 clients, h2 upstreams.
    def test_h2_demo(self):
        self.sweep("demo", "CITEGATE_FAULT_H2")

    def test_h2_h2mock(self):
        self.sweep("h2mock", "CITEGATE_FAULT_H2")

    def test_h2_fatal_demo(self):
        self.sweep("demo", "CITEGATE_FAULT_H2_FATAL")

    def test_h2_fatal_h2mock(self):
        self.sweep("h2mock", "CITEGATE_FAULT_H2_FATAL")


if __name__ == "__main__":
    unittest.main()
