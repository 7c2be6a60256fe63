"""The `bedrock` dialect (SPEC §6a) end to end, with AWS's own code on the other side.

The upstream is tests/bedrock/bedrock_mock.mjs, a mock Bedrock Converse API whose event
stream is framed by @smithy/eventstream-codec (the codec of AWS's JavaScript SDK) and which
checks each request's SigV4 signature with @smithy/signature-v4 and @aws-crypto/sha256-js
(the SDK's signer), pinned by tests/bedrock/package-lock.json and installed with `npm ci`
on first use. It serves HTTP/1.1 and h2c; each class below that talks to it runs once per
upstream protocol (CITEGATE_UPSTREAM_PROTOCOL=h2 for h2c). Its answers are the fixtures of
tests/fixtures/dialects/bedrock/, each served streamed (`/converse-stream`) and as a body
(`/converse`).

- *Answers: the client's view (tests/tools/client_view.py) in profiles openwebui, openai,
  webchat and off: content with the references each block appends, sources (numbers,
  titles, the web domain when there is no title, urls, snippets, a continued citation),
  annotations, definitions and claims, finish_reason, usage, [DONE]; a body and the same
  answer streamed give the same content; exceptions and error messages inside the stream;
  broken framing (a message CRC, a prelude CRC, a length over 16 MiB) ending the answer
  with upstream_protocol_error while a neighbour stream goes on whole, and the upstream
  connection closed (HTTP/1.1) or the stream reset (h2); an upstream 400 passed through.
- *Requests: what the mock received: the path (model ids, inference profiles and ARNs
  percent-encoded, the Azure deployment as MODEL), the body (turns merged by role,
  system, inferenceConfig, toolConfig from CITEGATE_BEDROCK_TOOL_CONFIG, <source> tags
  as documents with citations on), the client's Bedrock API key; models refused with
  nothing sent.
- *Signing: with AWS keys, every request passes the mock's SigV4 check, and fails it
  when the mock expects another secret, token or region; the client's keys are not
  forwarded; the keys never reach citegate's log at debug level.
- Startup: the settings that stop citegate with exit status 2.
- Demo: the embedded bedrock demo, streamed and as a body.

Every citegate is stopped with SIGTERM at the end of its class and must exit 0 with no
sanitizer report (harness.DaemonCase). Without node or npm the module fails; it never skips.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

import harness as H  # first: it puts tests/tools on the path
import client_view

NPM_DIR = os.path.join(H.ROOT, "tests", "bedrock")
MOCK = os.path.join(NPM_DIR, "bedrock_mock.mjs")
FIXDIR = os.path.join(H.FIXTURES, "dialects", "bedrock")

PROFILES = ("openwebui", "openai", "webchat", "off")
# Unset for every citegate here unless a test sets them: the runner's own must not leak in.
AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
            "AWS_DEFAULT_REGION", "AWS_BEARER_TOKEN_BEDROCK")
ACCESS_KEY = "AKIACITEGATE7TESTKEY"
SECRET = "cG8/sEcReT+wJalrXUtnFEMI/K7MDENG/bPxRfiCYKEY"
TOKEN = "IQoJb3JpZ2luX2VjECitegateSessionToken//////////wEaCXVzLWVhc3QtMSJHMEUCIQDtoken=="
REGION = "eu-west-3"
CLIENT_KEY = "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29tLz9BY3Rpb249Q2FsbFdpdGhCZWFyZXJUb2tlbg=="
NOVA_MODEL = "us.amazon.nova-pro-v1:0"
NOVA_PATH = "/model/us.amazon.nova-pro-v1%3A0"
ARN = "arn:aws:bedrock:eu-west-3:123456789012:inference-profile/eu.amazon.nova-pro-v1:0"
ARN_PATH = ("/model/arn%3Aaws%3Abedrock%3Aeu-west-3%3A123456789012%3Ainference-profile"
            "%2Feu.amazon.nova-pro-v1%3A0")
TOOL_CONFIG = {"tools": [{"systemTool": {"name": "nova_grounding"}}]}
DEPLOYMENT_ROUTE = "/openai/deployments/{}/chat/completions?api-version=2024-10-21"
ZWSP = "\u200b"


def fixture(name):
    with open(os.path.join(FIXDIR, name + ".json"), encoding="utf-8") as f:
        return json.load(f)


# --------------------------------------------------------------------------- the mock

class BedrockMock:
    """tests/bedrock/bedrock_mock.mjs in a node process: HTTP/1.1 on .h1, h2c on .h2; its
    control paths are read over HTTP/1.1. Its scenarios: the fixtures of `fixtures`, a
    directory or several (the first that has NAME.json serves X-Mock-Scenario: NAME)."""

    def __init__(self, fixtures=(FIXDIR,)):
        self.dir = tempfile.mkdtemp(prefix="cg-bedrock-mock-")
        self.fixtures = os.pathsep.join(fixtures)
        self.proc = self.log = None

    def start(self, timeout=30):
        if shutil.which("node") is None or shutil.which("npm") is None:
            raise RuntimeError("node and npm are needed (Debian packages nodejs, npm)")
        H.ensure_npm(NPM_DIR)
        ready = os.path.join(self.dir, "ready")
        self.log = open(os.path.join(self.dir, "mock.log"), "wb")
        self.proc = subprocess.Popen(
            ["node", MOCK, "--fixtures", self.fixtures, "--ready-file", ready,
             "--parent-pid", str(os.getpid())],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=H._die_with_parent)
        if not H.wait_for(lambda: os.path.exists(ready) or self.proc.poll() is not None, timeout) \
                or not os.path.exists(ready):
            out = self.output()
            self.cleanup()
            raise RuntimeError("the bedrock mock did not start: " + out)
        with open(ready) as f:
            ports = json.load(f)
        self.h1, self.h2 = ports["h1"], ports["h2"]
        return self

    def output(self):
        try:
            with open(os.path.join(self.dir, "mock.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def url(self, proto):
        return f"http://127.0.0.1:{self.h1 if proto == 'h1' else self.h2}"

    def _call(self, method, path, body=None):
        st, _, out = H.request(self.h1, method, path, body=body)
        assert st == 200, (st, out)
        return json.loads(out)

    def requests(self):
        return self._call("GET", "/__mock/requests")

    def connections(self):
        return self._call("GET", "/__mock/connections")

    def reset(self):
        self._call("POST", "/__mock/reset", b"")

    def expect(self, credentials=None, region=REGION):
        """Check every model request's signature against these credentials (None: stop)."""
        self._call("POST", "/__mock/config", {"credentials": credentials, "region": region})

    def tagged(self, tag):
        """The recorded requests that carried X-Test-Id: tag."""
        return [r for r in self.requests() if header(r, "x-test-id") == [tag]]

    def cleanup(self):
        if self.proc is not None:
            H._stop_process(self.proc, timeout=5)
            self.proc = None
        if self.log:
            self.log.close()
            self.log = None
        shutil.rmtree(self.dir, ignore_errors=True)


