/* Configuration from the environment and flags: see include/citegate/config.h. */
#include "citegate/config.h"

#include "citegate/json.h"
#include "citegate/profile.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum {
    T_STR,
    T_ADDR,
    T_URL,
    T_UINT,
    T_SIZE,
    T_BOOL,
    T_ENUM,
    T_PROFILE,
    T_DIALECT,
    T_JSON,
    T_JSON_ARRAY,
    T_JSON_OBJECT,
    T_DSN
} vtype_t;

typedef struct var {
    const char *name;
    vtype_t type;
    size_t off;
    const char *def;          /* NULL: unset */
    unsigned long min, max;   /* numeric range */
    const char *const *names; /* T_ENUM: accepted words, in enum order */
    const char *flag;         /* the daemon's flag that sets it, or NULL */
    const char *filter_flag;  /* `citegate filter`'s flag that sets it, or NULL */
    const char *values;       /* what a value is, where no range or words say it */
    const char *help;         /* one line for --help */
} var_t;

static const char *const protocol_names[] = {"auto", "h2", "http1.1", NULL};
static const char *const format_names[] = {"text", "json", NULL};
static const char *const level_names[] = {"debug", "info", "warn", "error", NULL};
static const char *const style_words[] = {"auto", "doc", "numeric", "citation", NULL};
static const char *const onoff_names[] = {"off", "on", NULL};
/* In cg_cohere_citations_t's order. */
static const char *const cohere_modes[] = {"fast", "accurate", "off", NULL};

/*
 * Every setting, once: the parser, --help (cg_config_help) and the flags
 * (cg_config_flag_var) all read this table, and tests/tools/test_config_doc.py
 * holds docs/configuration.md to it, so none of them can fall behind.
 */
