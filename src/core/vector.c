/* Vectors of semantic recall: see citegate/embedding.h. */
#include "citegate/embedding.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cg_vector_free(cg_vector_t *v)
{
    free(v->v);
    free(v->model);
    memset(v, 0, sizeof(*v));
}

void cg_vector_copy(cg_vector_t *to, const cg_vector_t *from)
{
    memset(to, 0, sizeof(*to));
    if (from->v == NULL || from->dim == 0)
        return;
    to->v = cg_xmalloc(from->dim * sizeof(float));
    memcpy(to->v, from->v, from->dim * sizeof(float));
    to->dim = from->dim;
    if (from->model)
        to->model = cg_xstrndup(from->model, strlen(from->model));
}

bool cg_vector_comparable(const cg_vector_t *a, const cg_vector_t *b)
{
    return a && b && a->v && b->v && a->dim > 0 && a->dim == b->dim && a->model && b->model &&
           strcmp(a->model, b->model) == 0;
}

double cg_vector_cosine(const float *a, const float *b, uint32_t dim)
{
    double ab = 0, aa = 0, bb = 0;
    for (uint32_t i = 0; i < dim; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    if (aa == 0 || bb == 0)
        return 0;
    double c = ab / (sqrt(aa) * sqrt(bb));
    return c > 1 ? 1 : c < -1 ? -1 : c; /* rounding may step just outside */
}

/* Stored little-endian whatever the host, so a database moves between
 * machines. */
void cg_vector_pack(const float *v, uint32_t dim, cg_buf_t *out)
{
    for (uint32_t i = 0; i < dim; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                              (unsigned char)(u >> 24)};
        cg_buf_put(out, (const char *)b, 4);
    }
}

int cg_vector_unpack(const void *p, size_t n, float **out, uint32_t *dim)
{
    if (n == 0 || n % 4 != 0 || n / 4 > CG_EMBED_MAX_DIM)
        return -1;
    const unsigned char *b = p;
    uint32_t d = (uint32_t)(n / 4);
    float *v = cg_xmalloc(n);
    for (uint32_t i = 0; i < d; i++, b += 4) {
        uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24;
        memcpy(&v[i], &u, 4);
        if (!isfinite(v[i])) {
            free(v);
            return -1;
        }
    }
    *out = v;
    *dim = d;
    return 0;
}
