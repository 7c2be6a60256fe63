/*
 * Unit tests of configuration from the environment and flags
 * (include/citegate/config.h, SPEC §2-3).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "citegate/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int clear_env(void **state)
{
    (void)state;
    /* Every variable of the settings table, so none can be left out. */
    for (size_t i = 0; cg_config_var_name(i); i++)
        unsetenv(cg_config_var_name(i));
    return 0;
}

/* Loads the configuration with one variable set; returns cg_config_from_env's result. */
static int load_with(cg_config_t *c, const char *var, const char *value, char *err, size_t errlen)
{
    clear_env(NULL);
    if (var)
        assert_int_equal(setenv(var, value, 1), 0);
    err[0] = '\0';
    int rc = cg_config_from_env(c, err, errlen);
    if (var)
        unsetenv(var);
    return rc;
}

/* The value must be accepted. */
static void accept_val(cg_config_t *c, const char *var, const char *value)
{
    char err[256];
    int rc = load_with(c, var, value, err, sizeof(err));
    if (rc != 0) {
        print_error("%s=%s rejected: %s\n", var, value, err);
        cg_config_free(c);
        fail();
    }
}

/* The value must be rejected with a one-line message that starts with "VAR: ". */
static void reject_val(const char *var, const char *value)
{
    cg_config_t c;
    char err[256];
    int rc = load_with(&c, var, value, err, sizeof(err));
    cg_config_free(&c);
    if (rc != -1) {
        print_error("%s='%s' accepted (rc %d), want an error\n", var, value, rc);
        fail();
    }
    size_t n = strlen(var);
    if (strncmp(err, var, n) != 0 || err[n] != ':' || strchr(err, '\n') != NULL ||
        strlen(err) <= n + 2) {
        print_error("%s='%s': error message \"%s\" does not start with \"%s:\"\n", var, value, err,
                    var);
        fail();
    }
}

static void accept_val_free(const char *var, const char *value)
{
    cg_config_t c;
    accept_val(&c, var, value);
    cg_config_free(&c);
}

/* ---- defaults ----------------------------------------------------------------- */

static void test_defaults(void **state)
{
    (void)state;
    cg_config_t c;
    char err[256] = "";
    assert_int_equal(cg_config_from_env(&c, err, sizeof(err)), 0);
    assert_non_null(c.listen);
    assert_string_equal(c.listen, "0.0.0.0:8080");
    assert_non_null(c.admin_listen);
    assert_string_equal(c.admin_listen, "127.0.0.1:9901");
    assert_null(c.tls_cert);
    assert_null(c.tls_key);
    assert_null(c.upstream);
    assert_int_equal(c.upstream_protocol, CG_PROTO_AUTO);
    assert_null(c.upstream_ca);
    assert_false(c.upstream_insecure);
    assert_int_equal(c.upstream_max_connections, 1024);
    assert_int_equal(c.upstream_max_pending, 1024);
    assert_int_equal(c.upstream_queue_timeout_ms, 10000);
    assert_string_equal(c.upstream_dialect->name, "openai");
    assert_int_equal(c.max_client_connections, 16384);
    assert_int_equal(c.request_timeout_ms, 30000);
    assert_int_equal(c.max_event_bytes, 4194304);
    assert_null(c.cors_origins);
    assert_int_equal(c.workers, 1);
    assert_string_equal(c.profile->name, "openwebui");
    assert_int_equal(c.ref_style, CG_REF_ANY);
    assert_int_equal(c.max_doc_bytes, 8192);
    assert_int_equal(c.max_request_bytes, 8388608);
    assert_int_equal(c.connect_timeout_ms, 5000);
    assert_int_equal(c.first_byte_timeout_ms, 120000);
    assert_int_equal(c.idle_timeout_ms, 300000);
    assert_int_equal(c.shutdown_grace_ms, 30000);
    assert_true(c.log_json);
    assert_int_equal(c.log_level, CG_LOG_INFO);
    assert_null(c.data_sources);
    assert_true(c.include_search_scores);
    assert_true(c.citation_tracking);
    assert_true(c.semantic_memory);
    assert_non_null(c.memory_db_path);
    assert_string_equal(c.memory_db_path, "./data/semantic-memory.db");
    assert_int_equal(c.prune_age_days, 30);
    assert_false(c.demo);

    cg_xform_cfg_t x;
    cg_config_xform(&c, &x);
    assert_string_equal(x.profile->name, "openwebui");
    assert_int_equal(x.style, CG_REF_ANY);
    assert_int_equal(x.max_doc_bytes, 8192);
    assert_true(x.scores);
    assert_int_equal(x.max_event, 4194304);
    cg_config_free(&c);
    assert_null(c.listen);
    assert_null(c.memory_db_path);
}

/* ---- each variable -------------------------------------------------------------- */

