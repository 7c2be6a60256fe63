#!/usr/bin/env python3
"""bench/versus: citegate beside nginx, HAProxy, h2o and nghttpx on one paced upstream.

One versus_upstream (pinned to CPU 1) serves every run. For each round and
each target — `direct` (client → upstream), the peers `nginx` (Debian
nginx-light), `haproxy`, `h2o` and `nghttpx` (Debian nghttp2-proxy), each
from its configuration template in bench/peers/ (one worker or thread,
no response buffering, keep-alive or multiplexed upstream connections,
limits of at least 20,000, logging off), and `citegate` (build/citegate,
default settings, one worker) — a fresh gateway is started pinned to CPU
0, warmed up with a few streams, and versus_client (pinned to CPU 1) opens
--streams concurrent streams of --events events, --interval-ms apart,
their starts spread over --ramp-ms (or all at once with --burst). The
gateway's user+sys CPU (its whole process tree) is read before and after
the load, its RSS (VmRSS, process tree) idle before the load and at its
peak while the streams are open.

Per run it prints one row: streams ok, events lost, CPU per relayed event,
TTFT and delivery latency p50/p99 and what the gateway adds to the direct
path's p99 in the same round, RSS idle/peak and per open stream. Then the
medians over rounds, citegate's ratio to each peer, the best peer on each
figure, the goals, and one `versus:` line for scripts. --syscalls adds
one more run per gateway, counted by `perf stat` on the syscalls
tracepoints: system calls per relayed event.

With --h2-upstream every gateway that can speaks h2c to the upstream
(citegate, HAProxy `proto h2`, nghttpx `proto=h2`); nginx-light and h2o
2.2 cannot and stay on HTTP/1.1. With --tls-upstream the upstream also
listens with TLS (a throwaway self-signed certificate for localhost made
with openssl in the temporary folder) and the gateways reach it over TLS
with the certificate verified. versus_client speaks plaintext only, so
the direct row keeps to the upstream's plaintext listener: same process,
same pacing and stamps, so "+ttft99"/"+dlv99" are what the gateway and
its TLS leg add together.

usage: bench/versus [--streams 1000] [--events 64] [--interval-ms 20]
                    [--rounds 3] [--only direct,nginx,...,citegate] [--burst]
                    [--h2] [--h2-upstream] [--tls-upstream] [--ten-k]
                    [--ten-k-h2-upstream] [--workers N] [--syscalls]
                    [--ramp-ms MS] [--json FILE]
Exit status: 0 when every stream of every run got every event, 1 when one
did not, 2 when something could not start. Goals missed are reported, not
turned into a failure: this is a benchmark, never a timed test.
"""
import argparse
import ctypes
import json
import os
import pwd
import re
import resource
import select
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
# The peers, in the order they run in the first round, with what each needs.
# h2_up: speaks h2 to the upstream under --h2-upstream.
PEERS = {
    "nginx": dict(package="nginx-light", conf="nginx.conf", h2_up=False),
    "haproxy": dict(package="haproxy", conf="haproxy.cfg", h2_up=True),
    "h2o": dict(package="h2o", conf="h2o.conf", h2_up=False),
    "nghttpx": dict(package="nghttp2-proxy", conf="nghttpx.conf", h2_up=True),
}
TARGETS = ("direct",) + tuple(PEERS) + ("citegate",)
PEER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers")
# Every peer's connection limits are at least this.
MIN_LIMIT = 20000
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
                os.sched_setaffinity(0, cpu if isinstance(cpu, set) else {cpu})
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


def fill(conf, tmp, fields):
    """bench/peers/CONF with every @NAME@ replaced, written into tmp."""
    with open(os.path.join(PEER_DIR, conf)) as f:
        text = f.read()
    for k, v in fields.items():
        text = text.replace(f"@{k}@", str(v))
    left = sorted(set(re.findall(r"@[A-Z0-9_]+@", text)))
    if left:
        fail(f"bench/peers/{conf}: no value for {', '.join(left)}")
    path = os.path.join(tmp, conf)
    with open(path, "w") as f:
        f.write(text)
    return path