#define OFF(f) offsetof(cg_config_t, f)
static const var_t vars[] = {
    {"CITEGATE_LISTEN", T_ADDR, OFF(listen), "0.0.0.0:8080", 0, 0, NULL, "--listen", NULL,
     "HOST:PORT", "client listener: HTTP/1.1 and h2c on one port; TLS and ALPN with a certificate"},
    {"CITEGATE_ADMIN_LISTEN", T_ADDR, OFF(admin_listen), "127.0.0.1:9901", 0, 0, NULL,
     "--admin-listen", NULL, "HOST:PORT",
     "admin listener: /healthz, /readyz, /metrics, /v1/citations/*"},
    {"CITEGATE_TLS_CERT", T_STR, OFF(tls_cert), NULL, 0, 0, NULL, NULL, NULL, "PEM file",
     "certificate chain served on the client listener (with CITEGATE_TLS_KEY)"},
    {"CITEGATE_TLS_KEY", T_STR, OFF(tls_key), NULL, 0, 0, NULL, NULL, NULL, "PEM file",
     "private key of CITEGATE_TLS_CERT"},
    {"CITEGATE_UPSTREAM", T_URL, OFF(upstream), NULL, 0, 0, NULL, "--upstream", NULL,
     "http:// or https:// URL",
     "the upstream, scheme://host[:port][/base]; unset: the embedded demo"},
    {"CITEGATE_UPSTREAM_PROTOCOL", T_ENUM, OFF(upstream_protocol), "auto", 0, 0, protocol_names,
     NULL, NULL, NULL, "auto: ALPN on https, HTTP/1.1 on http; h2: h2, or h2c prior knowledge"},
    {"CITEGATE_UPSTREAM_CA", T_STR, OFF(upstream_ca), NULL, 0, 0, NULL, NULL, NULL, "PEM file",
     "CA certificates the upstream is verified against; unset: the system bundle"},
    {"CITEGATE_UPSTREAM_INSECURE", T_BOOL, OFF(upstream_insecure), "false", 0, 0, NULL, NULL, NULL,
     NULL, "skip upstream certificate verification (a warning at start)"},
    {"CITEGATE_UPSTREAM_MAX_CONNECTIONS", T_UINT, OFF(upstream_max_connections), "1024", 1, 65535,
     NULL, NULL, NULL, NULL,
     "upstream connections per worker (h2: each carries the peer's stream limit)"},
    {"CITEGATE_UPSTREAM_MAX_PENDING", T_UINT, OFF(upstream_max_pending), "1024", 0, 1000000, NULL,
     NULL, NULL, NULL,
     "requests per worker waiting for an upstream connection or stream; one more: 503"},
    {"CITEGATE_UPSTREAM_QUEUE_TIMEOUT_MS", T_UINT, OFF(upstream_queue_timeout_ms), "10000", 1,
     3600000, NULL, NULL, NULL, NULL, "longest wait in that queue, then 503"},
    {"CITEGATE_UPSTREAM_DIALECT", T_DIALECT, OFF(upstream_dialect), "openai", 0, 0, NULL, NULL,
     "--dialect", NULL,
     "the upstream's API: chat completions, Anthropic Messages, OpenAI Responses, Gemini, Vertex AI, "
     "Bedrock Converse, Bedrock Knowledge Bases, Cohere v2 Chat"},
    {"CITEGATE_GEMINI_TOOLS", T_JSON_ARRAY, OFF(gemini_tools), NULL, 0, 0, NULL, NULL, NULL,
     "JSON array", "sent as tools in every gemini/vertex request (e.g. [{\"googleSearch\":{}}])"},
    {"CITEGATE_BEDROCK_TOOL_CONFIG", T_JSON_OBJECT, OFF(bedrock_tool_config), NULL, 0, 0, NULL,
     NULL, NULL, "JSON object",
     "sent as toolConfig in every bedrock request (Nova web grounding: nova_grounding)"},
    {"CITEGATE_BEDROCK_KB", T_JSON_OBJECT, OFF(bedrock_kb), NULL, 0, 0, NULL, NULL, NULL,
     "JSON object",
     "bedrock-kb: sent as retrieveAndGenerateConfiguration in every request; required there"},
    {"CITEGATE_COHERE_CITATIONS", T_ENUM, OFF(cohere_citations), "fast", 0, 0, cohere_modes, NULL,
     NULL, NULL, "cohere: the citation_options.mode sent; off: none"},
    {"AWS_ACCESS_KEY_ID", T_STR, OFF(aws_access_key_id), NULL, 0, 0, NULL, NULL, NULL, "key id",
     "bedrock, bedrock-kb: with AWS_SECRET_ACCESS_KEY, every request is signed (SigV4); never "
     "logged"},
    {"AWS_SECRET_ACCESS_KEY", T_STR, OFF(aws_secret_access_key), NULL, 0, 0, NULL, NULL, NULL,
     "secret", "the key pair's secret; never logged"},
    {"AWS_SESSION_TOKEN", T_STR, OFF(aws_session_token), NULL, 0, 0, NULL, NULL, NULL, "token",
     "temporary credentials' token, sent signed as x-amz-security-token; never logged"},
    {"AWS_REGION", T_STR, OFF(aws_region), NULL, 0, 0, NULL, NULL, NULL, "region",
     "the SigV4 region; unset: AWS_DEFAULT_REGION, else the bedrock(-agent)-runtime host's"},
    {"AWS_DEFAULT_REGION", T_STR, OFF(aws_default_region), NULL, 0, 0, NULL, NULL, NULL, "region",
     "the SigV4 region when AWS_REGION is unset"},
    {"CITEGATE_MAX_CLIENT_CONNECTIONS", T_UINT, OFF(max_client_connections), "16384", 1, 1000000,
     NULL, NULL, NULL, NULL, "client connections per worker; at the cap accepting pauses"},
    {"CITEGATE_REQUEST_TIMEOUT_MS", T_UINT, OFF(request_timeout_ms), "30000", 1, 3600000, NULL,
     NULL, NULL, NULL, "TLS handshake and request head must arrive within it; idle keep-alive"},
    {"CITEGATE_MAX_EVENT_BYTES", T_SIZE, OFF(max_event_bytes), "4194304", 1024, 1u << 30, NULL,
     NULL, NULL, NULL, "largest SSE event parsed and rewritten; a larger one passes unchanged"},
    {"CITEGATE_CORS_ORIGINS", T_STR, OFF(cors_origins), NULL, 0, 0, NULL, NULL, NULL,
     "origins, comma-separated, or *", "answer CORS preflights for these; unset: no CORS handling"},
    {"CITEGATE_WORKERS", T_UINT, OFF(workers), "1", 1, 256, NULL, "--workers", NULL, NULL,
     "worker processes sharing the ports (SO_REUSEPORT), one event loop each"},
    {"CITEGATE_PROFILE", T_PROFILE, OFF(profile), "openwebui", 0, 0, NULL, "--profile", "--profile",
     NULL, "default output profile; per request: header X-Citegate-Profile"},
    {"CITEGATE_CITATION_ALIASES", T_ENUM, OFF(citation_aliases), "off", 0, 0, onoff_names, NULL,
     NULL, NULL,
     "structured: paths and boxes of tool outputs go upstream as P1/B1 aliases; per request: "
     "header X-Citegate-Aliases"},
    {"CITEGATE_REF_STYLE", T_ENUM, OFF(ref_style), "auto", 0, 0, style_words, NULL, "--ref-style",
     NULL, "references: doc [docN], numeric [N], citation [citation:N], auto: as they come"},
    {"CITEGATE_MAX_DOC_BYTES", T_SIZE, OFF(max_doc_bytes), "8192", 1, 1u << 24, NULL, NULL, NULL,
     NULL, "longest citation snippet in an emitted event (cut at a UTF-8 boundary)"},
    {"CITEGATE_MAX_REQUEST_BYTES", T_SIZE, OFF(max_request_bytes), "8388608", 1, 1u << 30, NULL,
     NULL, NULL, NULL, "request body limit; 413 beyond"},
    {"CITEGATE_CONNECT_TIMEOUT_MS", T_UINT, OFF(connect_timeout_ms), "5000", 1, 3600000, NULL, NULL,
     NULL, NULL, "upstream connect and TLS handshake"},
    {"CITEGATE_FIRST_BYTE_TIMEOUT_MS", T_UINT, OFF(first_byte_timeout_ms), "120000", 1, 86400000,
     NULL, NULL, NULL, NULL, "the upstream answer's head, once the request is sent"},
    {"CITEGATE_IDLE_TIMEOUT_MS", T_UINT, OFF(idle_timeout_ms), "300000", 1, 86400000, NULL, NULL,
     NULL, NULL, "no byte on a stream either way; never a cap on a stream's length"},
    {"CITEGATE_SHUTDOWN_GRACE_MS", T_UINT, OFF(shutdown_grace_ms), "30000", 0, 86400000, NULL, NULL,
     NULL, NULL, "how long streams may run on after SIGTERM"},
    {"CITEGATE_LOG_FORMAT", T_ENUM, OFF(log_json), "json", 0, 0, format_names, NULL, NULL, NULL,
     "one line per event on stderr"},
    {"CITEGATE_LOG_LEVEL", T_ENUM, OFF(log_level), "info", 0, 0, level_names, NULL, NULL, NULL,
     "least severe level logged"},
    {"AZURE_AI_DATA_SOURCES", T_JSON, OFF(data_sources), NULL, 0, 0, NULL, NULL, NULL,
     "JSON object or array", "injected as data_sources into chat requests that carry none"},
    {"AZURE_AI_INCLUDE_SEARCH_SCORES", T_BOOL, OFF(include_search_scores), "true", 0, 0, NULL, NULL,
     NULL, NULL, "injected sources ask for citations and all documents; scores emitted"},
    {"ENABLE_CITATION_TRACKING", T_BOOL, OFF(citation_tracking), "true", 0, 0, NULL, NULL, NULL,
     NULL, "per-answer citation analysis: /v1/citations/stats, metrics, a log line"},
    {"ENABLE_SEMANTIC_MEMORY", T_BOOL, OFF(semantic_memory), "true", 0, 0, NULL, NULL, NULL, NULL,
     "store tracked answers as patterns, recalled by /v1/citations/patterns"},
    {"SEMANTIC_MEMORY_DB_PATH", T_STR, OFF(memory_db_path), "./data/semantic-memory.db", 0, 0, NULL,
     NULL, NULL, "file path", "SQLite file of the patterns (created with its folder)"},
    {"SEMANTIC_MEMORY_PRUNE_AGE_DAYS", T_UINT, OFF(prune_age_days), "30", 0, 36500, NULL, NULL,
     NULL, NULL, "patterns older than this are deleted, at start and hourly; 0: never"},
    {"CITEGATE_TRACKING_DSN", T_DSN, OFF(tracking_dsn), NULL, 0, 0, NULL, NULL, NULL,
     "postgresql:// or postgres:// URI",
     "one PostgreSQL database shared by every replica; unset: SQLite"},
    {"CITEGATE_EMBEDDINGS_MODEL", T_STR, OFF(embeddings_model), NULL, 0, 0, NULL, NULL, NULL,
     "model name", "embed patterns and recall queries with it; unset: lexical recall only"},
    {"CITEGATE_EMBEDDINGS_URL", T_URL, OFF(embeddings_url), NULL, 0, 0, NULL, NULL, NULL,
     "http:// or https:// URL", "embeddings endpoint; unset: {upstream}/v1/embeddings (openai)"},
    {"CITEGATE_EMBEDDINGS_API_KEY", T_STR, OFF(embeddings_api_key), NULL, 0, 0, NULL, NULL, NULL,
     "key", "sent as Authorization: Bearer; unset: the caller's own key"},
};
#define NVARS (sizeof(vars) / sizeof(vars[0]))

