#!/bin/sh
# The installed rawpipe, used from outside as a user would: `meson install --destdir` into a
# temporary directory, then
#   - library (with its SONAME links), static library, headers, rawpipe.pc, the rawpipe app, the
#     filter plugins, the XDP object and the examples are where the README says;
#   - the installed rawpipe finds the installed XDP object, not the build tree's;
#   - apps/examples/extra_client.c builds with exactly `cc app.c $(pkg-config --cflags --libs
#     rawpipe)` against the installed tree and receives packets from the synth config beside it;
#   - the same example builds and runs with the uninstalled pkg-config file of the build tree;
#   - the example filter plugins build from the installed headers alone (plugins/test/out_of_tree.sh);
#   - librawpipe.so.1 exports only the C API (rawpipe_*) and the C++ API (rawpipe::).
# usage: install_test.sh SOURCE_ROOT BUILD_ROOT CC CXX
set -eu
src=$1 build=$2 cc=$3 cxx=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/root
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

if ! meson install -C "$build" --no-rebuild --destdir "$dest" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  echo "FAIL: meson install -C $build --destdir $dest" >&2
  exit 1
fi

# Install locations, from the build's own options (relative ones are under the prefix).
option() {
  meson introspect "$build" --buildoptions |
    python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"
}
prefix=$(option prefix)
under_prefix() { case $1 in /*) echo "$1" ;; *) echo "$prefix/$1" ;; esac; }
libdir=$(under_prefix "$(option libdir)")
bindir=$(under_prefix "$(option bindir)")
includedir=$(under_prefix "$(option includedir)")
datadir=$(under_prefix "$(option datadir)")
lib=$dest$libdir

# --- what goes where ---
real=$(cd "$lib" && ls librawpipe.so.1.* 2>/dev/null | head -n 1)
if [ -z "$real" ] || [ ! -f "$lib/$real" ] || [ -L "$lib/$real" ]; then
  fail "no librawpipe.so.1.x.y file in $lib"
else
  soname=$(readelf -d "$lib/$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = librawpipe.so.1 ] && ok "$real has SONAME $soname" || fail "$real has SONAME '$soname', not librawpipe.so.1"
  [ -L "$lib/librawpipe.so.1" ] && [ "$(readlink "$lib/librawpipe.so.1")" = "$real" ] &&
    ok "librawpipe.so.1 -> $real" || fail "librawpipe.so.1 is not a link to $real"
  [ -L "$lib/librawpipe.so" ] && [ "$(readlink -f "$lib/librawpipe.so")" = "$(readlink -f "$lib/$real")" ] &&
    ok "librawpipe.so (the link-time name) -> $real" || fail "librawpipe.so does not lead to $real"
fi
[ -f "$lib/librawpipe.a" ] && ok "librawpipe.a" || fail "no librawpipe.a in $lib"
[ -f "$lib/librawpipe-preload.so" ] && ok "librawpipe-preload.so (rawpipe exec)" ||
  fail "no librawpipe-preload.so in $lib (preload/meson.build installs it)"
for h in "$src"/include/rawpipe/*.h "$src"/include/rawpipe/*.hh "$build"/include/rawpipe/*.h; do
  name=$(basename "$h")
  if cmp -s "$h" "$dest$includedir/rawpipe/$name"; then ok "header rawpipe/$name"; else
    fail "include/rawpipe/$name is not installed as $includedir/rawpipe/$name (include/meson.build's list)"
  fi
done
pc=$lib/pkgconfig/rawpipe.pc
if [ -f "$pc" ]; then
  for field in Cflags Libs; do
    grep -q "^$field:" "$pc" && ok "rawpipe.pc has $field" || fail "rawpipe.pc has no $field: line"
  done
else
  fail "no $pc"
fi
app=$dest$bindir/rawpipe
if [ -x "$app" ] && "$app" list-pmds >"$tmp/pmds.txt" 2>&1 && grep -q synth "$tmp/pmds.txt"; then
  ok "$bindir/rawpipe runs (list-pmds)"
else
  fail "$bindir/rawpipe is missing or 'rawpipe list-pmds' failed: $(cat "$tmp/pmds.txt" 2>/dev/null)"
fi
for plugin in rawpipe_seq_gap rawpipe_prefix_drop rawpipe_sampler; do
  [ -f "$lib/rawpipe/filters/$plugin.so" ] && ok "plugin $plugin.so" || fail "no $libdir/rawpipe/filters/$plugin.so"
done
[ -e "$lib/rawpipe/filters/rawpipe_test_bad_abi.so" ] && fail "the test fixture plugin bad_abi is installed"
examples=$dest$datadir/doc/rawpipe/examples
for f in extra_client.c extra_client.toml; do
  [ -f "$examples/$f" ] && ok "example $f" || fail "no $datadir/doc/rawpipe/examples/$f"
done

# --- the XDP object, and that the installed app finds the installed copy ---
if [ -f "$build/pmd/af_xdp/xdp_steer.bpf.o" ]; then
  if [ -f "$lib/rawpipe/xdp_steer.bpf.o" ]; then
    ok "xdp_steer.bpf.o in $libdir/rawpipe"
    # doctor reports where the af_xdp driver's own lookup found the object. The installed app
    # must load the installed library (meson's test environment puts the build tree first).
    found=$(env -u RAWPIPE_XDP_OBJ LD_LIBRARY_PATH="$lib" "$app" doctor --json 2>/dev/null |
      python3 -c 'import json, sys
for c in json.load(sys.stdin).get("checks", []):
    if c.get("check") == "xdp program": print(c.get("detail", ""))' || true)
    case $found in
      "$lib/rawpipe/xdp_steer.bpf.o") ok "the installed rawpipe uses the installed XDP object" ;;
      *) fail "the installed rawpipe's af_xdp driver finds '$found', not $lib/rawpipe/xdp_steer.bpf.o" ;;
    esac
  else
    fail "the af_xdp driver is built but $libdir/rawpipe/xdp_steer.bpf.o is not installed"
  fi
fi

# --- plugins named without a path: the installed copy's own, never the build tree's ---
# (pipeline/privilege/module_location.hh: the build directory exists only where it was built.)
plugin_config=$tmp/plugins.toml
cat >"$plugin_config" <<'TOML'
[run]
duration = 0.2
[[pools]]
name = "rx"
count = 1024
[[ports]]
name = "synth0"
pmd = "synth"
pool = "rx"
packets = 1000
[[endpoints]]
name = "all"
action = "sink"
match = ["udp"]
[[lcores]]
rx = ["synth0:0"]
[[filters]]
path = "rawpipe_sampler"
endpoint = "all"
TOML
if env -u RAWPIPE_PLUGIN_PATH LD_LIBRARY_PATH="$lib" "$app" check "$plugin_config" >"$tmp/plugin_check.log" 2>&1; then
  ok "the installed rawpipe finds rawpipe_sampler by name in its own plugin directory"
else
  fail "the installed rawpipe cannot load rawpipe_sampler by name: $(cat "$tmp/plugin_check.log")"
fi
mv "$lib/rawpipe/filters" "$lib/rawpipe/filters.moved"
if env -u RAWPIPE_PLUGIN_PATH LD_LIBRARY_PATH="$lib" "$app" check "$plugin_config" >"$tmp/plugin_check.log" 2>&1; then
  fail "with its plugin directory gone, the installed rawpipe still loaded a plugin by name (from the build tree?)"
elif grep -q "$build" "$tmp/plugin_check.log"; then
  fail "the installed rawpipe looks for plugins in the build tree: $(cat "$tmp/plugin_check.log")"
else
  ok "the installed rawpipe never looks in the build tree for plugins"
fi
mv "$lib/rawpipe/filters.moved" "$lib/rawpipe/filters"

# --- a C client against the installed tree, with the documented build line ---
mkdir "$tmp/client"
cp "$examples/extra_client.c" "$tmp/client/app.c"
export PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dest"
flags=$(pkg-config --cflags --libs rawpipe)
case $flags in
  *"-I$dest$includedir"*"-L$lib"*) ok "pkg-config --cflags --libs rawpipe: $flags" ;;
  *) fail "pkg-config does not point into the destdir: $flags" ;;
esac
if (cd "$tmp/client" && "$cc" app.c $(pkg-config --cflags --libs rawpipe)) 2>"$tmp/cc.log"; then
  ok "cc app.c \$(pkg-config --cflags --libs rawpipe)"
  resolved=$(LD_LIBRARY_PATH="$lib" ldd "$tmp/client/a.out" | sed -n 's/.*librawpipe.so.1 => \([^ ]*\).*/\1/p')
  [ "$resolved" = "$lib/librawpipe.so.1" ] || fail "the client loads librawpipe.so.1 from '$resolved', not $lib"
  if (cd "$examples" && LD_LIBRARY_PATH="$lib" "$tmp/client/a.out" extra_client.toml app 20000) >"$tmp/run.log" 2>&1 &&
    grep -q "received [1-9][0-9]* packets" "$tmp/run.log"; then
    ok "installed client: $(grep received "$tmp/run.log")"
  else
    fail "the installed client did not receive packets: $(cat "$tmp/run.log")"
  fi
else
  fail "the C example does not build against the installed tree: $(cat "$tmp/cc.log")"
fi

# --- a filter plugin built from the installed headers alone ---
mkdir "$tmp/oot"
if "$src/plugins/test/out_of_tree.sh" "$src" "$cc" "$cxx" "$dest$includedir" "$tmp/oot" >"$tmp/plugin.log" 2>&1; then
  ok "$(tail -n 1 "$tmp/plugin.log")"
  # ... and the installed rawpipe runs it: loaded by path from a directory RAWPIPE_PLUGIN_PATH
  # allows, it sees every packet of the run.
  sed "s|^path = \"rawpipe_sampler\"|path = \"$tmp/oot/sampler.so\"|" "$plugin_config" >"$tmp/oot/run.toml"
  if RAWPIPE_PLUGIN_PATH="$tmp/oot" LD_LIBRARY_PATH="$lib" "$app" run "$tmp/oot/run.toml" >"$tmp/oot/run.log" 2>&1 &&
    grep -q "(sampler): seen=1000 " "$tmp/oot/run.log"; then
    ok "the installed rawpipe runs the out-of-tree sampler.so on every packet"
  else
    fail "the installed rawpipe did not run the out-of-tree sampler.so: $(cat "$tmp/oot/run.log")"
  fi
else
  fail "out-of-tree plugin build against the installed headers: $(cat "$tmp/plugin.log")"
fi
unset PKG_CONFIG_SYSROOT_DIR

# --- the same client with the build tree's uninstalled pkg-config file ---
export PKG_CONFIG_PATH="$build/meson-uninstalled"
uflags=$(pkg-config --cflags --libs rawpipe)
case $uflags in
  *"-I$src/include"*"-L$build"*) ok "uninstalled pkg-config: $uflags" ;;
  *) fail "the uninstalled rawpipe.pc does not point at $src/include and $build: $uflags" ;;
