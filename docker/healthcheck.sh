#!/bin/bash
# Container HEALTHCHECK: exit 0 when GET /healthz on citegate's admin listener
# answers 200, 1 otherwise. bash's /dev/tcp instead of curl: curl is not in
# debian:bookworm-slim and would add libcurl4 and a dozen more libraries
# (Kerberos, LDAP, SASL, SSH, RTMP, PSL) only for this probe.
# The address comes from CITEGATE_ADMIN_LISTEN (ADDR:PORT), as citegate reads it;
# a wildcard address is probed on loopback.
listen=${CITEGATE_ADMIN_LISTEN:-127.0.0.1:9901}
port=${listen##*:}
host=${listen%:*}
host=${host#[}
host=${host%]}
case $host in
'' | '*' | 0.0.0.0) host=127.0.0.1 ;;
::) host=::1 ;;
esac
exec 3<>"/dev/tcp/$host/$port" || exit 1
printf 'GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$host" >&3
IFS= read -r -t 2 status <&3 || exit 1
case $status in
"HTTP/1."[01]" 200 "*) exit 0 ;;
esac
exit 1
