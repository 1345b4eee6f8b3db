"""`sandbox-desktop ready`: the readiness probe for exec probes and HEALTHCHECK, on the standard library only.

It runs every few seconds in every pod, so it imports nothing heavy (no httpx, pydantic or asyncio):
a probe costs a bare Python start, not the whole CLI's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from sandbox_desktop_client.local_servers import DEFAULT_URL, TOKEN_ENV, URL_ENV, resolve_token

READY_PATH = "/v1/health/ready"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get(URL_ENV) or DEFAULT_URL,
                        help=f"server address (default ${URL_ENV} or {DEFAULT_URL})")
    parser.add_argument("--token", default=os.environ.get(TOKEN_ENV) or None,
                        help=f"bearer token (default ${TOKEN_ENV}, else the one a local server announced)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the answer (default 10)")


def run(args: argparse.Namespace) -> int:
    """0 when ready (each check printed), 1 when not ready or refused (the reason on stderr), 2 if unreachable."""
    import urllib.error  # here, not with the module: `sandbox-desktop --help` lists `ready` without a request
    import urllib.request

    request = urllib.request.Request(args.url.rstrip("/") + READY_PATH)
    token = resolve_token(args.token, args.url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            problem = json.loads(exc.read())
        except ValueError:
            problem = {}
        print(f"error: {problem.get('detail') or exc.reason} ({problem.get('code') or 'error'}, HTTP {exc.code})",
              file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"error: cannot reach the server at {args.url}: {reason}", file=sys.stderr)
        return 2
    for check in body.get("checks", []):
        print(f"{check['name']}: ok ({check['ms']:.1f} ms)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sandbox-desktop ready", description=HELP)
    add_arguments(parser)
    return run(parser.parse_args(argv))


HELP = "exit 0 if the desktop passes the end-to-end readiness checks (for exec probes and HEALTHCHECK)"
