"""Citation tracking (SPEC §8): /v1/citations/stats and the SQLite file agree
with numbers computed here, independently, from the upstream answers; recall
ranks the most similar question first; a broken database never touches an
answer; tracking off stores nothing."""
import http.client
import json
import os
import re
import shutil
import sqlite3
import tempfile
import unittest

import harness as H

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def sse_data(text):
    for block in re.split(r"\r\n\r\n|\n\n|\r\r", text):
        lines = [l for l in re.split(r"\r\n|\n|\r", block) if l.startswith("data:")]
        if lines:
            yield "\n".join(l[5:].lstrip(" ") if l[5:6] == " " else l[5:] for l in lines)


FX_DIRS = [FIXTURES]  # the class adds its own folder of extra answers


def upstream_answer(name):
    """(available, kind, per-choice content, finished) of an upstream fixture, read here."""
    path = next(p for p in (os.path.join(d, name) for d in reversed(FX_DIRS)) if os.path.exists(p))
    with open(path, encoding="utf-8") as f:
        raw = f.read()
    objs = [json.loads(raw)] if name.endswith(".json") else []
    done = False
    if not objs:
        for d in sse_data(raw):
            if d == "[DONE]":
                done = True
                continue
            try:
                objs.append(json.loads(d))
            except ValueError:
                pass
    available, kind, content, finished = None, None, {}, done
    for o in objs:
        for ch in o.get("choices") or []:
            part = ch.get("delta") or ch.get("message") or {}
            ctx = part.get("context") or {}
            if available is None and ctx.get("citations"):
                available, kind = len(ctx["citations"]), "doc"
            if isinstance(part.get("content"), str):
                content[ch.get("index", 0)] = content.get(ch.get("index", 0), "") + part["content"]
            if ch.get("finish_reason"):
                finished = True
        if available is None and (o.get("search_results") or o.get("citations")):
            available, kind = len(o.get("search_results") or o.get("citations")), "numeric"
    return available or 0, kind, content, finished


def expected_track(name):
    """The SPEC §8 numbers of one answer: (skipped, V, C, R)."""
    available, kind, content, _ = upstream_answer(name)
    text = "".join(content[i] for i in sorted(content))
    if content.get(0, "").startswith("I do not know"):
        return True, 0, 0, 0
    pattern = r"\[doc([0-9]{1,4})\]" if kind == "doc" else r"\[([0-9]{1,4})\]"
    valid = [int(n) for n in re.findall(pattern, text) if 1 <= int(n) <= available]
    return False, available, len(set(valid)), len(valid)


def write_fixture(directory, name, body):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
        f.write(body)


def chunk(content, finish=None):
    return "data: " + json.dumps({"id": "t", "object": "chat.completion.chunk", "created": 1,
                                  "model": "m", "choices": [{"index": 0, "delta": {"content": content},
                                                             "finish_reason": finish}]}) + "\n\n"


