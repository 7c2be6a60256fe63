"""Semantic recall (SPEC §3 CITEGATE_EMBEDDINGS_*, §8 "Semantic recall") against the
embeddings endpoint of tests/tools/mock_upstream.py, whose vectors make paraphrases point
the same way ("How do I charge the X100?" and "power up my handset" share no word, cosine
about 0.98) and unrelated questions not ("What is the refund policy?", cosine about 0):

- Embeddings: a paraphrase is recalled by its embedding, best first, with the cosine as
  its score; one call per answer that stores patterns (one for two patterns of one
  question) and one per recall, each {"model":M,"input":TEXT} at {upstream}/v1/embeddings;
  an endpoint that fails, answers broken JSON or base64, or changes its dimension leaves
  recall lexical ("ranking":"lexical"), counts the failures, logs them once, and leaves
  every answer byte for byte what it is with embeddings off; keys: the configured one as
  Bearer and nothing else, else the caller's own (the chat request's for a pattern, the
  admin request's for a recall), and none of them in the log even at debug level or in
  the database.
- Bounds: with a slow endpoint, at most 8 calls in flight, the queue of 1024 overflows
  into counted drops, and answers are not slowed.
- EmbeddingsPostgres: the paraphrase recall with the store in PostgreSQL, the vector
  written through one replica and ranked through another.

Patterns are written once their call resolves, so every check of the store polls.
"""
import http.client
import json
import math
import os
import re
import shutil
import socket
import sqlite3
import tempfile
import threading
import time
import unittest
import urllib.parse

import harness as H
import mock_upstream as MU
import pgserver
import test_tracking as TT

MODEL = "text-embedding-3-small"
STORE_WITHIN = 10.0  # patterns are written once their call resolves (10 s timeout at most)