def header(rec, name):
    """The values of header field `name` in a recorded request."""
    return [v for k, v in rec["headers"] if k.lower() == name]


def expected_credentials(secret=SECRET, token=TOKEN):
    return {"accessKeyId": ACCESS_KEY, "secretAccessKey": secret, "sessionToken": token}


# --------------------------------------------------------------------------- citegate

def citegate(upstream, proto, env=None):
    e = {v: None for v in AWS_VARS}
    e["CITEGATE_UPSTREAM_DIALECT"] = "bedrock"
    if proto == "h2":
        e["CITEGATE_UPSTREAM_PROTOCOL"] = "h2"
    e.update(env or {})
    return H.Citegate(upstream=upstream, env=e).start()


class BedrockCase(H.DaemonCase):
    """A mock and the citegates a class starts: at its end every citegate is stopped with
    SIGTERM and must exit 0 with no sanitizer report (H.DaemonCase), then the mock goes."""

    proto = None
    mock = None

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            if cls.mock:
                cls.mock.cleanup()


# --------------------------------------------------------------------------- reading answers

def data_events(text):
    out = []
    for _, data in client_view.sse_events(text):
        if data != "[DONE]":
            out.append(json.loads(data))
    return out


def finish_reasons(evts):
    return [c["finish_reason"] for e in evts for c in e.get("choices") or [] if c.get("finish_reason")]


def stream_annotations(evts):
    return [a for e in evts for c in e.get("choices") or []
            for a in (c.get("delta") or {}).get("annotations") or []]


def utf16_slice(s, start, end):
    return s.encode("utf-16-le")[2 * start:2 * end].decode("utf-16-le")


def source_object(label, title, url, snippet):
    """SPEC §7's SOURCE of a citation with no filepath, chunk or score."""
    head = {"id": label, "name": f"[{label}] {title}"}
    meta = {"source": f"{label}:{url or title}", "name": f"[{label}] {title}"}
    if url:
        head["url"] = url
        meta["source_url"] = url
    return {"source": head, "document": [snippet], "metadata": [meta]}


def link(label, url):
    return f"[[{label}]]({url})" if url else f"[{label}]"


# --------------------------------------------------------------------------- the answers

# Each answer: its fixture, the client's content per profile, its sources (label, title,
# url, snippet) in order of first reference, finish_reason and usage.
NOVA_URLS = {1: "https://news.example/lyon/tram-t10", 2: "https://www.lyon.example/transport/t10?lang=en",
             3: "https://fetedeslumieres.example/2025/record"}
NOVA = {
    "fixture": "nova_web",
    "content": {
        "openwebui": f"Lyon opened a new tram line, T10, in 2025.{link(1, NOVA_URLS[1])}{link(2, NOVA_URLS[2])}"
                     f" The F\u00eate des Lumi\u00e8res drew two million visitors \u2014 a record."
                     f"{link(3, NOVA_URLS[3])}{link(1, NOVA_URLS[1])} Ask me for more.",
        "webchat": f"Lyon opened a new tram line, T10, in 2025.[1]{ZWSP}[2]"
                   f" The F\u00eate des Lumi\u00e8res drew two million visitors \u2014 a record.[3]{ZWSP}[1]"
                   f" Ask me for more."
                   f"\n\n[1]: {NOVA_URLS[1]} \"news.example\"\n[2]: {NOVA_URLS[2]} \"lyon.example\""
                   f"\n[3]: {NOVA_URLS[3]} \"fetedeslumieres.example\"",
        "off": "Lyon opened a new tram line, T10, in 2025.[1][2] The F\u00eate des Lumi\u00e8res drew"
               " two million visitors \u2014 a record.[3][1] Ask me for more.",
    },
    # Nova's web citations carry no title: the domain is the title; and no sourceContent.
    "sources": [("1", "news.example", NOVA_URLS[1], ""), ("2", "lyon.example", NOVA_URLS[2], ""),
                ("3", "fetedeslumieres.example", NOVA_URLS[3], "")],
    "references": [1, 2, 3, 1],
    "finish": "stop",
    "usage": {"prompt_tokens": 412, "completion_tokens": 37, "total_tokens": 449},
}
NOVA["content"]["openai"] = NOVA["content"]["openwebui"]

DOC_URLS = {1: "https://kb.example/x100/manual", 3: "https://kb.example/service/battery"}
DOCUMENTS = {
    "fixture": "documents",
    "content": {
        "openwebui": f"The X100 charges over USB-C in about two hours.{link(1, DOC_URLS[1])} It has a"
                     f" two-year warranty and a swappable battery.[2]{link(3, DOC_URLS[3])}{link(1, DOC_URLS[1])}",
        "webchat": f"The X100 charges over USB-C in about two hours.[1] It has a two-year warranty and a"
                   f" swappable battery.[2]{ZWSP}[3]{ZWSP}[1]"
                   f"\n\n[1]: {DOC_URLS[1]} \"manual\"\n[2]: cite:2 \"Every X100 has a two-year warranty.\""
                   f"\n[3]: {DOC_URLS[3]} \"Battery service notes\"",
        "off": "The X100 charges over USB-C in about two hours.[1] It has a two-year warranty and a"
               " swappable battery.[2][3][1]",
    },
    # Sources 1 and 2 are the request's <source> tags (title, url and snippet as SPEC §5
    # says); 3 is a document no tag made: its title, its URL source, and the sourceContent
    # of its citation, continued by the delta after it.
    "sources": [("1", "manual", DOC_URLS[1], "The X100 charges over USB-C in two hours."),
                ("2", "warranty-faq.md", None, "Every X100 has a two-year warranty."),
                ("3", "Battery service notes", DOC_URLS[3], "Batteries are swapped at any service centre.")],
    "references": [1, 2, 3, 1],
    "finish": "stop",
    "usage": {"prompt_tokens": 236, "completion_tokens": 28, "total_tokens": 264},
}
DOCUMENTS["content"]["openai"] = DOCUMENTS["content"]["openwebui"]