bool cg_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "1", "yes"}, *const no[] = {"false", "0", "no"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = true, true;
        if (strcasecmp(s, no[i]) == 0)
            return *out = false, true;
    }
    return false;
}

bool cg_ref_style_parse(const char *s, cg_ref_style_t *out)
{
    static const cg_ref_style_t map[] = {CG_REF_ANY, CG_REF_DOC, CG_REF_NUMERIC, CG_REF_CITATION};
    for (int i = 0; style_words[i]; i++) {
        if (strcmp(s, style_words[i]) == 0) {
            *out = map[i];
            return true;
        }
    }
    return false;
}

const char *cg_ref_style_name(cg_ref_style_t s)
{
    switch (s) {
    case CG_REF_DOC: return "doc";
    case CG_REF_NUMERIC: return "numeric";
    case CG_REF_CITATION: return "citation";
    default: return "auto";
    }
}

/* Writes "VAR: 'value' problem" into err. */
static int fail(char *err, size_t errlen, const char *var, const char *value, const char *problem)
{
    if (value)
        snprintf(err, errlen, "%s: '%.80s' %s", var, value, problem);
    else
        snprintf(err, errlen, "%s: %s", var, problem);
    return -1;
}

static bool valid_addr(const char *s)
{
    const char *colon = strrchr(s, ':');
    if (colon == NULL || colon == s || colon[1] == '\0')
        return false;
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    return errno == 0 && *end == '\0' && port <= 65535;
}

