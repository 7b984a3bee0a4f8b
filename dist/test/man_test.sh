#!/usr/bin/env bash
# The man pages against the binary they document:
#   - rawpipe.1 has an entry for every subcommand `rawpipe --help` lists and names every option of
#     each (`rawpipe SUB --help`), so a new subcommand or option cannot go undocumented;
#   - the example config in rawpipe.toml.5 passes `rawpipe check`;
#   - when scdoc is given, every page converts without an error.
# usage: man_test.sh RAWPIPE MAN_SOURCE_DIR [SCDOC]
set -uo pipefail
rawpipe=$(realpath "$1") dir=$2 scdoc=${3:-}
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
page1=$dir/rawpipe.1.scd

help_section() {
  awk -v section="$1:" '/^[^ ]/ { inside = ($0 == section); next } inside && /^  [^ ]/ { print $1 }'
}
mapfile -t subcommands < <("$rawpipe" --help | help_section Subcommands)
((${#subcommands[@]} >= 5)) || fail "rawpipe --help lists only ${#subcommands[@]} subcommands"
for sub in "${subcommands[@]}"; do
  # An entry is a line of SUBCOMMANDS that starts with the bold name.
  grep -qE "^\*$sub\*( |$)" "$page1" || fail "rawpipe.1 has no entry '*$sub*' for the subcommand $sub"
  # The entry runs up to the next unindented line.
  entry=$(awk -v head="*$sub*" 'index($0, head) == 1 { inside = 1; print; next } inside && /^[^\t]/ && $0 != "" { inside = 0 } inside' "$page1")
  while read -r option; do
    # Every subcommand takes these; OPTIONS documents them once.
    [[ $option == --help || $option == --version ]] && continue
    grep -qF -- "*$option*" <<<"$entry" || fail "rawpipe.1's entry for $sub does not describe $option"
  done < <("$rawpipe" "$sub" --help | help_section Options | tr ',' '\n' | grep -- '^--')
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^# EXAMPLE/ { inside = 1; next } inside && /^```/ { if (block) exit; block = 1; next } block' \
  "$dir/rawpipe.toml.5.scd" >"$tmp/example.toml"
if [[ ! -s $tmp/example.toml ]]; then
  fail "rawpipe.toml.5 has no example config in a \`\`\` block under EXAMPLE"
elif ! "$rawpipe" check "$tmp/example.toml" >"$tmp/check.log" 2>&1; then
  fail "rawpipe.toml.5's example is not a valid config: $(cat "$tmp/check.log")"
fi

if [[ -n $scdoc ]]; then
  for page in "$dir"/*.scd; do
    "$scdoc" <"$page" >"$tmp/page" 2>"$tmp/scdoc.log" || fail "scdoc $(basename "$page"): $(cat "$tmp/scdoc.log")"
  done
fi

if ((failures)); then
  echo "man_test: $failures check(s) failed" >&2
  exit 1
fi
echo "man_test: ${#subcommands[@]} subcommands and their options documented, the example config is valid"