GUIDE = "https://docs.aws.example/bedrock/citations"
NOVA_GROUNDING = "https://aws.example/nova/grounding"
CITATIONS_BODY = {
    "fixture": "citations_body",
    "content": {
        "openwebui": f"Here is what the sources say: Converse cites documents and search results"
                     f"{link(1, GUIDE)}[2], and web pages that Nova's grounding found."
                     f"{link(3, NOVA_GROUNDING)}{link(1, GUIDE)}",
        "webchat": f"Here is what the sources say: Converse cites documents and search results[1]{ZWSP}[2],"
                   f" and web pages that Nova's grounding found.[3]{ZWSP}[1]"
                   f"\n\n[1]: {GUIDE} \"Bedrock User Guide\""
                   f"\n[2]: cite:2 \"Search result citations were added in 2025.\""
                   f"\n[3]: {NOVA_GROUNDING} \"aws.example\"",
        "off": "Here is what the sources say: Converse cites documents and search results[1][2],"
               " and web pages that Nova's grounding found.[3][1]",
    },
    "sources": [("1", "Bedrock User Guide", GUIDE, "Citations are returned for documents and search results."),
                ("2", "Release notes", None, "Search result citations were added in 2025."),
                ("3", "aws.example", NOVA_GROUNDING, "")],
    "references": [1, 3, 1],
    "finish": "length",
    "usage": {"prompt_tokens": 58, "completion_tokens": 21, "total_tokens": 79},
}
CITATIONS_BODY["content"]["openai"] = CITATIONS_BODY["content"]["openwebui"]
ANSWERS = (NOVA, DOCUMENTS, CITATIONS_BODY)


def answer_request(exp, stream, include_usage=True, **extra):
    body = dict(fixture(exp["fixture"])["request"], stream=stream)
    if stream and include_usage:
        body["stream_options"] = {"include_usage": True}
    body.update(extra)
    return body


class AnswerChecks:
    """The client's view of an answer, against its expectation."""

    def check_sources(self, profile, exp, sources):
        """sources: the openwebui source events' data, or a body's `sources`."""
        want = [source_object(*s) for s in exp["sources"]] if profile == "openwebui" else []
        self.assertEqual(sources, want)

    def check_annotations(self, exp, content, annotations):
        """openai: one url_citation per reference to a source with a URL, at UTF-16 offsets
        of the final content, in the order of the references."""
        by_label = {int(s[0]): s for s in exp["sources"]}
        want = [(by_label[n][2], by_label[n][1]) for n in exp["references"] if by_label[n][2]]
        got = []
        for a in annotations:
            self.assertEqual(a["type"], "url_citation", a)
            u = a["url_citation"]
            got.append((u["url"], u["title"]))
            label = [n for n in by_label if by_label[n][2] == u["url"]][0]
            self.assertEqual(utf16_slice(content, u["start_index"], u["end_index"]),
                             link(label, u["url"]), a)
        self.assertEqual(got, want)

    def check_claims(self, exp, entities):
        """webchat: one Message whose Claims are the sources by position (= the label here,
        every answer citing its sources in label order)."""
        self.assertEqual(len(entities), 1, entities)
        (message,) = entities[0]
        self.assertEqual(message["@type"], "Message")
        claims = [(c["position"], c["appearance"]["name"], c["appearance"].get("url"))
                  for c in message["citation"]]
        self.assertEqual(claims, [(s[0], s[1], s[2]) for s in exp["sources"]])

    def check_stream(self, exp, profile, text, include_usage=True):
        v = client_view.view(text)
        self.assertEqual(v["content"], {"0": exp["content"][profile]})
        self.assertTrue(v["ends_with_done"], text[-300:])
        evts = data_events(text)
        self.assertEqual(finish_reasons(evts), [exp["finish"]])
        usage = [e for e in evts if "usage" in e]
        if include_usage:
            self.assertEqual(len(usage), 1, usage)
            self.assertEqual(usage[0]["choices"], [])
            self.assertEqual(usage[0]["usage"], exp["usage"])
            finish_at = [i for i, e in enumerate(evts)
                         if any(c.get("finish_reason") for c in e.get("choices") or [])][0]
            self.assertGreater(evts.index(usage[0]), finish_at)
        else:
            self.assertEqual(usage, [])
        self.check_sources(profile, exp, v["sources"])
        anns = stream_annotations(evts)
        ents = [e["entities"] for e in evts if "entities" in e]
        top = [c for e in evts for c in e.get("citations") or []]
        if profile == "openai":
            self.check_annotations(exp, v["content"]["0"], anns)
            self.assertEqual([c["source"]["id"] for c in top], [s[0] for s in exp["sources"] if not s[2]])
        else:
            self.assertEqual((anns, top), ([], []))
        if profile == "webchat":
            self.check_claims(exp, ents)
        else:
            self.assertEqual(ents, [])
        for e in evts:
            self.assertEqual(e.get("object"), "chat.completion.chunk", e)
            self.assertEqual(e.get("model"), fixture(exp["fixture"])["request"]["model"], e)

    def check_body(self, exp, profile, out):
        body = json.loads(out)
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["model"], fixture(exp["fixture"])["request"]["model"])
        (choice,) = body["choices"]
        self.assertEqual(choice["message"]["content"], exp["content"][profile])
        self.assertEqual(choice["finish_reason"], exp["finish"])
        self.assertEqual(body["usage"], exp["usage"])
        self.check_sources(profile, exp, body.get("sources", []))
        if profile == "openai":
            self.check_annotations(exp, choice["message"]["content"], choice["message"].get("annotations", []))


