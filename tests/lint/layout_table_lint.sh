#!/usr/bin/env bash
# README.md's "Repository layout" table against the tree: every path its first column names is a
# folder of the repository, and every top-level folder and every folder directly under
# dataplane/, worker_shim/ and tools/ has its row. A folder added, moved or removed without the
# table following fails here, naming it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/tools/lib/fail-loudly.sh"
cd "$root"
# The rows: "| `path/` | what |" between the section's heading and the next heading.
mapfile -t named < <(sed -n '/^## Repository layout/,/^## /p' README.md | sed -n 's/^| `\([^`]*\)\/` |.*/\1/p')
[ "${#named[@]}" -ge 5 ] || { echo "layout_table_lint: no layout table rows found in README.md (format changed?)" >&2; exit 1; }
# Folders that hold tracked files (git ls-files), so build outputs and ignored folders never count.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard)
else
  mapfile -t files < <(find . -path ./build -prune -o -path './build-*' -prune -o -path ./.git -prune -o -type f -print | sed 's|^\./||')
fi
declare -A dirs=()
for f in "${files[@]}"; do
  [ -e "$f" ] || continue  # deleted in the work tree, not yet committed
  case $f in
    */*) top=${f%%/*}; dirs[$top]=1 ;;
    *) continue ;;
  esac
  rest=${f#*/}
  case $top in
    dataplane | worker_shim | tools) [[ $rest == */* ]] && dirs[$top/${rest%%/*}]=1 ;;
  esac
done
problems=0
declare -A listed=()
for p in "${named[@]}"; do
  listed[$p]=1
  if [ -z "${dirs[$p]:-}" ]; then
    echo "layout_table_lint: README.md's layout table names $p/, which is not a folder of the repository" >&2
    problems=$((problems + 1))
  fi
done
for d in "${!dirs[@]}"; do
  if [ -z "${listed[$d]:-}" ]; then
    echo "layout_table_lint: $d/ has no row in README.md's layout table (Repository layout)" >&2
    problems=$((problems + 1))
  fi
done
[ $problems -eq 0 ] || exit 1
echo "PASS: README.md's layout table names exactly the ${#named[@]} folders of the tree it covers"
