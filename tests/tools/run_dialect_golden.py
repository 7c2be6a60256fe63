#!/usr/bin/env python3
"""Golden test of a dialect view: `citegate filter --dialect D --created N` on an upstream
answer vs the expected client view stored for it, and that stored view vs the independent
oracle of its dialect (anthropic_oracle.py, bedrock_oracle.py, bedrock_kb_oracle.py,
cohere_oracle.py), so a stale file cannot pass
unnoticed. The fixture is read as bytes: an SSE text, a JSON body or a binary AWS event
stream (bedrock) alike.

usage: run_dialect_golden.py CITEGATE EXPECTED_JSON
The expected file names its fixture and request (relative to tests/fixtures/dialects),
the dialect, "created" and the profile (tests/fixtures/dialects/answers/README.md).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import anthropic_oracle  # noqa: E402
import bedrock_kb_oracle  # noqa: E402
import bedrock_oracle  # noqa: E402
import cohere_oracle  # noqa: E402
import oracle  # noqa: E402

ORACLES = {"anthropic": anthropic_oracle, "bedrock": bedrock_oracle, "bedrock-kb": bedrock_kb_oracle,
           "cohere": cohere_oracle}


def diff(want, got, keys):
    return ["%s:\n  want %s\n  got  %s" % (k, json.dumps(want.get(k), ensure_ascii=False),
                                           json.dumps(got.get(k), ensure_ascii=False))
            for k in keys if want.get(k) != got.get(k)]


def main():
    citegate, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path, encoding="utf-8") as f:
        want = json.load(f)
    model = ORACLES[want["dialect"]]
    root = model.DIALECTS
    cmd = [citegate, "filter", "--dialect", want["dialect"], "--created", str(want["created"]),
           "--profile", want["profile"]]
    request = None
    if want.get("request"):
        cmd += ["--request", os.path.join(root, want["request"])]
        request = model.load_request(want["request"])
    with open(os.path.join(root, want["fixture"]), "rb") as f:
        body = f.read()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEGATE_", "AZURE_AI_"))}
    proc = subprocess.run(cmd, input=body, capture_output=True, timeout=30, env=env)
    if proc.returncode != 0:
        print("exit %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")))
        return 1
    got = oracle.client_view(proc.stdout)
    got.update(model.client_extras(proc.stdout))
    if hasattr(model, "reconcile"):  # values the SPEC leaves free, null in the stored view
        got = model.reconcile(want, got)
    bad = diff(want, got, model.COMPARED)
    stale = diff(want, model.expected_view(body, request, want["profile"]), model.COMPARED)
    for line in bad:
        print("citegate " + line)
    for line in stale:
        print("oracle (regenerate the expected files?) " + line)
    print("%s (%s): %s" % (want["fixture"], want["profile"], "FAIL" if bad or stale else "ok"))
    return 1 if bad or stale else 0


if __name__ == "__main__":
    sys.exit(main())
