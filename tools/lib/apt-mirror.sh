# shellcheck shell=bash
# detect_mirror [APT_ETC]: prints the Debian mirror this machine's apt uses (for debootstrap), read
# from APT_ETC (default /etc/apt): sources.list, then sources.list.d/*.list and *.sources in the
# order apt reads them. Both formats count and either may be absent (Debian 12 ships only
# sources.list.d/debian.sources):
#   one-line  deb [options] URI SUITE COMPONENT...                    (# starts a comment)
#   deb822    stanzas of Types: / URIs: / Suites: / Components: / Enabled: fields, separated by
#             blank lines; several URIs and suites per field, continuation lines, # comments
# The mirror is the first "deb" entry (not disabled) whose URI is http(s)://.../debian, with a
# suite that is a plain release name (bookworm, stable: not -security, -updates, -backports) and
# the main component: the Debian archive, not the security archive or a third-party repository
# that happens to live under a /debian path. Printed without a trailing slash. When there is none,
# prints the default, http://deb.debian.org/debian, and says so on stderr. Returns 0 either way.
detect_mirror() {
  local etc=${1:-/etc/apt} f files=() found=""
  [ -r "$etc/sources.list" ] && files+=("$etc/sources.list")
  for f in "$etc"/sources.list.d/*; do
    case $f in *.list | *.sources) [ -f "$f" ] && [ -r "$f" ] && files+=("$f") ;; esac
  done
  if [ ${#files[@]} -gt 0 ]; then
    found=$(awk '
      function has_plain(list,   n, a, i) {
        n = split(list, a, /[ \t]+/)
        for (i = 1; i <= n; i++) if (a[i] != "" && a[i] !~ /[-\/]/) return 1
        return 0
      }
      function has_word(list, w,   n, a, i) {
        n = split(list, a, /[ \t]+/)
        for (i = 1; i <= n; i++) if (a[i] == w) return 1
        return 0
      }
      # pick URI SUITES COMPONENTS: prints the URI and stops when the entry is the Debian archive.
      function pick(uri, suites, comps) {
        if (uri !~ /^https?:\/\/[^ ]*\/debian\/?$/ || !has_plain(suites) || !has_word(comps, "main")) return
        sub(/\/$/, "", uri)
        print uri
        done = 1
        exit
      }
      function stanza(   n, u, i) {
        if (has_word(f["types"], "deb") && tolower(f["enabled"]) != "no") {
          n = split(f["uris"], u, /[ \t]+/)
          for (i = 1; i <= n; i++) if (u[i] != "") pick(u[i], f["suites"], f["components"])
        }
        split("", f)
        key = ""
      }
      FNR == 1 { stanza() }
      FILENAME ~ /\.sources$/ {
        if ($0 ~ /^#/) next
        if ($0 ~ /^[ \t]*$/) { stanza(); next }
        if ($0 ~ /^[ \t]/) { if (key != "") f[key] = f[key] " " $0; next }
        key = tolower($0); sub(/:.*/, "", key)
        v = $0; sub(/^[^:]*:[ \t]*/, "", v); sub(/[ \t\r]+$/, "", v)
        f[key] = v
        next
      }
      {
        sub(/#.*/, "")
        if ($1 != "deb") next
        i = 2
        if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        comps = ""
        for (j = i + 2; j <= NF; j++) comps = comps " " $j
        pick($i, $(i + 1), comps)
      }
      END { if (!done) stanza() }
    ' "${files[@]}")
  fi
  if [ -n "$found" ]; then
    printf '%s\n' "$found"
  else
    printf 'detect_mirror: no Debian archive (deb http(s)://.../debian, a release suite, main) in %s/sources.list or %s/sources.list.d/*.list, *.sources: using the default, http://deb.debian.org/debian\n' \
      "$etc" "$etc" >&2
    printf '%s\n' http://deb.debian.org/debian
  fi
}
