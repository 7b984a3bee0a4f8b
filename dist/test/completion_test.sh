#!/usr/bin/env bash
# dist/bash-completion/rawpipe against the binary it completes:
#   - `rawpipe <TAB>` offers every subcommand `rawpipe --help` lists, and a prefix narrows to it;
#   - `rawpipe SUB -<TAB>` offers every option `rawpipe SUB --help` lists (both spellings);
#   - config arguments complete to .toml files, dissect to pcap files, an option's value is not
#     offered options.
# usage: completion_test.sh RAWPIPE COMPLETION_FILE
set -uo pipefail
rawpipe=$(realpath "$1") completion=$(realpath "$2")
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# shellcheck source=../bash-completion/rawpipe
source "$completion"

# complete WORD... : COMPREPLY for the command line "rawpipe WORD..." with the cursor on the last.
complete_line() {
  COMP_WORDS=("$rawpipe" "$@")
  COMP_CWORD=$#
  COMPREPLY=()
  _rawpipe
}
offered() {
  local reply
  for reply in "${COMPREPLY[@]}"; do [[ $reply == "$1" ]] && return 0; done
  return 1
}

help_section() {
  awk -v section="$1:" '/^[^ ]/ { inside = ($0 == section); next } inside && /^  [^ ]/ { print $1 }'
}
mapfile -t subcommands < <("$rawpipe" --help | help_section Subcommands)
((${#subcommands[@]} >= 5)) || fail "rawpipe --help lists only ${#subcommands[@]} subcommands: ${subcommands[*]}"

complete_line ""
for sub in "${subcommands[@]}"; do
  offered "$sub" || fail "'rawpipe <TAB>' does not offer $sub (offered: ${COMPREPLY[*]})"
done
for sub in "${subcommands[@]}"; do
  complete_line "${sub:0:3}"
  offered "$sub" || fail "'rawpipe ${sub:0:3}<TAB>' does not offer $sub (offered: ${COMPREPLY[*]})"
  for reply in "${COMPREPLY[@]}"; do
    [[ $reply == "${sub:0:3}"* ]] || fail "'rawpipe ${sub:0:3}<TAB>' offers $reply"
  done

  mapfile -t options < <("$rawpipe" "$sub" --help | help_section Options | tr ',' '\n')
  ((${#options[@]})) || fail "rawpipe $sub --help lists no option"
  complete_line "$sub" -
  for option in "${options[@]}"; do
    offered "$option" || fail "'rawpipe $sub -<TAB>' does not offer $option (offered: ${COMPREPLY[*]})"
  done
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
touch a.toml b.toml notes.txt trace.pcap trace.pcapng
mkdir dir
complete_line run ""
for f in a.toml b.toml dir; do offered "$f" || fail "'rawpipe run <TAB>' does not offer $f (offered: ${COMPREPLY[*]})"; done
offered notes.txt && fail "'rawpipe run <TAB>' offers notes.txt, which is not a config"
complete_line dissect ""
for f in trace.pcap trace.pcapng; do offered "$f" || fail "'rawpipe dissect <TAB>' does not offer $f"; done
offered a.toml && fail "'rawpipe dissect <TAB>' offers a.toml"
complete_line run --duration ""
((${#COMPREPLY[@]} == 0)) || fail "'rawpipe run --duration <TAB>' offers ${COMPREPLY[*]}"
complete_line run --json ""
offered notes.txt || fail "'rawpipe run --json <TAB>' does not offer files"

if ((failures)); then
  echo "completion_test: $failures check(s) failed" >&2
  exit 1
fi
echo "completion_test: ${#subcommands[@]} subcommands and their options complete"