# --------------------------------------------------------------------------- answers

class Answers(AnswerChecks):
    """The client's view of every answer fixture, over one upstream protocol."""

    @classmethod
    def setUpClass(cls):
        cls.mock = BedrockMock().start()
        cls.cg = citegate(cls.mock.url(cls.proto), cls.proto)

    def setUp(self):
        self.mock.reset()

    def post(self, body, scenario, profile="openwebui", timeout=30, **hdrs):
        h = {"X-Mock-Scenario": scenario, "X-Citegate-Profile": profile,
             "Authorization": "Bearer " + CLIENT_KEY}
        h.update(hdrs)
        return self.cg.request("POST", "/v1/chat/completions", body, h, timeout=timeout)

    def stream_text(self, scenario, profile="openwebui", body=None, **hdrs):
        st, hd, out = self.post(body or answer_request(NOVA, True), scenario, profile, **hdrs)
        self.assertEqual(st, 200, out[:400])
        self.assertTrue(hd.get("Content-Type", "").startswith("text/event-stream"), hd)
        return out.decode()

    # --- answers in each profile

    def test_streams_in_every_profile(self):
        for exp in ANSWERS:
            for profile in PROFILES:
                with self.subTest(answer=exp["fixture"], profile=profile):
                    st, hd, out = self.post(answer_request(exp, True), exp["fixture"], profile)
                    self.assertEqual(st, 200, out[:400])
                    self.assertTrue(hd.get("Content-Type", "").startswith("text/event-stream"), hd)
                    self.check_stream(exp, profile, out.decode())

    def test_bodies_in_every_profile(self):
        for exp in ANSWERS:
            for profile in PROFILES:
                with self.subTest(answer=exp["fixture"], profile=profile):
                    st, hd, out = self.post(answer_request(exp, False), exp["fixture"], profile)
                    self.assertEqual(st, 200, out[:400])
                    self.assertTrue(hd.get("Content-Type", "").startswith("application/json"), hd)
                    self.check_body(exp, profile, out)

    def test_body_and_stream_give_the_same_answer(self):
        for exp in ANSWERS:
            for profile in PROFILES:
                with self.subTest(answer=exp["fixture"], profile=profile):
                    _, _, s = self.post(answer_request(exp, True), exp["fixture"], profile)
                    _, _, b = self.post(answer_request(exp, False), exp["fixture"], profile)
                    sv, bv = client_view.view(s.decode()), client_view.view(b.decode())
                    self.assertEqual(sv["content"], bv["content"])
                    self.assertEqual(sv["sources"], bv["sources"])
                    body = json.loads(b)
                    self.assertEqual(finish_reasons(data_events(s.decode())),
                                     [body["choices"][0]["finish_reason"]])
        paths = [r["path"] for r in self.mock.requests()]
        self.assertEqual(sorted(set(paths)), sorted({
            f"/model/{m}/{v}" for m in ("us.amazon.nova-pro-v1%3A0", "anthropic.claude-3-5-sonnet-20240620-v1%3A0",
                                        "us.anthropic.claude-sonnet-4-20250514-v1%3A0")
            for v in ("converse", "converse-stream")}))

    def test_usage_only_when_asked(self):
        text = self.stream_text("nova_web", "off", answer_request(NOVA, True, include_usage=False))
        self.check_stream(NOVA, "off", text, include_usage=False)

    def test_messages_cut_anywhere(self):
        """The stream written 7 bytes at a time: every message crosses reads, and the answer
        is the same."""
        text = self.stream_text("nova_web", "openwebui", **{"X-Mock-Pieces": "7"})
        self.check_stream(NOVA, "openwebui", text)

    def test_the_padding_and_message_start_are_not_content(self):
        text = self.stream_text("nova_web", "off")
        self.assertNotIn("abcdefghij", text)
        self.assertEqual(data_events(text)[0]["choices"][0]["delta"], {"role": "assistant", "content": ""})

    # --- failures inside the stream

    def check_error_end(self, text, code, message=None, content="Lyon opened "):
        v = client_view.view(text)
        self.assertFalse(v["ends_with_done"], text[-300:])
        self.assertTrue(v["ends_with_error_event"], text[-300:])
        self.assertNotIn("[DONE]", text)
        self.assertEqual(v["content"], {"0": content})
        err = data_events(text)[-1]["error"]
        self.assertEqual(err["code"], code, err)
        if message:
            self.assertEqual(err["message"], message)
        self.assertNotIn("NOT SHOWN", text)
        return err

    def test_throttling_exception(self):
        for profile in PROFILES:
            with self.subTest(profile=profile):
                self.check_error_end(self.stream_text("throttling", profile), "throttlingException",
                                     "Too many requests, please wait before trying again.")

    def test_error_message(self):
        self.check_error_end(self.stream_text("error_message"), "InternalFailure",
                             "The request processing has failed because of an unknown error, exception or failure.")

    def test_upstream_400_passes_through(self):
        for stream in (True, False):
            with self.subTest(stream=stream):
                st, hd, out = self.post(answer_request(NOVA, stream), "validation")
                self.assertEqual(st, 400)
                self.assertEqual(json.loads(out), {"message": fixture("validation")["http"]["message"]})

    # --- broken framing

    def broken_beside_a_neighbour(self, scenario, profile="openwebui"):
        """Starts a slow nova_web stream, then the broken one; returns (the broken answer's
        text, its recorded request, how long it took, the neighbour's recorded request).
        The neighbour must be whole, and still streaming when the broken one ended."""
        tag_n, tag_b = uuid.uuid4().hex, uuid.uuid4().hex
        got = {}

        def neighbour():
            got["n"] = self.post(answer_request(NOVA, True), "nova_web", "openwebui",
                                 **{"X-Mock-Delay-Ms": "80", "X-Test-Id": tag_n})

        t = threading.Thread(target=neighbour)
        t.start()
        try:
            self.assertTrue(H.wait_for(lambda: self.mock.tagged(tag_n), 10), "the neighbour never arrived")
            t0 = time.monotonic()
            st, _, out = self.post(answer_request(NOVA, True), scenario, profile, **{"X-Test-Id": tag_b})
            took = time.monotonic() - t0
            (nrec,) = self.mock.tagged(tag_n)
            self.assertFalse(nrec.get("closed"), "the neighbour ended before the broken stream did")
        finally:
            t.join(30)
        self.assertFalse(t.is_alive())
        nst, _, nout = got["n"]
        self.assertEqual(nst, 200)
        self.check_stream(NOVA, "openwebui", nout.decode())
        (brec,) = self.mock.tagged(tag_b)
        (nrec,) = self.mock.tagged(tag_n)
        return st, out.decode(), brec, took, nrec

    def check_upstream_dropped(self, brec, nrec, reset_expected=True):
        """HTTP/1.1: the broken answer's connection closed by citegate. h2: its stream reset
        (when it was still open), the connection (shared with the neighbour) kept."""
        if self.proto == "h1":
            # The mock never closes a connection itself (its keep-alive lasts 120 s): a close
            # is citegate's. The neighbour's, whole, stays open for its next request.
            self.assertNotEqual(brec["conn"], nrec["conn"])
            closed = H.wait_for(lambda: self.mock.connections()[brec["conn"]]["closed"], 5)
            self.assertTrue(closed, f"citegate kept the HTTP/1.1 connection {brec['conn']} of a broken stream")
            self.assertIsNone(self.mock.connections()[nrec["conn"]]["closed"])
        else:
            self.assertEqual(brec["conn"], nrec["conn"], "expected one h2 connection for both streams")
            self.assertIsNone(self.mock.connections()[brec["conn"]]["closed"])
            if reset_expected:
                rec = H.wait_for(lambda: [r for r in self.mock.requests() if r["seq"] == brec["seq"]
                                          and r.get("closed")], 5)
                self.assertTrue(rec, "the broken stream was never closed")
                self.assertNotIn(rec[0].get("rst_code"), (None, 0), rec[0])

    def check_next_request_works(self):
        self.check_stream(NOVA, "openwebui", self.stream_text("nova_web"))

    def test_corrupt_message_crc(self):
        st, text, brec, _, nrec = self.broken_beside_a_neighbour("corrupt_crc")
        self.assertEqual(st, 200)
        err = self.check_error_end(text, "upstream_protocol_error")
        self.assertIn("CRC", err["message"])
        self.check_upstream_dropped(brec, nrec)
        self.check_next_request_works()

    def test_corrupt_message_crc_read_with_the_end_of_the_body(self):
        """The broken message arrives in the read that ends the body: the answer ends as
        above, and the connection, whose HTTP framing is whole, still goes (SPEC §6a)."""
        st, text, brec, _, nrec = self.broken_beside_a_neighbour("corrupt_crc_at_end")
        self.assertEqual(st, 200)
        self.check_error_end(text, "upstream_protocol_error")
        self.check_upstream_dropped(brec, nrec, reset_expected=False)
        self.check_next_request_works()

    def test_corrupt_prelude_crc(self):
        """The mock holds the response open after the broken prelude: citegate ends the
        answer on the prelude alone."""
        st, text, brec, took, nrec = self.broken_beside_a_neighbour("corrupt_prelude")
        self.assertEqual(st, 200)
        err = self.check_error_end(text, "upstream_protocol_error")
        self.assertIn("prelude", err["message"])
        self.assertLess(took, 8)
        self.check_upstream_dropped(brec, nrec)
        self.check_next_request_works()

    def test_message_over_16_mib(self):
        """A prelude (its CRC right) claiming 16 MiB + 1 bytes, the response then held open:
        the answer ends at once, without waiting for the bytes."""
        st, text, brec, took, nrec = self.broken_beside_a_neighbour("oversize")
        self.assertEqual(st, 200)
        err = self.check_error_end(text, "upstream_protocol_error")
        self.assertIn("16 MiB", err["message"])
        self.assertLess(took, 8)
        self.check_upstream_dropped(brec, nrec)
        self.check_next_request_works()

    def test_broken_framing_before_anything_went_out_is_a_502(self):
        """Profile structured holds a stream to its end: when its first message is broken,
        nothing has gone to the client, which gets a 502."""
        tag = uuid.uuid4().hex
        st, hd, out = self.post(answer_request(NOVA, True), "corrupt_first", "structured", **{"X-Test-Id": tag})
        self.assertEqual(st, 502, out[:300])
        err = json.loads(out)["error"]
        self.assertEqual(err["code"], "upstream_protocol_error")
        (rec,) = self.mock.tagged(tag)
        if self.proto == "h1":
            self.assertTrue(H.wait_for(lambda: self.mock.connections()[rec["conn"]]["closed"], 5))
        self.check_next_request_works()


