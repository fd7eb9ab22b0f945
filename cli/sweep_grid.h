/* sweep_grid.h — the parameter grid of `kvsim sweep`: axes of run flags with
 * their values, read from `--grid 'flag=v1,v2,...'` arguments or a grid file
 * (one axis per line, '#' comments), and the cartesian product of the axes
 * in a fixed order: the first axis varies slowest, the last fastest, so point
 * i is the same point for the same grid text on every machine.
 *
 * An axis key is a run flag without its dashes (checked against a getopt
 * table the caller passes, minus the flags that make no sense per point); a
 * switch (a flag without a value, e.g. priority-preemption) takes the values
 * on and off; `rate` is the rate= key of the --synthetic spec and
 * `synthetic.KEY` any key of the spec (judged by the spec's parser when the
 * points are applied).  Values are
 * separated by ',' or, when the list contains a '|', by '|' (for values that
 * hold commas, such as a whole --synthetic spec); blanks around a value are
 * dropped.  The grid module only
 * parses and enumerates; applying a point's values to a run is the caller's.
 * Also here: rewriting one key of a synthetic spec string.
 */
#ifndef SWEEP_GRID_H
#define SWEEP_GRID_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/kvs.h"

#define SWEEP_MAX_AXES 16
#define SWEEP_MAX_POINTS 1000000

typedef enum sweep_key_kind {
    SWEEP_KEY_FLAG = 0,   /* a run flag taking a value: `flag` is its option entry */
    SWEEP_KEY_SWITCH = 1, /* a flag without a value: values on | off */
    SWEEP_KEY_SYNTH = 2   /* a key of the --synthetic spec: `synth_key` */
} sweep_key_kind;

typedef struct sweep_axis {
    char key[64];             /* as written: "max-seqs", "rate", "synthetic.n" */
    sweep_key_kind kind;      /* how a value is applied */
    int opt_val;              /* getopt value of the flag (FLAG, SWITCH) */
    char synth_key[32];       /* spec key (SYNTH): "rate", "n", ... */
    char where[1100];         /* origin for errors: "FILE:LINE" or "--grid" */
    int n_values;             /* >= 1 */
    char **values;            /* [n_values] owned strings, distinct, non-empty */
} sweep_axis;

typedef struct sweep_grid {
    sweep_axis axes[SWEEP_MAX_AXES]; /* [n_axes] in the order given */
    int n_axes;
    int64_t n_points;                /* product of n_values; 0 when no axis */
} sweep_grid;

void sweep_grid_init(sweep_grid *g);
void sweep_grid_free(sweep_grid *g);

/* Add one axis "key=v1,v2,..." (or "key=a|b").  `opts` is the getopt table
 * of the run flags; `where` names the origin for errors ("--grid" or
 * "FILE:LINE"); errors read "WHERE: ..." (KVS_EINVAL): no '=', an unknown or
 * disallowed key (db, quiet, json, label, record-steps, force-profile),
 * a key given twice, an empty value or value list, a value given twice, a
 * switch value other than on/off, more than SWEEP_MAX_AXES axes or
 * SWEEP_MAX_POINTS points.  Cost: O(length). */
int sweep_grid_add(sweep_grid *g, const struct option *opts, const char *text,
                   const char *where, kvs_err *err);

/* Read a grid file: one axis per line as for sweep_grid_add, blank lines and
 * '#' comments (to the end of a line) ignored, surrounding blanks trimmed.
 * Errors name "PATH:LINE".  Cost: O(file size). */
int sweep_grid_read_file(sweep_grid *g, const struct option *opts, const char *path,
                         kvs_err *err);

/* Parse canonical grid text (sweep_grid_text's output; lines as in a grid
 * file) with `where` naming its origin ("sweep 3"). */
int sweep_grid_read_text(sweep_grid *g, const struct option *opts, const char *text,
                         const char *where, kvs_err *err);

/* The canonical text of the grid: one "key=v1,v2" line per axis ('|'
 * between values when one holds a comma), each ending in '\n'.  Returns a
 * malloc'd string or NULL when out of memory. */
char *sweep_grid_text(const sweep_grid *g);

/* The value index of every axis at point `index` (0 <= index < n_points):
 * choice[a] in [0, n_values of axis a).  Cost: O(n_axes). */
void sweep_grid_choice(const sweep_grid *g, int64_t index, int choice[SWEEP_MAX_AXES]);

/* The point's canonical key "key1=v1 key2=v2" (axis order, one space between
 * pairs) into buf; KVS_EINVAL when it does not fit in n bytes. */
int sweep_grid_point_key(const sweep_grid *g, int64_t index, char *buf, size_t n,
                         kvs_err *err);

/* Set `key` to `value` in the comma-separated key=value spec held in
 * spec[cap] (replacing the key's item, or appending one).  KVS_EINVAL when
 * the result does not fit or the spec has an item without '='. */
int sweep_spec_set(char *spec, size_t cap, const char *key, const char *value,
                   kvs_err *err);

#endif
