/* synth.c — synthetic traces: parsing the spec string and generating the
 * requests for (spec, seed), with prompt prefix hashes for a shared system
 * prompt and multi-turn conversations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/rng.h"
#include "trace.h"
#include "trace_internal.h"

#define PFX "--synthetic: "
#define MAX_N 100000000 /* 1e8 requests = 3.2 GB of trace_req */

#define MAX_TURNS 100000

enum { K_ARRIVAL, K_RATE, K_CV, K_N, K_PROMPT, K_OUTPUT, K_LENGTHS, K_PRIORITIES, K_SYSTEM,
       K_TURNS, K_COUNT };
static const char *const key_names[K_COUNT] = {"arrival", "rate",       "cv",
                                               "n",       "prompt",     "output",
                                               "lengths", "priorities", "system_prompt",
                                               "turns"};

/* "L" or "uniform:A:B" for key `key`, into kind/a/b. */
static int parse_len(const char *key, const char *v, trace_len_kind *kind, int64_t *a,
                     int64_t *b, kvs_err *err)
{
    const char *why;
    if (!strncmp(v, "uniform:", 8)) {
        char tmp[128];
        if (strlen(v + 8) >= sizeof tmp)
            return kvs_errf(err, KVS_EINVAL, PFX "%s: '%s' is too long", key, v);
        strcpy(tmp, v + 8);
        char *colon = strchr(tmp, ':');
        if (!colon)
            return kvs_errf(err, KVS_EINVAL, PFX "%s: expected uniform:A:B, got '%s'", key, v);
        *colon = '\0';
        if (trace_parse_i64(tmp, a, &why) || trace_parse_i64(colon + 1, b, &why))
            return kvs_errf(err, KVS_EINVAL, PFX "%s: '%s': A and B must be integers", key, v);
        if (*a < 1 || *b < *a)
            return kvs_errf(err, KVS_EINVAL, PFX "%s: '%s': need 1 <= A <= B", key, v);
        if (*b > TRACE_MAX_TOKENS)
            return kvs_errf(err, KVS_EINVAL, PFX "%s: '%s': B is above the limit of %lld "
                            "tokens", key, v, (long long)TRACE_MAX_TOKENS);
        *kind = TRACE_LEN_UNIFORM;
        return KVS_OK;
    }
    if (trace_parse_i64(v, a, &why))
        return kvs_errf(err, KVS_EINVAL, PFX "%s: '%s' %s (want L or uniform:A:B)", key, v, why);
    if (*a < 1)
        return kvs_errf(err, KVS_EINVAL, PFX "%s: must be >= 1, got %lld", key, (long long)*a);
    if (*a > TRACE_MAX_TOKENS)
        return kvs_errf(err, KVS_EINVAL, PFX "%s: %lld is above the limit of %lld tokens",
                        key, (long long)*a, (long long)TRACE_MAX_TOKENS);
    *b = *a;
    *kind = TRACE_LEN_FIXED;
    return KVS_OK;
}

/* "P0:S0/P1:S1/..." into the class arrays of s; errors start with pfx
 * ("--synthetic: priorities: " or "--priorities: "). */
static int parse_classes_as(const char *pfx, char *v, trace_synth_spec *s, kvs_err *err)
{
    const char *why;
    double sum = 0;
    for (char *item = v, *next; item; item = next) {
        next = strchr(item, '/');
        if (next)
            *next++ = '\0';
        char *colon = strchr(item, ':');
        if (!colon)
            return kvs_errf(err, KVS_EINVAL, "%s'%s' is not PRIORITY:SHARE", pfx, item);
        *colon = '\0';
        int64_t p;
        double sh;
        if (trace_parse_i64(item, &p, &why) || p < 0 || p > INT32_MAX)
            return kvs_errf(err, KVS_EINVAL, "%spriority '%s' must be an "
                            "integer in [0, %d]", pfx, item, INT32_MAX);
        if (trace_parse_f64(colon + 1, &sh, &why) || !(sh > 0) || sh > 1)
            return kvs_errf(err, KVS_EINVAL, "%sshare '%s' must be a number "
                            "in (0, 1]", pfx, colon + 1);
        for (int i = 0; i < s->n_classes; i++)
            if (s->class_priority[i] == p)
                return kvs_errf(err, KVS_EINVAL, "%spriority %lld listed twice",
                                pfx, (long long)p);
        if (s->n_classes == TRACE_MAX_CLASSES)
            return kvs_errf(err, KVS_EINVAL, "%smore than %d classes",
                            pfx, TRACE_MAX_CLASSES);
        s->class_priority[s->n_classes] = (int32_t)p;
        s->class_share[s->n_classes++] = sh;
        sum += sh;
    }
    if (fabs(sum - 1.0) > 1e-6)
        return kvs_errf(err, KVS_EINVAL, "%sshares sum to %.9g, not 1", pfx, sum);
    return KVS_OK;
}