CHARGE = "How do I charge the X100?"
PARAPHRASE = "power up my handset"
REFUND = "What is the refund policy?"


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def context_chunk(n):
    """A first chunk carrying n Azure "On Your Data" citations."""
    cites = [{"content": f"snippet {i}", "title": f"Doc {i}", "url": None, "filepath": f"d{i}.md",
              "chunk_id": str(i)} for i in range(1, n + 1)]
    return "data: " + json.dumps({"id": "t", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                  "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                     "context": {"citations": cites}}}]}) + "\n\n"


def metrics(cg, *names):
    """From one scrape of cg's /metrics, the sum of every series of each name (None for a
    name with no series)."""
    st, _, body = cg.admin("GET", "/metrics")
    out = []
    for name in names:
        vals = re.findall(rb"^" + re.escape(name.encode()) + rb"(?:\{[^}]*\})? ([0-9.eE+-]+)\s*$",
                          body, re.M) if st == 200 else []
        out.append(sum(float(v) for v in vals) if vals else None)
    return out


def metric(cg, name):
    return metrics(cg, name)[0]


FAILURES = "citegate_embedding_failures_total"
STARTED = "citegate_embedding_requests_total"


def embedding_calls(mock):
    """The embeddings requests the mock recorded, in arrival order."""
    return [r for r in mock.requests() if r["path"].endswith("/embeddings")]


def calls_for(mock, text):
    return [r for r in embedding_calls(mock) if (r["body_json"] or {}).get("input") == text]


def header(record, name):
    """The values of header `name` in a recorded request (case-insensitive)."""
    return [v for k, v in record["headers"] if k.lower() == name.lower()]


def embeddings_lines(cg):
    return [line for line in cg.stderr().splitlines() if "embeddings" in line]


def set_embeddings(mock, **settings):
    st, _, body = mock.request("POST", "/__mock/embeddings", settings)
    assert st == 200, body
    return json.loads(body)


class Base(H.DaemonCase):
    """Shared helpers: a daemon per test against the class's mocks, chat, recall."""

    def start(self, upstream, embeddings=True, env=None):
        e = {"CITEGATE_EMBEDDINGS_MODEL": MODEL} if embeddings else {}
        e.update(env or {})
        cg = H.Citegate(upstream=upstream.url, env=e).start()
        self.addCleanup(cg.cleanup)
        self.addCleanup(self.stop_clean, cg)
        return cg

    def stop_clean(self, cg):
        """SIGTERM: exit 0 (SPEC §9), calls still queued or not, and no sanitizer report."""
        rc = cg.stop(timeout=15)
        self.assertEqual(rc, 0, cg.stderr()[-2000:])
        self.assertEqual(cg.sanitizer_reports(), [])

    def ask(self, cg, question, stream=True, headers=None, fixture=None, history=False):
        """One chat answer to `question` (the last user message); the client's body."""
        messages = [{"role": "system", "content": "Be brief."}]
        if history:  # an earlier turn: only the last user message is the question
            messages += [{"role": "user", "content": "What should I cook tonight?"},
                         {"role": "assistant", "content": "Pasta."}]
        messages.append({"role": "user", "content": question})
        h = dict(headers or {})
        if fixture:
            h["X-Mock-Fixture"] = fixture
        st, _, data = cg.request("POST", "/v1/chat/completions", {"stream": stream, "messages": messages}, h)
        self.assertEqual(st, 200, data[:300])
        return data

    def recall(self, cg, q, k=2, headers=None):
        st, _, body = H.request(cg.admin_port, "GET", "/v1/citations/patterns?q=" +
                                urllib.parse.quote_plus(q) + f"&k={k}", headers=headers, timeout=15)
        self.assertEqual(st, 200, body[:300])
        got = json.loads(body)
        self.assertIn(got.get("ranking"), ("semantic", "lexical"), got)
        return got

    def wait_recall(self, cg, q, pred, k=2, headers=None, timeout=STORE_WITHIN):
        """Recall q until pred(answer) holds (patterns are written once their call
        resolves); fails with the last answer."""
        last = {}

        def ok():
            nonlocal last
            last = self.recall(cg, q, k, headers)
            return pred(last)
        if not H.wait_for(ok, timeout, 0.2):
            self.fail(f"recall {q!r} (k={k}) never satisfied within {timeout} s; last: {last}; "
                      f"stderr: {cg.stderr()[-1500:]}")
        return last

    @staticmethod
    def semantic_with(n):
        return lambda r: r["ranking"] == "semantic" and len(r["patterns"]) >= n

    @staticmethod
    def first_is(query):
        return lambda r: bool(r["patterns"]) and r["patterns"][0]["query"] == query

    def wait_metric(self, cg, name, pred, timeout=5.0):
        """Polls metric `name` until pred(value) holds; returns the value."""
        last = None

        def ok():
            nonlocal last
            last = metric(cg, name)
            return last is not None and pred(last)
        self.assertTrue(H.wait_for(ok, timeout, 0.05), f"{name} = {last} within {timeout} s")
        return last


class Embeddings(Base):
    @classmethod
    def setUpClass(cls):
        cls.fx = tempfile.mkdtemp(prefix="cg-emb-fx-")
        for name in os.listdir(TT.FIXTURES):
            if os.path.isfile(os.path.join(TT.FIXTURES, name)):
                shutil.copy(os.path.join(TT.FIXTURES, name), cls.fx)
        # three citations, one used: a procedural pattern (rate 1/3) and an episodic one
        # (two of three unused) for the same question
        TT.write_fixture(cls.fx, "low_usage.sse", context_chunk(3) + TT.chunk("Only this one [doc1].") +
                         TT.chunk("", "stop") + "data: [DONE]\n\n")
        TT.write_fixture(cls.fx, "dont_know.sse", TT.chunk("I do not know [doc1].") + TT.chunk("", "stop") +
                         "data: [DONE]\n\n")
        TT.write_fixture(cls.fx, "no_citations.sse", TT.chunk("Plain answer [doc1] [2].") +
                         TT.chunk("", "stop") + "data: [DONE]\n\n")
        TT.FX_DIRS.append(cls.fx)
        cls.mock = H.MockUpstream(fixtures=cls.fx).start()
        cls.emb = H.MockUpstream().start()  # a separate embeddings endpoint (CITEGATE_EMBEDDINGS_URL)

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            cls.emb.cleanup()
            TT.FX_DIRS.remove(cls.fx)
            shutil.rmtree(cls.fx, ignore_errors=True)

    def setUp(self):
        self.mock.reset()  # also the embeddings settings: mode ok, dim 64, no delay
        self.emb.reset()

    # ------------------------------------------------------------------ recall

    def test_paraphrase_recalled_by_its_embedding(self):
        """A question stored with its vector is recalled by a paraphrase sharing no word,
        first, "ranking":"semantic", score = the cosine of the two vectors (> 0.9); an
        unrelated stored question ranks below it and is left out at k=1; a paraphrase of
        the other question finds that one. Fails if recall stays lexical (vectors not
        stored, or the query not embedded), if the score is not the cosine, if the calls go
        elsewhere than {upstream}/v1/embeddings or carry another body than
        {"model":M,"input":question}, or if an answer or a recall makes more than one call."""
        cg = self.start(self.mock)
        self.ask(cg, CHARGE)
        self.ask(cg, REFUND, stream=False)
        got = self.wait_recall(cg, PARAPHRASE, self.semantic_with(2))
        p = got["patterns"]
        self.assertEqual([x["query"] for x in p], [CHARGE, REFUND], got)
        self.assertEqual(p[0]["kind"], "procedural")
        want = cosine(MU.embed_vector(CHARGE, 64), MU.embed_vector(PARAPHRASE, 64))
        self.assertGreater(p[0]["score"], 0.9)
        self.assertAlmostEqual(p[0]["score"], want, places=4)  # vectors are kept as float32
        self.assertLess(p[1]["score"], 0.5)
        self.assertAlmostEqual(p[1]["score"], cosine(MU.embed_vector(REFUND, 64),
                                                     MU.embed_vector(PARAPHRASE, 64)), places=4)

        one = self.recall(cg, PARAPHRASE, k=1)
        self.assertEqual((one["ranking"], [x["query"] for x in one["patterns"]]), ("semantic", [CHARGE]))
        money = "How can I get my money back?"
        other = self.recall(cg, money, k=1)
        self.assertEqual((other["ranking"], [x["query"] for x in other["patterns"]]), ("semantic", [REFUND]))

        for q in (CHARGE, REFUND):
            calls = calls_for(self.mock, q)
            self.assertEqual(len(calls), 1, f"{q!r}: {len(calls)} embedding calls")
            self.assertEqual(calls[0]["method"], "POST")
            self.assertEqual(calls[0]["path"], "/v1/embeddings")  # {upstream}/v1/embeddings
            self.assertEqual(calls[0]["body_json"], {"model": MODEL, "input": q})
        self.assertEqual(len(calls_for(self.mock, money)), 1)  # one recall, one call

    def test_one_call_per_answer_with_patterns(self):
        """An answer that stores a procedural and an episodic pattern for one question makes
        one call, for the last user message; answers that store nothing ("I do not know",
        no citations) make none. Fails if each pattern is embedded on its own, if an earlier
        user message is embedded, or if an answer without a pattern calls the endpoint."""
        q = "How do I recharge the X100 battery?"
        self.assertEqual(TT.expected_track("low_usage.sse")[1:3], (3, 1))  # procedural + episodic
        cg = self.start(self.mock)
        self.ask(cg, "Do you know about snow?", fixture="dont_know.sse")
        self.ask(cg, "Plain question without citations?", fixture="no_citations.sse")
        self.ask(cg, q, fixture="low_usage.sse", history=True)
        self.wait_recall(cg, PARAPHRASE, lambda r: r["ranking"] == "semantic" and self.first_is(q)(r))
        self.assertEqual(len(calls_for(self.mock, q)), 1)
        self.assertEqual(calls_for(self.mock, "What should I cook tonight?"), [])
        self.assertEqual(calls_for(self.mock, "Do you know about snow?"), [])
        self.assertEqual(calls_for(self.mock, "Plain question without citations?"), [])
        cg.stop()  # the writer finishes its queue
        db = sqlite3.connect(os.path.join(cg.dir, "data", "semantic-memory.db"))
        kinds = sorted(k for (k,) in db.execute("SELECT kind FROM patterns WHERE query = ?", (q,)))
        db.close()
        self.assertEqual(kinds, ["episodic", "procedural"])

    # ------------------------------------------------------------------ failures

    def test_failing_endpoint_falls_back_to_lexical(self):
        """The endpoint answers 500: patterns are still stored (without vectors) and found
        lexically by a shared word, "ranking":"lexical"; every call started is counted as
        failed; the failures make exactly one log line mentioning embeddings (once per
        minute); and every answer is byte for byte the answer of a daemon with embeddings
        off. Fails if a failed call loses its pattern, blocks or alters an answer, is not
        counted, or is logged once per failure."""
        set_embeddings(self.mock, mode="status:500")
        cg = self.start(self.mock)
        off = self.start(self.mock, embeddings=False)
        at_start = len(embeddings_lines(cg))
        questions = [("How do I charge the X100 battery quickly?", True),
                     ("What does the warranty cover for manufacturing defects?", False),
                     ("Where is the nearest authorised service centre?", True)]
        on_bodies = [self.ask(cg, q, stream=s) for q, s in questions]
        off_bodies = [self.ask(off, q, stream=s) for q, s in questions]
        for (q, _), a, b in zip(questions, on_bodies, off_bodies):
            self.assertEqual(a, b, f"the answer to {q!r} differs with embeddings on")

        got = self.wait_recall(cg, "warranty manufacturing", self.first_is(questions[1][0]))
        self.assertEqual(got["ranking"], "lexical")
        self.assertEqual(self.recall(cg, "charge battery")["patterns"][0]["query"], questions[0][0])

        # every call started failed: 3 patterns and at least 2 recalls
        def all_failed():
            f, r = metrics(cg, FAILURES, STARTED)
            return f is not None and f >= 5 and f == r and (f, r)
        counts = H.wait_for(all_failed, 5.0, 0.05)
        self.assertTrue(counts, f"failures, started: {metrics(cg, FAILURES, STARTED)}")
        self.assertEqual(len(embedding_calls(self.mock)), counts[1])  # each started call was sent
        self.assertFalse(metric(off, STARTED))  # embeddings off: none (or no such series)
        self.assertEqual(calls_for(self.mock, questions[0][0])[0]["outcome"], "complete")
        self.assertTrue(H.wait_for(lambda: len(embeddings_lines(cg)) > at_start, 2.0), cg.stderr()[-1500:])
        time.sleep(0.2)  # a second line, if any, would come with the next failures
        self.assertEqual(len(embeddings_lines(cg)) - at_start, 1, embeddings_lines(cg))

    def test_url_with_a_path_and_query(self):
        """CITEGATE_EMBEDDINGS_URL's path and query (an Azure deployment and its
        api-version) are the calls' own, and a failure's log line leaves the query out.
        Fails if the query is dropped (Azure would refuse every call) or logged."""
        url = self.emb.url + "/openai/deployments/emb/embeddings?api-version=2024-02-01&sig=s3cr3t"
        cg = self.start(self.mock, env={"CITEGATE_EMBEDDINGS_URL": url})
        self.ask(cg, CHARGE)
        self.wait_recall(cg, PARAPHRASE, self.first_is(CHARGE))
        calls = calls_for(self.emb, CHARGE)
        self.assertEqual(len(calls), 1)
        self.assertEqual((calls[0]["path"], calls[0]["query"]),
                         ("/openai/deployments/emb/embeddings", "api-version=2024-02-01&sig=s3cr3t"))
        set_embeddings(self.emb, mode="status:503")
        self.ask(cg, REFUND)
        self.wait_metric(cg, FAILURES, lambda v: v >= 1)
        self.assertTrue(H.wait_for(lambda: embeddings_lines(cg), 2.0), cg.stderr()[-1500:])
        self.assertIn("/openai/deployments/emb/embeddings", embeddings_lines(cg)[0])
        self.assertNotIn("s3cr3t", cg.stderr() + cg.stdout())

    def test_endpoint_that_never_answers(self):
        """The endpoint takes requests and never answers: a recall answers lexically within
        about 1 s (it waits that long for its query's vector), the pattern's call is
        abandoned after 10 s and the pattern is then found lexically, the abandoned calls
        are counted, and SIGTERM with calls hanging exits at once. Fails if a recall waits
        for the endpoint, a hung call holds its pattern for ever, or a drain waits for it."""
        set_embeddings(self.mock, mode="hang")
        cg = self.start(self.mock, env={"CITEGATE_SHUTDOWN_GRACE_MS": "30000"})
        self.ask(cg, CHARGE)
        # an admin client that leaves while its recall waits for the vector: the recall
        # is dropped when the wait ends (the sanitizer build checks nothing is used freed)
        with socket.create_connection(("127.0.0.1", cg.admin_port), timeout=5) as s:
            s.sendall(b"GET /v1/citations/patterns?q=gone HTTP/1.1\r\nHost: x\r\n\r\n")
        t0 = time.monotonic()
        got = self.recall(cg, "charge")
        took = time.monotonic() - t0
        self.assertEqual(got, {"patterns": [], "ranking": "lexical"})  # the pattern still waits
        self.assertGreater(took, 0.8)
        self.assertLess(took, 2.0)
        got = self.wait_recall(cg, "charge", self.first_is(CHARGE), timeout=15)
        self.assertEqual(got["ranking"], "lexical")
        self.wait_metric(cg, FAILURES, lambda v: v >= 1)
        self.ask(cg, REFUND)  # a call left hanging at shutdown
        t0 = time.monotonic()
        self.assertEqual(cg.stop(timeout=10), 0, cg.stderr()[-1500:])
        self.assertLess(time.monotonic() - t0, 3.0)

    def test_malformed_and_base64_answers_fall_back(self):
        """A 200 whose body is cut JSON, or whose embedding is a base64 string instead of an
        array of floats, is a failed call: the pattern is stored without a vector, recall
        is lexical, the failure counted. Fails if such an answer is taken for a vector (or
        crashes the reader), or if its pattern is lost."""
        for mode in ("malformed", "base64"):
            with self.subTest(mode=mode):
                self.mock.reset()
                set_embeddings(self.mock, mode=mode)
                cg = self.start(self.mock)
                q = f"Where is the nearest service centre ({mode})?"
                self.ask(cg, q)
                got = self.wait_recall(cg, "nearest service centre", self.first_is(q))
                self.assertEqual(got["ranking"], "lexical")
                self.wait_metric(cg, FAILURES, lambda v: v >= 2)
                self.assertEqual(len(calls_for(self.mock, q)), 1)
                cg.stop()

    def test_dimension_change_makes_recall_lexical(self):
        """Patterns stored with 64-dimension vectors; the endpoint then answers 32 (a model
        change): the recall's query vector compares with no stored one, so ranking is
        "lexical"; a pattern stored after the change is ranked by its vector again. Fails
        if vectors of different dimensions are compared (or crash), or if one change of
        model disables semantic recall for good."""
        cg = self.start(self.mock)
        self.ask(cg, CHARGE)
        self.wait_recall(cg, PARAPHRASE, lambda r: self.semantic_with(1)(r) and self.first_is(CHARGE)(r))
        self.assertEqual(metric(cg, FAILURES), 0)
        self.assertEqual(set_embeddings(self.mock, dim=32)["dim"], 32)
        before = len(calls_for(self.mock, PARAPHRASE))
        got = self.recall(cg, PARAPHRASE)
        self.assertEqual(got["ranking"], "lexical", got)
        calls = calls_for(self.mock, PARAPHRASE)  # it was embedded, in 32 dimensions
        self.assertEqual((len(calls), calls[-1]["outcome"]), (before + 1, "complete"))
        # SPEC §8: the change is counted as a failure and logged once, with both dimensions
        self.wait_metric(cg, FAILURES, lambda v: v == 1)
        changed = [l for l in embeddings_lines(cg) if "32 dimensions after 64" in l]
        self.assertEqual(len(changed), 1, embeddings_lines(cg))
        self.ask(cg, "recharge my phone")
        got = self.wait_recall(cg, PARAPHRASE, lambda r: r["ranking"] == "semantic")
        self.assertEqual(got["patterns"][0]["query"], "recharge my phone")
        self.assertGreater(got["patterns"][0]["score"], 0.9)
        self.assertEqual(metric(cg, FAILURES), 1)  # once per change, not per vector
        # A restart compares with the store: the newest stored vectors have 32 dimensions
        cg.stop()
        set_embeddings(self.mock, dim=64)
        cg2 = H.Citegate(upstream=self.mock.url, env={"CITEGATE_EMBEDDINGS_MODEL": MODEL},
                         workdir=cg.dir).start()
        self.addCleanup(self.stop_clean, cg2)
        self.assertEqual(metric(cg2, FAILURES), 0)
        self.recall(cg2, PARAPHRASE)
        self.wait_metric(cg2, FAILURES, lambda v: v == 1)
        self.assertTrue(any("64 dimensions after 32" in l for l in embeddings_lines(cg2)),
                        embeddings_lines(cg2))

    # ------------------------------------------------------------------ keys

    def test_configured_key_is_the_only_one_sent(self):
        """CITEGATE_EMBEDDINGS_API_KEY set and CITEGATE_EMBEDDINGS_URL on a second endpoint:
        every call (pattern and recall) goes there with `Authorization: Bearer KEY` and
        carries neither the client's Authorization/api-key nor the admin request's; the
        upstream gets no embeddings call. With debug logging no key appears in the daemon's
        output, and none in the database. Fails if a client's key leaks to the embeddings
        endpoint, if the URL is ignored, or if a key is logged or stored."""
        key, client, azure, admin = "emb-key-7f3a9c", "client-key-51d2e8", "azure-key-90b6f4", "admin-key-c47e1d"
        cg = self.start(self.mock, env={"CITEGATE_EMBEDDINGS_API_KEY": key,
                                        "CITEGATE_EMBEDDINGS_URL": self.emb.url + "/v1/embeddings",
                                        "CITEGATE_LOG_LEVEL": "debug"})
        self.ask(cg, CHARGE, headers={"Authorization": f"Bearer {client}", "api-key": azure})
        self.wait_recall(cg, PARAPHRASE, self.semantic_with(1), headers={"Authorization": f"Bearer {admin}"})
        # the chat request itself is forwarded with the client's credentials, as always
        chat = [r for r in self.mock.requests() if r["path"] == "/v1/chat/completions"]
        self.assertEqual(header(chat[0], "Authorization"), [f"Bearer {client}"])
        self.assertEqual(embedding_calls(self.mock), [])  # the URL wins over {upstream}
        calls = embedding_calls(self.emb)
        self.assertEqual(len(calls_for(self.emb, CHARGE)), 1)
        self.assertTrue(calls_for(self.emb, PARAPHRASE))
        for c in calls:
            self.assertEqual(c["path"], "/v1/embeddings")
            self.assertEqual(header(c, "Authorization"), [f"Bearer {key}"], c["headers"])
            self.assertEqual(header(c, "api-key"), [], c["headers"])
            sent = json.dumps(c["headers"]) + c["body"]
            for other in (client, azure, admin):
                self.assertNotIn(other, sent)
        cg.stop()
        self.assert_not_leaked(cg, (key, client, azure, admin))

    def test_caller_keys_when_none_configured(self):
        """No CITEGATE_EMBEDDINGS_API_KEY: a pattern's call carries the chat request's own
        Authorization and/or api-key, as the client sent them (only those it sent), and a
        recall's call the admin request's Authorization, not a client's. Nothing of it in
        the log at debug level or in the database. Fails if keys are mixed between callers,
        if one is dropped or rewritten, or if one is logged or stored."""
        bearer, azure, admin = "client-key-3be1a0", "azure-key-6d0c72", "admin-key-e82f15"
        cg = self.start(self.mock, env={"CITEGATE_LOG_LEVEL": "debug"})
        asks = {"How do I charge the X100 with a bearer key?": {"Authorization": f"Bearer {bearer}"},
                "How do I charge the X100 with an azure key?": {"api-key": azure},
                "How do I charge the X100 with both keys?": {"Authorization": f"Bearer {bearer}",
                                                             "api-key": azure}}
        for q, h in asks.items():
            self.ask(cg, q, headers=h)
        self.wait_recall(cg, PARAPHRASE, self.semantic_with(3), k=3,
                         headers={"Authorization": f"Bearer {admin}"})
        for q, h in asks.items():
            calls = calls_for(self.mock, q)
            self.assertEqual(len(calls), 1, q)
            self.assertEqual(header(calls[0], "Authorization"),
                             [h["Authorization"]] if "Authorization" in h else [], q)
            self.assertEqual(header(calls[0], "api-key"), [h["api-key"]] if "api-key" in h else [], q)
        recalls = calls_for(self.mock, PARAPHRASE)
        self.assertTrue(recalls)
        for c in recalls:
            self.assertEqual(header(c, "Authorization"), [f"Bearer {admin}"], c["headers"])
            self.assertEqual(header(c, "api-key"), [], c["headers"])
        cg.stop()
        self.assert_not_leaked(cg, (bearer, azure, admin))

    def assert_not_leaked(self, cg, secrets):
        out = cg.stderr() + cg.stdout()
        self.assertTrue(any(isinstance(l, dict) and l.get("level") == "debug" for l in cg.log_lines()),
                        "no debug line: is CITEGATE_LOG_LEVEL=debug honoured?")
        stored = b""
        for suffix in ("", "-wal", "-shm"):
            path = os.path.join(cg.dir, "data", "semantic-memory.db" + suffix)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    stored += f.read()
        self.assertTrue(stored, "no database written")
        for s in secrets:
            self.assertNotIn(s, out, f"{s} in the daemon's output")
            self.assertNotIn(s.encode(), stored, f"{s} in the database")


class EmbeddingsTls(Base):
    """An embeddings endpoint of its own over TLS (CITEGATE_EMBEDDINGS_URL=https://…): its
    own pool, which offers h2 by ALPN and falls back to the HTTP/1.1 the mock chooses, and
    checks the certificate against CITEGATE_UPSTREAM_CA."""

    @classmethod
    def setUpClass(cls):
        cls.certdir = tempfile.mkdtemp(prefix="cg-emb-tls-")
        cls.cert, key = H.make_cert(cls.certdir)
        cls.mock = H.MockUpstream().start()
        cls.emb = H.MockUpstream(tls_cert=cls.cert, tls_key=key).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            cls.emb.cleanup()
            shutil.rmtree(cls.certdir, ignore_errors=True)

    def setUp(self):
        self.mock.reset()
        self.emb.reset()

    def test_paraphrase_through_a_tls_endpoint(self):
        """The calls reach the TLS endpoint (and not the upstream), with the configured key,
        and the paraphrase is recalled semantically. Fails if the endpoint's own pool is not
        used, its TLS handshake or ALPN fallback breaks, or the key is not sent."""
        url = f"https://localhost:{self.emb.port}/v1/embeddings"
        cg = self.start(self.mock, env={"CITEGATE_EMBEDDINGS_URL": url,
                                        "CITEGATE_EMBEDDINGS_API_KEY": "sk-tls-key",
                                        "CITEGATE_UPSTREAM_CA": self.cert})
        self.ask(cg, CHARGE)
        got = self.wait_recall(cg, PARAPHRASE, self.first_is(CHARGE))
        self.assertEqual(got["ranking"], "semantic", got)
        calls = calls_for(self.emb, CHARGE)
        self.assertEqual(len(calls), 1)
        self.assertEqual([v for n, v in calls[0]["headers"] if n.lower() == "authorization"],
                         ["Bearer sk-tls-key"])
        self.assertEqual(calls_for(self.mock, CHARGE), [])
        self.assertNotIn("sk-tls-key", cg.stderr() + cg.stdout())

    def test_untrusted_certificate_fails_over_to_lexical(self):
        """Without the CA the handshake fails: the pattern is stored without a vector, the
        failure is counted and logged, and recall is lexical. Fails if an unverified
        endpoint is trusted, or a failed handshake loses the pattern."""
        url = f"https://localhost:{self.emb.port}/v1/embeddings"
        cg = self.start(self.mock, env={"CITEGATE_EMBEDDINGS_URL": url})
        self.ask(cg, CHARGE)
        self.wait_metric(cg, FAILURES, lambda v: v >= 1)
        got = self.wait_recall(cg, "charge", self.first_is(CHARGE))
        self.assertEqual(got["ranking"], "lexical", got)
        self.assertEqual(self.emb.stats().get("embeddings_requests", 0), 0)
        self.assertTrue(any("embeddings:" in l for l in cg.stderr().splitlines()), cg.stderr()[-1500:])


class EmbeddingsH2(Base):
    """The default endpoint, {upstream}/v1/embeddings, on an h2 upstream (tests/tools/
    h2mock.c, which answers a path ending in /embeddings with embeddings.json): the calls
    share the upstream's pool, streams on the chat answers' connection."""

    VECTOR = [0.6, 0.8, 0.0, 0.0]  # every text: so any stored question is at cosine 1

    @classmethod
    def setUpClass(cls):
        cls.fx = tempfile.mkdtemp(prefix="cg-emb-h2-")
        shutil.copy(os.path.join(TT.FIXTURES, "azure_oyd_stream.sse"), cls.fx)
        with open(os.path.join(cls.fx, "embeddings.json"), "w") as f:
            json.dump({"object": "list", "model": MODEL, "data": [
                {"object": "embedding", "index": 0, "embedding": cls.VECTOR}]}, f)
        cls.stats = os.path.join(cls.fx, "stats.json")
        cls.mock = H.H2MockUpstream(fixtures=cls.fx, args=["--stats-file", cls.stats]).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            shutil.rmtree(cls.fx, ignore_errors=True)

    def test_calls_share_the_h2_upstream_connection(self):
        """A pattern's call and a recall's call go to /v1/embeddings on the h2 upstream,
        over the one connection the chat answers use, and recall is semantic. Fails if the
        calls open a pool or connection of their own, or do not speak h2."""
        cg = self.start(self.mock, env={"CITEGATE_UPSTREAM_PROTOCOL": "h2"})
        self.ask(cg, CHARGE, headers={"Authorization": "Bearer client-key"})
        got = self.wait_recall(cg, PARAPHRASE, self.first_is(CHARGE))
        self.assertEqual(got["ranking"], "semantic", got)
        self.assertAlmostEqual(got["patterns"][0]["score"], 1.0, places=5)
        calls = [r for r in self.mock.requests()
                 if dict((n, v) for n, v in r["headers"]).get(":path") == "/v1/embeddings"]
        inputs = [json.loads(r["body"])["input"] for r in calls]
        self.assertIn(CHARGE, inputs)
        self.assertIn(PARAPHRASE, inputs)
        first = dict((n, v) for n, v in calls[inputs.index(CHARGE)]["headers"])
        self.assertEqual(first.get("authorization"), "Bearer client-key")
        self.assertEqual(first.get(":method"), "POST")
        with open(self.stats) as f:
            self.assertEqual(json.load(f)["connections"], 1)


class Bounds(Base):
    """One slow endpoint (3 s per call) and a burst of finished answers."""

    ANSWERS = 2000
    WARM = 50
    THREADS = 32
    DELAY_S = 3.0
    IN_FLIGHT, QUEUE = 8, 1024  # SPEC §8, per worker

    @classmethod
    def setUpClass(cls):
        cls.mock = H.MockUpstream().start()
        cls.emb = H.MockUpstream().start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            cls.emb.cleanup()

    def burst(self, cg, n, tag):
        """n non-streaming chat answers over THREADS keep-alive connections at once;
        returns the latencies. Every answer must be 200 and the same complete body."""
        reference = self.ask(cg, f"reference question {tag}", stream=False)
        lat, errors, lock = [], [], threading.Lock()
        todo = iter(range(n))

        def worker():
            conn = http.client.HTTPConnection("127.0.0.1", cg.port, timeout=30)
            try:
                while True:
                    with lock:
                        i = next(todo, None)
                    if i is None:
                        return
                    body = {"stream": False, "messages": [
                        {"role": "user", "content": f"burst {tag} question {i}: how do I charge the X100?"}]}
                    t0 = time.monotonic()
                    try:
                        st, _, data = H.request(cg.port, "POST", "/v1/chat/completions", body, conn=conn)
                    except Exception as e:  # noqa: BLE001  (reported below)
                        with lock:
                            errors.append(f"{i}: {e!r}")
                        continue
                    dt = time.monotonic() - t0
                    with lock:
                        lat.append(dt)
                        if st != 200 or data != reference:
                            errors.append(f"{i}: status {st}, {len(data)} bytes: {data[:120]!r}")
            finally:
                conn.close()

        threads = [threading.Thread(target=worker) for _ in range(self.THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors[:5], [])
        self.assertEqual(len(lat), n)
        return lat

    @staticmethod
    def p99(lat):
        return sorted(lat)[min(len(lat) - 1, int(0.99 * len(lat)))]

    def test_slow_endpoint_bounded_dropped_and_counted(self):
        """The endpoint takes 3 s per call and 2,000 answers finish within seconds: at most 8
        calls are in flight at once (the mock counts them), the queue of 1024 overflows and
        each answer beyond it is dropped and counted as a failure, every answer is 200 and
        complete, and the answers' p99 latency stays within 1.5x that of the same burst with
        embeddings off. Fails if calls are unbounded, if the queue grows without limit or
        drops silently, or if a waiting call slows an answer."""
        set_embeddings(self.emb, delay_ms=int(self.DELAY_S * 1000))
        grace = {"CITEGATE_SHUTDOWN_GRACE_MS": "1000"}  # the queue is full when the test ends
        off = self.start(self.mock, embeddings=False, env=grace)
        on = self.start(self.mock, env=dict(grace, CITEGATE_EMBEDDINGS_URL=self.emb.url + "/v1/embeddings"))

        self.burst(off, self.WARM, "warm-off")
        lat_off = self.burst(off, self.ANSWERS, "off")
        t_first = time.monotonic()
        self.burst(on, self.WARM, "warm-on")
        lat_on = self.burst(on, self.ANSWERS, "on")
        elapsed = time.monotonic() - t_first

        def slots(seconds):
            """Calls that can have started within `seconds` of the first: 8, and 8 more
            each time 3 s pass (each call takes at least 3 s)."""
            return self.IN_FLIGHT * (1 + int(seconds / self.DELAY_S))

        # Drops happen as answers finish: by then at most slots(elapsed) calls had left
        # the queue, so at least this many answers found it full.
        answers = self.ANSWERS + self.WARM + 2  # the two reference questions store patterns too
        least_dropped = answers - self.QUEUE - slots(elapsed)
        self.assertGreater(least_dropped, 0, f"the burst took {elapsed:.1f} s: too slow to fill the queue")
        self.wait_metric(on, FAILURES, lambda v: v >= least_dropped)
        failures, started = metrics(on, FAILURES, STARTED)
        read_at = time.monotonic() - t_first
        self.assertIsNotNone(started)
        self.assertGreaterEqual(started, self.IN_FLIGHT)
        self.assertLessEqual(started, slots(read_at))
        # only drops failed (a call takes 3 s of its 10), none counted twice: dropped =
        # answers - started - still queued
        self.assertLessEqual(failures, answers - started)

        stats = self.emb.stats()
        self.assertLessEqual(stats["embeddings_in_flight_max"], self.IN_FLIGHT, stats)
        self.assertGreaterEqual(stats["embeddings_in_flight_max"], 1, stats)
        self.assertLessEqual(stats["embeddings_requests"], slots(time.monotonic() - t_first), stats)

        # 20 ms of slack: a p99 of a few ms is mostly scheduling noise on a shared machine
        p_off, p_on = self.p99(lat_off), self.p99(lat_on)
        self.assertLessEqual(p_on, 1.5 * p_off + 0.02,
                             f"p99 {p_on * 1000:.1f} ms with embeddings, {p_off * 1000:.1f} ms without")


class EmbeddingsPostgres(Base):
    """The store in PostgreSQL (CITEGATE_TRACKING_DSN) started by pgserver.py. Like
    test_tracking_pg, it fails (never skips) when PostgreSQL is not installed."""

    @classmethod
    def setUpClass(cls):
        cls.pg = pgserver.PostgresServer().start()
        cls.mock = H.MockUpstream().start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            cls.pg.cleanup()

    def test_paraphrase_recalled_through_another_replica(self):
        """Two replicas on one database: questions answered through one are recalled by a
        paraphrase through the other, "ranking":"semantic", first, score > 0.9, the
        unrelated one below and left out at k=1. Fails if the PostgreSQL store drops the
        vectors, stores them in a form read back differently, or ranks lexically."""
        dsn = self.pg.create_db(f"cg_emb_{os.getpid()}")
        env = {"CITEGATE_TRACKING_DSN": dsn}
        a, b = self.start(self.mock, env=env), self.start(self.mock, env=env)
        self.ask(a, CHARGE)
        self.ask(a, REFUND)
        got = self.wait_recall(b, PARAPHRASE, self.semantic_with(2))
        p = got["patterns"]
        self.assertEqual([x["query"] for x in p], [CHARGE, REFUND], got)
        self.assertGreater(p[0]["score"], 0.9)
        self.assertAlmostEqual(p[0]["score"], cosine(MU.embed_vector(CHARGE, 64),
                                                     MU.embed_vector(PARAPHRASE, 64)), places=4)
        self.assertLess(p[1]["score"], 0.5)
        one = self.recall(b, PARAPHRASE, k=1)
        self.assertEqual((one["ranking"], [x["query"] for x in one["patterns"]]), ("semantic", [CHARGE]))
        for q in (CHARGE, REFUND):
            self.assertEqual(len(calls_for(self.mock, q)), 1, q)


if __name__ == "__main__":
    unittest.main()
