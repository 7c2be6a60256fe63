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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h1_text),
        cmocka_unit_test(test_h1_no_body_no_length),
        cmocka_unit_test(test_nv_keeps_every_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