static void test_strings(void **state)
{
    (void)state;
    cg_config_t c;
    accept_val(&c, "CITEGATE_LISTEN", "127.0.0.1:9000");
    assert_string_equal(c.listen, "127.0.0.1:9000");
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_LISTEN", "[::1]:8443");
    assert_string_equal(c.listen, "[::1]:8443");
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_ADMIN_LISTEN", "0.0.0.0:19901");
    assert_string_equal(c.admin_listen, "0.0.0.0:19901");
    assert_string_equal(c.listen, "0.0.0.0:8080");
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_TLS_CERT", "/etc/cg/cert.pem");
    assert_string_equal(c.tls_cert, "/etc/cg/cert.pem");
    assert_null(c.tls_key);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_TLS_KEY", "/etc/cg/key.pem");
    assert_string_equal(c.tls_key, "/etc/cg/key.pem");
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_UPSTREAM_CA", "/etc/ssl/ca.pem");
    assert_string_equal(c.upstream_ca, "/etc/ssl/ca.pem");
    cg_config_free(&c);
    accept_val(&c, "SEMANTIC_MEMORY_DB_PATH", "/var/lib/cg/mem.db");
    assert_string_equal(c.memory_db_path, "/var/lib/cg/mem.db");
    cg_config_free(&c);

    reject_val("CITEGATE_LISTEN", "8080");
    reject_val("CITEGATE_LISTEN", "localhost:");
    reject_val("CITEGATE_LISTEN", "localhost:99999");
    reject_val("CITEGATE_LISTEN", "localhost:http");
    reject_val("CITEGATE_LISTEN", "");
    reject_val("CITEGATE_ADMIN_LISTEN", "nope");
}

static void test_numbers(void **state)
{
    (void)state;
    cg_config_t c;
    accept_val(&c, "CITEGATE_UPSTREAM_MAX_CONNECTIONS", "64");
    assert_int_equal(c.upstream_max_connections, 64);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_WORKERS", "4");
    assert_int_equal(c.workers, 4);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_MAX_DOC_BYTES", "100");
    assert_int_equal(c.max_doc_bytes, 100);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_MAX_REQUEST_BYTES", "1048576");
    assert_int_equal(c.max_request_bytes, 1048576);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_CONNECT_TIMEOUT_MS", "250");
    assert_int_equal(c.connect_timeout_ms, 250);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_FIRST_BYTE_TIMEOUT_MS", "60000");
    assert_int_equal(c.first_byte_timeout_ms, 60000);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_IDLE_TIMEOUT_MS", "1000");
    assert_int_equal(c.idle_timeout_ms, 1000);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_SHUTDOWN_GRACE_MS", "0");
    assert_int_equal(c.shutdown_grace_ms, 0);
    cg_config_free(&c);
    accept_val(&c, "SEMANTIC_MEMORY_PRUNE_AGE_DAYS", "7");
    assert_int_equal(c.prune_age_days, 7);
    cg_config_free(&c);

    static const char *const numeric[] = {
        "CITEGATE_UPSTREAM_MAX_CONNECTIONS",
        "CITEGATE_WORKERS",
        "CITEGATE_MAX_DOC_BYTES",
        "CITEGATE_MAX_REQUEST_BYTES",
        "CITEGATE_CONNECT_TIMEOUT_MS",
        "CITEGATE_FIRST_BYTE_TIMEOUT_MS",
        "CITEGATE_IDLE_TIMEOUT_MS",
        "CITEGATE_SHUTDOWN_GRACE_MS",
        "SEMANTIC_MEMORY_PRUNE_AGE_DAYS",
    };
    static const char *const bad[] = {
        "", "abc", "-1", "12abc", "1.5", "0x10", "99999999999999999999999999", "1e3",
    };
    for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++)
        for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
            reject_val(numeric[i], bad[k]);
}

static void test_number_ranges(void **state)
{
    (void)state;
    reject_val("CITEGATE_WORKERS", "0");
    reject_val("CITEGATE_WORKERS", "100000");
    reject_val("CITEGATE_UPSTREAM_MAX_CONNECTIONS", "0");
    reject_val("CITEGATE_UPSTREAM_MAX_CONNECTIONS", "4294967296");
    reject_val("CITEGATE_MAX_DOC_BYTES", "0");
    reject_val("CITEGATE_MAX_REQUEST_BYTES", "0");
    reject_val("CITEGATE_CONNECT_TIMEOUT_MS", "0");
    reject_val("CITEGATE_FIRST_BYTE_TIMEOUT_MS", "0");
    reject_val("CITEGATE_IDLE_TIMEOUT_MS", "0");
    reject_val("CITEGATE_IDLE_TIMEOUT_MS", "18446744073709551615");
    reject_val("SEMANTIC_MEMORY_PRUNE_AGE_DAYS", "4294967297");
    /* a value that would wrap around a 32-bit field is not silently truncated */
    reject_val("CITEGATE_SHUTDOWN_GRACE_MS", "4294967296");
    accept_val_free("CITEGATE_WORKERS", "1");
    accept_val_free("CITEGATE_WORKERS", "256");
}

