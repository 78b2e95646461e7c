#!/usr/bin/env bash
# Fetch a real multi-version document tree for benchmarking simd:
# ten released Django source distributions (sdist .tar.gz from PyPI),
# extracted side by side into OUT_DIR/django-X.Y.Z/.
#
# Usage: tools/fetch_real_tree.sh OUT_DIR
#        PACKAGE=sqlalchemy VERSIONS="1.3.24 1.4.0 2.0.0" tools/fetch_real_tree.sh OUT_DIR
#
#   Downloads are cached under ${XDG_CACHE_HOME:-~/.cache}/simd/sdists and
#   reused on re-runs; versions already extracted in OUT_DIR are skipped.
#   Override the version list with DJANGO_VERSIONS="3.2 4.2.16 ...".
#
# Each sdist URL and sha256 is resolved from PyPI's simple index (PEP 691
# JSON, or the PEP 503 HTML page where only that is served), downloaded with curl and checked
# against the sha256. If that fails, falls back to
#   python3 -m pip download PACKAGE==X --no-deps --no-binary :all: -d CACHE
# (slower: pip builds metadata in an isolated environment).
#
# The default ten versions (x.y.0 and the last patch release of most series
# from 3.2 to 5.1) give ~66k files / ~420 MB of content, with many
# identical and near-identical files between versions.
set -euo pipefail

if [[ $# -ne 1 || "$1" == -h || "$1" == --help ]]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
OUT=$1
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/simd/sdists
INDEX_URL=${PIP_INDEX_URL:-https://pypi.org/simple}
INDEX_URL=${INDEX_URL%/}
PKG=${PACKAGE:-django}
if [[ $PKG == django ]]; then
    read -r -a VERSIONS <<<"${VERSIONS:-${DJANGO_VERSIONS:-3.2 3.2.25 4.0.10 4.1 4.1.13 4.2 4.2.16 5.0 5.0.9 5.1.4}}"
else
    read -r -a VERSIONS <<<"${VERSIONS:?set VERSIONS for PACKAGE=$PKG}"
fi

mkdir -p "$OUT" "$CACHE"

# Print "URL SHA256" of the sdist of django==$1, from the simple index.
resolve_sdist() {
    curl -fsSL --retry 3 -m 60 \
        -H 'Accept: application/vnd.pypi.simple.v1+json, text/html;q=0.1' \
        "$INDEX_URL/$PKG/" |
        python3 -c '
import json, re, sys
pkg, v = sys.argv[1], sys.argv[2]
body = sys.stdin.read()
name = re.compile(r"(?i)^" + re.escape(pkg) + r"-" + re.escape(v) + r"\.tar\.gz$")
# PEP 691 JSON where the index serves it, else the PEP 503 HTML page (some
# mirrors and proxies serve only HTML).
try:
    files = [(f["filename"], f["url"], f.get("hashes", {}).get("sha256", ""), f.get("yanked"))
             for f in json.loads(body)["files"]]
except ValueError:
    files = []
    for href, text in re.findall(r"<a [^>]*href=\"([^\"]+)\"[^>]*>([^<]+)</a>", body):
        url, _, frag = href.partition("#")
        sha = frag[len("sha256="):] if frag.startswith("sha256=") else ""
        files.append((text.strip(), url, sha, False))
for filename, url, sha, yanked in files:
    if name.match(filename) and not yanked:
        print(url, sha)
        sys.exit(0)
sys.exit("no sdist for " + pkg + "==" + v)
' "$PKG" "$1"
}

# The cached sdists of $PKG==$1 (file names differ in case: Django-, SQLAlchemy-).
cached() {
    find "$CACHE" -maxdepth 1 -iname "$PKG-$1.tar.gz" -size +0
}

# Print the path of the cached sdist of django==$1, downloading it if needed.
fetch_sdist() {
    local v=$1 f url sha tmp
    for f in $(cached "$v"); do
        if [[ -s $f ]]; then echo "$f"; return 0; fi
    done
    if read -r url sha < <(resolve_sdist "$v") && [[ -n ${url:-} ]]; then
        f=$CACHE/${url##*/}
        tmp=$f.part.$$
        echo "  downloading $url" >&2
        if curl -fsSL --retry 3 -m 600 -o "$tmp" "$url" &&
            { [[ -z $sha ]] || echo "$sha  $tmp" | sha256sum -c --quiet -; }; then
            mv "$tmp" "$f"
            echo "$f"
            return 0
        fi
        rm -f "$tmp"
        echo "  direct download failed; trying pip download" >&2
    else
        echo "  could not resolve sdist URL from $INDEX_URL; trying pip download" >&2
    fi
    python3 -m pip download "$PKG==$v" --no-deps --no-binary :all: \
        -d "$CACHE" -q >&2
    for f in $(cached "$v"); do
        if [[ -s $f ]]; then echo "$f"; return 0; fi
    done
    echo "error: no sdist for $PKG==$v in $CACHE after pip download" >&2
    return 1
}

for v in "${VERSIONS[@]}"; do
    dest=$OUT/$PKG-$v
    if [[ -d $dest ]]; then
        echo "$PKG-$v: already extracted, skipping" >&2
        continue
    fi
    echo "$PKG-$v:" >&2
    sdist=$(fetch_sdist "$v")
    tmpdir=$OUT/.$PKG-$v.partial
    rm -rf "$tmpdir"
    mkdir -p "$tmpdir"
    # The sdist has one top-level directory (Django-X or django-X); strip it.
    tar -xzf "$sdist" -C "$tmpdir" --strip-components=1 --no-same-owner
    mv "$tmpdir" "$dest"
    echo "  extracted $(find "$dest" -type f | wc -l) files" >&2
done

files=$(find "$OUT" -type f | wc -l)
bytes=$(find "$OUT" -type f -printf '%s\n' | awk '{s += $1} END {printf "%d", s}')
echo "$OUT: $files files, $bytes bytes"
