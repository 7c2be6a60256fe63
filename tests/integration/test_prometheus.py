"""The Prometheus rules (docker/prometheus), the Grafana dashboard
(docker/grafana/citegate.json), and a real Prometheus server scraping citegate.

- Rules: `promtool check rules`, `promtool test rules` (every alert has a case
  that fires it and one that stays quiet), every metric name in a rule is one
  /metrics exposes, every recording rule is drawn by the dashboard or used by
  an alert, and prometheus.yml's checks.
- Dashboard: importable as is (a data source variable, no fixed data source,
  unique ids, panels inside the grid) and every metric name in every panel's
  expression is one /metrics exposes, or a recording rule whose own names are.
- RealServer: Debian's `prometheus` on a free port scrapes a 2-worker citegate
  every second with the rules loaded; the test drives a known number of
  answers, refusals and citations, then asks /api/v1/query: the sums equal
  what the test produced, in every scrape after the traffic, while both
  workers are seen answering scrapes (each scrape on a new connection); the
  per-model answers and citations too, merged over both workers' model tables.
"""
import copy
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

import harness as H
import test_tracking as TT
from test_metrics import parse as parse_exposition

REPO = Path(__file__).resolve().parents[2]
PROM_DIR = REPO / "docker" / "prometheus"
RULES = PROM_DIR / "citegate.rules.yml"
RULE_TESTS = PROM_DIR / "citegate.rules.test.yml"
SCRAPE_CONFIG = PROM_DIR / "prometheus.yml"
DASHBOARD = REPO / "docker" / "grafana" / "citegate.json"
K8S = REPO / "docker" / "k8s"

# Words of PromQL that are not metric names where the tokenizer can meet them.
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
                "and", "or", "unless", "inf", "nan", "atan2"}
GRAFANA_VARS = {"namespace": ".*", "job": ".*"}


def metric_names(expr):
    """The metric names a PromQL expression selects: identifiers outside strings,
    label matchers, ranges and label lists that are not a function's name."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    e = re.sub(r"\{[^{}]*\}", " ", e)
    e = re.sub(r"\[[^\[\]]*\]", " ", e)
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", e)
    names = []
    for m in re.finditer(r"(?<![\w:.$])([a-zA-Z_:][\w:]*)(\s*\()?", e):
        if m.group(2) or m.group(1) in PROMQL_WORDS:
            continue
        names.append(m.group(1))
    return names


def load_rules():
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    return [r for g in doc["groups"] for r in g["rules"]]


def exposed_names():
    """Every sample name a live citegate's /metrics exposes."""
    cg = H.Citegate().start()
    try:
        st, _, body = cg.admin("GET", "/metrics")
        assert st == 200, st
        fams = parse_exposition(body.decode())
    finally:
        cg.cleanup()
    names = set()
    for fam, f in fams.items():
        names.add(fam)
        if f["type"] == "histogram":
            names.update(fam + s for s in ("_bucket", "_sum", "_count"))
    return names


def promtool(*args, cwd=PROM_DIR):
    exe = shutil.which("promtool")
    assert exe, "promtool (Debian package prometheus) is installed by make deps"
    return subprocess.run([exe] + list(args), cwd=cwd, capture_output=True, text=True, timeout=120)


def dashboard_exprs(dash):
    """(where, expression) of every panel target and query variable."""
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((f"panel {p['title']!r} {t['refId']}", t["expr"]))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.*),\s*\w+\)", q)
            assert m, f"variable {v['name']}: {q}"
            out.append((f"variable {v['name']}", m.group(1)))
    return out


def substitute(expr):
    for k, v in GRAFANA_VARS.items():
        expr = expr.replace("$" + k, v)
    return expr


