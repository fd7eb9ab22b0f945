/* trace_jsonl.c — loading Mooncake JSONL traces (Qin et al., FAST'25): one
 * JSON object per line with integer keys timestamp (ms), input_length,
 * output_length and hash_ids, the ids of the prompt's 512-token blocks
 * (prefix-chained: equal leading ids mean a shared prefix).  Parsed with
 * json-c in strict mode, line by line; every problem names path:line. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "trace.h"
#include "trace_internal.h"

#define MOONCAKE_BLOCK 512 /* tokens per hash_ids entry */
/* hash_ids of the longest prompt accepted: ceil(TRACE_MAX_TOKENS / 512) */
#define MOONCAKE_MAX_IDS ((TRACE_MAX_TOKENS + MOONCAKE_BLOCK - 1) / MOONCAKE_BLOCK)

typedef struct jl {
    const char *path;
    trace *t;
    int64_t cap;        /* slots in t->reqs (and t->hash_off minus one) */
    int64_t hcap;       /* slots in t->hash_ids / t->hash_tokens */
    int64_t t0_ms;      /* first timestamp */
    int64_t prev_ms;    /* previous timestamp */
} jl;

int trace_is_jsonl(const char *path)
{
    size_t n = strlen(path);
    if (n >= 6 && !strcmp(path + n - 6, ".jsonl"))
        return 1;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0; /* trace_load reports the open error */
    int c;
    while ((c = fgetc(f)) != EOF && isspace(c))
        ;
    fclose(f);
    return c == '{';
}

static int grow(jl *L, int64_t nhash, kvs_err *err)
{
    trace *t = L->t;
    if (t->n + 1 >= L->cap) {
        int64_t nc = L->cap ? 2 * L->cap : 1024;
        trace_req *r = realloc(t->reqs, (size_t)nc * sizeof *r);
        if (!r)
            return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", L->path);
        t->reqs = r;
        int64_t *o = realloc(t->hash_off, (size_t)(nc + 1) * sizeof *o);
        if (!o)
            return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", L->path);
        t->hash_off = o;
        L->cap = nc;
    }
    int64_t used = t->hash_off[t->n];
    if (used + nhash > L->hcap) {
        int64_t nc = L->hcap ? 2 * L->hcap : 8192;
        while (nc < used + nhash)
            nc *= 2;
        uint64_t *ids = realloc(t->hash_ids, (size_t)nc * sizeof *ids);
        if (!ids)
            return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", L->path);
        t->hash_ids = ids;
        int32_t *tok = realloc(t->hash_tokens, (size_t)nc * sizeof *tok);
        if (!tok)
            return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", L->path);
        t->hash_tokens = tok;
        L->hcap = nc;
    }
    return KVS_OK;
}

/* An integer field in [lo, hi] into *v. */
static int int_field(const jl *L, int64_t line, const char *key, json_object *v, int64_t lo,
                     int64_t hi, int64_t *out, kvs_err *err)
{
    if (!json_object_is_type(v, json_type_int))
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: must be an integer", L->path,
                        (long long)line, key);
    errno = 0;
    int64_t x = json_object_get_int64(v);
    if (errno || x < lo || x > hi)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: %s: must be in [%lld, %lld], got %s",
                        L->path, (long long)line, key, (long long)lo, (long long)hi,
                        json_object_to_json_string(v));
    *out = x;
    return KVS_OK;
}

