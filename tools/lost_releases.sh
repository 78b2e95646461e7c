#!/usr/bin/env bash
# simd lost on real release pairs: every consecutive pair of the releases
# below, scored by tools/score_lost.py versions against both of its
# references (line-set Jaccard, and git's rename detection), with totals.
#
# Usage: tools/lost_releases.sh CORPORA_DIR [SIMD_BIN]
#
#   CORPORA_DIR  where the releases are (fetched there with
#                tools/fetch_real_tree.sh when missing: ~700 MB, mostly Django)
#   SIMD_BIN     default target/release/simd; copy it elsewhere first if it
#                may be rebuilt while this runs
#
# Scratch directories go under ${TMPDIR:-/tmp} and are removed as it goes.
# Prints one line per pair and the totals; docs/accuracy.md has the figures.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 || "$1" == -h || "$1" == --help ]]; then
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
top=$(cd "$(dirname "$0")/.." && pwd)
corpora=$1
bin=$(realpath "${2:-$top/target/release/simd}")
[[ -x $bin ]] || { echo "no simd binary at $bin" >&2; exit 2; }

# package: releases in order (each consecutive pair is scored)
series=(
    "django:3.2 3.2.25 4.0.10 4.1 4.1.13 4.2 4.2.16 5.0 5.0.9 5.1.4"
    "sqlalchemy:1.3.24 1.4.0 1.4.54 2.0.0 2.0.36"
    "pytest:3.6.0 3.6.4"
    "flask:0.12.4 1.0"
    "requests:2.31.0 2.32.0"
    "jinja2:2.10.3 2.11.0"
    "click:6.7 7.0"
    "werkzeug:0.14.1 0.15.0"
)

scratch=$(mktemp -d "${TMPDIR:-/tmp}/simd-lost-releases.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
totals=(0 0 0 0)  # line-set homes, line-set top-1, git renames, git top-1
for s in "${series[@]}"; do
    pkg=${s%%:*}
    read -r -a versions <<<"${s#*:}"
    PACKAGE=$pkg VERSIONS="${versions[*]}" "$top/tools/fetch_real_tree.sh" "$corpora/$pkg" >/dev/null
    for ((i = 1; i < ${#versions[@]}; i++)); do
        a=${versions[i-1]} b=${versions[i]}
        json=$(python3 "$top/tools/score_lost.py" versions --json --simd "$bin" --work "$scratch/w" --clean \
            --a "$corpora/$pkg/$pkg-$a" --b "$corpora/$pkg/$pkg-$b" --name "$pkg")
        read -r gone h t g gt med < <(python3 -c '
import json, sys
o = json.load(sys.stdin)
print(o["gone"], o["with_home"], o["top1"], o["git_renamed"], o["git_top1"], o["query_time"].get("median_ms"))
' <<<"$json")
        echo "$pkg $a -> $b: $gone gone; top-1 line-set $t/$h, git $gt/$g; query median $med ms"
        totals=($((totals[0] + h)) $((totals[1] + t)) $((totals[2] + g)) $((totals[3] + gt)))
    done
done
echo "total: top-1 against the line-set reference ${totals[1]}/${totals[0]}, against git's renames ${totals[3]}/${totals[2]}"
