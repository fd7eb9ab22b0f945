/* PLACEHOLDER: replaced by the module owner. */
#include "cli.h"
int cmd_compare(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("compare", "not implemented yet");
}
