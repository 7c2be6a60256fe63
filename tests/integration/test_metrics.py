"""/metrics (SPEC §10): a strict parse of the Prometheus text format (0.0.4),
`promtool check metrics` as a second opinion, every SPEC series present with
the right type, and each one moving when it should."""
import json
import math
import os
import re
import shutil
import socket
import subprocess
import time
import unittest

import harness as H

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?\}})? (\S+)$")

# Series beyond SPEC §10 (which says "at least"), with their types and labels.
EXTRA = {
    "citegate_client_stalls_total": ("counter", set()),
    "citegate_streams_paused": ("gauge", set()),
    "citegate_alias_bytes_saved_total": ("counter", set()),
    "citegate_tracking_writes_dropped_total": ("counter", set()),
    "citegate_answers_total": ("counter", {"model"}),
    "citegate_answer_citations_total": ("counter", {"model"}),
    "citegate_answer_sources_total": ("counter", {"model"}),
}

SPEC = {  # SPEC §10 name -> (type, labels every sample carries)
    "citegate_requests_total": ("counter", {"path", "status"}),
    "citegate_active_streams": ("gauge", set()),
    "citegate_upstream_connections": ("gauge", {"protocol"}),
    "citegate_upstream_request_duration_seconds": ("histogram", set()),
    "citegate_time_to_first_byte_seconds": ("histogram", set()),
    "citegate_sse_events_total": ("counter", {"direction"}),
    "citegate_sse_malformed_total": ("counter", set()),
    "citegate_citation_refs_total": ("counter", {"result"}),
    "citegate_citations_emitted_total": ("counter", {"profile"}),
    "citegate_citation_rate": ("histogram", set()),
    "citegate_tracking_failures_total": ("counter", set()),
    "citegate_upstream_errors_total": ("counter", {"kind"}),
    "citegate_client_disconnects_total": ("counter", set()),
}


def parse_labels(text):
    out = {}
    for m in re.finditer(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', text or ""):
        out[m.group(1)] = m.group(2)
    return out


def parse(text):
    """Strict exposition parse: returns {family: {"type", "help", "samples": [(name, labels, value)]}}.
    Raises AssertionError on anything the format does not allow."""
    fams, current = {}, None
    assert text.endswith("\n"), "exposition must end with a newline"
    for n, line in enumerate(text.split("\n")[:-1], 1):
        assert line == line.strip() and line, f"line {n}: blank or padded line {line!r}"
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert re.fullmatch(NAME, name) and help_text, f"line {n}: bad HELP"
            assert name not in fams, f"line {n}: family {name} repeated"
            fams[name] = {"help": help_text, "type": None, "samples": []}
            current = name
        elif line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            assert name == current and fams[name]["type"] is None, f"line {n}: TYPE without HELP"
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            fams[name]["type"] = typ
        elif line.startswith("#"):
            raise AssertionError(f"line {n}: unexpected comment {line!r}")
        else:
            m = SAMPLE.match(line)
            assert m, f"line {n}: not a sample {line!r}"
            name, labels, value = m.group(1), parse_labels(m.group(2)), m.group(3)
            fam = fams.get(current)
            assert fam and fam["type"], f"line {n}: sample before its TYPE"
            key = (name, tuple(sorted(labels.items())))
            assert key not in fam.setdefault("keys", set()), f"line {n}: series repeated {line!r}"
            fam["keys"].add(key)
            suffixes = {"histogram": ("_bucket", "_sum", "_count")}.get(fam["type"], ("",))
            assert any(name == current + s for s in suffixes), f"line {n}: {name} outside {current}"
            v = float(value)  # raises on garbage
            assert not math.isnan(v), line
            if fam["type"] == "counter":
                assert current.endswith("_total") and v >= 0, line
            fam["samples"].append((name, labels, v))
    for name, fam in fams.items():
        assert fam["type"], f"{name}: no TYPE"
        fam.pop("keys", None)
        if fam["type"] == "histogram":
            check_histogram(name, fam["samples"])
    return fams


def check_histogram(name, samples):
    buckets = [(float(l["le"].replace("+Inf", "inf")), v) for s, l, v in samples if s.endswith("_bucket")]
    assert buckets and math.isinf(buckets[-1][0]), f"{name}: no +Inf bucket"
    assert all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), \
        f"{name}: buckets not cumulative and ordered"
    count = [v for s, _, v in samples if s == name + "_count"]
    assert count == [buckets[-1][1]], f"{name}: _count differs from the +Inf bucket"
    assert len([1 for s, _, _ in samples if s == name + "_sum"]) == 1, f"{name}: _sum"


