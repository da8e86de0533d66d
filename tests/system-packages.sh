#!/bin/sh
# Installs the Debian packages the test suite needs when they are missing: the PostgreSQL
# server binaries (the tests start a throw-away server of their own; none is left running)
# and the distribution's Chromium with its driver (the console's browser tests drive
# /usr/bin/chromium through Playwright; no browser is ever downloaded by Playwright).
# Run by the README's test command before anything else; does nothing when all are present.
set -eu
need=""
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && ! command -v pg_ctl >/dev/null 2>&1; then
    need="$need postgresql"
fi
if [ ! -x /usr/bin/chromium ]; then
    need="$need chromium"
fi
if [ ! -x /usr/bin/chromedriver ]; then
    need="$need chromium-driver"
fi
[ -z "$need" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
echo "tests/system-packages.sh: installing$need" >&2
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