class Tokenizer(unittest.TestCase):
    def test_metric_names(self):
        cases = {
            'histogram_quantile(0.99, sum by (le) (rate(a_bucket{le!="x",job=~"$job"}[5m])))': ["a_bucket"],
            "sum by (namespace, job) (rate(b_total[6h] offset 30m)) / on (job) group_left(x) c": ["b_total", "c"],
            "1 - job:rec:mean5m{a=\"b\"} > 0.5 and d unless e": ["job:rec:mean5m", "d", "e"],
            'absent(up{job="citegate"}) or vector(1e3)': ["up"],
            "min_over_time(q[10m:1m]) > bool 0": ["q"],
        }
        for expr, want in cases.items():
            self.assertEqual(metric_names(expr), want, expr)


class Rules(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        cls.rules = load_rules()
        cls.exposed = exposed_names()
        with open(RULE_TESTS) as f:
            cls.tests = yaml.safe_load(f)

    def test_promtool_check_rules(self):
        r = promtool("check", "rules", RULES.name)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"SUCCESS: {len(self.rules)} rules found", r.stdout)

    def test_promtool_unit_tests(self):
        r = promtool("test", "rules", RULE_TESTS.name)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("SUCCESS", r.stdout)

    def test_every_alert_fires_and_stays_quiet(self):
        self.assertEqual(self.tests["rule_files"], [RULES.name])
        fired, quiet = set(), set()
        for t in self.tests["tests"]:
            for a in t.get("alert_rule_test", []):
                (fired if a.get("exp_alerts") else quiet).add(a["alertname"])
        alerts = {r["alert"] for r in self.rules if "alert" in r}
        self.assertGreaterEqual(len(alerts), 8)
        self.assertEqual(alerts - fired, set(), "alerts no test fires")
        self.assertEqual(alerts - quiet, set(), "alerts no test keeps quiet")
        self.assertEqual((fired | quiet) - alerts, set(), "tests of alerts that do not exist")

    def test_every_documented_alert_is_there(self):
        """upstream errors, upstream_busy, queue, client stalls, embeddings, tracking,
        citation rate, targets: each by the metric it must read."""
        exprs = {r["alert"]: r["expr"] for r in self.rules if "alert" in r}
        records = {r["record"]: r["expr"] for r in self.rules if "record" in r}

        def reads(alert, metric):
            names = metric_names(exprs[alert])
            expanded = set(names)
            for n in names:
                expanded.update(metric_names(records.get(n, "")))
            return metric in expanded
        for alert, metric in (("CitegateUpstreamErrorRatioHigh", "citegate_upstream_errors_total"),
                              ("CitegateUpstreamBusy", "citegate_upstream_queue_rejections_total"),
                              ("CitegateUpstreamQueueBacklog", "citegate_upstream_queue_length"),
                              ("CitegateClientStalls", "citegate_client_stalls_total"),
                              ("CitegateClientDisconnectRatioHigh", "citegate_client_disconnects_total"),
                              ("CitegateEventLoopStalled", "citegate_event_loop_lag_seconds_bucket"),
                              ("CitegateEmbeddingFailures", "citegate_embedding_failures_total"),
                              ("CitegateTrackingWritesDropped", "citegate_tracking_writes_dropped_total"),
                              ("CitegateTrackingFailures", "citegate_tracking_failures_total"),
                              ("CitegateCitationRateDropped", "citegate_citation_rate_sum"),
                              ("CitegateModelCitationRateDropped", "citegate_answer_citations_total"),
                              ("CitegateModelCitationRateDropped", "citegate_answer_sources_total"),
                              ("CitegateTargetDown", "up"), ("CitegateTargetsAbsent", "up")):
            self.assertIn(alert, exprs)
            self.assertTrue(reads(alert, metric), f"{alert} does not read {metric}")

    def test_metric_names_exposed(self):
        records = {r["record"] for r in self.rules if "record" in r}
        for r in self.rules:
            for n in metric_names(r["expr"]):
                if n == "up":  # Prometheus's own, per target
                    continue
                self.assertTrue(n in self.exposed or n in records,
                                f"{r.get('record') or r.get('alert')}: {n} is not on /metrics")

    def test_every_recording_rule_is_used(self):
        used = set()
        with open(DASHBOARD) as f:
            for _, e in dashboard_exprs(json.load(f)):
                used.update(metric_names(e))
        for r in self.rules:
            if "alert" in r:
                used.update(metric_names(r["expr"]))
        for r in self.rules:
            if "record" in r:
                self.assertIn(r["record"], used, f"{r['record']}: neither drawn nor alerted on")

    def test_scrape_config(self):
        """prometheus.yml: promtool accepts it (its Kubernetes discovery swapped for a static
        target, which Debian's build lacks), its job is the one the alerts expect, and its
        relabelling keeps the admin port of every citegate container of docker/k8s."""
        with open(SCRAPE_CONFIG) as f:
            conf = yaml.safe_load(f)
        self.assertEqual(conf["rule_files"], [RULES.name])
        jobs = conf["scrape_configs"]
        self.assertEqual([j["job_name"] for j in jobs], ["citegate"])
        self.assertTrue(any('up{job="citegate"}' in r["expr"] for r in self.rules if "alert" in r))
        keep = [rc for rc in jobs[0]["relabel_configs"] if rc.get("action") == "keep"]
        self.assertEqual(len(keep), 1)
        self.assertEqual(keep[0]["source_labels"],
                         ["__meta_kubernetes_pod_container_name", "__meta_kubernetes_pod_container_port_name"])
        rx = re.compile(keep[0]["regex"])
        seen = 0
        for path in sorted(K8S.glob("*.yaml")):
            with open(path) as f:
                for d in yaml.safe_load_all(f):
                    if not d or d.get("kind") != "Deployment":
                        continue
                    spec = d["spec"]["template"]["spec"]
                    for c in (spec.get("initContainers") or []) + spec["containers"]:
                        for p in c.get("ports", []):
                            kept = bool(rx.fullmatch(f"{c['name']};{p.get('name', '')}"))
                            is_admin = c["image"].startswith("citegate:") and p["containerPort"] == 9901
                            self.assertEqual(kept, is_admin, f"{path.name}: {c['name']} port {p}")
                            seen += kept
        self.assertEqual(seen, 4, "one admin port per citegate pod of docker/k8s")
        static = copy.deepcopy(conf)
        del static["scrape_configs"][0]["kubernetes_sd_configs"]
        static["scrape_configs"][0]["static_configs"] = [{"targets": ["127.0.0.1:9901"]}]
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(RULES, tmp)
            with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
                yaml.safe_dump(static, f)
            r = promtool("check", "config", "prometheus.yml", cwd=tmp)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class Dashboard(H.DaemonCase):
    @classmethod
    def setUpClass(cls):
        with open(DASHBOARD) as f:
            cls.dash = json.load(f)
        cls.exposed = exposed_names()
        cls.records = {r["record"]: r["expr"] for r in load_rules() if "record" in r}

    def test_importable(self):
        d = self.dash
        self.assertIsNone(d.get("id"), "an id belongs to one Grafana: import would clash")
        for k in ("uid", "title", "schemaVersion", "panels", "templating"):
            self.assertIn(k, d)
        ds = [v for v in d["templating"]["list"] if v["type"] == "datasource"]
        self.assertEqual(len(ds), 1)
        self.assertEqual(ds[0]["query"], "prometheus")
        ref = {"type": "prometheus", "uid": "${" + ds[0]["name"] + "}"}
        ids = [p["id"] for p in d["panels"]]
        self.assertEqual(len(ids), len(set(ids)), "panel ids repeat")
        cells = set()
        for p in d["panels"]:
            g = p["gridPos"]
            self.assertTrue(0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), cells, f"{p['title']} overlaps another panel")
                    cells.add((x, y))
            if p["type"] == "row":
                continue
            self.assertEqual(p["datasource"], ref, f"{p['title']}: a fixed data source")
            self.assertTrue(p["targets"], f"{p['title']}: no query")
            for t in p["targets"]:
                self.assertEqual(t["datasource"], ref, p["title"])
                self.assertTrue(t["expr"] and t["refId"], p["title"])
        for v in d["templating"]["list"]:
            if v["type"] == "query":
                self.assertEqual(v["datasource"], ref, v["name"])

    def test_what_it_draws(self):
        titles = " | ".join(p["title"] for p in self.dash["panels"])
        for word in ("Requests", "Errors", "TTFT", "Active streams", "queue", "Rejections",
                     "Citations emitted", "Citation rate", "Citation density", "Uncited",
                     "Citation rate by model", "Citation density by model", "Client stalls",
                     "Streams paused", "Tracking", "Tracking writes dropped", "Embedding"):
            self.assertIn(word, titles)
        # The per-model panels split by the model label.
        for p in self.dash["panels"]:
            if p["title"].endswith("by model"):
                for t in p["targets"]:
                    self.assertIn("{{model}}", t["legendFormat"], p["title"])

    def test_metric_names_are_exposed(self):
        """Every name in every panel and variable is on /metrics, or a recording rule of
        docker/prometheus whose own names are (then the rules must be loaded)."""
        for where, expr in dashboard_exprs(self.dash):
            names = metric_names(expr)
            self.assertTrue(names, f"{where}: no metric in {expr}")
            for n in names:
                if n in self.records:
                    for m in metric_names(self.records[n]):
                        self.assertIn(m, self.exposed, f"{where}: {n} reads {m}, not on /metrics")
                else:
                    self.assertIn(n, self.exposed, f"{where}: {n} is not on /metrics")

    def test_checker_catches_a_wrong_name(self):
        bad = copy.deepcopy(self.dash)
        panel = next(p for p in bad["panels"] if p.get("targets"))
        panel["targets"][0]["expr"] = "sum(rate(citegate_request_total[5m]))"
        names = [n for _, e in dashboard_exprs(bad) for n in metric_names(e)]
        self.assertIn("citegate_request_total", names)
        self.assertNotIn("citegate_request_total", self.exposed)


