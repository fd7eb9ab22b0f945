/* capacity_search_impl.h — what the two files of `kvsim capacity
 * --search` share: the search's flags and context, set-up
 * (cmd_capacity_search.c) and its stored side (cmd_capacity_resume.c:
 * create, --resume).  Private to cli/. */
#ifndef CAPACITY_SEARCH_IMPL_H
#define CAPACITY_SEARCH_IMPL_H

#include "../job/job.h"
#include "cli.h"
#include "run_opts.h"

#define MAX_POLICIES 8
#define RATE_STOP 1.05
#define RATE_MAX_STEPS 16

typedef enum search_kind { SEARCH_RATE = 0, SEARCH_TP = 1 } search_kind;

typedef struct search_ctx {
    const char *cmd;
    job_search js;        /* base flags with this policy, store, sweep, SLO */
    int verbose;          /* one stderr line per probe */
} search_ctx;

/* The flags of the search itself and what it is set up with. */
typedef struct search_args {
    const char *search, *slo, *policies, *tps; /* --search, --slo, --policies, --tp-list */
    const char *max_rejected;                  /* --max-rejected */
    const char *resume;                        /* --resume ID */
    char **rest;          /* argv minus the search flags: the run flags */
    int nrest;
    search_kind kind;
    run_opts base;        /* the run flags */
    int pols[MAX_POLICIES], npol;
    double tps_v[CLI_MAX_TPS];
    int ntp;
    double x0;            /* the rate search's start */
} search_args;

/* The stored search: its own flags (sweeps.grid lines KEY=VALUE) into
 * vals[] (buf owns them), its run flags (base_args) into a->rest. */
typedef struct stored_search {
    char *desc, *args_buf;   /* owned */
    char **argv;             /* owned: "capacity" then the stored run flags */
    int argc;
} stored_search;

/* Parse and check a's flags into c (the SLO, policies, TP list, the
 * searched parameter).  Errors printed; returns the exit status. */
int capacity_search_setup(const char *cmd, search_args *a, search_ctx *c);
/* Open a->base.db and create the search's sweeps row (kind 'search') into
 * c->js.sweep_id.  Errors printed; returns the exit status. */
int capacity_search_create(const char *cmd, const search_args *a, search_ctx *c, store **st);
/* --resume a->resume: the stored search into *a and *c as when it started,
 * flags given again compared, inputs checked, the group marked running;
 * *st opened, ss owns what a now points into (free with capacity_stored_free). */
int capacity_search_resume(const char *cmd, search_args *a, search_ctx *c, store **st,
                 stored_search *ss);
void capacity_stored_free(stored_search *ss);

#endif