class H1Answers(Answers, BedrockCase):
    proto = "h1"


class H2Answers(Answers, BedrockCase):
    proto = "h2"


# --------------------------------------------------------------------------- requests

SOURCE_1 = ("The X100 charges over USB-C in two hours. " * 6).strip()  # longer than MAX_DOC_BYTES
SYSTEM = ("You are a concise assistant.\n<context>\n"
          "<source id=\"2\" name=\"warranty-faq.md\">Every X100 has a two-year warranty.</source>\n"
          f"<source id=\"1\" name=\"https://kb.example/x100/manual\">{SOURCE_1}</source>\n</context>")
CONVERSATION = {
    "model": NOVA_MODEL,
    "messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "developer", "content": "Answer in English."},
        {"role": "user", "content": "Hello."},
        {"role": "user", "content": [{"type": "text", "text": "I have an X100."},
                                     {"type": "text", "text": "It is new."}]},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "assistant", "content": ""},
        {"role": "assistant", "content": "Ask away."},
        {"role": "user", "content": "How do I charge it?"},
    ],
    "stream": True, "stream_options": {"include_usage": True},
    "max_tokens": 512, "max_completion_tokens": 256, "temperature": 0.2, "top_p": 0.9,
    "stop": ["\n\nUser:", "###"],
    # members no Converse request carries
    "n": 1, "seed": 7, "user": "user-1234", "presence_penalty": 0.5, "frequency_penalty": 0,
    "logit_bias": {"50256": -100}, "response_format": {"type": "text"}, "metadata": {"session": "abc"},
    "store": False, "reasoning_effort": "low",
}


