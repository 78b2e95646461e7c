#!/bin/sh
# What mounts inside a root cost `simd watch`: in a mount namespace of its
# own (`unshare -rm`, no privileges needed), starts the daemon on ROOT with
# the index DB, then ten times mounts a tmpfs over SUB (a directory inside
# ROOT), writes a file there, waits 2.5 s, unmounts it and waits 2.5 s; prints
# the daemon's CPU ticks (1/100 s) over those 50 s. DB is written to (use a
# copy of an index of ROOT); ROOT's files are not (the tmpfs only covers SUB
# inside the namespace). The daemon's log: /tmp/bench_mounts.log.
#
# Usage: tools/bench_mounts.sh SIMD_BIN DB ROOT SUB
set -e
if [ -z "$BENCH_MOUNTS_INSIDE" ]; then
    [ $# -eq 4 ] || { echo "usage: $0 SIMD_BIN DB ROOT SUB" >&2; exit 2; }
    exec env BENCH_MOUNTS_INSIDE=1 unshare -rm sh "$0" "$@"
fi
BIN=$1 DB=$2 ROOT=$3 SUB=$4
SIMD_LOG=simd=debug "$BIN" --db "$DB" watch "$ROOT" 2> /tmp/bench_mounts.log &
pid=$!
while ! grep -q '"ready": true' "$DB/daemon.json" 2>/dev/null; do sleep 0.1; done
sleep 3
a=$(awk '{print $14+$15}' /proc/$pid/stat)
for i in 1 2 3 4 5 6 7 8 9 10; do
    mount -t tmpfs none "$SUB"
    echo "$i" > "$SUB/bench-mounts.txt"
    sleep 2.5
    umount "$SUB"
    sleep 2.5
done
b=$(awk '{print $14+$15}' /proc/$pid/stat)
echo "$BIN: daemon CPU over 10 mount + unmount cycles (50 s): $((b - a)) ticks"
kill -TERM $pid
wait $pid
