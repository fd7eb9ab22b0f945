/* run_fields.h — the one table of a run's parameters and metrics.
 *
 * Every column of the `runs` table is one row of this table: its name
 * (the SQL column and the JSON key), its SQL type, its unit, where its
 * value lives (a run_config field, a run_summary field, or provenance the
 * writer supplies), and a one-line description.  From it come the `runs`
 * schema (store/schema.c), the row writer and reader (store/), the JSON
 * summary, the names an SLO may bound, and the column list of
 * docs/schema.md (run_fields_markdown; a test keeps the page in step).
 * Adding a metric or a parameter is one row here (with the schema version
 * that adds it) plus the code that computes it.
 *
 * Values travel as run_value: NULL, an integer, a real or a text, with
 * the store's conventions applied once here (NaN, empty text and the zero
 * of a group id are NULL).  Pure data and conversions: no I/O.
 */
#ifndef RUN_FIELDS_H
#define RUN_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "../base/kvs.h"
#include "run.h"

typedef enum run_field_type {
    RUN_FIELD_TYPE_TEXT = 0, /* char[size] in the struct */
    RUN_FIELD_TYPE_INT = 1,  /* int (0/1 switches) */
    RUN_FIELD_TYPE_I64 = 2,  /* int64_t */
    RUN_FIELD_TYPE_U64 = 3,  /* uint64_t, stored as two's-complement int64 */
    RUN_FIELD_TYPE_F64 = 4,  /* double; NaN is NULL */
    RUN_FIELD_TYPE_ENUM = 5  /* an int-sized enum stored by its flag name */
} run_field_type;

typedef enum run_field_group {
    RUN_FIELD_GROUP_PROV = 0,   /* identity and provenance: the writer binds it */
    RUN_FIELD_GROUP_PARAM = 1,  /* a field of run_config (or its sched_config) */
    RUN_FIELD_GROUP_METRIC = 2  /* a field of run_summary; NULL for a failed run */
} run_field_group;

enum {
    RUN_FIELD_NULL_IF_ZERO = 1u << 0, /* 0 is stored as NULL (group ids) */
    RUN_FIELD_JSON = 1u << 1,         /* in the JSON summary */
    RUN_FIELD_IF_CHUNKED = 1u << 2,   /* JSON only with chunked prefill */
    RUN_FIELD_IF_PREFIX = 1u << 3,    /* JSON only with prefix caching */
    RUN_FIELD_SLO = 1u << 4,          /* an SLO may bound it (capacity search) */
    RUN_FIELD_HIGHER_BETTER = 1u << 5, /* an SLO bounds it from below (throughputs) */
    RUN_FIELD_IF_CLUSTER = 1u << 6     /* JSON only with --replicas > 1 */
};

typedef struct run_field {
    const char *name;      /* SQL column and JSON key, e.g. "ttft_p99_s" */
    const char *sql;       /* column type and constraints, e.g. "REAL" */
    const char *unit;      /* "s", "tokens", "blocks", "tok/s", ...; "" none */
    run_field_type type;
    run_field_group group;
    size_t off;            /* offsetof in run_config (PARAM) or run_summary (METRIC) */
    size_t size;           /* bytes of a TEXT field's array */
    const char *(*enum_name)(int v);     /* ENUM: value -> name */
    int (*enum_parse)(const char *name); /* ENUM: name -> value, -1 unknown */
    unsigned flags;        /* RUN_FIELD_* */
    int since;             /* schema version that added the column */
    const char *doc;       /* one line for docs/schema.md */
} run_field;

typedef enum run_value_kind {
    RUN_VALUE_NULL = 0,
    RUN_VALUE_INT = 1,
    RUN_VALUE_REAL = 2,
    RUN_VALUE_TEXT = 3
} run_value_kind;

typedef struct run_value {
    run_value_kind kind;
    int64_t i;             /* INT */
    double d;              /* REAL */
    const char *s;         /* TEXT: borrowed from the struct or a static name;
                              NULL: not text (a blob), refused by run_field_set */
} run_value;

/* The table, in `runs` column order (run_id excluded); *n gets its length.
 * Never NULL.  Cost: O(1). */
const run_field *run_fields(size_t *n);

/* The field named `name`, or NULL.  Cost: O(fields). */
const run_field *run_field_find(const char *name);

/* The metric an SLO bound names: an RUN_FIELD_SLO field by its column with
 * the unit suffix "_s" dropped ("ttft_p99" is ttft_p99_s), its full column,
 * or the short names "throughput" (throughput_tok_s) and "attainment"
 * (slo_attainment).  NULL if none.  Cost: O(fields). */
const run_field *run_field_slo(const char *name);

/* The value of a PARAM or METRIC field in cfg / sum (either may be NULL
 * when the field's group does not read it), with the store's NULL
 * conventions; PROV fields give NULL.  Cost: O(1). */
run_value run_field_get(const run_field *f, const run_config *cfg, const run_summary *sum);

/* Store v into cfg / sum (the reader's half): an ENUM must name a value,
 * a TEXT must fit; NULL becomes NaN (a metric), 0.0, "" or 0.  KVS_EINVAL naming the column
 * otherwise.  PROV fields are ignored.  Cost: O(1). */
int run_field_set(const run_field *f, run_config *cfg, run_summary *sum, const run_value *v,
                  kvs_err *err);

/* The JSON summary's members `"key": value, ` for every RUN_FIELD_JSON
 * field that applies to cfg (reals with %.17g, NULL as null), into
 * buf[cap] like snprintf: returns the length the whole text needs.
 * Cost: O(fields). */
size_t run_fields_json(const run_config *cfg, const run_summary *sum, char *buf, size_t cap);

/* docs/schema.md's list of the `runs` columns of `group`, as a Markdown
 * table, into buf[cap] like snprintf.  Cost: O(fields). */
size_t run_fields_markdown(run_field_group group, char *buf, size_t cap);

#endif