static int parse_classes(char *v, trace_synth_spec *s, kvs_err *err)
{
    return parse_classes_as(PFX "priorities: ", v, s, err);
}

/* Assign each class's share by one uniform draw per request, in order (the
 * rule trace_synth_gen uses for priorities=). */
static void draw_classes(const trace_synth_spec *spec, trace *t, rng *rp)
{
    for (int64_t i = 0; i < t->n; i++) {
        double u = rng_uniform(rp), cum = 0;
        int c = spec->n_classes - 1; /* rounding leftover goes to the last */
        for (int j = 0; j < spec->n_classes - 1; j++) {
            cum += spec->class_share[j];
            if (u < cum) {
                c = j;
                break;
            }
        }
        t->reqs[i].priority = spec->class_priority[c];
    }
}

int trace_assign_priorities(trace *t, const char *classes, uint64_t seed, kvs_err *err)
{
    trace_synth_spec s;
    memset(&s, 0, sizeof s);
    char buf[1024];
    if (strlen(classes) >= sizeof buf)
        return kvs_errf(err, KVS_EINVAL, "--priorities: too long");
    strcpy(buf, classes);
    int rc = parse_classes_as("--priorities: ", buf, &s, err);
    if (rc)
        return rc;
    rng rp;
    rng_init(&rp, rng_mix64(seed ^ UINT64_C(0x7072696f72697479))); /* "priority" */
    draw_classes(&s, t, &rp);
    t->has_priority = 1;
    return KVS_OK;
}

/* Combination rules shared by parse and gen. */
static int check_spec(const trace_synth_spec *s, int given_rate, int given_cv, kvs_err *err)
{
    if (s->n < 1 || s->n > MAX_N)
        return kvs_errf(err, KVS_EINVAL, PFX "n: must be in [1, %d], got %lld", MAX_N,
                        (long long)s->n);
    if (s->arrival == TRACE_ARRIVAL_BURST) {
        if (given_rate)
            return kvs_errf(err, KVS_EINVAL, PFX "rate: not used with arrival=burst");
    } else if (!(s->rate > 0) || !isfinite(s->rate)) {
        return kvs_errf(err, KVS_EINVAL, PFX "rate: must be > 0");
    }
    if (s->arrival == TRACE_ARRIVAL_GAMMA) {
        if (!(s->cv > 0) || s->cv > 100)
            return kvs_errf(err, KVS_EINVAL, PFX "cv: must be in (0, 100]");
    } else if (given_cv) {
        return kvs_errf(err, KVS_EINVAL, PFX "cv: only used with arrival=gamma");
    }
    if ((s->prompt_kind == TRACE_LEN_FILE) != (s->output_kind == TRACE_LEN_FILE))
        return kvs_errf(err, KVS_EINVAL, PFX "lengths: gives both prompt and output lengths");
    if (s->prompt_kind != TRACE_LEN_FILE &&
        (s->prompt_a < 1 || s->prompt_b < s->prompt_a || s->output_a < 1 ||
         s->output_b < s->output_a || s->prompt_b > TRACE_MAX_TOKENS ||
         s->output_b > TRACE_MAX_TOKENS))
        return kvs_errf(err, KVS_EINVAL, PFX "prompt/output: need 1 <= A <= B <= %lld",
                        (long long)TRACE_MAX_TOKENS);
    if (s->n_classes < 0 || s->n_classes > TRACE_MAX_CLASSES)
        return kvs_errf(err, KVS_EINVAL, PFX "priorities: 0 to %d classes", TRACE_MAX_CLASSES);
    if (s->system_prompt < 0 || s->system_prompt > TRACE_MAX_TOKENS)
        return kvs_errf(err, KVS_EINVAL, PFX "system_prompt: must be in [0, %lld] tokens",
                        (long long)TRACE_MAX_TOKENS);
    if (s->turns < 0 || s->turns > MAX_TURNS)
        return kvs_errf(err, KVS_EINVAL, PFX "turns: must be in [1, %d]", MAX_TURNS);
    return KVS_OK;
}

