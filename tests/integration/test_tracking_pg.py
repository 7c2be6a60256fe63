"""Citation tracking in one PostgreSQL database shared by replicas (SPEC §3
CITEGATE_TRACKING_DSN, §8 "Store"), against a real PostgreSQL server that this
test starts (tests/integration/pgserver.py; Debian package postgresql):

- three citegate processes (one of them with two workers) share one database:
  every replica's /v1/citations/stats equals the fleet totals counted here,
  independently, within 2 s ("scope":"fleet"), and the database holds them;
- a pattern written through one replica is recalled through another, best
  first; user text never reaches SQL as syntax;
- the server stopped mid-traffic: every answer is byte for byte what it is
  with the server up, /readyz stays 200, stats and recall answer 503 within
  2 s; after a restart tracking resumes within 10 s, and patterns queued
  during the outage are written;
- a frozen server (accepts, never answers) costs answers nothing and the
  admin queries still answer 503 within 2 s;
- start-up with the server unreachable serves, and tracking starts once it
  is there; the outage is logged once, before any answer, with the DSN's
  password masked, and its end without one; the password never reaches the log;
- the schema carries its version; a newer one is refused, answers unaffected;
- a DSN libpq cannot parse is a configuration error (exit 2).
"""
import json
import os
import re
import shutil
import tempfile
import threading
import time
import unittest
import urllib.parse

import harness as H
import pgserver
import test_tracking as TT

STREAM = "azure_oyd_stream.sse"
WITHIN = 2.0  # SPEC §8: fleet stats at most 2 s behind; a 503 after at most 2 s


