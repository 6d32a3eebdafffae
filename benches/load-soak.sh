#!/usr/bin/env bash
# The load tests and the soak of cmdr (tests/load, docs/load.md), in
# release mode, one test at a time so each measures alone:
#
#   benches/load-soak.sh            # the load tests, then a 120 s soak
#   benches/load-soak.sh 3600       # … a one-hour soak
#
# SOAK_SECS (first argument, else $CMDR_SOAK_SECS, else 120) is the soak's duration;
# CMDR_SOAK_SAMPLE_SECS the sampling period (default SOAK_SECS/120, at least 1).
# The soak's samples go to target/soak/soak-<unix time>.csv, the server's log next to
# them. Needs nats-server (scripts/ci-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-${CMDR_SOAK_SECS:-120}}"
case "$secs" in
  '' | *[!0-9]*) echo "usage: $0 [SOAK_SECS]" >&2; exit 2 ;;
esac
command -v nats-server >/dev/null || { echo "nats-server is missing: scripts/ci-deps.sh installs it" >&2; exit 2; }
export CMDR_SOAK_SECS="$secs"
exec cargo test --release --test load -- --include-ignored --nocapture --test-threads 1