class Tracking(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        cls.fx = tempfile.mkdtemp(prefix="cg-track-fx-")
        FX_DIRS.append(cls.fx)
        for name in os.listdir(FIXTURES):
            if os.path.isfile(os.path.join(FIXTURES, name)):
                shutil.copy(os.path.join(FIXTURES, name), cls.fx)
        write_fixture(cls.fx, "dont_know.sse", chunk("I do not know [doc1].") + chunk("", "stop") +
                      "data: [DONE]\n\n")
        write_fixture(cls.fx, "no_citations.sse", chunk("Plain answer [doc1] [2].") +
                      chunk("", "stop") + "data: [DONE]\n\n")
        cls.mock = H.MockUpstream(fixtures=cls.fx).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.stop()
            cls.mock.cleanup()
            shutil.rmtree(cls.fx, ignore_errors=True)

    def start(self, env=None):
        cg = H.Citegate(upstream=self.mock.url, env=env).start()
        self.addCleanup(cg.cleanup)
        self.addCleanup(cg.stop)
        return cg

    def ask(self, cg, fixture, question="What is in the manual?"):
        body = {"stream": not fixture.endswith(".json"),
                "messages": [{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": question}]}
        st, _, data = cg.request("POST", "/v1/chat/completions", body, {"X-Mock-Fixture": fixture})
        self.assertEqual(st, 200, data[:300])
        return data

    def stats(self, cg):
        st, _, body = cg.admin("GET", "/v1/citations/stats")
        self.assertEqual(st, 200)
        return json.loads(body)

    def test_stats_and_database_agree_with_independent_count(self):
        cg = self.start()
        answers = ["azure_oyd_stream.sse", "azure_oyd_stream.sse", "azure_oyd_filters_crlf.sse",
                   "azure_oyd_response.json", "perplexity_stream.sse", "dont_know.sse",
                   "no_citations.sse", "azure_truncated.sse"]
        want = {"answers": 0, "answers_skipped": 0, "references": 0, "citations_available": 0,
                "citations_cited": 0}
        rows = {"procedural": 0, "episodic": 0}
        for i, name in enumerate(answers):
            self.ask(cg, name, question=f"question number {i}")
            if not upstream_answer(name)[3]:
                continue  # truncated: not a finished answer
            skipped, v, c, r = expected_track(name)
            if skipped:
                want["answers_skipped"] += 1
                continue
            want["answers"] += 1
            want["references"] += r
            want["citations_available"] += v
            want["citations_cited"] += c
            if v and c:
                rows["procedural"] += 1
            if v and (v - c) * 2 >= v:
                rows["episodic"] += 1
        got = self.stats(cg)
        rate = got.pop("citation_rate")
        self.assertEqual(got.pop("scope"), "process")  # SQLite: this process's totals
        self.assertEqual(got, want)
        self.assertAlmostEqual(rate, want["citations_cited"] / want["citations_available"], places=5)
        self.assertGreater(want["references"], want["citations_cited"])  # repeats are counted

        _, _, metrics = cg.admin("GET", "/metrics")
        m = re.search(rb"^citegate_citation_rate_count (\d+)", metrics, re.M)
        self.assertEqual(int(m.group(1)), sum(1 for n in answers if upstream_answer(n)[3]
                                              and not expected_track(n)[0] and expected_track(n)[1]))
        lines = [l["msg"] for l in cg.log_lines() if "citation usage:" in l.get("msg", "")]
        self.assertEqual(len(lines), want["answers"])
        _, v, c, _ = expected_track(answers[0])
        self.assertEqual(lines[0], f"citation usage: {c}/{v} references cited")

        cg.stop()  # the writer finishes its queue before the worker exits
        db = sqlite3.connect(os.path.join(cg.dir, "data", "semantic-memory.db"))
        counts = dict(db.execute("SELECT kind, count(*) FROM patterns GROUP BY kind").fetchall())
        self.assertEqual(counts.get("procedural", 0), rows["procedural"])
        self.assertEqual(counts.get("episodic", 0), rows["episodic"])
        q, rate0, cited, ids = db.execute(
            "SELECT query, citation_rate, citations, chunk_ids FROM patterns "
            "WHERE kind = 'procedural' ORDER BY id LIMIT 1").fetchone()
        _, v, c, _ = expected_track(answers[0])
        self.assertEqual(q, "question number 0")
        self.assertAlmostEqual(rate0, c / v)
        self.assertEqual(cited, c)
        self.assertEqual(len(json.loads(ids)), c)
        self.assertEqual(db.execute("PRAGMA journal_mode").fetchone()[0], "wal")
        db.close()

    def test_patterns_recall_most_similar_first(self):
        cg = self.start()
        questions = ["How do I charge the X100 battery quickly?",
                     "What does the warranty cover for manufacturing defects?",
                     "Where is the nearest authorised service centre?"]
        for q in questions:
            self.ask(cg, "azure_oyd_stream.sse", question=q)
        for probe, best in (("warranty manufacturing", 1), ("charge battery", 0),
                            ("service centre near me", 2)):
            def top():
                st, _, body = cg.admin("GET", "/v1/citations/patterns?q=" +
                                       probe.replace(" ", "+") + "&k=2")
                self.assertEqual(st, 200)
                return json.loads(body)["patterns"]
            got = top()  # at once: the worker writes its queue before recalling
            self.assertLessEqual(len(got), 2)
            self.assertEqual(got[0]["query"], questions[best], probe)
            self.assertEqual(got[0]["kind"], "procedural")
            self.assertRegex(got[0]["created_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            if len(got) == 2:
                self.assertGreaterEqual(got[0]["score"], got[1]["score"])
        st, _, body = cg.admin("GET", "/v1/citations/patterns?q=x&k=500")
        self.assertEqual(st, 400)
        self.assertEqual(json.loads(body)["error"]["code"], "invalid_k")

    def test_broken_database_leaves_answers_intact(self):
        d = tempfile.mkdtemp(prefix="cg-track-ro-")
        self.addCleanup(shutil.rmtree, d, True)
        blocker = os.path.join(d, "not-a-dir")
        open(blocker, "w").close()
        cg = self.start({"SEMANTIC_MEMORY_DB_PATH": os.path.join(blocker, "sub", "m.db")})
        exp = H.expected("azure_oyd_stream.openwebui.json")
        for _ in range(3):
            view = H.client_view.view(self.ask(cg, "azure_oyd_stream.sse").decode())
            self.assertEqual(view["content"], exp["content"])
            self.assertEqual(view["sources"], exp["sources"])
        self.assertEqual(self.stats(cg)["answers"], 3)

        def failures():
            _, _, m = cg.admin("GET", "/metrics")
            return int(re.search(rb"^citegate_tracking_failures_total (\d+)", m, re.M).group(1))
        self.assertTrue(H.wait_for(lambda: failures() >= 1, 5), failures())
        self.assertTrue(any("semantic memory" in l.get("msg", "") for l in cg.log_lines()))
        # Failed, not dropped: the writer's queue never filled.
        _, _, m = cg.admin("GET", "/metrics")
        self.assertRegex(m, rb"(?m)^citegate_tracking_writes_dropped_total 0$")

    def test_full_writer_queue_drops_are_counted(self):
        """The store down (a PostgreSQL DSN nobody listens at): patterns wait in the
        writer's queue of 4096, and those beyond it are dropped, each counted in
        tracking_writes_dropped_total and tracking_failures_total alike."""
        with open(os.path.join(FIXTURES, "azure_oyd_response.json")) as f:
            body = json.load(f)
        msg = body["choices"][0]["message"]
        msg["context"]["citations"].append(dict(msg["context"]["citations"][0], chunk_id="9"))
        msg["content"] = "Brush your dog weekly [doc1]."
        write_fixture(self.fx, "one_of_four.json", json.dumps(body))
        skipped, v, c, _ = expected_track("one_of_four.json")
        # Two patterns an answer: procedural (it cites) and episodic (3 of 4 unused).
        self.assertEqual((skipped, v, c), (False, 4, 1))
        answers, queue = 2100, 4096
        cg = self.start({"CITEGATE_TRACKING_DSN": f"postgresql://postgres@127.0.0.1:{H.free_port()}/x"})
        conn = http.client.HTTPConnection("127.0.0.1", cg.port, timeout=10)
        self.addCleanup(conn.close)
        req = json.dumps({"messages": [{"role": "user", "content": "groom?"}]})
        for i in range(answers):
            st, _, _ = H.request(cg.port, "POST", "/v1/chat/completions", req,
                                 {"X-Mock-Fixture": "one_of_four.json"}, conn=conn)
            self.assertEqual(st, 200)

        def counters():
            _, _, m = cg.admin("GET", "/metrics")
            return tuple(int(re.search(rb"^citegate_%s (\d+)" % n, m, re.M).group(1))
                         for n in (b"tracking_writes_dropped_total", b"tracking_failures_total"))
        dropped = 2 * answers - queue
        self.assertTrue(H.wait_for(lambda: counters() == (dropped, dropped), 5), counters())

    def test_workers_share_stats_and_database(self):
        cg = self.start({"CITEGATE_WORKERS": "2"})
        n = 8
        for i in range(n):
            self.ask(cg, "azure_oyd_stream.sse", question=f"worker question {i}")
        _, v, c, r = expected_track("azure_oyd_stream.sse")
        got = self.stats(cg)
        self.assertEqual((got["answers"], got["citations_available"], got["citations_cited"],
                          got["references"]), (n, n * v, n * c, n * r))
        cg.stop()
        db = sqlite3.connect(os.path.join(cg.dir, "data", "semantic-memory.db"))
        queries = {q for (q,) in db.execute("SELECT query FROM patterns WHERE kind='procedural'")}
        db.close()
        self.assertEqual(queries, {f"worker question {i}" for i in range(n)})

    def test_body_without_finish_reason_is_tracked(self):
        body = json.loads(open(os.path.join(FIXTURES, "azure_oyd_response.json")).read())
        for ch in body["choices"]:
            ch.pop("finish_reason", None)
        write_fixture(self.fx, "no_finish.json", json.dumps(body))
        cg = self.start()
        self.ask(cg, "no_finish.json")
        self.assertEqual(self.stats(cg)["answers"], 1)

    def test_tracking_off_stores_nothing(self):
        cg = self.start({"ENABLE_CITATION_TRACKING": "false"})
        self.ask(cg, "azure_oyd_stream.sse")
        got = self.stats(cg)
        self.assertEqual(got["answers"], 0)
        self.assertEqual(got["references"], 0)
        cg.stop()
        self.assertFalse(os.path.exists(os.path.join(cg.dir, "data", "semantic-memory.db")))

    def test_memory_off_still_counts(self):
        cg = self.start({"ENABLE_SEMANTIC_MEMORY": "no"})
        self.ask(cg, "azure_oyd_stream.sse")
        self.assertEqual(self.stats(cg)["answers"], 1)
        st, _, body = cg.admin("GET", "/v1/citations/patterns?q=manual")
        self.assertEqual((st, json.loads(body)), (200, {"patterns": [], "ranking": "lexical"}))
        cg.stop()
        self.assertFalse(os.path.exists(os.path.join(cg.dir, "data", "semantic-memory.db")))


if __name__ == "__main__":
    unittest.main()