/* Set key k (K_*) of the spec from its value text v (non-empty; v lies in
 * a scratch copy of the spec). */
static int set_key(int k, char *v, trace_synth_spec *out, kvs_err *err)
{
    const char *why;
    switch (k) {
    case K_ARRIVAL:
        if (!strcmp(v, "poisson"))
            out->arrival = TRACE_ARRIVAL_POISSON;
        else if (!strcmp(v, "gamma"))
            out->arrival = TRACE_ARRIVAL_GAMMA;
        else if (!strcmp(v, "burst"))
            out->arrival = TRACE_ARRIVAL_BURST;
        else
            return kvs_errf(err, KVS_EINVAL, PFX "arrival: '%s' is not poisson, gamma or burst",
                            v);
        return KVS_OK;
    case K_RATE:
        if (trace_parse_f64(v, &out->rate, &why))
            return kvs_errf(err, KVS_EINVAL, PFX "rate: '%s' %s", v, why);
        if (!(out->rate > 0))
            return kvs_errf(err, KVS_EINVAL, PFX "rate: must be > 0");
        return KVS_OK;
    case K_CV:
        if (trace_parse_f64(v, &out->cv, &why))
            return kvs_errf(err, KVS_EINVAL, PFX "cv: '%s' %s", v, why);
        return KVS_OK;
    case K_N:
        if (trace_parse_i64(v, &out->n, &why))
            return kvs_errf(err, KVS_EINVAL, PFX "n: '%s' %s", v, why);
        if (out->n < 1)
            return kvs_errf(err, KVS_EINVAL, PFX "n: must be >= 1");
        return KVS_OK;
    case K_PROMPT:
        return parse_len("prompt", v, &out->prompt_kind, &out->prompt_a, &out->prompt_b, err);
    case K_OUTPUT:
        return parse_len("output", v, &out->output_kind, &out->output_a, &out->output_b, err);
    case K_LENGTHS:
        out->prompt_kind = out->output_kind = TRACE_LEN_FILE;
        if (strlen(v) >= sizeof out->lengths_path)
            return kvs_errf(err, KVS_EINVAL, PFX "lengths: path longer than %zu bytes",
                            sizeof out->lengths_path - 1);
        snprintf(out->lengths_path, sizeof out->lengths_path, "%s", v);
        return KVS_OK;
    case K_PRIORITIES:
        return parse_classes(v, out, err);
    case K_SYSTEM:
        if (trace_parse_i64(v, &out->system_prompt, &why))
            return kvs_errf(err, KVS_EINVAL, PFX "system_prompt: '%s' %s", v, why);
        if (out->system_prompt < 0 || out->system_prompt > TRACE_MAX_TOKENS)
            return kvs_errf(err, KVS_EINVAL, PFX "system_prompt: must be in [0, %lld] tokens",
                            (long long)TRACE_MAX_TOKENS);
        return KVS_OK;
    case K_TURNS:
        if (trace_parse_i64(v, &out->turns, &why))
            return kvs_errf(err, KVS_EINVAL, PFX "turns: '%s' %s", v, why);
        if (out->turns < 1 || out->turns > MAX_TURNS)
            return kvs_errf(err, KVS_EINVAL, PFX "turns: must be in [1, %d]", MAX_TURNS);
        return KVS_OK;
    }
    return KVS_OK;
}

/* After every item: the keys each arrival and length kind needs. */
static int check_required(const int *seen, const trace_synth_spec *out, kvs_err *err)
{
    if (!seen[K_N])
        return kvs_errf(err, KVS_EINVAL, PFX "n: required (number of requests)");
    if (!seen[K_RATE] && out->arrival != TRACE_ARRIVAL_BURST)
        return kvs_errf(err, KVS_EINVAL, PFX "rate: required unless arrival=burst");
    if (!seen[K_CV] && out->arrival == TRACE_ARRIVAL_GAMMA)
        return kvs_errf(err, KVS_EINVAL, PFX "cv: required with arrival=gamma");
    if (seen[K_LENGTHS] && (seen[K_PROMPT] || seen[K_OUTPUT]))
        return kvs_errf(err, KVS_EINVAL, PFX "lengths: cannot be combined with %s",
                        seen[K_PROMPT] ? "prompt" : "output");
    if (!seen[K_LENGTHS] && !seen[K_PROMPT])
        return kvs_errf(err, KVS_EINVAL, PFX "prompt: required (or lengths=FILE)");
    if (!seen[K_LENGTHS] && !seen[K_OUTPUT])
        return kvs_errf(err, KVS_EINVAL, PFX "output: required (or lengths=FILE)");
    return KVS_OK;
}