static bool valid_url(const char *s)
{
    const char *rest;
    if (CG_HAS_IPREFIX(s, "https://"))
        rest = s + 8;
    else if (CG_HAS_IPREFIX(s, "http://"))
        rest = s + 7;
    else
        return false;
    return rest[0] != '\0' && rest[0] != '/' && rest[0] != ':';
}

/* Writes "VAR: 'value' is not one of: WORDS" into err. */
static int not_one_of(char *err, size_t errlen, const char *var, const char *value,
                      const char *words)
{
    char msg[200];
    snprintf(msg, sizeof(msg), "'%.40s' is not one of: %s", value, words);
    snprintf(err, errlen, "%s: %s", var, msg);
    return -1;
}

static int set_enum(const var_t *v, void *field, const char *value, char *err, size_t errlen)
{
    for (int i = 0; v->names[i]; i++) {
        if (strcmp(value, v->names[i]) != 0)
            continue;
        if (v->names[1] && v->names[2] == NULL) /* two words: a bool, the second true */
            *(bool *)field = i == 1;
        else if (v->off == OFF(ref_style))
            cg_ref_style_parse(value, (cg_ref_style_t *)field);
        else
            *(int *)field = i;
        return 0;
    }
    char words[128] = "";
    for (int i = 0; v->names[i]; i++) {
        strncat(words, i ? ", " : "", sizeof(words) - strlen(words) - 1);
        strncat(words, v->names[i], sizeof(words) - strlen(words) - 1);
    }
    return not_one_of(err, errlen, v->name, value, words);
}

