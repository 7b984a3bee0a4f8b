#!/bin/bash
# Manual ThreadSanitizer build of the Extra API and filter tests (only the pipeline library, no PMDs).
# (meson setup -Db_sanitize=thread also works but builds every PMD, and -Werror stops on
# GCC's "atomic_thread_fence is not supported with -fsanitize=thread" in the classifier; this
# script builds only what the Extra API tests link.)
# usage: OUT=/tmp/extra-tsan CONF=build-extra tests/unit/extra/tsan_build.sh
set -e
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/extra-tsan}
CONF=${CONF:-build-extra}  # any configured build dir, for rawpipe_config.h
mkdir -p $OUT/obj $OUT/tests/unit $OUT/plugins
F="-march=x86-64-v2 -fsanitize=thread -O1 -g -std=c++20 -I. -Iinclude -I$CONF -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1 -pthread"
SRCS="pipeline/buf/pool.cc pipeline/classify/classifier.cc pipeline/classify/rule.cc pipeline/classify/table.cc pipeline/config/loader.cc pipeline/config/section.cc pipeline/dispatch/dispatch.cc pipeline/engine/pipeline.cc pipeline/extra/extra.cc pipeline/filter/filter.cc pipeline/filter/plugin.cc pipeline/lcore/lcore.cc pipeline/parse/parse.cc pipeline/wire/builder.cc tests/support/test_port.cc tests/unit/extra/extra_test.cc tests/unit/filter/filter_test.cc"
echo $SRCS | tr ' ' '\n' | xargs -P2 -I{} sh -c 'o='"$OUT"'/obj/$(echo {} | tr / _).o; c++ '"$F"' -c {} -o $o'
O=$OUT/obj
LIBS="-lgtest -lgtest_main -lfmt -ltomlplusplus -ldl"
LIBOBJS=$(ls $O/*.o | grep -v _test.cc.o)
c++ -fsanitize=thread -pthread $LIBOBJS $O/tests_unit_extra_extra_test.cc.o $LIBS -o $OUT/tests/unit/extra_test
c++ -fsanitize=thread -pthread $LIBOBJS $O/tests_unit_filter_filter_test.cc.o $LIBS -o $OUT/tests/unit/filter_test
for p in seq_gap sampler; do cc -fsanitize=thread -O1 -g -std=c11 -Iinclude -shared -fPIC -pthread plugins/$p.c -o $OUT/plugins/rawpipe_$p.so; done
c++ -fsanitize=thread -O1 -g -std=c++17 -Iinclude -shared -fPIC plugins/prefix_drop.cc -o $OUT/plugins/rawpipe_prefix_drop.so
cc -O1 -std=c11 -Iinclude -shared -fPIC plugins/test/bad_abi.c -o $OUT/plugins/rawpipe_test_bad_abi.so
echo built
# Run: TSAN_OPTIONS=halt_on_error=1 $OUT/tests/unit/extra_test && $OUT/tests/unit/filter_test