int trace_synth_parse(const char *spec, trace_synth_spec *out, kvs_err *err)
{
    int seen[K_COUNT] = {0};
    int st = KVS_OK;
    memset(out, 0, sizeof *out);
    out->arrival = TRACE_ARRIVAL_POISSON;
    out->cv = 1.0;
    out->turns = 1;
    char *buf = strdup(spec);
    if (!buf)
        return kvs_errf(err, KVS_ENOMEM, PFX "out of memory");
    for (char *item = buf, *next; item; item = next) {
        next = strchr(item, ',');
        if (next)
            *next++ = '\0';
        char *eq = strchr(item, '=');
        if (!*item) {
            st = kvs_errf(err, KVS_EINVAL, PFX "empty item in '%s' (stray comma?)", spec);
            goto done;
        }
        if (!eq) {
            st = kvs_errf(err, KVS_EINVAL, PFX "'%s' is not key=value", item);
            goto done;
        }
        *eq = '\0';
        char *v = eq + 1;
        int k = 0;
        while (k < K_COUNT && strcmp(item, key_names[k]))
            k++;
        if (k == K_COUNT) {
            st = kvs_errf(err, KVS_EINVAL, PFX "unknown key '%s' (keys: arrival, rate, cv, n, "
                          "prompt, output, lengths, priorities, system_prompt, turns)", item);
            goto done;
        }
        if (seen[k]++) {
            st = kvs_errf(err, KVS_EINVAL, PFX "%s: given twice", item);
            goto done;
        }
        if (!*v) {
            st = kvs_errf(err, KVS_EINVAL, PFX "%s: missing value", item);
            goto done;
        }
        if ((st = set_key(k, v, out, err)) != KVS_OK)
            goto done;
    }
    if ((st = check_required(seen, out, err)) == KVS_OK)
        st = check_spec(out, seen[K_RATE], seen[K_CV], err);
done:
    free(buf);
    return st;
}

/* ------------------------------------------------------------ lengths file */

typedef struct lengths {
    const char *path;
    int ncols;          /* fields per row from the header; 0 before it */
    int ip, io;         /* column of num_prefill_tokens / num_decode_tokens */
    int64_t (*pairs)[2]; /* [n][prompt, output] */
    int64_t n, cap;
} lengths;

static int lengths_row(void *ctx, int64_t line, char **f, int nf, kvs_err *err)
{
    lengths *L = ctx;
    const char *why;
    if (L->ncols == 0) {
        L->ip = L->io = -1;
        for (int i = 0; i < nf; i++) {
            const char *name = f[i];
            if (i == 0 && !strncmp(name, "\xEF\xBB\xBF", 3))
                name += 3;
            if (!strcmp(name, "num_prefill_tokens"))
                L->ip = i;
            else if (!strcmp(name, "num_decode_tokens"))
                L->io = i;
        }
        if (L->ip < 0 || L->io < 0)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: header lacks column %s (a lengths "
                            "file has columns num_prefill_tokens,num_decode_tokens,...)",
                            L->path, (long long)line,
                            L->ip < 0 ? "num_prefill_tokens" : "num_decode_tokens");
        L->ncols = nf;
        return KVS_OK;
    }
    if (nf != L->ncols)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: expected %d fields, got %d", L->path,
                        (long long)line, L->ncols, nf);
    int64_t v[2];
    const int col[2] = {L->ip, L->io};
    for (int j = 0; j < 2; j++) {
        const char *name = j ? "num_decode_tokens" : "num_prefill_tokens";
        if (trace_parse_i64(f[col[j]], &v[j], &why))
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: '%s' %s", L->path, (long long)line,
                            name, f[col[j]], why);
        if (v[j] < 1)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: must be >= 1, got %lld", L->path,
                            (long long)line, name, (long long)v[j]);
        if (v[j] > TRACE_MAX_TOKENS)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: %lld is above the limit of %lld "
                            "tokens", L->path, (long long)line, name, (long long)v[j],
                            (long long)TRACE_MAX_TOKENS);
    }
    if (L->n == L->cap) {
        int64_t nc = L->cap ? 2 * L->cap : 1024;
        void *p = realloc(L->pairs, (size_t)nc * sizeof L->pairs[0]);
        if (!p)
            return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", L->path);
        L->pairs = p;
        L->cap = nc;
    }
    L->pairs[L->n][0] = v[0];
    L->pairs[L->n][1] = v[1];
    L->n++;
    return KVS_OK;
}

