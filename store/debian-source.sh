# Sourced by store/fetch-sqlite.sh and store/fetch-zstd.sh: puts one Debian source package into
# cubpf's download cache, checked file by file against SHA-256 pins, and unpacks it with Debian's
# patches applied (dpkg-source -x).  Nothing is taken from anywhere but Debian's archive.
#
# The caller sets, before calling debian_source_unpack OUT_DIR:
#   DS_WHO      its name, for messages
#   DS_PACKAGE  the source package (sqlite3, libzstd)
#   DS_VERSION  the pinned Debian version (upstream-revision)
#   DS_PINS     one line per file of that version: SHA256 SHA1 FILE (the SHA-1 only names the
#               file on snapshot.debian.org; the SHA-256 is what is checked)
#
# Where the files come from, in this order:
#  1. The cache, $CUBPF_DEPS_CACHE/debian/PACKAGE (default ~/.cache/cubpf-deps): every pinned
#     file there with its pinned SHA-256 means no network at all.  Files enter the cache only
#     after their check, so a cached file with another content (damage, tampering) stops the
#     build; the message names the file to remove.
#  2. `apt-get source --download-only PACKAGE=VERSION` through a private sources list (deb-src
#     lines for bookworm, bookworm-updates and bookworm-security on deb.debian.org, signed by the
#     Debian archive keyring) with its own lists and cache under $CUBPF_DEPS_CACHE/apt.  The
#     machine's apt configuration is read (a proxy set there is used) but never changed, and its
#     own sources are not consulted.  apt checks each file against the archive's signed index;
#     this script then checks it against the pins.
#  3. snapshot.debian.org/file/SHA1, Debian's permanent record of every file the archive ever
#     published.  deb.debian.org keeps only a suite's current revision: a Debian update of the
#     package (say deb12u3) removes the pinned revision from it, but not from snapshot.
#  4. When neither has the pinned revision (snapshot is unreachable from some networks):
#     bookworm's current revision of the same upstream version, if it is newer than the pin and
#     its upstream tarballs (*.orig*) have the pinned SHA-256.  The upstream code is then still
#     exactly the pinned code; only Debian's patches are newer, and apt has checked them against
#     the archive's signature.  A warning prints that revision's pin lines (to paste into the
#     fetch script); its hashes are kept in the cache (PACKAGE/accepted) so that later builds
#     are offline too.  This keeps a clean CI machine building months after a Debian security
#     update, never from upstream code other than the pinned one.
# CUBPF_DEPS_OFFLINE=1 skips 2-4: the cache must hold the files (a build without network).

ds_fail() { [ -z "${ds_tmp:-}" ] || rm -rf "$ds_tmp"; echo "$DS_WHO: $*" >&2; exit 1; }
ds_sha256() { sha256sum <"$1" | cut -c1-64; }
ds_pin_line() { echo "$(ds_sha256 "$1") $(sha1sum <"$1" | cut -c1-40) $(basename "$1")"; }
# The pin lines of the upstream tarballs (and their signatures): *.orig*.
ds_orig_pins() { grep ' [^ ]*\.orig[^ ]*$' <<<"$DS_PINS"; }

# ds_complete DIR PINS: 0 when every pinned file is in DIR with its SHA-256, 1 when some are
# missing; a file present with another content stops everything.
ds_complete() {
  local dir=$1 sha sha1 f missing=0
  while read -r sha sha1 f; do
    [ -n "$f" ] || continue
    if [ ! -f "$dir/$f" ]; then missing=1; continue; fi
    [ "$(ds_sha256 "$dir/$f")" = "$sha" ] || ds_fail "$dir/$f has SHA-256 $(ds_sha256 "$dir/$f")," \
      "not the pinned $sha: refused (remove the file to fetch it again)"
  done <<<"$2"
  return $missing
}

# ds_take FROM PINS: moves the pinned files from FROM into the cache, all checked first.
ds_take() {
  local sha sha1 f
  while read -r sha sha1 f; do
    [ -n "$f" ] || continue
    [ -f "$1/$f" ] || ds_fail "$f was not fetched"
    [ "$(ds_sha256 "$1/$f")" = "$sha" ] || ds_fail "$f from Debian's archive has SHA-256" \
      "$(ds_sha256 "$1/$f"), not the pinned $sha: refused"
  done <<<"$2"
  while read -r sha sha1 f; do
    [ -z "$f" ] || mv -f "$1/$f" "$ds_pool/$f"
  done <<<"$2"
}

# Run as root, apt downloads as root too: its _apt user cannot write into our folders.
ds_root_opts() { [ "$(id -u)" -ne 0 ] || echo "-o APT::Sandbox::User=root"; }

# ds_apt ARGS...: apt-get with the private sources list, lists and cache (one at a time).
ds_apt() {
  local apt=$ds_cache/apt keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  [ -f "$keyring" ] || ds_fail "$keyring is missing (apt-get install debian-archive-keyring)"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
  printf 'deb-src [signed-by=%s] %s main\n' \
    "$keyring" "http://deb.debian.org/debian bookworm" \
    "$keyring" "http://deb.debian.org/debian bookworm-updates" \
    "$keyring" "http://deb.debian.org/debian-security bookworm-security" >"$apt/sources.list"
  # shellcheck disable=SC2046
  (flock 9 && apt-get -o Dir::Etc::SourceList="$apt/sources.list" \
    -o Dir::Etc::SourceParts=/dev/null -o Dir::Etc::Preferences=/dev/null \
    -o Dir::Etc::PreferencesParts=/dev/null -o Dir::State::Lists="$apt/lists" \
    -o Dir::Cache="$apt/cache" -o Dir::State::status=/dev/null \
    $(ds_root_opts) "$@") 9>"$apt/lock"
}

