/*
 * The embedded demo's answers (up_demo.c): what an upstream would send for
 * "How do I charge the X100?", in the API of each upstream dialect (SPEC
 * §6a), so that the demo's answer takes the same translation path as a real
 * upstream's. Pure: no loop, no sockets.
 *
 * openai: Azure OpenAI "On Your Data", [docN] references (some split across
 * chunks) and the citations in the first chunk's context.
 * anthropic: Messages events, one text block per cited passage, its
 * citations as citations_delta (search_result_location for the documents
 * with a URL, char_location for the one without).
 * responses: Responses events, 【…†…】 markers in the text, each followed by
 * the url_citation annotation that covers it.
 * gemini, vertex: GenerateContentResponse events (CRLF CRLF, no [DONE]),
 * the answer with characters of several bytes, its grounding (Vertex AI
 * Search datastore chunks, supports at byte offsets) on the last event.
 * bedrock: Converse events in AWS's binary event stream, padded as Bedrock
 * pads them; a content block per cited passage, its citations as web
 * locations (the documents with a URL) and a documentChar location (the
 * one without); the body's cited blocks as citationsContent.
 * bedrock-kb: RetrieveAndGenerate in the same event stream: `output`
 * events, each cited passage's `citation` after it (web locations for the
 * documents with a URL, an s3 location for the other), and the body with
 * the citations' inclusive spans; the session header of the answer.
 * cohere: v2 Chat events (event: lines), gemini's text, each cited passage
 * followed by its citation-start (fast mode), whose offsets count
 * characters; the body's citations with the same offsets.
 * The demo's documents are its own: the request's <source> tags are not
 * cited, and the anthropic answer numbers its document after theirs.
 */
#ifndef CITEGATE_IO_DEMO_ANSWER_H
#define CITEGATE_IO_DEMO_ANSWER_H

#include "citegate/common.h"
#include "citegate/dialect.h"

/* An answer's bytes, cut into the pieces the demo sends one tick apart:
 * one event (SSE, or an event-stream message) each when streaming, the
 * whole body otherwise. */
typedef struct cg_demo_answer {
    cg_buf_t bytes;
    size_t *ends; /* end offset of each piece in bytes */
    size_t npieces;
} cg_demo_answer_t;

/* The answer of dialect d: an SSE stream (stream) or one JSON body.
 * request_docs: the documents the translated request sends (anthropic's
 * <source> documents, cg_dialect_req_t.ndocs), which the answer's
 * document_index must not name. */
void cg_demo_answer(cg_demo_answer_t *a, const cg_dialect_t *d, bool stream, size_t request_docs);
/* The Content-Type of that answer. */
const char *cg_demo_content_type(const cg_dialect_t *d, bool stream);
/* The header field, besides its Content-Type, that the answer of dialect
 * d carries, into name and value: bedrock-kb's session id, the one the
 * translated request body names, else a new one. False when none. */
bool cg_demo_answer_field(const cg_dialect_t *d, cg_span_t request, cg_buf_t *name,
                          cg_buf_t *value);
/* The 404 body the demo gives on every path but the chat routes. */
void cg_demo_not_found(cg_demo_answer_t *a);
void cg_demo_answer_free(cg_demo_answer_t *a);

#endif