static void test_booleans(void **state)
{
    (void)state;
    static const char *const vars[] = {
        "CITEGATE_UPSTREAM_INSECURE",
        "AZURE_AI_INCLUDE_SEARCH_SCORES",
        "ENABLE_CITATION_TRACKING",
        "ENABLE_SEMANTIC_MEMORY",
    };
    static const struct {
        const char *s;
        bool v;
    } good[] = {
        {"true", true}, {"TRUE", true}, {"True", true},   {"1", true},      {"yes", true},
        {"YES", true},  {"yEs", true},  {"false", false}, {"FALSE", false}, {"False", false},
        {"0", false},   {"no", false},  {"NO", false},    {"nO", false},
    };
    static const char *const bad[] = {"",      "on",    "off",   "2",    "y",  "n",  "t",   "f",
                                      "truee", " true", "true ", "yes!", "01", "-1", "null"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        for (size_t k = 0; k < sizeof(good) / sizeof(good[0]); k++) {
            cg_config_t c;
            accept_val(&c, vars[i], good[k].s);
            bool got = i == 0   ? c.upstream_insecure
                       : i == 1 ? c.include_search_scores
                       : i == 2 ? c.citation_tracking
                                : c.semantic_memory;
            if (got != good[k].v) {
                print_error("%s=%s gave %d\n", vars[i], good[k].s, got);
                cg_config_free(&c);
                fail();
            }
            cg_config_free(&c);
        }
        for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
            reject_val(vars[i], bad[k]);
    }

    bool b = false;
    assert_true(cg_parse_bool("Yes", &b));
    assert_true(b);
    assert_true(cg_parse_bool("0", &b));
    assert_false(b);
    b = true;
    assert_false(cg_parse_bool("maybe", &b));
    assert_true(b); /* untouched */
}

static void test_upstream_url(void **state)
{
    (void)state;
    cg_config_t c;
    accept_val(&c, "CITEGATE_UPSTREAM", "https://example.openai.azure.com");
    assert_string_equal(c.upstream, "https://example.openai.azure.com");
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_UPSTREAM", "http://127.0.0.1:11434/v1");
    assert_string_equal(c.upstream, "http://127.0.0.1:11434/v1");
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_UPSTREAM", "HTTPS://Host:8443/base/");
    assert_string_equal(c.upstream, "HTTPS://Host:8443/base/");
    cg_config_free(&c);
    /* unset or empty: the demo upstream */
    accept_val(&c, "CITEGATE_UPSTREAM", "");
    assert_null(c.upstream);
    cg_config_free(&c);

    reject_val("CITEGATE_UPSTREAM", "ftp://example.com");
    reject_val("CITEGATE_UPSTREAM", "example.com");
    reject_val("CITEGATE_UPSTREAM", "example.com:443");
    reject_val("CITEGATE_UPSTREAM", "http://");
    reject_val("CITEGATE_UPSTREAM", "https://");
    reject_val("CITEGATE_UPSTREAM", "https:///path");
    reject_val("CITEGATE_UPSTREAM", "ws://example.com");
    reject_val("CITEGATE_UPSTREAM", "httpx://example.com");
    reject_val("CITEGATE_UPSTREAM", "//example.com");
}

