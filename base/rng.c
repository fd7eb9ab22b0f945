#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rng_init(rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_next_u64(rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rng_uniform(rng *r) { return (double)(rng_next_u64(r) >> 11) * 0x1.0p-53; }

uint64_t rng_below(rng *r, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = rng_next_u64(r);
    } while (x >= limit);
    return x % n;
}

double rng_exponential(rng *r, double mean)
{
    double u = rng_uniform(r);
    return -mean * log1p(-u);
}

double rng_normal(rng *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 <= 0.0)
        u1 = 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double rng_gamma(rng *r, double k, double theta)
{
    if (k < 1.0) {
        /* Boost: Gamma(k) = Gamma(k+1) * U^(1/k). */
        double u = rng_uniform(r);
        if (u <= 0.0)
            u = 0x1.0p-53;
        return rng_gamma(r, k + 1.0, theta) * pow(u, 1.0 / k);
    }
    double d = k - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x)
            return d * v * theta;
        if (u > 0.0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v * theta;
    }
}
