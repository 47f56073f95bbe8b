#!/usr/bin/env bash
# ci/check-deps.sh [ROOT]: the include graph of cubpf's modules points one way (issue 18).
#
#   tools/                        may include every module below
#   shim/live/                    shim, ptx-rewriter, vm, store, cubin (a plug-in of the shim)
#   shim/                         ptx-rewriter, vm, store, cubin (never its plug-in, shim/live/)
#   ptx-rewriter/                 vm, store, cubin
#   vm/                           cubin (the ELF reader every module uses: vm/object.c)
#   store/, cubin/                none of ours
#
# Scans every .c, .h (.bpf.c included), .cu and .def file under the module folders of ROOT (the
# repository by default; tests/ may include anything and ci/ holds no C: neither is scanned) for
# `#include "X"` and `#include <M/...>`, resolves X as the compiler does (the including file's
# folder first, then ROOT, which every module compiles with -I.; for probe sources, *.bpf.c,
# then tools/include, their documented -I), and prints each include that reaches a module the
# including one may not use:
#     FILE:LINE: MODULE includes OTHER/PATH
# A folder's internal.h is private to that folder's files: an include of it from anywhere else
# is named too, as FILE:LINE: MODULE includes PATH (private to FOLDER/).
# Exit status 1 when there is one, 0 when there is none, 2 on a usage error.  Includes that
# resolve nowhere (system headers, generated files such as exports.def) are not ours: skipped,
# unless X itself names a module (`"vm/foo.h"`), which counts as that module.  Bash, find, awk.
set -u

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
[ -d "$root" ] || { echo "check-deps: $root: no such folder" >&2; exit 2; }
root=$(cd "$root" && pwd)

modules="tools shim ptx-rewriter vm store cubin"
# Sub-modules: folders inside a module that count as a module of their own, above their parent.
submodules="shim/live"
declare -A allowed=(
	[tools]="shim/live shim ptx-rewriter vm store cubin"
	[shim/live]="shim ptx-rewriter vm store cubin"
	[shim]="ptx-rewriter vm store cubin"
	[ptx-rewriter]="vm store cubin"
	[vm]="cubin"
	[store]=""
	[cubin]=""
)

is_module() { case " $modules $submodules " in *" $1 "*) return 0 ;; esac; return 1; }

# The module a path (relative to ROOT) belongs to: its sub-module if it lies in one.
module_of() {
	local s
	for s in $submodules; do
		case $1 in "$s"/*) echo "$s"; return ;; esac
	done
	echo "${1%%/*}"
}

# Path P (relative, may hold . and ..) made canonical without touching the file system; empty
# when it climbs above ROOT.
normalize() {
	local IFS=/ part out=()
	for part in $1; do
		case $part in
		'' | .) ;;
		..) [ ${#out[@]} -gt 0 ] || { echo ""; return; }; unset 'out[${#out[@]}-1]' ;;
		*) out+=("$part") ;;
		esac
	done
	echo "${out[*]}"
}

# FILE LINE KIND TARGET for every include line of the module folders (KIND: q or a).
list_includes() {
	local m dirs=()
	for m in $modules; do [ -d "$root/$m" ] && dirs+=("$m"); done
	[ ${#dirs[@]} -gt 0 ] || return 0
	(cd "$root" && find "${dirs[@]}" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
		-o -name '*.def' \) -print0 | sort -z | xargs -0 -r awk '
		/^[ \t]*#[ \t]*include[ \t]*"/ {
			s = $0; sub(/^[^"]*"/, "", s); sub(/".*/, "", s)
			print FILENAME "\t" FNR "\tq\t" s; next }
		/^[ \t]*#[ \t]*include[ \t]*</ {
			s = $0; sub(/^[^<]*</, "", s); sub(/>.*/, "", s)
			print FILENAME "\t" FNR "\ta\t" s }')
}

violations=0
while IFS=$'\t' read -r file line kind target; do
	from=$(module_of "$file")
	dir=$(dirname "$file")
	resolved=""
	if [ "$kind" = q ]; then
		cand=$(normalize "$dir/$target")
		if [ -n "$cand" ] && [ -e "$root/$cand" ]; then
			resolved=$cand
		fi
	fi
	if [ -z "$resolved" ]; then
		cand=$(normalize "$target")
		if [ -n "$cand" ] && [ -e "$root/$cand" ]; then
			resolved=$cand
		elif [[ $file == *.bpf.c ]] && [ -e "$root/tools/include/$target" ]; then
			resolved=$(normalize "tools/include/$target")
		elif is_module "${target%%/*}" && [[ $target == */* ]]; then
			resolved=$cand    # names a module, even if the file is not there
		fi
	fi
	[ -n "$resolved" ] || continue
	# a folder's internal.h is private to the files of that folder (a plug-in included)
	if [ "${resolved##*/}" = internal.h ] && [ "$(dirname "$resolved")" != "$dir" ]; then
		echo "$file:$line: $from includes $resolved (private to $(dirname "$resolved")/)"
		violations=$((violations + 1))
		continue
	fi
	to=$(module_of "$resolved")
	is_module "$to" || continue
	[ "$to" = "$from" ] && continue
	case " ${allowed[$from]} " in *" $to "*) continue ;; esac
	echo "$file:$line: $from includes $resolved"
	violations=$((violations + 1))
done < <(list_includes)

if [ "$violations" -gt 0 ]; then
	echo "check-deps: $violations include(s) against the module order" \
		"(tools > shim/live > shim > ptx-rewriter > vm > cubin; store and cubin include none of ours):" \
		"move the shared declaration down (CONTRIBUTING.md, \"Dependencies\")" >&2
	exit 1
fi
echo "check-deps: $(echo $modules $submodules | wc -w) modules, $(list_includes | wc -l) include lines, none points up"
exit 0
