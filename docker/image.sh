#!/bin/bash
# Builds docker/Dockerfile without a Docker daemon or a registry, starts the
# image and checks it: the embedded demo answers with rewritten citations,
# the image's own health check passes, and the image is what it claims to be
# (at most 25 MB, uid 10001, no shell or package manager, exactly the shared
# objects its loader maps). Run from the repository root (`make image`). See
# docker/README.md "Building the image here".
#
# The build stage's base comes from Debian's own archive: mmdebstrap makes a
# minbase bookworm root filesystem from this host's apt sources, imported as
# localhost/debian:bookworm. The host's apt sources file is mounted read-only
# into every RUN step, so no archive address is written into an image. The
# runtime stage is FROM scratch.
#
# Environment: CHECK=test runs the whole suite in the build stage (default
# build: compile only); IMAGE (localhost/citegate:latest); PORT and
# ADMIN_PORT on 127.0.0.1 (default: free ports podman picks); MAX_BYTES
# (25000000); KEEP=1 leaves the container running. Run as root it also times
# the image's start-up (bench/startup.py --root on the unpacked image).
set -eu

IMAGE=${IMAGE:-localhost/citegate:latest}
CHECK=${CHECK:-build}
PORT=${PORT:-}
ADMIN_PORT=${ADMIN_PORT:-}
MAX_BYTES=${MAX_BYTES:-25000000}
NAME=citegate-image-check-$$
WORK=$(pwd)/build/image
SOURCES=/etc/apt/sources.list.d/debian.sources
[ -f "$SOURCES" ] || SOURCES=/etc/apt/sources.list
LOADER=/lib64/ld-linux-x86-64.so.2

say() { printf 'image: %s\n' "$*"; }
fail() { printf 'image: FAILED: %s\n' "$*" >&2; exit 1; }

mkdir -p "$WORK"

# Podman without systemd on a host with hybrid cgroups: runc (crun rejects
# them), cgroupfs, and limits the container runtime may set. Podman's
# defaults (nofile 1048576) ask for more than an unprivileged host allows,
# and podman starts conmon, and so runc, with at most 32768 processes: a
# container asking for more fails with "setrlimit ... operation not
# permitted". `podman build` takes the limits as flags.
hard() {
    v=$(ulimit -H "$1")
    [ "$v" = unlimited ] && v=$2
    [ "$v" -gt "$2" ] && v=$2
    printf '%s' "$v"
}

write_conf() {
    cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(hard -n 1048576):$(hard -n 1048576)", "nproc=$(hard -u 32768):$(hard -u 32768)"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
    CONTAINERS_CONF=$WORK/containers.conf
    export CONTAINERS_CONF
}

base_image() {
    if podman image exists localhost/debian:bookworm; then
        say "base localhost/debian:bookworm already present"
    else
        say "making the bookworm root filesystem (mmdebstrap, minbase)"
        mmdebstrap --variant=minbase --quiet \
            --customize-hook='rm -f "$1"/etc/apt/sources.list "$1"/etc/apt/sources.list.d/*' \
            bookworm "$WORK/rootfs.tar" "$SOURCES"
        podman import --quiet "$WORK/rootfs.tar" localhost/debian:bookworm >/dev/null
        rm -f "$WORK/rootfs.tar"
    fi
}

build_image() {
    say "building $IMAGE (CHECK=$CHECK)"
    podman build --format docker --pull=never --network host \
        --ignorefile docker/Dockerfile.dockerignore \
        --volume "$SOURCES:$SOURCES:ro" \
        --ulimit "nofile=$(hard -n 1048576):$(hard -n 1048576)" \
        --ulimit "nproc=$(hard -u 32768):$(hard -u 32768)" \
        --build-arg CHECK="$CHECK" \
        -f docker/Dockerfile -t "$IMAGE" .
}

cleanup() {
    [ "${KEEP:-0}" = 1 ] || podman rm -f "$NAME" >/dev/null 2>&1 || true
}

# GET url until it answers 200 (at most 10 s); prints the body.
get() {
    i=0
    while [ $i -lt 50 ]; do
        if body=$(curl -fsS --max-time 2 "$1" 2>/dev/null); then
            printf '%s' "$body"
            return 0
        fi
        i=$((i + 1))
        sleep 0.2
    done
    return 1
}

# The host port podman published for a container port (127.0.0.1:N -> N).
published() {
    p=$(podman port "$NAME" "$1/tcp" | head -n1)
    [ -n "$p" ] || fail "container port $1 is not published"
    printf '%s' "${p##*:}"
}

