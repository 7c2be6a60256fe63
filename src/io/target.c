/* The upstream's address, TLS configuration and server name (SPEC §3). */
#include "log.h"
#include "tls.h"
#include "upstream.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int cg_upstream_url_parse(const char *url, cg_upstream_url_t *out)
{
    memset(out, 0, sizeof(*out));
    const char *rest;
    if (CG_HAS_IPREFIX(url, "https://")) {
        out->tls = true;
        rest = url + 8;
    } else if (CG_HAS_IPREFIX(url, "http://")) {
        rest = url + 7;
    } else {
        return -1;
    }
    size_t auth = strcspn(rest, "/?#");
    if (auth == 0 || auth >= sizeof(out->authority))
        return -1;
    memcpy(out->authority, rest, auth);
    const char *hs = rest, *he = rest + auth;
    const char *port = NULL;
    if (*hs == '[') {
        const char *rb = memchr(hs, ']', auth);
        if (rb == NULL)
            return -1;
        port = rb + 1 < he && rb[1] == ':' ? rb + 2 : NULL;
        hs++;
        he = rb;
    } else {
        const char *colon = memchr(hs, ':', auth);
        if (colon) {
            port = colon + 1;
            he = colon;
        }
    }
    if (he <= hs || (size_t)(he - hs) >= sizeof(out->host))
        return -1;
    memcpy(out->host, hs, (size_t)(he - hs));
    out->port = out->tls ? 443 : 80;
    if (port) {
        char *end;
        long p = strtol(port, &end, 10);
        if (end != rest + auth || p <= 0 || p > 65535)
            return -1;
        out->port = (int)p;
    }
    const char *path = rest + auth;
    size_t plen = strcspn(path, "?#");
    while (plen > 0 && path[plen - 1] == '/')
        plen--;
    if (plen >= sizeof(out->base))
        return -1;
    memcpy(out->base, path, plen);
    return 0;
}