# ds_fetch TMP: steps 2-4 above, into the cache.
ds_fetch() {
  local tmp=$1 log=$1/log sha sha1 f missing=""
  echo "$DS_WHO: fetching Debian source package $DS_PACKAGE $DS_VERSION into $ds_pool"
  ds_apt -q update >"$log" 2>&1 || true
  # 2: deb.debian.org
  if (cd "$tmp" && ds_apt -q --only-source --download-only source "$DS_PACKAGE=$DS_VERSION") \
       >>"$log" 2>&1; then
    ds_take "$tmp" "$DS_PINS"
    return
  fi
  # 3: snapshot.debian.org, each file by its SHA-1, checked by apt-helper against its SHA-256
  echo "$DS_WHO: $DS_VERSION is not in bookworm on deb.debian.org: trying snapshot.debian.org"
  while read -r sha sha1 f; do
    if [ -z "$f" ] || [ -f "$ds_pool/$f" ]; then continue; fi
    # shellcheck disable=SC2046
    if /usr/lib/apt/apt-helper $(ds_root_opts) download-file \
         "http://snapshot.debian.org/file/$sha1" "$tmp/$f" "SHA256:$sha" >>"$log" 2>&1; then
      ds_take "$tmp" "$sha $sha1 $f"
    else
      missing=" $f"
      break
    fi
  done <<<"$DS_PINS"
  [ -n "$missing" ] || return 0
  # 4: bookworm's current revision of the pinned upstream version
  echo "$DS_WHO: snapshot.debian.org did not give$missing: trying bookworm's current revision"
  find "$tmp" -mindepth 1 ! -name log -delete
  (cd "$tmp" && ds_apt -q --only-source --download-only source "$DS_PACKAGE") >>"$log" 2>&1 || {
    cat "$log" >&2; ds_fail "could not fetch $DS_PACKAGE from Debian's archive"; }
  local version new
  version=$(sed -n 's/^Version: //p' "$tmp"/*.dsc)
  dpkg --compare-versions "$version" gt "$DS_VERSION" || ds_fail "bookworm has $DS_PACKAGE" \
    "$version, not newer than the pinned $DS_VERSION, and the pinned one is unreachable"
  new=$(for f in "$tmp"/*; do case $f in *.orig*|*/log) ;; *) ds_pin_line "$f" ;; esac; done)
  ds_take "$tmp" "$(ds_orig_pins)"
  ds_take "$tmp" "$new"
  printf '%s\n%s\n' "$version" "$new" >"$ds_pool/accepted"
}

ds_warn_accepted() {
  echo "$DS_WHO: WARNING: the pinned $DS_PACKAGE $DS_VERSION is not in Debian's archive as" \
    "seen from here; using bookworm's $1 (the pinned upstream tarballs, newer Debian patches)." \
    "To pin it, set DS_VERSION=$1 in $DS_WHO and replace the pin lines but the *.orig* ones" \
    "with:" >&2
  echo "$2" >&2
}

# debian_source_unpack OUT: the patched source tree in OUT (which must not exist).  Sets
# ds_record: what it was made from (package, version, cache folder, pin lines).
debian_source_unpack() {
  local out=$1 used=$DS_VERSION pins
  DS_PINS=$(sed '/^ *$/d' <<<"$DS_PINS")
  pins=$DS_PINS
  ds_cache=${CUBPF_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cubpf-deps}
  ds_pool=$ds_cache/debian/$DS_PACKAGE
  mkdir -p "$ds_pool"
  if ! ds_complete "$ds_pool" "$DS_PINS"; then
    if ! { [ -f "$ds_pool/accepted" ] && ds_complete "$ds_pool" "$(ds_orig_pins)" &&
           ds_complete "$ds_pool" "$(tail -n +2 "$ds_pool/accepted")"; }; then
      [ "${CUBPF_DEPS_OFFLINE:-0}" != 1 ] ||
        ds_fail "CUBPF_DEPS_OFFLINE=1 and $ds_pool does not hold $DS_PACKAGE $DS_VERSION"
      ds_tmp=$(mktemp -d "$ds_pool/tmp.XXXXXX") # beside the cache: moves into it are renames
      ds_fetch "$ds_tmp"
      rm -rf "$ds_tmp"
      ds_tmp=
    fi
    if ! ds_complete "$ds_pool" "$DS_PINS"; then
      used=$(head -1 "$ds_pool/accepted")
      pins=$(printf '%s\n%s\n' "$(ds_orig_pins)" "$(tail -n +2 "$ds_pool/accepted")")
      ds_warn_accepted "$used" "$(tail -n +2 "$ds_pool/accepted")"
    fi
  fi
  local dsc
  dsc=$(awk '$3 ~ /\.dsc$/ {print $3}' <<<"$pins")
  dpkg-source --no-copy -x "$ds_pool/$dsc" "$out" >"$out.log" 2>&1 || {
    cat "$out.log" >&2; ds_fail "dpkg-source -x $dsc failed"; }
  rm -f "$out.log"
  ds_record=$(printf '%s %s: Debian source package, from Debian'\''s archive\ncache %s\n%s\n' \
    "$DS_PACKAGE" "$used" "$ds_pool" "$pins")
}
