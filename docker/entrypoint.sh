#!/bin/sh
# The image's entrypoint: the server on all interfaces of the container, with a desktop, behind the
# token in $SANDBOX_DESKTOP_TOKEN. Arguments starting with `-` are added to the server's flags
# (`--desktop-size 1280x800`, `--no-process-api`, ...); any other command runs instead of the server.
set -eu

case "${1:-}" in
  ""|-*) ;;
  *) exec "$@" ;;
esac

for arg in "$@"; do
  case "$arg" in
    -n|--no-token|-t|--token|--token=*)
      echo "sandbox-desktop: $arg is not accepted here: the image always requires the token from" \
           "SANDBOX_DESKTOP_TOKEN (the health check reads it from there too)" >&2
      exit 2 ;;
  esac
done

if [ -z "${SANDBOX_DESKTOP_TOKEN:-}" ]; then
  cat >&2 <<'EOF'
sandbox-desktop: SANDBOX_DESKTOP_TOKEN is not set. The server listens on all interfaces of the
container, so it requires a bearer token. Start the container with one, for example:
  docker run -e SANDBOX_DESKTOP_TOKEN="$(openssl rand -hex 32)" -p 127.0.0.1:2468:2468 sandbox-desktop
EOF
  exit 2
fi

exec sandbox-desktop server --host 0.0.0.0 --port 2468 --state-dir /var/lib/sandbox-desktop \
  --start-desktop "$@"
