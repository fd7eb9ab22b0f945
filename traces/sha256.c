/* sha256.c — SHA-256 (FIPS 180-4) written from the standard, used to
 * fingerprint trace files so a stored run names exactly the bytes it
 * replayed; where the build found libcrypto, trace_sha256_* hand the bytes
 * to its SHA-256 instead (about 2-4x faster), and this one is the
 * reference the tests compare it with. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"
#include "trace_internal.h"

#ifdef KVSIM_HAVE_LIBCRYPTO
/* The SHA256_* calls are deprecated in OpenSSL 3 in favour of EVP, which
 * allocates; the plain context fits trace_sha256's init/update/hex. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
_Static_assert(sizeof(SHA256_CTX) <= sizeof(((trace_sha256 *)0)->u.ossl),
               "trace_sha256 too small for SHA256_CTX");
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the chaining state.  Cost: 64 rounds. */
static void compress(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    uint32_t e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = ror(e, 6) ^ ror(e, 11) ^ ror(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = hh + S1 + ch + K[i] + w[i];
        uint32_t S0 = ror(a, 2) ^ ror(a, 13) ^ ror(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void trace_sha256_ref_init(trace_sha256_ref *c)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->len = 0;
    c->nbuf = 0;
}

void trace_sha256_ref_update(trace_sha256_ref *c, const void *data, size_t n)
{
    const unsigned char *p = data;
    c->len += n;
    if (c->nbuf > 0) {
        size_t take = 64 - c->nbuf < n ? 64 - c->nbuf : n;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take;
        p += take;
        n -= take;
        if (c->nbuf < 64)
            return;
        compress(c->h, c->buf);
        c->nbuf = 0;
    }
    for (; n >= 64; p += 64, n -= 64)
        compress(c->h, p);
    memcpy(c->buf, p, n);
    c->nbuf = n;
}

void trace_sha256_ref_hex(trace_sha256_ref *c, char hex[65])
{
    uint64_t bits = c->len * 8;
    unsigned char pad[72] = {0x80};
    /* Pad with 0x80, zeros, then the 64-bit big-endian bit length, to a
     * multiple of 64 bytes. */
    size_t npad = (c->nbuf < 56 ? 56 : 120) - c->nbuf;
    for (int i = 0; i < 8; i++)
        pad[npad + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    trace_sha256_ref_update(c, pad, npad + 8);
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            hex[8 * i + j] = digits[(c->h[i] >> (28 - 4 * j)) & 0xf];
    hex[64] = '\0';
}

#ifdef KVSIM_HAVE_LIBCRYPTO
void trace_sha256_init(trace_sha256 *c) { SHA256_Init((SHA256_CTX *)c->u.ossl); }

void trace_sha256_update(trace_sha256 *c, const void *data, size_t n)
{
    SHA256_Update((SHA256_CTX *)c->u.ossl, data, n);
}

void trace_sha256_hex(trace_sha256 *c, char hex[65])
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    static const char digits[] = "0123456789abcdef";
    SHA256_Final(d, (SHA256_CTX *)c->u.ossl);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 0xf];
    }
    hex[64] = '\0';
}

const char *trace_sha256_impl(void) { return "libcrypto"; }
#else
void trace_sha256_init(trace_sha256 *c) { trace_sha256_ref_init(&c->u.ref); }

void trace_sha256_update(trace_sha256 *c, const void *data, size_t n)
{
    trace_sha256_ref_update(&c->u.ref, data, n);
}

void trace_sha256_hex(trace_sha256 *c, char hex[65]) { trace_sha256_ref_hex(&c->u.ref, hex); }

const char *trace_sha256_impl(void) { return "builtin"; }
#endif

int trace_sha256_file(const char *path, char hex[65], kvs_err *err)
{
    unsigned char buf[65536];
    trace_sha256 c;
    FILE *f = fopen(path, "rb");
    if (!f)
        return kvs_errf(err, KVS_EIO, "%s: cannot open: %s", path, strerror(errno));
    trace_sha256_init(&c);
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        trace_sha256_update(&c, buf, k);
    int bad = ferror(f);
    int saved = errno;
    fclose(f);
    if (bad)
        return kvs_errf(err, KVS_EIO, "%s: read error: %s", path, strerror(saved));
    trace_sha256_hex(&c, hex);
    return KVS_OK;
}