# --------------------------------------------------------------------------- a real server

def proc_tcp():
    """{inode: (local port, remote port, state)} of this network namespace's TCP sockets."""
    out = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    w = line.split()
                    out[int(w[9])] = (int(w[1].rsplit(":", 1)[1], 16), int(w[2].rsplit(":", 1)[1], 16), w[3])
        except OSError:
            pass
    return out


def socket_inodes(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(int(link[8:-1]))
    except OSError:
        pass
    return inodes


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rpartition(")")[2].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


class Prometheus:
    """Debian's prometheus on a free port, scraping `targets` every second as
    job="citegate", with the rules of docker/prometheus, evaluated every second."""

    def __init__(self, targets):
        self.dir = tempfile.mkdtemp(prefix="cg-prometheus-")
        shutil.copy(RULES, self.dir)
        conf = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
                "rule_files": [RULES.name],
                "scrape_configs": [{"job_name": "citegate", "static_configs": [{"targets": targets}]}]}
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            yaml.safe_dump(conf, f)
        self.proc = None

    def start(self, timeout=30):
        exe = shutil.which("prometheus")
        assert exe, "prometheus (Debian package) is installed by make deps"
        for _ in range(3):
            self.port = H.free_port()
            self.log = open(os.path.join(self.dir, "prometheus.log"), "wb")
            self.proc = subprocess.Popen(
                [exe, "--config.file=prometheus.yml", "--storage.tsdb.path=data",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                cwd=self.dir, stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=H._die_with_parent)
            if H.wait_for(lambda: self.ready() or self.proc.poll() is not None, timeout, 0.1) and self.ready():
                return self
            self.stop()
            if "address already in use" not in self.output():
                break
        raise RuntimeError("prometheus did not start: " + self.output()[-2000:])

    def ready(self):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def output(self):
        with open(os.path.join(self.dir, "prometheus.log"), errors="replace") as f:
            return f.read()

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}{path}?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr, at=None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self.api("/api/v1/query", **params)

    def value(self, expr):
        """The one sample of an instant vector expression, or None."""
        res = self.query(expr)["result"]
        assert len(res) <= 1, res
        return float(res[0]["value"][1]) if res else None

    def stop(self):
        if self.proc is not None:
            H._stop_process(self.proc, timeout=10)
            self.proc = None
            self.log.close()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class RealServer(H.DaemonCase):
    ANSWERS = 24
    REFUSALS = 7
    UPSTREAM_500 = 1
    MODELS = ("gpt-4o", "claude-x")  # the answers alternate between them

    @classmethod
    def setUpClass(cls):
        cls.mock = H.MockUpstream().start()
        # Two workers share the ports (SO_REUSEPORT). Idle connections close after 300 ms,
        # so each scrape, a second apart, comes on a new connection that the kernel gives
        # to either worker.
        cls.cg = H.Citegate(upstream=cls.mock.url,
                            env={"CITEGATE_WORKERS": "2", "CITEGATE_REQUEST_TIMEOUT_MS": "300"}).start()
        cls.prom = Prometheus([f"127.0.0.1:{cls.cg.admin_port}"]).start()
        try:
            # Prometheus finds its targets a few seconds after its start: the traffic
            # begins once it has scraped citegate, so it sees the counters before too.
            if not H.wait_for(lambda: cls.prom.value('up{job="citegate"}') == 1, 30, 0.2):
                raise RuntimeError("prometheus did not scrape citegate: " + cls.prom.output()[-2000:])
            cls.t_start = time.time()
            cls.citations = cls.drive()
        except BaseException:
            cls.tearDownClass()
            raise
        cls.t_done = time.time()

    @classmethod
    def tearDownClass(cls):
        cls.prom.cleanup()  # first: it scrapes citegate
        try:
            super().tearDownClass()
        finally:
            cls.mock.cleanup()

    def workers_serving_scrapes(self):
        """Worker pids that hold a connection from Prometheus to the admin port now."""
        tcp = proc_tcp()
        prom_ports = {tcp[i][0] for i in socket_inodes(self.prom.proc.pid)
                      if i in tcp and tcp[i][1] == self.cg.admin_port and tcp[i][2] == "01"}
        out = set()
        for w in children(self.cg.proc.pid):
            for i in socket_inodes(w):
                if i in tcp and tcp[i][0] == self.cg.admin_port and tcp[i][1] in prom_ports:
                    out.add(w)
        return out

    @classmethod
    def drive(cls):
        """The traffic, each request on a new connection: answers, refusals (invalid
        JSON), one upstream 500. Returns the citations the clients received."""
        citations = 0
        for i in range(cls.ANSWERS):
            st, _, body = cls.cg.request("POST", "/v1/chat/completions",
                                         H.chat_body(stream=True, model=cls.MODELS[i % 2]),
                                         {"X-Mock-Fixture": "azure_oyd_stream.sse"})
            assert st == 200, st
            view = H.client_view.view(body.decode())
            assert view["ends_with_done"], view
            citations += len(view["sources"])
        for i in range(cls.REFUSALS):
            st, _, _ = cls.cg.request("POST", "/v1/chat/completions", b"{not json",
                                      {"Content-Type": "application/json"})
            assert st == 400, st
        st, _, _ = cls.cg.request("POST", "/v1/chat/completions", H.chat_body(stream=True),
                                  {"X-Mock-Fixture": "azure_oyd_stream.sse", "X-Mock-Fault": "status:500"})
        assert st == 500, st
        return citations

    def test_sums_match_the_traffic_whichever_worker_answers(self):
        citations, t_done = self.citations, self.t_done
        self.assertEqual(citations, 3 * self.ANSWERS, "the fixture's answer carries 3 sources")
        _, available, cited, _ = TT.expected_track("azure_oyd_stream.sse")
        # Both workers served the traffic (their request log lines carry their index).
        served = {}
        for line in self.cg.log_lines():
            if isinstance(line, dict) and re.match(r"POST /v1/chat/completions -> \d+ ", line.get("msg", "")):
                served[line["worker"]] = served.get(line["worker"], 0) + 1
        self.assertEqual(sorted(served), [0, 1], f"requests per worker: {served}")
        self.assertEqual(sum(served.values()), self.ANSWERS + self.REFUSALS + self.UPSTREAM_500)

        expect = {
            'sum(citegate_requests_total{path="/v1/chat/completions",status="200"})': self.ANSWERS,
            'sum(citegate_requests_total{path="/v1/chat/completions",status="400"})': self.REFUSALS,
            'sum(citegate_requests_total{path="/v1/chat/completions",status="500"})': self.UPSTREAM_500,
            'sum(citegate_citations_emitted_total{profile="openwebui"})': citations,
            "sum(citegate_citation_rate_count)": self.ANSWERS,
            # Both workers label both models: the exposition merges their tables by name.
            'sum(citegate_answers_total{model="gpt-4o"})': self.ANSWERS // 2,
            'sum(citegate_answers_total{model="claude-x"})': self.ANSWERS // 2,
            'sum(citegate_answers_total{model="other"})': 0,
            'sum(citegate_answer_citations_total{model="gpt-4o"})': self.ANSWERS // 2 * cited,
            'sum(citegate_answer_sources_total{model="claude-x"})': self.ANSWERS // 2 * available,
            "sum(citegate_client_stalls_total)": 0,
            "sum(citegate_tracking_writes_dropped_total)": 0,
        }
        seen = set()
        deadline = time.monotonic() + 60
        ok = False
        while time.monotonic() < deadline:
            seen |= self.workers_serving_scrapes()
            if len(seen) == 2 and time.time() - t_done > 3:
                ok = all(self.prom.value(q) == v for q, v in expect.items())
                if ok:
                    break
            time.sleep(0.05)
        workers = set(children(self.cg.proc.pid))
        self.assertEqual(seen, workers, f"scrapes answered by {seen}; workers {workers}")
        got = {q: self.prom.value(q) for q in expect}
        self.assertTrue(ok, f"Prometheus has {got}, the test produced {expect}")
        # Scraped before the traffic too: the counters rose from nothing to the totals.
        window = int(time.time() - self.t_start) + 5
        res = self.prom.query(f"citegate_citation_rate_count[{window}s]")["result"]
        before = [float(x) for ts, x in res[0]["values"] if float(ts) < self.t_start]
        self.assertEqual(before[-1:], [0.0], "no scrape before the traffic")
        # Every scrape since the traffic ended, whichever worker answered it, saw the totals.
        window = int(time.time() - t_done) + 1
        for q, v in expect.items():
            inner = re.fullmatch(r"sum\((.*)\)", q).group(1)
            res = self.prom.query(f"{inner}[{window}s]")["result"]
            self.assertEqual(len(res), 1, f"{inner}: one series, one target")
            values = [float(x) for ts, x in res[0]["values"] if float(ts) > t_done + 1]
            self.assertGreaterEqual(len(values), 2, f"{inner}: scrapes since the traffic")
            self.assertEqual(set(values), {float(v)}, f"{inner}: scrapes since the traffic saw {values}")

    def test_rules_evaluate_on_real_metrics(self):
        """Every recording rule gives a series and every dashboard expression evaluates,
        on what a real citegate exposes; no rule reports an error."""
        records = [r["record"] for r in load_rules() if "record" in r]
        with open(DASHBOARD) as f:
            exprs = dashboard_exprs(json.load(f))

        def all_present():
            return all(self.prom.query(r)["result"] for r in records)
        self.assertTrue(H.wait_for(all_present, 30, 0.5),
                        [r for r in records if not self.prom.query(r)["result"]])
        for where, expr in exprs:
            res = self.prom.query(substitute(expr))
            self.assertTrue(res["result"], f"{where}: no series for {substitute(expr)}")
        groups = self.prom.api("/api/v1/rules")["groups"]
        self.assertEqual(sorted(g["name"] for g in groups), ["citegate.alerts", "citegate.recording"])
        for g in groups:
            for r in g["rules"]:
                self.assertEqual(r["health"], "ok", f"{r['name']}: {r.get('lastError')}")


if __name__ == "__main__":
    unittest.main()
