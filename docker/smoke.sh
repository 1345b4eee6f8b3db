#!/usr/bin/env bash
# Smoke test of a running sandbox-desktop container:
#   SANDBOX_DESKTOP_TOKEN=T bash docker/smoke.sh URL CONTAINER [WxH]
# URL is where the container's port 2468 is published; CONTAINER its name (for exec and the health
# check); WxH the --desktop-size it was started with (default 1440x900). ENGINE picks the container
# tool (default podman; docker works too). SMOKE_T0 (epoch nanoseconds of `run`) adds time-to-ready.
# SMOKE_WEBRTC_PORTS=LOW-HIGH (a UDP range published 1:1 on 127.0.0.1, the container started with
# SANDBOX_DESKTOP_WEBRTC_PUBLIC_ADDRESS=127.0.0.1) adds a live-view check: the desktop is restarted with
# that webrtcPortRange and a viewer on this side (VIEWER_PYTHON, with aiortc) must receive frames.
# Needs curl and python3 on this side. Every wait is bounded; the first failure ends the test.
set -euo pipefail

url=${1:?usage: smoke.sh URL CONTAINER [WxH]}
name=${2:?usage: smoke.sh URL CONTAINER [WxH]}
size=${3:-1440x900}
engine=${ENGINE:-podman}
token=${SANDBOX_DESKTOP_TOKEN:?set SANDBOX_DESKTOP_TOKEN to the container\'s token}
ready_timeout=${SMOKE_READY_TIMEOUT:-120}
webrtc_ports=${SMOKE_WEBRTC_PORTS:-}
viewer_python=${VIEWER_PYTHON:-python3}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
ok() { passed=$((passed + 1)); printf 'ok   %s\n' "$*"; }
fail() {
  printf 'FAIL %s\n' "$*" >&2
  echo "--- last lines of the container's log ---" >&2
  "$engine" logs --tail 30 "$name" >&2 || true
  exit 1
}
now_ns() { date +%s%N; }
ms_since() { echo $(( ($(now_ns) - $1) / 1000000 )); }

# GET/POST with the token; the body goes to $work/body, the status code to stdout.
call() {
  local method=$1 path=$2; shift 2
  curl -s -o "$work/body" -w '%{http_code}' --max-time 20 -X "$method" \
       -H "Authorization: Bearer $token" "$@" "$url$path"
}
json() { python3 -c "import json, sys; print(json.load(open('$work/body'))$1)"; }

# 1. Ready: the server answers and the desktop passes its end-to-end check.
t0=$(now_ns)
deadline=$((SECONDS + ready_timeout))
until [ "$(call GET /v1/health/ready || true)" = 200 ]; do
  [ "$("$engine" inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" = true ] || fail "container $name is not running"
  [ $SECONDS -lt $deadline ] || fail "not ready after ${ready_timeout}s: $(cat "$work/body" 2>/dev/null)"
  sleep 0.25
done
checks=$(python3 -c "import json; print(', '.join(
    f\"{c['name']} {c['ms']:.1f} ms\" for c in json.load(open('$work/body'))['checks']))")
if [ -n "${SMOKE_T0:-}" ]; then
  ok "ready $(ms_since "$SMOKE_T0") ms after the container was started ($checks)"
else
  ok "ready after $(ms_since "$t0") ms of waiting ($checks)"
fi

# 2. Liveness needs no token; everything else does.
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$url/v1/health")
[ "$code" = 200 ] || fail "GET /v1/health answered $code"
ok "GET /v1/health without a token: 200"
code=$(curl -s -o "$work/body" -w '%{http_code}' --max-time 10 "$url/v1/desktop/status")
[ "$code" = 401 ] || fail "GET /v1/desktop/status without a token answered $code, not 401"
ok "GET /v1/desktop/status without a token: 401 ($(json '["code"]'))"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -H 'Authorization: Bearer wrong' "$url/v1/desktop/status")
[ "$code" = 401 ] || fail "a wrong token answered $code, not 401"
ok "GET /v1/desktop/status with a wrong token: 401"

# 3. The desktop started with the server is active at the requested size.
code=$(call GET /v1/desktop/status)
[ "$code" = 200 ] || fail "GET /v1/desktop/status answered $code"
state=$(json '["state"]')
resolution=$(python3 -c "import json; r = json.load(open('$work/body'))['resolution']; print(f\"{r['width']}x{r['height']}\")")
[ "$state" = active ] || fail "desktop state is $state, not active"
[ "$resolution" = "$size" ] || fail "desktop resolution is $resolution, not $size"
ok "desktop active at $resolution on display $(json '["display"]')"

