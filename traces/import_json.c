/* import_json.c — the JSON dataset importers of import.c: ShareGPT
 * conversations (one JSON array) and `vllm bench serve`'s custom JSONL. */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "trace_internal.h"

/* The whole file into a malloc'd NUL-terminated buffer. */
static int slurp(const char *path, char **buf, size_t *len, kvs_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return kvs_errf(err, KVS_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (size_t got; b && (got = fread(b + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!b)
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
    if (bad) {
        free(b);
        return kvs_errf(err, KVS_EIO, "%s: read error", path);
    }
    b[n] = 0;
    *buf = b;
    *len = n;
    return KVS_OK;
}

/* 1-based line of byte offset `at` in buf. */
static long line_of(const char *buf, size_t at)
{
    long line = 1;
    for (size_t i = 0; i < at; i++)
        line += buf[i] == '\n';
    return line;
}

/* A token count of turn or line `o` from key `key` (absent: -1). */
static int count_of(json_object *o, const char *key, int64_t *out, const char **why)
{
    json_object *v;
    *out = -1;
    if (!json_object_object_get_ex(o, key, &v))
        return 0;
    if (!json_object_is_type(v, json_type_int)) {
        *why = "is not an integer";
        return -1;
    }
    int64_t n = json_object_get_int64(v);
    if (n < 0 || n > TRACE_MAX_TOKENS) {
        *why = n < 0 ? "is negative" : "is too large";
        return -1;
    }
    *out = n < 1 ? 1 : n;
    return 0;
}

/* ------------------------------------------------------------ ShareGPT */

/* Tokens of conversation turn k of record rec into *tok. */
static int turn_tokens(const char *path, int64_t rec, json_object *conv, size_t k,
                       const trace_import_opts *o, int64_t *tok, kvs_err *err)
{
    json_object *t = json_object_array_get_idx(conv, k), *v;
    const char *why = NULL;
    if (!json_object_is_type(t, json_type_object))
        return kvs_errf(err, KVS_EINVAL, "%s: record %lld: conversations[%zu]: not an object",
                        path, (long long)rec, k);
    if (count_of(t, "tokens", tok, &why))
        return kvs_errf(err, KVS_EINVAL, "%s: record %lld: conversations[%zu]: \"tokens\" %s",
                        path, (long long)rec, k, why);
    if (!json_object_object_get_ex(t, "value", &v) || !json_object_is_type(v, json_type_string))
        return kvs_errf(err, KVS_EINVAL,
                        "%s: record %lld: conversations[%zu]: no \"value\" string", path,
                        (long long)rec, k);
    if (*tok < 0)
        *tok = trace_text_tokens(json_object_get_string(v), o->chars_per_token);
    return KVS_OK;
}

/* The requests of record rec (0-based) of a ShareGPT array. */
static int sharegpt_record(const char *path, int64_t rec, json_object *r,
                           const trace_import_opts *o, trace *out, int64_t *cap,
                           trace_import_info *info, kvs_err *err)
{
    json_object *conv;
    if (!json_object_is_type(r, json_type_object))
        return kvs_errf(err, KVS_EINVAL, "%s: record %lld: not an object", path, (long long)rec);
    if (!json_object_object_get_ex(r, "conversations", &conv) ||
        !json_object_is_type(conv, json_type_array))
        return kvs_errf(err, KVS_EINVAL, "%s: record %lld: no \"conversations\" array", path,
                        (long long)rec);
    size_t nt = json_object_array_length(conv);
    if (nt < 2) {
        info->skipped++;
        return KVS_OK;
    }
    int64_t history = 0; /* tokens of the turns before this pair */
    for (size_t k = 0; k + 1 < nt; k += 2) {
        int64_t p, a;
        int rc;
        if ((rc = turn_tokens(path, rec, conv, k, o, &p, err)) ||
            (rc = turn_tokens(path, rec, conv, k + 1, o, &a, err)))
            return rc;
        int64_t prompt = history + p;
        if (prompt > TRACE_MAX_TOKENS)
            return kvs_errf(err, KVS_EINVAL, "%s: record %lld: the conversation is longer than "
                            "%lld tokens", path, (long long)rec, (long long)TRACE_MAX_TOKENS);
        /* prompt checked above, a by turn_tokens: both <= TRACE_MAX_TOKENS */
        if ((rc = trace_import_push(out, cap, (trace_req){0, (int32_t)prompt, (int32_t)a, 0}, path,
                                    err)))
            return rc;
        if (!o->turns)
            break;
        history = prompt + a;
    }
    return KVS_OK;
}

int trace_import_sharegpt(const char *path, const trace_import_opts *o, trace *out,
                          trace_import_info *info, kvs_err *err)
{
    char *buf;
    size_t len;
    int rc = slurp(path, &buf, &len, err);
    if (rc)
        return rc;
    snprintf(info->skipped_why, sizeof info->skipped_why, "conversations of fewer than 2 turns");
    json_tokener *tok = json_tokener_new();
    if (!tok) {
        free(buf);
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *root = json_tokener_parse_ex(tok, buf, (int)len);
    enum json_tokener_error je = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    if (!root || je != json_tokener_success) {
        rc = kvs_errf(err, KVS_EINVAL, "%s:%ld: not valid JSON: %s", path, line_of(buf, end),
                      je == json_tokener_continue ? "the file ends inside a value"
                                                  : json_tokener_error_desc(je));
    } else if (strspn(buf + end, " \t\r\n") != len - end) {
        rc = kvs_errf(err, KVS_EINVAL, "%s:%ld: not valid JSON: text after the array", path,
                      line_of(buf, end));
    } else if (!json_object_is_type(root, json_type_array)) {
        rc = kvs_errf(err, KVS_EINVAL, "%s: not a ShareGPT file: the top level is not an array",
                      path);
    }
    int64_t cap = 0;
    size_t n = rc ? 0 : json_object_array_length(root);
    for (size_t i = 0; i < n && rc == 0; i++) {
        info->records++;
        rc = sharegpt_record(path, (int64_t)i, json_object_array_get_idx(root, i), o, out, &cap,
                             info, err);
    }
    json_object_put(root);
    json_tokener_free(tok);
    free(buf);
    if (rc == 0)
        trace_import_arrivals(out, o);
    return rc;
}

/* ------------------------------------------------------------ vllm custom */

static int custom_line(const char *path, long line, json_object *r, const trace_import_opts *o,
                       trace *out, int64_t *cap, kvs_err *err)
{
    json_object *v;
    const char *why = NULL;
    int64_t p, a;
    if (!json_object_is_type(r, json_type_object))
        return kvs_errf(err, KVS_EINVAL, "%s:%ld: not a JSON object", path, line);
    if (count_of(r, "prompt_tokens", &p, &why))
        return kvs_errf(err, KVS_EINVAL, "%s:%ld: \"prompt_tokens\" %s", path, line, why);
    if (count_of(r, "output_tokens", &a, &why))
        return kvs_errf(err, KVS_EINVAL, "%s:%ld: \"output_tokens\" %s", path, line, why);
    if (p < 0) {
        if (!json_object_object_get_ex(r, "prompt", &v) ||
            !json_object_is_type(v, json_type_string))
            return kvs_errf(err, KVS_EINVAL, "%s:%ld: no \"prompt\" string", path, line);
        p = trace_text_tokens(json_object_get_string(v), o->chars_per_token);
    }
    if (a < 0)
        a = o->output_len;
    return trace_import_push(out, cap, (trace_req){0, (int32_t)p, (int32_t)a, 0}, path, err);
}

int trace_import_vllm_custom(const char *path, const trace_import_opts *o, trace *out,
                             trace_import_info *info, kvs_err *err)
{
    char *buf;
    size_t len;
    int rc = slurp(path, &buf, &len, err);
    if (rc)
        return rc;
    json_tokener *tok = json_tokener_new();
    if (!tok) {
        free(buf);
        return kvs_errf(err, KVS_ENOMEM, "%s: out of memory", path);
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    int64_t cap = 0;
    long line = 0;
    for (char *s = buf, *nl; rc == 0 && *s; s = nl ? nl + 1 : s + strlen(s)) {
        line++;
        nl = strchr(s, '\n');
        size_t n = nl ? (size_t)(nl - s) : strlen(s);
        if (n && s[n - 1] == '\r')
            n--;
        if (strspn(s, " \t") >= n) {
            rc = kvs_errf(err, KVS_EINVAL, "%s:%ld: blank line", path, line);
            break;
        }
        info->records++;
        json_tokener_reset(tok);
        json_object *r = json_tokener_parse_ex(tok, s, (int)n);
        enum json_tokener_error je = json_tokener_get_error(tok);
        size_t end = json_tokener_get_parse_end(tok);
        if (!r || je != json_tokener_success || strspn(s + end, " \t\r") < n - end)
            rc = kvs_errf(err, KVS_EINVAL, "%s:%ld: not valid JSON: %s", path, line,
                          !r || je != json_tokener_success
                              ? (je == json_tokener_continue ? "the line ends inside a value"
                                                             : json_tokener_error_desc(je))
                              : "text after the object");
        else
            rc = custom_line(path, line, r, o, out, &cap, err);
        json_object_put(r);
    }
    json_tokener_free(tok);
    free(buf);
    if (rc == 0)
        trace_import_arrivals(out, o);
    return rc;
}