esac
mkdir "$tmp/uninstalled"
cp "$src/apps/examples/extra_client.c" "$tmp/uninstalled/app.c"
if (cd "$tmp/uninstalled" && "$cc" app.c $(pkg-config --cflags --libs rawpipe)) 2>"$tmp/ucc.log"; then
  if (cd "$src/apps/examples" && LD_LIBRARY_PATH="$build" "$tmp/uninstalled/a.out" extra_client.toml app 20000) \
      >"$tmp/urun.log" 2>&1 && grep -q "received [1-9][0-9]* packets" "$tmp/urun.log"; then
    ok "uninstalled client: $(grep received "$tmp/urun.log")"
  else
    fail "the client built with the uninstalled .pc did not receive packets: $(cat "$tmp/urun.log")"
  fi
else
  fail "the C example does not build with the uninstalled rawpipe.pc: $(cat "$tmp/ucc.log")"
fi
unset PKG_CONFIG_PATH

# --- exported symbols: the C API and namespace rawpipe, nothing else ---
so=$lib/librawpipe.so.1
nm -D --defined-only "$so" >"$tmp/nm.txt"
# Version nodes (RAWPIPE_1) appear as absolute symbols; they are not exports of code or data.
awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' "$tmp/nm.txt" | sort -u >"$tmp/exports.txt"
grep -v '^rawpipe_' "$tmp/exports.txt" | c++filt >"$tmp/cxx.txt" || true
grep -Ev '^((typeinfo|typeinfo name|vtable|VTT|guard variable|construction vtable|non-virtual thunk|virtual thunk|covariant return thunk) (for|to) )?rawpipe::' \
  "$tmp/cxx.txt" >"$tmp/offenders.txt" || true
if [ -s "$tmp/offenders.txt" ]; then
  fail "librawpipe.so.1 exports $(wc -l <"$tmp/offenders.txt") symbol(s) outside rawpipe_* and namespace rawpipe::"
  sed 's/^/    /' "$tmp/offenders.txt" >&2
else
  ok "librawpipe.so.1 exports $(wc -l <"$tmp/exports.txt") symbols, all rawpipe_* or rawpipe::"
fi
for sym in rawpipe_get_api rawpipe_api_error; do
  grep -qx "$sym" "$tmp/exports.txt" && ok "exports $sym" || fail "librawpipe.so.1 does not export $sym"
done

if [ "$failures" -ne 0 ]; then
  echo "install_test: $failures check(s) failed" >&2
  exit 1
fi
echo "install_test: every check passed"
