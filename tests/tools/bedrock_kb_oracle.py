#!/usr/bin/env python3
"""Independent reference model of SPEC §6a for a `bedrock-kb` upstream (Amazon Bedrock
Knowledge Bases, RetrieveAndGenerate): the client view citegate must give for a
retrieveAndGenerateStream event stream or a retrieveAndGenerate JSON body, in each profile.

Written from /work/shared/SPEC.md §6, §6a and §7 and the shapes in
/work/shared/upstreams/bedrock.md ("Knowledge Bases"), never from citegate's C code. The
event stream is decoded by bedrock_oracle.decode (struct and zlib.crc32, the framing both
dialects share); the answer is read as the chat chunks it amounts to and handed to
oracle.py's profile model, as bedrock_oracle.py does.

    view = bedrock_kb_oracle.expected_view(body_bytes, request_obj_or_None, profile)

The model, in SPEC §6a's words:
  - streamed: `output` text is content; each `citation` event's references [N] (its
    retrieved references' sources in order, a source once per event) are content when the
    event comes, after the text so far; `guardrail` with action INTERVENED makes the finish
    content_filter, else it is stop, at the end of the body; exceptions and error messages
    as for bedrock;
  - a body: output.text with each citation's references after the character (code point)
    at span.end, which is inclusive: at end + 1; citations ending at one point in their
    order; past the text: at the end; guardrailAction INTERVENED → content_filter;
  - a citation is {generatedResponsePart, retrievedReferences}, or its deprecated nested
    `citation` member when neither is there; a source is keyed by its location (s3 uri,
    web/confluence/salesforce/sharePoint url, kendra uri, custom id), numbered in
    first-citation order; url = that location when absolute http(s); title = metadata
    x-amz-bedrock-kb-title or title, else §7's fallback on the location; snippet = the
    first reference's content.text; chunk id and page number go into Open WebUI's metadata.

Where the SPEC leaves a value open, the oracle says what it takes:
  - Knowledge Bases name no answer id and no model: the chunks' id and model are "";
  - an offset that is negative, not a whole number or absent is no place in the text: the
    references go at the end, as for a span past the text; a location with an empty key
    is no key;
  - a body that ends between messages after at least one event is the normal end; one cut
    inside a message, or that brought no event at all, ends as truncated (upstream_closed);
  - the message of an error event that citegate writes itself is free (reconcile()).

usage: bedrock_kb_oracle.py --regen      rewrite tests/fixtures/dialects/expected/bedrock_kb_*
       bedrock_kb_oracle.py BODY [--request FILE] [--profile P]   print the expected view
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bedrock_oracle  # noqa: E402  (the event-stream framing and the answer are shared)
import dialect_oracle as D  # noqa: E402  (the chat side every dialect's oracle shares)
import oracle  # noqa: E402

DIALECTS, CREATED = D.DIALECTS, D.CREATED

CASES = [
    ("answers/bedrock_kb_grounded.bin", "answers/bedrock_kb.request.json"),
    ("answers/bedrock_kb_grounded.json", None),
    ("answers/bedrock_kb_chinese.bin", None),
    ("answers/bedrock_kb_chinese.json", None),
    ("answers/bedrock_kb_span_past.json", None),
    ("answers/bedrock_kb_guardrail.bin", None),
    ("answers/bedrock_kb_guardrail.json", None),
    ("answers/bedrock_kb_cited_twice.bin", None),
    ("answers/bedrock_kb_cited_twice.json", None),
    ("answers/bedrock_kb_locations.bin", None),
    ("answers/bedrock_kb_exception.bin", None),
    ("answers/bedrock_kb_truncated.bin", None),
]

# Where a retrieved reference's location keeps its key.
LOCATIONS = [("s3Location", "uri"), ("webLocation", "url"), ("confluenceLocation", "url"),
             ("salesforceLocation", "url"), ("sharePointLocation", "url"),
             ("kendraDocumentLocation", "uri"), ("customDocumentLocation", "id")]


_count = D.count


def _obj(v):
    return v if isinstance(v, dict) else {}


class KBCitation(oracle.Citation):
    """A source of a retrieved reference: oracle.py's citation plus the page number in
    Open WebUI's metadata."""

    def __init__(self, page=None, **kw):
        super().__init__(**kw)
        self.page = page

    def source(self, label, max_doc_bytes, scores):
        out = super().source(label, max_doc_bytes, scores)
        if self.page is not None:
            out["metadata"][0]["page"] = self.page
        return out