/* One line: one JSON object, checked and appended. */
static int on_object(jl *L, int64_t line, json_object *o, kvs_err *err)
{
    json_object *ts = NULL, *in = NULL, *outl = NULL, *ids = NULL;
    if (!json_object_is_type(o, json_type_object))
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: not a JSON object (expected {\"timestamp\": "
                        "ms, \"input_length\": n, \"output_length\": n, \"hash_ids\": [...]})",
                        L->path, (long long)line);
    json_object_object_foreach(o, key, val) {
        json_object **slot = !strcmp(key, "timestamp")       ? &ts
                             : !strcmp(key, "input_length")  ? &in
                             : !strcmp(key, "output_length") ? &outl
                             : !strcmp(key, "hash_ids")      ? &ids
                                                             : NULL;
        if (!slot)
            return kvs_errf(err, KVS_EINVAL, "%s:%lld: unknown key \"%s\" (keys: timestamp, "
                            "input_length, output_length, hash_ids)", L->path, (long long)line,
                            key);
        *slot = val;
    }
    const char *missing = !ts ? "timestamp" : !in ? "input_length" : !outl ? "output_length"
                          : !ids ? "hash_ids" : NULL;
    if (missing)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: missing key \"%s\"", L->path,
                        (long long)line, missing);
    int64_t ms, p, out;
    int st;
    if ((st = int_field(L, line, "timestamp", ts, 0, INT64_MAX / 2, &ms, err)) ||
        (st = int_field(L, line, "input_length", in, 1, TRACE_MAX_TOKENS, &p, err)) ||
        (st = int_field(L, line, "output_length", outl, 1, TRACE_MAX_TOKENS, &out, err)))
        return st;
    trace *t = L->t;
    if (t->n == 0)
        L->t0_ms = L->prev_ms = ms;
    if (ms < L->prev_ms)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: timestamp: %lld is earlier than the previous "
                        "line's %lld", L->path, (long long)line, (long long)ms,
                        (long long)L->prev_ms);
    if ((double)(ms - L->t0_ms) / 1000.0 > TRACE_MAX_ARRIVAL_S)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: timestamp: %lld ms is more than %.0f s "
                        "after the first (the limit)", L->path, (long long)line,
                        (long long)ms, TRACE_MAX_ARRIVAL_S);
    L->prev_ms = ms;
    if (!json_object_is_type(ids, json_type_array))
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: hash_ids: must be an array of integers",
                        L->path, (long long)line);
    int64_t nh = (int64_t)json_object_array_length(ids);
    int64_t want = (p + MOONCAKE_BLOCK - 1) / MOONCAKE_BLOCK;
    if (nh != want)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: hash_ids: %lld ids for input_length %lld; "
                        "expected ceil(%lld / %d) = %lld (one per %d-token block)", L->path,
                        (long long)line, (long long)nh, (long long)p, (long long)p,
                        MOONCAKE_BLOCK, (long long)want, MOONCAKE_BLOCK);
    if ((st = grow(L, nh, err)))
        return st;
    int64_t base = t->hash_off[t->n];
    for (int64_t k = 0; k < nh; k++) {
        json_object *v = json_object_array_get_idx(ids, (size_t)k);
        int64_t id;
        char key[48];
        snprintf(key, sizeof key, "hash_ids[%lld]", (long long)k);
        if ((st = int_field(L, line, key, v, 0, INT64_MAX, &id, err)))
            return st;
        t->hash_ids[base + k] = (uint64_t)id;
        t->hash_tokens[base + k] = (int32_t)(k + 1 < nh ? MOONCAKE_BLOCK
                                                         : p - MOONCAKE_BLOCK * (nh - 1));
    }
    trace_req *r = &t->reqs[t->n];
    memset(r, 0, sizeof *r);
    r->arrival_s = (double)(ms - L->t0_ms) / 1000.0;
    r->prompt_tokens = (int32_t)p; /* both in [1, TRACE_MAX_TOKENS] (int_field) */
    r->output_tokens = (int32_t)out;
    t->n++;
    t->hash_off[t->n] = base + nh;
    return KVS_OK;
}

/* Line `line` of L's file, buf[len] (no NUL, trailing space cut, not
 * empty): parsed as one JSON object, nothing after it, then taken by
 * on_object.  Errors name the file and line.  O(len). */
