#!/usr/bin/env python3
"""Independent reference model of SPEC §6a for a `cohere` upstream (Cohere's v2 Chat API):
the client view citegate must give for a Cohere stream or body, in each profile.

Written from /work/shared/SPEC.md §6, §6a and §7 and the shapes in
/work/shared/upstreams/cohere.md, never from citegate's C code. It reads the answer as the
chat chunks it amounts to (the role, content, each citation's references where it arrives,
the finish, usage), numbered in the order they would go out, and hands their concatenated
content and the citations (with the chunk from which each is known) to oracle.py's profile
model, as anthropic_oracle.py and bedrock_oracle.py do.

    view = cohere_oracle.expected_view(body_bytes, request_obj_or_None, profile)

The view has oracle.py's keys and finish_reason, usage, meta and error, as
anthropic_oracle.py's has.

Where the SPEC is silent, the oracle takes what citegate documents (docs/dialects.md):
  - a citation counts when its type is TEXT_CONTENT or absent, its start and end are whole
    numbers with start <= end, and end is within the text: in a stream the text received so
    far, in a body the whole text (characters, end exclusive); a source counts when it has a
    non-empty string id. Whatever does not count is left out;
  - a citation's references are its distinct sources in order; several citations ending at
    one place of a body go there in the order of the citations array;
  - the chunks' model is the request's (Cohere names none), "" without a request;
  - usage without counts is zeros; the message of an error event whose message-end carries
    no `error` string is free (null here, any non-empty string matches: reconcile());
  - an ERROR finish in a body is SPEC §6's error as a body.

usage: cohere_oracle.py --regen      rewrite tests/fixtures/dialects/expected/cohere_*
       cohere_oracle.py BODY [--request FILE] [--profile P]   print the expected view
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import anthropic_oracle  # noqa: E402  (client_extras, document ids: the chat side is shared)
import oracle  # noqa: E402

DIALECTS = os.path.join(os.path.dirname(HERE), "fixtures", "dialects")
EXPECTED = os.path.join(DIALECTS, "expected")
CREATED = 1700000000
PROFILES = ("openwebui", "openai", "webchat", "off")
CITATION_REFS = 128  # distinct sources referenced by one citation (documented bound)
RAG = "rag_sources.request.json"
USAGE = "answers/cohere_usage.request.json"

# (fixture, request) relative to tests/fixtures/dialects
CASES = [
    ("answers/cohere_documents_fast.sse", RAG),
    ("answers/cohere_documents_accurate.sse", RAG),
    ("answers/cohere_documents.json", RAG),
    ("answers/cohere_documents_fast.sse", None),
    ("answers/cohere_tool_fast.sse", None),
    ("answers/cohere_tool_accurate.sse", USAGE),
    ("answers/cohere_tool.json", None),
    ("answers/cohere_cited_twice_fast.sse", None),
    ("answers/cohere_cited_twice.json", None),
    ("answers/cohere_bad_spans.sse", None),
    ("answers/cohere_bad_spans.json", None),
    ("answers/cohere_error.sse", RAG),
    ("answers/cohere_max_tokens.sse", USAGE),
    ("answers/cohere_toxic.json", None),
    ("answers/cohere_thinking.sse", RAG),
    ("answers/cohere_truncated.sse", RAG),
]
# The same answer as a body, and streamed with every citation after the text it cites:
# the same citations, the same numbers.
SAME_SOURCES = [("answers/cohere_documents.json", "answers/cohere_documents_fast.sse", RAG)]

FINISH = {"COMPLETE": "stop", "STOP_SEQUENCE": "stop", "TOOL_CALL": "stop",
          "MAX_TOKENS": "length", "ERROR_TOXIC": "content_filter"}


def finish_of(reason):
    return FINISH.get(reason, "stop") if isinstance(reason, str) else "stop"


def _count(v):
    """A non-negative whole number, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return int(v) if v >= 0 and float(v).is_integer() else None


def _str(v):
    return v if isinstance(v, str) else None


def _nonempty(v):
    return v if isinstance(v, str) and v != "" else None


def usage_of(u):
    """SPEC §6a: usage.tokens' counts, else billed_units'."""
    if not isinstance(u, dict):
        return None
    counts = u.get("tokens") if isinstance(u.get("tokens"), dict) else u.get("billed_units")
    counts = counts if isinstance(counts, dict) else {}
    i, o = _count(counts.get("input_tokens")) or 0, _count(counts.get("output_tokens")) or 0
    return {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}


def model_of(request):
    return _str(request.get("model")) or "" if isinstance(request, dict) else ""


