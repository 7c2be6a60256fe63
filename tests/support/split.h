/*
 * Test support for the split properties (SPEC §6 Fidelity): a stream fed
 * in reads cut anywhere gives the client what one read gives.
 *
 * split_every() runs a stream in two reads cut at each point k of 1..n-1.
 * A release build tries every k. Under AddressSanitizer, where a run is an
 * order of magnitude slower and the whole property took many minutes, it
 * tries a deterministic sample instead: every cut within SPLIT_NEAR bytes
 * of a byte the readers decide on, every cut near an offset the caller
 * names (a size cap: where a read first takes an event over it), and every
 * SPLIT_STRIDE-th of the rest. The bytes decided on: CR and LF (so every
 * line start and event boundary), each byte of a multibyte UTF-8 sequence
 * (so every cut inside 【, † and 】), [ and ] of references, a backslash
 * and the byte it escapes (so \" and \\), and the colon of an SSE field
 * (the first of its line). Other quotes and colons are left to the stride:
 * an event's JSON is only read whole, so a cut beside them is a cut in a
 * plain run of bytes, and they are a third of these streams' bytes.
 * CG_SPLIT_ALL=1 in the environment makes a sanitized build try every cut.
 *
 * split_random() runs it in random patterns of many reads, the same in
 * every build.
 */
#ifndef CG_TEST_SPLIT_H
#define CG_TEST_SPLIT_H

#include "citegate/common.h"

#include <stdint.h>

#define SPLIT_NEAR   2
#define SPLIT_STRIDE 32

/* Which cuts of in[0..n) a split_every() run tries: keep[k] for k in 1..n-1. */
typedef struct split_points {
    unsigned char *keep;
    size_t n;
    bool sampled; /* false: every cut */
} split_points_t;

/* The cuts of in[0..n) as described above; `phase` (any number) picks
 * which residue the stride keeps, so that runs of one input with different
 * phases sample different plain bytes. */
void split_points_init(split_points_t *sp, const char *in, size_t n, size_t phase);
/* Keeps every cut within SPLIT_NEAR bytes of offset `at` as well. */
void split_points_near(split_points_t *sp, size_t at);
void split_points_free(split_points_t *sp);
/* Does this build sample (a sanitized build without CG_SPLIT_ALL=1)? */
bool split_sampled(void);

/* One stream under test. run feeds in[0..n) in reads of sizes[] (cycled)
 * and writes what the client gets to *out; check compares a split run's
 * output with the whole run's and fails the test when they differ, naming
 * the pattern with `k` and `how` ("byte": cut at k, "random": the k-th
 * random pattern). ctx is theirs. */
typedef struct split_case split_case_t;
struct split_case {
    const char *in;
    size_t n;
    void (*run)(const split_case_t *c, const size_t *sizes, size_t nsizes, cg_buf_t *out);
    void (*check)(const split_case_t *c, const cg_buf_t *whole, const cg_buf_t *got, size_t k,
                  const char *how);
    void *ctx;
};

/* Runs c in two reads at every cut of sp, checking each against *whole
 * (the caller's run in one read); returns how many cuts it tried. */
size_t split_every(const split_case_t *c, const split_points_t *sp, const cg_buf_t *whole);
/* Runs c in patterns - 1 random patterns of 1-16 reads of 1-8 or 1-300
 * bytes each (cycled), drawn from *rng, checking each against *whole. */
void split_random(const split_case_t *c, size_t patterns, uint64_t *rng, const cg_buf_t *whole);

/* Adds cuts to a count, and prints it on stdout (in the ctest log):
 * "<what>: <tried> of <cuts> split points (every one | sampled)". */
typedef struct split_tally {
    size_t tried, cuts, runs;
} split_tally_t;
void split_tally_add(split_tally_t *t, size_t tried, size_t cuts);
void split_tally_print(const split_tally_t *t, const char *what);

/* A check: the split run gives the whole run's bytes; on a difference the
 * client views say how they differ. `what` names the case. */
void split_same_bytes(const char *what, const cg_buf_t *whole, const cg_buf_t *got, size_t k,
                      const char *how);

#endif
