/* capacity_search.h — `kvsim capacity --search` (cmd_capacity_search.c):
 * flags and printing over job/'s SLOs and searches (job.h). */
#ifndef CAPACITY_SEARCH_H
#define CAPACITY_SEARCH_H

#include <stdio.h>

#include "../job/job.h"

/* `kvsim capacity --search ...`, with argv[0] = "capacity"; its --help
 * text.  Returns the exit status. */
int capacity_search_main(int argc, char **argv);
void capacity_search_usage(FILE *f);

/* `kvsim capacity --search cluster ...` (cmd_capacity_cluster.c), called
 * by capacity_search_main.  Returns the exit status. */
int capacity_cluster_main(int argc, char **argv);

#define CAPACITY_MAX_TPS 16 /* degrees a --tp-list may give */

/* Parse --tp-list "1,2,4": ascending degrees in [1, 1024], at most
 * CAPACITY_MAX_TPS, into tps[*n].  Errors are printed (cli_fail) and return
 * the exit status; 0 on success. */
int capacity_parse_tp_list(const char *cmd, const char *arg, double *tps, int *n);

#endif
