#!/usr/bin/env bash
# detect_mirror (tools/lib/apt-mirror.sh, the mirror tools/container-test debootstraps from) on apt
# configuration directories of every shape: deb822 only (a stock Debian 12: just
# sources.list.d/debian.sources), one-line only, both, none; and the entries it must pass over
# (the security archive, -updates, third-party repositories under a /debian path, disabled
# stanzas, deb-src, files apt itself ignores).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../tools/lib/fail-loudly.sh"
source "$here/../../tools/lib/apt-mirror.sh"
work=$(mktemp -d /tmp/sumcast-apt-mirror-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

# expect NAME WANT_MIRROR WANT_DEFAULT_MESSAGE(yes|no): detect_mirror on $work/NAME.
expect() {
  local name=$1 want=$2 want_msg=$3 got msg=no
  checks=$((checks + 1))
  got=$(detect_mirror "$work/$name" 2>"$work/$name.err")
  grep -q "using the default, http://deb.debian.org/debian" "$work/$name.err" && msg=yes
  if [ "$got" = "$want" ] && [ "$msg" = "$want_msg" ]; then
    echo "ok: $name: $got$([ $msg = yes ] && echo ' (default, with a message)')"
  else
    echo "FAIL: $name: got '$got' (default message: $msg), want '$want' (default message: $want_msg)" >&2
    cat "$work/$name.err" >&2
    failures=$((failures + 1))
  fi
}
# tree NAME: an empty apt configuration directory $work/NAME with sources.list.d/.
tree() { mkdir -p "$work/$1/sources.list.d"; }

# deb822 only: a stock Debian 12 (this is the file it ships, snapshot comments and all).
tree deb822
cat >"$work/deb822/sources.list.d/debian.sources" <<'SRC'
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
expect deb822 http://deb.debian.org/debian no

# deb822 with what must be passed over first: security archive, a disabled stanza, deb-src only, a
# third-party repository under /debian without main, an embedded key (continuation lines), several
# URIs in one field (the first not Debian's), no blank line at the end, lower-case field names.
tree deb822-tricky
cat >"$work/deb822-tricky/sources.list.d/a-security.sources" <<'SRC'
# Security first (file order): not a mirror for debootstrap.
Types: deb deb-src
URIs: https://security.debian.org/debian-security
Suites: bookworm-security
Components: main contrib
SRC
cat >"$work/deb822-tricky/sources.list.d/b-docker.sources" <<'SRC'
Types: deb
URIs: https://download.docker.com/linux/debian
Suites: bookworm
Components: stable
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 URIs: http://not.a.field.example/debian
 -----END PGP PUBLIC KEY BLOCK-----

Types: deb
URIs: http://disabled.example.org/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb-src
URIs: http://source-only.example.org/debian
Suites: bookworm
Components: main
SRC
cat >"$work/deb822-tricky/sources.list.d/c-main.sources" <<'SRC'
types: deb
uris: https://packages.example.net/apt https://mirror.example.org/debian/
  http://second.example.org/debian
suites: bookworm-backports
  bookworm
components: contrib main non-free-firmware
SRC
cp "$work/deb822-tricky/sources.list.d/c-main.sources" "$work/deb822-tricky/sources.list.d/d-ignored.sources.disabled"
expect deb822-tricky https://mirror.example.org/debian no

# One-line only: sources.list with options, comments and entries to pass over.
tree oneline
cat >"$work/oneline/sources.list" <<'SRC'
# deb http://commented.example.org/debian bookworm main
deb-src http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian-security bookworm-security main
deb [arch=amd64 signed-by=/etc/apt/keyrings/docker.gpg] https://download.docker.com/linux/debian bookworm stable
deb [ arch=amd64 trusted=yes ] http://ftp.de.debian.org/debian/ bookworm main contrib # the archive
deb http://deb.debian.org/debian bookworm main
SRC
expect oneline http://ftp.de.debian.org/debian no

# One-line only, in sources.list.d/*.list (no sources.list at all).
tree oneline-d
echo "deb http://deb.debian.org/debian bookworm-updates main" >"$work/oneline-d/sources.list.d/updates.list"
echo "deb https://ftp.fr.debian.org/debian stable main" >"$work/oneline-d/sources.list.d/main.list"
expect oneline-d https://ftp.fr.debian.org/debian no

# Both: apt reads sources.list first, then sources.list.d in name order (.list and .sources alike).
tree both
echo "deb http://ftp.us.debian.org/debian bookworm main" >"$work/both/sources.list"
cp "$work/deb822/sources.list.d/debian.sources" "$work/both/sources.list.d/"
expect both http://ftp.us.debian.org/debian no
tree both-d
echo "deb http://deb.debian.org/debian-security bookworm-security main" >"$work/both-d/sources.list"
printf 'Types: deb\nURIs: http://a.example.org/debian\nSuites: bookworm\nComponents: main\n' \
  >"$work/both-d/sources.list.d/a.sources"
echo "deb http://b.example.org/debian bookworm main" >"$work/both-d/sources.list.d/b.list"
expect both-d http://a.example.org/debian no

# None: no sources at all, only files apt ignores, only non-Debian entries, or no directory.
tree none
expect none http://deb.debian.org/debian yes
tree none-ignored
echo "deb http://deb.debian.org/debian bookworm main" >"$work/none-ignored/sources.list.d/x.list.disabled"
echo "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main" >"$work/none-ignored/sources.list.d/gcloud.list"
printf 'Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n' \
  >"$work/none-ignored/sources.list.d/nodesource.sources"
expect none-ignored http://deb.debian.org/debian yes
expect does-not-exist http://deb.debian.org/debian yes

# This machine's own apt configuration: whatever it holds, one http(s) URI and status 0.
checks=$((checks + 1))
if host=$(detect_mirror /etc/apt 2>"$work/host.err") && [[ $host =~ ^https?://[^[:space:]]+$ ]]; then
  echo "ok: this machine's /etc/apt: $host$(grep -q 'using the default' "$work/host.err" && echo ' (default, with a message)')"
else
  echo "FAIL: this machine's /etc/apt: got '$host'" >&2
  failures=$((failures + 1))
fi

# tools/container-test takes its mirror from detect_mirror (one piece of code for the rule).
checks=$((checks + 1))
if grep -q '^ *mirror=$(detect_mirror /etc/apt)' "$here/../../tools/container-test"; then
  echo "ok: tools/container-test uses detect_mirror"
else
  echo "FAIL: tools/container-test does not call detect_mirror /etc/apt" >&2
  failures=$((failures + 1))
fi

[ $failures = 0 ] || { echo "apt_mirror_test: $failures of $checks checks failed" >&2; exit 1; }
echo "apt_mirror_test: all $checks checks passed"
