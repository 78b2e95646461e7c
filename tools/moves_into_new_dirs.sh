#!/bin/bash
# Moves into directories made in the same instant, under the daemon: per
# run, five files each moved by one Python loop into its own new
# directory (notify sees no rename: the directory is not watched yet),
# then `simd lost` of each old name. Prints how many answered "moved".
# usage: tools/moves_into_new_dirs.sh BIN RUNS   (BIN: a simd binary)
set -u
B=$1; n=0
for r in $(seq 1 $2); do
  D=${TMPDIR:-/tmp}/simd-mvt; rm -rf $D; mkdir -p $D/R/src
  for i in 1 2 3 4 5; do seq $i 2000 > $D/R/src/f$i.txt; done
  ($B --db $D/D watch $D/R > $D/log 2>&1 &)
  for k in $(seq 1 100); do $B --db $D/D status 2>/dev/null | grep -q "watching" && break; sleep 0.1; done
  python3 -c "
import os
for i in (1,2,3,4,5): os.mkdir(f'$D/R/n{i}'); os.rename(f'$D/R/src/f{i}.txt', f'$D/R/n{i}/f{i}.txt')"
  sleep 2.5
  for i in 1 2 3 4 5; do $B --db $D/D lost $D/R/src/f$i.txt | sed -n 2p | grep -q "^  moved" && n=$((n+1)); done
  pkill -f "$D/D watch"; sleep 0.3
done
echo "$n moved of $(( $2 * 5 ))"
rm -rf "$D"
