/* The demo's answers in every dialect: see demo_answer.h. */
#include "demo_answer.h"

#include "citegate/evstream.h"
#include "citegate/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEMO_CREATED      1757592280
#define DEMO_INPUT_TOKENS 42

static void add_piece(cg_demo_answer_t *a)
{
    a->ends = cg_xrealloc(a->ends, (a->npieces + 1) * sizeof(size_t));
    a->ends[a->npieces++] = a->bytes.len;
}

void cg_demo_answer_free(cg_demo_answer_t *a)
{
    cg_buf_free(&a->bytes);
    free(a->ends);
    memset(a, 0, sizeof(*a));
}

void cg_demo_not_found(cg_demo_answer_t *a)
{
    cg_buf_puts(&a->bytes,
                "{\"error\":{\"message\":\"the demo upstream only answers chat completions\","
                "\"type\":\"invalid_request_error\",\"code\":\"not_found\"}}");
    add_piece(a);
}

/* --- openai: Azure "On Your Data" --------------------------------------------- */

static const char *const CONTEXT =
    "{\"citations\":["
    "{\"content\":\"The X100 charges over USB-C in about two hours; a full charge lasts 14 "
    "hours.\","
    "\"title\":\"X100 User Manual\",\"url\":\"https://docs.example.com/x100/manual.pdf\","
    "\"filepath\":\"x100/manual.pdf\",\"chunk_id\":\"0\"},"
    "{\"content\":\"Every device carries a two-year limited warranty against manufacturing "
    "defects.\","
    "\"title\":\"Warranty "
    "FAQ\",\"url\":null,\"filepath\":\"faq/warranty.html\",\"chunk_id\":\"1\"},"
    "{\"content\":\"Batteries can be replaced at any authorised service centre.\","
    "\"title\":null,\"url\":\"https://docs.example.com/service/battery swap.html\","
    "\"filepath\":null,\"chunk_id\":\"4\"}],"
    "\"intent\":\"[\\\"x100 charging\\\"]\","
    "\"all_retrieved_documents\":["
    "{\"content\":\"The X100 charges over USB-C in about two hours; a full charge lasts 14 "
    "hours.\","
    "\"title\":\"X100 User Manual\",\"filepath\":\"x100/manual.pdf\",\"chunk_id\":\"0\","
    "\"original_search_score\":41.2,\"rerank_score\":3.4},"
    "{\"content\":\"Every device carries a two-year limited warranty against manufacturing "
    "defects.\","
    "\"title\":\"Warranty FAQ\",\"filepath\":\"faq/warranty.html\",\"chunk_id\":\"1\","
    "\"original_search_score\":17.9,\"rerank_score\":2.6},"
    "{\"content\":\"Batteries can be replaced at any authorised service centre.\","
    "\"title\":null,\"filepath\":null,\"chunk_id\":\"4\",\"original_search_score\":0.58}]}";

/* The answer, cut into tokens; note "[doc" + "1]" split across chunks. */
static const char *const TOKENS[] = {
    "The",       " X100",         " charges", " over", " USB-C", " in",
    " about",    " two",          " hours",   " [doc", "1]",     ".",
    " It",       " is",           " covered", " by",   " a",     " two-year",
    " warranty", " [doc2]",       ",",        " and",  " its",   " battery",
    " can",      " be",           " swapped", " at",   " a",     " service",
    " centre",   " [doc3][doc1]", ".",        NULL};

static const char *const HEAD =
    "{\"id\":\"chatcmpl-demo\",\"object\":\"chat.completion.chunk\",\"created\":1757592280,"
    "\"model\":\"citegate-demo\",\"choices\":[{\"index\":0,\"delta\":";

static void openai_stream(cg_demo_answer_t *a)
{
    cg_buf_t *b = &a->bytes;
    cg_buf_printf(b,
                  "data: %s{\"role\":\"assistant\",\"context\":%s},\"finish_reason\":null}]}\n\n",
                  HEAD, CONTEXT);
    add_piece(a);
    for (int i = 0; TOKENS[i]; i++) {
        cg_buf_printf(b, "data: %s{\"content\":", HEAD);
        cg_json_put_cstr(b, TOKENS[i]);
        cg_buf_puts(b, "},\"finish_reason\":null}]}\n\n");
        add_piece(a);
    }
    cg_buf_printf(b, "data: %s{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", HEAD);
    add_piece(a);
}

static void openai_body(cg_demo_answer_t *a)
{
    cg_buf_t *b = &a->bytes;
    cg_buf_puts(b,
                "{\"id\":\"chatcmpl-demo\",\"object\":\"chat.completion\",\"created\":1757592280,"
                "\"model\":\"citegate-demo\",\"choices\":[{\"index\":0,\"finish_reason\":\"stop\","
                "\"message\":{\"role\":\"assistant\",\"content\":\"");
    for (int i = 0; TOKENS[i]; i++)
        cg_json_put_escaped(b, TOKENS[i], strlen(TOKENS[i]));
    cg_buf_printf(b, "\",\"context\":%s}}]}", CONTEXT);
    add_piece(a);
}

/* --- The other dialects: the same answer, cited passage by passage ------------ */

typedef struct demo_doc {
    const char *title;
    const char *url;  /* NULL: cited by its place, without a link */
    const char *name; /* as a responses marker names it */
    const char *text;
} demo_doc_t;

static const demo_doc_t DOCS[] = {
    {"X100 User Manual", "https://docs.example.com/x100/manual.pdf", "manual.pdf",
     "The X100 charges over USB-C in about two hours; a full charge lasts 14 hours."},
    {"Warranty FAQ", NULL, "warranty.html",
     "Every device carries a two-year limited warranty against manufacturing defects."},
    {"Battery service", "https://docs.example.com/service/battery swap.html", "battery swap.html",
     "Batteries can be replaced at any authorised service centre."},
};

