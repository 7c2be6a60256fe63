#!/usr/bin/env python3
"""Golden test: `citegate filter` on a fixture vs its expected client view.

usage: run_golden.py CITEGATE EXPECTED_JSON
The expected file names its fixture, request and profile (tests/fixtures/expected/README).
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client_view  # noqa: E402


def main():
    citegate, expected_path = sys.argv[1], sys.argv[2]
    fixtures = os.path.dirname(os.path.dirname(os.path.abspath(expected_path)))
    with open(expected_path, encoding="utf-8") as f:
        want = json.load(f)
    cmd = [citegate, "filter", "--profile", want.get("profile", "openwebui")]
    if want.get("request"):
        cmd += ["--request", os.path.join(fixtures, want["request"])]
    with open(os.path.join(fixtures, want["fixture"]), "rb") as body:
        proc = subprocess.run(cmd, stdin=body, capture_output=True, timeout=30,
                              env={k: v for k, v in os.environ.items()
                                   if not k.startswith(("CITEGATE_", "AZURE_AI_"))})
    if proc.returncode != 0:
        print(f"exit {proc.returncode}: {proc.stderr.decode(errors='replace')}")
        return 1
    got = client_view.view(proc.stdout.decode("utf-8"))
    bad = [k for k in ("content", "sources", "ends_with_done", "ends_with_error_event")
           if k in want and want[k] != got.get(k)]
    for k in bad:
        print(f"{k}:\n  want {json.dumps(want[k], ensure_ascii=False)}\n"
              f"  got  {json.dumps(got.get(k), ensure_ascii=False)}")
    print(f"{want['fixture']}: {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