def nofile_limit():
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def peer_fields(args, name, tmp, port, up_port):
    """The values bench/peers/NAME's template asks for."""
    h2_up = args.h2_upstream and PEERS[name]["h2_up"]
    tls = args.tls_upstream
    nofile = nofile_limit()
    # A connection limit of at least 20,000 (client and upstream sides
    # counted where the peer counts both), more for more streams.
    both = max(MIN_LIMIT, 2 * args.streams + 256)
    clients = max(MIN_LIMIT, args.streams + 256)
    f = dict(TMP=tmp, PORT=port, UPSTREAM_PORT=up_port, NOFILE=nofile)
    if name == "nginx":
        f.update(MAXCONN=both, KEEPALIVE=max(1024, args.streams),
                 USER=f"user {pwd.getpwuid(os.getuid()).pw_name};" if os.geteuid() == 0 else "",
                 H2=" http2" if args.h2 else "", SCHEME="https" if tls else "http",
                 TLS=NGINX_TLS.format(ca=args.tls_ca) if tls else "")
    elif name == "haproxy":
        maxconn = haproxy_maxconn(args)
        srv = ("proto h2" if h2_up else "")
        if tls:
            srv += (f" ssl verify required ca-file {args.tls_ca} verifyhost localhost"
                    " sni str(localhost)" + (" alpn h2" if h2_up else " alpn http/1.1"))
        f.update(MAXCONN=maxconn, SERVER=srv.strip())
    elif name == "h2o":
        f.update(MAXCONN=clients,
                 URL=f"{'https://localhost' if tls else 'http://127.0.0.1'}:{up_port}/",
                 PROXY_TLS=f"proxy.ssl.cafile: {args.tls_ca}" if tls else "# plaintext upstream")
    elif name == "nghttpx":
        f.update(PROTO="h2" if h2_up else "http/1.1",
                 BACKEND_TLS=";tls;sni=localhost" if tls else "",
                 CACERT=f"cacert={args.tls_ca}" if tls else "# plaintext upstream")
    return f