class TrackingPostgres(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        cls.pg = pgserver.PostgresServer().start()
        cls.fx = tempfile.mkdtemp(prefix="cg-trackpg-fx-")
        for name in os.listdir(TT.FIXTURES):
            if os.path.isfile(os.path.join(TT.FIXTURES, name)):
                shutil.copy(os.path.join(TT.FIXTURES, name), cls.fx)
        TT.write_fixture(cls.fx, "dont_know.sse", TT.chunk("I do not know [doc1].") +
                         TT.chunk("", "stop") + "data: [DONE]\n\n")
        TT.write_fixture(cls.fx, "no_citations.sse", TT.chunk("Plain answer [doc1] [2].") +
                         TT.chunk("", "stop") + "data: [DONE]\n\n")
        TT.FX_DIRS.append(cls.fx)
        cls.mock = H.MockUpstream(fixtures=cls.fx).start()
        cls.ndb = 0

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            cls.pg.cleanup()
            TT.FX_DIRS.remove(cls.fx)
            shutil.rmtree(cls.fx, ignore_errors=True)

    def setUp(self):
        if self.pg.proc is None:  # a test stopped it and failed before starting it again
            self.pg.start()

    # ------------------------------------------------------------ helpers

    def new_db(self):
        TrackingPostgres.ndb += 1
        name = f"cg_{os.getpid()}_{self.ndb}"
        return name, self.pg.create_db(name)

    def start(self, dsn, env=None):
        e = {"CITEGATE_TRACKING_DSN": dsn}
        e.update(env or {})
        cg = H.Citegate(upstream=self.mock.url, env=e).start()
        self.addCleanup(cg.cleanup)
        self.addCleanup(self.stop_clean, cg)
        return cg

    def stop_clean(self, cg):
        """SIGTERM: exit 0 and no sanitizer report (leaks included under ASan)."""
        rc = cg.stop(timeout=15)
        self.assertEqual(rc, 0, cg.stderr()[-2000:])
        self.assertEqual(cg.sanitizer_reports(), [])

    def ask(self, cg, fixture=STREAM, question="What is in the manual?"):
        body = {"stream": not fixture.endswith(".json"),
                "messages": [{"role": "user", "content": question}]}
        st, _, data = cg.request("POST", "/v1/chat/completions", body, {"X-Mock-Fixture": fixture})
        self.assertEqual(st, 200, data[:300])
        return data

    def admin(self, cg, path):
        """(status, parsed body, seconds taken)."""
        t0 = time.monotonic()
        st, _, body = cg.admin("GET", path, timeout=10)
        return st, json.loads(body), time.monotonic() - t0

    def stats(self, cg):
        st, body, _ = self.admin(cg, "/v1/citations/stats")
        return body if st == 200 else None

    def recall(self, cg, q, k=2):
        st, body, _ = self.admin(cg, "/v1/citations/patterns?q=" + urllib.parse.quote_plus(q) +
                                 f"&k={k}")
        return body["patterns"] if st == 200 else None

    def recall_until(self, cg, q, k=2):
        """The first non-empty recall of q within WITHIN (writes land asynchronously)."""
        found = []
        H.wait_for(lambda: found.append(self.recall(cg, q, k)) or found[-1], WITHIN, 0.05)
        return found[-1] or []

    def assert_unavailable_in_time(self, cg, path):
        st, body, took = self.admin(cg, path)
        self.assertEqual(st, 503, body)
        self.assertEqual(body["error"]["type"], "server_error")
        self.assertLess(took, WITHIN, f"{path} took {took:.2f} s")

    @staticmethod
    def messages(cg):
        return [l.get("msg", "") for l in cg.log_lines() if isinstance(l, dict)]

    def assert_ready(self, cg):
        t0 = time.monotonic()
        st, _, _ = cg.admin("GET", "/readyz")
        self.assertEqual(st, 200)
        self.assertLess(time.monotonic() - t0, 0.5)

    # ------------------------------------------------------------ tests

    def test_replicas_share_fleet_stats(self):
        db, dsn = self.new_db()
        cgs = [self.start(dsn, {"CITEGATE_WORKERS": "2"}), self.start(dsn), self.start(dsn)]
        answers = ["azure_oyd_stream.sse", "azure_oyd_filters_crlf.sse", "azure_oyd_response.json",
                   "perplexity_stream.sse", "dont_know.sse", "no_citations.sse",
                   "azure_truncated.sse"] * 2
        want = {"answers": 0, "answers_skipped": 0, "references": 0, "citations_available": 0,
                "citations_cited": 0}
        rows = {"procedural": 0, "episodic": 0}
        for i, name in enumerate(answers):
            self.ask(cgs[i % 3], name, question=f"fleet question {i}")
            if not TT.upstream_answer(name)[3]:
                continue  # truncated: not a finished answer
            skipped, v, c, r = TT.expected_track(name)
            if skipped:
                want["answers_skipped"] += 1
                continue
            want["answers"] += 1
            want["references"] += r
            want["citations_available"] += v
            want["citations_cited"] += c
            rows["procedural"] += 1 if v and c else 0
            rows["episodic"] += 1 if v and (v - c) * 2 >= v else 0
        done = time.monotonic()

        def all_equal():
            got = [self.stats(cg) for cg in cgs]
            return all(g is not None and {k: g[k] for k in want} == want for g in got) and got

        got = H.wait_for(all_equal, WITHIN, 0.05)
        self.assertTrue(got, f"stats not the fleet totals {want} within {WITHIN} s: "
                             f"{[self.stats(cg) for cg in cgs]}")
        self.assertLess(time.monotonic() - done, WITHIN + 0.5)
        for g in got:
            self.assertEqual(g["scope"], "fleet")
            self.assertAlmostEqual(g["citation_rate"],
                                   want["citations_cited"] / want["citations_available"], places=5)
        # /metrics stays per process: the three processes add up to the fleet
        per_process = 0
        for cg in cgs:
            _, _, m = cg.admin("GET", "/metrics")
            per_process += int(re.search(rb"^citegate_citation_rate_count (\d+)", m, re.M).group(1))
        self.assertEqual(per_process, sum(1 for n in answers if TT.upstream_answer(n)[3]
                                          and not TT.expected_track(n)[0] and TT.expected_track(n)[1]))

        # the database: the counters per writer, the patterns by kind
        sums = self.pg.psql("SELECT count(*), sum(answers), sum(answers_skipped), sum(refs),"
                            " sum(citations_available), sum(citations_cited)"
                            " FROM citegate_replica_stats", db)[0]
        # the kernel spreads the first replica's connections over its two workers: one
        # row per writer that wrote, 3 or 4
        self.assertIn(int(sums[0]), (3, 4))
        self.assertEqual([int(x) for x in sums[1:]],
                         [want["answers"], want["answers_skipped"], want["references"],
                          want["citations_available"], want["citations_cited"]])
        for cg in cgs:
            cg.stop()  # each writer finishes its queue
        kinds = dict(self.pg.psql("SELECT kind, count(*) FROM citegate_patterns GROUP BY kind", db))
        self.assertEqual({k: int(v) for k, v in kinds.items()},
                         {k: v for k, v in rows.items() if v})
        # found by its question: ids follow the commits, and each replica's writer commits
        # on its own (the first asked need not be the first written)
        got = self.pg.psql("SELECT query, citations, chunk_ids FROM citegate_patterns"
                           " WHERE kind = 'procedural' AND query = 'fleet question 0'", db)
        self.assertEqual(len(got), 1, got)
        q = got[0]
        _, v, c, _ = TT.expected_track(answers[0])
        self.assertEqual(int(q[1]), c)
        self.assertEqual(len(json.loads(q[2])), c)

    def test_pattern_written_through_one_recalled_through_another(self):
        db, dsn = self.new_db()
        a, b = self.start(dsn), self.start(dsn)
        questions = ["How do I charge the X100 battery quickly?",
                     "What does the warranty cover for manufacturing defects?",
                     "Where is the nearest authorised service centre?"]
        for q in questions:
            self.ask(a, question=q)
        for probe, best in (("warranty manufacturing", 1), ("charge battery", 0),
                            ("service centre near me", 2)):
            got = H.wait_for(lambda: self.recall(b, probe), WITHIN, 0.05)
            self.assertTrue(got, f"{probe!r} not recalled through the other replica")
            self.assertLessEqual(len(got), 2)
            self.assertEqual(got[0]["query"], questions[best], probe)
            self.assertEqual(got[0]["kind"], "procedural")
            self.assertRegex(got[0]["created_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
            self.assertGreater(got[0]["score"], 0)
            self.assertEqual(set(got[0]), {"query", "kind", "citation_rate", "citations",
                                           "created_at", "score"})
        # best first: the question sharing two words outranks those sharing one
        got = self.recall(b, "battery warranty cover", k=3)
        self.assertEqual(got[0]["query"], questions[1])
        self.assertEqual([p["score"] for p in got], sorted((p["score"] for p in got), reverse=True))
        # user text is a parameter, never SQL or tsquery syntax
        for q in ("'; DROP TABLE citegate_patterns; --", "x100 & | ! <-> :*", "or or or", "",
                  "\u00e9\u00e8 \"quoted\" -negated", None):
            # None: bytes that are not UTF-8, and a NUL
            enc = "%FF%FEbattery%00" if q is None else urllib.parse.quote_plus(q)
            st, body, _ = self.admin(b, "/v1/citations/patterns?q=" + enc)
            self.assertEqual(st, 200, (q, body))
            self.assertIsInstance(body["patterns"], list)
        self.assertEqual(self.recall(b, "x100 & | ! <-> :*")[0]["query"], questions[0])
        _, v, c, _ = TT.expected_track(STREAM)
        per_answer = (1 if v and c else 0) + (1 if v and (v - c) * 2 >= v else 0)
        self.assertEqual(self.pg.psql("SELECT count(*) FROM citegate_patterns", db),
                         [[str(3 * per_answer)]])  # the table is still there, with every row
        st, body, _ = self.admin(b, "/v1/citations/patterns?q=x&k=500")
        self.assertEqual((st, body["error"]["code"]), (400, "invalid_k"))

    def test_database_stopped_mid_traffic(self):
        db, dsn = self.new_db()
        cgs = [self.start(dsn) for _ in range(3)]
        expected = H.expected("azure_oyd_stream.openwebui.json")
        baseline = self.ask(cgs[0], question="baseline question")
        view = H.client_view.view(baseline.decode())
        self.assertEqual((view["content"], view["sources"]), (expected["content"], expected["sources"]))
        self.assertTrue(H.wait_for(lambda: self.stats(cgs[2]), WITHIN))

        bodies, errors, stop = [], [], threading.Event()

        def traffic(i):
            n = 0
            while not stop.is_set():
                try:
                    bodies.append(self.ask(cgs[(i + n) % 3], question=f"traffic {i} {n}"))
                except Exception as e:  # noqa: BLE001  (reported below)
                    errors.append(repr(e))
                n += 1

        threads = [threading.Thread(target=traffic, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        try:
            # answers before the stop and during the outage, counted rather than timed
            self.assertTrue(H.wait_for(lambda: len(bodies) >= 6 or errors, 30.0, 0.02), errors)
            self.pg.stop()
            during = len(bodies)
            self.assertTrue(H.wait_for(lambda: len(bodies) >= during + 6 or errors, 30.0, 0.02),
                            errors)
            for cg in cgs:
                self.assert_ready(cg)
                self.assert_unavailable_in_time(cg, "/v1/citations/stats")
                self.assert_unavailable_in_time(cg, "/v1/citations/patterns?q=traffic")
            # every replica's writer lost its connection writing that traffic: each logs it
            for cg in cgs:
                self.assertTrue(H.wait_for(lambda: any(m.startswith("tracking store: ") and
                                                       "reconnecting" in m
                                                       for m in self.messages(cg)), 10.0, 0.05),
                                cg.stderr()[-2000:])
            # its pattern is queued before the answer ends (tracking runs before the
            # end of the response), so it waits in the queue for the restart
            self.ask(cgs[1], question="asked while the database was down")
            self.pg.start()
            restarted = time.monotonic()

            def resumed():
                got = self.recall(cgs[2], "asked while the database was down", k=1)
                return got and got[0]["query"] == "asked while the database was down"
            self.assertTrue(H.wait_for(resumed, 10.0, 0.1), "tracking did not resume within 10 s")
            self.ask(cgs[0], question="asked after the restart")
            self.assertTrue(H.wait_for(
                lambda: (self.recall(cgs[1], "asked after the restart", k=1) or [{}])[0].get("query")
                == "asked after the restart", 10.0 - (time.monotonic() - restarted), 0.1))
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
        self.assertEqual(errors, [])
        self.assertGreater(len(bodies), 10)
        for body in bodies:
            self.assertEqual(body, baseline)  # byte for byte: the database never touched an answer
        # the fleet counts what reached it; the counters of the outage came later
        total = len(bodies) + 3  # and the baseline, the one asked while down and after
        got = H.wait_for(lambda: all((self.stats(cg) or {}).get("answers") == total for cg in cgs)
                         and self.stats(cgs[0]), WITHIN + 1.0, 0.1)
        self.assertTrue(got, f"{[self.stats(cg) for cg in cgs]} != {total} answers")
        for cg in cgs:
            _, _, m = cg.admin("GET", "/metrics")
            self.assertGreaterEqual(int(re.search(rb"^citegate_tracking_failures_total (\d+)", m,
                                                  re.M).group(1)), 2)  # the two 503s
        for cg in cgs:  # the end of the outage, each writer's once it wrote again
            self.assertTrue(H.wait_for(lambda: "tracking store: connected again"
                                       in self.messages(cg), 10.0, 0.05), cg.stderr()[-2000:])

    def test_frozen_database_costs_answers_nothing(self):
        _, dsn = self.new_db()
        cg = self.start(dsn)
        baseline = self.ask(cg, question="before the freeze")
        self.assertTrue(H.wait_for(lambda: self.stats(cg), WITHIN))
        self.pg.freeze()
        try:
            for i in range(5):
                t0 = time.monotonic()
                self.assertEqual(self.ask(cg, question=f"frozen {i}"), baseline)
                self.assertLess(time.monotonic() - t0, 1.0)
            self.assert_ready(cg)
            self.assert_unavailable_in_time(cg, "/v1/citations/stats")
            self.assert_unavailable_in_time(cg, "/v1/citations/patterns?q=frozen")
            self.assertEqual(self.ask(cg, question="after the 503s"), baseline)
        finally:
            self.pg.thaw()
        self.assertTrue(H.wait_for(lambda: (self.stats(cg) or {}).get("answers") == 7, 10.0, 0.1),
                        self.stats(cg))

    def test_start_with_database_unreachable(self):
        _, dsn = self.new_db()
        secret = dsn.replace("postgres@", "postgres:s3cret@")  # trust auth ignores it
        shown = "CITEGATE_TRACKING_DSN=postgresql://postgres:***@"
        self.pg.stop()
        try:
            cg = self.start(secret)
            # the writer's first failed open is logged at once, before any answer, with the
            # DSN masked; it opens again with backoff meanwhile, and that is not logged again
            self.assertTrue(H.wait_for(lambda: shown in cg.stderr(), 10.0, 0.05),
                            cg.stderr()[-2000:])
            expected = H.expected("azure_oyd_stream.openwebui.json")
            for i in range(3):
                view = H.client_view.view(self.ask(cg, question=f"while down {i}").decode())
                self.assertEqual((view["content"], view["sources"]),
                                 (expected["content"], expected["sources"]))
            self.assert_ready(cg)
            self.assert_unavailable_in_time(cg, "/v1/citations/stats")
        finally:
            self.pg.start()
        self.assertTrue(H.wait_for(lambda: (self.stats(cg) or {}).get("answers") == 3, 10.0, 0.1),
                        self.stats(cg))
        self.assertEqual(self.recall(cg, "while down 1", k=1)[0]["query"], "while down 1")
        # the end of the outage is logged too, without an answer to look at the writer
        self.assertTrue(H.wait_for(lambda: any(m == "tracking store: connected again"
                                               for m in self.messages(cg)), 10.0, 0.05),
                        cg.stderr()[-2000:])
        outage = [m for m in self.messages(cg) if shown in m]
        self.assertEqual(len(outage), 1, outage)  # one worker, one outage: one line
        self.assertIn("reconnecting", outage[0])
        self.assertNotIn("s3cret", cg.stderr() + cg.stdout())

    def test_schema_version(self):
        db, dsn = self.new_db()
        cg = self.start(dsn)
        self.assertTrue(H.wait_for(lambda: self.stats(cg), WITHIN))
        self.assertEqual(self.pg.psql("SELECT version FROM citegate_schema", db), [["2"]])
        idx = self.pg.psql("SELECT indexdef FROM pg_indexes WHERE tablename = 'citegate_patterns'", db)
        self.assertTrue(any("gin (query_tsv)" in r[0] for r in idx), idx)
        cg.stop()
        cg = self.start(dsn)  # a second start finds it and changes nothing
        self.assertTrue(H.wait_for(lambda: self.stats(cg), WITHIN))
        self.assertEqual(self.pg.psql("SELECT version FROM citegate_schema", db), [["2"]])

        newer, ndsn = self.new_db()
        self.pg.psql("CREATE TABLE citegate_schema (version integer NOT NULL);"
                     " INSERT INTO citegate_schema VALUES (99)", newer)
        cg = self.start(ndsn)
        baseline = self.ask(cg, question="newer schema")
        self.assertIn(b"data: [DONE]", baseline)
        self.assert_unavailable_in_time(cg, "/v1/citations/stats")
        self.ask(cg, question="newer schema, the log")
        self.assertTrue(H.wait_for(lambda: "newer than this citegate's 2" in cg.stderr(), 5.0),
                        cg.stderr()[-2000:])
        self.assertEqual(self.pg.psql("SELECT count(*) FROM pg_tables WHERE tablename ="
                                      " 'citegate_patterns'", newer), [["0"]])

    # The schema of version 1, before semantic recall's vectors.
    SCHEMA_1 = (
        "CREATE TABLE citegate_schema (version integer NOT NULL);"
        " INSERT INTO citegate_schema VALUES (1);"
        " CREATE TABLE citegate_patterns (id bigserial PRIMARY KEY,"
        " kind text NOT NULL CHECK (kind IN ('procedural', 'episodic')), query text NOT NULL,"
        " query_tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', query)) STORED,"
        " citation_rate double precision NOT NULL, avg_score double precision,"
        " citations integer NOT NULL, available integer NOT NULL, chunk_ids text NOT NULL,"
        " created_at bigint NOT NULL, replica text NOT NULL);"
        " CREATE INDEX citegate_patterns_query_tsv ON citegate_patterns USING gin (query_tsv);"
        " CREATE TABLE citegate_replica_stats (replica text PRIMARY KEY,"
        " answers bigint NOT NULL DEFAULT 0, answers_skipped bigint NOT NULL DEFAULT 0,"
        " refs bigint NOT NULL DEFAULT 0, citations_available bigint NOT NULL DEFAULT 0,"
        " citations_cited bigint NOT NULL DEFAULT 0, seq bigint NOT NULL DEFAULT 0,"
        " updated_at timestamptz NOT NULL DEFAULT now());"
        " INSERT INTO citegate_patterns (kind, query, citation_rate, citations, available,"
        " chunk_ids, created_at, replica) VALUES ('procedural', 'kept from version one', 1, 1,"
        " 1, '[]', 1795309323, 'old')")

    def test_schema_1_is_migrated(self):
        """A database a citegate without semantic recall made (version 1) gets the vector
        columns, keeps its rows, and stores new patterns: fails if the migration is missing,
        drops data, or the INSERT still names only the old columns."""
        db, dsn = self.new_db()
        self.pg.psql(self.SCHEMA_1, db)
        cg = self.start(dsn)
        self.assertTrue(H.wait_for(lambda: self.stats(cg), WITHIN))
        self.assertEqual(self.pg.psql("SELECT version FROM citegate_schema", db), [["2"]])
        cols = self.pg.psql("SELECT column_name FROM information_schema.columns"
                            " WHERE table_name = 'citegate_patterns' ORDER BY 1", db)
        self.assertIn(["embedding"], cols)
        self.assertIn(["embedding_model"], cols)
        self.assertEqual([p["query"] for p in self.recall_until(cg, "version")],
                         ["kept from version one"])
        self.ask(cg, question="a new question after the migration")
        self.assertEqual([p["query"] for p in self.recall_until(cg, "migration")],
                         ["a new question after the migration"])

    def test_bad_dsn_is_a_configuration_error(self):
        for dsn in ("mysql://u:s3cret@db/x", "postgresql://u:s3cret@db/x?no_such_option=1"):
            r = H.run_citegate(["--check"], env={"CITEGATE_TRACKING_DSN": dsn})
            err = r.stderr.decode()
            self.assertEqual(r.returncode, 2, err)
            self.assertIn("CITEGATE_TRACKING_DSN", err)
            self.assertNotIn("s3cret", err)
        r = H.run_citegate(["--check"], env={"CITEGATE_TRACKING_DSN": self.pg.dsn("x")})
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