static void test_data_sources(void **state)
{
    (void)state;
    cg_config_t c;
    static const char obj[] = "{\"type\":\"azure_search\",\"parameters\":{\"endpoint\":\"https://"
                              "s\",\"index_name\":\"i\"}}";
    accept_val(&c, "AZURE_AI_DATA_SOURCES", obj);
    assert_non_null(c.data_sources);
    assert_string_equal(c.data_sources, obj);
    cg_config_free(&c);
    accept_val(&c, "AZURE_AI_DATA_SOURCES", " [ {\"type\":\"azure_search\"} ] ");
    assert_string_equal(c.data_sources, " [ {\"type\":\"azure_search\"} ] ");
    cg_config_free(&c);
    accept_val(&c, "AZURE_AI_DATA_SOURCES", "[]");
    assert_string_equal(c.data_sources, "[]");
    cg_config_free(&c);

    /* the fixture value */
    FILE *f = fopen(CG_FIXTURES "/azure_data_sources.json", "rb");
    assert_non_null(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    assert_true(n > 0);
    buf[n] = '\0';
    accept_val(&c, "AZURE_AI_DATA_SOURCES", buf);
    assert_string_equal(c.data_sources, buf);
    cg_config_free(&c);

    reject_val("AZURE_AI_DATA_SOURCES", "\"azure_search\"");
    reject_val("AZURE_AI_DATA_SOURCES", "42 ");
    reject_val("AZURE_AI_DATA_SOURCES", "null ");
    reject_val("AZURE_AI_DATA_SOURCES", "true ");
    reject_val("AZURE_AI_DATA_SOURCES", "not json");
    reject_val("AZURE_AI_DATA_SOURCES", "{");
    reject_val("AZURE_AI_DATA_SOURCES", "{\"a\":1}{\"b\":2}");
    reject_val("AZURE_AI_DATA_SOURCES", "[1,2");
}

/* CITEGATE_GEMINI_TOOLS: a JSON array, kept as given; anything else is a
 * configuration error that names the variable. */
static void test_gemini_tools(void **state)
{
    (void)state;
    cg_config_t c;
    accept_val(&c, "CITEGATE_UPSTREAM_DIALECT", "gemini");
    assert_null(c.gemini_tools);
    cg_config_free(&c);
    static const char datastore[] =
        " [ {\"retrieval\": {\"vertexAiSearch\": {\"datastore\": \"projects/p/locations/"
        "global/collections/default_collection/dataStores/d\"}}} ]\n";
    static const char *const good[] = {"[{\"googleSearch\":{}}]", datastore, "[]"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        accept_val(&c, "CITEGATE_GEMINI_TOOLS", good[i]);
        assert_string_equal(c.gemini_tools, good[i]);
        cg_config_free(&c);
        assert_null(c.gemini_tools);
    }
    static const char *const bad[] = {"{\"googleSearch\":{}}", "googleSearch", "",  "[",
                                      "[{\"googleSearch\":{}}",  "[] []",        "null", "1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        reject_val("CITEGATE_GEMINI_TOOLS", bad[i]);
    char err[256];
    assert_int_equal(load_with(&c, "CITEGATE_GEMINI_TOOLS", "{}", err, sizeof(err)), -1);
    assert_string_equal(err, "CITEGATE_GEMINI_TOOLS: is not a JSON array");
}

/* CITEGATE_BEDROCK_KB: a JSON object, kept as given; anything else names
 * the variable. */
static void test_bedrock_kb(void **state)
{
    (void)state;
    cg_config_t c;
    static const char kb[] = "{\"type\":\"KNOWLEDGE_BASE\",\"knowledgeBaseConfiguration\":"
                             "{\"knowledgeBaseId\":\"KB1\",\"modelArn\":\"arn:aws:bedrock:x\"}}";
    accept_val(&c, "CITEGATE_BEDROCK_KB", kb);
    assert_string_equal(c.bedrock_kb, kb);
    cg_config_free(&c);
    assert_null(c.bedrock_kb);
    static const char *const bad[] = {"[]", "KB1", "", "{", "{} {}", "null", "\"x\""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        reject_val("CITEGATE_BEDROCK_KB", bad[i]);
    char err[256];
    assert_int_equal(load_with(&c, "CITEGATE_BEDROCK_KB", "[]", err, sizeof(err)), -1);
    assert_string_equal(err, "CITEGATE_BEDROCK_KB: is not a JSON object");
}

/* CITEGATE_COHERE_CITATIONS: fast (the default), accurate or off, exactly. */
static void test_cohere_citations(void **state)
{
    (void)state;
    cg_config_t c;
    char err[256];
    assert_int_equal(load_with(&c, NULL, NULL, err, sizeof(err)), 0);
    assert_int_equal(c.cohere_citations, CG_COHERE_FAST);
    cg_config_free(&c);
    static const struct {
        const char *value;
        cg_cohere_citations_t mode;
    } good[] = {{"fast", CG_COHERE_FAST}, {"accurate", CG_COHERE_ACCURATE}, {"off", CG_COHERE_OFF}};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        accept_val(&c, "CITEGATE_COHERE_CITATIONS", good[i].value);
        assert_int_equal(c.cohere_citations, good[i].mode);
        cg_config_free(&c);
    }
    static const char *const bad[] = {"FAST", "on", "", "fast ", "none"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        reject_val("CITEGATE_COHERE_CITATIONS", bad[i]);
    assert_int_equal(load_with(&c, "CITEGATE_COHERE_CITATIONS", "slow", err, sizeof(err)), -1);
    assert_string_equal(err,
                        "CITEGATE_COHERE_CITATIONS: 'slow' is not one of: fast, accurate, off");
}

static void test_enums(void **state)
{
    (void)state;
    cg_config_t c;
    accept_val(&c, "CITEGATE_PROFILE", "off");
    assert_string_equal(c.profile->name, "off");
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_PROFILE", "openwebui");
    assert_string_equal(c.profile->name, "openwebui");
    cg_config_free(&c);
    reject_val("CITEGATE_PROFILE", "bogus");
    reject_val("CITEGATE_PROFILE", "");

    accept_val(&c, "CITEGATE_REF_STYLE", "doc");
    assert_int_equal(c.ref_style, CG_REF_DOC);
    cg_xform_cfg_t x;
    cg_config_xform(&c, &x);
    assert_int_equal(x.style, CG_REF_DOC);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_REF_STYLE", "numeric");
    assert_int_equal(c.ref_style, CG_REF_NUMERIC);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_REF_STYLE", "citation");
    assert_int_equal(c.ref_style, CG_REF_CITATION);
    cg_config_xform(&c, &x);
    assert_int_equal(x.style, CG_REF_CITATION);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_REF_STYLE", "auto");
    assert_int_equal(c.ref_style, CG_REF_ANY);
    cg_config_free(&c);
    reject_val("CITEGATE_REF_STYLE", "docs");
    reject_val("CITEGATE_REF_STYLE", "Citation");
    reject_val("CITEGATE_REF_STYLE", "citation:");
    reject_val("CITEGATE_REF_STYLE", "[N]");
    reject_val("CITEGATE_REF_STYLE", "");

    accept_val(&c, "CITEGATE_UPSTREAM_PROTOCOL", "h2");
    assert_int_equal(c.upstream_protocol, CG_PROTO_H2);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_UPSTREAM_PROTOCOL", "http1.1");
    assert_int_equal(c.upstream_protocol, CG_PROTO_HTTP1);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_UPSTREAM_PROTOCOL", "auto");
    assert_int_equal(c.upstream_protocol, CG_PROTO_AUTO);
    cg_config_free(&c);
    reject_val("CITEGATE_UPSTREAM_PROTOCOL", "h3");
    reject_val("CITEGATE_UPSTREAM_PROTOCOL", "http2");
    reject_val("CITEGATE_UPSTREAM_PROTOCOL", "http/1.1");
    reject_val("CITEGATE_UPSTREAM_PROTOCOL", "");

    static const char *const dialects[] = {"openai", "anthropic", "responses", "gemini",
                                           "vertex", "bedrock", "bedrock-kb", "cohere"};
    for (size_t i = 0; i < sizeof(dialects) / sizeof(dialects[0]); i++) {
        accept_val(&c, "CITEGATE_UPSTREAM_DIALECT", dialects[i]);
        assert_string_equal(c.upstream_dialect->name, dialects[i]);
        cg_config_free(&c);
    }
    reject_val("CITEGATE_UPSTREAM_DIALECT", "bedrock_kb");
    reject_val("CITEGATE_UPSTREAM_DIALECT", "Anthropic");
    reject_val("CITEGATE_UPSTREAM_DIALECT", "claude");
    reject_val("CITEGATE_UPSTREAM_DIALECT", "chat");
    reject_val("CITEGATE_UPSTREAM_DIALECT", "responses ");
    reject_val("CITEGATE_UPSTREAM_DIALECT", "");
    char err[256];
    assert_int_equal(load_with(&c, "CITEGATE_UPSTREAM_DIALECT", "mistral", err, sizeof(err)), -1);
    assert_string_equal(err, "CITEGATE_UPSTREAM_DIALECT: 'mistral' is not one of: openai, "
                             "anthropic, responses, gemini, vertex, bedrock, bedrock-kb, cohere");

    accept_val(&c, "CITEGATE_LOG_FORMAT", "text");
    assert_false(c.log_json);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_LOG_FORMAT", "json");
    assert_true(c.log_json);
    cg_config_free(&c);
    reject_val("CITEGATE_LOG_FORMAT", "xml");
    reject_val("CITEGATE_LOG_FORMAT", "");

    static const struct {
        const char *s;
        cg_log_level_t v;
    } levels[] = {{"debug", CG_LOG_DEBUG},
                  {"info", CG_LOG_INFO},
                  {"warn", CG_LOG_WARN},
                  {"error", CG_LOG_ERROR}};
    for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
        accept_val(&c, "CITEGATE_LOG_LEVEL", levels[i].s);
        assert_int_equal(c.log_level, levels[i].v);
        cg_config_free(&c);
    }
    reject_val("CITEGATE_LOG_LEVEL", "trace");
    reject_val("CITEGATE_LOG_LEVEL", "warning");
    reject_val("CITEGATE_LOG_LEVEL", "");

    cg_ref_style_t st = CG_REF_DOC;
    assert_true(cg_ref_style_parse("numeric", &st));
    assert_int_equal(st, CG_REF_NUMERIC);
    assert_false(cg_ref_style_parse("bogus", &st));
    assert_int_equal(st, CG_REF_NUMERIC);
    assert_string_equal(cg_ref_style_name(CG_REF_DOC), "doc");
    assert_string_equal(cg_ref_style_name(CG_REF_NUMERIC), "numeric");
    assert_string_equal(cg_ref_style_name(CG_REF_CITATION), "citation");
    assert_string_equal(cg_ref_style_name(CG_REF_ANY), "auto");
    assert_true(cg_ref_style_parse("citation", &st));
    assert_int_equal(st, CG_REF_CITATION);
}

/* Several variables at once, each applied. */
static void test_many_at_once(void **state)
{
    (void)state;
    assert_int_equal(setenv("CITEGATE_WORKERS", "3", 1), 0);
    assert_int_equal(setenv("CITEGATE_PROFILE", "off", 1), 0);
    assert_int_equal(setenv("CITEGATE_LOG_LEVEL", "debug", 1), 0);
    assert_int_equal(setenv("ENABLE_SEMANTIC_MEMORY", "no", 1), 0);
    assert_int_equal(setenv("CITEGATE_UPSTREAM", "https://up.example", 1), 0);
    cg_config_t c;
    char err[256] = "";
    assert_int_equal(cg_config_from_env(&c, err, sizeof(err)), 0);
    assert_int_equal(c.workers, 3);
    assert_string_equal(c.profile->name, "off");
    assert_int_equal(c.log_level, CG_LOG_DEBUG);
    assert_false(c.semantic_memory);
    assert_string_equal(c.upstream, "https://up.example");
    assert_true(c.citation_tracking);
    cg_config_free(&c);

    /* one bad variable among good ones is reported by name */
    assert_int_equal(setenv("CITEGATE_MAX_DOC_BYTES", "lots", 1), 0);
    assert_int_equal(cg_config_from_env(&c, err, sizeof(err)), -1);
    assert_int_equal(strncmp(err, "CITEGATE_MAX_DOC_BYTES:", 23), 0);
    cg_config_free(&c);
    clear_env(NULL);
}

/* ---- cg_config_set ---------------------------------------------------------------- */

static void test_set_overrides(void **state)
{
    (void)state;
    assert_int_equal(setenv("CITEGATE_WORKERS", "4", 1), 0);
    assert_int_equal(setenv("CITEGATE_PROFILE", "off", 1), 0);
    assert_int_equal(setenv("CITEGATE_UPSTREAM", "http://env.example", 1), 0);
    assert_int_equal(setenv("CITEGATE_LISTEN", "127.0.0.1:1111", 1), 0);
    cg_config_t c;
    char err[256] = "";
    assert_int_equal(cg_config_from_env(&c, err, sizeof(err)), 0);
    assert_int_equal(c.workers, 4);

    /* a flag wins over its variable */
    assert_int_equal(cg_config_set(&c, "CITEGATE_WORKERS", "8", err, sizeof(err)), 0);
    assert_int_equal(c.workers, 8);
    assert_int_equal(cg_config_set(&c, "CITEGATE_PROFILE", "openwebui", err, sizeof(err)), 0);
    assert_string_equal(c.profile->name, "openwebui");
    assert_int_equal(
        cg_config_set(&c, "CITEGATE_UPSTREAM", "https://flag.example", err, sizeof(err)), 0);
    assert_string_equal(c.upstream, "https://flag.example");
    assert_int_equal(cg_config_set(&c, "CITEGATE_LISTEN", "0.0.0.0:2222", err, sizeof(err)), 0);
    assert_string_equal(c.listen, "0.0.0.0:2222");
    assert_int_equal(cg_config_set(&c, "CITEGATE_REF_STYLE", "numeric", err, sizeof(err)), 0);
    assert_int_equal(c.ref_style, CG_REF_NUMERIC);
    assert_int_equal(cg_config_set(&c, "CITEGATE_UPSTREAM_DIALECT", "responses", err, sizeof(err)),
                     0);
    assert_string_equal(c.upstream_dialect->name, "responses");
    assert_int_equal(cg_config_set(&c, "CITEGATE_UPSTREAM_DIALECT", "x", err, sizeof(err)), -1);
    assert_int_equal(strncmp(err, "CITEGATE_UPSTREAM_DIALECT:", 26), 0);
    assert_string_equal(c.upstream_dialect->name, "responses"); /* unchanged */
    assert_int_equal(cg_config_set(&c, "ENABLE_CITATION_TRACKING", "off?", err, sizeof(err)), -1);
    assert_int_equal(strncmp(err, "ENABLE_CITATION_TRACKING:", 25), 0);
    assert_int_equal(cg_config_set(&c, "ENABLE_CITATION_TRACKING", "FALSE", err, sizeof(err)), 0);
    assert_false(c.citation_tracking);
    assert_int_equal(
        cg_config_set(&c, "AZURE_AI_DATA_SOURCES", "{\"type\":\"x\"}", err, sizeof(err)), 0);
    assert_string_equal(c.data_sources, "{\"type\":\"x\"}");
    assert_int_equal(
        cg_config_set(&c, "AZURE_AI_DATA_SOURCES", "[{\"type\":\"y\"}]", err, sizeof(err)), 0);
    assert_string_equal(c.data_sources, "[{\"type\":\"y\"}]");

    /* invalid flag values are rejected by name */
    assert_int_equal(cg_config_set(&c, "CITEGATE_WORKERS", "0", err, sizeof(err)), -1);
    assert_int_equal(strncmp(err, "CITEGATE_WORKERS:", 17), 0);
    assert_int_equal(cg_config_set(&c, "CITEGATE_PROFILE", "nope", err, sizeof(err)), -1);
    assert_int_equal(strncmp(err, "CITEGATE_PROFILE:", 17), 0);
    assert_int_equal(cg_config_set(&c, "CITEGATE_UPSTREAM", "file:///x", err, sizeof(err)), -1);
    assert_int_equal(strncmp(err, "CITEGATE_UPSTREAM:", 18), 0);
    assert_int_equal(cg_config_set(&c, "NO_SUCH_SETTING", "1", err, sizeof(err)), -1);
    assert_int_equal(strncmp(err, "NO_SUCH_SETTING:", 16), 0);

    /* variables are read again on the next load; the flag values were not written back */
    cg_config_free(&c);
    assert_int_equal(cg_config_from_env(&c, err, sizeof(err)), 0);
    assert_int_equal(c.workers, 4);
    assert_string_equal(c.profile->name, "off");
    cg_config_free(&c);
    clear_env(NULL);
}

/* Messages fit in a small buffer without overflowing it. */
static void test_error_truncation(void **state)
{
    (void)state;
    assert_int_equal(setenv("CITEGATE_WORKERS", "not-a-number-at-all", 1), 0);
    cg_config_t c;
    char err[12];
    memset(err, 'X', sizeof(err));
    assert_int_equal(cg_config_from_env(&c, err, sizeof(err)), -1);
    assert_non_null(memchr(err, '\0', sizeof(err)));
    assert_int_equal(strncmp(err, "CITEGATE_WO", 11), 0);
    cg_config_free(&c);
    clear_env(NULL);
}

/* ---- CITEGATE_TRACKING_DSN ---------------------------------------------------- */

static void test_tracking_dsn(void **state)
{
    (void)state;
    cg_config_t c;
    char err[256];
    assert_int_equal(load_with(&c, NULL, NULL, err, sizeof(err)), 0);
    assert_null(c.tracking_dsn); /* unset: SQLite */
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_TRACKING_DSN", "");
    assert_null(c.tracking_dsn);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_TRACKING_DSN", "postgresql://cg:pw@db.internal:5432/citegate");
    assert_string_equal(c.tracking_dsn, "postgresql://cg:pw@db.internal:5432/citegate");
    cg_config_free(&c);
    accept_val_free("CITEGATE_TRACKING_DSN", "postgres://db/citegate?sslmode=require");
    reject_val("CITEGATE_TRACKING_DSN", "host=db dbname=citegate");
    reject_val("CITEGATE_TRACKING_DSN", "mysql://db/citegate");
    reject_val("CITEGATE_TRACKING_DSN", "POSTGRESQL://db"); /* libpq's prefix is lower case */

    /* the message never shows the password */
    assert_int_equal(
        load_with(&c, "CITEGATE_TRACKING_DSN", "mysql://u:s3cret@db/x", err, sizeof(err)), -1);
    cg_config_free(&c);
    assert_null(strstr(err, "s3cret"));
    assert_non_null(strstr(err, "mysql://u:***@db/x"));

    assert_true(cg_dsn_is_postgres("postgresql://"));
    assert_true(cg_dsn_is_postgres("postgres://h"));
    assert_false(cg_dsn_is_postgres("postgresq://h"));
    assert_false(cg_dsn_is_postgres(""));
}

/* ---- CITEGATE_EMBEDDINGS_* ----------------------------------------------------- */

static void test_embeddings(void **state)
{
    (void)state;
    cg_config_t c;
    char err[256];
    assert_int_equal(load_with(&c, NULL, NULL, err, sizeof(err)), 0);
    assert_null(c.embeddings_model); /* unset: lexical recall only */
    assert_null(c.embeddings_url);
    assert_null(c.embeddings_api_key);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_EMBEDDINGS_MODEL", "text-embedding-3-small");
    assert_string_equal(c.embeddings_model, "text-embedding-3-small");
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_EMBEDDINGS_MODEL", "");
    assert_null(c.embeddings_model);
    cg_config_free(&c);
    accept_val(&c, "CITEGATE_EMBEDDINGS_URL", "http://127.0.0.1:11434/v1/embeddings");
    assert_string_equal(c.embeddings_url, "http://127.0.0.1:11434/v1/embeddings");
    cg_config_free(&c);
    reject_val("CITEGATE_EMBEDDINGS_URL", "127.0.0.1:11434/v1/embeddings");
    reject_val("CITEGATE_EMBEDDINGS_URL", "ftp://host/v1/embeddings");
    accept_val(&c, "CITEGATE_EMBEDDINGS_API_KEY", "sk-test");
    assert_string_equal(c.embeddings_api_key, "sk-test");
    cg_config_free(&c);
}

static void redacts(const char *dsn, const char *want)
{
    cg_buf_t b = {0};
    cg_dsn_redact(dsn, &b);
    cg_buf_putc(&b, '\0');
    assert_string_equal(b.p, want);
    cg_buf_free(&b);
}

static void test_dsn_redact(void **state)
{
    (void)state;
    redacts("postgresql://cg:pw@db:5432/citegate", "postgresql://cg:***@db:5432/citegate");
    redacts("postgresql://cg@db/citegate", "postgresql://cg@db/citegate");
    redacts("postgresql://db", "postgresql://db");
    redacts("postgresql://", "postgresql://");
    /* '@' and ':' in a password; the last '@' of the authority ends the user info */
    redacts("postgresql://cg:p@ss:w@db/x", "postgresql://cg:***@db/x");
    redacts("postgresql://cg:pw@h1:5432,h2:5433/x?connect_timeout=2",
            "postgresql://cg:***@h1:5432,h2:5433/x?connect_timeout=2");
    redacts("postgresql://db/x?user=cg&password=pw&sslmode=require",
            "postgresql://db/x?user=cg&password=***&sslmode=require");
    redacts("postgresql://db?password=pw", "postgresql://db?password=***");
    redacts("postgresql://a:b@db?x=1&password=", "postgresql://a:***@db?x=1&password=***");
    /* an '@' in the path or query is not user info */
    redacts("postgresql://db/x?application_name=a@b", "postgresql://db/x?application_name=a@b");
    redacts("host=db password=pw", "***");
}

/* SPEC §2: a flag wins over its variable, which is then not read at all
 * (a bad value there is no error); the last of two flags wins. */
static void test_flag_wins_over_variable(void **state)
{
    (void)state;
    char err[256];
    cg_config_t c;
    clear_env(NULL);
    assert_int_equal(setenv("CITEGATE_LISTEN", "bad", 1), 0);
    assert_int_equal(setenv("CITEGATE_WORKERS", "abc", 1), 0);
    const cg_config_flag_t flags[] = {
        {"CITEGATE_LISTEN", "127.0.0.1:1"},
        {"CITEGATE_WORKERS", "2"},
        {"CITEGATE_LISTEN", "127.0.0.1:2"},
    };
    assert_int_equal(cg_config_load(&c, flags, 3, err, sizeof(err)), 0);
    assert_string_equal(c.listen, "127.0.0.1:2");
    assert_int_equal(c.workers, 2);
    cg_config_free(&c);
    /* Without the flag the variable is read, and refused. */
    assert_int_equal(cg_config_load(&c, flags + 1, 1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "CITEGATE_LISTEN"));
    /* A bad flag value is named by its variable. */
    const cg_config_flag_t bad = {"CITEGATE_WORKERS", "many"};
    unsetenv("CITEGATE_LISTEN");
    assert_int_equal(cg_config_load(&c, &bad, 1, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "CITEGATE_WORKERS"));
    unsetenv("CITEGATE_WORKERS");
}

/* ---- flags and --help, both from the settings table ------------------------------- */

static void test_flag_var(void **state)
{
    (void)state;
    assert_string_equal(cg_config_flag_var("--listen", 8, false), "CITEGATE_LISTEN");
    assert_string_equal(cg_config_flag_var("--listen=0.0.0.0:1", 8, false), "CITEGATE_LISTEN");
    assert_string_equal(cg_config_flag_var("--profile", 9, false), "CITEGATE_PROFILE");
    assert_string_equal(cg_config_flag_var("--profile", 9, true), "CITEGATE_PROFILE");
    assert_string_equal(cg_config_flag_var("--dialect", 9, true), "CITEGATE_UPSTREAM_DIALECT");
    assert_string_equal(cg_config_flag_var("--ref-style", 11, true), "CITEGATE_REF_STYLE");
    assert_null(cg_config_flag_var("--dialect", 9, false)); /* the filter's only */
    assert_null(cg_config_flag_var("--listen", 8, true));   /* the daemon's only */
    assert_null(cg_config_flag_var("--list", 6, false));    /* a prefix is no flag */
    assert_null(cg_config_flag_var("--listeners", 11, false));
    assert_null(cg_config_flag_var("--demo", 6, false)); /* sets no variable */
}

static void test_help(void **state)
{
    (void)state;
    cg_buf_t b = {0};
    cg_config_help(&b);
    cg_buf_putc(&b, '\0');
    size_t n = 0;
    for (; cg_config_var_name(n); n++) {
        char want[128];
        snprintf(want, sizeof(want), "\n  %s", cg_config_var_name(n));
        if (strstr(b.p, want) == NULL) {
            print_error("--help lacks %s\n", cg_config_var_name(n));
            fail();
        }
    }
    assert_true(n >= 37);
    size_t lines = 0;
    for (const char *p = b.p; (p = strstr(p, "  default: ")) != NULL; p++)
        lines++;
    assert_int_equal(lines, n);
    assert_non_null(strstr(b.p, "\n  CITEGATE_WORKERS, --workers  default: 1  values: 1 to 256\n"));
    char dialects[256];
    snprintf(dialects, sizeof(dialects),
             "\n  CITEGATE_UPSTREAM_DIALECT, filter --dialect  default: openai  values: %s\n",
             cg_dialect_list());
    assert_non_null(strstr(b.p, dialects));
    assert_non_null(strstr(b.p, "\n  CITEGATE_GEMINI_TOOLS  default: unset  values: JSON array\n"));
    assert_non_null(strstr(b.p, "\n  CITEGATE_PROFILE, --profile, filter --profile  default: "
                                "openwebui  values: off, openwebui,"));
    assert_non_null(strstr(b.p, "\n  CITEGATE_UPSTREAM_INSECURE  default: false  values: true, "
                                "false, 1, 0, yes, no\n"));
    assert_non_null(strstr(b.p, "\n  CITEGATE_TLS_CERT  default: unset  values: PEM file\n"));
    assert_non_null(strstr(b.p, "\n  CITEGATE_LOG_LEVEL  default: info  values: debug, info, "
                                "warn, error\n"));
    cg_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flag_wins_over_variable),
        cmocka_unit_test_setup(test_defaults, clear_env),
        cmocka_unit_test_setup(test_strings, clear_env),
        cmocka_unit_test_setup(test_numbers, clear_env),
        cmocka_unit_test_setup(test_number_ranges, clear_env),
        cmocka_unit_test_setup(test_booleans, clear_env),
        cmocka_unit_test_setup(test_upstream_url, clear_env),
        cmocka_unit_test_setup(test_data_sources, clear_env),
        cmocka_unit_test_setup(test_gemini_tools, clear_env),
        cmocka_unit_test_setup(test_bedrock_kb, clear_env),
        cmocka_unit_test_setup(test_cohere_citations, clear_env),
        cmocka_unit_test_setup(test_enums, clear_env),
        cmocka_unit_test_setup(test_many_at_once, clear_env),
        cmocka_unit_test_setup(test_set_overrides, clear_env),
        cmocka_unit_test_setup(test_error_truncation, clear_env),
        cmocka_unit_test_setup(test_tracking_dsn, clear_env),
        cmocka_unit_test_setup(test_embeddings, clear_env),
        cmocka_unit_test_setup(test_dsn_redact, clear_env),
        cmocka_unit_test(test_flag_var),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
