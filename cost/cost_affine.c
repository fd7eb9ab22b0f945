/* cost_affine.c — d = c0 + c1*tokens + c2*kv_read + c3*prefill_sq seconds,
 * the hand-checkable model of the semantics, section 6.  A prefill chunk
 * over stored context (chunked prefill, prefix hits) adds its cross term:
 * the c3 factor is prefill_sq + 2*prefill_ctx, which is prefill_sq exactly
 * when nothing is chunked or cached (docs/semantics-extensions.md, C). */
#include "cost.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct affine {
    double c[4]; /* s, s/token, s/token of KV read, s/token^2 */
} affine;

static double affine_step_s(void *self, const cost_batch *b)
{
    const affine *a = self;
    return a->c[0] + a->c[1] * (double)b->tokens + a->c[2] * (double)b->kv_read +
           a->c[3] * (double)(b->prefill_sq + 2 * b->prefill_ctx);
}

/* Shortest of %.15g / %.17g that reads back as the same double. */
static void fmt_exact(char *buf, size_t n, double v)
{
    snprintf(buf, n, "%.15g", v);
    if (strtod(buf, NULL) != v)
        snprintf(buf, n, "%.17g", v);
}

static void affine_describe(void *self, char *buf, size_t n)
{
    const affine *a = self;
    char s[4][32];
    for (int i = 0; i < 4; i++)
        fmt_exact(s[i], sizeof s[i], a->c[i]);
    snprintf(buf, n, "affine c0=%s c1=%s c2=%s c3=%s", s[0], s[1], s[2], s[3]);
}

static void affine_free(void *self) { free(self); }

static const cost_model_vt affine_vt = {
    .name = "affine",
    .step_s = affine_step_s,
    .free = affine_free,
    .describe = affine_describe,
};

/* Parse one field [s, e) as a finite non-negative number. */
static int parse_coef(const char *s, const char *e, double *out)
{
    char tmp[64];
    size_t n = (size_t)(e - s);
    if (n == 0 || n >= sizeof tmp || isspace((unsigned char)*s))
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    if (errno || *end || !isfinite(v) || v < 0)
        return -1;
    *out = v;
    return 0;
}

int cost_affine_create(const char *params, cost_model *out, kvs_err *err)
{
    double c[4];
    const char *p = params ? params : "";
    int i = 0;
    for (; i < 4; i++) {
        const char *e = strchr(p, ',');
        if (!e)
            e = p + strlen(p);
        if ((i < 3 && *e != ',') || (i == 3 && *e) || parse_coef(p, e, &c[i]))
            break;
        p = e + 1;
    }
    if (i < 4)
        return kvs_errf(err, KVS_EINVAL,
                        "--cost: affine needs exactly four finite non-negative numbers "
                        "c0,c1,c2,c3 (seconds, s/token, s/KV token, s/token^2), got 'affine:%s'",
                        params ? params : "");
    affine *a = malloc(sizeof *a);
    if (!a)
        return kvs_errf(err, KVS_ENOMEM, "--cost: out of memory");
    memcpy(a->c, c, sizeof c);
    out->vt = &affine_vt;
    out->self = a;
    return KVS_OK;
}
