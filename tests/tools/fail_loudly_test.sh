#!/usr/bin/env bash
# tools/lib/fail-loudly.sh, the ERR trap every script of the tree sources: scripts with a
# deliberately failing step print that step's script, line, command and status (at top level, in
# a function, in a subshell, in a pipeline, in a sourced library, the apt sources read that once
# ended tools/container-test without a word), keep the failing status, and stay quiet where a
# failure is handled or errexit is off; an interactive shell that sources it is left alone.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../tools/lib/fail-loudly.sh"
lib=$here/../../tools/lib/fail-loudly.sh  # what the scripts below source
work=$(mktemp -d /tmp/sumcast-fail-loudly-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
checks=0
bad() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# script NAME BODY: $work/NAME.sh, a bash script with set -euo pipefail and the trap, then BODY.
script() {
  printf '#!/usr/bin/env bash\nset -euo pipefail\nsource "%s"\n%s\n' "$lib" "$2" >"$work/$1.sh"
}
# run NAME WANT_RC [ARGS...]: runs it; its stderr in $work/NAME.err, stdout in $work/NAME.out.
run() {
  local name=$1 want=$2 rc=0
  shift 2
  checks=$((checks + 1))
  bash "$work/$name.sh" "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  [ "$rc" = "$want" ] || bad "$name: exit status $rc, want $want"
}
# says NAME TEXT / silent NAME: its stderr has the line TEXT / has nothing.
says() {
  checks=$((checks + 1))
  grep -qxF -- "$2" "$work/$1.err" || { bad "$1: no line '$2' on stderr; it printed:"; sed 's/^/  /' "$work/$1.err" >&2; }
}
silent() {
  checks=$((checks + 1))
  [ ! -s "$work/$1.err" ] || { bad "$1: wanted no message; it printed:"; sed 's/^/  /' "$work/$1.err" >&2; }
}

# The failure that motivated it: apt sources read with cat when none of the *.list files exist.
script mirror 'empty=$(mktemp -d)
mirror=$(cat "$empty/sources.list" "$empty"/sources.list.d/*.list 2>/dev/null | sed -n "s/^deb //p" | head -n 1)
echo "not reached: $mirror"'
run mirror 1
says mirror "$work/mirror.sh: line 5: exit status 1 of: mirror=\$(cat \"\$empty/sources.list\" \"\$empty\"/sources.list.d/*.list 2> /dev/null | sed -n \"s/^deb //p\" | head -n 1)"
checks=$((checks + 1))
! grep -q "not reached" "$work/mirror.out" || bad "mirror: went on after the failing step"

# A status other than 1 is kept, and the EXIT trap still sees it.
script status 'trap '\''echo "exit trap: $?"'\'' EXIT
echo before
(exit 7)
echo "not reached"'
run status 7
says status "$work/status.sh: line 6: exit status 7 of: ( exit 7 )"
checks=$((checks + 1))
grep -qx "exit trap: 7" "$work/status.out" || bad "status: the EXIT trap did not see status 7"

# In functions: the failing line, then each caller.
script function 'inner() {
  false
}
outer() { inner; }
outer'
run function 1
says function "$work/function.sh: line 5: exit status 1 of: false"
says function "  in inner, called from $work/function.sh line 7"
says function "  in outer, called from $work/function.sh line 8"

# In a sourced library (the test bed's is sourced by the tests): the library's file and line.
printf 'lib_step() {\n  ls /nonexistent-%s >/dev/null\n}\n' "$$" >"$work/library.sh"
script sourced "source \"$work/library.sh\"
lib_step"
run sourced 2
says sourced "$work/library.sh: line 2: exit status 2 of: ls /nonexistent-$$ > /dev/null"
says sourced "  in lib_step, called from $work/sourced.sh line 5"

# In a subshell: the line inside, then the subshell's own line.
script subshell '(
  cd /
  false
)'
run subshell 1
says subshell "$work/subshell.sh: line 6: exit status 1 of: false"

# A pipeline (pipefail): its line.
script pipeline 'printf "a\n" | grep -q b | cat'
run pipeline 1
checks=$((checks + 1))
grep -q "^$work/pipeline.sh: line 4: exit status 1 of: " "$work/pipeline.err" || bad "pipeline: no line 4 message"

# Handled failures print nothing and do not stop the script (as with set -e alone).
script handled 'f() { false; echo "f went on"; }
false || true
if ! grep -q x /dev/null; then echo "if handled"; fi
f || echo "not printed"
( false; echo "subshell went on" ) || echo "not printed"
x=$(false; echo "substitution went on")
echo "$x"
while false; do :; done
! true
echo done'
run handled 0
silent handled
checks=$((checks + 1))
[ "$(tr '\n' ' ' <"$work/handled.out")" = "if handled f went on subshell went on substitution went on done " ] ||
  bad "handled: output '$(tr '\n' ' ' <"$work/handled.out")'"

# Without errexit the script handles its own statuses: no message, and $? is intact after the trap.
script noerrexit 'set +e
false
echo "status $?"
(exit 3)
rc=$?
echo "rc $rc"
exit 0'
run noerrexit 0
silent noerrexit
checks=$((checks + 1))
[ "$(tr '\n' ' ' <"$work/noerrexit.out")" = "status 1 rc 3 " ] || bad "noerrexit: output '$(tr '\n' ' ' <"$work/noerrexit.out")'"

# An interactive shell that sources it gets no trap and no errtrace (and is not ended by it).
checks=$((checks + 1))
out=$(bash --norc -i -c "source '$lib'; trap -p ERR; [[ \$- == *E* ]] && echo errtrace; false; echo alive" 2>/dev/null) || true
[ "$out" = alive ] || bad "interactive: printed '$out', want only 'alive'"

[ $failures = 0 ] || { echo "fail_loudly_test: $failures failure(s) in $checks checks" >&2; exit 1; }
echo "fail_loudly_test: all $checks checks passed"
