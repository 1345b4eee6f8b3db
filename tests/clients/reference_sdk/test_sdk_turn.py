"""The reference SDK's viewer, in Chromium, relaying through the server's own TURN server (`--turn local`,
docs/streaming-turn.md): the `iceservers` of `signal/provide` in the shape the SDK hands to RTCPeerConnection.

The browser's namespace may send UDP only to coturn's port (an iptables rule inside it), as behind a firewall
that lets nothing else out: the server's media ports are out of its reach, so the video arrives through a
relay or not at all. The page and the fixtures are test_sdk_viewer.py's.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from tests.clients.reference_sdk import test_sdk_viewer as sdk
from tests.clients.reference_sdk.test_sdk_viewer import DESKTOP, Viewers, connect
from tests.conftest import ServerProcess, free_port, running_server
from tests.support import inspector_fixtures as shared
from tests.support.browser import PrivateNetwork

# Fixtures, found by name: the browser in its namespace, and test_sdk_viewer's page, forwarder and viewers.
network, browser = shared.network, shared.browser
bundle, page_origin, forwarder, viewers = sdk.bundle, sdk.page_origin, sdk.forwarder, sdk.viewers

pytestmark = [*sdk.pytestmark, pytest.mark.skipif(shutil.which("turnserver") is None,
                                              reason="coturn is not installed (scripts/setup.sh test installs it)")]
RELAY_PORTS = "59500-59509"

# The local candidate of the pair the browser's ICE agent selected: "relay" when the media goes through TURN.
SELECTED_TYPE = """(async () => {
  const stats = await window.viewerProbe.peers.at(-1).getStats();
  let type = null;
  stats.forEach((s) => {
    if (s.type === "transport" && s.selectedCandidatePairId) {
      type = stats.get(stats.get(s.selectedCandidatePairId).localCandidateId).candidateType;
    }
  });
  return type;
})()"""


@pytest.fixture(scope="module")
def turn_port(network: PrivateNetwork) -> int:
    """coturn's port on our end of the pair, the only UDP destination the browser's namespace may send to."""
    port = free_port()
    for rule in (["-A", "OUTPUT", "-p", "udp", "--dport", str(port), "-j", "ACCEPT"],
                 ["-A", "OUTPUT", "-p", "udp", "-j", "DROP"]):
        subprocess.run(["ip", "netns", "exec", network.name, "iptables", *rule], check=True, timeout=10)
    return port


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, page_origin: str, network: PrivateNetwork,
        turn_port: int) -> Iterator[ServerProcess]:
    """test_sdk_viewer's server, with coturn listening where the browser can reach it."""
    with running_server(tmp_path_factory.mktemp("sdk_turn"), "-O", page_origin, "--allowed-host", network.outer,
                        "--turn", "local", "--turn-listen", f"{network.outer}:{turn_port}",
                        "--turn-relay-ports", RELAY_PORTS, desktop=DESKTOP) as server:
        yield server


@pytest.mark.skipif(shutil.which("iptables") is None, reason="the browser's firewall needs iptables")
def test_the_sdk_viewer_gets_video_through_the_turn_server_it_was_handed(
        viewers: Viewers, api: httpx.Client, srv: ServerProcess, turn_port: int, network: PrivateNetwork) -> None:
    page = viewers.open()
    connect(page)
    page.wait_for("document.querySelector('video')?.videoWidth > 0", "the viewer's first picture", timeout=20)
    peer = page.evaluate("window.viewerProbe.peerInfo()")
    assert peer["connectionState"] == "connected" and peer["framesDecoded"] > 0, peer
    assert page.evaluate(SELECTED_TYPE) == "relay"
    log = (srv.state_dir / "turn" / "turnserver.log").read_text()
    assert ":default/viewer_1>: incoming packet ALLOCATE processed, success" in log, log[-3000:]