def value(fams, family, sample=None, **labels):
    total = 0.0
    for s, l, v in fams[family]["samples"]:
        if s == (sample or family) and all(l.get(k) == w for k, w in labels.items()):
            total += v
    return total


class WithMock(H.DaemonCase):
    """One citegate in front of one mock upstream for the whole class."""

    @classmethod
    def setUpClass(cls):
        cls.mock = H.MockUpstream().start()
        cls.cg = H.Citegate(upstream=cls.mock.url).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()


class Metrics(WithMock):

    def scrape(self):
        st, hd, body = self.cg.admin("GET", "/metrics")
        self.assertEqual(st, 200)
        self.assertTrue(hd.get("Content-Type", "").startswith("text/plain; version=0.0.4"), hd)
        return body.decode(), parse(body.decode())

    def slow_stream(self, split, delay_ms):
        """A streamed answer the mock sends slowly: (raw client, response), head read."""
        c = self.cg.raw(timeout=10)
        r = c.request("POST", "/v1/chat/completions", H.chat_body(stream=True),
                      {"X-Mock-Fixture": "azure_oyd_stream.sse", "X-Mock-Split": str(split),
                       "X-Mock-Delay-Ms": str(delay_ms)})
        self.assertEqual(r.status, 200)
        return c, r

    def ask(self, fixture, headers=None, stream=True):
        body = {"stream": stream, "messages": [{"role": "user", "content": "metrics question"}]}
        h = {"X-Mock-Fixture": fixture}
        h.update(headers or {})
        return self.cg.request("POST", "/v1/chat/completions", body, h)

    def test_every_spec_series_with_its_type(self):
        _, fams = self.scrape()
        for name, (typ, labels) in list(SPEC.items()) + list(EXTRA.items()):
            self.assertIn(name, fams)
            self.assertEqual(fams[name]["type"], typ, name)
            for s, l, _ in fams[name]["samples"]:
                if not s.endswith(("_bucket", "_sum", "_count")) or typ != "histogram":
                    self.assertTrue(labels <= set(l), f"{s} {l} lacks {labels}")

    def test_promtool_agrees(self):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool (Debian package prometheus) is installed by make deps")
        text, _ = self.scrape()
        p = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True,
                           timeout=30)
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())

    def test_series_move_when_they_should(self):
        _, before = self.scrape()
        st, _, _ = self.ask("azure_oyd_stream.sse")
        self.assertEqual(st, 200)
        st, _, _ = self.ask("azure_oyd_stream.sse", {"X-Citegate-Profile": "webchat"})
        self.assertEqual(st, 200)
        st, _, _ = self.ask("azure_oyd_stream.sse", {"X-Citegate-Profile": "markdown"})
        self.assertEqual(st, 200)
        st, _, _ = self.ask("numeric_malformed.sse")
        self.assertEqual(st, 200)
        st, _, _ = self.ask("azure_oyd_stream.sse", {"X-Mock-Fault": "status:500"})
        self.assertEqual(st, 500)
        st, _, _ = self.ask("azure_oyd_stream.sse", {"X-Mock-Fault": "reset"})
        # a client that leaves mid-stream
        c, _ = self.slow_stream(32, 100)
        time.sleep(0.15)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        c.sock.close()
        # a chat request refused at its head is still counted under its route
        status, _ = H.send_oversized(self.cg.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n",
                                     b"Content-Length: 99999999999")
        self.assertEqual(status, 413)

        def moved():
            _, after = self.scrape()
            return after
        self.assertTrue(H.wait_for(lambda: value(moved(), "citegate_client_disconnects_total") >
                                   value(before, "citegate_client_disconnects_total"), 5))
        after = moved()
        grew = lambda fam, sample=None, **l: value(after, fam, sample, **l) > value(before, fam, sample, **l)
        self.assertTrue(grew("citegate_requests_total", path="/v1/chat/completions", status="200"))
        self.assertTrue(grew("citegate_requests_total", path="/v1/chat/completions", status="500"))
        self.assertTrue(grew("citegate_requests_total", path="/v1/chat/completions", status="413"))
        self.assertTrue(grew("citegate_upstream_request_duration_seconds",
                             "citegate_upstream_request_duration_seconds_count"))
        self.assertTrue(grew("citegate_time_to_first_byte_seconds",
                             "citegate_time_to_first_byte_seconds_count"))
        self.assertTrue(grew("citegate_sse_events_total", direction="in"))
        self.assertTrue(grew("citegate_sse_events_total", direction="out"))
        self.assertTrue(grew("citegate_sse_malformed_total"))
        self.assertTrue(grew("citegate_citation_refs_total", result="linked"))
        self.assertTrue(grew("citegate_citation_refs_total", result="unlinked"))
        self.assertTrue(grew("citegate_citation_refs_total", result="out_of_range"))
        self.assertTrue(grew("citegate_citations_emitted_total", profile="openwebui"))
        self.assertTrue(grew("citegate_citations_emitted_total", profile="webchat"))
        self.assertTrue(grew("citegate_citations_emitted_total", profile="markdown"))
        self.assertFalse(grew("citegate_citations_emitted_total", profile="openai"))
        self.assertTrue(grew("citegate_citation_rate", "citegate_citation_rate_count"))
        self.assertTrue(grew("citegate_upstream_errors_total"))
        self.assertEqual(value(after, "citegate_active_streams"), 0)
        self.assertGreaterEqual(value(after, "citegate_upstream_connections", protocol="http1.1") +
                                value(after, "citegate_upstream_connections", protocol="h2"), 0)

    def test_active_streams_counts_open_streams(self):
        c, r = self.slow_stream(64, 60)
        _, during = self.scrape()
        self.assertGreaterEqual(value(during, "citegate_active_streams"), 1)
        self.assertGreaterEqual(value(during, "citegate_upstream_connections"), 1)
        r.read_all(timeout=20)
        c.close()
        self.assertTrue(H.wait_for(lambda: value(self.scrape()[1], "citegate_active_streams") == 0, 5))

    def test_loop_lag_ticks_only_while_streams_are_open(self):
        """The lag clock ticks every 10 ms while a stream is open, and an idle
        worker is not woken for it: no tick between two scrapes 0.5 s apart."""
        lag = "citegate_event_loop_lag_seconds"
        self.assertTrue(H.wait_for(lambda: value(self.scrape()[1], "citegate_active_streams") == 0, 5))
        before = value(self.scrape()[1], lag, lag + "_count")
        time.sleep(0.5)
        idle = value(self.scrape()[1], lag, lag + "_count")
        self.assertEqual(idle, before, "the lag clock ticked in an idle worker")
        c, r = self.slow_stream(64, 60)
        time.sleep(0.3)
        busy = value(self.scrape()[1], lag, lag + "_count")
        r.read_all(timeout=20)
        c.close()
        self.assertGreaterEqual(busy - idle, 10, "no lag ticks while a stream was open")

    def test_tracking_failures_move(self):
        d = os.path.join(self.cg.dir, "blocker")
        open(d, "w").close()
        cg = H.Citegate(upstream=self.mock.url,
                        env={"SEMANTIC_MEMORY_DB_PATH": os.path.join(d, "x", "m.db")}).start()
        self.addCleanup(cg.cleanup)
        self.addCleanup(cg.stop)
        st, _, _ = cg.request("POST", "/v1/chat/completions", H.chat_body(stream=True),
                              {"X-Mock-Fixture": "azure_oyd_stream.sse"})
        self.assertEqual(st, 200)

        def failures():
            _, _, body = cg.admin("GET", "/metrics")
            return value(parse(body.decode()), "citegate_tracking_failures_total")
        self.assertTrue(H.wait_for(lambda: failures() >= 1, 5))

    def test_parser_is_strict(self):
        good = "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n"
        parse(good)
        for bad in (good.replace("a_total 1", "a_total{x=\"1\" } 1"), good[:-1],
                    good + "a_total 2\n", good.replace("a_total 1", 'a_total{m="x\n"} 1'),
                    good + "b_total 1\n", good.replace("1\n", "-1\n"),
                    "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
                    "h_sum 1\nh_count 1\n"):
            with self.assertRaises((AssertionError, ValueError), msg=bad):
                parse(bad)


