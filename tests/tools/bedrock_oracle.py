#!/usr/bin/env python3
"""Independent reference model of SPEC §6a for a `bedrock` upstream (Amazon Bedrock's
Converse API): the client view citegate must give for a ConverseStream event stream or a
Converse JSON body, in each profile.

Written from /work/shared/SPEC.md §6, §6a and §7 and the shapes in
/work/shared/upstreams/bedrock.md, never from citegate's C code. It decodes AWS's event
stream itself (struct and zlib.crc32), reads the answer as the chat chunks it amounts to
(content, the references appended at each block's end, finish, usage), numbered in the
order they would go out, and hands their concatenated content and the citations (with the
chunk from which each is known) to oracle.py's profile model, as anthropic_oracle.py does.

    view = bedrock_oracle.expected_view(body_bytes, request_obj_or_None, profile)

The view has oracle.py's keys (content, end, sources, annotations, citations, entities,
events) and finish_reason, usage, meta and error, as anthropic_oracle.py's has.

Where the SPEC leaves a value open, the oracle says so rather than guessing:
  - the message of an error event that citegate writes itself (upstream_protocol_error,
    upstream_closed) is free: the view holds null, and a client's non-empty string matches
    it (reconcile());
  - Bedrock names no answer id and no model, so the chunks' id is "" and their model the
    one the request names (it is the MODEL of the upstream path), "" without a request;
  - a <source> tag with empty text is no document (the request side sends documents of
    text; Bedrock refuses empty ones), as for `anthropic`;
  - the last user message's documents are its <source> documents, then its file parts
    (the order SPEC §6a lists them in); the fixtures never need that order.

usage: bedrock_oracle.py --regen      rewrite tests/fixtures/dialects/expected/bedrock_*
       bedrock_oracle.py BODY [--request FILE] [--profile P]   print the expected view
       bedrock_oracle.py --decode BODY                        print the event-stream messages
"""
import json
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dialect_oracle as D  # noqa: E402  (the chat side every dialect's oracle shares)
import oracle  # noqa: E402

DIALECTS, CREATED, PROFILES = D.DIALECTS, D.CREATED, D.PROFILES
MAX_MESSAGE = 16 * 1024 * 1024  # SPEC §6a: a message longer than 16 MiB is an error

# (fixture, request) relative to tests/fixtures/dialects
CASES = [
    ("answers/bedrock_nova_web.bin", "answers/bedrock_nova.request.json"),
    ("answers/bedrock_documents.bin", "answers/bedrock_documents.request.json"),
    ("answers/bedrock_file_document.bin", "answers/bedrock_file_document.request.json"),
    ("answers/bedrock_continued.bin", None),
    ("answers/bedrock_cited_twice.bin", None),
    ("answers/bedrock_model_refs.bin", None),
    ("answers/bedrock_many_citations.bin", None),
    ("answers/bedrock_throttling.bin", None),
    ("answers/bedrock_error_message.bin", None),
    ("answers/bedrock_bad_crc.bin", None),
    ("answers/bedrock_bad_prelude_crc.bin", None),
    ("answers/bedrock_bad_header.bin", None),
    ("answers/bedrock_oversized.bin", None),
    ("answers/bedrock_short_message.bin", None),
    ("answers/bedrock_headers_past.bin", None),
    ("answers/bedrock_error_after_stop.bin", None),
    ("answers/bedrock_truncated.bin", None),
    ("answers/bedrock_non_ascii.bin", None),
    ("answers/bedrock_citations.bin", "answers/bedrock_documents.request.json"),
    ("answers/bedrock_citations.json", "answers/bedrock_documents.request.json"),
    ("answers/bedrock_content_filtered.json", None),
    ("answers/bedrock_max_tokens.bin", None),
    ("answers/bedrock_guardrail.bin", None),
    ("answers/bedrock_usage.bin", "answers/bedrock_usage.request.json"),
]
# A body and the same answer streamed: SPEC §6a says they give the same content.
SAME_CONTENT = [("answers/bedrock_citations.json", "answers/bedrock_citations.bin")]

FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
          "guardrail_intervened": "content_filter", "content_filtered": "content_filter"}


def finish_of(stop_reason):
    return FINISH.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"


_count, _str, _nonempty = D.count, D.string, D.nonempty


