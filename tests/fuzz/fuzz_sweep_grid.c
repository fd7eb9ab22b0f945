/* fuzz_sweep_grid.c — libFuzzer target for `kvsim sweep` grids
 * (job/job_grid.c, with the run flags table of job/job_param.c): axes given as --grid arguments, as a grid file and as
 * the canonical text a sweep stores.
 *
 * Input: the first byte picks the entry point (0: each line is one --grid
 * argument, 1: a grid file, 2: stored grid text); the rest is the text.  On
 * success the grid must be well formed (axes, distinct non-empty values,
 * n_points the product, at most SWEEP_MAX_POINTS), its canonical text must
 * read back as the same grid and the same text, and every point's choice and
 * key must be computable.  On failure the error must be one line naming its
 * origin (--grid, the file, or the stored sweep). */
#include <stdlib.h>
#include <string.h>

#include "../../job/job.h"
#include "fuzz_util.h"

static fuzz_file grid_file;

static void check_error(int rc, const kvs_err *err, const char *origin)
{
    static const int allowed[] = {KVS_EINVAL, KVS_ENOMEM, 0};
    fuzz_check_error(rc, err, allowed, origin);
}

static void check_grid(const sweep_grid *g)
{
    if (g->n_axes < 0 || g->n_axes > SWEEP_MAX_AXES)
        fuzz_fail("axis count out of range", NULL);
    int64_t n = g->n_axes ? 1 : 0;
    for (int i = 0; i < g->n_axes; i++) {
        const sweep_axis *a = &g->axes[i];
        if (!a->key[0] || a->n_values < 1 || !a->values)
            fuzz_fail("axis without key or values", NULL);
        for (int j = 0; j < a->n_values; j++) {
            const char *v = a->values[j];
            if (!v || !v[0] || strchr(v, '\n') || strchr(v, '#'))
                fuzz_fail("empty value or one holding a newline or '#'", NULL);
            for (int k = 0; k < j; k++)
                if (!strcmp(v, a->values[k]))
                    fuzz_fail("value given twice", NULL);
        }
        for (int k = 0; k < i; k++)
            if (!strcmp(a->key, g->axes[k].key))
                fuzz_fail("axis given twice", NULL);
        n *= a->n_values;
    }
    if (n != g->n_points || n > SWEEP_MAX_POINTS)
        fuzz_fail("n_points is not the product of the axes' sizes", NULL);
}

static int same_grid(const sweep_grid *a, const sweep_grid *b)
{
    if (a->n_axes != b->n_axes || a->n_points != b->n_points)
        return 0;
    for (int i = 0; i < a->n_axes; i++) {
        const sweep_axis *x = &a->axes[i], *y = &b->axes[i];
        if (strcmp(x->key, y->key) || x->kind != y->kind || x->opt_val != y->opt_val ||
            strcmp(x->synth_key, y->synth_key) || x->n_values != y->n_values)
            return 0;
        for (int j = 0; j < x->n_values; j++)
            if (strcmp(x->values[j], y->values[j]))
                return 0;
    }
    return 1;
}

static void check_points(const sweep_grid *g)
{
    if (g->n_points == 0)
        return;
    const int64_t idx[3] = {0, g->n_points / 2, g->n_points - 1};
    for (int t = 0; t < 3; t++) {
        int choice[SWEEP_MAX_AXES];
        sweep_grid_choice(g, idx[t], choice);
        for (int i = 0; i < g->n_axes; i++)
            if (choice[i] < 0 || choice[i] >= g->axes[i].n_values)
                fuzz_fail("point choice outside an axis", NULL);
        char key[8192];
        kvs_err err = {{0}};
        int rc = sweep_grid_point_key(g, idx[t], key, sizeof key, &err);
        if (rc)
            check_error(rc, &err, "sweep");
    }
    /* Synthetic keys are applied by rewriting the spec. */
    for (int i = 0; i < g->n_axes; i++) {
        if (g->axes[i].kind != SWEEP_KEY_SYNTH)
            continue;
        char spec[1024] = "arrival=poisson,rate=8,n=100,prompt=10,output=10";
        kvs_err err = {{0}};
        int rc = sweep_spec_set(spec, sizeof spec, g->axes[i].synth_key, g->axes[i].values[0],
                                &err);
        if (rc)
            check_error(rc, &err, "--synthetic");
        else if (!strstr(spec, g->axes[i].synth_key) || strlen(spec) >= sizeof spec)
            fuzz_fail("spec rewrite lost its key", NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (grid_file.path[0] == '\0')
        fuzz_file_init(&grid_file, "grid.txt");
    int mode = data[0] % 3;
    char *text = fuzz_strndup(data + 1, size - 1);
    sweep_grid g, h;
    sweep_grid_init(&g);
    sweep_grid_init(&h);
    kvs_err err = {{0}};
    int rc = KVS_OK;
    const char *origin = mode == 0 ? "--grid" : mode == 1 ? grid_file.path : "sweep 1";
    if (mode == 0) {
        for (char *line = text, *next; line && rc == KVS_OK; line = next) {
            next = strchr(line, '\n');
            if (next)
                *next++ = '\0';
            rc = sweep_grid_add(&g, job_param_options(), line, "--grid", &err);
        }
    } else if (mode == 1) {
        fuzz_file_set(&grid_file, data + 1, size - 1);
        rc = sweep_grid_read_file(&g, job_param_options(), grid_file.path, &err);
    } else {
        rc = sweep_grid_read_text(&g, job_param_options(), text, "sweep 1", &err);
    }
    if (rc != KVS_OK) {
        check_error(rc, &err, origin);
        goto out;
    }
    check_grid(&g);
    check_points(&g);
    /* The canonical text reads back as the same grid, and the same text. */
    char *canon = sweep_grid_text(&g);
    if (!canon)
        fuzz_fail("sweep_grid_text out of memory", NULL);
    rc = sweep_grid_read_text(&h, job_param_options(), canon, "sweep 1", &err);
    if (rc != KVS_OK)
        fuzz_fail("the canonical grid text does not read back", &err);
    if (!same_grid(&g, &h))
        fuzz_fail("the canonical grid text reads back as another grid", NULL);
    char *canon2 = sweep_grid_text(&h);
    if (!canon2 || strcmp(canon, canon2))
        fuzz_fail("the canonical grid text is not stable", NULL);
    free(canon);
    free(canon2);
out:
    sweep_grid_free(&g);
    sweep_grid_free(&h);
    free(text);
    return 0;
}
