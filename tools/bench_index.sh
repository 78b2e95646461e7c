#!/usr/bin/env bash
# Benchmark `simd index` against baselines on the same tree, warm page cache.
#
# Usage: tools/bench_index.sh DIR [RUNS]      (RUNS default 5; medians)
#
# Environment:
#   SIMD_BIN      simd binary (default target/release/simd, i.e. relative to the
#                 current directory, else to the repository root)
#   TMPDIR        where the scratch directory is made (mktemp -d); it holds a
#                 full copy of DIR plus the indexes, so it needs that much space
#   NO_HYPERFINE=1  time with a small python loop even if hyperfine is installed
#   NO_INSTALL=1    do not apt-get install missing jdupes / rdfind / hyperfine
#
# DIR itself is never modified: it is copied once with `cp -a` into the
# scratch directory and every measurement (baselines included) runs on the
# copy. The scratch directory is removed on exit.
#
# Measurements (median wall-clock seconds of RUNS runs):
#   a  md5sum, 2 processes      find T -type f -print0 | xargs -0 -P2 -n1000 md5sum
#   b  simd full index          fresh index each run (rm -rf before each run)
#   b2 simd full index, then `simd report --format json` (issue 3's bar)
#   c  stat-only walk           find T -type f -printf '%s %T@\n'
#   d  simd re-index, no change  (c, d and e alternately, 4 x RUNS rounds, >= 20)
#   e  simd re-index, one file changed (a line appended, then the run: an
#      echo, timed with it); its baseline, that file's chunking: `simd
#      similar FILE` on an index of nothing less `simd similar` of an empty
#      file (alternately, 4 x RUNS rounds, >= 20, paired by round)
#   f  exact-duplicate finders (jdupes, rdfind, fclones when installed; fclones
#      is not packaged by Debian: `cargo install fclones`)
#   g  peak RSS of a full index, index size on disk / content bytes
# Targets: b/a <= 1.5, b2/a <= 2 (issue 3, on a real tree of ~60k files), d/c <= 1.5, (e-d)/chunking <= 1, peak RSS <= 150 MB, index <= 6 % of content.
set -euo pipefail