/* A passage of the answer and the documents it cites (indices into DOCS). */
typedef struct demo_block {
    const char *tokens[12]; /* NULL-terminated */
    int cites[2];
    int ncites;
} demo_block_t;

static const demo_block_t BLOCKS[] = {
    {{"The", " X100", " charges", " over", " USB-C", " in", " about", " two", " hours"}, {0}, 1},
    {{".", " It", " is", " covered", " by", " a", " two-year", " warranty"}, {1}, 1},
    {{",", " and", " its", " battery", " can", " be", " swapped", " at", " a", " service",
      " centre"},
     {2, 0},
     2},
    {{"."}, {0}, 0},
};

#define NBLOCKS (sizeof(BLOCKS) / sizeof(BLOCKS[0]))

static unsigned count_tokens(void)
{
    unsigned n = 0;
    for (size_t i = 0; i < NBLOCKS; i++)
        for (int k = 0; BLOCKS[i].tokens[k]; k++)
            n++;
    return n;
}

static void sse_begin(cg_demo_answer_t *a, const char *type)
{
    cg_buf_printf(&a->bytes, "event: %s\ndata: ", type);
}

static void sse_end(cg_demo_answer_t *a)
{
    cg_buf_puts(&a->bytes, "\n\n");
    add_piece(a);
}

/* --- anthropic: Messages ------------------------------------------------------- */

/* A document with a URL is a search result, the other one a document of
 * the request (the kinds of citation_delta the Messages API sends). The
 * request's own documents, made of its <source> tags, come first:
 * `request_docs` of them, so the demo's document k is index request_docs + k. */
static void anthropic_citation(cg_buf_t *b, int k, size_t request_docs)
{
    const demo_doc_t *doc = &DOCS[k];
    if (doc->url) {
        cg_buf_puts(b, "{\"type\":\"search_result_location\",\"source\":");
        cg_json_put_cstr(b, doc->url);
        cg_buf_puts(b, ",\"title\":");
        cg_json_put_cstr(b, doc->title);
        cg_buf_puts(b, ",\"cited_text\":");
        cg_json_put_cstr(b, doc->text);
        cg_buf_printf(b,
                      ",\"search_result_index\":%d,\"start_block_index\":0,"
                      "\"end_block_index\":0}",
                      k);
        return;
    }
    cg_buf_puts(b, "{\"type\":\"char_location\",\"cited_text\":");
    cg_json_put_cstr(b, doc->text);
    cg_buf_printf(b, ",\"document_index\":%zu,\"document_title\":", request_docs + (size_t)k);
    cg_json_put_cstr(b, doc->title);
    cg_buf_printf(b, ",\"start_char_index\":0,\"end_char_index\":%zu}", strlen(doc->text));
}

static void anthropic_delta(cg_demo_answer_t *a, size_t block, const char *type, const char *key)
{
    sse_begin(a, "content_block_delta");
    cg_buf_printf(&a->bytes,
                  "{\"type\":\"content_block_delta\",\"index\":%zu,\"delta\":{\"type\":\"%s\","
                  "\"%s\":",
                  block, type, key);
}

static void anthropic_text(cg_demo_answer_t *a, size_t block, const char *text)
{
    anthropic_delta(a, block, "text_delta", "text");
    cg_json_put_cstr(&a->bytes, text);
    cg_buf_puts(&a->bytes, "}}");
    sse_end(a);
}

static void anthropic_block(cg_demo_answer_t *a, size_t i, size_t request_docs)
{
    const demo_block_t *bl = &BLOCKS[i];
    sse_begin(a, "content_block_start");
    cg_buf_printf(&a->bytes,
                  "{\"type\":\"content_block_start\",\"index\":%zu,"
                  "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
                  i);
    sse_end(a);
    for (int k = 0; bl->tokens[k]; k++)
        anthropic_text(a, i, bl->tokens[k]);
    /* The reference [N] is appended to the block as it stands: a space first. */
    if (bl->ncites)
        anthropic_text(a, i, " ");
    for (int c = 0; c < bl->ncites; c++) {
        anthropic_delta(a, i, "citations_delta", "citation");
        anthropic_citation(&a->bytes, bl->cites[c], request_docs);
        cg_buf_puts(&a->bytes, "}}");
        sse_end(a);
    }
    sse_begin(a, "content_block_stop");
    cg_buf_printf(&a->bytes, "{\"type\":\"content_block_stop\",\"index\":%zu}", i);
    sse_end(a);
}

static void anthropic_stream(cg_demo_answer_t *a, size_t request_docs)
{
    sse_begin(a, "message_start");
    cg_buf_printf(&a->bytes,
                  "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_demo\","
                  "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"citegate-demo\","
                  "\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
                  "\"usage\":{\"input_tokens\":%d,\"output_tokens\":1}}}",
                  DEMO_INPUT_TOKENS);
    sse_end(a);
    sse_begin(a, "ping");
    cg_buf_puts(&a->bytes, "{\"type\":\"ping\"}");
    sse_end(a);
    for (size_t i = 0; i < NBLOCKS; i++)
        anthropic_block(a, i, request_docs);
    sse_begin(a, "message_delta");
    cg_buf_printf(&a->bytes,
                  "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
                  "\"stop_sequence\":null},\"usage\":{\"output_tokens\":%u}}",
                  count_tokens());
    sse_end(a);
    sse_begin(a, "message_stop");
    cg_buf_puts(&a->bytes, "{\"type\":\"message_stop\"}");
    sse_end(a);
}

