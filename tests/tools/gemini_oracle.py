#!/usr/bin/env python3
"""Independent model of the `gemini` / `vertex` upstream dialects' answer side (SPEC §6a) and
of the client view citegate must give for it, in every profile.

Written from SPEC §6, §6a and §7 and ../shared/upstreams/gemini.md, never from citegate's
output. It works on decoded text: the body is split into lines and events (CR, LF or CRLF;
an event ends at a blank line), each event's data is a GenerateContentResponse of which only
candidates[0] is read, and the profiles' rewrite (tests/tools/oracle.py) is applied to the
concatenated content, knowing for each reference whether its citation had arrived by then.

The view:
  - text parts are content, except "thought": true ones; the visible text's UTF-8 bytes are
    what grounding offsets count;
  - finishReason maps STOP -> stop, MAX_TOKENS -> length, SAFETY, RECITATION, BLOCKLIST,
    PROHIBITED_CONTENT, SPII, LANGUAGE, IMAGE_* -> content_filter, anything else -> stop;
    promptFeedback.blockReason without a candidate -> content_filter; the finish is the
    last one an event named;
  - usage: the last usageMetadata (prompt, total, completion = total - prompt);
  - groundingMetadata: the last non-empty one; sources are its web / retrievedContext
    chunks, numbered in the order first cited by the supports whose endIndex (absent: 0)
    is within the text and on a character boundary, taken by endIndex then as listed, each
    support's chunks in their order, after any request-side <source> ids;
  - an `error` object (an event's data, or lines of their own outside SSE fields, complete
    once they parse as JSON) ends the stream with the error event (code = status);
  - the end: a stream gets " [N][M]…" (every cited source, number order) after its last
    text when there is grounding, before the finish, the error or the truncation; a body
    gets each support's [N]s inserted at its endIndex (one offset: supports in their order,
    a number not repeated).
A stream that ends without a finish or an error is truncated: "upstream_closed".

usage: gemini_oracle.py --regen
         rewrite tests/fixtures/expected/gemini/ from the fixtures
       gemini_oracle.py --check CITEGATE EXPECTED_JSON...
         each stored file is what the oracle says, and citegate's client view matches it
       gemini_oracle.py FIXTURE [--profile P] [--request FILE]   print the expected view
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dialect_oracle as D  # noqa: E402  (expected files and --check, as the other oracles')
import oracle  # noqa: E402

EXPECTED = os.path.join(D.FIXTURES, "expected", "gemini")
PROFILES = ("openwebui", "openai", "webchat", "markdown", "structured", "off")
CREATED = 1700000000
BODY_EV = 1 << 40
FILTERED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE"}
# The request each fixture is read with; none for the others. The usage request asks
# include_usage; the RAG request's <source> ids 3, 7 and 9 come before Gemini's numbers.
REQUESTS = {"gemini_usage.sse": "dialects/answers/gemini_usage.request.json",
            "gemini_google_search.sse": "dialects/rag_sources.request.json"}
# Each fixture's dialect: the answer is the same for both.
DIALECT = {"gemini_vertex_search.sse": "vertex"}


class Citation(oracle.Citation):
    """A grounding source; a retrievedContext without uri may carry its own KEY."""

    def __init__(self, content, title, url, key=None):
        super().__init__(content, title, url)
        self.forced_key = key

    @property
    def key(self):
        return self.forced_key if self.forced_key else oracle.Citation.key.fget(self)


class Answer(oracle.Stream):
    """Content pieces with the moment each went out, citations with the moment each arrived."""

    def __init__(self, request):
        super().__init__()
        self.kind, self.cits, self.arrived = "dialect", {}, {}
        for n, c in oracle.request_sources(request).items():
            self.cits[n], self.arrived[n] = c, -1

    def ref_known(self, n, ev, key):
        return n in self.arrived and self.arrived[n] <= ev

    def lookup(self, n):
        return self.cits.get(n)


# ---------------------------------------------------------------------------------- reading

def events(body):
    """(data or None, raw lines, complete) per event: lines end in CR, LF or CRLF, an event
    ends at a blank line; data joins the `data` values with LF; raw lines are those that may
    be part of a JSON object (start with white space, a bracket, a brace or a quote)."""
    text = body.decode("utf-8", errors="replace")
    out, data, raw, pos = [], [], [], 0
    for m in re.finditer(r"([^\r\n]*)(\r\n|\r|\n)", text):
        pos = m.end()
        line = m.group(1)
        if line == "":
            out.append(("\n".join(data) if data else None, raw, True))
            data, raw = [], []
            continue
        name, colon, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
        elif line[0] in " \t{}[]\"":
            raw.append(line)
    rest = text[pos:]
    if rest:
        if rest[0] in " \t{}[]\"":
            raw.append(rest)
        elif rest.startswith("data"):
            data.append(rest)
    if data or raw:
        out.append(("\n".join(data) if data else None, raw, False))
    return out


def finish_of(reason):
    if reason == "MAX_TOKENS":
        return "length"
    if reason in FILTERED or reason.startswith("IMAGE_"):
        return "content_filter"
    return "stop"


def whole(v):
    """A count or an offset: a non-negative whole number (2.0 is one)."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def error_of(err):
    status, code, msg = err.get("status"), err.get("code"), err.get("message")
    if isinstance(status, str) and status:
        c = status
    elif isinstance(code, int) and not isinstance(code, bool):
        c = str(code)
    else:
        c = "upstream_error"
    return {"message": msg if isinstance(msg, str) else "the upstream reported an error",
            "type": "upstream_error", "code": c}


