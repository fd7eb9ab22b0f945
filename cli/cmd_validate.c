/* PLACEHOLDER: replaced by the module owner. */
#include "cli.h"
int cmd_validate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return cli_fail("validate", "not implemented yet");
}