# The size limit, the user, the health check command, and the files: no
# shell, no package manager, and exactly the shared objects the image's own
# loader maps for citegate (a missing one would show as "not found").
check_contents() {
    size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
    [ "$size" -le "$MAX_BYTES" ] || fail "image is $size bytes, over $MAX_BYTES"
    user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
    [ "$user" = 10001:10001 ] || fail "image user is '$user', not 10001:10001"
    hc=$(podman image inspect --format '{{json .Config.Healthcheck.Test}}' "$IMAGE")
    [ "$hc" = '["CMD","/usr/local/bin/citegate","health"]' ] || fail "image HEALTHCHECK is $hc"
    podman export -o "$WORK/root.tar" "$NAME"
    tar -tvf "$WORK/root.tar" >"$WORK/files.txt"
    # A shell, busybox or a package manager anywhere fails the check.
    if grep -E '(^|/)(sh|bash|dash|ash|busybox|apt|apt-get|dpkg|rpm|microdnf|apk)( |$)' \
        <(awk '{print $NF}' "$WORK/files.txt"); then
        fail "a shell or a package manager is in the image"
    fi
    podman run --rm --no-healthcheck --entrypoint "$LOADER" "$IMAGE" --list /usr/local/bin/citegate >"$WORK/ldd.txt"
    if grep 'not found' "$WORK/ldd.txt"; then fail "a shared object is missing"; fi
    { sed -n 's/.*=> \(\/[^ ]*\) (.*/\1/p' "$WORK/ldd.txt"; echo "$LOADER"; } |
        sed 's|^/||' | sort -u >"$WORK/mapped.txt"
    awk '$1 !~ /^[dl]/ && $NF ~ /\.so(\.|$)/ {print $NF}' "$WORK/files.txt" | sort -u >"$WORK/shipped.txt"
    diff -u "$WORK/mapped.txt" "$WORK/shipped.txt" >&2 ||
        fail "the shared objects in the image differ from those its loader maps"
    say "$(wc -l <"$WORK/shipped.txt") shared objects, each one mapped by the loader; no shell, no package manager"
    gz=$(podman save --format docker-archive "$IMAGE" 2>/dev/null | gzip -c | wc -c)
    say "size $size bytes (limit $MAX_BYTES), $gz bytes as a gzipped archive; user 10001:10001"
}

# Start-up (exec to /readyz 200, median of 20, SQLite store) and idle memory
# of the image's own binary, loader and libraries: its root, unpacked, run
# through chroot (bench/startup.py --root), so no container runtime is timed.
check_startup() {
    if [ "$(id -u)" != 0 ]; then
        rm -f "$WORK/root.tar"
        say "start-up in the image's root not measured: chroot needs root (bench/startup.py --root)"
        return 0
    fi
    rm -rf "$WORK/root"
    mkdir -p "$WORK/root"
    tar -xpf "$WORK/root.tar" --numeric-owner -C "$WORK/root"
    python3 bench/startup.py --root "$WORK/root" --runs 20 --max-ms 100 >"$WORK/startup.txt" ||
        { cat "$WORK/startup.txt" >&2; fail "start-up is over 100 ms"; }
    sed -n 's/^\(startup\|idle\): /image: \1 in the image root: /p' "$WORK/startup.txt"
    rm -rf "$WORK/root" "$WORK/root.tar"
}

check_image() {
    podman rm -f "$NAME" >/dev/null 2>&1 || true
    trap cleanup EXIT
    # As the Kubernetes manifests run it: read-only root, no capabilities.
    podman run -d --name "$NAME" --no-healthcheck --read-only --cap-drop=ALL \
        --security-opt=no-new-privileges \
        -p "127.0.0.1:$PORT:8080" -p "127.0.0.1:$ADMIN_PORT:9901" "$IMAGE" >/dev/null
    port=$(published 8080)
    admin=$(published 9901)
    get "http://127.0.0.1:$admin/healthz" >/dev/null || fail "/healthz did not answer"
    say "/healthz: 200 (ports 127.0.0.1:$port and 127.0.0.1:$admin)"
    answer=$(curl -fsS --max-time 10 "http://127.0.0.1:$port/v1/chat/completions" \
        -H 'Content-Type: application/json' \
        -d '{"stream":true,"messages":[{"role":"user","content":"How do I charge the X100?"}]}') ||
        fail "the demo request failed"
    printf '%s\n' "$answer" | grep -q '\](http' || fail "no rewritten citation in the demo answer"
    printf '%s\n' "$answer" | grep -q '"type":"source"' || fail "no source event in the demo answer"
    printf '%s\n' "$answer" | tail -n 2 | grep -q '^data: \[DONE\]' || fail "the demo answer did not end"
    say "demo: rewritten citations, source events, [DONE]"
    # The answer's pattern is written to SQLite on the volume by uid 10001.
    i=0
    until curl -fsS --max-time 2 "http://127.0.0.1:$admin/v1/citations/patterns?q=charge" |
        grep -q 'X100'; do
        i=$((i + 1))
        [ $i -lt 25 ] || fail "the answer's pattern was not stored in /var/lib/citegate"
        sleep 0.2
    done
    say "SQLite store on /var/lib/citegate: the answer's pattern recalled"
    # Without systemd podman cannot schedule the HEALTHCHECK (hence
    # --no-healthcheck): run the image's own check command, which must also fail.
    podman exec "$NAME" /usr/local/bin/citegate health || fail "the health check failed"
    if podman exec "$NAME" /usr/local/bin/citegate health --admin-listen 127.0.0.1:1 2>/dev/null; then
        fail "the health check passed with nothing listening"
    fi
    say "health check (the image's HEALTHCHECK command): healthy; unhealthy on a closed port"
    check_contents
    check_startup
}

write_conf
start=$(date +%s)
base_image
build_image
check_image
say "ok in $(($(date +%s) - start)) s"
