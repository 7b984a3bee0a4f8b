#!/usr/bin/env bash
# The Debian packages, installed on this machine and used from outside as a user would:
#   - tools/package builds librawpipe1, librawpipe-dev and rawpipe into BUILD_ROOT/package
#     (the build directory there is kept, so the next run compiles only what changed);
#   - dpkg installs them (their Depends must be met by what is installed; nothing is pulled in);
#   - the installed rawpipe loads the installed librawpipe, lists its drivers, finds the installed
#     XDP object, and runs the installed sample configs (synth, and the filter plugins one with the
#     installed plugins) for one second each with the accounting balanced;
#   - apps/examples/extra_client.c, as installed, builds with `cc app.c $(pkg-config --cflags
#     --libs rawpipe)` and receives packets; a filter plugin builds with `pkg-config --cflags
#     rawpipe` from the installed headers alone and the installed rawpipe runs it;
#   - man -w finds rawpipe(1), rawpipe.toml(5) and rawpipe-extra(3); the installed bash completion
#     completes every subcommand of the installed binary; systemd-analyze verify accepts an
#     instance of the installed rawpipe@.service;
#   - the packages are purged afterwards, and nothing of them stays on the machine.
# Needs root (dpkg) and dpkg-buildpackage with debhelper; skips with one line otherwise.
# usage: package_test.sh SOURCE_ROOT BUILD_ROOT
set -uo pipefail
src=$1 build=$2
skip() { echo "SKIP: $*"; exit 77; }
[[ $EUID -eq 0 ]] || skip "installing a package needs root"
command -v dpkg-buildpackage >/dev/null || skip "dpkg-buildpackage not found (apt-get install dpkg-dev)"
command -v dh >/dev/null || skip "dh not found (apt-get install debhelper)"
packages=(rawpipe librawpipe-dev librawpipe1)
for pkg in "${packages[@]}"; do
  if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" == *installed* ]]; then
    skip "$pkg is already installed on this machine; this test would replace and then remove it"
  fi
done

