/*
 * Profiles: the output formats a client can ask for (SPEC §7), and their
 * registry.
 *
 * A profile is a set of properties, which the shell and the transformer
 * read, and hooks, which the transformer calls at fixed points of a stream
 * or body. The transformer has no branch per profile: all a profile adds
 * goes through these hooks, and what it must remember lives in its own
 * state, which the transformer allocates (zeroed) and frees for it. Adding
 * a profile is one file in src/profiles/ and one line in its registry
 * (src/profiles/registry.c).
 *
 * The hooks work on the transformer's internals (src/core/xform_int.h) and
 * write through src/core/emit.h. Every hook may be NULL: nothing is added
 * at that point.
 */
#ifndef CITEGATE_PROFILE_H
#define CITEGATE_PROFILE_H

#include "citegate/cite.h"
#include "citegate/common.h"

struct cg_xform;
struct cg_choice;
struct cg_refrec;

typedef struct cg_profile {
    const char *name;   /* as CITEGATE_PROFILE and X-Citegate-Profile spell it */
    bool transforms;    /* false: every byte goes through unchanged */
    bool tracked;       /* its answers count in citation tracking (SPEC §8) */
    bool holds_stream;  /* a stream, and so its head, is held to its end */
    bool aliases;       /* reads citations that may be the request's aliases (citegate/alias.h) */
    size_t state_size;  /* bytes of per-stream state (cg_xform.state) */
    size_t choice_size; /* bytes of per-choice state (cg_choice.state) */

    /* Free what a state owns, not the state itself. */
    void (*state_free)(void *state);
    void (*choice_free)(void *state);

    /* Content bytes p[0..n), n > 0, JSON-escaped, are about to go out as
     * they came. May write bytes of its own before them; returns whether
     * it did. */
    bool (*text)(struct cg_xform *x, struct cg_choice *ch, const char *p, size_t n);
    /* A reference in the stream's style that names citation c, as written
     * (`text`). Writes what replaces it and returns true, or returns false
     * to leave it as written. rec is the stream's count of this distinct
     * reference, NULL when that table was full (CG_XFORM_MAX_REFS). */
    bool (*ref)(struct cg_xform *x, struct cg_choice *ch, const struct cg_refrec *rec,
                const cg_citation_t *c, cg_span_t text);
    /* Citation c counts as referenced once, at this point of choice ch's
     * answer, with no text to rewrite (an upstream annotation named it,
     * SPEC §6): the profile emits it as if it had been referenced here.
     * Called once per citation. */
    void (*mention)(struct cg_xform *x, struct cg_choice *ch, const cg_citation_t *c);
    /* Rewrites a content string itself (token `content` of the current
     * event or body), instead of the reference finder; text and ref are
     * then never called. */
    void (*content)(struct cg_xform *x, struct cg_choice *ch, int content);
    /* holds_stream: at the end of a held stream, every content string of
     * it (raw JSON string bytes) in order, then held_end; then the stream
     * goes through the transformer as if it had just arrived. */
    void (*held_content)(struct cg_xform *x, struct cg_choice *ch, cg_span_t raw);
    void (*held_end)(struct cg_xform *x);
    /* The profile's own events before the end of a stream; returns whether
     * any went out. */
    bool (*stream_end)(struct cg_xform *x);
    /* A body: right after a choice's content string was written (the
     * output stands before its closing quote); msg is the message token. */
    void (*body_message)(struct cg_xform *x, struct cg_choice *ch, int msg);
    /* A body: the profile's own members of the root object, before its
     * closing brace; comma: other members precede them. */
    void (*body_end)(struct cg_xform *x, bool comma);
} cg_profile_t;

/* Registered profiles at most (the metrics keep a counter for each). */
#define CG_PROFILE_MAX 8

/* The profile of that name; false (and *out unchanged) when there is none. */
bool cg_profile_parse(const char *name, const cg_profile_t **out);
/* "off, openwebui, …": every name, for error messages. */
const char *cg_profile_list(void);
/* The registered profiles, 0 <= i < cg_profile_count(), and the place of
 * a registered one (a stable index, e.g. for metrics). */
size_t cg_profile_count(void);
const cg_profile_t *cg_profile_at(size_t i);
size_t cg_profile_index(const cg_profile_t *p);

#endif
