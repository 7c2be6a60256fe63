#!/usr/bin/env python3
"""Independent AWS Signature Version 4 signer: the expected values of the Bedrock cases
in tests/core/test_sigv4.c.

Written from AWS's description of the algorithm (IAM User Guide, "Create a signed AWS API
request" and "Elements of an AWS API request signature"), with Python's hashlib and hmac,
never from src/core/sigv4.c:

  canonical request = METHOD \\n CanonicalURI \\n CanonicalQuery \\n
                      (lower-case name ":" trimmed value \\n, sorted by name)... \\n
                      signed names joined by ";" \\n hex(SHA256(body))
  string to sign    = "AWS4-HMAC-SHA256" \\n DATE \\n DAY/REGION/SERVICE/aws4_request \\n
                      hex(SHA256(canonical request))
  signing key       = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, DAY), REGION), SERVICE),
                      "aws4_request")
  signature         = hex(HMAC(signing key, string to sign))

For every service but S3 the canonical URI is the path URI-encoded once more than it is
sent (each segment; "/" and the unreserved A-Z a-z 0-9 - _ . ~ stay): here
urllib.parse.quote(path, safe="/"). Before printing, the script checks itself against one
of AWS's published vectors (aws-c-auth, v4/post-x-www-form-urlencoded).

usage: sigv4_oracle.py      print each case's canonical request, string to sign and fields
"""
import datetime
import hashlib
import hmac
import sys
import urllib.parse

AKID = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
CLAUDE = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
ARN = ("/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2F"
       "us.anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream")
BODY = '{"messages":[{"role":"user","content":[{"text":"How do I charge the X100?"}]}]}'
TOKEN = "IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCXVzLWVhc3QtMSJHMEUCIQEXAMPLE+token/with==signs"

CASES = [
    # name, region, path, when (UTC), fields, body, session token
    ("bedrock_converse", "us-west-2", CLAUDE, (2025, 1, 15, 9, 30, 0),
     [("Content-Type", "application/json")], BODY, None),
    ("bedrock_arn_token", "us-east-1", ARN, (2024, 12, 31, 23, 59, 59),
     [("Content-Type", "application/json"), ("Accept", "application/vnd.amazon.eventstream")],
     BODY, TOKEN),
]


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def hmac_sha256(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def requote(s):
    """A query name or value as AWS signs it: decoded, then encoded but for unreserved bytes."""
    return urllib.parse.quote(urllib.parse.unquote(s), safe="")


def canonical_query(query):
    pairs = []
    for part in query.split("&"):
        if part:
            name, _, value = part.partition("=")
            pairs.append((requote(name), requote(value)))
    return "&".join(n + "=" + v for n, v in sorted(pairs))


def sign(region, service, method, path, query, headers, body, amz_date, token):
    """headers: (name, value) pairs, host included; returns (creq, sts, fields)."""
    payload = sha256_hex(body.encode())
    h = {}
    for name, value in headers + [("x-amz-date", amz_date)] + (
            [("x-amz-security-token", token)] if token else []):
        h.setdefault(name.lower(), []).append(" ".join(value.split()))
    h["x-amz-content-sha256"] = [payload]
    names = sorted(h)
    creq = "\n".join([method, urllib.parse.quote(path, safe="/"), canonical_query(query)] +
                     [n + ":" + ",".join(h[n]) for n in names] +
                     ["", ";".join(names), payload])
    day = amz_date[:8]
    scope = f"{day}/{region}/{service}/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, sha256_hex(creq.encode())])
    key = ("AWS4" + SECRET).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac_sha256(key, part)
    sig = hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()
    authz = (f"AWS4-HMAC-SHA256 Credential={AKID}/{scope}, SignedHeaders={';'.join(names)}, "
             f"Signature={sig}")
    fields = [("x-amz-date", amz_date), ("x-amz-content-sha256", payload)]
    if token:
        fields.append(("x-amz-security-token", token))
    fields.append(("authorization", authz))
    return creq, sts, fields


def self_check():
    _, _, fields = sign("us-east-1", "service", "POST", "/", "",
                        [("Content-Type", "application/x-www-form-urlencoded"),
                         ("Host", "example.amazonaws.com"), ("Content-Length", "13")],
                        "Param1=value1", "20150830T123600Z", None)
    want = "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b"
    if not fields[-1][1].endswith("Signature=" + want):
        sys.exit("sigv4_oracle: the oracle does not reproduce AWS's vector: " + fields[-1][1])


def main():
    self_check()
    for name, region, path, when, extra, body, token in CASES:
        t = datetime.datetime(*when, tzinfo=datetime.timezone.utc)
        host = f"bedrock-runtime.{region}.amazonaws.com"
        creq, sts, fields = sign(region, "bedrock", "POST", path, "",
                                 [("Host", host)] + extra, body, t.strftime("%Y%m%dT%H%M%SZ"),
                                 token)
        print(f"=== {name} (time_t {int(t.timestamp())})")
        print("--- canonical request\n" + creq)
        print("--- string to sign\n" + sts)
        print("--- fields")
        for n, v in fields:
            print(f"{n}: {v}")


if __name__ == "__main__":
    main()