static void anthropic_body(cg_demo_answer_t *a, size_t request_docs)
{
    cg_buf_t *b = &a->bytes;
    cg_buf_puts(b, "{\"id\":\"msg_demo\",\"type\":\"message\",\"role\":\"assistant\","
                   "\"model\":\"citegate-demo\",\"content\":[");
    for (size_t i = 0; i < NBLOCKS; i++) {
        const demo_block_t *bl = &BLOCKS[i];
        cg_buf_puts(b, i ? ",{\"type\":\"text\",\"text\":\"" : "{\"type\":\"text\",\"text\":\"");
        for (int k = 0; bl->tokens[k]; k++)
            cg_json_put_escaped(b, bl->tokens[k], strlen(bl->tokens[k]));
        cg_buf_puts(b, bl->ncites ? " \",\"citations\":[" : "\"");
        for (int c = 0; c < bl->ncites; c++) {
            if (c)
                cg_buf_putc(b, ',');
            anthropic_citation(b, bl->cites[c], request_docs);
        }
        cg_buf_puts(b, bl->ncites ? "]}" : "}");
    }
    cg_buf_printf(b,
                  "],\"stop_reason\":\"end_turn\",\"stop_sequence\":null,"
                  "\"usage\":{\"input_tokens\":%d,\"output_tokens\":%u}}",
                  DEMO_INPUT_TOKENS, count_tokens());
    add_piece(a);
}

/* --- responses: OpenAI Responses ------------------------------------------------ */

#define MARK_OPEN   "\xE3\x80\x90" /* U+3010 */
#define MARK_DAGGER "\xE2\x80\xA0" /* U+2020 */
#define MARK_CLOSE  "\xE3\x80\x91" /* U+3011 */

/* The answer as the Responses API keeps it: the text and its annotations,
 * whose offsets count code points. `a`, when set, gets the events that
 * stream it. */
typedef struct rs_text {
    cg_demo_answer_t *a;
    unsigned seq; /* sequence_number of the next event */
    cg_buf_t text;
    cg_buf_t annotations; /* JSON objects, comma-separated */
    unsigned nannotations;
    size_t chars; /* code points in text */
} rs_text_t;