/* ---------------------------------------------------------------- prefixes */

/* Segment ids: the system prompt is 1; request i's new user part is 2 + 2i
 * and its output 3 + 2i (the output reappears in its conversation's later
 * turns). */
#define SYS_ID UINT64_C(1)
#define USER_ID(i) (UINT64_C(2) + 2 * (uint64_t)(i))
#define OUTPUT_ID(i) (UINT64_C(3) + 2 * (uint64_t)(i))

/* Turn the sampled lengths (prompt_tokens = the new user part) into shared
 * system prompts and conversations, and give the trace its prefix
 * segments.  Conversation c = i mod C of C = ceil(n / turns) holds requests
 * c, c + C, c + 2C, ...: request i is turn i / C of it.  Turn 0's prompt is
 * [system][user_i]; turn t's is turn t-1's prompt + [output_{i-C}] +
 * [user_i].  Cost: O(n * turns) time and memory. */
static int add_prefixes(const trace_synth_spec *spec, trace *t, kvs_err *err)
{
    const int64_t n = t->n, sys = spec->system_prompt;
    const int64_t turns = spec->turns > 1 ? spec->turns : 1;
    const int64_t conv = (n + turns - 1) / turns;
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++)
        total += (sys > 0) + 1 + 2 * (i / conv);
    t->hash_off = malloc((size_t)(n + 1) * sizeof *t->hash_off);
    t->hash_ids = malloc((size_t)(total > 0 ? total : 1) * sizeof *t->hash_ids);
    t->hash_tokens = malloc((size_t)(total > 0 ? total : 1) * sizeof *t->hash_tokens);
    if (!t->hash_off || !t->hash_ids || !t->hash_tokens)
        return kvs_errf(err, KVS_ENOMEM, PFX "out of memory for the prefix hashes of %lld "
                        "requests", (long long)n);
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        trace_req *q = &t->reqs[i];
        int64_t user = q->prompt_tokens, prompt; /* prompt: checked before it is stored */
        t->hash_off[i] = k;
        if (i < conv) {
            if (sys > 0) {
                t->hash_ids[k] = SYS_ID;
                t->hash_tokens[k++] = (int32_t)sys;
            }
            prompt = sys + user;
        } else {
            const trace_req *prev = &t->reqs[i - conv];
            for (int64_t j = t->hash_off[i - conv]; j < t->hash_off[i - conv + 1]; j++) {
                t->hash_ids[k] = t->hash_ids[j];
                t->hash_tokens[k++] = t->hash_tokens[j];
            }
            t->hash_ids[k] = OUTPUT_ID(i - conv);
            t->hash_tokens[k++] = (int32_t)prev->output_tokens;
            prompt = (int64_t)prev->prompt_tokens + prev->output_tokens + user;
        }
        t->hash_ids[k] = USER_ID(i);
        t->hash_tokens[k++] = (int32_t)user;
        if (prompt > TRACE_MAX_TOKENS)
            return kvs_errf(err, KVS_EINVAL, PFX "%s: request %lld's prompt of %lld tokens is "
                            "above the limit of %lld", i < conv ? "system_prompt" : "turns",
                            (long long)i, (long long)prompt, (long long)TRACE_MAX_TOKENS);
        q->prompt_tokens = (int32_t)prompt;
    }
    t->hash_off[n] = k;
    t->hash_block = 0;
    return KVS_OK;
}

/* --------------------------------------------------------------- generate */

/* Rounded to whole nanoseconds so that the native CSV's %.9f reproduces the
 * same double on reading. */
static double quantize_ns(double t) { return round(t * 1e9) / 1e9; }

static int64_t sample_len(rng *r, trace_len_kind kind, int64_t a, int64_t b)
{
    if (kind == TRACE_LEN_UNIFORM)
        return a + (int64_t)rng_below(r, (uint64_t)(b - a) + 1);
    return a;
}

