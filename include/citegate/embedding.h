/*
 * Embeddings for semantic recall (SPEC §8): the request body of an
 * OpenAI-compatible /v1/embeddings call, the reading of its answer, the
 * stored form of a vector and the cosine that ranks recalled patterns.
 * Pure: no I/O.
 */
#ifndef CITEGATE_EMBEDDING_H
#define CITEGATE_EMBEDDING_H

#include "citegate/common.h"

#include <stdint.h>

/* Longest vector kept, in dimensions (today's models use at most 4096). */
#define CG_EMBED_MAX_DIM 8192
/* Longest answer read from an embeddings endpoint, in bytes. */
#define CG_EMBED_MAX_BODY (1u << 20)

typedef struct cg_vector {
    float *v;    /* dim floats (owned); NULL: no vector */
    uint32_t dim;
    char *model; /* the model that made it (owned); vectors of two models never compare */
} cg_vector_t;

void cg_vector_free(cg_vector_t *v);
/* to becomes an owned copy of from (to's old contents are not freed). */
void cg_vector_copy(cg_vector_t *to, const cg_vector_t *from);

/* Can a and b be compared: both present, same model and dimension? */
bool cg_vector_comparable(const cg_vector_t *a, const cg_vector_t *b);

/* Cosine similarity of a[0..dim) and b[0..dim), in [-1, 1]; 0 when either is all zeros. */
double cg_vector_cosine(const float *a, const float *b, uint32_t dim);

/* Appends {"model":MODEL,"input":TEXT}, TEXT[0..n) JSON-escaped (invalid UTF-8 replaced). */
void cg_embedding_request(cg_buf_t *out, const char *model, const char *text, size_t n);

/*
 * Reads an embeddings answer: the vector is data[0].embedding, an array of
 * 1..CG_EMBED_MAX_DIM finite numbers. Sets out->v and out->dim (out->model
 * untouched) and returns 0, or returns -1 with a one-line reason in err
 * ("not JSON", "no data[0].embedding", "dimension 9000 over 8192", …).
 */
int cg_embedding_parse(const char *body, size_t n, cg_vector_t *out, char *err, size_t errlen);

/* The stored form of a vector: dim IEEE-754 float32 values, little-endian. */
void cg_vector_pack(const float *v, uint32_t dim, cg_buf_t *out);
/* Reads p[0..n) back; -1 when n is 0, not a multiple of 4 or over the bound. */
int cg_vector_unpack(const void *p, size_t n, float **out, uint32_t *dim);

#endif
