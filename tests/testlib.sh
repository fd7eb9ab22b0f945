# testlib.sh — the common start of the shell tests (cli_*.sh, check_*.sh,
# py_*.sh), sourced right after their header comment:
#     . "$(dirname "$0")/testlib.sh"
# It sets -u, KVSIM (the script's first argument, made absolute; default
# build/kvsim), T (a temporary folder removed on exit: a test that needs
# more at exit sets its own trap after this), and the counters pass / fail
# with ok and bad ("FAIL: <why>" on stdout).  The caller's arguments are
# read as they are (sourcing keeps them).
set -u
KVSIM=$(realpath "${1:-build/kvsim}")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