def haproxy_maxconn(args):
    """HAProxy refuses to start when ulimit-n cannot hold two descriptors
    per connection (maxsock = 2 x maxconn + a few): its maxconn is what the
    limit holds when that is below the 20,000 asked for (a note says so)."""
    nofile, want = nofile_limit(), max(MIN_LIMIT, args.streams + 256)
    maxconn = min(want, (nofile - 100) // 2)
    if maxconn < want:
        args.notes.add(f"haproxy: maxconn {maxconn}, not {want}: RLIMIT_NOFILE is {nofile} and HAProxy "
                       "wants two descriptors per connection; connections past it wait in the backlog")
    return maxconn


def peer_argv(args, name, conf, tmp):
    if name == "nginx":
        return [args.peer_bin["nginx"], "-p", tmp, "-c", conf, "-e", os.path.join(tmp, "error.log")]
    if name == "haproxy":  # -db: in the foreground, no master process
        return [args.peer_bin["haproxy"], "-db", "-f", conf]
    if name == "h2o":
        return [args.peer_bin["h2o"], "-c", conf]
    return [args.peer_bin["nghttpx"], "--conf", conf]


def start_peer(kids, args, name, tmp, up_port):
    port = free_port()
    conf = fill(PEERS[name]["conf"], tmp, peer_fields(args, name, tmp, port, up_port))
    log = os.path.join(tmp, "stderr.log")
    p = kids.start(peer_argv(args, name, conf, tmp), cpu=GATEWAY_CPU, cwd=tmp,
                   stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    err = os.path.join(tmp, "error.log")
    wait_port(port, p, name, log=err if name != "haproxy" and os.path.exists(err) else log)
    return p, port


# --tls-upstream: the certificate is for localhost (the upstream block's name
# is not), verified against the throwaway CA; sessions are resumed when a new
# upstream connection opens.
NGINX_TLS = """
            proxy_ssl_trusted_certificate {ca};
            proxy_ssl_verify on;
            proxy_ssl_name localhost;
            proxy_ssl_server_name on;
            proxy_ssl_session_reuse on;"""


def workers_of(target):
    """citegate-w2 -> 2; citegate -> 1."""
    return int(target.split("-w")[1]) if target.startswith("citegate-w") else 1


def is_citegate(target):
    return target == "citegate" or target.startswith("citegate-w")


def start_citegate(kids, args, target, tmp, up_port):
    port, aport = free_port(), free_port()
    workers = workers_of(target)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEGATE_", "ENABLE_", "SEMANTIC_",
                                                                      "AZURE_AI_"))}
    env.update(CITEGATE_UPSTREAM=f"http://127.0.0.1:{up_port}", CITEGATE_LISTEN=f"127.0.0.1:{port}",
               CITEGATE_ADMIN_LISTEN=f"127.0.0.1:{aport}", CITEGATE_WORKERS=str(workers),
               # Every peer runs with its access log off; citegate's access and
               # tracking lines (two per answer, info) go the same way.
               CITEGATE_LOG_LEVEL=args.citegate_log_level)
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
    # (./data/semantic-memory.db) lands there. Workers beyond the first run
    # on --workers-cpus (default: the gateway's CPU, like every gateway).
    cpu = args.workers_cpus if workers > 1 else GATEWAY_CPU
    p = kids.start([args.citegate], cpu=cpu, env=env, cwd=tmp,
                   stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    wait_port(port, p, target, log=log)
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


def start_profiler(kids, args, target, rnd, pids, kind=None):
    """perf record (call graphs from DWARF: the build keeps no frame
    pointers, or every system call), or strace -c on the gateway's processes during the load, or
    perf stat of the syscalls tracepoints; the output goes to --profile-dir.
    Kind "count" (--syscalls) counts every sys_enter tracepoint into the
    run's folder, enabled and disabled through perf's control FIFO so that
    exactly the load is counted (perf takes seconds to attach and detach
    350 tracepoints)."""
    kind = kind or args.profile
    if kind == "count":
        out = os.path.join(args.tmp, f"syscalls-{target}.csv")
    else:
        os.makedirs(args.profile_dir, exist_ok=True)
        out = os.path.join(args.profile_dir, f"{target}-{rnd}.{kind}")
    plist = ",".join(map(str, pids))
    ctl = None
    if kind == "perf":
        argv = ["perf", "record", "-q", "--call-graph", "dwarf", "-o", out, "-p", plist]
    elif kind == "trace":
        # Every system call entered, with its time and arguments, and the
        # descriptors accept4 and socket return: the order of a burst's
        # accepts, reads, connects and writes (`perf script -i FILE`).
        # Recorded in the kernel's buffers, read after the run: lighter
        # than perf trace or strace, whose work competes with the load.
        argv = ["perf", "record", "-q", "-o", out, "-p", plist, "-e",
                "syscalls:sys_enter_*,syscalls:sys_exit_accept4,syscalls:sys_exit_socket,"
                "syscalls:sys_exit_epoll_wait"]
    elif kind == "syscalls":
        # Counts from tracepoints: cheap enough to leave the run's pace as it is.
        evs = ",".join(f"syscalls:sys_enter_{c}" for c in SYSCALLS)
        argv = ["perf", "stat", "-e", evs, "-o", out, "-p", plist]
    elif kind == "count":
        # Every system call the gateway's threads enter, counted in the
        # kernel (no record per call), so the run keeps its pace.
        ctl = PerfControl(args.tmp, target)
        argv = ["perf", "stat", "-x", ",", "-D", "-1", "--control", ctl.arg,
                "-e", "syscalls:sys_enter_*", "-o", out, "-p", plist]
    else:
        argv = ["strace", "-c", "-f", "-o", out] + [a for p in pids for a in ("-p", str(p))]
    prof = kids.start(argv, cpu=LOAD_CPU, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prof.out, prof.ctl = out, ctl
    if ctl:
        if not ctl.send("enable", prof):
            fail(f"perf stat did not start counting (status {prof.poll()})")
        return prof
    time.sleep(0.5)  # attached before the load starts
    if prof.poll() is not None:
        fail(f"{argv[0]} could not attach (status {prof.returncode})")
    return prof


def stop_profiler(kids, prof):
    if prof.ctl:
        prof.ctl.send("disable", prof)  # the load is over: stop counting now
    prof.send_signal(signal.SIGINT)
    prof.wait()
    kids.procs.remove(prof)


class PerfControl:
    """perf stat's --control FIFOs: commands in, "ack" back once done."""

    def __init__(self, tmp, target):
        base = os.path.join(tmp, f"perf-{target}")
        self.ctl_path, self.ack_path = base + ".ctl", base + ".ack"
        for path in (self.ctl_path, self.ack_path):
            if os.path.exists(path):
                os.unlink(path)
            os.mkfifo(path)
        # Read-write opens never block, whether perf has opened its end yet or not.
        self.ctl = os.open(self.ctl_path, os.O_RDWR)
        self.ack = os.open(self.ack_path, os.O_RDWR)
        self.arg = f"fifo:{self.ctl_path},{self.ack_path}"

    def send(self, cmd, prof, timeout=60.0):
        os.write(self.ctl, (cmd + "\n").encode())
        end = time.monotonic() + timeout
        while time.monotonic() < end and prof.poll() is None:
            r, _, _ = select.select([self.ack], [], [], 0.1)
            if r and b"ack" in os.read(self.ack, 64):
                return True
        return False


def read_syscall_counts(path):
    """{name: count} from `perf stat -x ,` output (zero counts left out)."""
    counts = {}
    with open(path) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) < 3 or not parts[2].startswith("syscalls:sys_enter_"):
                continue
            try:
                n = int(parts[0])
            except ValueError:  # <not counted>
                continue
            if n:
                counts[parts[2][len("syscalls:sys_enter_"):]] = n
    return counts


def start_gateway(kids, args, target, tmp, up_port):
    if target in PEERS:
        return start_peer(kids, args, target, tmp, up_port)
    return start_citegate(kids, args, target, tmp, up_port)


def upstream_proto(args, target):
    h2 = args.h2_upstream and (is_citegate(target) or PEERS.get(target, {}).get("h2_up", False))
    if target == "direct":
        return "h2c" if args.h2 else "http1.1"
    if args.tls_upstream:
        return ("h2" if h2 else "http1.1") + "+tls"
    return "h2c" if h2 else "http1.1"


def one_run(kids, args, target, rnd, up_port, tls_port, count_syscalls=False):
    tmp = tempfile.mkdtemp(prefix=f"versus-{target}-{rnd}-", dir=args.tmp)
    gw, port = None, up_port
    gw_up = tls_port if args.tls_upstream else up_port
    if target != "direct":
        gw, port = start_gateway(kids, args, target, tmp, gw_up)
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
    prof = None
    if gw and (count_syscalls or args.profile):
        prof = start_profiler(kids, args, target, rnd, pids, "count" if count_syscalls else None)
    res = run_client(kids, args, port, args.streams, args.events, args.interval_ms, args.ramp_ms, h2)
    if prof:
        stop_profiler(kids, prof)
    elapsed = time.monotonic() - t0
    busy1 = cpu_busy()
    cpu1 = cpu_s(tree(gw.pid)) if gw else (0.0, 0.0, 0.0)
    if sampler:
        sampler.done.set()
        sampler.join()
    row = dict(target=target, round=rnd, client=res, proto=res["proto"],
               upstream_proto=upstream_proto(args, target))
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
    if count_syscalls and prof:
        row["syscalls"] = read_syscall_counts(prof.out)
    if gw:
        if target in PEERS:
            # Read before the stop, which some peers log as an error of its own.
            row["gateway_errors"] = count_errors(tmp)
        kids.stop(gw, timeout=40)
    if not args.keep_tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return row


def count_errors(tmp):
    """Error lines in a peer's logs (nginx [error]/[crit]/[alert], HAProxy
    [ALERT], nghttpx ERROR/FATAL, h2o's error log)."""
    n = 0
    for name in ("error.log", "stderr.log"):
        path = os.path.join(tmp, name)
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                n += sum(1 for l in f if re.search(r"\[(alert|crit|error|ALERT)\]|\bERROR\b|FATAL", l))
    return n


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


HEAD = (f"{'target':<12}{'rnd':>4}{'ok/streams':>12}{'lost':>6}{'cpu_s':>7}{'us/event':>9}"
        f"{'ttft50':>8}{'ttft99':>8}{'+ttft99':>8}{'dlv50':>8}{'dlv99':>8}{'+dlv99':>8}"
        f"{'rss_idle':>9}{'rss_peak':>9}{'KiB/str':>8}{'wait_s':>7}{'cpu0_oth%':>10}")
# Every column is at least one space wider than what it holds.


def fmt_row(r, rnd_label=None):
    c = r["client"]
    return (f"{r['target']:<12}{rnd_label or r['round']:>4}{str(c['ok']) + '/' + str(c['streams']):>12}"
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
    The peers' limits of 20,000 connections want about 40,000 descriptors
    (HAProxy refuses a maxconn that ulimit-n cannot hold twice). Raising
    the hard limit needs CAP_SYS_RESOURCE."""
    need = 2 * streams + 512
    want = max(need, 2 * MIN_LIMIT + 512)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < want:
        with open("/proc/sys/fs/nr_open") as f:
            want = min(want, int(f.read()))
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
        except (ValueError, OSError):
            pass
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        print(f"versus: warning: RLIMIT_NOFILE is {soft} and cannot be raised; a gateway needs about "
              f"{need} descriptors for {streams} streams over HTTP/1.1, so streams past the limit fail"
              + ("" if h2 else " (--h2 puts 100 client streams on a connection)"), file=sys.stderr)


def peer_version(name, path):
    """One short version string: 'nginx/1.22.1', 'HAProxy 2.6.12', ..."""
    flag = {"nginx": "-v", "haproxy": "-v", "h2o": "--version", "nghttpx": "--version"}[name]
    try:
        r = subprocess.run([path, flag], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return name
    text = (r.stdout + r.stderr).strip().splitlines()
    line = text[0] if text else name
    if name == "nginx":
        return line.replace("nginx version: ", "")
    if name == "haproxy":
        m = re.search(r"version (\S+)", line)
        return f"haproxy/{m.group(1).split('-')[0]}" if m else line
    m = re.search(r"(\d+\.\d+\.\d+)", line)
    return f"{name}/{m.group(1)}" if m else line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--events", type=int, default=64)
    ap.add_argument("--interval-ms", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ramp-ms", type=float, help="spread the stream starts over this "
                    "(default: 0.5 ms per stream)")
    ap.add_argument("--burst", action="store_true", help="start every stream at once (as h2load and "
                    "k6 do), not over a ramp")
    ap.add_argument("--only", help="targets, comma-separated (default: all of "
                    f"{','.join(TARGETS)})")
    ap.add_argument("--h2", action="store_true", help="the client speaks h2c (prior knowledge, 100 "
                    "streams per connection) to every target, the direct path included")
    ap.add_argument("--h2-upstream", action="store_true", help="citegate, HAProxy and nghttpx speak "
                    "h2c to the upstream (streams share connections); nginx-light and h2o cannot, "
                    "they stay on HTTP/1.1")
    ap.add_argument("--tls-upstream", action="store_true", help="the gateways reach the upstream "
                    "over TLS (self-signed certificate, verified); the direct row stays plaintext")
    ap.add_argument("--ten-k", action="store_true", help="10,000 streams at a 200 ms pace")
    ap.add_argument("--ten-k-h2-upstream", action="store_true", help="10,000 HTTP/1.1 client streams "
                    "at a 200 ms pace through gateways that speak h2 to the upstream (default "
                    "targets: direct, haproxy, nghttpx, citegate)")
    ap.add_argument("--workers", type=int, default=1, help="also run citegate with this many workers "
                    "(target citegate-wN) beside the one-worker citegate")
    ap.add_argument("--workers-cpus", default=str(GATEWAY_CPU), help="CPUs of citegate-wN, "
                    f"comma-separated (default: {GATEWAY_CPU}, the gateway CPU)")
    ap.add_argument("--syscalls", action="store_true", help="after the rounds, one more run per "
                    "gateway with its system calls counted (perf stat, syscalls tracepoints)")
    ap.add_argument("--json", help="write every row to this file")
    ap.add_argument("--from-json", metavar="FILE", help="print the table of a run saved with --json "
                    "again (no run)")
    ap.add_argument("--profile", choices=("perf", "trace", "strace", "syscalls"), help="record each "
                    "gateway run: perf (perf record, call graphs), trace (perf record of every system "
                    "call, for bench/versus_turns.py), strace (strace -c) — they slow the gateway: not "
                    "for figures — or syscalls (perf stat of a few system calls)")
    ap.add_argument("--profile-dir", default="versus-profile", help="where --profile writes")
    ap.add_argument("--keep-tmp", action="store_true", help="keep each run's folder (logs, configs)")
    ap.add_argument("--tmp", help="parent of the temporary folders")
    ap.add_argument("--citegate", default=os.path.join(ROOT, "build", "citegate"))
    ap.add_argument("--citegate-log-level", default="warn", help="CITEGATE_LOG_LEVEL of citegate "
                    "(default warn: no access lines, as the peers log none; info: its default)")
    for name in PEERS:
        ap.add_argument(f"--{name}", help=f"the {name} binary (Debian {PEERS[name]['package']})")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bench"),
                    help="folder of versus_upstream and versus_client")
    args = ap.parse_args()
    if args.from_json:
        return reprint(args.from_json)
    if args.ten_k or args.ten_k_h2_upstream:
        args.streams, args.interval_ms = 10000, 200
    if args.ten_k_h2_upstream:
        args.h2_upstream = True
        if args.h2:
            fail("--ten-k-h2-upstream is HTTP/1.1 clients to h2 upstreams: leave out --h2")
        if args.only is None:
            args.only = "direct," + ",".join(p for p in PEERS if PEERS[p]["h2_up"]) + ",citegate"
    if args.burst:
        args.ramp_ms = 0.0
    if args.ramp_ms is None:
        args.ramp_ms = args.streams * 0.5
    targets = [t.strip() for t in (args.only or ",".join(TARGETS)).split(",") if t.strip()]
    for t in targets:
        if t not in TARGETS:
            fail(f"unknown target {t!r} (known: {', '.join(TARGETS)})")
    if args.workers < 1:
        fail("--workers must be at least 1")
    if args.workers > 1:
        targets.append(f"citegate-w{args.workers}")
    try:
        args.workers_cpus = {int(c) for c in args.workers_cpus.split(",")}
    except ValueError:
        fail("--workers-cpus: CPU numbers, comma-separated")
    args.upstream = os.path.join(args.bin, "versus_upstream")
    args.client = os.path.join(args.bin, "versus_client")
    for path, what in ((args.upstream, "versus_upstream"), (args.client, "versus_client")):
        if not os.access(path, os.X_OK):
            fail(f"{path} is missing: build first (make build)")
    if any(is_citegate(t) for t in targets) and not os.access(args.citegate, os.X_OK):
        fail(f"{args.citegate} is missing: build first (make build)")
    args.peer_bin, args.versions = {}, {}
    for name in PEERS:
        if name not in targets:
            continue
        path = getattr(args, name) or shutil.which(name) or f"/usr/sbin/{name}"
        if not os.access(path, os.X_OK):
            fail(f"{name} is missing: install Debian's {PEERS[name]['package']} (apt-get install "
                 f"{PEERS[name]['package']}, or `make bench-versus`), or leave it out with --only")
        args.peer_bin[name] = path
        args.versions[name] = peer_version(name, path)
    tool = "strace" if args.profile == "strace" else "perf"
    if (args.profile or args.syscalls) and not shutil.which(tool):
        fail(f"{tool} is missing (Debian: linux-perf, strace)")
    if not {GATEWAY_CPU, LOAD_CPU} <= os.sched_getaffinity(0):
        fail(f"CPUs {GATEWAY_CPU} and {LOAD_CPU} are needed (gateway and load are pinned apart)")
    if not args.workers_cpus <= os.sched_getaffinity(0):
        fail(f"--workers-cpus {sorted(args.workers_cpus)}: not all of them are available")
    if args.tls_upstream and not shutil.which("openssl"):
        fail("openssl is missing (Debian: openssl): --tls-upstream makes its certificate with it")
    raise_nofile(args.streams, args.h2)
    args.notes = set()
    if "haproxy" in targets:
        haproxy_maxconn(args)  # its note goes in the header

    kids = Children()

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    # Also when started in the background, where SIGINT comes in ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tmp_parent = tempfile.mkdtemp(prefix="versus-")
    args.tmp = args.tmp or tmp_parent
    os.makedirs(args.tmp, exist_ok=True)
    rows, sys_rows, lost_any = [], [], False
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

        print_header(args, targets)
        gws_all = [t for t in targets if t != "direct"]
        for rnd in range(1, args.rounds + 1):
            # direct first; the gateways take turns at going first.
            k = (rnd - 1) % len(gws_all) if gws_all else 0
            order = (["direct"] if "direct" in targets else []) + gws_all[k:] + gws_all[:k]
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
        if args.syscalls:
            # A run of its own per gateway: the counting must not touch the
            # figures above (it costs little, but not nothing).
            for t in gws_all:
                r = one_run(kids, args, t, "sys", up_port, tls_port, count_syscalls=True)
                sys_rows.append(r)
                if r["client"]["lost"] or r["client"]["failed"]:
                    lost_any = True
        kids.stop(up)
    except KeyboardInterrupt:
        print("versus: interrupted", file=sys.stderr)
        kids.stop_all()
        sys.exit(130)
    finally:
        kids.stop_all()
        if not args.keep_tmp:
            shutil.rmtree(tmp_parent, ignore_errors=True)

    report(args, targets, rows, sys_rows)
    if args.json:
        with open(args.json, "w") as f:
            saved = {k: v for k, v in vars(args).items()}
            saved["notes"] = sorted(args.notes)
            saved["workers_cpus"] = sorted(args.workers_cpus)
            json.dump(dict(args=saved, targets=targets, rows=rows, syscall_rows=sys_rows),
                      f, indent=1, default=str)
    return 1 if lost_any else 0


def print_header(args, targets):
    versions = getattr(args, "versions", None) or {}
    if not versions and getattr(args, "nginx_version", ""):  # saved before the peers came
        versions = {"nginx": args.nginx_version}
    starts = "burst" if args.ramp_ms == 0 else f"ramp ramp_ms={args.ramp_ms:g}"
    print(f"versus: streams={args.streams} events={args.events} interval_ms={args.interval_ms:g} "
          f"rounds={args.rounds} starts={starts} client={'h2c' if args.h2 else 'http1.1'} "
          f"upstream={upstream_label(args, targets)} "
          f"gateway_cpu={GATEWAY_CPU} load_cpu={LOAD_CPU}"
          + (f" ({', '.join(versions[t] for t in targets if t in versions)})" if versions else ""))
    if getattr(args, "h2_upstream", False):
        stay = [t for t in targets if t in PEERS and not PEERS[t]["h2_up"]]
        if stay:
            print(f"note: {' and '.join(stay)} proxy to upstreams over HTTP/1.1 only (nginx-light's "
                  "one h2 upstream is grpc_pass; h2o 2.2's proxy client is HTTP/1.1), one upstream "
                  "connection per stream")
    for n in sorted(getattr(args, "notes", None) or ()):
        print(f"note: {n}")
    print("times in ms; +ttft99/+dlv99: p99 minus the direct path's p99 of the same round; "
          "wait_s: the gateway ready but waiting for its CPU; cpu0_oth%: CPU 0 used by other processes")
    print(HEAD, flush=True)


def upstream_label(args, targets):
    """Each gateway's upstream protocol, grouped: 'h2c (haproxy,nghttpx,citegate), http1.1 (nginx,h2o)'."""
    tls = getattr(args, "tls_upstream", False)
    groups = {}
    for t in targets:
        if t != "direct":
            groups.setdefault(upstream_proto(args, t), []).append(t)
    if len(groups) <= 1:
        up = next(iter(groups), "http1.1")
    else:
        up = ", ".join(f"{p} ({','.join(ts)})" for p, ts in groups.items())
    return up + (" (direct: plaintext)" if tls else "")


def medians(args, targets, rows):
    med = {}
    for t in targets:
        tr = [r for r in rows if r["target"] == t]
        if not tr:
            continue
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
    return med


# The figures on which a best peer is named: (short name, key in the medians).
FIGURES = (("cpu", "cpu_us_per_event"), ("ttft", "added_ttft_p99_us"),
           ("delivery", "added_deliv_p99_us"), ("rss", "kib_per_stream"))


def best_peer(med, key):
    """The peer with the lowest median figure among those that lost nothing."""
    cands = [(m[key], t) for t, m in med.items()
             if t in PEERS and m.get(key) is not None and m["client"]["lost"] == 0
             and m["client"]["ok"] == m["client"]["streams"]]
    return min(cands)[1] if cands else None


def ratio(a, b):
    """a / b where that means something (both figures, b above zero)."""
    if a is None or b is None or b <= 0:
        return None
    return a / b


def at_most(c, b, factor=1.0):
    """c <= factor x b; with b <= 0 (an added latency below the direct
    path's) the factor means nothing and c must simply be <= b."""
    if c is None or b is None:
        return None
    return c <= (factor * b if b > 0 else b)


def syscall_table(args, sys_rows):
    """Per gateway: system calls per relayed event, total and the main ones."""
    out = {}
    if not sys_rows:
        return out
    print("system calls per relayed event (a run of its own per gateway, perf stat on the "
          "syscalls:sys_enter_* tracepoints; calls >= 0.02 per event named):")
    for r in sys_rows:
        ev = r["client"]["events"]
        counts = r.get("syscalls") or {}
        if not ev or not counts:
            print(f"{r['target']:<12} -")
            continue
        total = sum(counts.values()) / ev
        parts = sorted(((n / ev, c) for c, n in counts.items()), reverse=True)
        named = " ".join(f"{c} {v:.2f}" for v, c in parts if v >= 0.02)
        out[r["target"]] = dict(total=total, ok=r["client"]["ok"] == args.streams and not r["client"]["lost"])
        print(f"{r['target']:<12} {total:6.2f}  ({named})   ok={r['client']['ok']}/{args.streams} "
              f"events={ev}")
    return out


def report(args, targets, rows, sys_rows=()):
    """Medians over rounds, citegate against each peer and the best one,
    the goals, the summary line."""
    med = medians(args, targets, rows)
    print("median over rounds (ok: the worst round; lost: all rounds):")
    for t in targets:
        if t in med:
            print(fmt_row(med[t], "med"))
    errs = [f"{r['target']} (round {r['round']}) {r['gateway_errors']}" for r in list(rows) + list(sys_rows)
            if r.get("gateway_errors")]
    if errs:
        print("error lines in a peer's logs (--keep-tmp keeps them): " + ", ".join(errs))
    h2, h2_up = args.h2, getattr(args, "h2_upstream", False)
    peers = [t for t in targets if t in PEERS and t in med]
    c = med.get("citegate")
    if c:
        for p in peers:
            n = med[p]
            print(f"citegate/{p}: " + " ".join(f"{k}={num(v, '.2f')}" for k, v in (
                ("cpu_per_event", ratio(c["cpu_us_per_event"], n["cpu_us_per_event"])),
                ("added_ttft_p99", ratio(c.get("added_ttft_p99_us"), n.get("added_ttft_p99_us"))),
                ("added_delivery_p99", ratio(c.get("added_deliv_p99_us"), n.get("added_deliv_p99_us"))),
                ("rss_per_stream", ratio(c["kib_per_stream"], n["kib_per_stream"])))))
    best = {f: best_peer(med, key) for f, key in FIGURES}
    sysc = syscall_table(args, sys_rows or [])
    sys_cands = [(v["total"], t) for t, v in sysc.items() if t in PEERS and v["ok"]]
    best["syscalls"] = min(sys_cands)[1] if sys_cands else None
    if peers:
        print("best peer (lowest median among the peers that lost nothing): " + "; ".join(
            f"{f}={best[f] or '-'}" for f in ("cpu", "ttft", "delivery", "rss", "syscalls")
            if f != "syscalls" or sysc))
    wt = next((t for t in targets if t.startswith("citegate-w")), None)
    if wt and c and wt in med:
        w = med[wt]
        print(f"citegate workers {workers_of(wt)}/1: " + " ".join(f"{k}={num(v, '.2f')}" for k, v in (
            ("cpu_per_event", ratio(w["cpu_us_per_event"], c["cpu_us_per_event"])),
            ("added_ttft_p99", ratio(w.get("added_ttft_p99_us"), c.get("added_ttft_p99_us"))),
            ("added_delivery_p99", ratio(w.get("added_deliv_p99_us"), c.get("added_deliv_p99_us"))))))

    def val(t, key):
        return med[t].get(key) if t and t in med else None

    def goal(name, ok):
        return f"{name}: {'-' if ok is None else ('PASS' if ok else 'MISS')}"
    summary = [f"streams={args.streams}", f"events={args.events}",
               f"interval_ms={args.interval_ms:g}", f"rounds={args.rounds}",
               f"starts={'burst' if args.ramp_ms == 0 else 'ramp'}",
               f"client={'h2c' if h2 else 'http1.1'}",
               f"upstream={'h2c' if h2_up else 'http1.1'}{'+tls' if getattr(args, 'tls_upstream', False) else ''}",
               "targets=" + ",".join(t for t in targets if t in med),
               "lost=" + "/".join(str(med[t]["client"]["lost"]) for t in targets if t in med)]
    if c:
        goals = [goal(f"0 lost, {args.streams} of {args.streams} streams",
                      c["client"]["ok"] == args.streams and c["client"]["lost"] == 0)]
        bc, bt, bd, br = (val(best["cpu"], "cpu_us_per_event"), val(best["ttft"], "added_ttft_p99_us"),
                          val(best["delivery"], "added_deliv_p99_us"), val(best["rss"], "kib_per_stream"))
        if not h2 and not h2_up:
            goals += [goal("cpu/event <= 1.0x best peer", at_most(c["cpu_us_per_event"], bc)),
                      goal("syscalls/event <= best peer",
                           at_most(sysc.get("citegate", {}).get("total"),
                                   sysc.get(best["syscalls"], {}).get("total"))),
                      goal("added ttft p99 <= 1.0x best peer", at_most(c.get("added_ttft_p99_us"), bt)),
                      goal("added delivery p99 <= 1.0x best peer",
                           at_most(c.get("added_deliv_p99_us"), bd))]
        elif h2 and h2_up:
            goals += [goal("cpu/event <= 0.5x best peer", at_most(c["cpu_us_per_event"], bc, 0.5)),
                      goal("added ttft p99 <= 1.0x best peer", at_most(c.get("added_ttft_p99_us"), bt)),
                      goal("added delivery p99 <= 1.0x best peer",
                           at_most(c.get("added_deliv_p99_us"), bd)),
                      goal("RSS <= 4 KiB/stream", None if c["kib_per_stream"] is None
                           else c["kib_per_stream"] <= 4)]
        if wt and wt in med:
            goals.append(goal(f"cpu/event with {workers_of(wt)} workers <= 1 worker",
                              at_most(med[wt]["cpu_us_per_event"], c["cpu_us_per_event"])))
        print("goals (against the best peer of this run): " + "; ".join(goals))
        rc, rt, rd, rr = (ratio(c["cpu_us_per_event"], bc), ratio(c.get("added_ttft_p99_us"), bt),
                          ratio(c.get("added_deliv_p99_us"), bd), ratio(c["kib_per_stream"], br))
        bcm = med[best["cpu"]] if best["cpu"] else None
        summary += [f"cpu_us_per_event={num(bc, '.2f')}/{num(c['cpu_us_per_event'], '.2f')}",
                    f"cpu_ms_per_stream={num(per_stream(bcm) if bcm else None, '.2f')}/"
                    f"{num(per_stream(c), '.2f')}",
                    f"added_ttft_p99_ms={ms(bt)}/{ms(c.get('added_ttft_p99_us'))}",
                    f"added_delivery_p99_ms={ms(bd)}/{ms(c.get('added_deliv_p99_us'))}",
                    f"kib_per_stream={num(br, '.1f')}/{num(c['kib_per_stream'], '.1f')}",
                    f"best_rss={best['rss'] or '-'}", f"ratio_rss={num(rr, '.2f')}"]
        if sysc:
            cs, bs = sysc.get("citegate", {}).get("total"), sysc.get(best["syscalls"], {}).get("total")
            summary += [f"syscalls_per_event={num(bs, '.2f')}/{num(cs, '.2f')}",
                        f"best_syscalls={best['syscalls'] or '-'}", f"ratio_syscalls={num(ratio(cs, bs), '.2f')}"]
        if wt and wt in med:
            summary += [f"workers={workers_of(wt)}",
                        f"ratio_cpu_workers={num(ratio(med[wt]['cpu_us_per_event'], c['cpu_us_per_event']), '.2f')}"]
        summary += [f"best_cpu={best['cpu'] or '-'}", f"ratio_cpu={num(rc, '.2f')}",
                    f"best_ttft={best['ttft'] or '-'}", f"ratio_ttft={num(rt, '.2f')}",
                    f"best_delivery={best['delivery'] or '-'}", f"ratio_delivery={num(rd, '.2f')}"]
    print("versus: " + " ".join(summary))


def per_stream(m):
    return None if m["cpu_s"] is None else m["cpu_s"] * 1000 / m["client"]["streams"]


def reprint(path):
    with open(path) as f:
        saved = json.load(f)
    args = argparse.Namespace(**saved["args"])
    # Files saved before an option existed ran without it.
    for k in ("h2", "h2_upstream", "tls_upstream"):
        if not hasattr(args, k):
            setattr(args, k, False)
    targets = saved.get("targets") or [t for t in TARGETS if t in args.only.split(",")]
    print_header(args, targets)
    for r in saved["rows"]:
        print(fmt_row(r))
    report(args, targets, saved["rows"], saved.get("syscall_rows") or [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