def key_of(ref):
    loc = _obj(ref.get("location"))
    for name, member in LOCATIONS:
        v = _obj(loc.get(name)).get(member)
        if isinstance(v, str) and v != "":
            return (name, v)
    return None


def page_of(meta):
    v = meta.get("x-amz-bedrock-kb-document-page-number")
    if _count(v) is not None:
        return _count(v)
    if isinstance(v, str) and v.isdigit() and v.isascii():
        return int(v)
    return None


def citation_of(c):
    if "generatedResponsePart" not in c and "retrievedReferences" not in c \
            and isinstance(c.get("citation"), dict):
        return c["citation"]
    return c


def cited(ans, c, at):
    """The distinct sources citation c names, in order; new ones known from chunk `at`."""
    refs = c.get("retrievedReferences")
    out = []
    for r in refs if isinstance(refs, list) else []:
        if not isinstance(r, dict):
            continue
        key = key_of(r)
        if key is None:
            continue
        if key not in ans.keys:
            meta = _obj(r.get("metadata"))
            title = next((meta[k] for k in ("x-amz-bedrock-kb-title", "title")
                          if isinstance(meta.get(k), str) and meta[k] != ""), None)
            text = _obj(r.get("content")).get("text")
            chunk = meta.get("x-amz-bedrock-kb-chunk-id")
            n = max(ans.cits, default=0) + 1
            ans.cits[n] = KBCitation(content=text if isinstance(text, str) else "", title=title,
                                     url=key[1], chunk_id=chunk if isinstance(chunk, str) else None,
                                     page=page_of(meta))
            ans.known[n] = at
            ans.keys[key] = n
        if ans.keys[key] not in out:
            out.append(ans.keys[key])
    return out


def refs(nums):
    return "".join("[%d]" % n for n in nums)


def read_stream(body, request):
    ans = bedrock_oracle.Answer(request)
    started, events, intervened, end = False, 0, False, None

    def role():
        nonlocal started
        if not started:
            started = True
            ans.chunk("")

    for kind, et, obj in bedrock_oracle.events(body):
        if kind == "failure":
            ans.error, end = obj, "error"
            break
        if kind == "end":
            end = "done" if events else None
        if kind != "event":
            break
        events += 1
        if et == "output":
            role()
            if isinstance(obj.get("text"), str) and obj["text"]:
                ans.chunk(obj["text"])
        elif et == "citation":
            nums = cited(ans, citation_of(obj), ans.chunks + 2 if not started else ans.chunks + 1)
            if nums:
                role()
                ans.chunk(refs(nums))
        elif et == "guardrail":
            intervened = intervened or obj.get("action") == "INTERVENED"
    if end == "done":
        role()
        ans.chunk()
        ans.finish["0"] = "content_filter" if intervened else "stop"
    elif end is None:
        end = "error"
        ans.error = {"message": None, "type": "upstream_error", "code": "upstream_closed"}
    ans.meta = {"id": "", "object": "chat.completion.chunk", "created": CREATED,
                "model": ""} if ans.chunks else None
    return ans, end


def read_body(obj, request):
    ans = bedrock_oracle.Answer(request)
    ans.adopt(0)
    text = _obj(obj.get("output")).get("text")
    places = []  # (code point, order, references)
    cits = obj.get("citations")
    for order, c in enumerate(cits if isinstance(cits, list) else []):
        if not isinstance(c, dict):
            continue
        c = citation_of(c)
        nums = cited(ans, c, 0)
        if not nums:
            continue
        span = _obj(_obj(_obj(c.get("generatedResponsePart")).get("textResponsePart")).get("span"))
        end = _count(span.get("end"))
        at = len(text) if end is None else min(end + 1, len(text))  # str: code points
        places.append((at, order, nums))
    out, prev = "", 0
    for at, _, nums in sorted(places, key=lambda p: (p[0], p[1])):
        out += text[prev:at] + refs(nums)
        prev = at
    out += text[prev:]
    ans.add("0", out, 0, 0)
    ans.known = {n: 0 for n in ans.cits}
    ans.finish = {"0": "content_filter" if obj.get("guardrailAction") == "INTERVENED" else "stop"}
    ans.meta = {"id": "", "object": "chat.completion", "created": CREATED, "model": ""}
    return ans


expected_view = D.viewer(read_body, read_stream)
client_extras = D.client_extras
reconcile = D.reconcile
load_request = D.load_request
COMPARED = D.COMPARED


def regen():
    D.write_expected(CASES, expected_view, "bedrock-kb")
    return 0


def main(argv):
    return D.main(argv, regen, expected_view)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
