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



#endif
