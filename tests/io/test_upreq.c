/* The upstream request serializers: HTTP/1.1 text and the HTTP/2 header list. */
#include "io/upreq.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

static void make(cg_upreq_t *r, size_t nfields, const char *body)
{
    memset(r, 0, sizeof(*r));
    r->method = "POST";
    cg_buf_puts(&r->target, "/base/v1/chat/completions?x=1");
    for (size_t i = 0; i < nfields; i++) {
        char name[32], value[32];
        snprintf(name, sizeof(name), "X-Field-%zu", i);
        snprintf(value, sizeof(value), "value %zu", i);
        cg_hdrs_add_str(&r->hdrs, name, value);
    }
    cg_buf_puts(&r->body, body);
    r->has_body = true;
}

static void test_h1_text(void **state)
{
    (void)state;
    cg_upreq_t r;
    make(&r, 2, "{\"a\":1}");
    cg_buf_t out = {0};
    cg_upreq_h1(&r, "up.example:8443", &out);
    cg_buf_putc(&out, '\0');
    assert_string_equal(out.p, "POST /base/v1/chat/completions?x=1 HTTP/1.1\r\n"
                               "Host: up.example:8443\r\n"
                               "X-Field-0: value 0\r\n"
                               "X-Field-1: value 1\r\n"
                               "Content-Length: 7\r\n"
                               "\r\n"
                               "{\"a\":1}");
    cg_buf_free(&out);
    cg_upreq_free(&r);
}

static void test_h1_no_body_no_length(void **state)
{
    (void)state;
    cg_upreq_t r;
    make(&r, 0, "");
    r.method = "GET";
    r.has_body = false;
    cg_buf_t out = {0};
    cg_upreq_h1(&r, "h", &out);
    cg_buf_putc(&out, '\0');
    assert_null(strstr(out.p, "Content-Length"));
    assert_non_null(strstr(out.p, "\r\n\r\n"));
    cg_buf_free(&out);
    cg_upreq_free(&r);
}

static bool nv_is(const nghttp2_nv *v, const char *name, const char *value)
{
    return v->namelen == strlen(name) && memcmp(v->name, name, v->namelen) == 0 &&
           v->valuelen == strlen(value) && memcmp(v->value, value, v->valuelen) == 0;
}

/* Far more fields than the 64 the old text-parsing path kept: none dropped,
 * names lowered, pseudo-headers first, content-length last. */
static void test_nv_keeps_every_field(void **state)
{
    (void)state;
    cg_upreq_t r;
    make(&r, 300, "hello");
    cg_buf_t names = {0};
    size_t n = 0;
    nghttp2_nv *v = cg_upreq_nv(&r, "https", "up.example", &names, &n);
    assert_int_equal(n, 4 + 300 + 1);
    assert_true(nv_is(&v[0], ":method", "POST"));
    assert_true(nv_is(&v[1], ":path", "/base/v1/chat/completions?x=1"));
    assert_true(nv_is(&v[2], ":scheme", "https"));
    assert_true(nv_is(&v[3], ":authority", "up.example"));
    assert_true(nv_is(&v[4], "x-field-0", "value 0"));
    assert_true(nv_is(&v[4 + 299], "x-field-299", "value 299"));
    assert_true(nv_is(&v[n - 1], "content-length", "5"));
    free(v);
    cg_buf_free(&names);
    cg_upreq_free(&r);
}

/* A field that does not fit is not added at all: half of one would take
 * the next field's name as the rest of its own. A list citegate sends on
 * holds CG_OWN_HEADER_BYTES more than one it received. */
static void test_field_whole_or_not_at_all(void **state)
{
    (void)state;
    static char big[CG_MAX_HEADER_BYTES];
    memset(big, 'v', sizeof(big));
    for (int outgoing = 0; outgoing < 2; outgoing++) {
        cg_hdrs_t h = {.outgoing = outgoing};
        size_t room = cg_hdrs_limit(&h);
        assert_int_equal(room, CG_MAX_HEADER_BYTES + (outgoing ? CG_OWN_HEADER_BYTES : 0));
        assert_int_equal(cg_hdrs_add(&h, "a", 1, big, CG_MAX_HEADER_BYTES - 101), 0);
        size_t len = h.buf.len, n = h.n;
        /* 100 bytes left: a name fits, its value does not */
        int rc = cg_hdrs_add(&h, "x-name", 6, big, 200);
        assert_int_equal(rc, outgoing ? 0 : -1);
        if (!outgoing) {
            assert_int_equal(h.n, n);
            assert_int_equal(h.buf.len, len);
        }
        assert_int_equal(cg_hdrs_add(&h, "x-next", 6, "1", 1), 0);
        cg_span_t name = cg_hdr_name(&h, h.n - 1), value = cg_hdr_value(&h, h.n - 1);
        assert_true(name.n == 6 && memcmp(name.p, "x-next", 6) == 0);
        assert_true(value.n == 1 && value.p[0] == '1');
        assert_int_equal(cg_hdrs_add(&h, "y", 1, big, room), -1);
        cg_hdrs_free(&h);
        assert_int_equal(h.outgoing, outgoing);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h1_text),
        cmocka_unit_test(test_h1_no_body_no_length),
        cmocka_unit_test(test_nv_keeps_every_field),
        cmocka_unit_test(test_field_whole_or_not_at_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
