#!/usr/bin/env bash
# Installs what the tests need beyond cargo: nats-server (Debian package), plus the
# util-linux/bsdutils tools the CLI tests use (`setsid`, `script`), openssl (test
# certificates for NATS over TLS), then the browser
# test tools (scripts/ui-deps.sh: chromium, playwright-core) and a current nats-server
# (scripts/nats-server-current.sh). Safe to rerun.
set -euo pipefail

missing=()
command -v nats-server >/dev/null 2>&1 || missing+=(nats-server)
command -v setsid >/dev/null 2>&1 || missing+=(util-linux)
command -v script >/dev/null 2>&1 || missing+=(bsdutils)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ci-deps: missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "ci-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

"$(dirname "$0")/nats-server-current.sh"
"$(dirname "$0")/ui-deps.sh"