def visible_parts(cand):
    content = cand.get("content") if isinstance(cand.get("content"), dict) else {}
    parts = content.get("parts") if isinstance(content.get("parts"), list) else []
    return [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
            and p.get("thought") is not True]


class View:
    def __init__(self, request, body=False):
        self.ans = Answer(request)
        self.body = body
        self.text = ""            # visible text, decoded
        self.ev = 0
        self.grounding = None
        self.finish = None
        self.usage = None
        self.error = None
        self.end = None
        self.started = False      # a response was read: chunks of ours went out
        self.numbers = {}         # chunk index -> citation number

    def add(self, text):
        if text:
            self.ans.add("0", text, BODY_EV if self.body else self.ev, 0)
            self.text += text

    def response(self, obj):
        """One GenerateContentResponse."""
        self.started = True
        for k, v in (("id", obj.get("responseId")), ("model", obj.get("modelVersion"))):
            if self.ans.meta[k] is None and oracle.nonempty(v):
                self.ans.meta[k] = v
        u = obj.get("usageMetadata")
        if isinstance(u, dict):
            p = u.get("promptTokenCount") if whole(u.get("promptTokenCount")) else 0
            t = u.get("totalTokenCount") if whole(u.get("totalTokenCount")) else 0
            self.usage = {"prompt_tokens": p, "completion_tokens": max(t - p, 0), "total_tokens": t}
        cands = obj.get("candidates")
        if not isinstance(cands, list) or not cands:
            pf = obj.get("promptFeedback")
            if isinstance(pf, dict) and isinstance(pf.get("blockReason"), str):
                self.finish = "content_filter"
            return
        cand = cands[0] if isinstance(cands[0], dict) else {}
        for t in visible_parts(cand):
            self.add(t)
        g = cand.get("groundingMetadata")
        if isinstance(g, dict) and g:
            self.grounding = g
        if isinstance(cand.get("finishReason"), str):
            self.finish = finish_of(cand["finishReason"])

    # --- grounding --------------------------------------------------------------------------
    def on_boundary(self, off):
        raw = self.text.encode("utf-8")
        if off > len(raw):
            return False
        return off == len(raw) or (raw[off] & 0xC0) != 0x80

    def supports(self):
        """The supports that count, by endIndex then as listed: (end, [chunk indices])."""
        g = self.grounding or {}
        chunks = g.get("groundingChunks") if isinstance(g.get("groundingChunks"), list) else []
        sups = g.get("groundingSupports") if isinstance(g.get("groundingSupports"), list) else []
        out = []
        for k, s in enumerate(sups):
            if not isinstance(s, dict) or not isinstance(s.get("groundingChunkIndices"), list):
                continue
            segm = s.get("segment") if isinstance(s.get("segment"), dict) else {}
            end = segm.get("endIndex", 0)
            if not whole(end) or not self.on_boundary(end):
                continue
            idx = [int(i) for i in s["groundingChunkIndices"] if whole(i) and i < len(chunks)]
            out.append((int(end), k, idx))
        out.sort(key=lambda t: (t[0], t[1]))
        return chunks, [(e, idx) for e, _, idx in out]

    def number(self, when):
        chunks, sups = self.supports()
        for _, idx in sups:
            for i in idx:
                if i in self.numbers:
                    continue
                c = source_of(chunks[i])
                if c is None:
                    self.numbers[i] = None
                    continue
                n = max(self.ans.cits, default=0) + 1
                self.ans.cits[n], self.ans.arrived[n] = c, when
                self.numbers[i] = n
        return sups

    def refs(self):
        """A stream's end: one delta of every cited source's reference."""
        if self.grounding is None:
            return
        self.ev += 1
        self.number(self.ev)
        nums = sorted(n for n in self.numbers.values() if n is not None)
        if nums:
            self.add(" " + "".join("[%d]" % n for n in nums))

    def body_text(self):
        """A body: the references inserted at each support's endIndex."""
        sups = self.number(BODY_EV) if self.grounding is not None else []
        raw, out, at = self.text.encode("utf-8"), [], 0
        groups = {}
        for end, idx in sups:
            here = groups.setdefault(end, [])
            for i in idx:
                n = self.numbers.get(i)
                if n is not None and n not in here:
                    here.append(n)
        for end in sorted(groups):
            out.append(raw[at:end].decode("utf-8"))
            out.append("".join("[%d]" % n for n in groups[end]))
            at = end
        out.append(raw[at:].decode("utf-8"))
        return "".join(out)


