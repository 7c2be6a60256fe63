#!/usr/bin/env python3
"""bench/versus: citegate next to nginx on the same paced upstream (issue 13).

One versus_upstream (pinned to CPU 1) serves every run. For each round and
each target — `direct` (client → upstream), `nginx` (Debian nginx-light,
proxy_buffering off, upstream keepalive) and `citegate` (build/citegate,
default settings, one worker) — a fresh gateway is started pinned to CPU 0,
warmed up with a few streams, and versus_client (pinned to CPU 1) opens
--streams concurrent streams of --events events, --interval-ms apart. The
gateway's user+sys CPU (/proc/PID/stat, its whole process tree) is read
before and after the load, its RSS (VmRSS, process tree) idle before the
load and at its peak while the streams are open.

Per run it prints one row: streams ok, events lost, CPU per relayed event,
TTFT and delivery latency p50/p99 and what the gateway adds to the direct
path's p99 in the same round, RSS idle/peak and per open stream. Then the
medians over rounds and the ratios citegate/nginx with the issue's goals.

With --tls-upstream the upstream also listens with TLS (a throwaway
self-signed certificate for localhost made with openssl in the temporary
folder) and both gateways reach it over https:// with the certificate
verified (citegate: CITEGATE_UPSTREAM_CA; nginx: proxy_ssl_verify with
proxy_ssl_trusted_certificate, session reuse on). versus_client speaks
plaintext only, so the direct row keeps to the upstream's plaintext
listener: same process, same pacing and stamps, so "+ttft99"/"+dlv99" are
what the gateway and its TLS leg add together.

usage: bench/versus [--streams 1000] [--events 64] [--interval-ms 20]
                    [--rounds 3] [--only direct,nginx,citegate] [--h2]
                    [--h2-upstream] [--tls-upstream] [--ten-k] [--ramp-ms MS]
                    [--json FILE]
Exit status: 0 when every stream of every run got every event, 1 when one
did not, 2 when something could not start. Goals missed are reported, not
turned into a failure: this is a benchmark, never a timed test.
"""
import argparse
import ctypes
import json
import os
import pwd
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = ("direct", "nginx", "citegate")
GATEWAY_CPU, LOAD_CPU = 0, 1
CLK_TCK = os.sysconf("SC_CLK_TCK")
_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def fail(msg):
    print(f"versus: {msg}", file=sys.stderr)
    sys.exit(2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=15.0, log=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            tail = ""
            if log and os.path.exists(log):
                with open(log, errors="replace") as f:
                    tail = "".join(f.readlines()[-10:])
            fail(f"{what} exited with status {proc.returncode} before listening on {port}\n{tail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    fail(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


class Children:
    """Every process this script starts; all are stopped on any exit."""

    def __init__(self):
        self.procs = []

    def start(self, argv, cpu=None, **kw):
        def pre():
            # If this script dies (even by SIGKILL) the child is told to stop.
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})
        p = subprocess.Popen(argv, preexec_fn=pre, **kw)
        self.procs.append(p)
        return p

    def stop(self, p, timeout=10):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self):
        for p in list(reversed(self.procs)):
            self.stop(p, timeout=5)


