#!/bin/sh
# Builds the example plugins the way a user outside this tree would: the public headers and
# rawpipe.pc installed into a temporary prefix, `pkg-config --cflags rawpipe`, nothing else.
# usage: out_of_tree.sh SOURCE_ROOT BUILD_ROOT CC CXX
set -eu
src=$1 build=$2 cc=$3 cxx=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include/rawpipe" "$tmp/lib/pkgconfig"
cp "$src/include/rawpipe/extra.h" "$src/include/rawpipe/filter_plugin.h" "$tmp/include/rawpipe/"
sed "s|^prefix=.*|prefix=$tmp|; s|^includedir=.*|includedir=\${prefix}/include|" \
  "$build/meson-private/rawpipe.pc" > "$tmp/lib/pkgconfig/rawpipe.pc"
cflags=$(PKG_CONFIG_PATH="$tmp/lib/pkgconfig" pkg-config --cflags rawpipe)
case "$cflags" in *"$tmp/include"*) ;; *) echo "pkg-config gave '$cflags', not the temp prefix" >&2; exit 1 ;; esac
cd "$tmp"
"$cc" -std=c11 -Wall -Wextra -Werror -shared -fPIC $cflags "$src/plugins/seq_gap.c" -o seq_gap.so
"$cc" -std=c11 -Wall -Wextra -Werror -shared -fPIC -pthread $cflags "$src/plugins/sampler.c" -o sampler.so
"$cxx" -std=c++17 -Wall -Wextra -Werror -shared -fPIC $cflags "$src/plugins/prefix_drop.cc" -o prefix_drop.so
for so in seq_gap.so sampler.so prefix_drop.so; do
  nm -D --defined-only "$so" | grep -q ' T rawpipe_filter_plugin_entry$' || { echo "$so lacks the entry symbol" >&2; exit 1; }
done
# The public header also compiles as C++ on its own (C++ applications use the same table).
printf '#include <rawpipe/filter_plugin.h>\nstatic_assert(sizeof(rawpipe_api_t) > 0, "");\nint main() { return 0; }\n' > api.cc
"$cxx" -std=c++17 -Wall -Wextra -Werror -fsyntax-only $cflags api.cc
echo "built 3 plugins against $tmp with: $cflags"
