"""Citation aliases (SPEC §7 "structured", "Aliases"; §3 CITEGATE_CITATION_ALIASES) end to end.

The expectations come from a reference written here, apart from citegate: a small JSON scanner
that finds every string token of a tool output with where it is written, the PATH and BOX rules,
the numbering in order of first appearance, the clash rule, and the `structured` check of the
answer (expansion, validity, removal and renumbering). Against it, over an HTTP/1.1 and an h2
upstream and from HTTP/1.1 and h2c clients:

- what the upstream receives: the body byte for byte (and its Content-Length), each tool
  output equal as JSON to the reference's, no X-Citegate-Aliases field;
- what the client receives: the answer's citations expanded, the invalid ones removed and the
  markers renumbered, streamed (held to its end) and not; X-Citegate-Aliases: N;
- the switches: the request header against the configuration both ways, another profile,
  an invalid header (400 invalid_aliases), the Azure deployment route;
- citegate_alias_bytes_saved_total moves by the reference's bytes; the debug log line;
- a 1 MB tool output with 10,000 boxes; a tool output that is not JSON and a clash forwarded
  byte for byte; a body that is not JSON still refused.

Fixtures: tests/fixtures/aliases/ (the example of docs/profiles.md#aliases); the other answers
are written by the tests into a directory of their own that the mocks serve.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
import uuid

import harness as H

FIX = os.path.join(H.FIXTURES, "aliases")
CHAT = "/v1/chat/completions"

# --------------------------------------------------------------------------- the reference

WS = " \t\n\r"
NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
DEC = r"[+-]?[0-9]+(?:\.[0-9]+)?"
REGION = r"D\([0-9]+(?:, *" + DEC + r"){8}\)"
BOX = re.compile(REGION + r"(?:;" + REGION + r")*")
SCHEME = re.compile(rb"[A-Za-z][A-Za-z0-9+.\-]*://")


class NotJson(Exception):
    pass


def string_tokens(text):
    """[(start, end, is_name)] of every string token of text (quotes included), in order;
    NotJson when text is not exactly one JSON value (white space around allowed)."""
    out, i = [], 0

    def ws(i):
        while i < len(text) and text[i] in WS:
            i += 1
        return i

    def string(i, name):
        if i >= len(text) or text[i] != '"':
            raise NotJson(i)
        j = i + 1
        while j < len(text) and text[j] != '"':
            if ord(text[j]) < 0x20:
                raise NotJson(j)
            j += 2 if text[j] == "\\" else 1
        if j >= len(text):
            raise NotJson(j)
        json.loads(text[i:j + 1])  # a bad escape raises ValueError
        out.append((i, j + 1, name))
        return j + 1

    def value(i):
        i = ws(i)
        if i >= len(text):
            raise NotJson(i)
        c = text[i]
        if c in "{[":
            close = "}" if c == "{" else "]"
            i = ws(i + 1)
            if i < len(text) and text[i] == close:
                return i + 1
            while True:
                if c == "{":
                    i = ws(string(ws(i), True))
                    if i >= len(text) or text[i] != ":":
                        raise NotJson(i)
                    i += 1
                i = ws(value(i))
                if i < len(text) and text[i] == ",":
                    i += 1
                    continue
                if i < len(text) and text[i] == close:
                    return i + 1
                raise NotJson(i)
        if c == '"':
            return string(i, False)
        for lit in ("true", "false", "null"):
            if text.startswith(lit, i):
                return i + len(lit)
        m = NUMBER.match(text, i)
        if not m:
            raise NotJson(i)
        return m.end()

    try:
        if ws(value(0)) != len(text):
            raise NotJson(len(text))
    except ValueError as e:
        raise NotJson(str(e))
    return out


def is_path(s):
    b = s.encode()
    return (len(b) >= 16 and (b[:1] == b"/" or SCHEME.match(b) is not None)
            and all(c > 0x20 and c != 0x7F for c in b))


def is_box(s):
    return BOX.fullmatch(s) is not None


def tool_text(msg):
    """The text of a tool message's content, or None (a string, or its text parts joined)."""
    c = msg.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list):
        return "".join(p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
    return None


class Plan:
    """What the reference says aliasing does to a request object."""

    def __init__(self, req):
        self.req = req
        self.tools = [m for m in req["messages"] if m.get("role") == "tool" and tool_text(m) is not None]
        self.texts = [tool_text(m) for m in self.tools]
        self.alias_of, self.original, self.made_in = {}, {}, {}
        occurrences, values = [], set()
        counts = {"P": 0, "B": 0}
        for t, text in enumerate(self.texts):
            try:
                toks = string_tokens(text)
            except NotJson:
                continue
            for start, end, name in toks:
                if name:
                    continue
                s = json.loads(text[start:end])
                kind = "P" if is_path(s) else "B" if is_box(s) else None
                if kind is None:
                    values.add(s)
                    continue
                if s not in self.alias_of:
                    counts[kind] += 1
                    self.alias_of[s] = f"{kind}{counts[kind]}"
                    self.original[self.alias_of[s]] = s
                a = self.alias_of[s]
                self.made_in.setdefault(a, set()).add(t)
                occurrences.append((t, start, end, a))
        self.clash = any(f"{k}{n}" in values for k in "PB" for n in range(1, counts[k] + 1))
        if self.clash:
            self.alias_of, self.original, self.made_in, occurrences = {}, {}, {}, []
        self.count = len(self.alias_of)
        self.saved = sum(len(self.texts[t][s + 1:e - 1].encode()) - len(a)
                         for t, s, e, a in occurrences)
        self.new_texts = list(self.texts)
        for t, s, e, a in sorted(occurrences, key=lambda o: (o[0], -o[1])):
            self.new_texts[t] = self.new_texts[t][:s] + f'"{a}"' + self.new_texts[t][e:]

    def upstream_request(self):
        """The request object as it must go upstream."""
        req = json.loads(json.dumps(self.req))
        tools = [m for m in req["messages"] if m.get("role") == "tool" and tool_text(m) is not None]
        for m, old, new in zip(tools, self.texts, self.new_texts):
            if new == old:
                continue
            if isinstance(m["content"], str):
                m["content"] = new
                continue
            first = True
            for p in m["content"]:
                if isinstance(p, dict) and isinstance(p.get("text"), str):
                    p["text"] = new if first else ""
                    first = False
        return req

    def tool_values(self):
        """Each tool output as JSON, with the reference's replacements (None: not JSON)."""
        out = []
        for text in self.texts:
            try:
                string_tokens(text)
            except NotJson:
                out.append(None)
                continue
            out.append(self._replace(json.loads(text)))
        return out

    def _replace(self, v):
        if isinstance(v, dict):
            return {k: self._replace(x) for k, x in v.items()}
        if isinstance(v, list):
            return [self._replace(x) for x in v]
        if isinstance(v, str):
            return self.alias_of.get(v, v)
        return v

    # the answer
    def cited_in(self, s, t):
        exp = self.original.get(s, s)
        return t in self.made_in.get(s, ()) or exp in self.texts[t]

    def fixed_answer(self, content):
        """(corrected content, citations removed) of a {response, citations} answer."""
        obj = json.loads(content)
        cits = obj["citations"]
        newnum, kept = [], []
        for c in cits:
            ok = (isinstance(c, list) and len(c) == 2 and all(isinstance(s, str) for s in c)
                  and any(self.cited_in(c[0], t) and self.cited_in(c[1], t)
                          for t in range(len(self.texts))))
            if ok:
                kept.append([self.original.get(s, s) for s in c])
            newnum.append(len(kept) if ok else 0)
        text, out, i = obj["response"], "", 0
        while i < len(text):
            m = re.match(r"\[([0-9]{1,4})\]", text[i:]) if text[i] == "[" else None
            k = int(m.group(1)) if m else 0
            if not m or k == 0 or k > len(cits):
                run = m.end() if m else 1
                out += text[i:i + run]
                i += run
                continue
            if newnum[k - 1]:
                out += f"[{newnum[k - 1]}]"
            elif i > 0 and text[i - 1] == " " and out.endswith(" "):
                out = out[:-1]
            i += m.end()
        parts = []
        for key, val in obj.items():
            if key == "response":
                val = out
            elif key == "citations":
                val = kept
            parts.append(json.dumps(key, ensure_ascii=False) + ":" +
                         json.dumps(val, ensure_ascii=False, separators=(",", ":")))
        return "{" + ",".join(parts) + "}", len(cits) - len(kept)


def dumps(obj):
    """How the tests write request bodies; citegate escapes a rewritten tool output's
    string the same way (ensure_ascii=False), so the body upstream is predictable to the
    byte."""
    return json.dumps(obj, ensure_ascii=False).encode()


# --------------------------------------------------------------------------- inputs

LAKE = "abfss://contracts@lakeprod.dfs.core.windows.net/2024/"


def box(page, i):
    x, y = 0.5 + (i % 7) * 0.37, 1.0 + (i % 23) * 0.31
    return (f"D({page},{x:.2f},{y:.2f},{x + 2.1:.2f},{y:.2f},{x + 2.1:.2f},{y + 0.22:.2f},"
            f"{x:.2f},{y + 0.22:.2f})")


def mixed_request():
    """Tool outputs with every kind of string: PATHs and BOXes in values at every depth,
    repeated, escaped as written, in names (never aliased), near misses of both rules; a
    tool output in text parts; a bare JSON string; one that is not JSON; paths in the user
    and assistant messages (never aliased)."""
    t1 = {"collection": "C-17", "documents": [
        {"path": LAKE + "acme/MSA-2024-017.pdf", "pages": 12,
         "fields": [{"name": "total", "value": "1,200 EUR", "source": box(1, 1)},
                    {"name": "due", "value": "2025-03-01", "source": box(2, 2), "ok": True},
                    {"name": "parties", "value": None,
                     "source": box(1, 3) + ";" + box(2, 4)}]},
        {"path": "/mnt/lake/contracts/2024/acme/PO-311.pdf",
         "nested": [[["s3://bucket-eu/raw/acme/po-311.json", {"deep": [box(3, 5)]}]]],
         "fields": [{"name": "approver", "value": "J. Doe", "source": box(1, 1)}]},
        {"path": "/short/a.pdf", "near": ["/abcdefghijklmn", "/abcdefghijklmno",
                                          "https:/x/yyyyyyyyyyyy", "1http://example.com/a",
                                          "/data/with space/file.pdf", "/data/tab\there/file.pdf",
                                          "D(1,0.5,1,2,1,2,2,0.5)", "D(1.5,0,0,1,0,1,1,0,1)",
                                          "d(1,0,0,1,0,1,1,0,1)", "D(1,1e3,0,1,0,1,1,0,1)",
                                          "D(1,0,0,1,0,1,1,0,1);", "D(1 ,0,0,1,0,1,1,0,1)",
                                          "D(1,\t0,0,1,0,1,1,0,1)", "P1x", "B0", 42, 3.5, False]},
        {LAKE + "a-name-is-never-aliased.pdf": "x", box(1, 9): "a box as a name"}]}
    text1 = json.dumps(t1, ensure_ascii=False)
    # Written by hand: odd white space, \/ and \u escapes, signs and spaces in a box.
    text2 = ('{ "path" : "abfss:\\/\\/contracts@lakeprod.dfs.core.windows.net\\/2024\\/acme\\/MSA-2024-017.pdf",\n'
             '  "boxes": [ "D(1, 0.5,1.25, +2,1,2,2,-0.5,2);D(2,0,0,1,0,1,1,0,1)" ] ,\n'
             '  "caf\\u00e9": "/data/lake/caf\\u00e9/r\u00e9sum\u00e9 v2.pdf",\n'
             '  "unicode": "/data/lake/caf\u00e9/r\u00e9sum\u00e9-v2.pdf",\n'
             '  "again": "' + LAKE + 'acme/MSA-2024-017.pdf"\t}')
    half = len(text2) // 2
    return {"model": "gpt-4o", "stream": False, "messages": [
        {"role": "system", "content": "cite [path, source] pairs"},
        {"role": "user", "content": "What about " + LAKE + "acme/MSA-2024-017.pdf ?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "f", "arguments": json.dumps({"path": LAKE + "x/y.pdf"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": text1},
        {"role": "tool", "tool_call_id": "c2", "content": [
            {"type": "text", "text": text2[:half]},
            {"type": "image_url", "image_url": {"url": "https://example.com/an-image.png"}},
            {"type": "text", "text": text2[half:]}]},
        {"role": "tool", "tool_call_id": "c3", "content": '  "' + LAKE + 'bare/string.pdf"\n'},
        {"role": "tool", "tool_call_id": "c4",
         "content": "Found " + LAKE + "acme/MSA-2024-017.pdf at " + box(1, 1)},
        {"role": "tool", "tool_call_id": "c5", "content": None},
        {"role": "assistant", "content": "Looking at /mnt/lake/contracts/2024/acme/PO-311.pdf"}]}


def big_request(docs=100, per_doc=100, pad=0):
    """One tool output of about 1 MB: `docs` data-lake paths, docs * per_doc distinct boxes."""
    documents = []
    for d in range(docs):
        # every box distinct: the page carries the field's number
        fields = [{"name": f"field_{d}_{i}", "value": f"value {d}.{i} " + "x" * pad,
                   "source": box(1 + d * per_doc + i, i)} for i in range(per_doc)]
        documents.append({"path": f"{LAKE}contracts/lot-{d:03d}/agreement-{d:03d}-signed-final.pdf",
                          "fields": fields})
    tool = {"documents": documents}
    return {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "list every field"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "all", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(tool)}]}


