/* rng.h — a small deterministic random number generator (xoshiro256**,
 * seeded through splitmix64) and the few distributions kvsim samples.
 * The same seed gives the same sequence on every platform: no libc rand(),
 * no floating-point shortcuts that differ between compilers.
 */
#ifndef RNG_H
#define RNG_H

#include <stdint.h>

typedef struct rng {
    uint64_t s[4]; /* xoshiro256** state; never all zero */
} rng;

/* splitmix64's finaliser: a bijection of 64-bit words that spreads every
 * input bit (the scheduler's block identities hash with it).  Cost: O(1). */
static inline uint64_t rng_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

void rng_init(rng *r, uint64_t seed);
uint64_t rng_next_u64(rng *r);
/* Uniform in [0, 1): 53 random bits. */
double rng_uniform(rng *r);
/* Uniform integer in [0, n), n >= 1 (unbiased, rejection sampling). */
uint64_t rng_below(rng *r, uint64_t n);
/* Exponential with the given mean (> 0). */
double rng_exponential(rng *r, double mean);
/* Gamma(shape k > 0, scale theta > 0), Marsaglia–Tsang. */
double rng_gamma(rng *r, double k, double theta);
/* Standard normal (Box–Muller, one value per call, no caching). */
double rng_normal(rng *r);

#endif
