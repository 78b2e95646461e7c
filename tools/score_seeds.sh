#!/usr/bin/env bash
# Scores `simd report` on the generated corpus at its default scale, one
# seed after another: for each seed, P / R / F1 of the similar links, the
# recall of the "containment only" pairs and the index size.
#
#   tools/score_seeds.sh SIMD_BIN WORK_DIR [SEEDS...]     (seeds default: 1 2 3 4 5 6)
#
# WORK_DIR/cS holds seed S's corpus (generated when missing, ~10 s each),
# WORK_DIR/cS.idx the index, rebuilt on every run. The first score of a
# tree computes its reference (~20 s); later runs read it from the cache.
set -euo pipefail
bin=$(realpath "$1")
work=$2
shift 2
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3 4 5 6)
here=$(dirname "$(realpath "$0")")
mkdir -p "$work"
printf '%-5s %7s %7s %7s %10s %7s\n' seed P R F1 cont-only index
for s in "${seeds[@]}"; do
  c=$work/c$s
  [ -f "$c/truth.json" ] || python3 "$here/gen_corpus.py" generate --out "$c" --seed "$s" >/dev/null
  rm -rf "$c.idx"
  "$bin" --db "$c.idx" index -q "$c/tree"
  out=$(python3 "$here/score.py" report --tree "$c/tree" --db "$c.idx" --simd "$bin")
  read -r p r f1 < <(grep 'similar, links' <<<"$out" | awk '{print $8, $9, $10}')
  co=$(grep 'containment only' <<<"$out" | awk '{print $5}')
  size=$("$bin" --db "$c.idx" status | sed -n 's/^on disk .*, \(.*\) of file bytes.*/\1/p')
  printf '%-5s %7s %7s %7s %10s %7s\n' "$s" "$p" "$r" "$f1" "$co" "$size"
done
