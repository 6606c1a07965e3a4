#!/bin/sh
# The C extensions' tests on a build with AddressSanitizer and UndefinedBehaviorSanitizer:
# a use-after-free or an out-of-bounds read is reported (and fails the run) only there.
#
# A copy of the package and its tests in .cache/sanitized/src, the extensions built in
# place there with the sanitizers (the normal build in the repository is left alone), and
# the tests run from that copy with the ASan runtime preloaded into the interpreter.
# PYTHONMALLOC=malloc: objects come from malloc, which ASan watches (not pymalloc's pools).
# Leak checking is off: the interpreter keeps its own objects alive at exit.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
out=$root/.cache/sanitized
rm -rf "$out/src"
mkdir -p "$out/src"
cp -r "$root/consumergroup" "$root/tests" "$root/setup.py" "$root/pyproject.toml" "$root/README.md" \
    "$out/src/"
find "$out/src" \( -name '*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
cd "$out/src"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g"
CFLAGS="$flags" LDFLAGS="$flags" "$python" setup.py -q build_ext --inplace \
    --build-temp "$out/build" >"$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
for ext in consumer/_crecords consumer/_cstream producer/_cproduce; do  # setup.py marks them optional: a failed build is silent
    ls consumergroup/$ext.*.so >/dev/null 2>&1 ||
        { cat "$out/build.log"; echo "$ext was not built with the sanitizers"; exit 1; }
done
# Left out: the RSS-based tests (ASan's quarantine holds freed memory on purpose), the
# fuzz runs of the pure-Python parsers (no C code in them) and the two differential tests
# of well-formed batches against the Python paths, and the streaming one against the
# uncompressed batch (their time is the Python side's and the codecs'; the window mode of the C
# decoders runs in test_inflate.py's other tests).
# CONSUMERGROUP_FUZZ=sanitized: a tenth of each property test's full case count (tests/fuzz.py;
# every C call is ~20 times slower here); `make fuzz` runs this with the full counts.
export CONSUMERGROUP_FUZZ="${CONSUMERGROUP_FUZZ:-sanitized}"
LD_PRELOAD=$(gcc -print-file-name=libasan.so) PYTHONMALLOC=malloc \
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$python" -m pytest -q -p no:cacheprovider --durations=5 \
    -k "not no_leaks and not fuzzed and not c_and_fallback_agree and not equal_the_message_path and not within_the_stated_bound and not yields_what_the_whole" \
    tests/unit/test_crecords.py tests/unit/test_spark_columns.py tests/unit/test_inflate.py \
    tests/unit/test_message_stream.py tests/unit/test_decode_safety.py \
    tests/unit/test_offset_marks.py tests/unit/test_producer_parts.py \
    tests/unit/test_untracked_messages.py
