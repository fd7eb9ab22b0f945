/* cli_stop.c — Ctrl-C and SIGTERM for the commands that run many runs
 * (sweep, compare, capacity --search): the handler only counts the signal
 * in a volatile sig_atomic_t; the command polls cli_stop_requested()
 * between runs (or probes), stores what finished, marks its group
 * interrupted and exits CLI_EXIT_INTERRUPTED.  Nothing is ever stored or
 * printed from the handler, and it never exits the process itself: in
 * one-shot mode the kernel restores the default action when the handler
 * runs (SA_RESETHAND), so a second signal ends the process the ordinary
 * way (an open transaction is rolled back by the next opener). */
#include "cli.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_count; /* SIGINT/SIGTERM received */

static void on_stop(int sig)
{
    (void)sig;
    if (stop_count < 1000)
        stop_count++;
}

void cli_stop_install(int counting)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    /* counting: no SA_RESTART, so the parent's poll() and read() see EINTR */
    sa.sa_flags = counting ? 0 : SA_RESTART | SA_RESETHAND;
    stop_count = 0;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void cli_stop_restore(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
}

int cli_stop_requested(void) { return (int)stop_count; }