def source_of(chunk):
    if not isinstance(chunk, dict):
        return None
    if isinstance(chunk.get("web"), dict):
        w = chunk["web"]
        return Citation("", w.get("title"), w.get("uri"))
    if isinstance(chunk.get("retrievedContext"), dict):
        r = chunk["retrievedContext"]
        key = None
        if not oracle.nonempty(r.get("uri")):
            md = r.get("customMetadata") if isinstance(r.get("customMetadata"), list) else []
            for e in md:
                if isinstance(e, dict) and e.get("key") == "source_url":
                    key = e.get("stringValue") if oracle.nonempty(e.get("stringValue")) else None
                    break
        return Citation(r.get("text"), r.get("title"), r.get("uri"), key)
    return None


def read(body, request):
    """The view over an upstream body: (View, is_body)."""
    if oracle.is_json_body(body):
        obj = json.loads(body.decode("utf-8"))
        v = View(request, body=True)
        if isinstance(obj.get("error"), dict):
            v.error, v.end = error_of(obj["error"]), "body"
            return v, True
        v.response(obj)
        v.body_text_value = v.body_text()
        v.end = "body"
        return v, True
    v = View(request)
    pending = []
    for data, raw, complete in events(body):
        if v.end:
            break
        if data is not None and complete:
            v.ev += 1
            pending = []  # lines that never made an object
            try:
                obj = json.loads(data)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                if isinstance(obj.get("error"), dict):
                    v.refs()
                    v.error, v.end = error_of(obj["error"]), "error"
                    break
                v.response(obj)
        if raw:
            pending += raw
            try:
                obj = json.loads("\n".join(pending))
            except ValueError:
                continue
            pending = []
            if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
                v.refs()
                v.error, v.end = error_of(obj["error"]), "error"
    if v.end is None:
        v.refs()
        if v.finish is not None:
            v.end = "done"
        else:
            v.end = "error"
            v.error = {"message": "upstream closed the stream before the answer finished",
                       "type": "upstream_error", "code": "upstream_closed"}
    return v, False


# ---------------------------------------------------------------------------------- views

def expected_view(body, request=None, profile="openwebui"):
    v, is_body = read(body, request)
    ans = v.ans
    if is_body and not v.error:
        # The body's content is its text with the references inserted.
        ans.content, ans.segments, ans.order = {}, {}, []
        ans.add("0", v.body_text_value, BODY_EV, 0)
        ans.body = True
    ans.content.setdefault("0", "")
    if "0" not in ans.order:
        ans.order.append("0")
        ans.segments["0"], ans.cuts["0"], ans.raw["0"] = [], [], set()
    view = {"content": {"0": ans.content["0"]}, "end": v.end, "sources": [], "annotations": {},
            "citations": [], "entities": [], "events": []}
    if is_body and v.error:
        view["content"] = {}
    elif profile == "structured":
        texts = oracle.tool_texts(request)
        view["content"]["0"] = oracle.structured_fix(ans.content["0"], texts)[0]
    elif profile != "off":
        out = oracle.transform(ans, profile, "numeric", 8192, True)
        view["content"] = out["content"]
        view["sources"], view["citations"] = out["sources"], out["citations"]
        view["entities"], view["annotations"] = out["entities"], out["annotations"]
    # A stream's finish chunk comes with its end; an error after a finish still shows it.
    view["finish_reason"] = None if (is_body and v.error) else v.finish
    asked = (request or {}).get("stream_options", {}).get("include_usage") is True
    view["usage"] = v.usage if is_body and not v.error else (
        (v.usage or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
        if asked and v.finish is not None and v.end in ("done", "error") and not is_body
        else None)
    view["error"] = v.error
    rid, model = ans.meta["id"], ans.meta["model"]
    view["meta"] = [] if (is_body and v.error) or (not is_body and not v.started) else \
        {"id": rid or "", "created": CREATED, "model": model or ""}
    return view


COMPARED = D.ANSWER_COMPARED
client_view = D.answer_client_view


def request_for(fixture):
    return REQUESTS.get(fixture) or REQUESTS.get(fixture.rsplit(".", 1)[0] + ".sse")


GOLDENS = D.Goldens("gemini_", EXPECTED, PROFILES, expected_view, request_for,
                    lambda fixture: DIALECT.get(fixture, "gemini"))
main = GOLDENS.main


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