class Answer(oracle.Stream):
    """The chat chunks a cohere answer amounts to, and its citations."""

    def __init__(self, request):
        super().__init__()
        self.tags = oracle.request_sources(request) if request is not None else {}
        self.docs = set(anthropic_oracle.document_ids(request))
        self.kind, self.cits = "request", {}
        self.known = {}
        self.keys = {}         # source id -> citation number
        self.chunks = 0
        self.finish, self.usage, self.error = {}, None, None

    def known_from(self, n):
        return self.known.get(n, oracle.INF)

    def adopt(self, at):
        for n, c in self.tags.items():
            if n not in self.cits:
                self.cits[n], self.known[n] = c, at

    def chunk(self, content=None):
        self.chunks += 1
        if content is not None:
            self.adopt(self.chunks)
            self.add("0", content, self.chunks, 0)

    def source(self, c, s):
        """The number of source s of citation c, or None."""
        if not isinstance(s, dict) or _nonempty(s.get("id")) is None:
            return None
        key = s["id"]
        if key in self.keys:
            return self.keys[key]
        self.adopt(self.chunks + 1)
        if key.isdigit() and key[0] != "0" and int(key) in self.docs:
            n = int(key)  # the <source> tag the document was made of
        else:
            n = max(self.cits, default=0) + 1
            doc = s.get("document") if isinstance(s.get("document"), dict) else \
                s.get("tool_output") if isinstance(s.get("tool_output"), dict) else {}
            url = doc.get("url") if oracle.is_abs_url(doc.get("url")) else None
            snippet = _nonempty(doc.get("snippet")) or _nonempty(doc.get("text")) or \
                _nonempty(c.get("text")) or ""
            self.cits[n] = oracle.Citation(snippet, _nonempty(doc.get("title")), url)
            self.known[n] = self.chunks + 1
        self.keys[key] = n
        return n

    def refs(self, c):
        """The references of citation c: its distinct sources, in order."""
        out = []
        for s in c.get("sources") if isinstance(c.get("sources"), list) else []:
            n = self.source(c, s)
            if n is not None and n not in out and len(out) < CITATION_REFS:
                out.append(n)
        return "".join("[%d]" % n for n in out)


def counts(c, chars):
    """Whether citation c counts within a text of `chars` characters; its end."""
    if not isinstance(c, dict):
        return None
    if c.get("type") is not None and c.get("type") != "TEXT_CONTENT":
        return None
    start, end = _count(c.get("start")), _count(c.get("end"))
    if start is None or end is None or start > end or end > chars:
        return None
    return end


def events(body):
    """(type, object) of each complete event whose data is a JSON object."""
    for fields, data in oracle.sse_events(body.decode("utf-8")):
        try:
            obj = json.loads(data)
        except ValueError:
            continue
        if isinstance(obj, dict):
            t = obj.get("type") if isinstance(obj.get("type"), str) else fields.get("event")
            yield t, obj


def _get(obj, *path):
    for k in path:
        obj = obj.get(k) if isinstance(obj, dict) else None
    return obj


def read_stream(body, request):
    ans = Answer(request)
    include_usage = isinstance(request, dict) and isinstance(request.get("stream_options"), dict) \
        and request["stream_options"].get("include_usage") is True
    started, text, end, msg_id = False, "", None, None

    def role():
        nonlocal started
        if not started:
            started = True
            ans.chunk("")

    for t, obj in events(body):
        if t == "message-start":
            if msg_id is None and _nonempty(obj.get("id")):
                msg_id = obj["id"]
            role()
        elif t == "content-delta":
            s = _get(obj, "delta", "message", "content", "text")
            if isinstance(s, str):
                role()
                if s:
                    text += s
                    ans.chunk(s)
        elif t == "citation-start":
            c = _get(obj, "delta", "message", "citations")
            if counts(c, len(text)) is not None:
                r = ans.refs(c)
                if r:
                    role()
                    ans.chunk(r)
        elif t == "message-end":
            d = obj.get("delta") if isinstance(obj.get("delta"), dict) else {}
            if d.get("finish_reason") == "ERROR":
                ans.error = {"message": _str(d.get("error")), "type": "upstream_error",
                             "code": "ERROR"}
                end = "error"
                break
            role()
            ans.chunk()
            ans.finish["0"] = finish_of(d.get("finish_reason"))
            if include_usage:
                ans.chunk()
                ans.usage = usage_of(d.get("usage")) or usage_of({})
            end = "done"
            break
    if end is None:
        end = "error"
        ans.error = {"message": None, "type": "upstream_error", "code": "upstream_closed"}
    ans.meta = {"id": msg_id or "", "object": "chat.completion.chunk", "created": CREATED,
                "model": model_of(request)} if ans.chunks else None
    return ans, end


