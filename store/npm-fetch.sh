# Sourced by store/fetch-*.sh: puts a version-pinned npm package tarball into the download
# cache, once, and checks its SHA-256 every time.  npm is the one source of upstream tarballs
# every cubpf machine reaches besides Debian's archive.
#
# npm_fetch_pinned WHO PKG@VERSION TARBALL SHA256 CACHE_DIR
check() { echo "$2  $1" | sha256sum -c --quiet - >/dev/null 2>&1; }

npm_fetch_pinned() {
  local who=$1 pkg=$2 tgz=$3 sha=$4 cache=$5
  if ! [ -f "$cache/$tgz" ] || ! check "$cache/$tgz" "$sha"; then
    if ! command -v npm >/dev/null 2>&1; then
      echo "$who: npm is needed once to fetch $pkg (apt-get install npm)" >&2
      exit 1
    fi
    echo "$who: fetching $pkg into $cache"
    local tmp
    tmp=$(mktemp -d "$cache/tmp.XXXXXX")
    (cd "$tmp" && npm pack --silent "$pkg" >/dev/null 2>"$tmp/npm.log") || {
      cat "$tmp/npm.log" >&2
      rm -rf "$tmp"
      echo "$who: 'npm pack $pkg' failed" >&2
      exit 1
    }
    mv "$tmp/$tgz" "$cache/$tgz"
    rm -rf "$tmp"
  fi
  if ! check "$cache/$tgz" "$sha"; then
    echo "$who: $cache/$tgz does not have the pinned SHA-256 $sha" >&2
    exit 1
  fi
}