# One run at a time on the machine: the packages are installed system-wide.
exec 9>/run/lock/rawpipe-package-test.lock
flock -w 900 9 || { echo "FAIL: another package test holds /run/lock/rawpipe-package-test.lock" >&2; exit 1; }

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }
tmp=$(mktemp -d)
installed=0
cleanup() {
  if ((installed)); then
    dpkg --purge "${packages[@]}" >"$tmp/purge.log" 2>&1 || { echo "FAIL: dpkg --purge ${packages[*]}:" >&2; cat "$tmp/purge.log" >&2; }
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# Nothing of the build tree may leak into what is tested: meson's test environment points the
# loader at the build tree.
unset LD_LIBRARY_PATH RAWPIPE_XDP_OBJ RAWPIPE_PLUGIN_PATH PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
export LC_ALL=C

# --- build ---
start=$SECONDS
if ! "$src/tools/package" "$build/package" >"$tmp/debs.txt" 2>"$tmp/build.log"; then
  tail -n 40 "$tmp/build.log" >&2
  echo "FAIL: tools/package $build/package" >&2
  exit 1
fi
mapfile -t debs <"$tmp/debs.txt"
ok "tools/package built ${debs[*]##*/} in $((SECONDS - start)) s"

# --- install ---
start=$SECONDS
installed=1
if ! dpkg -i "${debs[@]}" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  echo "FAIL: dpkg -i ${debs[*]##*/}" >&2
  exit 1
fi
ok "dpkg -i in $((SECONDS - start)) s"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=/usr/lib/$multiarch
examples=/usr/share/doc/rawpipe/examples
rawpipe=/usr/bin/rawpipe

# --- what goes where, and which package owns it ---
owner() { dpkg-query -S "$1" 2>/dev/null | sed 's/:.*//'; }
expect_owner() {
  local path=$1 pkg=$2
  if [[ ! -e $path ]]; then fail "$path is not installed"; return; fi
  [[ "$(owner "$path")" == "$pkg"* ]] && ok "$path ($pkg)" || fail "$path belongs to '$(owner "$path")', not $pkg"
}
expect_owner "$libdir/librawpipe.so.1" librawpipe1
expect_owner "$libdir/rawpipe/xdp_steer.bpf.o" librawpipe1
expect_owner "$libdir/librawpipe.so" librawpipe-dev
expect_owner "$libdir/librawpipe.a" librawpipe-dev
expect_owner "$libdir/pkgconfig/rawpipe.pc" librawpipe-dev
expect_owner /usr/include/rawpipe/extra.h librawpipe-dev
expect_owner "$rawpipe" rawpipe
for plugin in rawpipe_seq_gap rawpipe_prefix_drop rawpipe_sampler; do
  expect_owner "$libdir/rawpipe/filters/$plugin.so" rawpipe
done
for config in "$src"/configs/*.toml "$src"/apps/examples/extra_client.c; do
  expect_owner "$examples/$(basename "$config")" rawpipe
done
expect_owner /usr/share/bash-completion/completions/rawpipe rawpipe
expect_owner "$libdir/librawpipe-preload.so" rawpipe
expect_owner /usr/share/doc/rawpipe/contrib/grafana/rawpipe-dashboard.json rawpipe
expect_owner /usr/share/doc/rawpipe/contrib/prometheus/rawpipe-alerts.yml rawpipe
expect_owner /lib/systemd/system/rawpipe@.service rawpipe
[[ -d /etc/rawpipe ]] && ok "/etc/rawpipe exists" || fail "/etc/rawpipe (where rawpipe@NAME.service looks) is missing"

# --- the installed binary, library and XDP object ---
# Through the real path: with merged /usr, the loader may find it as /lib/... .
resolved=$(ldd "$rawpipe" | sed -n 's/.*librawpipe.so.1 => \([^ ]*\).*/\1/p')
[[ -n $resolved && "$(readlink -f "$resolved")" == "$(readlink -f "$libdir/librawpipe.so.1")" ]] &&
  ok "rawpipe loads $resolved" ||
  fail "the installed rawpipe loads librawpipe.so.1 from '$resolved', not $libdir"
if "$rawpipe" list-pmds >"$tmp/pmds.txt" 2>&1; then
  missing=""
  for pmd in synth pcap af_packet af_xdp socket dpdk mlx5 mana; do
    grep -qw -- "$pmd" "$tmp/pmds.txt" || missing+=" $pmd"
  done
  [[ -z $missing ]] && ok "rawpipe list-pmds names every driver" || fail "the packaged rawpipe lacks:$missing"
else
  fail "rawpipe list-pmds: $(cat "$tmp/pmds.txt")"
fi
found=$("$rawpipe" doctor --json 2>/dev/null | python3 -c 'import json, sys
for c in json.load(sys.stdin).get("checks", []):
    if c.get("check") == "xdp program": print(c.get("detail", ""))' || true)
[[ $found == "$libdir/rawpipe/xdp_steer.bpf.o" ]] && ok "the af_xdp driver finds $found" ||
  fail "the installed af_xdp driver finds '$found', not $libdir/rawpipe/xdp_steer.bpf.o"

# run_config NAME CONFIG [ARGS]: one second of the installed rawpipe on CONFIG, balanced.
run_config() {
  local name=$1 config=$2
  shift 2
  if (cd "$tmp" && "$rawpipe" run "$config" --duration 1 --json "$tmp/$name.json" "$@") >"$tmp/$name.log" 2>&1 &&
    python3 - "$tmp/$name.json" >"$tmp/$name.check" 2>&1 <<'PY'; then
import json, sys
s = json.load(open(sys.argv[1]))
def find(d, *keys):
    for k in keys:
        if k in d: return d[k]
    raise KeyError(keys)
rx = find(s, "rx_packets", "rx")
rx = rx["packets"] if isinstance(rx, dict) else rx
assert rx > 0, "no packet received"
print(rx)
PY
    ok "rawpipe run $config: exit 0, $(cat "$tmp/$name.check") packets, $(grep -m1 -o 'accounting[^,]*' "$tmp/$name.log" || true)"
  else
    fail "rawpipe run $config --duration 1: $(tail -n 15 "$tmp/$name.log"; cat "$tmp/$name.check" 2>/dev/null)"
  fi
}
run_config default "$examples/default.toml"
run_config plugins "$examples/filter-plugins.toml"

# --- a C client against the installed files ---
mkdir "$tmp/client"
cp "$examples/extra_client.c" "$tmp/client/app.c"
if (cd "$tmp/client" && cc app.c $(pkg-config --cflags --libs rawpipe) -o app) 2>"$tmp/cc.log"; then
  ok "cc app.c \$(pkg-config --cflags --libs rawpipe)"
  if (cd "$examples" && "$tmp/client/app" extra_client.toml app 20000) >"$tmp/client.log" 2>&1 &&
    grep -q "received [1-9][0-9]* packets" "$tmp/client.log"; then
    ok "installed client: $(grep received "$tmp/client.log")"
  else
    fail "the client built against the package received nothing: $(cat "$tmp/client.log")"
  fi
else
  fail "extra_client.c does not build against the package: $(cat "$tmp/cc.log")"
fi

# --- a filter plugin from the installed headers, run by the installed rawpipe ---
mkdir -m 0755 "$tmp/plugins"
cp "$src/plugins/seq_gap.c" "$tmp/my_seq_gap.c"
if (cd "$tmp" && cc -std=c11 -Wall -Wextra -Werror -shared -fPIC $(pkg-config --cflags rawpipe) my_seq_gap.c \
      -o plugins/my_seq_gap.so) 2>"$tmp/plugin_cc.log"; then
  header=$(cd "$tmp" && cc -std=c11 -M $(pkg-config --cflags rawpipe) my_seq_gap.c | tr ' \\' '\n\n' |
    grep 'rawpipe/filter_plugin.h$')
  [[ $header == /usr/include/rawpipe/filter_plugin.h ]] && ok "plugin built with rawpipe/filter_plugin.h from /usr/include" ||
    fail "the plugin's rawpipe/filter_plugin.h came from '$header'"
  # The sample plugins config, with this plugin instead of the installed one.
  sed -e "s|^path = \"rawpipe_seq_gap\"|path = \"$tmp/plugins/my_seq_gap.so\"|" \
    -e "s|^\[run\]|[run]\nplugin_dirs = [\"$tmp/plugins\", \"$libdir/rawpipe/filters\"]|" \
    "$examples/filter-plugins.toml" >"$tmp/my-plugins.toml"
  if grep -q "my_seq_gap.so" "$tmp/my-plugins.toml"; then
    run_config my-plugin "$tmp/my-plugins.toml"
    grep -q "^filter filters\[0\] (seq_gap): flows=[1-9]" "$tmp/my-plugin.log" && ok "the plugin saw the flows" ||
      fail "no report of filters[0] (seq_gap) with flows: $(tail -n 5 "$tmp/my-plugin.log")"
    # And filters[0] is this file, not an installed plugin of the same name: without it, the
    # config is refused.
    mv "$tmp/plugins/my_seq_gap.so" "$tmp/moved.so"
    if "$rawpipe" check "$tmp/my-plugins.toml" >"$tmp/moved.log" 2>&1 || ! grep -q "my_seq_gap.so" "$tmp/moved.log"; then
      fail "without my_seq_gap.so the config is not refused for it: $(cat "$tmp/moved.log")"
    else
      ok "filters[0] is my_seq_gap.so (refused without it)"
    fi
  else
    fail "filter-plugins.toml no longer loads rawpipe_seq_gap; update this test"
  fi
else
  fail "a filter plugin does not build against the package: $(cat "$tmp/plugin_cc.log")"
fi

# --- man pages, completion, systemd unit ---
for page in "1 rawpipe" "5 rawpipe.toml" "3 rawpipe-extra"; do
  set -- $page
  path=$(man -w "$1" "$2" 2>/dev/null)
  [[ $path == /usr/share/man/man$1/$2.$1* ]] && ok "man -w $1 $2: $path" || fail "man -w $1 $2 finds '$path'"
done
if "$src/dist/test/completion_test.sh" "$rawpipe" /usr/share/bash-completion/completions/rawpipe >"$tmp/completion.log" 2>&1; then
  ok "$(tail -n 1 "$tmp/completion.log") (installed)"
else
  fail "the installed completion: $(cat "$tmp/completion.log")"
fi
# verify loads the template through an instance, from the unit path, and checks that every command
# it runs and every man page it names exists.
if (cd "$tmp" && systemd-analyze verify rawpipe@pkgtest.service) >"$tmp/verify.log" 2>&1 && [[ ! -s $tmp/verify.log ]]; then
  ok "systemd-analyze verify rawpipe@pkgtest.service"
else
  fail "systemd-analyze verify rawpipe@pkgtest.service: $(cat "$tmp/verify.log")"
fi
unit=$(systemctl cat rawpipe@pkgtest.service 2>/dev/null || cat /lib/systemd/system/rawpipe@.service)
for line in "ExecStart=/usr/bin/rawpipe run /etc/rawpipe/%i.toml" "LimitMEMLOCK=infinity" "KillSignal=SIGTERM" \
    "Restart=on-failure"; do
  grep -qxF -- "$line" <<<"$unit" && ok "unit: $line" || fail "the installed unit has no '$line'"
done

# --- removal leaves nothing behind ---
start=$SECONDS
installed=0
if dpkg --purge "${packages[@]}" >"$tmp/purge.log" 2>&1; then
  left=""
  for path in "$rawpipe" "$libdir/librawpipe.so.1" /usr/include/rawpipe "$libdir/rawpipe" "$examples" \
      /lib/systemd/system/rawpipe@.service /etc/rawpipe /usr/share/man/man1/rawpipe.1.gz; do
    [[ -e $path ]] && left+=" $path"
  done
  [[ -z $left ]] && ok "dpkg --purge in $((SECONDS - start)) s leaves nothing" || fail "left after purge:$left"
else
  fail "dpkg --purge: $(cat "$tmp/purge.log")"
fi

if ((failures)); then
  echo "package_test: $failures check(s) failed" >&2
  exit 1
fi
echo "package_test: every check passed"