int trace_synth_gen(const trace_synth_spec *spec, const char *spec_text, uint64_t seed,
                    trace *out, kvs_err *err)
{
    lengths L = {.path = spec->lengths_path};
    int st;
    memset(out, 0, sizeof *out);
    if (!spec_text)
        spec_text = "";
    /* A hand-built spec may leave rate/cv set where they are unused. */
    if ((st = check_spec(spec, 0, 0, err)))
        goto fail;
    if (strlen(spec_text) >= sizeof out->source) {
        st = kvs_errf(err, KVS_EINVAL, PFX "spec longer than %zu bytes", sizeof out->source - 1);
        goto fail;
    }
    if (spec->prompt_kind == TRACE_LEN_FILE) {
        if ((st = trace_csv_read(spec->lengths_path, lengths_row, &L, NULL, err)))
            goto fail;
        if (L.n == 0) {
            st = kvs_errf(err, KVS_EINVAL, "%s: no rows (need at least one length pair)",
                          spec->lengths_path);
            goto fail;
        }
    }
    out->reqs = calloc((size_t)spec->n, sizeof *out->reqs); /* padding zeroed too */
    if (!out->reqs) {
        st = kvs_errf(err, KVS_ENOMEM, PFX "out of memory for %lld requests",
                      (long long)spec->n);
        goto fail;
    }
    /* Three independent streams, so that e.g. changing the lengths leaves
     * the arrival times unchanged. */
    rng master, ra, rl, rp;
    rng_init(&master, seed);
    rng_init(&ra, rng_next_u64(&master));
    rng_init(&rl, rng_next_u64(&master));
    rng_init(&rp, rng_next_u64(&master));
    double t = 0, gamma_k = 1.0 / (spec->cv * spec->cv);
    for (int64_t i = 0; i < spec->n; i++) {
        trace_req *q = &out->reqs[i];
        if (spec->arrival == TRACE_ARRIVAL_POISSON)
            t += rng_exponential(&ra, 1.0 / spec->rate);
        else if (spec->arrival == TRACE_ARRIVAL_GAMMA)
            t += rng_gamma(&ra, gamma_k, 1.0 / (spec->rate * gamma_k));
        q->arrival_s = quantize_ns(t);
        if (!(q->arrival_s <= TRACE_MAX_ARRIVAL_S)) {
            st = kvs_errf(err, KVS_EINVAL, PFX "rate: request %lld would arrive after the "
                          "limit of %.0f s; raise the rate or lower n", (long long)i,
                          TRACE_MAX_ARRIVAL_S);
            goto fail;
        }
        if (spec->prompt_kind == TRACE_LEN_FILE) {
            int64_t j = (int64_t)rng_below(&rl, (uint64_t)L.n);
            /* (the file's lengths and the spec's bounds were checked against
             * TRACE_MAX_TOKENS when read: they fit an int32_t) */
            q->prompt_tokens = (int32_t)L.pairs[j][0];
            q->output_tokens = (int32_t)L.pairs[j][1];
        } else {
            q->prompt_tokens =
                (int32_t)sample_len(&rl, spec->prompt_kind, spec->prompt_a, spec->prompt_b);
            q->output_tokens =
                (int32_t)sample_len(&rl, spec->output_kind, spec->output_a, spec->output_b);
        }
        q->priority = 0;
        if (spec->n_classes > 0) {
            double u = rng_uniform(&rp), cum = 0;
            int c = spec->n_classes - 1; /* rounding leftover goes to the last */
            for (int j = 0; j < spec->n_classes - 1; j++) {
                cum += spec->class_share[j];
                if (u < cum) {
                    c = j;
                    break;
                }
            }
            q->priority = spec->class_priority[c];
        }
    }
    out->n = spec->n;
    if ((spec->system_prompt > 0 || spec->turns > 1) && (st = add_prefixes(spec, out, err)))
        goto fail;
    out->format = TRACE_FORMAT_SYNTHETIC;
    out->has_priority = spec->n_classes > 0;
    snprintf(out->source, sizeof out->source, "%s", spec_text);
    out->sha256[0] = '\0';
    free(L.pairs);
    return KVS_OK;
fail:
    free(L.pairs);
    trace_free(out);
    memset(out, 0, sizeof *out);
    return st;
}
