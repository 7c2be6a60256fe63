#!/bin/bash
# Builds docker/Dockerfile without a Docker daemon or a registry, starts the
# image and checks it: the embedded demo answers with rewritten citations and
# the image's own health check passes. Run from the repository root (`make
# image`). See docker/README.md "Building the image here".
#
# The base images come from Debian's own archive: mmdebstrap makes a minbase
# bookworm root filesystem from this host's apt sources, imported as
# localhost/debian:bookworm (also tagged bookworm-slim, which the Dockerfile's
# runtime stage names). The host's apt sources file is mounted read-only into
# every RUN step, so no archive address is written into an image.
#
# Environment: CHECK=test runs the whole suite in the build stage (default
# build: compile only); IMAGE (localhost/citegate:latest); PORT and
# ADMIN_PORT on 127.0.0.1 (18080, 19901); KEEP=1 leaves the container running.
set -eu

IMAGE=${IMAGE:-localhost/citegate:latest}
CHECK=${CHECK:-build}
PORT=${PORT:-18080}
ADMIN_PORT=${ADMIN_PORT:-19901}
NAME=citegate-image-check
WORK=$(pwd)/build/image
SOURCES=/etc/apt/sources.list.d/debian.sources
[ -f "$SOURCES" ] || SOURCES=/etc/apt/sources.list

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
    podman tag localhost/debian:bookworm localhost/debian:bookworm-slim
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

check_image() {
    podman rm -f "$NAME" >/dev/null 2>&1 || true
    trap cleanup EXIT
    podman run -d --name "$NAME" --no-healthcheck \
        -p "127.0.0.1:$PORT:8080" -p "127.0.0.1:$ADMIN_PORT:9901" "$IMAGE" >/dev/null
    get "http://127.0.0.1:$ADMIN_PORT/healthz" >/dev/null || fail "/healthz did not answer"
    say "/healthz: 200"
    answer=$(curl -fsS --max-time 10 "http://127.0.0.1:$PORT/v1/chat/completions" \
        -H 'Content-Type: application/json' \
        -d '{"stream":true,"messages":[{"role":"user","content":"How do I charge the X100?"}]}') ||
        fail "the demo request failed"
    printf '%s\n' "$answer" | grep -q '\](http' || fail "no rewritten citation in the demo answer"
    printf '%s\n' "$answer" | grep -q '"type":"source"' || fail "no source event in the demo answer"
    printf '%s\n' "$answer" | tail -n 2 | grep -q '^data: \[DONE\]' || fail "the demo answer did not end"
    say "demo: rewritten citations, source events, [DONE]"
    # Without systemd podman cannot schedule the HEALTHCHECK (hence
    # --no-healthcheck): run the image's own check command once.
    hc=$(podman image inspect --format '{{json .Config.Healthcheck.Test}}' "$IMAGE")
    [ "$hc" = '["CMD","bash","/usr/local/bin/citegate-healthcheck"]' ] ||
        fail "image HEALTHCHECK is $hc"
    podman exec "$NAME" bash /usr/local/bin/citegate-healthcheck || fail "the health check failed"
    say "health check (the image's HEALTHCHECK command): healthy"
    user=$(podman inspect --format '{{.Config.User}}' "$IMAGE")
    [ "$user" = 10001:10001 ] || fail "image user is '$user', not 10001:10001"
    say "user 10001:10001; size $(podman image inspect --format '{{.Size}}' "$IMAGE") bytes"
}

write_conf
start=$(date +%s)
base_image
build_image
check_image
say "ok in $(($(date +%s) - start)) s"