# ------------------------------------------------------------------------- the event stream

class Broken(Exception):
    """A framing error: SPEC §6a's upstream_protocol_error."""


# Header value widths by type; 6 and 7 carry a u16 length first.
WIDTH = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


def parse_headers(raw):
    """{name: value} of a message's header section (the first of a repeated name wins)."""
    out, at = {}, 0
    while at < len(raw):
        n = raw[at]
        at += 1
        if at + n + 1 > len(raw):
            raise Broken("header name overruns its section")
        name = raw[at:at + n].decode("utf-8", errors="replace")
        kind = raw[at + n]
        at += n + 1
        if kind in (6, 7):
            if at + 2 > len(raw):
                raise Broken("header length overruns its section")
            (width,) = struct.unpack_from(">H", raw, at)
            at += 2
        elif kind in WIDTH:
            width = WIDTH[kind]
        else:
            raise Broken("header type %d" % kind)
        if at + width > len(raw):
            raise Broken("header value overruns its section")
        value = raw[at:at + width]
        at += width
        if kind == 7:
            value = value.decode("utf-8", errors="replace")
        elif kind in (0, 1):
            value = kind == 0
        out.setdefault(name, value)
    return out


def decode(body):
    """The messages of an event-stream body, in order, as (headers, payload); then one of
    ("end", None) (the body ends between messages), ("cut", None) (it ends inside one) or
    ("broken", reason) (SPEC §6a's framing errors: a length under 16 or over 16 MiB, a
    headers length past the message, a header overrunning its section, a CRC mismatch)."""
    at = 0
    while True:
        if at == len(body):
            yield "end", None
            return
        if len(body) - at < 12:
            yield "cut", None
            return
        total, hlen, pcrc = struct.unpack_from(">III", body, at)
        if zlib.crc32(body[at:at + 8]) & 0xFFFFFFFF != pcrc:
            yield "broken", "prelude CRC"
            return
        if total < 16 or total > MAX_MESSAGE:
            yield "broken", "message length %d" % total
            return
        if 12 + hlen + 4 > total:
            yield "broken", "headers length past the message"
            return
        if len(body) - at < total:
            yield "cut", None
            return
        msg = body[at:at + total]
        (mcrc,) = struct.unpack_from(">I", msg, total - 4)
        if zlib.crc32(msg[:total - 4]) & 0xFFFFFFFF != mcrc:
            yield "broken", "message CRC"
            return
        try:
            headers = parse_headers(msg[12:12 + hlen])
        except Broken as e:
            yield "broken", str(e)
            return
        yield headers, msg[12 + hlen:total - 4]
        at += total


# ------------------------------------------------------------------------- the request

def _file_name(part):
    f = part.get("file") if isinstance(part, dict) else None
    return _str(f.get("filename")) if isinstance(f, dict) else None


