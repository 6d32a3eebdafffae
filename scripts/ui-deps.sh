#!/usr/bin/env bash
# Installs what the browser tests (`cargo test --test ui`) need: Debian's `chromium`
# (apt-get; never a browser downloaded by npm) and `playwright-core` from
# tests/ui/package-lock.json into tests/ui/node_modules. Building and running cmdr needs
# none of this. Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing=()
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ui-deps: missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "ui-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# playwright-core never downloads a browser on install; the tests launch /usr/bin/chromium.
cd tests/ui
if [ ! -d node_modules/playwright-core ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "ui-deps: installing playwright-core (npm ci)" >&2
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
fi