static int set_number(const var_t *v, void *field, const char *value, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(value, &end, 10);
    if (value[0] == '\0' || value[0] == '-' || *end != '\0' || errno != 0)
        return fail(err, errlen, v->name, value, "is not a whole number");
    if (n < v->min || n > v->max) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%llu is out of range (%lu to %lu)", n, v->min, v->max);
        snprintf(err, errlen, "%s: %s", v->name, msg);
        return -1;
    }
    if (v->type == T_SIZE)
        *(size_t *)field = (size_t)n;
    else
        *(unsigned *)field = (unsigned)n;
    return 0;
}

/* A JSON object or array; only an array when array_only. */
static int set_json(const var_t *v, char **field, const char *value, char *err, size_t errlen)
{
    cg_json_t j;
    cg_json_init(&j, 1u << 16);
    int rc = cg_json_parse(&j, value, strlen(value));
    bool array = rc == CG_JSON_OK && j.tok[0].type == JSMN_ARRAY;
    bool object = rc == CG_JSON_OK && j.tok[0].type == JSMN_OBJECT;
    cg_json_free(&j);
    bool ok = v->type == T_JSON_ARRAY ? array : v->type == T_JSON_OBJECT ? object : array || object;
    if (!ok)
        return fail(err, errlen, v->name, NULL,
                    v->type == T_JSON_ARRAY    ? "is not a JSON array"
                    : v->type == T_JSON_OBJECT ? "is not a JSON object"
                                               : "is not a JSON object or array");
    free(*field);
    *field = cg_xstrndup(value, strlen(value));
    return 0;
}

bool cg_dsn_is_postgres(const char *s)
{
    return CG_HAS_PREFIX(s, "postgresql://") || CG_HAS_PREFIX(s, "postgres://");
}

/* Appends s[0..n) with the value of each `password=` parameter of its query
 * string replaced (the text after '?', parameters split at '&'). */
static void redact_query(cg_buf_t *out, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const char *amp = memchr(s + i, '&', n - i);
        size_t end = amp ? (size_t)(amp - s) : n;
        if (end - i >= 9 && strncmp(s + i, "password=", 9) == 0) {
            cg_buf_puts(out, "password=***");
        } else {
            cg_buf_put(out, s + i, end - i);
        }
        if (amp)
            cg_buf_putc(out, '&');
        i = end + 1;
    }
}

void cg_dsn_redact(const char *dsn, cg_buf_t *out)
{
    const char *auth = strstr(dsn, "://");
    if (auth == NULL) {
        cg_buf_puts(out, "***"); /* not a URI: it may be anything */
        return;
    }
    auth += 3;
    size_t alen = strcspn(auth, "/?");
    const char *at = NULL; /* the last '@' of the authority ends the user info */
    for (size_t i = 0; i < alen; i++)
        if (auth[i] == '@')
            at = auth + i;
    const char *colon = at ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon) {
        cg_buf_put(out, dsn, (size_t)(colon + 1 - dsn));
        cg_buf_puts(out, "***");
        cg_buf_put(out, at, (size_t)(auth + alen - at));
    } else {
        cg_buf_put(out, dsn, (size_t)(auth + alen - dsn));
    }
    const char *rest = auth + alen, *q = strchr(rest, '?');
    if (q == NULL) {
        cg_buf_puts(out, rest);
        return;
    }
    cg_buf_put(out, rest, (size_t)(q + 1 - rest));
    redact_query(out, q + 1, strlen(q + 1));
}

