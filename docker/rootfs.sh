#!/bin/bash
# The runtime image's root filesystem, assembled in the build stage of
# docker/Dockerfile from what that stage built and installed:
#
#   /usr/local/bin/citegate            the tested binary, its debug sections stripped
#   the loader and every shared object the loader maps for it, each at the path
#                                      `ldd` printed (found now, so the list cannot go stale)
#   /etc/ssl/certs/ca-certificates.crt the CA bundle for https:// upstreams
#   /etc/passwd, /etc/group            one line each for citegate, uid/gid 10001
#   /etc/nsswitch.conf                 passwd/group from files; hosts from /etc/hosts, then DNS
#   /usr/share/doc/PKG/copyright       the licence of every Debian package copied from
#   DATA/citegate                      the SQLite folder (0750), which the Dockerfile
#                                      copies to /var/lib/citegate owned by 10001
#
# Nothing else: no shell, no package manager, no coreutils. The binary is
# then run inside ROOT (chroot, as uid 10001), so a library ldd did not report
# fails the build here, not the container at its start. Prints what each
# shared object costs and which package it comes from.
#
# usage: docker/rootfs.sh BINARY ROOT DATA
set -euo pipefail

bin=$1 root=$2 data=$3
uid=10001

fail() { printf 'rootfs: %s\n' "$*" >&2; exit 1; }

[ -x "$bin" ] || fail "$bin is not an executable"
[ ! -e "$root" ] || fail "$root exists already"

# The Debian package that owns a file (usrmerge: dpkg may know it under
# /lib, /usr/lib or the link's target).
owner() {
    local f
    for f in "$1" "$(readlink -f "$1")" "/usr$1"; do
        dpkg -S "$f" 2>/dev/null | sed -n '1s/:.*//p' | grep . && return 0
    done
    return 1
}

# Each object `ldd` lists, loader included, copied (links resolved) to the
# path ldd printed; linux-vdso.so.1 is in the kernel, not a file.
copy_objects() {
    local out line path
    out=$(ldd "$bin") || fail "ldd $bin failed"
    while read -r line; do
        case $line in
        *"not found"*) fail "ldd: $line" ;;
        *"=> /"*) path=${line#*=> } ;;
        /*) path=$line ;;
        *) continue ;;
        esac
        path=${path%% (*}
        install -D -m 0755 "$(readlink -f "$path")" "$root$path"
        printf '%s\n' "$path"
    done <<<"$out"
}

# The copyright file of every package a copied file comes from; identical
# ones (the four Kerberos libraries) are hard links, stored once in a layer.
copy_copyrights() {
    local pkg sum seen=""
    for pkg in $(sort -u); do
        local src=/usr/share/doc/$pkg/copyright dst=$root/usr/share/doc/$pkg/copyright
        [ -f "$src" ] || fail "$pkg has no $src"
        install -d "$(dirname "$dst")"
        sum=$(sha256sum "$src" | cut -c1-64)
        local first
        first=$(printf '%s' "$seen" | sed -n "s/^$sum //p" | head -n1)
        if [ -n "$first" ]; then
            ln "$first" "$dst"
        else
            install -m 0644 "$src" "$dst"
            seen="$seen$sum $dst"$'\n'
        fi
    done
}

etc_files() {
    install -d -m 0755 "$root/etc/ssl/certs"
    install -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
    printf 'citegate:x:%d:%d:citegate:/var/lib/citegate:/usr/sbin/nologin\n' $uid $uid >"$root/etc/passwd"
    printf 'citegate:x:%d:\n' $uid >"$root/etc/group"
    printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
    chmod 0644 "$root/etc/passwd" "$root/etc/group" "$root/etc/nsswitch.conf"
}

report() {
    local path
    printf 'rootfs: shared objects (bytes, path, package):\n'
    while read -r path; do
        printf '%10d  %-48s %s\n' "$(stat -c %s "$root$path")" "$path" "$(owner "$path" || echo '?')"
    done <"$1" | sort -n
    printf 'rootfs: %d objects, %d bytes; binary %d bytes; whole root %d bytes\n' \
        "$(wc -l <"$1")" "$(sed "s|^|$root|" "$1" | xargs stat -c %s | awk '{s += $1} END {print s}')" \
        "$(stat -c %s "$root/usr/local/bin/citegate")" "$(du -sb "$root" | cut -f1)"
}

install -d -m 0755 "$root/usr/local/bin" "$root/var/lib"
strip --strip-debug -o "$root/usr/local/bin/citegate" "$bin"
chmod 0755 "$root/usr/local/bin/citegate"
list=$(mktemp)
copy_objects >"$list"
etc_files
{
    while read -r path; do owner "$path" || fail "no Debian package owns $path"; done <"$list"
    echo ca-certificates # the bundle is generated: its package is this one
} | copy_copyrights
install -d -m 0750 "$data/citegate"
chown $uid:$uid "$data/citegate"

# The closure is complete when the binary runs in the new root alone.
chroot --userspec=$uid:$uid "$root" /usr/local/bin/citegate --version >/dev/null ||
    fail "citegate does not run inside $root: a shared object is missing"
report "$list"
rm -f "$list"