class ModelLabels(WithMock):
    """citegate_answers_total, answer_citations_total and answer_sources_total by
    model: each answer under the model its client asked for (an Azure route's
    deployment), the first 16 names a worker meets and "other" after them, and a
    name that is not a plain label (quotes, newlines, control bytes, non-ASCII,
    over 64 bytes, "other") counted as other without touching the exposition."""

    STRANGE = ['a"b', "a\nb", "a\\b", "a\u0001b", "a\u0000b", "caf\u00e9", "x" * 65, "a b", "other",
               "", 'gpt"} 1\ncitegate_answers_total{model="gpt-4o']

    def ask(self, model, fixture="azure_oyd_stream.sse", path="/v1/chat/completions"):
        body = {"stream": fixture.endswith(".sse"), "messages": [{"role": "user", "content": "q"}]}
        if model is not None:
            body["model"] = model
        st, _, data = self.cg.request("POST", path, body, {"X-Mock-Fixture": fixture})
        self.assertEqual(st, 200, data[:200])

    def scrape(self):
        st, _, body = self.cg.admin("GET", "/metrics")
        self.assertEqual(st, 200)
        return body.decode(), parse(body.decode())

    def by_model(self, fams, family):
        out = {}
        for s, l, v in fams[family]["samples"]:
            self.assertEqual(set(l), {"model"}, l)
            out[l["model"]] = v
        return out

    def test_models_counted_bounded_and_escaped(self):
        # Strange names first, while the table has room: never a label all the same.
        for name in self.STRANGE:
            self.ask(name)
        self.ask(None)   # no model at all
        self.ask(17)     # not a string
        others = len(self.STRANGE) + 2
        for _ in range(3):
            self.ask("gpt-4o")  # 3 of 3 sources cited
        for _ in range(2):
            self.ask("claude-x", "azure_oyd_response.json")  # 2 of 3
        # An Azure deployment route: the deployment is the model, whatever the body says.
        self.ask("gpt-4o", path="/openai/deployments/dep-1/chat/completions?api-version=2024-10-21")
        # 13 more names fill the table of 16 (3 so far); 3 beyond it go to other.
        names = [f"m{i:02d}" for i in range(16)]
        for n in names:
            self.ask(n)
        others += 3
        self.ask("gpt-4o")  # a name already labelled still is
        text, fams = self.scrape()
        answers = self.by_model(fams, "citegate_answers_total")
        cited = self.by_model(fams, "citegate_answer_citations_total")
        sources = self.by_model(fams, "citegate_answer_sources_total")
        labelled = {"gpt-4o", "claude-x", "dep-1"} | set(names[:13])
        self.assertEqual(set(answers), labelled | {"other"})
        self.assertEqual(set(cited), set(answers))
        self.assertEqual(set(sources), set(answers))
        self.assertEqual((answers["gpt-4o"], cited["gpt-4o"], sources["gpt-4o"]), (4, 12, 12))
        self.assertEqual((answers["claude-x"], cited["claude-x"], sources["claude-x"]), (2, 4, 6))
        self.assertEqual((answers["dep-1"], cited["dep-1"], sources["dep-1"]), (1, 3, 3))
        for n in names[:13]:
            self.assertEqual((answers[n], cited[n], sources[n]), (1, 3, 3), n)
        self.assertEqual((answers["other"], cited["other"], sources["other"]),
                         (others, 3 * others, 3 * others))
        # The per-model answers add up to the process's tracked answers.
        st, _, body = self.cg.admin("GET", "/v1/citations/stats")
        stats = json.loads(body)
        self.assertEqual(sum(answers.values()), stats["answers"])
        self.assertEqual(sum(cited.values()), stats["citations_cited"])
        self.assertEqual(sum(sources.values()), stats["citations_available"])
        # promtool reads the whole exposition too.
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool (Debian package prometheus) is installed by make deps")
        p = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True,
                           timeout=30)
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())


if __name__ == "__main__":
    unittest.main()