static int parse_line(jl *L, json_tokener *tok, const char *buf, size_t len, int64_t line,
                      kvs_err *err)
{
    const char *path = L->path;
    if (len > (size_t)INT32_MAX)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: line longer than 2 GiB", path,
                        (long long)line);
    /* json-c spends ~100 bytes per array element: a line with more commas
     * than a valid line's ids (input_length <= TRACE_MAX_TOKENS) is refused
     * before it is parsed, which bounds the parse to about 200 MB, whatever
     * the line's length */
    int64_t commas = 0;
    for (const char *c = buf; (c = memchr(c, ',', len - (size_t)(c - buf))); c++)
        commas++;
    if (commas > MOONCAKE_MAX_IDS + 8)
        return kvs_errf(err, KVS_EINVAL, "%s:%lld: %lld comma-separated values on one line; a "
                        "request has at most %lld hash_ids (input_length <= %lld tokens)", path,
                        (long long)line, (long long)commas + 1, (long long)MOONCAKE_MAX_IDS,
                        (long long)TRACE_MAX_TOKENS);
    json_tokener_reset(tok);
    json_object *o = json_tokener_parse_ex(tok, buf, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tok);
    if (!o && je == json_tokener_success) /* json-c's allocation failed */
        return kvs_errf(err, KVS_ENOMEM, "%s:%lld: out of memory parsing a line of %zu bytes",
                        path, (long long)line, len);
    int st = KVS_OK;
    if (!o || je != json_tokener_success) {
        st = kvs_errf(err, KVS_EINVAL, "%s:%lld: not valid JSON: %s", path, (long long)line,
                      je == json_tokener_continue ? "the line ends inside a value"
                                                  : json_tokener_error_desc(je));
    } else {
        size_t end = json_tokener_get_parse_end(tok);
        while (end < len && isspace((unsigned char)buf[end]))
            end++;
        st = end < len ? kvs_errf(err, KVS_EINVAL, "%s:%lld: text after the JSON value", path,
                                  (long long)line)
                       : on_object(L, line, o, err);
    }
    json_object_put(o);
    return st;
}

int trace_load_jsonl(const char *path, trace *out, kvs_err *err)
{
    memset(out, 0, sizeof *out);
    jl L = {.path = path, .t = out};
    json_tokener *tok = NULL;
    char *buf = NULL;
    size_t bufcap = 0;
    int st = KVS_OK;
    trace_sha256 sha;
    trace_sha256_init(&sha);
    FILE *f = NULL;
    if (strlen(path) >= sizeof out->source) {
        st = kvs_errf(err, KVS_EINVAL, "%s: path longer than %zu bytes", path,
                      sizeof out->source - 1);
        goto done;
    }
    if (!(f = fopen(path, "rb"))) {
        st = kvs_errf(err, KVS_EIO, "%s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    if (!(tok = json_tokener_new())) {
        st = kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    out->hash_off = calloc(1, sizeof *out->hash_off);
    if (!out->hash_off) {
        st = kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    L.cap = 1;
    int64_t line = 0;
    ssize_t got;
    while ((got = getline(&buf, &bufcap, f)) >= 0) {
        line++;
        trace_sha256_update(&sha, buf, (size_t)got);
        size_t len = (size_t)got;
        if (memchr(buf, '\0', len)) {
            st = kvs_errf(err, KVS_EINVAL, "%s:%lld: NUL byte", path, (long long)line);
            goto done;
        }
        while (len > 0 && isspace((unsigned char)buf[len - 1]))
            len--;
        if (len == 0) {
            st = kvs_errf(err, KVS_EINVAL, "%s:%lld: blank line (expected one JSON object "
                          "per line)", path, (long long)line);
            goto done;
        }
        if ((st = parse_line(&L, tok, buf, len, line, err)))
            goto done;
    }
    if (ferror(f)) {
        st = kvs_errf(err, KVS_EIO, "%s: read error: %s", path, strerror(errno));
        goto done;
    }
    if (line == 0) {
        st = kvs_errf(err, KVS_EINVAL, "%s:1: empty file: expected one JSON object per line",
                      path);
        goto done;
    }
    out->format = TRACE_FORMAT_MOONCAKE;
    out->hash_block = MOONCAKE_BLOCK;
    snprintf(out->source, sizeof out->source, "%s", path);
    trace_sha256_hex(&sha, out->sha256);
done:
    free(buf);
    if (tok)
        json_tokener_free(tok);
    if (f)
        fclose(f);
    if (st) {
        trace_free(out);
        memset(out, 0, sizeof *out);
    }
    return st;
}
