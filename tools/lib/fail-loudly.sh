# shellcheck shell=bash
# Sourced by every bash script of the tree, right after its `set -euo pipefail`:
#   source "$(dirname "${BASH_SOURCE[0]}")/<up to the top>/tools/lib/fail-loudly.sh"
# so that no `set -e` exit is a bare status code: when a command ends the script, the ERR trap
# prints the script, the line and the command first, e.g.
#   tools/testbed/testbed.sh: line 26: exit status 2 of: ip netns exec "$ns" "$@"
#     in tb_exec, called from tools/testbed/testbed.sh line 48
#     in tb_up, called from tools/container-test line 119
# It only reports: the exit itself is still errexit's, with the failing command's status, and `$?`
# is the same after the trap as before it. So
#   - a command that errexit would not end the script for (the condition of an if/while/until, a
#     command before || or &&, one after !, one in a function called from such a place) prints
#     nothing, as with plain `set -e`;
#   - in a script or section without errexit (`set +e`, scripts that check every status
#     themselves) the trap stays silent: a failing command is the script's to handle;
#   - errtrace (set -E) makes functions and ( subshells ) report the line inside them, then the
#     caller's line; a background job (`f &`) that fails reports too, even when its `wait` is
#     handled;
#   - an interactive shell that sources it (directly or through a script it sources) gets no trap
#     and no option changes.
# Explicit `exit N` paths are not covered: each prints its own reason before it exits.

if [[ $- != *i* ]]; then
  _fail_loudly() {
    local rc=$1 cmd=$2 i
    [[ $- == *e* ]] || return 0
    printf '%s: line %s: exit status %s of: %s\n' "${BASH_SOURCE[1]:-$0}" "${BASH_LINENO[0]}" "$rc" "$cmd" >&2
    for ((i = 1; i + 1 < ${#FUNCNAME[@]}; i++)); do
      printf '  in %s, called from %s line %s\n' "${FUNCNAME[i]}" "${BASH_SOURCE[i + 1]}" "${BASH_LINENO[i]}" >&2
    done
    return 0
  }
  set -o errtrace
  trap '_fail_loudly $? "$BASH_COMMAND"' ERR
fi
