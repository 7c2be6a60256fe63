#!/usr/bin/env python3
"""bench/versus.py and bench/versus_turns.py without running a benchmark: the peers'
templates filled for every mode, the best peer and the goal checks, the parsing of
perf stat's system-call counts and of a perf script trace.

usage: test_versus.py [unittest args]
"""
import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import versus  # noqa: E402
import versus_turns  # noqa: E402


def mode(**kw):
    a = dict(streams=1000, h2=False, h2_upstream=False, tls_upstream=False, tls_ca="/tmp/ca.pem")
    a.update(kw)
    ns = argparse.Namespace(**a)
    ns.notes = set()
    return ns


class Templates(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test-versus-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def filled(self, name, args):
        fields = versus.peer_fields(args, name, self.tmp, 18080, 18081)
        with open(versus.fill(versus.PEERS[name]["conf"], self.tmp, fields)) as f:
            return f.read()

    def test_every_field_filled_in_every_mode(self):
        for name in versus.PEERS:
            for kw in ({}, {"h2": True}, {"h2_upstream": True}, {"tls_upstream": True},
                       {"tls_upstream": True, "h2_upstream": True}, {"streams": 10000}):
                with self.subTest(peer=name, mode=kw):
                    text = self.filled(name, mode(**kw))
                    self.assertNotRegex(text, r"@[A-Z0-9_]+@")
                    self.assertIn("18080", text)
                    self.assertIn("18081", text)

    def test_h2_upstream_where_the_peer_can(self):
        args = mode(h2_upstream=True)
        self.assertRegex(self.filled("haproxy", args), r"server up 127\.0\.0\.1:18081 proto h2\b")
        self.assertIn("proto=h2\n", self.filled("nghttpx", args))
        self.assertIn("server 127.0.0.1:18081;", self.filled("nginx", args))
        self.assertIn("proxy.reverse.url: http://127.0.0.1:18081/", self.filled("h2o", args))
        plain = mode()
        self.assertRegex(self.filled("haproxy", plain), r"server up 127\.0\.0\.1:18081\s*\n")
        self.assertIn("proto=http/1.1\n", self.filled("nghttpx", plain))

    def test_streaming_settings_stay(self):
        self.assertRegex(self.filled("haproxy", mode()), r"\n\s+option http-no-delay\n")
        self.assertRegex(self.filled("nginx", mode()), r"proxy_buffering off;")
        self.assertRegex(self.filled("nginx", mode()), r"access_log off;")
        self.assertIn("backlog=1024 http2;", self.filled("nginx", mode(h2=True)))
        self.assertIn("num-threads: 1", self.filled("h2o", mode()))
        self.assertIn("workers=1", self.filled("nghttpx", mode()))

    def test_limits_at_least_twenty_thousand(self):
        self.assertIn("max-connections: 20000", self.filled("h2o", mode()))
        self.assertIn("worker_connections 20000;", self.filled("nginx", mode()))
        self.assertIn("worker_connections 20256;", self.filled("nginx", mode(streams=10000)))

    def test_tls_upstream(self):
        args = mode(tls_upstream=True, h2_upstream=True)
        hap = self.filled("haproxy", args)
        self.assertIn("ssl verify required ca-file /tmp/ca.pem", hap)
        self.assertIn("alpn h2", hap)
        ngx = self.filled("nghttpx", args)
        self.assertIn("proto=h2;tls;sni=localhost\n", ngx)
        self.assertIn("cacert=/tmp/ca.pem", ngx)
        h2o = self.filled("h2o", args)
        self.assertIn("proxy.reverse.url: https://localhost:18081/", h2o)
        self.assertIn("proxy.ssl.cafile: /tmp/ca.pem", h2o)

    def test_a_field_left_is_an_error(self):
        err = io.StringIO()
        with self.assertRaises(SystemExit), contextlib.redirect_stderr(err):
            versus.fill("haproxy.cfg", self.tmp, {"PORT": 1})
        self.assertIn("@UPSTREAM_PORT@", err.getvalue())

    def test_haproxy_maxconn_held_by_the_descriptor_limit(self):
        args = mode()
        real = versus.nofile_limit
        try:
            versus.nofile_limit = lambda: 20000
            self.assertEqual(versus.haproxy_maxconn(args), 9950)
            self.assertTrue(any("maxconn 9950" in n for n in args.notes))
            versus.nofile_limit = lambda: 50000
            args2 = mode()
            self.assertEqual(versus.haproxy_maxconn(args2), 20000)
            self.assertEqual(args2.notes, set())
        finally:
            versus.nofile_limit = real


def med(cpu, ttft, lost=0, ok=1000):
    return dict(cpu_us_per_event=cpu, added_ttft_p99_us=ttft,
                client=dict(lost=lost, ok=ok, streams=1000))


class Best(unittest.TestCase):
    def test_lowest_peer_that_lost_nothing(self):
        m = {"direct": med(None, None), "citegate": med(1.0, 1.0), "nginx": med(9.0, 5.0),
             "haproxy": med(7.0, 8.0), "h2o": med(2.0, 1.0, lost=64), "nghttpx": med(8.0, 3.0, ok=999)}
        self.assertEqual(versus.best_peer(m, "cpu_us_per_event"), "haproxy")
        self.assertEqual(versus.best_peer(m, "added_ttft_p99_us"), "nginx")

    def test_no_peer(self):
        self.assertIsNone(versus.best_peer({"citegate": med(1.0, 1.0)}, "cpu_us_per_event"))

    def test_goal_checks(self):
        self.assertTrue(versus.at_most(10.0, 10.0))
        self.assertFalse(versus.at_most(10.1, 10.0))
        self.assertTrue(versus.at_most(5.0, 10.0, 0.5))
        self.assertFalse(versus.at_most(5.1, 10.0, 0.5))
        # An added latency below the direct path's: the figures themselves compare.
        self.assertTrue(versus.at_most(-3.0, -2.0, 0.5))
        self.assertFalse(versus.at_most(-1.0, -2.0))
        self.assertIsNone(versus.at_most(None, 1.0))
        self.assertIsNone(versus.ratio(1.0, -2.0))
        self.assertAlmostEqual(versus.ratio(3.0, 2.0), 1.5)


PERF_STAT = """# started on Sat Nov 28 04:08:07 2026

<not counted>,,syscalls:sys_enter_rt_sigreturn,0,100.00,,
64000,,syscalls:sys_enter_writev,1001,100.00,,
0,,syscalls:sys_enter_mmap,1001,100.00,,
65012,,syscalls:sys_enter_read,1001,100.00,,
12,,syscalls:sys_enter_epoll_wait,1001,100.00,,
"""


class SyscallCounts(unittest.TestCase):
    def test_perf_stat_csv(self):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(PERF_STAT)
        try:
            self.assertEqual(versus.read_syscall_counts(f.name),
                             {"writev": 64000, "read": 65012, "epoll_wait": 12})
        finally:
            os.unlink(f.name)


def ev(t_ms, kind, name, args):
    return f"        citegate 100 [000] {t_ms / 1000:.6f}: syscalls:sys_{kind}_{name}: {args}\n"


class Turns(unittest.TestCase):
    def test_a_stream_followed_through_its_descriptors(self):
        lines = [ev(0.0, "exit", "epoll_wait", "0x1"),
                 ev(0.1, "enter", "accept4", "fd: 0x00000009, flags: 0x00080800"),
                 ev(0.2, "exit", "accept4", "0x11"),
                 ev(0.3, "enter", "epoll_wait", "epfd: 0x00000003"),
                 ev(1.0, "exit", "epoll_wait", "0x1"),
                 ev(1.1, "enter", "read", "fd: 0x00000011, buf: 0x1, count: 0x10000"),
                 ev(1.2, "enter", "socket", "family: 0x00000002"),
                 ev(1.3, "exit", "socket", "0x12"),
                 ev(1.4, "enter", "connect", "fd: 0x00000012"),
                 ev(1.5, "enter", "epoll_wait", "epfd: 0x00000003"),
                 ev(2.0, "exit", "epoll_wait", "0x1"),
                 ev(2.1, "enter", "write", "fd: 0x00000012, buf: 0x1, count: 0x15f"),
                 ev(2.2, "enter", "epoll_wait", "epfd: 0x00000003"),
                 ev(3.0, "exit", "epoll_wait", "0x1"),
                 ev(3.1, "enter", "read", "fd: 0x00000012, buf: 0x1, count: 0x10000"),
                 ev(3.2, "enter", "write", "fd: 0x00000011, buf: 0x1, count: 0xa3"),
                 ev(3.3, "enter", "writev", "fd: 0x00000011, vec: 0x1, vlen: 0x3"),
                 ev(3.4, "enter", "epoll_wait", "epfd: 0x00000003")]
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.writelines(lines)
        try:
            events = versus_turns.parse(f.name)
        finally:
            os.unlink(f.name)
        ss = versus_turns.streams(events)
        self.assertEqual(len(ss), 1)
        s = ss[0]
        self.assertAlmostEqual(s["acc"], 0.2)
        self.assertAlmostEqual(s["read"], 1.1)
        self.assertAlmostEqual(s["conn"], 1.3)
        self.assertAlmostEqual(s["upw"], 2.1)
        self.assertAlmostEqual(s["upread"], 3.1)
        self.assertAlmostEqual(s["out"], 3.2)
        turns = [t for t in versus_turns.turns(events) if t["calls"]]
        self.assertEqual([dict(t["calls"]) for t in turns],
                         [{"accept4": 1}, {"read": 1, "socket": 1, "connect": 1}, {"write": 1},
                          {"read": 1, "write": 1, "writev": 1}])


if __name__ == "__main__":
    unittest.main()
