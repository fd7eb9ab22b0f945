/* testutil.h — helpers shared by the Check test programs: temp files and
 * directories, running the kvsim binary, and a one-line main for a suite. */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <check.h>
#include <stddef.h>

/* Make a fresh temporary directory (under $TMPDIR or /tmp); returns a
 * static-lifetime path string owned by testutil (freed at exit). */
const char *tu_tmpdir(void);
/* Write `text` to dir/name and return the full path (malloc'd). */
char *tu_write_file(const char *dir, const char *name, const char *text);
/* Run a shell command; capture stdout+stderr into *out (malloc'd, may be
 * NULL); returns the exit status (or -1). */
int tu_run(const char *cmd, char **out);
/* Path of the kvsim binary built with the tests. */
const char *tu_kvsim(void);
/* Run every suite given and return the process exit status. */
int tu_run_suites(Suite **suites, int n);

#endif
