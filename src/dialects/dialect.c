/*
 * The registry of upstream dialects (include/citegate/dialect.h): name ->
 * dialect, the list of names for messages, and the generic calls the shell
 * and the transformer make, which go through each dialect's table. A
 * dialect is one file in src/dialects/ that defines cg__dialect_NAME, and
 * one entry in DIALECTS.
 */
#include "citegate/dialect.h"

#include <string.h>

/* Every dialect; the first is the default (CITEGATE_UPSTREAM_DIALECT). */
#define DIALECTS(X)                                                                                \
    X(openai, "openai") X(anthropic, "anthropic") X(responses, "responses") X(gemini, "gemini")    \
    X(vertex, "vertex") X(bedrock, "bedrock") X(bedrock_kb, "bedrock-kb") X(cohere, "cohere")

#define DECLARE(id, name) extern const cg_dialect_t cg__dialect_##id;
DIALECTS(DECLARE)

#define ENTRY(id, name) &cg__dialect_##id,
static const cg_dialect_t *const dialects[] = {DIALECTS(ENTRY)};
#define NDIALECTS (sizeof(dialects) / sizeof(dialects[0]))

/* ", openai, anthropic, …": each name as its dialect's table spells it. */
#define LISTED(id, name) ", " name
static const char names[] = DIALECTS(LISTED);

bool cg_dialect_parse(const char *name, const cg_dialect_t **out)
{
    for (size_t i = 0; i < NDIALECTS; i++) {
        if (strcmp(dialects[i]->name, name) == 0) {
            *out = dialects[i];
            return true;
        }
    }
    return false;
}

const char *cg_dialect_list(void)
{
    return names + 2;
}

const cg_dialect_t *cg_dialect_default(void)
{
    return dialects[0];
}

const char *cg_dialect_name(const cg_dialect_t *d)
{
    return d->name;
}

const char *cg_dialect_aws_service(const cg_dialect_t *d)
{
    return d->aws_service;
}

bool cg_dialect_aws_keys_required(const cg_dialect_t *d)
{
    return d->aws_keys_required;
}

bool cg_dialect_kb_config_required(const cg_dialect_t *d)
{
    return d->kb_config_required;
}

void cg_dialect_add_answer_headers(const cg_dialect_t *d, const cg_dialect_hdrs_t *h)
{
    if (d->answer_headers)
        d->answer_headers(h);
}

bool cg_dialect_translates(const cg_dialect_t *d)
{
    return d->request != NULL;
}

bool cg_dialect_path(const cg_dialect_t *d, const cg_dialect_req_t *r, cg_buf_t *out)
{
    if (d->path == NULL)
        return false;
    d->path(r, out);
    return true;
}

bool cg_dialect_forwards_header(const cg_dialect_t *d, cg_span_t name)
{
    return d->forwards == NULL || d->forwards(name);
}

void cg_dialect_add_headers(const cg_dialect_t *d, const cg_dialect_hdrs_t *h)
{
    if (d->headers)
        d->headers(h);
}

const cg_dialect_view_t *cg_dialect_view(const cg_dialect_t *d)
{
    return d->view;
}
