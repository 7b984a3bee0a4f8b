#!/bin/sh
# Builds the example plugins the way a user outside this tree would: `pkg-config --cflags rawpipe`
# and nothing else, with whatever rawpipe.pc the environment's PKG_CONFIG_PATH (and
# PKG_CONFIG_SYSROOT_DIR) finds: tests/install runs it against a `meson install --destdir` tree,
# plugins/meson.build against this build's uninstalled rawpipe.pc.
# usage: out_of_tree.sh SOURCE_ROOT CC CXX EXPECTED_INCLUDE_DIR [KEEP_DIR]
#   EXPECTED_INCLUDE_DIR: where rawpipe/filter_plugin.h must come from (checked, so that a stray
#   rawpipe.pc or header elsewhere on the machine cannot make this pass).
#   KEEP_DIR: the built plugins are copied there, for the caller to load them.
set -eu
src=$1 cc=$2 cxx=$3 expected=$4 keep=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cflags=$(pkg-config --cflags rawpipe)
case "$cflags" in *"-I$expected"*) ;; *) echo "pkg-config gave '$cflags', not -I$expected" >&2; exit 1 ;; esac
cd "$tmp"
# The plugin sources are copied out of the tree so that no quoted include can resolve beside them.
cp "$src/plugins/seq_gap.c" "$src/plugins/sampler.c" "$src/plugins/prefix_drop.cc" .
"$cc" -std=c11 -Wall -Wextra -Werror -shared -fPIC $cflags seq_gap.c -o seq_gap.so
"$cc" -std=c11 -Wall -Wextra -Werror -shared -fPIC -pthread $cflags sampler.c -o sampler.so
"$cxx" -std=c++17 -Wall -Wextra -Werror -shared -fPIC $cflags prefix_drop.cc -o prefix_drop.so
# Where the compiler found the plugin header: the expected tree, nowhere else.
"$cc" -std=c11 -M $cflags seq_gap.c | tr ' \\' '\n\n' | grep 'rawpipe/filter_plugin.h$' >headers.txt || true
case "$(cat headers.txt)" in "$expected/rawpipe/filter_plugin.h") ;; *)
  echo "rawpipe/filter_plugin.h came from '$(cat headers.txt)', not $expected" >&2; exit 1 ;; esac
for so in seq_gap.so sampler.so prefix_drop.so; do
  nm -D --defined-only "$so" | grep -q ' T rawpipe_filter_plugin_entry$' || { echo "$so lacks the entry symbol" >&2; exit 1; }
done
# The public header also compiles as C++ on its own (C++ applications use the same table).
printf '#include <rawpipe/filter_plugin.h>\nstatic_assert(sizeof(rawpipe_api_t) > 0, "");\nint main() { return 0; }\n' > api.cc
"$cxx" -std=c++17 -Wall -Wextra -Werror -fsyntax-only $cflags api.cc
[ -z "$keep" ] || cp seq_gap.so sampler.so prefix_drop.so "$keep"/
echo "built 3 plugins against $expected with: $cflags"