def document(n, text):
    return {"document": {"name": f"source-{n}", "format": "txt", "source": {"text": text},
                         "citations": {"enabled": True}}}


CONVERSE = {
    "messages": [
        {"role": "user", "content": [{"text": "Hello."}, {"text": "I have an X100.It is new."}]},
        {"role": "assistant", "content": [{"text": "Hi! How can I help?"}, {"text": "Ask away."}]},
        {"role": "user", "content": [document(1, SOURCE_1), document(2, "Every X100 has a two-year warranty."),
                                     {"text": "How do I charge it?"}]},
    ],
    "system": [{"text": SYSTEM + "\n\nAnswer in English."}],
    "inferenceConfig": {"maxTokens": 256, "temperature": 0.2, "topP": 0.9, "stopSequences": ["\n\nUser:", "###"]},
    "toolConfig": TOOL_CONFIG,
}
SIMPLE = {"model": NOVA_MODEL, "stream": True, "messages": [{"role": "user", "content": "What is new in Lyon?"}]}
SIMPLE_CONVERSE = {"messages": [{"role": "user", "content": [{"text": "What is new in Lyon?"}]}],
                   "toolConfig": TOOL_CONFIG}


class Requests:
    """What the upstream receives, over one upstream protocol; no AWS keys."""

    @classmethod
    def setUpClass(cls):
        cls.mock = BedrockMock().start()
        cls.cg = citegate(cls.mock.url(cls.proto), cls.proto,
                          {"CITEGATE_BEDROCK_TOOL_CONFIG": json.dumps(TOOL_CONFIG),
                           "CITEGATE_MAX_DOC_BYTES": "64"})

    def setUp(self):
        self.mock.reset()

    def sent(self, body, path="/v1/chat/completions", headers=None):
        """POSTs through citegate (200 expected); the one request the mock received."""
        h = {"X-Citegate-Profile": "off"}
        h.update(headers or {})
        st, _, out = self.cg.request("POST", path, body, h)
        self.assertEqual(st, 200, out[:400])
        reqs = self.mock.requests()
        self.assertEqual(len(reqs), 1, reqs)
        r = reqs[0]
        self.assertEqual(r["method"], "POST")
        self.assertEqual(r["proto"], self.proto)
        self.assertEqual(header(r, "content-length"), [str(len(r["body"].encode()))])
        self.assertEqual(header(r, "content-type"), ["application/json"])
        return r

    def test_path_and_body(self):
        r = self.sent(CONVERSATION)
        self.assertEqual(r["path"], NOVA_PATH + "/converse-stream")
        self.assertEqual(r["body_json"], CONVERSE)
        self.mock.reset()
        r = self.sent(dict(CONVERSATION, stream=False))
        self.assertEqual(r["path"], NOVA_PATH + "/converse")
        self.assertEqual(r["body_json"], CONVERSE)

    def test_arn_model(self):
        for stream, verb in ((True, "converse-stream"), (False, "converse")):
            with self.subTest(stream=stream):
                self.mock.reset()
                r = self.sent(dict(SIMPLE, model=ARN, stream=stream))
                self.assertEqual(r["path"], f"{ARN_PATH}/{verb}")
                self.assertEqual(r["body_json"], SIMPLE_CONVERSE)

    def test_azure_deployment_names_the_model(self):
        for deployment, path in (("us.amazon.nova-pro-v1:0", NOVA_PATH), ("my-nova", "/model/my-nova")):
            with self.subTest(deployment=deployment):
                self.mock.reset()
                body = dict(SIMPLE, model="gpt-4o")
                r = self.sent(body, DEPLOYMENT_ROUTE.format(deployment), {"api-key": "K"})
                self.assertEqual(r["path"], path + "/converse-stream")
                self.assertEqual(r["body_json"], SIMPLE_CONVERSE)
                self.assertEqual(header(r, "authorization"), ["Bearer K"])

    def test_models_the_path_cannot_carry_are_refused(self):
        for model in ("us.amazon..nova-pro-v1:0", "nova?x=1", "nova pro", "nova%3A0", "nova#1", "n\u00f6va",
                      "", None):
            with self.subTest(model=model):
                body = dict(SIMPLE)
                if model is None:
                    del body["model"]
                else:
                    body["model"] = model
                st, hd, out = self.cg.request("POST", "/v1/chat/completions", body)
                self.assertEqual(st, 400, out)
                err = json.loads(out)["error"]
                self.assertEqual((err["type"], err["code"], err["param"]),
                                 ("invalid_request_error", "invalid_request", "model"))
                self.assertTrue(hd.get("X-Request-Id"))
        with self.subTest(model=7):  # not a string at all: a type error, on model
            st, _, out = self.cg.request("POST", "/v1/chat/completions", dict(SIMPLE, model=7))
            self.assertEqual(st, 400, out)
            self.assertEqual(json.loads(out)["error"]["param"], "model")
        for deployment in ("nova..pro", "nova%3F"):
            with self.subTest(deployment=deployment):
                st, _, out = self.cg.request("POST", DEPLOYMENT_ROUTE.format(deployment), SIMPLE)
                self.assertEqual(st, 400, out)
                self.assertEqual(json.loads(out)["error"]["param"], "model")
        self.assertEqual(self.mock.requests(), [])

    def test_client_keys_without_aws_keys(self):
        cases = [
            ({"Authorization": "Bearer " + CLIENT_KEY}, ["Bearer " + CLIENT_KEY]),
            ({"api-key": "K"}, ["Bearer K"]),
            ({"Authorization": "Bearer " + CLIENT_KEY, "api-key": "K"}, ["Bearer " + CLIENT_KEY]),
            ({}, []),
        ]
        for given, auth in cases:
            with self.subTest(headers=given):
                self.mock.reset()
                r = self.sent(SIMPLE, headers=dict(given, **{"X-Trace": "t-1"}))
                self.assertEqual(header(r, "authorization"), auth)
                self.assertEqual(header(r, "api-key"), [])
                self.assertEqual(header(r, "x-trace"), ["t-1"])
                self.assertEqual(header(r, "x-amz-date") + header(r, "x-amz-security-token")
                                 + header(r, "x-amz-content-sha256"), [])

    def test_no_tool_config_when_unset(self):
        cg = citegate(self.mock.url(self.proto), self.proto)
        try:
            st, _, out = cg.request("POST", "/v1/chat/completions", SIMPLE)
            self.assertEqual(st, 200, out[:300])
            (r,) = self.mock.requests()
            self.assertEqual(r["body_json"], {"messages": SIMPLE_CONVERSE["messages"]})
        finally:
            H.check_daemons([cg])


