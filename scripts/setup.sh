#!/usr/bin/env bash
# Installs everything sandbox-desktop needs on a fresh Debian/Ubuntu (or Fedora/Alpine) machine,
# then either serves a desktop or runs the tests:
#   bash scripts/setup.sh serve [server flags...]   install, then run the server with a desktop
#   bash scripts/setup.sh test  [pytest args...]    install (with test tools), then run the tests
#   bash scripts/setup.sh install                   install only
# Python packages go into .venv beside this repository; system packages come from the project's
# own installer (`sandbox-desktop install desktop`). Re-running is cheap: installed parts are skipped.
set -euo pipefail

mode=${1:-install}
[ $# -gt 0 ] && shift
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$repo/.venv"
python=${PYTHON:-python3}

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "need root (or sudo) to run: $*" >&2; exit 1; fi
}

apt_updated=""
apt_install() {
  # Installs only what is missing, so a machine that already has everything makes no apt call.
  local missing=()
  for pkg in "$@"; do dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
  say "apt-get install ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

make_venv() {
  if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv"
    if ! "$python" -m venv "$venv" 2>/dev/null; then
      # Debian's python3 ships without ensurepip until python3-venv is installed.
      command -v apt-get >/dev/null && apt_install python3-venv
      rm -rf "$venv"; "$python" -m venv "$venv"
    fi
  fi
  local extras=$1
  say "installing the Python package (${extras:-runtime})"
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  # The client distribution first: the server depends on it and it is not on any index.
  "$venv/bin/python" -m pip install -q -e "$repo/client" -e "$repo${extras:+[$extras]}"
  # An editable install leaves the project's own modules uncompiled: where PYTHONDONTWRITEBYTECODE is set (as
  # in many CI images) every server, CLI and test process would compile all of them again (~0.35 s each).
  "$venv/bin/python" -m compileall -q -j 0 "$repo/api" "$repo/desktop" "$repo/streaming" "$repo/recording" \
    "$repo/pytest_sandbox_desktop" "$repo/client/sandbox_desktop_client" "$repo/client/sandbox_desktop_wire" \
    >/dev/null || true
}

install_system() {
  say "installing the desktop's system packages"
  "$venv/bin/sandbox-desktop" install desktop --yes
}

install_test_tools() {
  # Independent X clients and media tools the tests use to check effects from outside the service.
  if command -v apt-get >/dev/null; then
    apt_install xterm x11-utils xclip xdotool ffmpeg procps imagemagick scrot
    apt_install chromium iproute2   # tests/ui/test_inspector.py: a real browser, in a network namespace of its own
    apt_install gtk-3-examples zenity  # tests/api/accessibility/test_accessibility.py: real GTK apps nobody wrote for these tests
    apt_install featherpad  # tests/api/accessibility/test_accessibility_qt.py: a real Qt 5 app
    apt_install iptables            # tests/api/streaming/test_nat.py: the live view through a NAT between test namespaces
    apt_install slirp4netns  # tests/api/security/test_rootless_network.py: a rootless server's desktops get a network
    apt_install nginx-light  # tests/ui/test_live_fallback.py: the live view behind docs/streaming.md's reverse proxy
    apt_install coturn              # tests/api/streaming/test_turn.py: the live view relayed by `server --turn local`
  else
    echo "warning: test tools (xterm, xwininfo, xdpyinfo, xclip, xdotool, ffprobe, gtk3-widget-factory, zenity) must be installed by hand" >&2
  fi
}

install_test_venvs() {
  # The venvs of the tests that run vendors' code beside ours (desktop-env for OSWorld's harness, openai-agents,
  # which pins an older websockets): built here, with the installs, not inside the timed test run. The tests
  # build them themselves where this did not (a lock keeps them from doing it twice).
  say "building the test venvs for desktop-env and openai-agents (cached under ~/.cache/sandbox-desktop)"
  (cd "$repo" && "$venv/bin/python" -c "
from tests.support.desktop_env_python import desktop_env_python
from tests.support.agents_venv import agents_python
desktop_env_python()
agents_python()") || echo "warning: a test venv could not be built now; its tests will try again" >&2
}

install_sdk_tests() {
  # tests/clients/reference_sdk/test_sdk_compat.py drives the reference TypeScript SDK; without npm it skips.
  local sdk="$repo/tests/sdk"
  if ! command -v npm >/dev/null; then
    echo "warning: npm not found; tests/clients/reference_sdk/test_sdk_compat.py will be skipped" >&2; return 0; fi
  [ "$sdk/node_modules/.package-lock.json" -nt "$sdk/package-lock.json" ] && return 0
  say "installing the reference SDK for the compatibility test (npm ci in tests/sdk)"
  # Optional packages included: esbuild's platform binary is one (checked against the lockfile).
  (cd "$sdk" && npm ci --no-audit --no-fund --loglevel=error)
}

case "$mode" in
  install)
    make_venv ""
    install_system
    ;;
  serve)
    make_venv ""
    install_system
    say "starting the server with a desktop (default http://127.0.0.1:2468/; status at /v1/desktop/status)"
    exec "$venv/bin/sandbox-desktop" server --start-desktop "$@"
    ;;
  test)
    make_venv test
    install_system
    install_test_tools
    install_sdk_tests
    install_test_venvs
    say "running the tests"
    cd "$repo"
    # Two workers, each test file on one of them (its module-scoped server with it): a run takes about
    # half the time of one worker on two cores, since most tests wait on apps, browsers and encoders.
    exec "$venv/bin/python" -m pytest -n 2 --dist loadfile "$@"
    ;;
  *)
    echo "usage: bash scripts/setup.sh serve|test|install [args...]" >&2
    exit 2
    ;;
esac
