/* The transformer's side of the profile interface (citegate/profile.h),
 * through a profile defined here and registered nowhere: hooks are called
 * where profile.h says, and profile state is allocated zeroed and freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "citegate/xform.h"
#include "core/emit.h"
#include "core/xform_int.h"
#include "view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes a reference to citation N as <N>, counts the content bytes that
 * go out as they came, and marks the ends of streams and bodies. */
typedef struct probe {
    size_t refs;
} probe_t;

typedef struct probe_choice {
    size_t text;
} probe_choice_t;

static bool probe_text(cg_xform_t *x, cg_choice_t *ch, const char *p, size_t n)
{
    probe_choice_t *pc = ch->state;
    pc->text += n;
    return false;
}

static bool probe_ref(cg_xform_t *x, cg_choice_t *ch, const cg_refrec_t *rec,
                      const cg_citation_t *c, cg_span_t text)
{
    probe_t *s = x->state;
    s->refs++;
    size_t from = x->out->arena.len;
    cg_buf_printf(&x->out->arena, "<%u>", c->id);
    cg__emit_arena_since(x->out, from);
    return true;
}

static bool probe_stream_end(cg_xform_t *x)
{
    const probe_t *s = x->state;
    const probe_choice_t *pc = x->choices[0].state;
    char line[64];
    snprintf(line, sizeof(line), ": refs=%zu text=%zu\n\n", s->refs, pc->text);
    cg__emit_str(x->out, line);
    return true;
}

static void probe_body_message(cg_xform_t *x, cg_choice_t *ch, int msg)
{
    cg__emit_str(x->out, "!");
}

static void probe_body_end(cg_xform_t *x, bool comma)
{
    cg__emit_str(x->out, comma ? ",\"probe\":true" : "\"probe\":true");
}

static const cg_profile_t probe = {
    .name = "probe",
    .transforms = true,
    .state_size = sizeof(probe_t),
    .choice_size = sizeof(probe_choice_t),
    .text = probe_text,
    .ref = probe_ref,
    .stream_end = probe_stream_end,
    .body_message = probe_body_message,
    .body_end = probe_body_end,
};

static const char *CTX =
    "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"context\":{\"citations\":["
    "{\"title\":\"One\",\"url\":\"https://x.example/1\"},{\"title\":\"Two\"}]}}}]}\n\n";

static void test_stream_hooks(void **state)
{
    (void)state;
    cg_buf_t in = {0};
    cg_buf_puts(&in, CTX);
    cg_buf_puts(&in, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a [do\"}}]}\n\n"
                     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c1] b [doc2] "
                     "[doc9]\"},\"finish_reason\":\"stop\"}]}\n\n"
                     "data: [DONE]\n\n");
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, &probe);
    size_t sizes[] = {1, 7, 64};
    for (size_t k = 0; k <= 3; k++) {
        cg_buf_t out = {0};
        run_stream(&cfg, NULL, in.p, in.len, k < 3 ? &sizes[k] : NULL, k < 3 ? 1 : 0, &out);
        view_t v;
        view_of_stream(&v, out.p, out.len);
        cg_buf_putc(&v.content[0], '\0');
        assert_string_equal(v.content[0].p, "a <1> b <2> [doc9]");
        /* "a ", " b ", " " and the unknown "[doc9]" went out as they came. */
        cg_buf_putc(&out, '\0');
        const char *end = strstr(out.p, ": refs=2 text=12\n\n");
        assert_non_null(end);
        assert_ptr_equal(strstr(out.p, "data: [DONE]"), end + strlen(": refs=2 text=12\n\n"));
        view_free(&v);
        cg_buf_free(&out);
    }
    cg_buf_free(&in);
}

static void test_body_hooks(void **state)
{
    (void)state;
    const char *body = "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"x [doc1]\","
                       "\"context\":{\"citations\":[{\"title\":\"One\"}]}}}]}";
    cg_xform_cfg_t cfg;
    cg_xform_cfg_default(&cfg, &probe);
    cg_xform_t *x = cg_xform_new(&cfg, NULL);
    cg_out_t out = {0};
    assert_int_equal(cg_xform_body(x, body, strlen(body), &out), 0);
    cg_buf_t b = {0};
    for (size_t i = 0; i < out.nseg; i++)
        cg_buf_put(&b, out.seg[i].p, out.seg[i].n);
    cg_buf_putc(&b, '\0');
    assert_non_null(strstr(b.p, "\"content\":\"x <1>!\""));
    const char *tail = "],\"probe\":true}";
    assert_string_equal(b.p + strlen(b.p) - strlen(tail), tail);
    assert_true(json_equal(b.p, b.len - 1, b.p, b.len - 1));
    cg_buf_free(&b);
    cg_out_free(&out);
    cg_xform_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_hooks),
        cmocka_unit_test(test_body_hooks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