class H1Requests(Requests, BedrockCase):
    proto = "h1"


class H2Requests(Requests, BedrockCase):
    proto = "h2"


# --------------------------------------------------------------------------- signing

AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/bedrock/"
                     r"aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=[0-9a-f]{64}$")


class Signing(AnswerChecks):
    """AWS keys in citegate: every request SigV4-signed, checked by @smithy/signature-v4."""

    @classmethod
    def setUpClass(cls):
        cls.mock = BedrockMock().start()
        cls.cg = citegate(cls.mock.url(cls.proto), cls.proto, {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_SESSION_TOKEN": TOKEN,
            "AWS_REGION": REGION, "CITEGATE_LOG_LEVEL": "debug"})

    def setUp(self):
        self.mock.reset()
        self.mock.expect(expected_credentials())

    def post(self, body, path="/v1/chat/completions", scenario="nova_web", profile="openwebui"):
        return self.cg.request("POST", path, body, {
            "X-Mock-Scenario": scenario, "X-Citegate-Profile": profile,
            "Authorization": "Bearer " + CLIENT_KEY, "api-key": "client-azure-key"})

    def check_signed(self, r):
        self.assertEqual(r.get("signature"), "ok", r)
        (auth,) = header(r, "authorization")
        m = AUTH_RE.match(auth)
        self.assertTrue(m, auth)
        self.assertEqual((m["key"], m["region"]), (ACCESS_KEY, REGION))
        self.assertEqual(m["date"], header(r, "x-amz-date")[0][:8])
        signed = m["signed"].split(";")
        for name in ("host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"):
            self.assertIn(name, signed)
        self.assertEqual(header(r, "x-amz-security-token"), [TOKEN])
        self.assertEqual(header(r, "api-key"), [])

    def test_every_request_passes_the_signature_check(self):
        cases = [
            (answer_request(NOVA, True), "/v1/chat/completions", NOVA_PATH + "/converse-stream"),
            (answer_request(NOVA, False), "/v1/chat/completions", NOVA_PATH + "/converse"),
            (answer_request(NOVA, True, model=ARN), "/v1/chat/completions", ARN_PATH + "/converse-stream"),
            (answer_request(NOVA, True), DEPLOYMENT_ROUTE.format("us.amazon.nova-pro-v1:0"),
             NOVA_PATH + "/converse-stream"),
            (dict(CONVERSATION, stream=False), "/v1/chat/completions", NOVA_PATH + "/converse"),
        ]
        for body, route, path in cases:
            with self.subTest(route=route, path=path, stream=body["stream"]):
                self.mock.reset()
                st, _, out = self.post(body, route)
                self.assertEqual(st, 200, out[:400])
                (r,) = self.mock.requests()
                self.assertEqual(r["path"], path)
                self.check_signed(r)
                if body is cases[0][0]:
                    self.check_stream(NOVA, "openwebui", out.decode())
                elif body is cases[1][0]:
                    self.check_body(NOVA, "openwebui", out)

    def test_the_check_fails_on_other_credentials(self):
        """The mock's check is real: expecting another secret, another session token or
        another region, it refuses citegate's signature as AWS would (403)."""
        for why, creds, region in (("secret", expected_credentials(secret=SECRET[:-1] + "X"), REGION),
                                   ("token", expected_credentials(token=TOKEN + "x"), REGION),
                                   ("region", expected_credentials(), "us-east-1")):
            for stream in (True, False):
                with self.subTest(other=why, stream=stream):
                    self.mock.reset()
                    self.mock.expect(creds, region)
                    st, hd, out = self.post(answer_request(NOVA, stream))
                    self.assertEqual(st, 403, out[:400])
                    self.assertIn("signature we calculated does not match", json.loads(out)["message"])
                    (r,) = self.mock.requests()
                    self.assertTrue(r["signature"].startswith("Authorization differs"), r["signature"])
        self.mock.expect(expected_credentials())
        st, _, out = self.post(answer_request(NOVA, True))
        self.assertEqual(st, 200, out[:300])

    def test_keys_never_logged(self):
        for scenario in ("nova_web", "throttling", "corrupt_crc", "validation"):
            self.post(answer_request(NOVA, True), scenario=scenario)
        self.mock.expect(expected_credentials(secret="not-the-secret"))
        self.post(answer_request(NOVA, False))
        self.cg.request("POST", "/v1/chat/completions", dict(SIMPLE, model="bad..model"))
        log = self.cg.stderr()
        self.assertIn("POST /v1/chat/completions", log)
        self.assertIn('"level":"debug"', log)  # the level this citegate logs at
        for secret in (SECRET, ACCESS_KEY, TOKEN, CLIENT_KEY, "client-azure-key"):
            self.assertNotIn(secret, log)
        for part in (SECRET[:16], SECRET[-16:], TOKEN[:24], TOKEN[-24:]):
            self.assertNotIn(part, log)


class H1Signing(Signing, BedrockCase):
    proto = "h1"


class H2Signing(Signing, BedrockCase):
    proto = "h2"


# --------------------------------------------------------------------------- start-up