def documents(request):
    """The request's documents in documentIndex order, each ("source", id) or ("file", F)
    (SPEC §6a: <source> tags in id order in the last user message; each user message's
    file parts in order; a document's index is its position among all of them)."""
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return []
    msgs = request["messages"]
    users = [k for k, m in enumerate(msgs) if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        return []
    tags = sorted(i for i, c in oracle.request_sources(request).items() if c.content != "")
    out = []
    for k in users:
        if k == users[-1]:
            out += [("source", i) for i in tags]
        content = msgs[k].get("content")
        for p in content if isinstance(content, list) else []:
            if isinstance(p, dict) and p.get("type") == "file":
                out.append(("file", _file_name(p) or ""))
    return out


model_of = D.model_of


# ------------------------------------------------------------------------- the answer

class Answer(D.Answer):
    """The chat chunks a bedrock answer amounts to, and its citations."""

    def __init__(self, request):
        super().__init__(request, documents(request))


class Block:
    """One content block's citations: its sources in first-citation order, and the last
    citation (the one a continuation adds to)."""

    def __init__(self):
        self.refs = []
        self.last = None       # the Citation whose snippet a continuation extends, or False


def source_content(c):
    sc = c.get("sourceContent")
    return "".join(p["text"] for p in sc if isinstance(p, dict) and isinstance(p.get("text"), str)) \
        if isinstance(sc, list) else ""


def source_key(c):
    """SPEC §6a: the web url; else documentIndex; else searchResultIndex; else source; else
    title. None: not a source."""
    loc = c.get("location") if isinstance(c.get("location"), dict) else {}
    web = loc.get("web") if isinstance(loc.get("web"), dict) else None
    if web is not None and isinstance(web.get("url"), str):
        return ("url", web["url"])
    for k in ("documentChar", "documentPage", "documentChunk"):
        d = loc.get(k)
        if isinstance(d, dict) and _count(d.get("documentIndex")) is not None:
            return ("document", _count(d["documentIndex"]))
    sr = loc.get("searchResultLocation")
    if isinstance(sr, dict) and _count(sr.get("searchResultIndex")) is not None:
        return ("search_result", _count(sr["searchResultIndex"]))
    # A string member is a key even when empty: the SPEC says "else source; else title"
    # (and "non-empty" where it means it, as for §7's TITLE).
    if isinstance(c.get("source"), str):
        return ("source", c["source"])
    if isinstance(c.get("title"), str):
        return ("title", c["title"])
    return None


def cite(ans, block, c):
    """One citation of a block (a streamed delta.citation or a citationsContent element)."""
    if not isinstance(c, dict):
        return
    if all(c.get(k) is None for k in ("location", "title", "source")):
        # A continuation: its sourceContent goes on the block's previous citation.
        if block.last:
            block.last.content += source_content(c)
        return
    key = source_key(c)
    if key is None:
        block.last = False
        return
    if key in ans.keys:
        n = ans.keys[key]
        block.last = False  # only a source's first citation makes its snippet
    else:
        ans.adopt(ans.chunks + 1)
        doc = ans.docs[key[1]] if key[0] == "document" and key[1] < len(ans.docs) else None
        if doc is not None and doc[0] == "source":
            n = doc[1]
            block.last = False  # the <source> tag's own text is the snippet (§5)
        else:
            n = max(ans.cits, default=0) + 1
            loc = c.get("location") if isinstance(c.get("location"), dict) else {}
            web = loc.get("web") if isinstance(loc.get("web"), dict) else {}
            if doc is not None:
                title = doc[1]
            else:
                title = _nonempty(c.get("title")) or _nonempty(web.get("domain"))
            url = _str(web.get("url"))
            if url is None and oracle.is_abs_url(c.get("source")):
                url = c["source"]
            cit = oracle.Citation(source_content(c), title, url)
            ans.cits[n], ans.known[n] = cit, ans.chunks + 1
            block.last = cit
        ans.keys[key] = n
    if n not in block.refs:
        block.refs.append(n)


def refs(block):
    return "".join("[%d]" % n for n in block.refs)


def protocol_error():
    return {"message": None, "type": "upstream_error", "code": "upstream_protocol_error"}


def events(body):
    """What an event-stream body says, message by message: ("event", TYPE, PAYLOAD) for an
    event whose payload is a JSON object (others are read and dropped); then one of
    ("failure", None, ERROR) (SPEC §6's error of an exception or error message, or
    upstream_protocol_error for broken framing), ("end", None, None) or ("cut", None, None)."""
    for headers, payload in decode(body):
        if headers == "broken":
            yield "failure", None, protocol_error()
            return
        if headers in ("end", "cut"):
            yield headers, None, None
            return
        mtype = headers.get(":message-type")
        if mtype == "exception":
            try:
                obj = json.loads(payload.decode("utf-8"))
            except ValueError:
                obj = None
            msg = _str(obj.get("message")) if isinstance(obj, dict) else None
            yield "failure", None, {"message": msg, "type": "upstream_error",
                                    "code": _str(headers.get(":exception-type"))}
            return
        if mtype == "error":
            yield "failure", None, {"message": _str(headers.get(":error-message")),
                                    "type": "upstream_error", "code": _str(headers.get(":error-code"))}
            return
        if mtype != "event":
            continue
        try:
            obj = json.loads(payload.decode("utf-8"))
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield "event", headers.get(":event-type"), obj


def read_stream(body, request):
    ans = Answer(request)
    include_usage = D.include_usage(request)
    blocks, started, finished, tokens, end = {}, False, False, None, None
    for kind, et, obj in events(body):
        if kind == "failure":
            ans.error, end = obj, "error"
            break
        if kind != "event":
            break
        if et == "messageStart":
            if not started:  # the role chunk, with content "" (as for anthropic)
                started = True
                ans.chunk("")
        elif et == "contentBlockDelta":
            d = obj.get("delta") if isinstance(obj.get("delta"), dict) else {}
            idx = _count(obj.get("contentBlockIndex"))
            if isinstance(d.get("text"), str) and d["text"]:
                ans.chunk(d["text"])
            if isinstance(d.get("citation"), dict):
                cite(ans, blocks.setdefault(idx, Block()), d["citation"])
        elif et == "contentBlockStop":
            block = blocks.pop(_count(obj.get("contentBlockIndex")), None)
            if block is not None and block.refs:
                ans.chunk(refs(block))
        elif et == "messageStop":
            if not finished:
                finished = True
                ans.chunk()
                ans.finish["0"] = finish_of(obj.get("stopReason"))
        elif et == "metadata":
            u = obj.get("usage")
            if isinstance(u, dict):
                tokens = {"prompt_tokens": _count(u.get("inputTokens")) or 0,
                          "completion_tokens": _count(u.get("outputTokens")) or 0,
                          "total_tokens": _count(u.get("totalTokens")) or 0}
        # Unknown event types are read and dropped.
    if end is None:
        if finished:
            end = "done"
            if include_usage:
                ans.usage = tokens or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        else:
            end = "error"
            ans.error = {"message": None, "type": "upstream_error", "code": "upstream_closed"}
    # No chunk went out (the first message was already broken or cut): only the error.
    ans.meta = {"id": "", "object": "chat.completion.chunk", "created": CREATED,
                "model": model_of(request)} if ans.chunks else None
    return ans, end


def read_body(obj, request):
    ans = Answer(request)
    ans.adopt(0)
    text = ""
    out = obj.get("output") if isinstance(obj.get("output"), dict) else {}
    msg = out.get("message") if isinstance(out.get("message"), dict) else {}
    for blk in msg.get("content") if isinstance(msg.get("content"), list) else []:
        if not isinstance(blk, dict):
            continue
        if isinstance(blk.get("text"), str):
            text += blk["text"]
        cc = blk.get("citationsContent")
        if isinstance(cc, dict):
            parts = cc.get("content") if isinstance(cc.get("content"), list) else []
            text += "".join(p["text"] for p in parts
                            if isinstance(p, dict) and isinstance(p.get("text"), str))
            block = Block()
            for c in cc.get("citations") if isinstance(cc.get("citations"), list) else []:
                cite(ans, block, c)
            text += refs(block)
    ans.add("0", text, 0, 0)
    ans.known = {n: 0 for n in ans.cits}
    ans.finish = {"0": finish_of(obj["stopReason"])} if "stopReason" in obj else {}
    u = obj.get("usage")
    if isinstance(u, dict):
        ans.usage = {"prompt_tokens": _count(u.get("inputTokens")) or 0,
                     "completion_tokens": _count(u.get("outputTokens")) or 0,
                     "total_tokens": _count(u.get("totalTokens")) or 0}
    ans.meta = {"id": "", "object": "chat.completion", "created": CREATED,
                "model": model_of(request)}
    return ans


expected_view = D.viewer(read_body, read_stream)
client_extras = D.client_extras
reconcile = D.reconcile
load_request = D.load_request
EXTRAS, COMPARED = D.EXTRAS, D.COMPARED


def regen():
    views = D.write_expected(CASES, expected_view, "bedrock")
    request = dict(CASES)
    for a, b in SAME_CONTENT:
        for profile in PROFILES:
            if views[a, request[a], profile]["content"] != views[b, request[b], profile]["content"]:
                raise SystemExit("%s and %s differ in content (%s)" % (a, b, profile))
    return 0


def main(argv):
    if argv[:1] == ["--regen"]:
        return regen()
    if argv[:1] == ["--decode"]:
        with open(argv[1], "rb") as f:
            for headers, payload in decode(f.read()):
                if isinstance(headers, str):
                    print(headers, payload or "")
                else:
                    print(json.dumps({k: v if not isinstance(v, bytes) else v.hex()
                                      for k, v in headers.items()}), payload[:200])
        return 0
    return D.print_view(argv, expected_view)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