usage() { echo "usage: $0 DIR [RUNS]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
[[ "$1" != -h && "$1" != --help ]] || usage
DIR=$1
RUNS=${2:-5}
[[ -d $DIR ]] || { echo "error: $DIR is not a directory" >&2; exit 2; }
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "error: RUNS must be a positive integer" >&2; exit 2; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SIMD_BIN=${SIMD_BIN:-target/release/simd}
if [[ $SIMD_BIN != /* && ! -e $SIMD_BIN && -e $REPO/$SIMD_BIN ]]; then
    SIMD_BIN=$REPO/$SIMD_BIN
fi
HAVE_SIMD=0
if [[ -x $SIMD_BIN ]]; then
    SIMD_BIN=$(realpath "$SIMD_BIN")
    HAVE_SIMD=1
else
    echo "warning: simd binary $SIMD_BIN not found or not executable; only baselines will run" >&2
fi

have() { command -v "$1" >/dev/null 2>&1; }
log() { echo "== $*" >&2; }

# Install missing tools from Debian when possible (jdupes, rdfind, hyperfine).
maybe_install() {
    local pkgs=() p
    for p in "$@"; do have "$p" || pkgs+=("$p"); done
    [[ ${#pkgs[@]} -gt 0 ]] || return 0
    if [[ ${NO_INSTALL:-0} == 1 ]] || ! have apt-get || [[ $(id -u) != 0 ]]; then
        log "not installed (skipping): ${pkgs[*]}"
        return 0
    fi
    log "installing ${pkgs[*]}"
    { apt-get install -y "${pkgs[@]}" || { apt-get update && apt-get install -y "${pkgs[@]}"; }; } \
        >/dev/null 2>&1 || log "apt-get install ${pkgs[*]} failed; continuing without"
}
maybe_install hyperfine jdupes rdfind
have python3 || { echo "error: python3 is required" >&2; exit 2; }
USE_HYPERFINE=0
if have hyperfine && [[ ${NO_HYPERFINE:-0} != 1 ]]; then USE_HYPERFINE=1; fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/simd-bench.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"   # tools that write into the current directory write here

# ---------------------------------------------------------------- the tree
log "copying $DIR to $TMP/tree"
cp -a "$DIR" "$TMP/tree"
sync
T=$TMP/tree
IDX=$TMP/index
qT=$(printf %q "$T")
qIDX=$(printf %q "$IDX")
qBIN=$(printf %q "$SIMD_BIN")

log "warming the page cache"
find "$T" -type f -print0 | xargs -0 cat >/dev/null
read -r NFILES NBYTES < <(find "$T" -type f -printf '%s\n' |
    awk '{n++; s += $1} END {printf "%d %d\n", n, s}')
NDISTINCT=$(find "$T" -type f -print0 | xargs -0 -P2 -n1000 md5sum |
    cut -d' ' -f1 | sort -u | wc -l)
# The file changed in (e): the largest regular file (worst case for one file).
CHANGE_FILE=$(find "$T" -type f -printf '%s\t%p\n' |
    awk -F'\t' '$1 + 0 > max || NR == 1 {max = $1 + 0; sub(/^[^\t]*\t/, ""); f = $0} END {print f}')
qCHANGE=$(printf %q "$CHANGE_FILE")

# ---------------------------------------------------------------- timing
declare -A MED=()
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${LOAD_START%% *}" 'BEGIN {exit !(l > 0.5)}'; then
    log "warning: load average is $LOAD_START; other work on the machine will skew the timings"
fi

# bench KEY PREPARE CMD: median wall-clock seconds of CMD over RUNS runs,
# with PREPARE (may be empty) run untimed before each run. Both run in bash.
bench() {
    local key=$1 prepare=$2 cmd=$3
    log "$key: $cmd"
    if [[ $USE_HYPERFINE == 1 ]]; then
        local args=(--runs "$RUNS" --shell bash --style basic
            --export-json "$TMP/$key.json" --command-name "$key")
        [[ -n $prepare ]] && args+=(--prepare "$prepare")
        hyperfine "${args[@]}" "$cmd" >&2 || return 1
        MED[$key]=$(python3 -c 'import json, sys
print("%.4f" % json.load(open(sys.argv[1]))["results"][0]["median"])' "$TMP/$key.json")
    else
        MED[$key]=$(python3 - "$RUNS" "$prepare" "$cmd" <<'EOF'
import statistics, subprocess, sys, time
runs, prep, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ts = []
for _ in range(runs):
    if prep:
        subprocess.run(["bash", "-c", prep], check=True)
    t0 = time.perf_counter()
    subprocess.run(["bash", "-c", cmd], check=True)
    ts.append(time.perf_counter() - t0)
print("  runs: " + " ".join("%.3f" % t for t in ts), file=sys.stderr)
print("%.4f" % statistics.median(ts))
EOF
        ) || return 1
    fi
    log "$key: median ${MED[$key]} s"
}
run_bench() { bench "$@" || { log "$1: FAILED"; MED[$1]=FAIL; }; }

# bench_alternately KEY CMD [KEY CMD]...: the medians of cheap commands run
# alternately (a round runs each once, in order, after one round thrown
# away), 4 x RUNS rounds, at least 20: c, d and e take ~40-80 ms on a tree of
# 25k files, where each command's five runs back to back, minutes from the
# others', moved d/c by 0.3 with the kernel's inode cache and the VM's other
# load, and e - d came out negative.
bench_alternately() {
    local out keys=() cmds=() meds=() k
    while [[ $# -ge 2 ]]; do keys+=("$1"); cmds+=("$2"); shift 2; done
    log "${keys[*]}, alternately"
    out=$(python3 - "$RUNS" "${cmds[@]}" <<'EOF'
import statistics, subprocess, sys, time
runs, cmds = max(20, 4 * int(sys.argv[1])), sys.argv[2:]
ts = [[] for _ in cmds]
for r in range(runs + 1):
    for k, cmd in enumerate(cmds):
        t0 = time.perf_counter()
        subprocess.run(["bash", "-c", cmd], check=True)
        if r:
            ts[k].append(time.perf_counter() - t0)
for k, t in enumerate(ts):
    print("  %d runs of %s: min %.4f, max %.4f s" % (len(t), cmds[k], min(t), max(t)), file=sys.stderr)
# Then the median over rounds of the last command's time less the one's
# before it (e - d): steadier than the difference of their medians, as
# both runs of a round share that minute's load.
pairs = [b - a for a, b in zip(ts[-2], ts[-1])] if len(ts) > 1 else [0.0]
print(" ".join("%.4f" % statistics.median(t) for t in ts + [pairs]))
EOF
    ) || { log "${keys[*]}: FAILED"; for k in "${keys[@]}"; do MED[$k]=FAIL; done; return; }
    read -r -a meds <<<"$out"
    for k in "${!keys[@]}"; do
        MED[${keys[$k]}]=${meds[$k]}
        log "${keys[$k]}: median ${meds[$k]} s"
    done
    MED[${keys[-1]}_paired]=${meds[${#keys[@]}]}
}

# a, c: baselines
run_bench md5sum "" "find $qT -type f -print0 | xargs -0 -P2 -n1000 md5sum > /dev/null"

# c, with d and e below (alternately), or alone without a simd binary
FIND_CMD="find $qT -type f -printf '%s %T@\n' > /dev/null"
[[ $HAVE_SIMD == 1 ]] || run_bench find "" "$FIND_CMD"

# b, d, e: simd
SIMD_IDX="$qBIN --db $qIDX --quiet index $qT"
if [[ $HAVE_SIMD == 1 ]]; then
    run_bench simd_full "rm -rf $qIDX" "$SIMD_IDX"
    run_bench simd_report "rm -rf $qIDX" "$SIMD_IDX && $qBIN --db $qIDX report --format json > /dev/null"
    [[ -d $IDX ]] || "$SIMD_BIN" --db "$IDX" --quiet index "$T"
    # e appends a line, then indexes: the d after it finds nothing changed.
    bench_alternately find "$FIND_CMD" simd_noop "$SIMD_IDX" \
        simd_1file "echo 'simd bench: appended line' >> $qCHANGE && $SIMD_IDX"
    # e's baseline: that file's chunking (read, cut, MD5s, sketch), as
    # `simd similar` does it on an index of nothing, less the same run on
    # an empty file (the process, the index's open), paired by round.
    mkdir "$TMP/nothing" && : > "$TMP/empty"
    "$SIMD_BIN" --db "$TMP/index-of-nothing" --quiet index "$TMP/nothing"
    SIMD_SIMILAR="$qBIN --db $(printf %q "$TMP/index-of-nothing") similar"
    bench_alternately similar_empty "$SIMD_SIMILAR $(printf %q "$TMP/empty") > /dev/null" \
        similar_file "$SIMD_SIMILAR $qCHANGE > /dev/null"
fi

# f: exact-duplicate finders
FINDERS=()
if have jdupes; then
    FINDERS+=(jdupes); run_bench jdupes "" "jdupes -r -q $qT > /dev/null"
fi
if have rdfind; then
    FINDERS+=(rdfind)
    run_bench rdfind "" "rdfind -dryrun true -makeresultsfile false $qT > /dev/null"
fi
if have fclones; then
    FINDERS+=(fclones); run_bench fclones "" "fclones group $qT > /dev/null 2>&1"
fi

# g: peak RSS of a full index and index size on disk
RSS_KB="" IDX_BYTES="" IDX_BYTES2=""
if [[ $HAVE_SIMD == 1 ]]; then
    log "peak RSS of a full index"
    rm -rf "$IDX"
    if [[ -x /usr/bin/time ]]; then
        /usr/bin/time -f '%M' -o "$TMP/rss" "$SIMD_BIN" --db "$IDX" --quiet index "$T" &&
            RSS_KB=$(tail -1 "$TMP/rss") || log "full index for RSS failed"
    else
        RSS_KB=$(python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' \
            "$SIMD_BIN" --db "$IDX" --quiet index "$T") || log "full index for RSS failed"
    fi
    [[ -d $IDX ]] && IDX_BYTES=$(du -sb "$IDX" | cut -f1)
    # The store may compact when it is reopened: size again after a no-op run.
    if [[ -n $IDX_BYTES ]] && "$SIMD_BIN" --db "$IDX" --quiet index "$T"; then
        IDX_BYTES2=$(du -sb "$IDX" | cut -f1)
    fi
fi

# ---------------------------------------------------------------- report
num() { [[ ${1:-} =~ ^[0-9.]+$ ]]; }
ratio() { # ratio A B -> A/B
    if num "${MED[$1]:-}" && num "${MED[$2]:-}"; then
        awk -v a="${MED[$1]}" -v b="${MED[$2]}" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'
    else echo "-"; fi
}
verdict() { # verdict VALUE TARGET -> ok / OVER
    num "$1" || { echo ""; return; }
    awk -v v="$1" -v t="$2" 'BEGIN {print (v <= t) ? "ok" : "OVER"}'
}
row() { printf '%-34s %10s %15s  %s\n' "$@"; }

CPU=$(lscpu 2>/dev/null | sed -n '/^Model name:/{s/^Model name: *//p;q}' || true)
[[ -n $CPU ]] || CPU=$(sed -n '/^model name/{s/^model name\s*: //p;q}' /proc/cpuinfo || true)
echo
echo "machine:  nproc $(nproc), CPU ${CPU:-unknown}, $(uname -sr), load avg $LOAD_START at start, $(cut -d' ' -f1-3 /proc/loadavg) at end"
echo "tree:     $DIR (benchmarked on a copy in $TMP)"
echo "          $NFILES files, $NBYTES bytes ($(awk -v b="$NBYTES" 'BEGIN {printf "%.1f", b / 1048576}') MiB), $NDISTINCT distinct contents"
echo "simd:     $SIMD_BIN$([[ $HAVE_SIMD == 1 ]] || echo ' (missing)')"
echo "timing:   median of $RUNS runs, warm page cache, $([[ $USE_HYPERFINE == 1 ]] && echo hyperfine || echo 'python loop'); c, d and e alternately, $(( RUNS * 4 > 20 ? RUNS * 4 : 20 )) rounds"
echo
row "measurement" "median s" "ratio" "target"
row "-----------" "--------" "-----" "------"
row "a  md5sum (xargs -P2)" "${MED[md5sum]:--}" "1.00" "baseline"
if [[ $HAVE_SIMD == 1 ]]; then
    r=$(ratio simd_full md5sum)
    row "b  simd full index" "${MED[simd_full]:--}" "$r" "b/a <= 1.5 $(verdict "$r" 1.5)"
    r=$(ratio simd_report md5sum)
    row "b2 simd full index + report" "${MED[simd_report]:--}" "$r" "b2/a <= 2 $(verdict "$r" 2) (issue 3: on a real tree)"
fi
row "c  find stat walk" "${MED[find]:--}" "1.00" "baseline"
if [[ $HAVE_SIMD == 1 ]]; then
    r=$(ratio simd_noop find)
    row "d  simd re-index, nothing changed" "${MED[simd_noop]:--}" "$r" "d/c <= 1.5 $(verdict "$r" 1.5)"
    if num "${MED[simd_1file]:-}" && num "${MED[simd_noop]:-}"; then
        d=$(awk -v a="${MED[simd_1file]}" -v b="${MED[simd_noop]}" 'BEGIN {printf "%+.4f s", a - b}')
    else d="-"; fi
    row "e  simd re-index, 1 file changed" "${MED[simd_1file]:--}" "e-d $d" "(${CHANGE_FILE#"$T"/})"
    if num "${MED[simd_1file_paired]:-}"; then
        row "   e-d, median of each round's own" "${MED[simd_1file_paired]}" "" "target: that file's chunking, below"
    fi
    if num "${MED[similar_file_paired]:-}"; then
        r=$(awk -v a="${MED[simd_1file_paired]:-x}" -v b="${MED[similar_file_paired]}" \
            'BEGIN {if (a ~ /^[0-9.-]+$/ && b > 0) printf "%.2f", a / b; else print "-"}')
        row "   that file's chunking" "${MED[similar_file_paired]}" "$r" "(e-d)/chunking <= 1 $(verdict "$r" 1)"
    fi
fi
for f in "${FINDERS[@]}"; do
    row "f  $f" "${MED[$f]:--}" "$(ratio "$f" md5sum)" "ratio to a"
done
if [[ $HAVE_SIMD == 1 ]]; then
    if num "$RSS_KB"; then
        mb=$(awk -v k="$RSS_KB" 'BEGIN {printf "%.1f", k / 1024}')
        row "g  peak RSS, full index (MB)" "" "$mb MB" "<= 150 MB $(verdict "$mb" 150)"
    else
        row "g  peak RSS, full index (MB)" "" "-" "<= 150 MB"
    fi
    if num "$IDX_BYTES" && [[ $NBYTES -gt 0 ]]; then
        pct=$(awk -v i="$IDX_BYTES" -v b="$NBYTES" 'BEGIN {printf "%.2f", 100 * i / b}')
        row "g  index size / content bytes" "" "$pct %" "<= 6 % $(verdict "$pct" 6) ($IDX_BYTES bytes)"
    else
        row "g  index size / content bytes" "" "-" "<= 6 %"
    fi
    if num "$IDX_BYTES2" && [[ $NBYTES -gt 0 ]]; then
        pct=$(awk -v i="$IDX_BYTES2" -v b="$NBYTES" 'BEGIN {printf "%.2f", 100 * i / b}')
        row "   same, after a no-op re-index" "" "$pct %" "<= 6 % $(verdict "$pct" 6) ($IDX_BYTES2 bytes)"
    fi
    echo
    echo "simd status:"
    "$SIMD_BIN" --db "$IDX" status 2>&1 | sed 's/^/  /' || echo "  (simd status failed)"
fi
