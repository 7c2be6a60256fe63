#!/usr/bin/env python3
"""Independent reference model of SPEC §6a for an `anthropic` upstream: the client view
citegate must give for an Anthropic Messages stream or body, in each profile.

Written from /work/shared/SPEC.md §6, §6a and §7 and the Anthropic API's published event
and type shapes, never from citegate's C code. It reads the upstream answer as a list of
chat chunks (role, content, a block's references, finish, usage, [DONE]) numbered in the
order they would go out, and hands their concatenated content and the citations (with the
chunk from which each is known) to oracle.py's profile model.

    view = anthropic_oracle.expected_view(body_bytes, request_obj_or_None, profile)

The view has oracle.py's keys (content, end, sources, annotations, citations, entities,
events) and these:
  finish_reason  {"<choice index>": the chunk's or body's non-null finish_reason}
  usage          the usage object of the usage chunk or of the body, or None
  meta           {"id", "object", "created", "model"} of the first chunk or of the body
  error          the "error" object of the stream's error event, or None
client_extras(output_bytes) reads the same four from citegate's output.

usage: anthropic_oracle.py --regen      rewrite tests/fixtures/dialects/expected/
       anthropic_oracle.py BODY [--request FILE] [--profile P]   print the expected view
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dialect_oracle as D  # noqa: E402  (the chat side every dialect's oracle shares)
import oracle  # noqa: E402

DIALECTS, CREATED = D.DIALECTS, D.CREATED
BLOCK_REFS = 128  # distinct sources referenced by one text block (documented bound)

# (fixture, request) relative to tests/fixtures/dialects
CASES = [
    ("answers/anthropic_text.sse", None),
    ("answers/anthropic_usage.sse", "answers/anthropic_usage.request.json"),
    ("answers/anthropic_documents.sse", "rag_sources.request.json"),
    ("answers/anthropic_multi_block.sse", None),
    ("answers/anthropic_pages.sse", None),
    ("answers/anthropic_search_results.sse", None),
    ("answers/anthropic_web_search.sse", "answers/anthropic_usage.request.json"),
    ("answers/anthropic_thinking.sse", None),
    ("answers/anthropic_max_tokens.sse", None),
    ("answers/anthropic_error.sse", "rag_sources.request.json"),
    ("answers/anthropic_truncated.sse", "rag_sources.request.json"),
    ("answers/anthropic_text.json", None),
    ("answers/anthropic_documents.json", "rag_sources.request.json"),
    ("answers/anthropic_web_search.json", None),
]

FINISH = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
          "max_tokens": "length", "model_context_window_exceeded": "length",
          "tool_use": "tool_calls", "refusal": "content_filter"}


def finish_of(stop_reason):
    """SPEC §6a maps end_turn/stop_sequence and max_tokens; the rest as citegate documents."""
    return FINISH.get(stop_reason, "stop")


_count, _str = D.count, D.string


class Answer(D.Answer):
    """The chat chunks an anthropic answer amounts to, and its citations."""

    def __init__(self, request):
        super().__init__(request, D.document_ids(request))

    def source(self, c):
        """The number of the source citation object c names, or None (SPEC §6a)."""
        if not isinstance(c, dict):
            return None
        if _count(c.get("document_index")) is not None:
            key = ("document", _count(c["document_index"]))
        elif _count(c.get("search_result_index")) is not None:
            key = ("search_result", _count(c["search_result_index"]))
        elif isinstance(c.get("url"), str):
            key = ("url", c["url"])
        else:
            return None
        if key in self.keys:
            return self.keys[key]
        self.adopt(self.chunks + 1)
        if key[0] == "document" and key[1] < len(self.docs):
            n = self.docs[key[1]]
        else:
            n = max(self.cits, default=0) + 1
            title = c.get("document_title" if key[0] == "document" else "title")
            url = _str(c["url"]) if "url" in c else _str(c.get("source"))
            if "url" not in c and not oracle.is_abs_url(url):
                url = None
            self.cits[n] = oracle.Citation(_str(c.get("cited_text")) or "", _str(title), url)
            self.known[n] = self.chunks + 1
        self.keys[key] = n
        return n


def cite(ans, block, c):
    n = ans.source(c)
    if n is not None and n not in block and len(block) < BLOCK_REFS:
        block.append(n)


def refs(block):
    return "".join("[%d]" % n for n in block)


def read_stream(body, request):
    ans = Answer(request)
    include_usage = D.include_usage(request)
    started, in_text, block, finished = False, False, [], False
    tokens = {"in": 0, "out": 0}
    meta = {"id": None, "model": None}

    def take_usage(u):
        if isinstance(u, dict):
            for k, name in (("in", "input_tokens"), ("out", "output_tokens")):
                if _count(u.get(name)) is not None:
                    tokens[k] = _count(u[name])

    def usage_chunk():
        if include_usage and ans.usage is None:
            ans.chunk()
            ans.usage = {"prompt_tokens": tokens["in"], "completion_tokens": tokens["out"],
                         "total_tokens": tokens["in"] + tokens["out"]}

    end = None
    for t, obj in D.typed_events(body):
        if t == "message_start":
            msg = obj.get("message") if isinstance(obj.get("message"), dict) else {}
            for k in ("id", "model"):
                if meta[k] is None and isinstance(msg.get(k), str) and msg[k]:
                    meta[k] = msg[k]
            take_usage(msg.get("usage"))
            if not started:
                started = True
                ans.chunk("")
        elif t == "content_block_start":
            blk = obj.get("content_block") if isinstance(obj.get("content_block"), dict) else {}
            in_text, block = blk.get("type") == "text", []
            if in_text:
                for c in blk.get("citations") if isinstance(blk.get("citations"), list) else []:
                    cite(ans, block, c)
                if isinstance(blk.get("text"), str) and blk["text"]:
                    ans.chunk(blk["text"])
        elif t == "content_block_delta":
            d = obj.get("delta") if isinstance(obj.get("delta"), dict) else {}
            if d.get("type") == "text_delta" and isinstance(d.get("text"), str):
                if d["text"]:
                    ans.chunk(d["text"])
            elif d.get("type") == "citations_delta" and in_text:
                cite(ans, block, d.get("citation"))
        elif t == "content_block_stop":
            if in_text and block:
                ans.chunk(refs(block))
            in_text, block = False, []
        elif t == "message_delta":
            take_usage(obj.get("usage"))
            stop = (obj.get("delta") or {}).get("stop_reason") if isinstance(obj.get("delta"), dict) else None
            if isinstance(stop, str) and not finished:
                finished = True
                ans.chunk()
                ans.finish["0"] = finish_of(stop)
        elif t == "message_stop":
            usage_chunk()
            end = "done"
            break
        elif t == "error":
            err = obj.get("error") if isinstance(obj.get("error"), dict) else {}
            ans.error = {"message": _str(err.get("message")) or "upstream sent an error event",
                         "type": "upstream_error", "code": _str(err.get("type")) or "upstream_error"}
            end = "error"
            break
    if end is None:  # the upstream ended before message_stop
        if finished:
            usage_chunk()
            end = "done"
        else:
            end = "error"
            ans.error = {"message": "upstream closed the stream before the answer finished",
                         "type": "upstream_error", "code": "upstream_closed"}
    ans.meta = {"id": meta["id"] or "", "object": "chat.completion.chunk", "created": CREATED,
                "model": meta["model"] or ""}
    return ans, end


def read_body(obj, request):
    ans = Answer(request)
    ans.adopt(0)
    text = ""
    for blk in obj.get("content") if isinstance(obj.get("content"), list) else []:
        if not isinstance(blk, dict) or blk.get("type") != "text" or not isinstance(blk.get("text"), str):
            continue
        block = []
        for c in blk.get("citations") if isinstance(blk.get("citations"), list) else []:
            cite(ans, block, c)
        text += blk["text"] + refs(block)
    ans.add("0", text, 0, 0)
    ans.known = {n: 0 for n in ans.cits}
    stop = obj.get("stop_reason")
    ans.finish = {"0": finish_of(stop)} if isinstance(stop, str) else {}
    u = obj.get("usage")
    if isinstance(u, dict):
        i, o = _count(u.get("input_tokens")) or 0, _count(u.get("output_tokens")) or 0
        ans.usage = {"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o}
    ans.meta = {"id": _str(obj.get("id")) or "", "object": "chat.completion", "created": CREATED,
                "model": _str(obj.get("model")) or ""}
    return ans


expected_view = D.viewer(read_body, read_stream)
client_extras = D.client_extras
load_request = D.load_request
EXTRAS, COMPARED = D.EXTRAS, D.COMPARED


def regen():
    D.write_expected(CASES, expected_view, "anthropic")
    return 0


def main(argv):
    return D.main(argv, regen, expected_view)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