def read_body(obj, request):
    ans = Answer(request)
    if obj.get("finish_reason") == "ERROR":
        ans.error = {"message": _str(obj.get("error")), "type": "upstream_error", "code": "ERROR"}
        return ans
    ans.adopt(0)
    msg = obj.get("message") if isinstance(obj.get("message"), dict) else {}
    items = msg.get("content") if isinstance(msg.get("content"), list) else []
    text = "".join(i["text"] for i in items if isinstance(i, dict) and i.get("type") == "text"
                   and isinstance(i.get("text"), str))
    places = []
    for k, c in enumerate(msg.get("citations") if isinstance(msg.get("citations"), list) else []):
        e = counts(c, len(text))
        if e is not None:
            r = ans.refs(c)
            if r:
                places.append((e, k, r))
    out, at = "", 0
    for e, _, r in sorted(places):
        out += text[at:e] + r
        at = e
    ans.add("0", out + text[at:], 0, 0)
    ans.known = {n: 0 for n in ans.cits}
    if isinstance(obj.get("finish_reason"), str):
        ans.finish = {"0": finish_of(obj["finish_reason"])}
    ans.usage = usage_of(obj.get("usage"))
    ans.meta = {"id": _str(obj.get("id")) or "", "object": "chat.completion", "created": CREATED,
                "model": model_of(request)}
    return ans


def expected_view(body, request=None, profile="openwebui"):
    if oracle.is_json_body(body):
        ans, end = read_body(json.loads(body.decode("utf-8")), request), "body"
    else:
        ans, end = read_stream(body, request)
    view = {"content": dict(ans.content), "end": end, "sources": [], "annotations": {},
            "citations": [], "entities": [], "events": []}
    if profile != "off" and ans.content:
        out = oracle.transform(ans, profile, "numeric", 8192, True)
        for k in ("content", "sources", "annotations", "citations", "entities"):
            view[k] = out[k]
    view.update(finish_reason=ans.finish, usage=ans.usage, meta=ans.meta, error=ans.error)
    return view


def client_extras(out):
    return anthropic_oracle.client_extras(out)


def reconcile(want, got):
    """An error message the SPEC leaves free (null in the expected view) matches any
    non-empty string the client got."""
    w, g = want.get("error"), got.get("error")
    if isinstance(w, dict) and w.get("message") is None and isinstance(g, dict) \
            and _nonempty(g.get("message")):
        got = dict(got, error=dict(g, message=None))
    return got


EXTRAS = anthropic_oracle.EXTRAS
COMPARED = oracle.COMPARED + EXTRAS


def load_request(rel):
    if rel is None:
        return None
    with open(os.path.join(DIALECTS, rel), encoding="utf-8") as f:
        return json.load(f)


def expected_name(fixture, request, profile):
    stem, ext = os.path.basename(fixture).rsplit(".", 1)
    kind = "body" if ext == "json" else "stream"
    alone = "_alone" if request is None and any(f == fixture and r for f, r in CASES) else ""
    return "%s%s_%s.%s.json" % (stem, alone, kind, profile)


def regen():
    os.makedirs(EXPECTED, exist_ok=True)
    views = {}
    for fixture, request in CASES:
        with open(os.path.join(DIALECTS, fixture), "rb") as f:
            body = f.read()
        for profile in PROFILES:
            view = expected_view(body, load_request(request), profile)
            views[fixture, request, profile] = view
            doc = {"fixture": fixture, "request": request, "dialect": "cohere", "created": CREATED,
                   "profile": profile}
            doc.update({k: view[k] for k in COMPARED})
            with open(os.path.join(EXPECTED, expected_name(fixture, request, profile)), "w",
                      encoding="utf-8") as f:
                json.dump(doc, f, indent=1, ensure_ascii=False)
                f.write("\n")
    for a, b, request in SAME_SOURCES:
        for profile in PROFILES:
            if views[a, request, profile]["sources"] != views[b, request, profile]["sources"]:
                raise SystemExit("%s and %s differ in sources (%s)" % (a, b, profile))
    return 0


def main(argv):
    if argv[:1] == ["--regen"]:
        return regen()
    body_path, request, profile, i = argv[0], None, "openwebui", 1
    while i < len(argv):
        if argv[i] == "--request":
            with open(argv[i + 1], encoding="utf-8") as f:
                request = json.load(f)
        elif argv[i] == "--profile":
            profile = argv[i + 1]
        else:
            raise SystemExit("unknown argument " + argv[i])
        i += 2
    with open(body_path, "rb") as f:
        print(json.dumps(expected_view(f.read(), request, profile), indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