static size_t code_points(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

static void rs_begin(rs_text_t *r, const char *type)
{
    sse_begin(r->a, type);
    cg_buf_printf(&r->a->bytes, "{\"type\":\"%s\",\"sequence_number\":%u", type, r->seq++);
}

/* The members that place an event in the one output_text part. */
static void rs_place(rs_text_t *r)
{
    cg_buf_puts(&r->a->bytes, ",\"item_id\":\"msg_demo\",\"output_index\":0,\"content_index\":0");
}

static void rs_delta(rs_text_t *r, const char *s)
{
    cg_buf_puts(&r->text, s);
    r->chars += code_points(s, strlen(s));
    if (r->a == NULL)
        return;
    rs_begin(r, "response.output_text.delta");
    rs_place(r);
    cg_buf_puts(&r->a->bytes, ",\"delta\":");
    cg_json_put_cstr(&r->a->bytes, s);
    cg_buf_putc(&r->a->bytes, '}');
    sse_end(r->a);
}

static void rs_annotation(cg_buf_t *b, int k, size_t start, size_t end)
{
    cg_buf_printf(
        b, "{\"type\":\"url_citation\",\"start_index\":%zu,\"end_index\":%zu,\"url\":", start, end);
    cg_json_put_cstr(b, DOCS[k].url);
    cg_buf_puts(b, ",\"title\":");
    cg_json_put_cstr(b, DOCS[k].title);
    cg_buf_putc(b, '}');
}

/* A marker for document k, in two deltas (a marker may arrive in pieces),
 * then the annotation that covers it. */
static void rs_marker(rs_text_t *r, int k)
{
    char head[32], tail[128];
    snprintf(head, sizeof(head), MARK_OPEN "4:%d", k);
    snprintf(tail, sizeof(tail), MARK_DAGGER "%s" MARK_CLOSE, DOCS[k].name);
    size_t start = r->chars;
    rs_delta(r, head);
    rs_delta(r, tail);
    if (r->nannotations++)
        cg_buf_putc(&r->annotations, ',');
    size_t from = r->annotations.len;
    rs_annotation(&r->annotations, k, start, r->chars);
    if (r->a == NULL)
        return;
    rs_begin(r, "response.output_text.annotation.added");
    rs_place(r);
    cg_buf_printf(&r->a->bytes, ",\"annotation_index\":%u,\"annotation\":", r->nannotations - 1);
    cg_buf_put(&r->a->bytes, r->annotations.p + from, r->annotations.len - from);
    cg_buf_putc(&r->a->bytes, '}');
    sse_end(r->a);
}

/* Only documents with a URL get a marker: the Responses API cites URLs. */
static void rs_walk(rs_text_t *r)
{
    for (size_t i = 0; i < NBLOCKS; i++) {
        const demo_block_t *bl = &BLOCKS[i];
        bool spaced = false;
        for (int k = 0; bl->tokens[k]; k++)
            rs_delta(r, bl->tokens[k]);
        for (int c = 0; c < bl->ncites; c++) {
            if (DOCS[bl->cites[c]].url == NULL)
                continue;
            if (!spaced)
                rs_delta(r, " ");
            spaced = true;
            rs_marker(r, bl->cites[c]);
        }
    }
}

static void rs_part(cg_buf_t *b, const rs_text_t *r)
{
    cg_buf_puts(b, "{\"type\":\"output_text\",\"text\":");
    cg_json_put_str(b, r->text.p, r->text.len);
    cg_buf_puts(b, ",\"annotations\":[");
    cg_buf_put(b, r->annotations.p, r->annotations.len);
    cg_buf_puts(b, "]}");
}

static void rs_item(cg_buf_t *b, const rs_text_t *r)
{
    cg_buf_puts(b, "{\"id\":\"msg_demo\",\"type\":\"message\",\"status\":\"completed\","
                   "\"role\":\"assistant\",\"content\":[");
    rs_part(b, r);
    cg_buf_puts(b, "]}");
}

/* The response object; r NULL: one that has no output yet. */
static void rs_response(cg_buf_t *b, const rs_text_t *r)
{
    cg_buf_printf(b,
                  "{\"id\":\"resp_demo\",\"object\":\"response\",\"created_at\":%d,"
                  "\"status\":\"%s\",\"model\":\"citegate-demo\",\"output\":[",
                  DEMO_CREATED, r ? "completed" : "in_progress");
    if (r == NULL) {
        cg_buf_puts(b, "],\"usage\":null}");
        return;
    }
    rs_item(b, r);
    unsigned out = count_tokens();
    cg_buf_printf(b, "],\"usage\":{\"input_tokens\":%d,\"output_tokens\":%u,\"total_tokens\":%u}}",
                  DEMO_INPUT_TOKENS, out, DEMO_INPUT_TOKENS + out);
}

static void rs_free(rs_text_t *r)
{
    cg_buf_free(&r->text);
    cg_buf_free(&r->annotations);
}

static void responses_opening(rs_text_t *r)
{
    cg_buf_t *b = &r->a->bytes;
    rs_begin(r, "response.created");
    cg_buf_puts(b, ",\"response\":");
    rs_response(b, NULL);
    cg_buf_putc(b, '}');
    sse_end(r->a);
    rs_begin(r, "response.output_item.added");
    cg_buf_puts(b, ",\"output_index\":0,\"item\":{\"id\":\"msg_demo\",\"type\":\"message\","
                   "\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}");
    sse_end(r->a);
    rs_begin(r, "response.content_part.added");
    rs_place(r);
    cg_buf_puts(b, ",\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}}");
    sse_end(r->a);
}

static void responses_closing(rs_text_t *r)
{
    cg_buf_t *b = &r->a->bytes;
    rs_begin(r, "response.output_text.done");
    rs_place(r);
    cg_buf_puts(b, ",\"text\":");
    cg_json_put_str(b, r->text.p, r->text.len);
    cg_buf_putc(b, '}');
    sse_end(r->a);
    rs_begin(r, "response.content_part.done");
    rs_place(r);
    cg_buf_puts(b, ",\"part\":");
    rs_part(b, r);
    cg_buf_putc(b, '}');
    sse_end(r->a);
    rs_begin(r, "response.output_item.done");
    cg_buf_puts(b, ",\"output_index\":0,\"item\":");
    rs_item(b, r);
    cg_buf_putc(b, '}');
    sse_end(r->a);
    rs_begin(r, "response.completed");
    cg_buf_puts(b, ",\"response\":");
    rs_response(b, r);
    cg_buf_putc(b, '}');
    sse_end(r->a);
}

static void responses_stream(cg_demo_answer_t *a)
{
    rs_text_t r = {.a = a};
    responses_opening(&r);
    rs_walk(&r);
    responses_closing(&r);
    rs_free(&r);
}

static void responses_body(cg_demo_answer_t *a)
{
    rs_text_t r = {0};
    rs_walk(&r);
    rs_response(&a->bytes, &r);
    add_piece(a);
    rs_free(&r);
}

/* --- gemini, vertex: generateContent ------------------------------------------ */

/* Gemini's answer says it with some characters of more than one byte, as
 * real answers do: its grounding's offsets count bytes, not characters. */
static const demo_block_t GM_BLOCKS[] = {
    {{"The X100 charges", " over USB-C in about", " two hours, best at 10\342\200\22330 \302\260C"},
     {0},
     1},
    {{". It is covered", " by a two-year warranty"}, {1}, 1},
    {{", and its battery can be", " swapped at a service centre"}, {2, 0}, 2},
    {{"."}, {0}, 0},
};

#define GM_NBLOCKS (sizeof(GM_BLOCKS) / sizeof(GM_BLOCKS[0]))
#define GM_META    "\"modelVersion\":\"citegate-demo\",\"responseId\":\"demo-gemini\""

/* A Vertex AI Search datastore's chunk: uri (none for the FAQ, which a
 * customMetadata source_url names), title and the passage's text. */
static void gm_chunk(cg_buf_t *b, int k)
{
    const demo_doc_t *doc = &DOCS[k];
    cg_buf_puts(b, "{\"retrievedContext\":{");
    if (doc->url) {
        cg_buf_puts(b, "\"uri\":");
        cg_json_put_cstr(b, doc->url);
        cg_buf_putc(b, ',');
    }
    cg_buf_puts(b, "\"title\":");
    cg_json_put_cstr(b, doc->title);
    cg_buf_puts(b, ",\"text\":");
    cg_json_put_cstr(b, doc->text);
    if (doc->url == NULL) {
        cg_buf_puts(b, ",\"customMetadata\":[{\"key\":\"source_url\",\"stringValue\":");
        cg_json_put_cstr(b, doc->name);
        cg_buf_puts(b, "}]");
    }
    cg_buf_puts(b, "}}");
}

/* The grounding of the whole answer: every document a chunk, every passage
 * that cites one a support ending where the passage ends (in bytes). */
static void gm_grounding(cg_buf_t *b)
{
    cg_buf_puts(b, "{\"groundingChunks\":[");
    for (int k = 0; k < (int)(sizeof(DOCS) / sizeof(DOCS[0])); k++) {
        if (k)
            cg_buf_putc(b, ',');
        gm_chunk(b, k);
    }
    cg_buf_puts(b, "],\"groundingSupports\":[");
    size_t end = 0, start = 0;
    bool first = true;
    for (size_t i = 0; i < GM_NBLOCKS; i++) {
        const demo_block_t *bl = &GM_BLOCKS[i];
        start = end;
        for (int k = 0; bl->tokens[k]; k++)
            end += strlen(bl->tokens[k]);
        if (bl->ncites == 0)
            continue;
        cg_buf_printf(b, "%s{\"segment\":{\"startIndex\":%zu,\"endIndex\":%zu},"
                         "\"groundingChunkIndices\":[",
                      first ? "" : ",", start, end);
        for (int c = 0; c < bl->ncites; c++)
            cg_buf_printf(b, "%s%d", c ? "," : "", bl->cites[c]);
        cg_buf_puts(b, "]}");
        first = false;
    }
    cg_buf_puts(b, "],\"retrievalMetadata\":{}}");
}

static unsigned gm_count_tokens(void)
{
    unsigned n = 0;
    for (size_t i = 0; i < GM_NBLOCKS; i++)
        for (int k = 0; GM_BLOCKS[i].tokens[k]; k++)
            n++;
    return n;
}

static void gm_usage(cg_buf_t *b, unsigned out)
{
    cg_buf_printf(b,
                  "\"usageMetadata\":{\"promptTokenCount\":%d,\"candidatesTokenCount\":%u,"
                  "\"totalTokenCount\":%u}",
                  DEMO_INPUT_TOKENS, out, DEMO_INPUT_TOKENS + out);
}

/* Events end with CRLF CRLF and there is no [DONE]; the grounding comes
 * whole on the last event, with the last text and finishReason, the
 * others carry an empty one. */
static void gemini_stream(cg_demo_answer_t *a, size_t request_docs)
{
    (void)request_docs;
    cg_buf_t *b = &a->bytes;
    unsigned n = gm_count_tokens(), sent = 0;
    for (size_t i = 0; i < GM_NBLOCKS; i++) {
        for (int k = 0; GM_BLOCKS[i].tokens[k]; k++) {
            bool last = ++sent == n;
            cg_buf_puts(b, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":");
            cg_json_put_cstr(b, GM_BLOCKS[i].tokens[k]);
            cg_buf_puts(b, "}],\"role\":\"model\"},");
            if (last)
                cg_buf_puts(b, "\"finishReason\":\"STOP\",");
            cg_buf_puts(b, "\"index\":0,\"groundingMetadata\":");
            if (last)
                gm_grounding(b);
            else
                cg_buf_puts(b, "{}");
            cg_buf_puts(b, "}],");
            gm_usage(b, sent);
            cg_buf_puts(b, "," GM_META "}\r\n\r\n");
            add_piece(a);
        }
    }
}

static void gemini_body(cg_demo_answer_t *a, size_t request_docs)
{
    (void)request_docs;
    cg_buf_t *b = &a->bytes;
    cg_buf_puts(b, "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"");
    for (size_t i = 0; i < GM_NBLOCKS; i++)
        for (int k = 0; GM_BLOCKS[i].tokens[k]; k++)
            cg_json_put_escaped(b, GM_BLOCKS[i].tokens[k], strlen(GM_BLOCKS[i].tokens[k]));
    cg_buf_puts(b, "\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0,"
                   "\"groundingMetadata\":");
    gm_grounding(b);
    cg_buf_puts(b, "}],");
    gm_usage(b, gm_count_tokens());
    cg_buf_puts(b, "," GM_META "}");
    add_piece(a);
}

/* --- bedrock: Converse, in AWS's event stream ----------------------------------- */

/* One event-stream message (evstream.h's framing) per piece: a Converse
 * event of that type and JSON payload, padded as Bedrock pads them. */
static void br_put32(cg_buf_t *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    cg_buf_put(b, x, 4);
}

static void br_header(cg_buf_t *b, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    cg_buf_putc(b, (char)nl);
    cg_buf_put(b, name, nl);
    cg_buf_putc(b, 7); /* a string */
    cg_buf_putc(b, (char)(vl >> 8));
    cg_buf_putc(b, (char)vl);
    cg_buf_put(b, value, vl);
}

static void br_event(cg_demo_answer_t *a, const char *type, const cg_buf_t *payload)
{
    cg_buf_t h = {0};
    br_header(&h, ":event-type", type);
    br_header(&h, ":content-type", "application/json");
    br_header(&h, ":message-type", "event");
    cg_buf_t *b = &a->bytes;
    size_t start = b->len;
    uint32_t total = (uint32_t)(16 + h.len + payload->len);
    br_put32(b, total);
    br_put32(b, (uint32_t)h.len);
    br_put32(b, cg_crc32(0, b->p + start, 8));
    cg_buf_put(b, h.p, h.len);
    cg_buf_put(b, payload->p, payload->len);
    br_put32(b, cg_crc32(0, b->p + start, total - 4));
    cg_buf_free(&h);
    add_piece(a);
}

/* A document with a URL is a web source (Nova's grounding), the other a
 * document of the request: the request's own come first, request_docs of
 * them, so the demo's document k is index request_docs + k. */
static void br_citation(cg_buf_t *b, int k, size_t request_docs)
{
    const demo_doc_t *doc = &DOCS[k];
    cg_buf_puts(b, "{\"title\":");
    cg_json_put_cstr(b, doc->title);
    cg_buf_puts(b, ",\"sourceContent\":[{\"text\":");
    cg_json_put_cstr(b, doc->text);
    if (doc->url) {
        cg_buf_puts(b, "}],\"location\":{\"web\":{\"url\":");
        cg_json_put_cstr(b, doc->url);
        cg_buf_puts(b, ",\"domain\":\"docs.example.com\"}}}");
        return;
    }
    cg_buf_printf(b,
                  "}],\"location\":{\"documentChar\":{\"documentIndex\":%zu,\"start\":0,"
                  "\"end\":%zu}}}",
                  request_docs + (size_t)k, strlen(doc->text));
}

static void br_delta(cg_demo_answer_t *a, cg_buf_t *p, size_t block, const char *text, int cite,
                     size_t request_docs)
{
    p->len = 0;
    cg_buf_printf(p, "{\"contentBlockIndex\":%zu,\"delta\":{", block);
    if (text) {
        cg_buf_puts(p, "\"text\":");
        cg_json_put_cstr(p, text);
    } else {
        cg_buf_puts(p, "\"citation\":");
        br_citation(p, cite, request_docs);
    }
    cg_buf_puts(p, "},\"p\":\"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01234\"}");
    br_event(a, "contentBlockDelta", p);
}

static void bedrock_stream(cg_demo_answer_t *a, size_t request_docs)
{
    cg_buf_t p = {0};
    cg_buf_puts(&p, "{\"p\":\"abcdefghijklmnopqrstuvwxyzABCDEFGHIJ\",\"role\":\"assistant\"}");
    br_event(a, "messageStart", &p);
    for (size_t i = 0; i < NBLOCKS; i++) {
        const demo_block_t *bl = &BLOCKS[i];
        for (int k = 0; bl->tokens[k]; k++)
            br_delta(a, &p, i, bl->tokens[k], 0, request_docs);
        if (bl->ncites) /* the reference [N] is appended to the block as it stands */
            br_delta(a, &p, i, " ", 0, request_docs);
        for (int c = 0; c < bl->ncites; c++)
            br_delta(a, &p, i, NULL, bl->cites[c], request_docs);
        p.len = 0;
        cg_buf_printf(&p, "{\"contentBlockIndex\":%zu,\"p\":\"abcdefghijklmn\"}", i);
        br_event(a, "contentBlockStop", &p);
    }
    p.len = 0;
    cg_buf_puts(&p, "{\"p\":\"abcdefghijkl\",\"stopReason\":\"end_turn\"}");
    br_event(a, "messageStop", &p);
    p.len = 0;
    unsigned out = count_tokens();
    cg_buf_printf(&p,
                  "{\"metrics\":{\"latencyMs\":120},\"p\":\"abcdef\",\"usage\":{\"inputTokens\":%d,"
                  "\"outputTokens\":%u,\"totalTokens\":%u}}",
                  DEMO_INPUT_TOKENS, out, DEMO_INPUT_TOKENS + out);
    br_event(a, "metadata", &p);
    cg_buf_free(&p);
}

static void bedrock_body(cg_demo_answer_t *a, size_t request_docs)
{
    cg_buf_t *b = &a->bytes;
    cg_buf_puts(b, "{\"output\":{\"message\":{\"role\":\"assistant\",\"content\":[");
    for (size_t i = 0; i < NBLOCKS; i++) {
        const demo_block_t *bl = &BLOCKS[i];
        cg_buf_puts(b, i ? "," : "");
        cg_buf_puts(b, bl->ncites ? "{\"citationsContent\":{\"content\":[{\"text\":\""
                                  : "{\"text\":\"");
        for (int k = 0; bl->tokens[k]; k++)
            cg_json_put_escaped(b, bl->tokens[k], strlen(bl->tokens[k]));
        if (bl->ncites == 0) {
            cg_buf_puts(b, "\"}");
            continue;
        }
        cg_buf_puts(b, " \"}],\"citations\":[");
        for (int c = 0; c < bl->ncites; c++) {
            if (c)
                cg_buf_putc(b, ',');
            br_citation(b, bl->cites[c], request_docs);
        }
        cg_buf_puts(b, "]}}");
    }
    unsigned out = count_tokens();
    cg_buf_printf(b,
                  "]}},\"stopReason\":\"end_turn\",\"usage\":{\"inputTokens\":%d,"
                  "\"outputTokens\":%u,\"totalTokens\":%u},\"metrics\":{\"latencyMs\":120}}",
                  DEMO_INPUT_TOKENS, out, DEMO_INPUT_TOKENS + out);
    add_piece(a);
}

/* --- bedrock-kb: Knowledge Bases, RetrieveAndGenerate ---------------------------- */

/* A retrieved reference of document k: a web page when it has a URL, else
 * a file in S3 (a title, never a link). */
static void kb_reference(cg_buf_t *b, int k)
{
    const demo_doc_t *doc = &DOCS[k];
    cg_buf_puts(b, "{\"content\":{\"type\":\"TEXT\",\"text\":");
    cg_json_put_cstr(b, doc->text);
    if (doc->url) {
        cg_buf_puts(b, "},\"location\":{\"type\":\"WEB\",\"webLocation\":{\"url\":");
        cg_json_put_cstr(b, doc->url);
    } else {
        cg_buf_puts(b, "},\"location\":{\"type\":\"S3\",\"s3Location\":{\"uri\":\"s3://demo-kb/");
        cg_json_put_escaped(b, doc->name, strlen(doc->name));
        cg_buf_putc(b, '"');
    }
    cg_buf_puts(b, "}},\"metadata\":{\"x-amz-bedrock-kb-title\":");
    cg_json_put_cstr(b, doc->title);
    cg_buf_printf(b, ",\"x-amz-bedrock-kb-chunk-id\":\"demo-%d\"}}", k);
}

/* Block i's citation: its text, the span that ends at `end` (inclusive,
 * in characters: the demo's text is ASCII), its references. */
static void kb_citation(cg_buf_t *b, const demo_block_t *bl, size_t start, size_t end)
{
    cg_buf_puts(b, "{\"generatedResponsePart\":{\"textResponsePart\":{\"text\":\"");
    for (int k = 0; bl->tokens[k]; k++)
        cg_json_put_escaped(b, bl->tokens[k], strlen(bl->tokens[k]));
    cg_buf_printf(b, " \",\"span\":{\"start\":%zu,\"end\":%zu}}},\"retrievedReferences\":[", start,
                  end);
    for (int c = 0; c < bl->ncites; c++) {
        if (c)
            cg_buf_putc(b, ',');
        kb_reference(b, bl->cites[c]);
    }
    cg_buf_puts(b, "]}");
}

static void kb_output(cg_demo_answer_t *a, cg_buf_t *p, const char *text)
{
    p->len = 0;
    cg_buf_puts(p, "{\"text\":");
    cg_json_put_cstr(p, text);
    cg_buf_putc(p, '}');
    br_event(a, "output", p);
}

/* Each block's text in `output` events, a cited block's with a space
 * after it, then its `citation`. */
static void kb_stream(cg_demo_answer_t *a, size_t request_docs)
{
    (void)request_docs;
    cg_buf_t p = {0};
    size_t at = 0;
    for (size_t i = 0; i < NBLOCKS; i++) {
        const demo_block_t *bl = &BLOCKS[i];
        size_t start = at;
        for (int k = 0; bl->tokens[k]; k++) {
            kb_output(a, &p, bl->tokens[k]);
            at += strlen(bl->tokens[k]);
        }
        if (bl->ncites == 0)
            continue;
        kb_output(a, &p, " ");
        at++;
        p.len = 0;
        kb_citation(&p, bl, start, at - 1);
        br_event(a, "citation", &p);
    }
    cg_buf_free(&p);
}

static void kb_body(cg_demo_answer_t *a, size_t request_docs)
{
    (void)request_docs;
    cg_buf_t *b = &a->bytes;
    cg_buf_puts(b, "{\"sessionId\":\"demo-session\",\"output\":{\"text\":\"");
    for (size_t i = 0; i < NBLOCKS; i++) {
        for (int k = 0; BLOCKS[i].tokens[k]; k++)
            cg_json_put_escaped(b, BLOCKS[i].tokens[k], strlen(BLOCKS[i].tokens[k]));
        if (BLOCKS[i].ncites)
            cg_buf_putc(b, ' ');
    }
    cg_buf_puts(b, "\"},\"citations\":[");
    size_t at = 0;
    for (size_t i = 0, n = 0; i < NBLOCKS; i++) {
        size_t start = at;
        for (int k = 0; BLOCKS[i].tokens[k]; k++)
            at += strlen(BLOCKS[i].tokens[k]);
        if (BLOCKS[i].ncites == 0)
            continue;
        at++; /* the space */
        cg_buf_puts(b, n++ ? "," : "");
        kb_citation(b, &BLOCKS[i], start, at - 1);
    }
    cg_buf_puts(b, "]}");
    add_piece(a);
}

/* --- cohere: v2 Chat ---------------------------------------------------------- */

/* Cohere's answer is Gemini's text (characters of several bytes: its
 * citations' offsets count characters, not bytes), each cited passage
 * followed by its citation (citation_options mode fast). */
#define CO_ID "\"id\":\"demo-cohere\""

/* A citation of passage [start, end) (characters): its documents. */
static void co_citation(cg_buf_t *b, const demo_block_t *bl, size_t start, size_t end)
{
    cg_buf_printf(b, "{\"start\":%zu,\"end\":%zu,\"sources\":[", start, end);
    for (int c = 0; c < bl->ncites; c++) {
        const demo_doc_t *doc = &DOCS[bl->cites[c]];
        cg_buf_printf(b, "%s{\"type\":\"document\",\"id\":\"doc:%d\","
                         "\"document\":{\"id\":\"doc:%d\",\"title\":",
                      c ? "," : "", bl->cites[c], bl->cites[c]);
        cg_json_put_cstr(b, doc->title);
        cg_buf_puts(b, ",\"snippet\":");
        cg_json_put_cstr(b, doc->text);
        if (doc->url) {
            cg_buf_puts(b, ",\"url\":");
            cg_json_put_cstr(b, doc->url);
        }
        cg_buf_puts(b, "}}");
    }
    cg_buf_puts(b, "],\"type\":\"TEXT_CONTENT\"}");
}

static void co_end(cg_buf_t *b, unsigned out)
{
    cg_buf_printf(b,
                  "\"usage\":{\"billed_units\":{\"input_tokens\":%d,\"output_tokens\":%u},"
                  "\"tokens\":{\"input_tokens\":%d,\"output_tokens\":%u}}",
                  DEMO_INPUT_TOKENS, out, DEMO_INPUT_TOKENS, out);
}

static void cohere_stream(cg_demo_answer_t *a, size_t request_docs)
{
    (void)request_docs;
    cg_buf_t *b = &a->bytes;
    sse_begin(a, "message-start");
    cg_buf_puts(b, "{" CO_ID ",\"type\":\"message-start\",\"delta\":{\"message\":{\"role\":"
                   "\"assistant\",\"content\":[],\"tool_plan\":\"\",\"tool_calls\":[],"
                   "\"citations\":[]}}}");
    sse_end(a);
    sse_begin(a, "content-start");
    cg_buf_puts(b, "{\"type\":\"content-start\",\"index\":0,\"delta\":{\"message\":{\"content\":"
                   "{\"type\":\"text\",\"text\":\"\"}}}}");
    sse_end(a);
    size_t chars = 0, start;
    int ncite = 0;
    for (size_t i = 0; i < GM_NBLOCKS; i++) {
        const demo_block_t *bl = &GM_BLOCKS[i];
        start = chars;
        for (int k = 0; bl->tokens[k]; k++) {
            sse_begin(a, "content-delta");
            cg_buf_puts(b, "{\"type\":\"content-delta\",\"index\":0,\"delta\":{\"message\":"
                           "{\"content\":{\"text\":");
            cg_json_put_cstr(b, bl->tokens[k]);
            cg_buf_puts(b, "}}}}");
            sse_end(a);
            chars += code_points(bl->tokens[k], strlen(bl->tokens[k]));
        }
        if (bl->ncites == 0)
            continue;
        sse_begin(a, "citation-start");
        cg_buf_printf(b, "{\"type\":\"citation-start\",\"index\":%d,\"delta\":{\"message\":"
                         "{\"citations\":",
                      ncite);
        co_citation(b, bl, start, chars);
        cg_buf_puts(b, "}}}");
        sse_end(a);
        sse_begin(a, "citation-end");
        cg_buf_printf(b, "{\"type\":\"citation-end\",\"index\":%d}", ncite++);
        sse_end(a);
    }
    sse_begin(a, "content-end");
    cg_buf_puts(b, "{\"type\":\"content-end\",\"index\":0}");
    sse_end(a);
    sse_begin(a, "message-end");
    cg_buf_puts(b, "{\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"COMPLETE\",");
    co_end(b, gm_count_tokens());
    cg_buf_puts(b, "}}");
    sse_end(a);
}

static void cohere_body(cg_demo_answer_t *a, size_t request_docs)
{
    (void)request_docs;
    cg_buf_t *b = &a->bytes;
    cg_buf_puts(b, "{" CO_ID ",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
                   "\"text\":\"");
    for (size_t i = 0; i < GM_NBLOCKS; i++)
        for (int k = 0; GM_BLOCKS[i].tokens[k]; k++)
            cg_json_put_escaped(b, GM_BLOCKS[i].tokens[k], strlen(GM_BLOCKS[i].tokens[k]));
    cg_buf_puts(b, "\"}],\"citations\":[");
    size_t chars = 0, start;
    bool first = true;
    for (size_t i = 0; i < GM_NBLOCKS; i++) {
        const demo_block_t *bl = &GM_BLOCKS[i];
        start = chars;
        for (int k = 0; bl->tokens[k]; k++)
            chars += code_points(bl->tokens[k], strlen(bl->tokens[k]));
        if (bl->ncites == 0)
            continue;
        if (!first)
            cg_buf_putc(b, ',');
        first = false;
        co_citation(b, bl, start, chars);
    }
    cg_buf_puts(b, "]},\"finish_reason\":\"COMPLETE\",");
    co_end(b, gm_count_tokens());
    cg_buf_putc(b, '}');
    add_piece(a);
}

/* The answers of each dialect, by name; any other gets openai's. */
typedef struct demo_dialect {
    const char *name;
    void (*stream)(cg_demo_answer_t *a, size_t request_docs);
    void (*body)(cg_demo_answer_t *a, size_t request_docs);
} demo_dialect_t;

static void openai_stream_of(cg_demo_answer_t *a, size_t docs)
{
    (void)docs;
    openai_stream(a);
}

static void openai_body_of(cg_demo_answer_t *a, size_t docs)
{
    (void)docs;
    openai_body(a);
}

static void responses_stream_of(cg_demo_answer_t *a, size_t docs)
{
    (void)docs;
    responses_stream(a);
}

static void responses_body_of(cg_demo_answer_t *a, size_t docs)
{
    (void)docs;
    responses_body(a);
}

static const demo_dialect_t demos[] = {
    {"anthropic", anthropic_stream, anthropic_body},
    {"responses", responses_stream_of, responses_body_of},
    {"gemini", gemini_stream, gemini_body},
    {"vertex", gemini_stream, gemini_body},
    {"bedrock", bedrock_stream, bedrock_body},
    {"bedrock-kb", kb_stream, kb_body},
    {"cohere", cohere_stream, cohere_body},
};

const char *cg_demo_content_type(const cg_dialect_t *d, bool stream)
{
    if (!stream)
        return "application/json";
    return cg_dialect_view(d) && cg_dialect_view(d)->message ? "application/vnd.amazon.eventstream"
                                                             : "text/event-stream";
}

void cg_demo_answer(cg_demo_answer_t *a, const cg_dialect_t *d, bool stream, size_t request_docs)
{
    demo_dialect_t demo = {"openai", openai_stream_of, openai_body_of};
    for (size_t i = 0; i < sizeof(demos) / sizeof(demos[0]); i++)
        if (strcmp(cg_dialect_name(d), demos[i].name) == 0)
            demo = demos[i];
    (stream ? demo.stream : demo.body)(a, request_docs);
}

bool cg_demo_answer_field(const cg_dialect_t *d, cg_span_t request, cg_buf_t *name, cg_buf_t *value)
{
    if (strcmp(cg_dialect_name(d), "bedrock-kb") != 0)
        return false;
    cg_buf_puts(name, "x-amzn-bedrock-knowledge-base-session-id");
    cg_json_t j;
    cg_json_init(&j, 256);
    int session = -1;
    if (request.n && cg_json_parse(&j, request.p, request.n) >= 0)
        session = cg_json_get(&j, 0, "sessionId");
    if (cg_json_is_str(&j, session)) {
        cg_span_t raw = cg_json_raw(&j, session);
        char *dst = cg_buf_reserve(value, raw.n + 1);
        value->len += cg_json_unescape(raw.p, raw.n, dst);
    } else {
        cg_buf_puts(value, "demo-session");
    }
    cg_json_free(&j);
    return true;
}
