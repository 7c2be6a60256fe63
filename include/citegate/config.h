/*
 * Configuration: SPEC §2-3. Every setting has an environment variable and
 * some have a flag; a flag wins over its variable. Validation names the
 * variable and the problem in one line. One table in config.c describes
 * every setting, for the parser, the flags and --help alike.
 */
#ifndef CITEGATE_CONFIG_H
#define CITEGATE_CONFIG_H

#include "citegate/common.h"
#include "citegate/dialect.h"
#include "citegate/xform.h"

typedef enum cg_upstream_proto {
    CG_PROTO_AUTO = 0,
    CG_PROTO_H2,
    CG_PROTO_HTTP1,
} cg_upstream_proto_t;

typedef enum cg_log_level { CG_LOG_DEBUG, CG_LOG_INFO, CG_LOG_WARN, CG_LOG_ERROR } cg_log_level_t;

typedef struct cg_config {
    char *listen;
    char *admin_listen;
    char *tls_cert, *tls_key;
    char *upstream; /* NULL: demo upstream */
    cg_upstream_proto_t upstream_protocol;
    char *upstream_ca;
    bool upstream_insecure;
    unsigned upstream_max_connections;
    unsigned upstream_max_pending;      /* waiting for a connection or stream */
    unsigned upstream_queue_timeout_ms; /* longest wait there */
    const cg_dialect_t *upstream_dialect; /* the upstream's API (SPEC §6a) */
    char *gemini_tools; /* CITEGATE_GEMINI_TOOLS as given (a checked JSON array), or NULL */
    char *bedrock_tool_config; /* CITEGATE_BEDROCK_TOOL_CONFIG (a checked JSON object), or NULL */
    char *bedrock_kb;          /* CITEGATE_BEDROCK_KB (a checked JSON object), or NULL */
    cg_cohere_citations_t cohere_citations; /* CITEGATE_COHERE_CITATIONS */
    /* AWS credentials and region (SigV4 for bedrock); never logged. */
    char *aws_access_key_id, *aws_secret_access_key, *aws_session_token;
    char *aws_region, *aws_default_region;
    unsigned max_client_connections;    /* per worker; accepting pauses at it */
    unsigned request_timeout_ms;        /* TLS handshake + request head; idle keep-alive */
    size_t max_event_bytes;             /* largest SSE event parsed and rewritten */
    char *cors_origins;                 /* comma-separated, or "*"; NULL: no CORS */
    unsigned workers;
    const cg_profile_t *profile;
    bool citation_aliases; /* structured: tool outputs' paths and boxes aliased */
    cg_ref_style_t ref_style;
    size_t max_doc_bytes;
    size_t max_request_bytes;
    unsigned connect_timeout_ms, first_byte_timeout_ms, idle_timeout_ms, shutdown_grace_ms;
    bool log_json;
    cg_log_level_t log_level;
    char *data_sources; /* AZURE_AI_DATA_SOURCES as given (validated JSON) */
    bool include_search_scores;
    bool citation_tracking;
    bool semantic_memory;
    char *memory_db_path;
    unsigned prune_age_days;
    char *tracking_dsn;       /* postgresql://… shared by every replica; NULL: SQLite */
    char *embeddings_model;   /* NULL: lexical recall only */
    char *embeddings_url;     /* NULL: {upstream}/v1/embeddings */
    char *embeddings_api_key; /* NULL: the tracked (or admin) request's own key */
    bool demo;
} cg_config_t;

/* A command-line flag's value for its variable (SPEC §2). */
typedef struct cg_config_flag {
    const char *var, *value;
} cg_config_flag_t;

/* Fills defaults, then each variable from flags[0..nflags) (the last one
 * of a variable wins) or else the environment: a flag wins over its
 * variable, whose value is then not even read. On error returns -1 and
 * writes one line ("VARIABLE: problem") into err. */
int cg_config_load(cg_config_t *c, const cg_config_flag_t *flags, size_t nflags, char *err,
                   size_t errlen);
/* cg_config_load with no flags. */
int cg_config_from_env(cg_config_t *c, char *err, size_t errlen);
/* Applies one setting by its variable name (flags map onto these). */
int cg_config_set(cg_config_t *c, const char *var, const char *value, char *err, size_t errlen);
void cg_config_free(cg_config_t *c);

bool cg_parse_bool(const char *s, bool *out);
bool cg_ref_style_parse(const char *s, cg_ref_style_t *out);
const char *cg_ref_style_name(cg_ref_style_t s);

/* Whether s is a libpq URI (postgresql:// or postgres://): CITEGATE_TRACKING_DSN. */
bool cg_dsn_is_postgres(const char *s);
/* Appends dsn with its password (in the user info or a password= parameter)
 * replaced by ***, for logs and messages; anything but a URI is all ***. */
void cg_dsn_redact(const char *dsn, cg_buf_t *out);

/* The variable that the flag flag[0..n) sets (the daemon's flags, or with
 * filter those of `citegate filter`), or NULL when no variable has it. */
const char *cg_config_flag_var(const char *flag, size_t n, bool filter);
/* The i-th variable of the settings table, or NULL past its end. */
const char *cg_config_var_name(size_t i);
/* Appends the settings part of --help: per variable its flags, default,
 * accepted values and one line of meaning (docs/configuration.md has the
 * same names, flags, defaults and values). */
void cg_config_help(cg_buf_t *out);

/* The transformer settings of this configuration. */
void cg_config_xform(const cg_config_t *c, cg_xform_cfg_t *x);

/* Whether requests are signed with SigV4: both AWS keys are set. */
bool cg_config_aws_signs(const cg_config_t *c);
/* The region to sign for: AWS_REGION, else AWS_DEFAULT_REGION, else the
 * REGION of an upstream host bedrock-runtime.REGION.amazonaws.com (or
 * bedrock-runtime-fips.REGION...), copied into buf; NULL when none. */
const char *cg_config_aws_region(const cg_config_t *c, char *buf, size_t n);

#endif
