"""The official OpenAI SDK (openai-node, pinned in tests/sdk/package.json)
as citegate's client: streaming in several splits, non-streaming, the Azure
client's deployment path, and a truncated stream surfacing as an error."""
import json
import os
import subprocess
import unittest

import harness as H

SDK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sdk")


class OpenAISDK(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        H.ensure_npm(SDK)
        cls.mock = H.MockUpstream().start()
        cls.cg = H.Citegate(upstream=cls.mock.url).start()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()

    def test_sdk_sees_the_spec_result(self):
        p = subprocess.run(["node", os.path.join(SDK, "sdk_check.mjs"), str(self.cg.port)],
                           capture_output=True, timeout=120, cwd=SDK)
        self.assertEqual(p.returncode, 0, p.stderr.decode()[-2000:])
        got = json.loads(p.stdout)
        stream = H.expected("azure_oyd_stream.openwebui.json")
        for split in ("1", "7", "64"):
            v = got[f"stream_split_{split}"]
            self.assertEqual(v["content"], stream["content"], split)
            self.assertEqual(v["sources"], stream["sources"], split)
        self.assertEqual(got["azure"]["content"], stream["content"])
        body = H.expected("azure_oyd_response.openwebui.json")
        self.assertEqual(got["body"]["content"], body["content"])
        self.assertEqual(got["body"]["sources"], body["sources"])
        self.assertIn("upstream", got["truncated"])
        paths = [r["path"] for r in self.mock.requests()]
        self.assertTrue(any(p.startswith("/openai/deployments/gpt-4o/chat/completions") for p in paths),
                        paths)


if __name__ == "__main__":
    unittest.main()