/* A DSN may hold a password: errors show it redacted. */
static int set_dsn(const var_t *v, char **field, const char *value, char *err, size_t errlen)
{
    if (value[0] && !cg_dsn_is_postgres(value)) {
        cg_buf_t shown = {0};
        cg_dsn_redact(value, &shown);
        snprintf(err, errlen, "%s: '%.*s' is not a postgresql:// URI", v->name,
                 (int)(shown.len > 80 ? 80 : shown.len), shown.p);
        cg_buf_free(&shown);
        return -1;
    }
    free(*field);
    *field = value[0] ? cg_xstrndup(value, strlen(value)) : NULL;
    return 0;
}

static int apply(cg_config_t *c, const var_t *v, const char *value, char *err, size_t errlen)
{
    void *field = (char *)c + v->off;
    switch (v->type) {
    case T_ADDR:
        if (!valid_addr(value))
            return fail(err, errlen, v->name, value, "is not HOST:PORT");
        /* fallthrough */
    case T_STR:
        free(*(char **)field);
        *(char **)field = value[0] ? cg_xstrndup(value, strlen(value)) : NULL;
        return 0;
    case T_URL:
        if (value[0] && !valid_url(value))
            return fail(err, errlen, v->name, value, "is not an http:// or https:// URL");
        free(*(char **)field);
        *(char **)field = value[0] ? cg_xstrndup(value, strlen(value)) : NULL;
        return 0;
    case T_UINT:
    case T_SIZE: return set_number(v, field, value, err, errlen);
    case T_BOOL:
        if (!cg_parse_bool(value, (bool *)field))
            return fail(err, errlen, v->name, value, "is not true/false/1/0/yes/no");
        return 0;
    case T_ENUM: return set_enum(v, field, value, err, errlen);
    case T_PROFILE:
        if (!cg_profile_parse(value, (const cg_profile_t **)field))
            return not_one_of(err, errlen, v->name, value, cg_profile_list());
        return 0;
    case T_DIALECT:
        if (!cg_dialect_parse(value, (const cg_dialect_t **)field))
            return not_one_of(err, errlen, v->name, value, cg_dialect_list());
        return 0;
    case T_JSON:
    case T_JSON_ARRAY:
    case T_JSON_OBJECT:
        return set_json(v, (char **)field, value, err, errlen);
    case T_DSN:
        return set_dsn(v, (char **)field, value, err, errlen);
    }
    return -1;
}

int cg_config_set(cg_config_t *c, const char *var, const char *value, char *err, size_t errlen)
{
    for (size_t i = 0; i < NVARS; i++)
        if (strcmp(vars[i].name, var) == 0)
            return apply(c, &vars[i], value, err, errlen);
    snprintf(err, errlen, "%s: unknown setting", var);
    return -1;
}

static const char *value_of(const char *var, const cg_config_flag_t *flags, size_t nflags)
{
    for (size_t k = nflags; k-- > 0;)
        if (strcmp(flags[k].var, var) == 0)
            return flags[k].value;
    return getenv(var);
}

int cg_config_load(cg_config_t *c, const cg_config_flag_t *flags, size_t nflags, char *err,
                   size_t errlen)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < NVARS; i++) {
        const char *value = value_of(vars[i].name, flags, nflags);
        if ((vars[i].def && apply(c, &vars[i], vars[i].def, err, errlen) != 0) ||
            (value && apply(c, &vars[i], value, err, errlen) != 0)) {
            cg_config_free(c);
            return -1;
        }
    }
    return 0;
}

int cg_config_from_env(cg_config_t *c, char *err, size_t errlen)
{
    return cg_config_load(c, NULL, 0, err, errlen);
}