def tree(pid):
    """pid and its descendants (nginx: the master and its worker)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def cpu_s(pids):
    """user+sys seconds of the processes: (utime+stime from /proc/PID/stat in
    clock ticks, the on-CPU nanoseconds of all their threads from
    /proc/PID/task/TID/schedstat), and the time those threads were ready
    but waited for a CPU (schedstat's second field). The second is the same
    time as the first at ns resolution; the rows use it."""
    ticks, ns, wait = 0, 0, 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/schedstat") as f:
                    run, delay = f.read().split()[:2]
                ns += int(run)
                wait += int(delay)
        except OSError:
            pass
    return ticks / CLK_TCK, ns / 1e9, wait / 1e9


def rss_kib(pids):
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def cpu_busy():
    """Busy jiffies of each CPU (user+nice+system+irq+softirq+steal)."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                v = [int(x) for x in line.split()[1:]]
                out[int(line[3:line.index(" ")])] = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return out


class Sampler(threading.Thread):
    """Peak RSS of a process tree, sampled every 10 ms."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, threading.Event()

    def run(self):
        pids = tree(self.pid)
        n = 0
        while not self.done.is_set():
            self.peak = max(self.peak, rss_kib(pids))
            n += 1
            if n % 50 == 0:
                pids = tree(self.pid)
            self.done.wait(0.01)


NGINX_CONF = """\
{user}worker_processes 1;
daemon off;
master_process on;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
worker_rlimit_nofile {nofile};
events {{ worker_connections {conns}; }}
http {{
    access_log {tmp}/access.log;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream versus {{
        server 127.0.0.1:{up};
        keepalive {keepalive};
    }}
    server {{
        listen 127.0.0.1:{port} backlog=1024{h2};
        location / {{
            proxy_pass {scheme}://versus;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;{tls}
        }}
    }}
}}
"""

# --tls-upstream: the certificate is for localhost (the upstream block's name
# is not), verified against the throwaway CA; sessions are resumed when a new
# upstream connection opens.
NGINX_TLS = """
            proxy_ssl_trusted_certificate {ca};
            proxy_ssl_verify on;
            proxy_ssl_name localhost;
            proxy_ssl_server_name on;
            proxy_ssl_session_reuse on;"""


def start_nginx(kids, args, tmp, up_port):
    port = free_port()
    user = ""
    if os.geteuid() == 0:  # else nginx would run its worker as nobody
        user = f"user {pwd.getpwuid(os.getuid()).pw_name};\n"
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(user=user, tmp=tmp, up=up_port, port=port,
                                  keepalive=max(1024, args.streams),
                                  conns=2 * args.streams + 256, nofile=2 * args.streams + 512,
                                  h2=" http2" if args.h2 else "",
                                  scheme="https" if args.tls_upstream else "http",
                                  tls=NGINX_TLS.format(ca=args.tls_ca) if args.tls_upstream else ""))
    p = kids.start([args.nginx, "-p", tmp, "-c", conf, "-e", os.path.join(tmp, "error.log")],
                   cpu=GATEWAY_CPU, stdout=subprocess.DEVNULL,
                   stderr=open(os.path.join(tmp, "stderr.log"), "w"))
    wait_port(port, p, "nginx", log=os.path.join(tmp, "error.log"))
    return p, port


def start_citegate(kids, args, tmp, up_port):
    port, aport = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEGATE_", "ENABLE_", "SEMANTIC_",
                                                                      "AZURE_AI_"))}
    env.update(CITEGATE_UPSTREAM=f"http://127.0.0.1:{up_port}", CITEGATE_LISTEN=f"127.0.0.1:{port}",
               CITEGATE_ADMIN_LISTEN=f"127.0.0.1:{aport}", CITEGATE_WORKERS="1")
    if args.tls_upstream:
        # localhost, so the name is verified as well as the chain (and sent
        # as SNI); it resolves to 127.0.0.1 first on the machines we run on.
        env.update(CITEGATE_UPSTREAM=f"https://localhost:{up_port}", CITEGATE_UPSTREAM_CA=args.tls_ca,
                   CITEGATE_UPSTREAM_PROTOCOL="http1.1")
    if args.h2_upstream:
        # h2c with prior knowledge (h2 by ALPN over TLS); the upstream allows
        # 1,024 streams per connection, so up to 1,024 streams share one.
        env["CITEGATE_UPSTREAM_PROTOCOL"] = "h2"
    elif args.streams > 1000:
        # Over HTTP/1.1 every open stream holds an upstream connection; the
        # default pool (1024 per worker) carries 1,000 streams, not more.
        env["CITEGATE_UPSTREAM_MAX_CONNECTIONS"] = str(args.streams + 64)
    log = os.path.join(tmp, "citegate.log")
    # The working folder is the round's own: the default SQLite file
    # (./data/semantic-memory.db) lands there.
    p = kids.start([args.citegate], cpu=GATEWAY_CPU, env=env, cwd=tmp,
                   stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    wait_port(port, p, "citegate", log=log)
    return p, port


def run_client(kids, args, port, streams, events, interval_ms, ramp_ms, h2):
    argv = [args.client, "--port", str(port), "--streams", str(streams), "--events", str(events),
            "--interval-ms", str(interval_ms), "--ramp-ms", str(ramp_ms),
            "--timeout-s", str(events * interval_ms / 1000 + 60)]
    if h2:
        argv.append("--h2")
    p = kids.start(argv, cpu=LOAD_CPU, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    kids.procs.remove(p)
    try:
        return json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        fail(f"versus_client gave no summary (status {p.returncode}): {err.strip()}")


SYSCALLS = ("read", "recvfrom", "readv", "write", "writev", "sendmsg", "epoll_wait", "epoll_pwait",
            "epoll_ctl", "accept4", "connect", "close")


def start_profiler(kids, args, target, rnd, pids):
    """perf record (call graphs from DWARF: the build keeps no frame
    pointers) or strace -c on the gateway's processes during the load; the
    output goes to --profile-dir. It distorts the figures of that run."""
    os.makedirs(args.profile_dir, exist_ok=True)
    out = os.path.join(args.profile_dir, f"{target}-{rnd}.{args.profile}")
    if args.profile == "perf":
        argv = ["perf", "record", "-q", "--call-graph", "dwarf", "-o", out,
                "-p", ",".join(map(str, pids))]
    elif args.profile == "syscalls":
        # Counts from tracepoints: cheap enough to leave the run's pace as it is.
        evs = ",".join(f"syscalls:sys_enter_{c}" for c in SYSCALLS)
        argv = ["perf", "stat", "-e", evs, "-o", out, "-p", ",".join(map(str, pids))]
    else:
        argv = ["strace", "-c", "-f", "-o", out] + [a for p in pids for a in ("-p", str(p))]
    prof = kids.start(argv, cpu=LOAD_CPU, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached before the load starts
    if prof.poll() is not None:
        fail(f"{argv[0]} could not attach (status {prof.returncode})")
    return prof


def one_run(kids, args, target, rnd, up_port, tls_port):
    tmp = tempfile.mkdtemp(prefix=f"versus-{target}-{rnd}-", dir=args.tmp)
    gw, port = None, up_port
    gw_up = tls_port if args.tls_upstream else up_port
    if target == "nginx":
        gw, port = start_nginx(kids, args, tmp, gw_up)
    elif target == "citegate":
        gw, port = start_citegate(kids, args, tmp, gw_up)
    h2 = args.h2
    # Warm-up: code paths, pools and the first allocations, not measured.
    run_client(kids, args, port, min(50, args.streams), 4, 5, 50, h2)
    time.sleep(0.3)
    pids = tree(gw.pid) if gw else []
    rss_idle = rss_kib(pids) if gw else 0
    cpu0 = cpu_s(pids) if gw else (0.0, 0.0, 0.0)
    busy0, t0 = cpu_busy(), time.monotonic()
    sampler = Sampler(gw.pid) if gw else None
    if sampler:
        sampler.start()
    prof = start_profiler(kids, args, target, rnd, pids) if gw and args.profile else None
    res = run_client(kids, args, port, args.streams, args.events, args.interval_ms, args.ramp_ms, h2)
    if prof:
        prof.send_signal(signal.SIGINT)
        prof.wait()
        kids.procs.remove(prof)
    elapsed = time.monotonic() - t0
    busy1 = cpu_busy()
    cpu1 = cpu_s(tree(gw.pid)) if gw else (0.0, 0.0, 0.0)
    if sampler:
        sampler.done.set()
        sampler.join()
    up_proto = "http1.1"
    if (target == "citegate" and args.h2_upstream) or (target == "direct" and h2):
        up_proto = "h2c"
    if args.tls_upstream and target != "direct":
        up_proto = {"h2c": "h2", "http1.1": "http1.1"}[up_proto] + "+tls"
    row = dict(target=target, round=rnd, client=res, proto=res["proto"], upstream_proto=up_proto)
    gw_cpu = cpu1[1] - cpu0[1]
    row["cpu_ticks_s"] = cpu1[0] - cpu0[0] if gw else None
    # Ready to run but waiting for CPU 0: what the rest of the machine cost it.
    row["wait_s"] = cpu1[2] - cpu0[2] if gw else None
    row["cpu_s"] = gw_cpu if gw else None
    row["cpu_us_per_event"] = gw_cpu / res["events"] * 1e6 if gw and res["events"] else None
    row["rss_idle_kib"] = rss_idle if gw else None
    row["rss_peak_kib"] = sampler.peak if gw else None
    row["kib_per_stream"] = (sampler.peak - rss_idle) / args.streams if gw else None
    # The gateway's CPU 0 is shared with whatever else runs on the machine.
    d0 = (busy1.get(GATEWAY_CPU, 0) - busy0.get(GATEWAY_CPU, 0)) / CLK_TCK
    d1 = (busy1.get(LOAD_CPU, 0) - busy0.get(LOAD_CPU, 0)) / CLK_TCK
    row["cpu0_other_pct"] = max(0.0, (d0 - (gw_cpu if gw else 0.0)) / elapsed * 100)
    row["cpu1_busy_pct"] = d1 / elapsed * 100
    if gw:
        kids.stop(gw, timeout=40)
        if target == "nginx":
            with open(os.path.join(tmp, "error.log"), errors="replace") as f:
                errs = [l for l in f if "[alert]" in l or "[crit]" in l or "[error]" in l]
            row["gateway_errors"] = len(errs)
    if not args.keep_tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return row


def ms(us):
    """Milliseconds with three significant decimals at most, so columns hold."""
    if us is None:
        return "-"
    v = us / 1000
    for limit, fmt in ((10, ".3f"), (100, ".2f"), (1000, ".1f")):
        if abs(v) < limit:
            return format(v, fmt)
    return format(v, ".0f")


def num(v, fmt):
    return "-" if v is None else format(v, fmt)


HEAD = (f"{'target':<9}{'rnd':>4}{'ok/streams':>12}{'lost':>6}{'cpu_s':>7}{'us/event':>9}"
        f"{'ttft50':>8}{'ttft99':>8}{'+ttft99':>8}{'dlv50':>8}{'dlv99':>8}{'+dlv99':>8}"
        f"{'rss_idle':>9}{'rss_peak':>9}{'KiB/str':>8}{'wait_s':>7}{'cpu0_oth%':>10}")
# Every column is at least one space wider than what it holds.


def fmt_row(r, rnd_label=None):
    c = r["client"]
    return (f"{r['target']:<9}{rnd_label or r['round']:>4}{str(c['ok']) + '/' + str(c['streams']):>12}"
            f"{c['lost']:>6}{num(r['cpu_s'], '.2f'):>7}{num(r['cpu_us_per_event'], '.2f'):>9}"
            f"{ms(c['ttft_p50_us']):>8}{ms(c['ttft_p99_us']):>8}{ms(r.get('added_ttft_p99_us')):>8}"
            f"{ms(c['deliv_p50_us']):>8}{ms(c['deliv_p99_us']):>8}{ms(r.get('added_deliv_p99_us')):>8}"
            f"{num(r['rss_idle_kib'], 'd'):>9}{num(r['rss_peak_kib'], 'd'):>9}"
            f"{num(r['kib_per_stream'], '.1f'):>8}{num(r.get('wait_s'), '.2f'):>7}"
            f"{r['cpu0_other_pct']:>10.0f}")


def median_of(rows, key, sub=None):
    vals = [(r["client"][key] if sub else r[key]) for r in rows]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def raise_nofile(streams, h2):
    """A gateway holds a client and an upstream socket per HTTP/1.1 stream
    (with h2c clients, 100 streams share a client connection; nginx still
    opens an upstream connection per stream); children inherit the limit.
    Raising the hard limit needs CAP_SYS_RESOURCE."""
    need = (streams + streams // 100 if h2 else 2 * streams) + 512
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < need and os.geteuid() == 0:
        with open("/proc/sys/fs/nr_open") as f:
            hard = min(need, int(f.read()))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        print(f"versus: warning: RLIMIT_NOFILE is {soft} and cannot be raised; a gateway needs about "
              f"{need} descriptors for {streams} streams, so streams past the limit fail"
              + ("" if h2 else " (--h2 puts 100 client streams on a connection)"), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--events", type=int, default=64)
    ap.add_argument("--interval-ms", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ramp-ms", type=float, help="spread the stream starts over this "
                    "(default: 0.5 ms per stream)")
    ap.add_argument("--only", default=",".join(TARGETS), help="targets, comma-separated")
    ap.add_argument("--h2", action="store_true", help="the client speaks h2c (prior knowledge, 100 "
                    "streams per connection) to every target, the direct path included")
    ap.add_argument("--h2-upstream", action="store_true", help="citegate speaks h2c to the upstream "
                    "(streams share connections); nginx-light cannot, it stays on HTTP/1.1")
    ap.add_argument("--tls-upstream", action="store_true", help="the gateways reach the upstream "
                    "over TLS (self-signed certificate, verified); the direct row stays plaintext")
    ap.add_argument("--ten-k", action="store_true", help="10,000 streams at a 200 ms pace")
    ap.add_argument("--json", help="write every row to this file")
    ap.add_argument("--from-json", metavar="FILE", help="print the table of a run saved with --json "
                    "again (no run)")
    ap.add_argument("--profile", choices=("perf", "strace", "syscalls"), help="record each gateway "
                    "run with perf record or strace -c (both slow the gateway: not for figures), or "
                    "count its system calls with perf stat")
    ap.add_argument("--profile-dir", default="versus-profile", help="where --profile writes")
    ap.add_argument("--keep-tmp", action="store_true", help="keep each run's folder (logs, configs)")
    ap.add_argument("--tmp", help="parent of the temporary folders")
    ap.add_argument("--citegate", default=os.path.join(ROOT, "build", "citegate"))
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bench"),
                    help="folder of versus_upstream and versus_client")
    args = ap.parse_args()
    if args.from_json:
        return reprint(args.from_json)
    if args.ten_k:
        args.streams, args.interval_ms = 10000, 200
    if args.ramp_ms is None:
        args.ramp_ms = args.streams * 0.5
    targets = [t.strip() for t in args.only.split(",") if t.strip()]
    for t in targets:
        if t not in TARGETS:
            fail(f"unknown target {t!r} (known: {', '.join(TARGETS)})")
    args.upstream = os.path.join(args.bin, "versus_upstream")
    args.client = os.path.join(args.bin, "versus_client")
    for path, what in ((args.upstream, "versus_upstream"), (args.client, "versus_client")):
        if not os.access(path, os.X_OK):
            fail(f"{path} is missing: build first (make build)")
    if "citegate" in targets and not os.access(args.citegate, os.X_OK):
        fail(f"{args.citegate} is missing: build first (make build)")
    if "nginx" in targets and not (args.nginx and os.access(args.nginx, os.X_OK)):
        fail("nginx is missing: install Debian's nginx-light (apt-get install nginx-light, or "
             "`make bench-versus`), or leave it out with --only direct,citegate")
    tool = "strace" if args.profile == "strace" else "perf"
    if args.profile and not shutil.which(tool):
        fail(f"{tool} is missing (Debian: linux-perf, strace)")
    if not {GATEWAY_CPU, LOAD_CPU} <= os.sched_getaffinity(0):
        fail(f"CPUs {GATEWAY_CPU} and {LOAD_CPU} are needed (gateway and load are pinned apart)")
    if args.tls_upstream and not shutil.which("openssl"):
        fail("openssl is missing (Debian: openssl): --tls-upstream makes its certificate with it")
    raise_nofile(args.streams, args.h2)

    kids = Children()

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    # Also when started in the background, where SIGINT comes in ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tmp_parent = tempfile.mkdtemp(prefix="versus-")
    args.tmp = args.tmp or tmp_parent
    rows, lost_any = [], False
    try:
        ready = os.path.join(tmp_parent, "upstream.port")
        up_argv = [args.upstream, "--ready-file", ready, "--events", str(args.events),
                   "--interval-ms", str(args.interval_ms)]
        if args.tls_upstream:
            args.tls_ca = os.path.join(tmp_parent, "upstream-cert.pem")
            key = os.path.join(tmp_parent, "upstream-key.pem")
            gen = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                  "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=localhost",
                                  "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                                  "-days", "1", "-keyout", key, "-out", args.tls_ca],
                                 capture_output=True, text=True)
            if gen.returncode != 0:
                fail(f"openssl could not make the upstream's certificate: {gen.stderr.strip()}")
            up_argv += ["--tls-cert", args.tls_ca, "--tls-key", key]
        up = kids.start(up_argv, cpu=LOAD_CPU,
                        stderr=open(os.path.join(tmp_parent, "upstream.log"), "w"))
        end = time.monotonic() + 10
        while not os.path.exists(ready):
            if up.poll() is not None or time.monotonic() > end:
                fail("versus_upstream did not start")
            time.sleep(0.02)
        with open(ready) as f:
            ports = [int(x) for x in f.read().split()]
        up_port, tls_port = ports[0], ports[1] if len(ports) > 1 else None

        args.nginx_version = ""
        if "nginx" in targets:
            v = subprocess.run([args.nginx, "-v"], capture_output=True, text=True).stderr.strip()
            args.nginx_version = v.replace("nginx version: ", "")
        print_header(args, targets)
        for rnd in range(1, args.rounds + 1):
            # direct first; the two gateways alternate which goes first.
            order = [t for t in TARGETS if t in targets]
            gws = [t for t in order if t != "direct"]
            if rnd % 2 == 0:
                gws.reverse()
            order = [t for t in order if t == "direct"] + gws
            rrows = []
            for t in order:
                r = one_run(kids, args, t, rnd, up_port, tls_port)
                rrows.append(r)
                if r["client"]["lost"] or r["client"]["failed"]:
                    lost_any = True
            direct = next((r for r in rrows if r["target"] == "direct"), None)
            for r in rrows:
                if direct and r is not direct:
                    r["added_ttft_p99_us"] = r["client"]["ttft_p99_us"] - direct["client"]["ttft_p99_us"]
                    r["added_deliv_p99_us"] = r["client"]["deliv_p99_us"] - direct["client"]["deliv_p99_us"]
                print(fmt_row(r), flush=True)
            rows += rrows
        kids.stop(up)
    except KeyboardInterrupt:
        print("versus: interrupted", file=sys.stderr)
        kids.stop_all()
        sys.exit(130)
    finally:
        kids.stop_all()
        if not args.keep_tmp:
            shutil.rmtree(tmp_parent, ignore_errors=True)

    report(args, targets, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args={k: v for k, v in vars(args).items()}, targets=targets, rows=rows),
                      f, indent=1, default=str)
    return 1 if lost_any else 0


def print_header(args, targets):
    print(f"versus: streams={args.streams} events={args.events} interval_ms={args.interval_ms:g} "
          f"rounds={args.rounds} ramp_ms={args.ramp_ms:g} client={'h2c' if args.h2 else 'http1.1'} "
          f"upstream={upstream_label(args)} "
          f"gateway_cpu={GATEWAY_CPU} load_cpu={LOAD_CPU}"
          + (f" ({args.nginx_version})" if getattr(args, "nginx_version", "") else ""))
    if (args.h2 or getattr(args, "h2_upstream", False)) and "nginx" in targets:
        print("note: nginx-light proxies to upstreams over HTTP/1.x only (its one h2 upstream is "
              "grpc_pass); nginx's upstream connections stay HTTP/1.1, one per stream")
    print("times in ms; +ttft99/+dlv99: p99 minus the direct path's p99 of the same round; "
          "wait_s: the gateway ready but waiting for its CPU; cpu0_oth%: CPU 0 used by other processes")
    print(HEAD, flush=True)


def upstream_label(args):
    tls = getattr(args, "tls_upstream", False)
    if getattr(args, "h2_upstream", False):
        up = "h2+tls (citegate), http1.1+tls (nginx)" if tls else "h2c (citegate)"
    else:
        up = "http1.1+tls" if tls else "http1.1"
    return up + (" (direct: plaintext)" if tls else "")


def report(args, targets, rows):
    """Medians over rounds, the ratios citegate/nginx, the goals, the summary line."""
    med = {}
    for t in targets:
        tr = [r for r in rows if r["target"] == t]
        m = dict(target=t, round="med", client={})
        for k in ("ok", "streams", "lost", "ttft_p50_us", "ttft_p99_us", "deliv_p50_us", "deliv_p99_us"):
            m["client"][k] = median_of(tr, k, sub=True)
        m["client"]["ok"] = min(r["client"]["ok"] for r in tr)
        m["client"]["streams"] = args.streams
        m["client"]["lost"] = sum(r["client"]["lost"] for r in tr)
        for k in ("cpu_s", "cpu_us_per_event", "rss_idle_kib", "rss_peak_kib", "kib_per_stream",
                  "added_ttft_p99_us", "added_deliv_p99_us", "cpu0_other_pct", "wait_s"):
            m[k] = median_of(tr, k) if any(k in r for r in tr) else None
        for k in ("rss_idle_kib", "rss_peak_kib"):
            if m[k] is not None:
                m[k] = int(m[k])
        med[t] = m
    print("median over rounds (ok: the worst round; lost: all rounds):")
    for t in targets:
        print(fmt_row(med[t], "med"))

    summary = [f"streams={args.streams}", f"events={args.events}",
               f"interval_ms={args.interval_ms:g}", f"rounds={args.rounds}",
               "lost=" + "/".join(str(med[t]["client"]["lost"]) for t in targets)]
    if "nginx" in targets and "citegate" in targets:
        n, c = med["nginx"], med["citegate"]

        def ratio(key):
            a, b = c.get(key), n.get(key)
            if a is None or b is None or b <= 0:
                return None
            return a / b
        rc, rt, rd, rr = (ratio("cpu_us_per_event"), ratio("added_ttft_p99_us"),
                          ratio("added_deliv_p99_us"), ratio("kib_per_stream"))
        print("citegate/nginx: " + " ".join(f"{k}={num(v, '.2f')}" for k, v in (
            ("cpu_per_event", rc), ("added_ttft_p99", rt), ("added_delivery_p99", rd),
            ("rss_per_stream", rr))))

        def goal(name, ok):
            return f"{name}: {'-' if ok is None else ('PASS' if ok else 'MISS')}"
        ok_streams = all(med[t]["client"]["ok"] == args.streams and med[t]["client"]["lost"] == 0
                         for t in ("citegate",))
        added_t, added_d = c.get("added_ttft_p99_us"), c.get("added_deliv_p99_us")
        nt, nd = n.get("added_ttft_p99_us"), n.get("added_deliv_p99_us")
        print("goals (issue 13): " + "; ".join([
            goal("cpu/event <= 0.5x nginx", None if rc is None else rc <= 0.5),
            goal("added ttft p99 <= 0.5x nginx",
                 None if added_t is None or nt is None else added_t <= 0.5 * max(nt, 0)),
            goal("added delivery p99 <= nginx",
                 None if added_d is None or nd is None else added_d <= max(nd, 0)),
            goal(f"0 lost, {args.streams} of {args.streams} streams", ok_streams),
            goal("RSS <= 8 KiB/stream (HTTP/1.1 both sides)",
                 None if args.h2 or getattr(args, "h2_upstream", False) or c["kib_per_stream"] is None
                 else c["kib_per_stream"] <= 8),
            goal("RSS <= 4 KiB/stream (h2 both sides, shared upstream connection)",
                 None if not (args.h2 and getattr(args, "h2_upstream", False)) or c["kib_per_stream"] is None
                 else c["kib_per_stream"] <= 4),
        ]))
        summary += [f"cpu_us_per_event={num(n['cpu_us_per_event'], '.2f')}/{num(c['cpu_us_per_event'], '.2f')}",
                    f"cpu_ms_per_stream={num(per_stream(n), '.2f')}/{num(per_stream(c), '.2f')}",
                    f"added_ttft_p99_ms={ms(nt)}/{ms(added_t)}",
                    f"added_delivery_p99_ms={ms(nd)}/{ms(added_d)}",
                    f"kib_per_stream={num(n['kib_per_stream'], '.1f')}/{num(c['kib_per_stream'], '.1f')}",
                    f"ratio_cpu={num(rc, '.2f')}", f"ratio_ttft={num(rt, '.2f')}",
                    f"ratio_delivery={num(rd, '.2f')}"]
    print("versus: " + " ".join(summary))


def per_stream(m):
    return None if m["cpu_s"] is None else m["cpu_s"] * 1000 / m["client"]["streams"]


def reprint(path):
    with open(path) as f:
        saved = json.load(f)
    args = argparse.Namespace(**saved["args"])
    targets = saved.get("targets") or [t for t in TARGETS if t in args.only.split(",")]
    print_header(args, targets)
    for r in saved["rows"]:
        print(fmt_row(r))
    report(args, targets, saved["rows"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
