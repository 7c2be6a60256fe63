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
import dialect_oracle as D  # noqa: E402  (the chat side every dialect's oracle shares)
import oracle  # noqa: E402

DIALECTS, CREATED, PROFILES = D.DIALECTS, D.CREATED, D.PROFILES
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


_count, _str, _nonempty = D.count, D.string, D.nonempty


def usage_of(u):
    """SPEC §6a: usage.tokens' counts, else billed_units'."""
    if not isinstance(u, dict):
        return None
    counts = u.get("tokens") if isinstance(u.get("tokens"), dict) else u.get("billed_units")
    counts = counts if isinstance(counts, dict) else {}
    i, o = _count(counts.get("input_tokens")) or 0, _count(counts.get("output_tokens")) or 0
    return {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}


model_of = D.model_of


class Answer(D.Answer):
    """The chat chunks a cohere answer amounts to, and its citations (keys: source ids)."""

    def __init__(self, request):
        super().__init__(request, set(D.document_ids(request)))

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


def _get(obj, *path):
    for k in path:
        obj = obj.get(k) if isinstance(obj, dict) else None
    return obj


def read_stream(body, request):
    ans = Answer(request)
    include_usage = D.include_usage(request)
    started, text, end, msg_id = False, "", None, None

    def role():
        nonlocal started
        if not started:
            started = True
            ans.chunk("")

    for t, obj in D.typed_events(body):
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
    # An answer with no content (an error body) has nothing for a profile to rewrite.
    return D.view_of(ans, end, profile if ans.content else "off")


client_extras = D.client_extras
reconcile = D.reconcile
load_request = D.load_request
EXTRAS, COMPARED = D.EXTRAS, D.COMPARED


def expected_name(fixture, request, profile):
    stem, ext = os.path.basename(fixture).rsplit(".", 1)
    kind = "body" if ext == "json" else "stream"
    alone = "_alone" if request is None and any(f == fixture and r for f, r in CASES) else ""
    return "%s%s_%s.%s.json" % (stem, alone, kind, profile)


def regen():
    views = D.write_expected(CASES, expected_view, "cohere", expected_name)
    for a, b, request in SAME_SOURCES:
        for profile in PROFILES:
            if views[a, request, profile]["sources"] != views[b, request, profile]["sources"]:
                raise SystemExit("%s and %s differ in sources (%s)" % (a, b, profile))
    return 0


def main(argv):
    return D.main(argv, regen, expected_view)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
