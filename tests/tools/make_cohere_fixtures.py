#!/usr/bin/env python3
"""Writes the cohere dialect's answers (tests/fixtures/dialects/answers/cohere_*.sse and
cohere_*.json) from the descriptions below, so that citation offsets are counted, not typed:
characters (code points) of the answer's text, `end` exclusive, as Cohere's v2 Chat API
counts them (SPEC §6a; /work/shared/upstreams/cohere.md has the wire facts).

A description is a list of steps:
  ("text", S)                      a content-delta with text S
  ("think", S)                     a content-delta with thinking S (a thinking content item)
  ("cite", WORDS, [SOURCE, ...])   a citation of the last occurrence of WORDS in the text so
                                   far: start, end, text = WORDS, sources, type TEXT_CONTENT
  ("raw_cite", OBJ)                a citation-start whose `citations` is OBJ as it is (bad input)
  ("event", TYPE, OBJ)             any other event, as it is
  ("line", TEXT)                   raw lines (a comment, data that is not JSON)
and a description says its id, finish_reason, usage and which files it makes:
  "stream": a list of modes: "fast" (each citation right after the text it cites, as the
            steps say) writes cohere_NAME_fast.sse, "accurate" (every citation after the whole
            text, before content-end) cohere_NAME_accurate.sse, "plain" cohere_NAME.sse;
  "body": cohere_NAME.json, the non-streaming answer: message.content text items,
          message.citations in order, finish_reason, usage;
  "cut": the stream's body ends there (no message-end; the last event cut in two).
A source is ("doc", ID, {document fields}) or ("tool", ID, {tool_output fields}), written
{"type":"document","id":ID,"document":{"id":ID,...}} or {"type":"tool","id":ID,
"tool_output":{...}} as Cohere echoes them.

The answers marked "e2e" go to tests/fixtures/dialects/e2e/ instead: cohere_stream.sse
(fast), cohere_response.json and cohere_error.sse, which the mock upstreams serve.

usage: make_cohere_fixtures.py      (rewrites every cohere_* answer; then run
                                     tests/tools/cohere_oracle.py --regen)
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ANSWERS = os.path.join(os.path.dirname(HERE), "fixtures", "dialects", "answers")

CAFE = {"title": "Caf\u00e9_Guide", "snippet": "Caf\u00e9 cr\u00e8me needs 60 ml of milk.",
        "url": "https://kb.example.com/wiki/Caf%C3%A9_Guide"}
NOTES = {"title": "brew tips.txt",
         "snippet": "Service   notes for the X200:\n\tthe battery module is held by four T5 screws."}

ANSWERS_DESC = {
    # Open WebUI's RAG request: its <source> tags 3, 7 and 9 went as documents "3", "7", "9".
    # Characters of several bytes (é, è, °, –, 😀) before the cited words; a source cited
    # by two citations; two sources in one citation; a source Cohere adds (a web search).
    "documents": {
        "id": "c0ffee00-0000-4000-8000-000000000001",
        "steps": [
            ("text", "Caf\u00e9 cr\u00e8me: warm 60 ml of milk"),
            ("cite", "60 ml of milk", [("doc", "3", CAFE)]),
            ("text", " to 60\u201365 \u00b0C \U0001F600, then pour."),
            ("cite", "60\u201365 \u00b0C", [("doc", "3", CAFE), ("doc", "7", NOTES)]),
            ("text", " The X200's battery is held by four T5 screws"),
            ("cite", "four T5 screws", [("doc", "7", NOTES)]),
            ("text", ", as the "),
            ("text", "service manual says."),
            ("cite", "service manual", [("doc", "web:0", {"title": "X200 Service Manual",
                                                         "url": "https://docs.example.com/x200.pdf",
                                                         "snippet": "Remove the four T5 screws."})]),
        ],
        "finish": "COMPLETE",
        "usage": {"billed_units": {"input_tokens": 120, "output_tokens": 40},
                  "tokens": {"input_tokens": 1210, "output_tokens": 44}},
        "stream": ["fast", "accurate"],
        "body": True,
    },
    # Tool outputs as sources: a title and url from the output, a snippet from its `text`;
    # one without a title or url (the citation's text is its snippet).
    "tool": {
        "id": "c0ffee00-0000-4000-8000-000000000002",
        "steps": [
            ("text", "It is 24\u00b0C in Madrid"),
            ("cite", "24\u00b0C", [("tool", "get_weather_9a1:0",
                                    {"temperature": 24, "title": "Weather in Madrid",
                                     "url": "https://weather.example/madrid",
                                     "text": "Madrid: 24 \u00b0C, clear."})]),
            ("text", " and 28\u00b0C in Bras\u00edlia."),
            ("cite", "28\u00b0C", [("tool", "get_weather_9a1:1", {"temperature": 28})]),
        ],
        "finish": "COMPLETE",
        "usage": {"tokens": {"input_tokens": 30, "output_tokens": 12}},
        "stream": ["fast", "accurate"],
        "body": True,
    },
    # One source cited by three citations, and twice within one; the model's own [1]
    # after its number is known.
    "cited_twice": {
        "id": "c0ffee00-0000-4000-8000-000000000003",
        "steps": [
            ("text", "Lyon sits where the Rh\u00f4ne meets the Sa\u00f4ne."),
            ("cite", "Rh\u00f4ne meets the Sa\u00f4ne", [("doc", "doc:0", {"title": "Lyon",
                                                          "snippet": "Lyon, at the confluence.",
                                                          "url": "https://fr.example/lyon"})]),
            ("text", " It is France's third city [1]."),
            ("cite", "third city", [("doc", "doc:0", {"title": "Lyon"}),
                                    ("doc", "doc:1", {"title": "Cities",
                                                      "text": "A list of cities."}),
                                    ("doc", "doc:0", {"title": "Lyon"})]),
            ("text", " Its old town is listed."),
            ("cite", "old town", [("doc", "doc:0", {"title": "Lyon"})]),
        ],
        "finish": "COMPLETE",
        "usage": {"tokens": {"input_tokens": 5, "output_tokens": 6}},
        "stream": ["fast"],
        "body": True,
    },
    # What counts not: a span past the text, a negative start, an offset that is no whole
    # number or no number, start after end, another type, citations that are no object,
    # sources without an id; then one that counts. The text has characters of several bytes.
    "bad_spans": {
        "id": "c0ffee00-0000-4000-8000-000000000004",
        "steps": [
            ("text", "\u00c0 bient\u00f4t, na\u00efve caf\u00e9."),
            ("raw_cite", {"start": 0, "end": 99, "text": "x", "type": "TEXT_CONTENT",
                          "sources": [{"type": "document", "id": "a", "document": {"title": "A"}}]}),
            ("raw_cite", {"start": -1, "end": 3, "sources": [{"type": "document", "id": "a",
                                                             "document": {"title": "A"}}]}),
            ("raw_cite", {"start": 0, "end": 2.5, "sources": [{"type": "document", "id": "a",
                                                              "document": {"title": "A"}}]}),
            ("raw_cite", {"start": 0, "end": "3", "sources": [{"type": "document", "id": "a",
                                                              "document": {"title": "A"}}]}),
            ("raw_cite", {"start": 4, "end": 3, "sources": [{"type": "document", "id": "a",
                                                            "document": {"title": "A"}}]}),
            ("raw_cite", {"start": 0, "end": 3, "type": "THINKING_CONTENT",
                          "sources": [{"type": "document", "id": "a", "document": {"title": "A"}}]}),
            ("raw_cite", [{"start": 0, "end": 3, "sources": [{"type": "document", "id": "a"}]}]),
            ("raw_cite", None),
            ("raw_cite", {"start": 0, "end": 3, "sources": [{"type": "document",
                                                            "document": {"title": "no id"}},
                                                           {"type": "tool", "id": 12}, "x"]}),
            ("cite", "caf\u00e9", [("doc", "b", {"title": "B", "snippet": "bee"})]),
        ],
        "finish": "COMPLETE",
        "usage": {"tokens": {"input_tokens": 1, "output_tokens": 2}},
        "stream": ["plain"],
        "body": True,
    },
    # Cohere fails mid-answer: the references so far, then the error event, no [DONE].
    "error": {
        "id": "c0ffee00-0000-4000-8000-000000000005",
        "steps": [
            ("text", "Warm the milk first"),
            ("cite", "Warm the milk", [("doc", "3", CAFE)]),
            ("text", ", then"),
        ],
        "finish": "ERROR",
        "error": "An internal error occurred; please retry.",
        "stream": ["plain"],
    },
    # MAX_TOKENS with usage asked for (billed_units only); ERROR_TOXIC as a body.
    "max_tokens": {
        "id": "c0ffee00-0000-4000-8000-000000000006",
        "steps": [("text", "The list goes on: one, two, [1"), ("text", "] three")],
        "finish": "MAX_TOKENS",
        "usage": {"billed_units": {"input_tokens": 7, "output_tokens": 8}},
        "stream": ["plain"],
    },
    "toxic": {
        "id": "c0ffee00-0000-4000-8000-000000000007",
        "steps": [("text", "I can't")],
        "finish": "ERROR_TOXIC",
        "usage": {"tokens": {"input_tokens": 3, "output_tokens": 2}},
        "body": True,
    },
    # Thinking before the text, a tool plan, tool-call and debug events, a comment, data
    # that is not JSON and an unknown event: none of it is content.
    "thinking": {
        "id": "c0ffee00-0000-4000-8000-000000000008",
        "steps": [
            ("think", "The user asks about milk; document 3 says 60 ml [3]."),
            ("event", "tool-plan-delta", {"type": "tool-plan-delta",
                                          "delta": {"message": {"tool_plan": "I will look it up."}}}),
            ("event", "tool-call-start", {"type": "tool-call-start", "index": 0, "delta": {
                "message": {"tool_calls": {"id": "t1", "type": "function", "function": {
                    "name": "search", "arguments": ""}}}}}),
            ("event", "tool-call-end", {"type": "tool-call-end", "index": 0}),
            ("line", ": keep-alive\n\n"),
            ("line", "event: debug\ndata: {\"type\":\"debug\",\"prompt\":\"...\"}\n\n"),
            ("line", "event: content-delta\ndata: not json\n\n"),
            ("event", "new-kind", {"type": "new-kind", "delta": {"message": {"content": {
                "text": "not this"}}}}),
            ("text", "Use 60 ml."),
            ("cite", "60 ml", [("doc", "3", CAFE)]),
        ],
        "thinking_first": True,
        "finish": "COMPLETE",
        "usage": {"tokens": {"input_tokens": 9, "output_tokens": 9}},
        "stream": ["plain"],
    },
    # End to end (tests/fixtures/dialects/e2e/, for ../../openwebui_rag_request.json, whose
    # <source> tags 1 and 2 went as documents "1" and "2"): a web source
    # Cohere adds (number 3), characters of several bytes; streamed in fast mode, and as a body.
    "e2e": {
        "id": "c0ffee00-0000-4000-8000-0000000000e2",
        "steps": [
            ("text", "Light travels at exactly 299,792,458 m/s"),
            ("cite", "299,792,458 m/s", [("doc", "1", {"title": "Speed_of_light"})]),
            ("text", ". Sunlight needs about 8 min 20 s (≈ 499 s)"),
            ("cite", "8 min 20 s", [("doc", "2", {"title": "physics-notes.md"}),
                                    ("doc", "web:0", {"title": "NASA: Sunlight",
                                                      "url": "https://science.example.gov/sun",
                                                      "snippet": "Sunlight takes 8 minutes."})]),
            ("text", " to reach Earth."),
        ],
        "finish": "COMPLETE",
        "usage": {"billed_units": {"input_tokens": 20, "output_tokens": 40},
                  "tokens": {"input_tokens": 25, "output_tokens": 42}},
        "e2e": True,
    },
    "e2e_error": {
        "id": "c0ffee00-0000-4000-8000-0000000000e3",
        "steps": [("text", "Light travels")],
        "finish": "ERROR",
        "error": "internal server error, this has been reported to our developers",
        "e2e": True,
    },
    # The body ends inside an event: no message-end, the error event upstream_closed.
    "truncated": {
        "id": "c0ffee00-0000-4000-8000-000000000009",
        "steps": [("text", "Half an ans"), ("cite", "Half", [("doc", "3", CAFE)]),
                  ("text", "wer that never")],
        "cut": True,
        "stream": ["plain"],
    },
}


def source_obj(src):
    kind, sid, fields = src
    if kind == "doc":
        return {"type": "document", "id": sid, "document": dict({"id": sid}, **fields)}
    return {"type": "tool", "id": sid, "tool_output": fields}


def sse(event, obj, ascii_only=False):
    data = json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))
    return "event: %s\ndata: %s\n\n" % (event, data)


def citation(text_so_far, words, sources):
    start = text_so_far.rindex(words)
    return {"start": start, "end": start + len(words), "text": words,
            "sources": [source_obj(s) for s in sources], "type": "TEXT_CONTENT"}


def read(desc):
    """The answer's text, its citations in order (each with the step it follows), and the
    steps as (kind, payload) with citations resolved."""
    text, cites, steps = "", [], []
    for step in desc["steps"]:
        if step[0] == "text":
            text += step[1]
            steps.append(("text", step[1]))
        elif step[0] == "cite":
            c = citation(text, step[1], step[2])
            cites.append(c)
            steps.append(("cite", c))
        elif step[0] == "raw_cite":
            cites.append(step[1])
            steps.append(("cite", step[1]))
        else:
            steps.append(step)
    return text, cites, steps


def stream(desc, mode):
    _, cites, steps = read(desc)
    out = [sse("message-start", {"id": desc["id"], "type": "message-start", "delta": {"message": {
        "role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}})]
    index = 0
    if desc.get("thinking_first"):
        out.append(sse("content-start", {"type": "content-start", "index": 0, "delta": {
            "message": {"content": {"type": "thinking", "thinking": ""}}}}))
    text_open = False
    ncite = 0

    def put_cite(c):
        nonlocal ncite
        out.append(sse("citation-start", {"type": "citation-start", "index": ncite,
                                          "delta": {"message": {"citations": c}}}))
        out.append(sse("citation-end", {"type": "citation-end", "index": ncite}))
        ncite += 1

    for kind, *rest in steps:
        if kind == "think":
            out.append(sse("content-delta", {"type": "content-delta", "index": 0, "delta": {
                "message": {"content": {"thinking": rest[0]}}}}))
        elif kind == "text":
            if not text_open:
                if desc.get("thinking_first"):
                    out.append(sse("content-end", {"type": "content-end", "index": 0}))
                    index = 1
                out.append(sse("content-start", {"type": "content-start", "index": index, "delta": {
                    "message": {"content": {"type": "text", "text": ""}}}}))
                text_open = True
            out.append(sse("content-delta", {"type": "content-delta", "index": index, "delta": {
                "message": {"content": {"text": rest[0]}}}}))
        elif kind == "cite":
            if mode != "accurate":
                put_cite(rest[0])
        elif kind == "event":
            out.append(sse(rest[0], rest[1]))
        elif kind == "line":
            out.append(rest[0])
    if mode == "accurate":
        for c in cites:
            put_cite(c)
    if desc.get("cut"):
        last = out.pop()
        out.append(last[:len(last) // 2])
        return "".join(out)
    if text_open:
        out.append(sse("content-end", {"type": "content-end", "index": index}))
    delta = {"finish_reason": desc["finish"]}
    if "error" in desc:
        delta["error"] = desc["error"]
    if "usage" in desc:
        delta["usage"] = desc["usage"]
    out.append(sse("message-end", {"type": "message-end", "delta": delta}))
    return "".join(out)


def body(desc):
    text, cites, _ = read(desc)
    message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    if cites:
        message["citations"] = cites
    obj = {"id": desc["id"], "message": message, "finish_reason": desc["finish"]}
    if "usage" in desc:
        obj["usage"] = desc["usage"]
    return json.dumps(obj, ensure_ascii=False, indent=1) + "\n"


E2E = os.path.join(os.path.dirname(ANSWERS), "e2e")


def main():
    with open(os.path.join(E2E, "cohere_stream.sse"), "w", encoding="utf-8", newline="") as f:
        f.write(stream(ANSWERS_DESC["e2e"], "fast"))
    with open(os.path.join(E2E, "cohere_response.json"), "w", encoding="utf-8") as f:
        f.write(body(ANSWERS_DESC["e2e"]))
    with open(os.path.join(E2E, "cohere_error.sse"), "w", encoding="utf-8", newline="") as f:
        f.write(stream(ANSWERS_DESC["e2e_error"], "plain"))
    for name, desc in ANSWERS_DESC.items():
        if desc.get("e2e"):
            continue
        for mode in desc.get("stream", []):
            suffix = "" if mode == "plain" else "_" + mode
            with open(os.path.join(ANSWERS, "cohere_%s%s.sse" % (name, suffix)), "w",
                      encoding="utf-8", newline="") as f:
                f.write(stream(desc, mode))
        if desc.get("body"):
            with open(os.path.join(ANSWERS, "cohere_%s.json" % name), "w", encoding="utf-8") as f:
                f.write(body(desc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