def chat_answer(content, stream, piece=17):
    """A chat-completion answer (SSE, `piece`-character deltas; or a body) carrying content."""
    if not stream:
        return json.dumps({"id": "chatcmpl-T", "object": "chat.completion", "created": 1,
                           "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                                                      "message": {"role": "assistant",
                                                                  "content": content}}]})
    ev = [{"id": "T", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    ev += [{"id": "T", "choices": [{"index": 0, "delta": {"content": content[i:i + piece]}}]}
           for i in range(0, len(content), piece)]
    ev.append({"id": "T", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return "".join("data: " + json.dumps(e) + "\n\n" for e in ev) + "data: [DONE]\n\n"


def client_content(body):
    """The answer's content as the client reads it: a body's message, or a stream's deltas
    concatenated; and whether a stream ended with [DONE]."""
    text = body.decode()
    if text.lstrip().startswith("{"):
        return json.loads(text)["choices"][0]["message"]["content"], None
    content, last = "", None
    for block in text.split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                last = line[6:]
                if last != "[DONE]":
                    for ch in json.loads(last).get("choices") or []:
                        content += (ch.get("delta") or {}).get("content") or ""
    return content, last == "[DONE]"


def metric(cg, name="citegate_alias_bytes_saved_total"):
    st, _, body = cg.admin("GET", "/metrics")
    assert st == 200, st
    m = re.search(rb"^" + name.encode() + rb" ([0-9]+)$", body, re.M)
    assert m, f"{name} not on /metrics"
    return int(m.group(1))


# --------------------------------------------------------------------------- the daemons

class _Daemons(H.DaemonCase):
    """A mock upstream (HTTP/1.1, or the h2 mock) serving a fixture directory of the
    class's own, and citegate in front of it with the structured profile and debug logs."""
    h2 = False
    config = "on"

    @classmethod
    def setUpClass(cls):
        cls.fixdir = tempfile.mkdtemp(prefix="cg-aliases-")
        for name in os.listdir(FIX):
            shutil.copy(os.path.join(FIX, name), cls.fixdir)
        cls.mock = (H.H2MockUpstream(fixtures=cls.fixdir) if cls.h2
                    else H.MockUpstream(fixtures=cls.fixdir)).start()
        env = {"CITEGATE_PROFILE": "structured", "CITEGATE_CITATION_ALIASES": cls.config,
               "CITEGATE_LOG_LEVEL": "debug"}
        if cls.h2:
            env["CITEGATE_UPSTREAM_PROTOCOL"] = "h2"
        cls.cg = H.Citegate(upstream=cls.mock.url, env=env).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()
            shutil.rmtree(cls.fixdir, ignore_errors=True)

    def answer(self, text, ext):
        """Writes an answer for the mock to serve; returns its X-Mock-Fixture name."""
        name = f"t-{uuid.uuid4().hex}.{ext}"
        with open(os.path.join(self.fixdir, name), "w", encoding="utf-8") as f:
            f.write(text)
        return name

    def upstream(self, tag):
        """(headers as [(lower-case name, value)], body bytes) of the request tagged tag, or
        None when it never reached the upstream."""
        for r in self.mock.requests():
            hdrs = [(k.lower(), v) for k, v in r["headers"]]
            if ("x-test-id", tag) in hdrs:
                body = (r["body"].encode() if self.h2 else
                        __import__("base64").b64decode(r["body_b64"]))
                return hdrs, body
        return None

    def send(self, body, fixture=None, headers=None, path=CHAT):
        """POSTs body through citegate; returns (status, headers, body, upstream request)."""
        tag = uuid.uuid4().hex
        hd = {"X-Test-Id": tag, **(headers or {})}
        if fixture:
            hd["X-Mock-Fixture"] = fixture
        st, rh, out = self.cg.request("POST", path, body, hd)
        return st, rh, out, self.upstream(tag)


class _Aliases:
    """Tests shared by the HTTP/1.1 and h2 upstream classes (configuration on)."""

    def check_upstream(self, req, up, plan):
        """The upstream's request is the reference's, to the byte and as JSON."""
        self.assertIsNotNone(up, "nothing reached the upstream")
        hdrs, got = up
        want = dumps(plan.upstream_request())
        self.assertEqual(got, want)
        sent = json.loads(got)
        tools = [m for m in sent["messages"] if m.get("role") == "tool" and tool_text(m) is not None]
        for m, value in zip(tools, plan.tool_values()):
            if value is not None:
                self.assertEqual(json.loads(tool_text(m)), value)
        lengths = [v for k, v in hdrs if k == "content-length"]
        if not self.h2:
            self.assertEqual(lengths, [str(len(got))])
        else:  # h2: a content-length is optional, and exact when present
            self.assertIn(lengths, ([], [str(len(got))]))
        self.assertNotIn("x-citegate-aliases", [k for k, _ in hdrs])

    def test_example_upstream_body_and_answer(self):
        """The example of docs/profiles.md#aliases: two tool messages, five aliases."""
        req = json.loads(H.fixture_bytes("aliases/request.json"))
        plan = Plan(req)
        self.assertEqual((plan.count, sorted(plan.original)), (5, ["B1", "B2", "B3", "P1", "P2"]))
        for stream, fixture in ((False, "answer.json"), (True, "answer_stream.sse")):
            with self.subTest(stream=stream):
                body = dumps({**req, "stream": stream})
                st, hd, out, up = self.send(body, fixture)
                self.assertEqual(st, 200, out[:300])
                self.check_upstream({**req, "stream": stream}, up, Plan({**req, "stream": stream}))
                self.assertLess(len(up[1]), len(body))
                self.assertEqual(hd.get("X-Citegate-Aliases"), "5")
                model = json.loads(H.fixture_bytes("aliases/answer.json"))
                want, removed = plan.fixed_answer(model["choices"][0]["message"]["content"])
                got, done = client_content(out)
                self.assertEqual(got, want)
                self.assertEqual(removed, 2)
                self.assertEqual(hd.get("X-Citegate-Citations-Removed"), "2")
                self.assertIn('["' + LAKE + 'suppliers/acme/PO-2024-311.pdf",', got)
                if stream:
                    self.assertTrue(done)
                    self.assertEqual(hd.get("Content-Type"), "text/event-stream")

    def test_mixed_tool_outputs_byte_exact(self):
        """Every kind of string, parts, a bare string, escapes as written, not-JSON beside."""
        req = mixed_request()
        plan = Plan(req)
        # the reference itself, on what the request is made of
        self.assertFalse(plan.clash)
        self.assertEqual(plan.count, 11, plan.original)
        self.assertEqual(plan.original["P1"], LAKE + "acme/MSA-2024-017.pdf")
        self.assertEqual(plan.made_in["P1"], {0, 1})
        self.assertIn("/abcdefghijklmno", plan.alias_of)
        self.assertNotIn("/abcdefghijklmn", plan.alias_of)
        self.assertEqual(plan.new_texts[2], '  "P6"\n')
        self.assertEqual(plan.new_texts[3], plan.texts[3])
        st, hd, out, up = self.send(dumps(req), self.answer(chat_answer(
            json.dumps({"response": "r", "citations": []}), False), "json"))
        self.assertEqual(st, 200, out[:300])
        self.check_upstream(req, up, plan)
        self.assertEqual(hd.get("X-Citegate-Aliases"), str(plan.count))

    def test_mixed_answers_expanded_streamed_and_not(self):
        req = mixed_request()
        plan = Plan(req)
        content = json.dumps({
            "response": "A [1]. B [2]. C [3]. D [4]. E [5]. F [6]. G [7]. H [8]. I [9]. J [10].",
            "note": "P1 and [B2] are not expanded outside citations",
            "citations": [
                ["P1", "B1"],                 # tool 1
                ["P1", "B5"],                 # P1 is in tools 1 and 2, B5 in tool 2
                ["P2", "B5"],                 # P2 only in tool 1, B5 only in tool 2: removed
                ["P3", "B4"],                 # nested, tool 1
                ["P99", "B1"],                # never made: removed
                [LAKE + "acme/MSA-2024-017.pdf", "B2"],   # the string itself, as written
                ["P6", "P6"],                 # the bare string, tool 3
                ["P1", "B1", "B2"],           # not a pair: removed
                ["/short/a.pdf", "P1x"],      # plain strings of tool 1
                ["P5", "B3"]]})               # P5 in tool 2, B3 (two regions) in tool 1: removed
        for stream in (False, True):
            with self.subTest(stream=stream):
                fixture = self.answer(chat_answer(content, stream), "sse" if stream else "json")
                st, hd, out, up = self.send(dumps({**req, "stream": stream}), fixture)
                self.assertEqual(st, 200, out[:300])
                want, removed = plan.fixed_answer(content)
                self.assertEqual(removed, 4)
                got, done = client_content(out)
                self.assertEqual(got, want)
                self.assertIn('"note":"P1 and [B2] are not expanded outside citations"', got)
                self.assertEqual(hd.get("X-Citegate-Citations-Removed"), "4")
                self.assertEqual(hd.get("X-Citegate-Aliases"), "11")
                if stream:
                    self.assertTrue(done)

    def test_request_header_off_wins(self):
        req = json.loads(H.fixture_bytes("aliases/request.json"))
        body = dumps(req)
        for value in ("off", "OFF"):
            st, hd, out, up = self.send(body, "answer.json", {"X-Citegate-Aliases": value})
            self.assertEqual(st, 200, out[:300])
            self.assertEqual(up[1], body)
            self.assertIsNone(hd.get("X-Citegate-Aliases"))
            self.assertNotIn("x-citegate-aliases", [k for k, _ in up[0]])
            # P1, B1 ... stand for nothing now: every citation is removed
            self.assertEqual(hd.get("X-Citegate-Citations-Removed"), "5")

    def test_other_profile_aliases_nothing(self):
        req = json.loads(H.fixture_bytes("aliases/request.json"))
        body = dumps(req)
        for profile in ("openwebui", "openai", "markdown", "webchat", "off"):
            with self.subTest(profile=profile):
                st, hd, out, up = self.send(body, "answer.json",
                                            {"X-Citegate-Profile": profile, "X-Citegate-Aliases": "on"})
                self.assertEqual(st, 200, out[:300])
                self.assertEqual(up[1], body)
                self.assertIsNone(hd.get("X-Citegate-Aliases"))
                got, _ = client_content(out)
                self.assertIn('["P1", "B1"]', got)

    def test_invalid_header_is_400(self):
        body = dumps(json.loads(H.fixture_bytes("aliases/request.json")))
        for value in ("yes", "1", "true", "", "on,off", "onn"):
            with self.subTest(value=value):
                st, hd, out, up = self.send(body, "answer.json", {"X-Citegate-Aliases": value})
                self.assertEqual(st, 400, out[:300])
                self.assertEqual(json.loads(out)["error"]["code"], "invalid_aliases")
                self.assertIsNone(up)

    def test_metric_moves_by_the_bytes_saved(self):
        for req in (json.loads(H.fixture_bytes("aliases/request.json")), mixed_request()):
            plan = Plan(req)
            self.assertGreater(plan.saved, 0)
            before = metric(self.cg)
            st, _, out, _ = self.send(dumps(req), "answer.json")
            self.assertEqual(st, 200, out[:300])
            self.assertEqual(metric(self.cg) - before, plan.saved)
        # nothing aliased, nothing counted
        before = metric(self.cg)
        self.send(dumps(req), "answer.json", {"X-Citegate-Aliases": "off"})
        self.assertEqual(metric(self.cg), before)

    def test_debug_log_line(self):
        for req in (json.loads(H.fixture_bytes("aliases/request.json")), mixed_request()):
            plan = Plan(req)
            st, hd, out, _ = self.send(dumps(req), "answer.json")
            self.assertEqual(st, 200, out[:300])
            rid = hd.get("X-Request-Id")
            want = f"citation aliases: {plan.count} strings aliased, {plan.saved} request bytes saved"

            def lines():
                return [l for l in self.cg.log_lines() if isinstance(l, dict)
                        and l.get("request_id") == rid and l["msg"].startswith("citation aliases:")]
            H.wait_for(lambda: lines(), 5)
            self.assertEqual([(l["level"], l["msg"]) for l in lines()], [("debug", want)])
        # on, but nothing to alias
        st, hd, out, _ = self.send(dumps({"messages": [{"role": "user", "content": "hi"}]}),
                                   "answer.json")
        rid = hd.get("X-Request-Id")
        self.assertEqual(hd.get("X-Citegate-Aliases"), "0")
        self.assertTrue(H.wait_for(lambda: any(
            isinstance(l, dict) and l.get("request_id") == rid and l["msg"] == "citation aliases: none made"
            for l in self.cg.log_lines()), 5))

    def test_one_megabyte_ten_thousand_boxes(self):
        req = big_request()
        plan = Plan(req)
        self.assertEqual(plan.count, 100 + 10000)
        body = dumps(req)
        self.assertGreater(len(body), 1 << 20)
        pairs = [[plan.alias_of[doc["path"]], plan.alias_of[f["source"]]]
                 for doc in json.loads(plan.texts[0])["documents"] for f in doc["fields"]]
        cits = pairs[:1] + [["P1", "B10001"]] + pairs[1:]   # B10001 was never made
        response = " ".join(f"F{k} [{k}]." for k in range(1, 60)) + " Last [10001]."
        content = json.dumps({"response": response, "citations": cits})
        for stream in (False, True):
            with self.subTest(stream=stream):
                fixture = self.answer(chat_answer(content, stream, piece=4096),
                                      "sse" if stream else "json")
                sent = dumps({**req, "stream": stream})
                st, hd, out, up = self.send(sent, fixture)
                self.assertEqual(st, 200, out[:300])
                self.check_upstream(req, up, Plan({**req, "stream": stream}))
                # paths and boxes hold nothing to escape: the body lost what the tool output did
                self.assertEqual(len(sent) - len(up[1]), plan.saved)
                self.assertEqual(hd.get("X-Citegate-Aliases"), "10100")
                got, _ = client_content(out)
                want, removed = plan.fixed_answer(content)
                self.assertEqual(removed, 1)
                self.assertEqual(got, want)
                kept = json.loads(got)["citations"]
                self.assertEqual(len(kept), 10000)
                originals = [[doc["path"], f["source"]]
                             for doc in json.loads(plan.texts[0])["documents"] for f in doc["fields"]]
                self.assertEqual(kept, originals)
                self.assertTrue(json.loads(got)["response"].startswith("F1 [1]. F2. F3 [2]. F4 [3]."))

    def test_not_json_and_clash_forwarded_byte_for_byte(self):
        ex = json.loads(H.fixture_bytes("aliases/request.json"))
        not_json = json.loads(json.dumps(ex))
        for m in not_json["messages"]:
            if m["role"] == "tool":
                m["content"] = m["content"][:-1]  # cut: not JSON any more
        clash = json.loads(json.dumps(ex))
        tools = [m for m in clash["messages"] if m["role"] == "tool"]
        po = json.loads(tools[1]["content"])
        po["fields"][0]["ref"] = "B3"  # three boxes would be made: B3 is ambiguous
        tools[1]["content"] = json.dumps(po)
        not_clash = json.loads(json.dumps(clash))
        po["fields"][0]["ref"] = "B4"  # only B1..B3 are made: no clash
        po["fields"][0]["P1"] = "a name is not a value"
        [m for m in not_clash["messages"] if m["role"] == "tool"][1]["content"] = json.dumps(po)
        for name, req, aliased in (("not json", not_json, 0), ("clash", clash, 0),
                                   ("no clash", not_clash, 5)):
            with self.subTest(name):
                plan = Plan(req)
                self.assertEqual(plan.count, aliased)
                body = dumps(req)
                st, hd, out, up = self.send(body, "answer.json")
                self.assertEqual(st, 200, out[:300])
                self.assertEqual(hd.get("X-Citegate-Aliases"), str(aliased))
                if aliased:
                    self.check_upstream(req, up, plan)
                else:
                    self.assertEqual(up[1], body)

    def test_clash_in_another_tool_message(self):
        """A value equal to a would-be alias in any tool output, as written or escaped."""
        for written in ('"P2"', '"\\u0042\\u0033"', '["x", ["B1"]]'):
            with self.subTest(written=written):
                req = json.loads(H.fixture_bytes("aliases/request.json"))
                req["messages"].append({"role": "tool", "tool_call_id": "c9",
                                        "content": '{"items": [{"id": ' + written + '}]}'})
                self.assertTrue(Plan(req).clash)
                body = dumps(req)
                st, hd, out, up = self.send(body, "answer.json")
                self.assertEqual((st, hd.get("X-Citegate-Aliases")), (200, "0"))
                self.assertEqual(up[1], body)

    def test_body_not_json_is_400(self):
        for body in (b'{"messages":[{"role":"tool","content":"{\\"p\\":\\"/mnt/lake/a/b/c.pdf\\"}"}]',
                     b"not json", b'{"messages": [1,]}'):
            with self.subTest(body=body):
                st, _, out, up = self.send(body, "answer.json", {"X-Citegate-Aliases": "on"})
                self.assertEqual(st, 400, out[:300])
                self.assertEqual(json.loads(out)["error"]["code"], "invalid_json")
                self.assertIsNone(up)

    def test_azure_deployment_route(self):
        req = json.loads(H.fixture_bytes("aliases/request.json"))
        del req["model"]
        plan = Plan(req)
        st, hd, out, up = self.send(dumps(req), "answer.json",
                                    path="/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21")
        self.assertEqual(st, 200, out[:300])
        self.check_upstream(req, up, plan)
        self.assertEqual(hd.get("X-Citegate-Aliases"), "5")
        got, _ = client_content(out)
        self.assertEqual(got, plan.fixed_answer(json.loads(
            H.fixture_bytes("aliases/answer.json"))["choices"][0]["message"]["content"])[0])


class Http1Upstream(_Aliases, _Daemons):
    pass


class H2Upstream(_Aliases, _Daemons):
    h2 = True


class ConfigOff(_Daemons):
    """CITEGATE_CITATION_ALIASES off (the default): the request header turns aliases on."""
    config = "off"

    def test_off_by_default_on_by_header(self):
        req = json.loads(H.fixture_bytes("aliases/request.json"))
        body = dumps(req)
        st, hd, out, up = self.send(body, "answer.json")
        self.assertEqual(st, 200, out[:300])
        self.assertEqual(up[1], body)
        self.assertIsNone(hd.get("X-Citegate-Aliases"))
        before = metric(self.cg)
        plan = Plan(req)
        st, hd, out, up = self.send(body, "answer.json", {"X-Citegate-Aliases": "on"})
        self.assertEqual(st, 200, out[:300])
        self.assertEqual(up[1], dumps(plan.upstream_request()))
        self.assertEqual(hd.get("X-Citegate-Aliases"), "5")
        self.assertEqual(metric(self.cg) - before, plan.saved)
        self.assertEqual(client_content(out)[0], plan.fixed_answer(json.loads(
            H.fixture_bytes("aliases/answer.json"))["choices"][0]["message"]["content"])[0])

    def test_invalid_header_is_400_with_config_off(self):
        st, _, out, up = self.send(dumps(json.loads(H.fixture_bytes("aliases/request.json"))),
                                   "answer.json", {"X-Citegate-Aliases": "maybe"})
        self.assertEqual(st, 400, out[:300])
        self.assertEqual(json.loads(out)["error"]["code"], "invalid_aliases")
        self.assertIsNone(up)


class H2cClient(_Daemons):
    """An h2c client (nghttp, prior knowledge) in front of an HTTP/1.1 upstream."""

    def nghttp(self, body, *headers):
        path = os.path.join(self.fixdir, f"req-{uuid.uuid4().hex}.json")
        with open(path, "wb") as f:
            f.write(body)
        tag = uuid.uuid4().hex
        cmd = ["nghttp", "-v", "-d", path, "-H", "content-type: application/json",
               "-H", f"x-test-id: {tag}"]
        for h in headers:
            cmd += ["-H", h]
        p = subprocess.run(cmd + [f"http://127.0.0.1:{self.cg.port}{CHAT}"],
                           capture_output=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr.decode()[-500:])
        out = p.stdout.decode()
        fields = dict(re.findall(r"recv \(stream_id=\d+\) ([a-z0-9:-]+): (.*)", out))
        # the body: what -v prints that is not a frame trace line
        body = "\n".join(l for l in out.split("\n")
                         if not re.match(r"\[\s*[0-9.]+\]|\s{10}", l))
        return fields, body.strip(), self.upstream(tag)

    def test_h2c_client(self):
        req = json.loads(H.fixture_bytes("aliases/request.json"))
        plan = Plan(req)
        model = json.loads(H.fixture_bytes("aliases/answer.json"))["choices"][0]["message"]["content"]
        want, _ = plan.fixed_answer(model)
        for stream, fixture in ((False, "answer.json"), (True, "answer_stream.sse")):
            with self.subTest(stream=stream):
                r = {**req, "stream": stream}
                fields, body, up = self.nghttp(dumps(r), f"x-mock-fixture: {fixture}")
                self.assertEqual(fields.get(":status"), "200", body[:300])
                self.assertEqual(fields.get("x-citegate-aliases"), "5")
                self.assertEqual(fields.get("x-citegate-citations-removed"), "2")
                self.assertEqual(up[1], dumps(Plan(r).upstream_request()))
                self.assertEqual(client_content(body.encode() + (b"\n\n" if stream else b""))[0], want)
        fields, body, up = self.nghttp(dumps(req), "x-mock-fixture: answer.json",
                                       "x-citegate-aliases: nope")
        self.assertEqual(fields.get(":status"), "400")
        self.assertIsNone(up)


if __name__ == "__main__":
    unittest.main()
