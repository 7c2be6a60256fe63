#!/usr/bin/env python3
"""`citegate filter` command-line contract (SPEC §2): exit codes, messages,
profile `off` byte identity, flags over environment variables."""
import os
import subprocess
import sys
import tempfile

CITEGATE, FIXTURES = sys.argv[1], sys.argv[2]
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("CITEGATE_", "AZURE_AI_"))}
failures = []
passed = 0


def run(args, stdin=b"", env=None):
    return subprocess.run([CITEGATE, "filter"] + args, input=stdin, capture_output=True,
                          timeout=30, env=env or ENV)


def check(name, cond, detail=""):
    global passed
    if cond:
        passed += 1
    else:
        failures.append(f"{name}: {detail}")


def fixture(name):
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


stream = fixture("azure_oyd_stream.sse")

for name in sorted(os.listdir(FIXTURES)):
    if name.endswith((".sse", ".json")):
        body = fixture(name)
        p = run(["--profile", "off"], body)
        check(f"off is byte identical: {name}", p.returncode == 0 and p.stdout == body)

p = run(["--profile", "nope"], stream)
check("unknown profile exits 1", p.returncode == 1, p.returncode)
check("unknown profile names the problem", b"CITEGATE_PROFILE" in p.stderr, p.stderr)

p = run(["--ref-style", "weird"], stream)
check("bad ref style exits 1", p.returncode == 1, p.returncode)

p = run(["--request", "/nonexistent/request.json"], stream)
check("missing request file exits 1", p.returncode == 1 and b"request" in p.stderr, p.stderr)

with tempfile.NamedTemporaryFile("wb", suffix=".json") as bad:
    bad.write(b"{not json")
    bad.flush()
    p = run(["--request", bad.name], stream)
    check("invalid request JSON exits 1", p.returncode == 1 and b"JSON" in p.stderr, p.stderr)

p = run([], b'{"choices": [')
check("invalid JSON body exits 1", p.returncode == 1 and p.stderr, p.stderr)
check("invalid JSON body still written unchanged", p.stdout == b'{"choices": [', p.stdout)

p = run(["--bogus"], stream)
check("unknown flag exits 1", p.returncode == 1, p.returncode)

p = run(["--help"])
check("--help exits 0 with usage", p.returncode == 0 and b"usage" in p.stdout, p.stdout)
check("--help names the citation style", b"doc|numeric|citation|auto" in p.stdout, p.stdout)
PROFILES = b"profiles: off, openwebui, openai, webchat, structured, markdown"
check("filter --help lists the profiles", PROFILES in p.stdout, p.stdout)
p = subprocess.run([CITEGATE, "--help"], capture_output=True, timeout=30, env=ENV)
check("citegate --help lists the profiles", p.returncode == 0 and PROFILES in p.stdout, p.stdout)

DIALECTS = b"upstream dialects (CITEGATE_UPSTREAM_DIALECT): openai, anthropic, responses, gemini, vertex"
check("citegate --help lists the dialects", DIALECTS in p.stdout, p.stdout)
p = run(["--help"])
check("filter --help lists the dialects", DIALECTS in p.stdout, p.stdout)

# A Gemini stream: the grounding's references after the text, rewritten.
with open(os.path.join(FIXTURES, "dialects", "answers", "gemini_file_search.sse"), "rb") as f:
    gemini = f.read()
p = run(["--dialect", "gemini", "--profile", "markdown"], gemini)
check("--dialect gemini reads a Gemini stream",
      p.returncode == 0 and b"third-party charger.\"" in p.stdout and b"\"content\":\" [1][2]\"" in p.stdout
      and b"**Sources**" in p.stdout
      and p.stdout.endswith(b"data: [DONE]\n\n"), p.stdout[-600:])
p = run(["--dialect", "bard"], gemini)
check("an unknown dialect exits 1 naming the variable",
      p.returncode == 1 and b"CITEGATE_UPSTREAM_DIALECT" in p.stderr, p.stderr)

p = run(["--ref-style", "citation"], stream)
check("--ref-style citation is accepted", p.returncode == 0, p.stderr)

env = dict(ENV, CITEGATE_PROFILE="off")
p = run([], stream, env)
check("CITEGATE_PROFILE=off applies", p.stdout == stream)
p = run(["--profile", "openwebui"], stream, env)
check("flag wins over variable", b"[[doc1]](https://docs.example.com/x100/manual.pdf)" in p.stdout)

env = dict(ENV, CITEGATE_PROFILE="markdown")
p = run([], stream, env)
check("CITEGATE_PROFILE=markdown applies",
      b"[1](https://docs.example.com/x100/manual.pdf)" in p.stdout and b"**Sources**" in p.stdout, p.stdout)

env = dict(ENV, CITEGATE_REF_STYLE="numeric")
p = run([], stream, env)
check("numeric style leaves [docN] alone", b"[[doc1]]" not in p.stdout and p.returncode == 0)

env = dict(ENV, AZURE_AI_INCLUDE_SEARCH_SCORES="false")
p = run([], stream, env)
check("scores off: no distances", b'"distances"' not in p.stdout and b'"source"' in p.stdout)

env = dict(ENV, CITEGATE_MAX_DOC_BYTES="10")
p = run([], stream, env)
check("snippet cut to CITEGATE_MAX_DOC_BYTES", b'"document":["The X100 c"]' in p.stdout, p.stdout[-600:])

env = dict(ENV, AZURE_AI_INCLUDE_SEARCH_SCORES="maybe")
p = run([], stream, env)
check("bad boolean exits 1 naming the variable",
      p.returncode == 1 and b"AZURE_AI_INCLUDE_SEARCH_SCORES" in p.stderr, p.stderr)

# Empty input: an SSE stream that never started ends with the error event.
p = run([], b"")
check("empty stream gets the error event", b'"upstream_closed"' in p.stdout and p.returncode == 0,
      p.stdout)

for f in failures:
    print("FAIL", f)
print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
