/* str.h — small string helpers shared by every layer: JSON string literals,
 * joining arguments into one string, and making a string safe to print on
 * one terminal line.  Imports nothing of the project but kvs.h's types. */
#ifndef KVS_STR_H
#define KVS_STR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kvs.h"

/* Write s to f as a JSON string literal: quotes, backslashes and control
 * characters (as \u00XX) escaped.  Cost: O(strlen(s)). */
void str_json_write(FILE *f, const char *s);

/* The same escaping into dst[n] as a string body (no quotes), always
 * terminated; stops before an escape that would not fit.  Cost: O(n). */
void str_json_escape(char *dst, size_t n, const char *src);

/* A growing text buffer: b->s (malloc'd, NUL-terminated once anything was
 * written) holds b->len bytes.  Once an allocation fails b->oom is set and
 * every later call does nothing; the owner frees b->s.  Start from {0}. */
typedef struct str_buf {
    char *s;        /* the text, owned */
    size_t len;     /* bytes written */
    size_t cap;     /* bytes allocated */
    int oom;        /* 1 after a failed allocation */
} str_buf;

/* Append printf-style.  Cost: amortized O(output). */
void str_buf_printf(str_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Append s as a JSON string literal, escaped as str_json_write does. */
void str_buf_json(str_buf *b, const char *s);

/* getopt_long that takes long flags only as written in full: where
 * getopt_long accepts an unambiguous prefix ("--rate" for "--rate-scale"),
 * this returns '!' with "'--rate': flags are not abbreviated (did you mean
 * --rate-scale?)" in why[n].  Otherwise exactly getopt_long's result (and
 * its optarg, optind).  Cost: getopt_long's, plus O(argc) to find the
 * token. */
struct option;
int str_getopt_exact(int argc, char **argv, const char *shortopts,
                     const struct option *longopts, char *why, size_t n);

/* Strip leading and trailing white space of s in place; returns the first
 * non-blank character.  Cost: O(strlen(s)). */
char *str_trim(char *s);

/* Join args[0..n) into one malloc'd string with `sep` after EACH argument
 * (so "a\nb\n" for sep "\n"); "" for n == 0.  NULL when out of memory.
 * Cost: O(total length). */
char *str_join(int n, char *const *args, const char *sep);

/* Copy src into dst[n] (always terminated, truncated to fit) with every
 * control character (< 0x20 or 0x7f) replaced by '?', so it prints on one
 * terminal line.  dst may be src (in place).  Returns dst.  Cost: O(n). */
char *str_sanitize(char *dst, size_t n, const char *src);

/* Strict number parsing of a flag's value: the whole string must be a
 * number within [lo, hi].  Errors (KVS_EINVAL) read "FLAG: 'x' is not an
 * integer", "FLAG: 5 is out of range [1, 4]", "FLAG: missing value".
 * Cost: O(strlen(s)). */
int str_parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out,
                  kvs_err *err);
int str_parse_u64(const char *flag, const char *s, uint64_t *out, kvs_err *err);
int str_parse_f64(const char *flag, const char *s, double lo, double hi, double *out,
                  kvs_err *err);

#endif
