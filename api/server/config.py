"""What the server was started with that the app needs (`ServerConfig`, built by api/cli/main.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from api.middleware.browser_guard import HostPolicy
from api.middleware.cors import CorsPolicy
from desktop.control.approvals import DEFAULT_TIMEOUT_S
from desktop.lifecycle.options import StartOptions
from desktop.lifecycle.policy import DesktopPolicy
from desktop.lifecycle.vm_image import DESKTOPS_PYTHON
from desktop.sandbox.host import Isolation
from desktop.sandbox.users import UidRange
from sandbox_desktop_wire.approvals import ActionKind
from sandbox_desktop_wire.enums import TakeoverMode
from streaming.turn import TurnRelays

if TYPE_CHECKING:
    from streaming.coturn import LocalTurnOptions

VERSION = "0.1.0"


MCP_TOOL_TIMEOUT_S = 60.0
"""How long an MCP tool call may take before it fails (`mcp --timeout`, `server --mcp-timeout`)."""


@dataclass(frozen=True)
class McpOptions:
    """`sandbox-desktop server --mcp-allow/--mcp-timeout`: the stdio server's `--allow` and `--timeout`."""

    allow: tuple[str, ...] = ()
    """The tools offered (empty: all)."""
    timeout: float = MCP_TOOL_TIMEOUT_S


@dataclass(frozen=True)
class ServerConfig:
    """Everything the server was started with that the app needs."""

    token: str | None = None
    cors: CorsPolicy = field(default_factory=CorsPolicy)
    hosts: HostPolicy = field(default_factory=HostPolicy)
    """The Host names the server answers to (`--allowed-host`; enforced on loopback binds)."""
    state_dir: Path | None = None
    start_desktop: StartOptions | None = None
    """Start a desktop with these options when the server starts."""
    url: str = "http://127.0.0.1:2468"
    """Where the server is reachable, for the messages it prints."""
    bind_host: str = "127.0.0.1"
    """The address the server listens on (`--host`); a desktop's OSWorld guest API listens there too."""
    disabled_apis: frozenset[str] = frozenset()
    """Names from OPTIONAL_APIS whose routes answer 403 and are left out of the API document."""
    webrtc_public_addresses: tuple[str, ...] = ()
    """IP addresses a 1:1 NAT forwards the live view's UDP ports from (`--webrtc-public-address`)."""
    turn: TurnRelays | None = None
    """TURN servers run elsewhere that viewers may relay through (`--turn-url`; docs/streaming-turn.md)."""
    local_turn: LocalTurnOptions | None = None
    """The TURN server (coturn) the server starts and stops itself (`--turn local`)."""
    max_desktops: int = 16
    """Desktops the server holds at once (`--max-desktops`); one more is a 429 `too_many_desktops`."""
    announce: tuple[int, Path] | None = None
    """(port, token file) of a generated token, announced to local clients while the server runs."""
    mcp: McpOptions = field(default_factory=McpOptions)
    """The tools `/v1/mcp` offers and their timeout (`--mcp-allow`, `--mcp-timeout`)."""
    takeover: TakeoverMode = TakeoverMode.REFUSE
    """What agent input gets while a person holds control through the live view (`--takeover`)."""
    approve: frozenset[ActionKind] = frozenset()
    """Kinds of agent actions held until a person approves them (`--approve`), on desktops without a policy of
    their own (docs/approvals.md)."""
    approval_timeout: float = DEFAULT_TIMEOUT_S
    """How long a held action waits for a decision when the request says no `Prefer: wait` (`--approval-timeout`)."""
    isolation: Isolation = Isolation.AUTO
    """Whether each desktop is a sandbox (`--isolation`; docs/security.md)."""
    xauthority: Path | None = None
    """The server's own X cookies (`--xauthority`; default `<state dir>/xauthority`), one entry per desktop."""
    shared: tuple[Path, ...] = ()
    """Host paths every desktop sees at their own paths (`--share`)."""
    desktop_policy: DesktopPolicy = field(default_factory=DesktopPolicy)
    """What every desktop created here gets, whoever asks (`--desktop-policy`; desktop/lifecycle/policy.py)."""
    sandbox_uids: UidRange = field(default_factory=UidRange)
    """The uids desktops take theirs from (`--sandbox-uids`, `$SANDBOX_DESKTOP_UIDS`)."""
    osworld_python: Path = DESKTOPS_PYTHON
    """The desktops' Python for OSWorld tasks (`--osworld-python`), on the PATH of desktops created with `osworld`."""