# 4. A screenshot is a PNG of the screen's size.
started=$(now_ns)
code=$(call GET /v1/desktop/screenshot)
[ "$code" = 200 ] || fail "GET /v1/desktop/screenshot answered $code"
png=$(python3 - "$work/body" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
    sys.exit("not a PNG")
width, height = struct.unpack(">II", data[16:24])
print(f"{width}x{height} {len(data)}")
EOF
) || fail "the screenshot is not a PNG"
[ "${png% *}" = "$size" ] || fail "the screenshot is ${png% *}, not $size"
ok "screenshot: PNG ${png% *}, ${png#* } bytes, $(ms_since "$started") ms"

# 5. A click lands: 200, and the pointer is where it was sent.
started=$(now_ns)
code=$(call POST /v1/desktop/mouse/click -H 'Content-Type: application/json' -d '{"x":200,"y":150}')
[ "$code" = 200 ] || fail "POST /v1/desktop/mouse/click answered $code: $(cat "$work/body")"
ms=$(ms_since "$started")
code=$(call GET /v1/desktop/mouse/position)
[ "$code" = 200 ] || fail "GET /v1/desktop/mouse/position answered $code"
at=$(python3 -c "import json; p = json.load(open('$work/body')); print(f\"{p['x']},{p['y']}\")")
[ "$at" = 200,150 ] || fail "the pointer is at $at after clicking at 200,150"
ok "click at 200,150: 200 in $ms ms, pointer now at $at"

# 6. Inside the container: the server runs as a non-root user and the health check passes.
user=$("$engine" exec "$name" sh -c 'id -un; stat -c %U /proc/1' | tr '\n' ' ')
[ "$user" = "desktop desktop " ] || fail "processes run as '$user', expected the desktop user"
ok "the container runs as user desktop (uid $("$engine" exec "$name" id -u))"
"$engine" exec "$name" sandbox-desktop ready >"$work/ready" 2>&1 || fail "sandbox-desktop ready: $(cat "$work/ready")"
ok "sandbox-desktop ready inside the container: $(tr '\n' ';' <"$work/ready")"
if [ "$engine" = podman ]; then
  # Runs the image's own HEALTHCHECK definition, as the engine's timer would.
  health=$(podman healthcheck run "$name" 2>&1) || fail "podman healthcheck run: ${health:-unhealthy}"
  ok "podman healthcheck run: ${health:-healthy} (status $(podman inspect -f '{{.State.Health.Status}}' "$name"))"
fi

# 7. The live view through the published UDP range: the viewer on this side reaches the container's
#    sockets only through the port forwarding, at the public address the server advertises.
if [ -n "$webrtc_ports" ]; then
  if ! "$viewer_python" -c 'import aiortc' 2>/dev/null; then
    echo "skip live view: $viewer_python has no aiortc (set VIEWER_PYTHON to a Python with the project installed)"
  else
    code=$(call POST /v1/desktop/stop)
    [ "$code" = 200 ] || fail "POST /v1/desktop/stop answered $code: $(cat "$work/body")"
    code=$(call POST /v1/desktop/start -H 'Content-Type: application/json' \
           -d "{\"width\":${size%x*},\"height\":${size#*x},\"webrtcPortRange\":\"$webrtc_ports\"}")
    [ "$code" = 200 ] && [ "$(json '["state"]')" = active ] || fail "restarting the desktop answered $code: $(cat "$work/body")"
    PYTHONPATH=$repo timeout 60 "$viewer_python" -m streaming.viewer "$url" "$token" --start --seconds 2 \
        --timeout 20 >"$work/viewer" 2>"$work/viewer.err" \
      || fail "no live view through 127.0.0.1:$webrtc_ports/udp: $(tail -n 3 "$work/viewer.err")"
    view=$(python3 -c "import json; v = json.loads(open('$work/viewer').read().splitlines()[-1])
print(f\"{v['codec']} {v['width']}x{v['height']}, first frame after {v['firstFrameMs']} ms, {v['frames']} more in 2 s\")")
    ok "live view through the published 127.0.0.1:$webrtc_ports/udp: $view"
  fi
fi

echo "$passed passed, 0 failed"