def run_both(case, env, dialect="bedrock"):
    """citegate of that dialect with env (the AWS variables unset unless env sets them), with
    --check and without: [(exit status, output)], each checked free of sanitizer reports."""
    e = {v: None for v in AWS_VARS}
    e.update({"CITEGATE_UPSTREAM_DIALECT": dialect, "CITEGATE_LISTEN": f"127.0.0.1:{H.free_port()}",
              "CITEGATE_ADMIN_LISTEN": f"127.0.0.1:{H.free_port()}"})
    e.update(env)
    out = []
    for args in (["--check"], []):
        p = H.run_citegate(args, env=e)
        text = (p.stdout + p.stderr).decode(errors="replace")
        out.append((p.returncode, text))
        case.assertEqual(H.sanitizer_reports(text), [])
    return out


class Startup(unittest.TestCase):
    """Settings that stop citegate at start (exit status 2), with --check and without."""

    def run_both(self, env):
        return run_both(self, env)

    def test_tool_config_must_be_a_json_object(self):
        for value in ("[1]", '"nova_grounding"', "{", "null"):
            with self.subTest(value=value):
                for rc, text in self.run_both({"CITEGATE_UPSTREAM": "http://127.0.0.1:9",
                                               "CITEGATE_BEDROCK_TOOL_CONFIG": value}):
                    self.assertEqual(rc, 2, text)
                    self.assertIn("CITEGATE_BEDROCK_TOOL_CONFIG", text)

    def test_one_key_without_the_other(self):
        for env, named in (({"AWS_ACCESS_KEY_ID": ACCESS_KEY}, "AWS_SECRET_ACCESS_KEY"),
                           ({"AWS_SECRET_ACCESS_KEY": SECRET}, "AWS_ACCESS_KEY_ID")):
            with self.subTest(env=list(env)):
                for rc, text in self.run_both(dict(env, CITEGATE_UPSTREAM="http://127.0.0.1:9",
                                                   AWS_REGION=REGION)):
                    self.assertEqual(rc, 2, text)
                    self.assertIn(named, text)
                    self.assertNotIn(ACCESS_KEY, text)
                    self.assertNotIn(SECRET, text)

    def test_keys_without_a_region(self):
        keys = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_SESSION_TOKEN": TOKEN}
        for upstream in ("http://127.0.0.1:9", "https://bedrock.example.com", "https://bedrock-runtime.amazonaws.com"):
            with self.subTest(upstream=upstream):
                for rc, text in self.run_both(dict(keys, CITEGATE_UPSTREAM=upstream)):
                    self.assertEqual(rc, 2, text)
                    self.assertIn("AWS_REGION", text)
                    for secret in (ACCESS_KEY, SECRET, TOKEN):
                        self.assertNotIn(secret, text)
        # The region from AWS_DEFAULT_REGION, or from a bedrock-runtime.REGION.amazonaws.com host:
        # the configuration is accepted.
        for env in ({"CITEGATE_UPSTREAM": "http://127.0.0.1:9", "AWS_DEFAULT_REGION": REGION},
                    {"CITEGATE_UPSTREAM": "https://bedrock-runtime.eu-west-3.amazonaws.com"}):
            with self.subTest(env=env):
                p = H.run_citegate(["--check"], env=dict({v: None for v in AWS_VARS}, **keys, **env,
                                                         CITEGATE_UPSTREAM_DIALECT="bedrock"))
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


# --------------------------------------------------------------------------- the demo

DEMO = ("The X100 charges over USB-C in about two hours [[1]](https://docs.example.com/x100/manual.pdf)."
        " It is covered by a two-year warranty [2], and its battery can be swapped at a service centre"
        " [[3]](https://docs.example.com/service/battery%20swap.html)[[1]](https://docs.example.com/x100/manual.pdf).")
QUESTION = {"model": "citegate-demo", "messages": [{"role": "user", "content": "How do I charge the X100?"}]}


class Demo(BedrockCase):
    """The embedded demo (no upstream) answering as Bedrock does: AWS's event stream with two
    web citations and a document citation, and the same answer as a body."""

    @classmethod
    def setUpClass(cls):
        cls.cg = citegate(None, "h1")

    def check_sources(self, sources):
        self.assertEqual([(s["source"]["name"], s["source"].get("url")) for s in sources], [
            ("[1] X100 User Manual", "https://docs.example.com/x100/manual.pdf"),
            ("[2] Warranty FAQ", None),
            ("[3] Battery service", "https://docs.example.com/service/battery swap.html")])
        self.assertTrue(all(s["document"][0] for s in sources), sources)

    def test_stream(self):
        st, hd, out = self.cg.request("POST", "/v1/chat/completions",
                                      dict(QUESTION, stream=True, stream_options={"include_usage": True}))
        self.assertEqual(st, 200)
        self.assertTrue(hd.get("Content-Type", "").startswith("text/event-stream"), hd)
        v = client_view.view(out.decode())
        self.assertEqual(v["content"], {"0": DEMO})
        self.assertTrue(v["ends_with_done"])
        self.check_sources(v["sources"])
        evts = data_events(out.decode())
        self.assertEqual(finish_reasons(evts), ["stop"])
        self.assertEqual(len([e for e in evts if "usage" in e]), 1)

    def test_body(self):
        st, _, out = self.cg.request("POST", "/v1/chat/completions", QUESTION)
        self.assertEqual(st, 200)
        body = json.loads(out)
        self.assertEqual(body["choices"][0]["message"]["content"], DEMO)
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")
        self.check_sources(body["sources"])

    def test_off_profile_shows_the_references_bedrock_gave(self):
        st, _, out = self.cg.request("POST", "/v1/chat/completions", dict(QUESTION, stream=True),
                                     {"X-Citegate-Profile": "off"})
        self.assertEqual(st, 200)
        self.assertEqual(client_view.view(out.decode())["content"]["0"],
                         "The X100 charges over USB-C in about two hours [1]. It is covered by a two-year"
                         " warranty [2], and its battery can be swapped at a service centre [3][1].")


if __name__ == "__main__":
    unittest.main()