void cg_config_free(cg_config_t *c)
{
    for (size_t i = 0; i < NVARS; i++) {
        if (vars[i].type == T_STR || vars[i].type == T_ADDR || vars[i].type == T_URL ||
            vars[i].type == T_JSON || vars[i].type == T_JSON_ARRAY ||
            vars[i].type == T_JSON_OBJECT || vars[i].type == T_DSN) {
            char **f = (char **)((char *)c + vars[i].off);
            free(*f);
            *f = NULL;
        }
    }
}

void cg_config_xform(const cg_config_t *c, cg_xform_cfg_t *x)
{
    cg_xform_cfg_default(x, c->profile);
    x->style = c->ref_style;
    x->max_doc_bytes = c->max_doc_bytes;
    x->scores = c->include_search_scores;
    x->max_event = c->max_event_bytes;
}

bool cg_config_aws_signs(const cg_config_t *c)
{
    return c->aws_access_key_id && c->aws_secret_access_key;
}

/* REGION of scheme://bedrock-runtime[-fips].REGION.amazonaws.com[:port][/...]. */
static const char *region_of_host(const char *url, char *buf, size_t n)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    static const char *const prefixes[] = {"bedrock-runtime-fips.", "bedrock-runtime.",
                                           "bedrock-agent-runtime.", NULL};
    for (int i = 0; prefixes[i]; i++) {
        size_t pl = strlen(prefixes[i]);
        if (strncasecmp(h, prefixes[i], pl) != 0)
            continue;
        const char *r = h + pl, *dot = strchr(r, '.');
        if (dot == NULL || dot == r || (size_t)(dot - r) >= n ||
            strncasecmp(dot, ".amazonaws.com", 14) != 0)
            return NULL;
        memcpy(buf, r, (size_t)(dot - r));
        buf[dot - r] = '\0';
        return buf;
    }
    return NULL;
}

const char *cg_config_aws_region(const cg_config_t *c, char *buf, size_t n)
{
    const char *r = c->aws_region ? c->aws_region : c->aws_default_region;
    if (r && strlen(r) < n) {
        strcpy(buf, r);
        return buf;
    }
    return c->upstream ? region_of_host(c->upstream, buf, n) : NULL;
}

const char *cg_config_flag_var(const char *flag, size_t n, bool filter)
{
    for (size_t i = 0; i < NVARS; i++) {
        const char *f = filter ? vars[i].filter_flag : vars[i].flag;
        if (f && strlen(f) == n && strncmp(f, flag, n) == 0)
            return vars[i].name;
    }
    return NULL;
}

const char *cg_config_var_name(size_t i)
{
    return i < NVARS ? vars[i].name : NULL;
}

/* What a value of v may be: its range, its words, or the table's text. */
static void put_values(cg_buf_t *out, const var_t *v)
{
    switch (v->type) {
    case T_UINT:
    case T_SIZE: cg_buf_printf(out, "%lu to %lu", v->min, v->max); return;
    case T_BOOL: cg_buf_puts(out, "true, false, 1, 0, yes, no"); return;
    case T_PROFILE: cg_buf_puts(out, cg_profile_list()); return;
    case T_DIALECT: cg_buf_puts(out, cg_dialect_list()); return;
    case T_ENUM:
        for (int i = 0; v->names[i]; i++)
            cg_buf_printf(out, "%s%s", i ? ", " : "", v->names[i]);
        return;
    default: cg_buf_puts(out, v->values); return;
    }
}

void cg_config_help(cg_buf_t *out)
{
    cg_buf_puts(out, "settings (a flag wins over its variable):\n");
    for (size_t i = 0; i < NVARS; i++) {
        const var_t *v = &vars[i];
        cg_buf_printf(out, "  %s", v->name);
        if (v->flag)
            cg_buf_printf(out, ", %s", v->flag);
        if (v->filter_flag)
            cg_buf_printf(out, ", filter %s", v->filter_flag);
        cg_buf_printf(out, "  default: %s  values: ", v->def ? v->def : "unset");
        put_values(out, v);
        cg_buf_printf(out, "\n      %s\n", v->help);
    }
}
