#!/usr/bin/env python3
"""Writes the bedrock-kb dialect's answers (tests/fixtures/dialects/answers/bedrock_kb_*.bin
and bedrock_kb_*.json) from their readable descriptions in
tests/fixtures/dialects/answers/bedrock_kb_answers.desc.json.

A description's "body" is written, pretty-printed, as bedrock_kb_NAME.json
(RetrieveAndGenerate's JSON answer). Its "stream" is written as bedrock_kb_NAME.bin, AWS's
event stream as retrieveAndGenerateStream sends it, with the entries of
make_bedrock_fixtures.py (["output", {"text": …}], {"exception": …}, {"event": …, "cut": N}
and so on). "stream_of_body": true writes the stream the body amounts to: the text as
`output` events of a few words, cut where each citation's span ends (end + 1, in code
points), each `citation` event right after the text it cites, carrying its members at the
top level and again in the deprecated nested `citation`; then "stream_tail", entries after
them (a guardrail event).

usage: make_bedrock_kb_fixtures.py    (rewrites every bedrock_kb_* answer; then run
                                       tests/tools/bedrock_kb_oracle.py --regen)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_bedrock_fixtures as mbf  # noqa: E402  (the event-stream encoder)

DESC = os.path.join(mbf.ANSWERS, "bedrock_kb_answers.desc.json")


def stream_of_body(body):
    text, out, at = body["output"]["text"], [], 0
    cits = sorted(body.get("citations", []),
                  key=lambda c: c["generatedResponsePart"]["textResponsePart"]["span"]["end"])
    for c in cits:
        end = c["generatedResponsePart"]["textResponsePart"]["span"]["end"] + 1
        out += [["output", {"text": w}] for w in mbf.words(text[at:end])]
        at = max(at, end)
        out.append(["citation", dict(c, citation=c)])
    out += [["output", {"text": w}] for w in mbf.words(text[at:])]
    return out


def main():
    return mbf.write_answers(DESC, "bedrock_kb", lambda d: stream_of_body(d["body"]) + d.get("stream_tail", [])
                             if d.get("stream_of_body") else d.get("stream"))

if __name__ == "__main__":
    sys.exit(main())
