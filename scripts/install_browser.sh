#!/usr/bin/env bash
# Headless Chromium for the leaderboard browser test (Debian's `chromium` package). Idempotent: exits at once when a
# browser is already on PATH. Needs root (or sudo) and apt-get; elsewhere it says what to install and exits 0, so
# `make test` still runs (the browser test then skips with the same hint).
set -euo pipefail

for exe in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$exe" >/dev/null 2>&1; then
        echo "browser: $(command -v "$exe") is installed"
        exit 0
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    echo "browser: no apt-get here; install Chromium yourself to run the leaderboard browser test" >&2
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "browser: not root and no password-less sudo; run 'apt-get install chromium' as root" >&2
        exit 0
    fi
fi

export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing on a fresh container; refresh them only when the package is unknown.
if ! apt-cache show chromium >/dev/null 2>&1; then
    $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "browser: $(command -v chromium) installed ($(chromium --version 2>/dev/null || echo 'version unknown'))"
