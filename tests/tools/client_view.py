#!/usr/bin/env python3
"""The client's view of a citegate response, computed independently of citegate.

Parses SSE by the WHATWG rules (or a JSON body), then reduces it to what
tests/fixtures/expected/*.json records: per-choice content, emitted sources,
and how the stream ended.

usage: client_view.py BODY            print the view as JSON
       client_view.py BODY EXPECTED   compare with an expected file (exit 1 on mismatch)
"""
import json
import re
import sys


def sse_events(text):
    """Yields (fields, data) per dispatched event, WHATWG style."""
    if text.startswith("\ufeff"):
        text = text[1:]
    data, event = [], ""
    for line in re.split(r"\r\n|\r|\n", text)[:-1] if re.search(r"[\r\n]$", text) else re.split(r"\r\n|\r|\n", text)[:-1]:
        if line == "":
            if data:
                yield event, "\n".join(data)
            data, event = [], ""
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value


def view_of_stream(text):
    content, sources = {}, []
    last = None
    for _, data in sse_events(text):
        last = data
        if data == "[DONE]":
            continue
        try:
            obj = json.loads(data)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        ev = obj.get("event")
        if isinstance(ev, dict) and ev.get("type") == "source":
            sources.append(ev["data"])
        for ch in obj.get("choices") or []:
            delta = ch.get("delta") or {}
            c = delta.get("content")
            if isinstance(c, str):
                key = str(ch.get("index", 0))
                content[key] = content.get(key, "") + c
    ends_done = last == "[DONE]"
    ends_error = False
    if last and last != "[DONE]":
        try:
            ends_error = "error" in json.loads(last)
        except ValueError:
            pass
    return {"content": content, "sources": sources,
            "ends_with_done": ends_done, "ends_with_error_event": ends_error}


def view_of_body(text):
    obj = json.loads(text)
    content = {}
    for ch in obj.get("choices") or []:
        c = (ch.get("message") or {}).get("content")
        if isinstance(c, str):
            content[str(ch.get("index", 0))] = c
    return {"content": content, "sources": obj.get("sources", [])}


def view(text):
    return view_of_body(text) if text.lstrip().startswith("{") else view_of_stream(text)


def main():
    with open(sys.argv[1], encoding="utf-8", newline="") as f:
        got = view(f.read())
    if len(sys.argv) < 3:
        print(json.dumps(got, indent=1, ensure_ascii=False))
        return 0
    with open(sys.argv[2], encoding="utf-8") as f:
        want = json.load(f)
    bad = [k for k in ("content", "sources", "ends_with_done", "ends_with_error_event")
           if k in want and want[k] != got.get(k)]
    for k in bad:
        print(f"{k}: want {json.dumps(want[k], ensure_ascii=False)}\n      got  {json.dumps(got.get(k), ensure_ascii=False)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
