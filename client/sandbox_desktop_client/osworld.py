"""OSWorld's harness (`desktop_env`, unchanged) on a sandbox-desktop server: each "VM" a desktop created with its
OSWorld guest API (docs/osworld.md "Running OSWorld against a server").

`install()` teaches an installed `desktop_env` the provider name `sandbox-desktop` without editing its files:
its factory (`desktop_env.providers.create_vm_manager_and_provider`, and the name `desktop_env.desktop_env`
imported it under) learns the name, and `DesktopEnv.__init__`'s check of known names counts it among the providers
whose machines start clean (as Docker's). Both are patched for the `desktop_env` versions in `SUPPORTED`, whose
code was read for them; any other version is refused, since a changed factory or check would be patched wrongly.

    from sandbox_desktop_client import osworld
    osworld.install(url="http://127.0.0.1:2468")
    env = DesktopEnv(provider_name="sandbox-desktop", action_space="pyautogui")

Needs the `osworld` extra (`desktop-env`); the client itself imports none of it until `install()`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import time
import types
from collections.abc import Callable
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import httpx

from .client import Client
from .errors import NotFoundError
from .local_servers import DEFAULT_URL

PROVIDER_NAME = "sandbox-desktop"
SUPPORTED = ("1.0.2",)
"""`desktop_env` versions whose factory and provider-name check `install()` was written against."""
CLEAN_START = frozenset({"docker", "aws", "gcp", "azure", "aliyun", "volcengine"})
"""The names `DesktopEnv.__init__` of those versions treats as machines that start clean."""
READY_TIMEOUT_S = 120.0


class Revert(StrEnum):
    """What `revert_to_snapshot` does between tasks."""

    RECREATE = "recreate"
    """Delete the desktop and create a new one (a new id and ports, as upstream's Docker provider): nothing of the
    last task is left, /tmp and the network's state included."""
    RESET = "reset"
    """`POST /v1/desktops/{id}/reset`: its apps ended, HOME from its template; the same id and ports, faster."""


class Settings:
    """Where the provider's desktops are made, set by `install()`; a `region` that is a URL names the server."""

    url: str | None = None
    token: str | None = None
    revert: Revert = Revert.RECREATE
    create_options: dict[str, Any] = {}
    """Replaced whole by install(), never mutated."""


def _server_url(region: str | None) -> str:
    return region if region and region.startswith(("http://", "https://")) else Settings.url or DEFAULT_URL


def _client(region: str | None) -> Client:
    return Client(_server_url(region), token=Settings.token, timeout=60)


def _create(client: Client, screen_size: tuple[int, int] | None = None) -> str:
    width, height = screen_size or (1920, 1080)
    options = {"width": width, "height": height, **Settings.create_options, "osworld": True}
    return client.desktops.create(**options).id


class SandboxDesktopVMManager:
    """The server keeps the registry: a "VM path" is a desktop id, and a free VM is one made on demand."""

    def __init__(self, region: str | None = None) -> None:
        self.region = region

    def initialize_registry(self, **kwargs: Any) -> None:
        pass

    # DesktopEnv passes the region positionally to these three.
    def add_vm(self, vm_path: str, *args: Any, **kwargs: Any) -> None:
        pass

    def delete_vm(self, vm_path: str, *args: Any, **kwargs: Any) -> None:
        pass

    def occupy_vm(self, vm_path: str, pid: int, *args: Any, **kwargs: Any) -> None:
        pass

    def list_free_vms(self, **kwargs: Any) -> list[str]:
        return []

    def check_and_clean(self, **kwargs: Any) -> None:
        pass

    def get_vm_path(self, os_type: str = "Ubuntu", region: str | None = None,
                    screen_size: tuple[int, int] | None = None, **kwargs: Any) -> str:
        if os_type.lower() != "ubuntu":
            raise NotImplementedError(f"{PROVIDER_NAME} runs Linux desktops only, not {os_type}")
        with _client(region or self.region) as client:
            return _create(client, screen_size)

class SandboxDesktopProvider:
    """One desktop per environment; its guest API, DevTools and VLC ports as the resource reports them."""

    def __init__(self, region: str | None = None) -> None:
        self.region = region  # what the abstract Provider's __init__ keeps
        self.address: str | None = None
        self.screen_size: tuple[int, int] | None = None

    def start_emulator(self, path_to_vm: str, headless: bool, os_type: str = "Ubuntu") -> None:
        with _client(self.region) as client:
            desktop = client.desktops.get(path_to_vm)
            if desktop.state == "deleted":
                raise RuntimeError(f"desktop {path_to_vm} is deleted; let the provider make one (no path_to_vm)")
            if desktop.state == "paused":
                client.desktops.attach(path_to_vm).resume()
            if desktop.osworld is None or desktop.osworld.cdp_port is None:
                desktop = client.desktops.attach(path_to_vm).update(osworld=True)
            if desktop.resolution is not None:
                self.screen_size = (desktop.resolution.width, desktop.resolution.height)
            guest = desktop.osworld
            assert guest is not None and guest.cdp_port is not None and guest.vlc_port is not None
            host = urlsplit(guest.url).hostname or "127.0.0.1"
            # No VNC here: the "VNC port" a person would watch at is the server's, whose inspector shows it.
            server_port = urlsplit(_server_url(self.region)).port or 80
            self.address = f"{host}:{guest.port}:{guest.cdp_port}:{server_port}:{guest.vlc_port}"
            _wait_ready(guest.url)

    def get_ip_address(self, path_to_vm: str) -> str:
        if self.address is None:
            raise RuntimeError("the desktop is not started: start_emulator first")
        return self.address

    def save_state(self, path_to_vm: str, snapshot_name: str) -> None:
        raise NotImplementedError(f"{PROVIDER_NAME} keeps no snapshots: a desktop is reset or made anew")

    def revert_to_snapshot(self, path_to_vm: str, snapshot_name: str) -> str:
        with _client(self.region) as client:
            if Settings.revert is Revert.RESET:
                client.desktops.attach(path_to_vm).reset()
                return path_to_vm
            size = self.screen_size
            _delete(client, path_to_vm)
            self.address = None
            return _create(client, size)

    def stop_emulator(self, path_to_vm: str, region: str | None = None, *args: Any, **kwargs: Any) -> None:
        with _client(region or self.region) as client:
            _delete(client, path_to_vm)
        self.address = None


def provider_classes() -> tuple[type[Any], type[Any]]:
    """The VMManager and Provider: ours, made subclasses of the installed `desktop_env`'s abstract ones (made
    here, as desktop_env is imported only once `install()` runs)."""
    base = importlib.import_module("desktop_env.providers.base")
    return (type("SandboxDesktopVMManager", (SandboxDesktopVMManager, base.VMManager), {}),
            type("SandboxDesktopProvider", (SandboxDesktopProvider, base.Provider), {}))



def _delete(client: Client, desktop_id: str) -> None:
    with contextlib.suppress(NotFoundError):  # gone already (its TTL, a person): what was wanted
        client.desktops.delete(desktop_id)


def _wait_ready(url: str) -> None:
    """Until the guest answers a screenshot, as upstream's providers wait for their VM."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        try:
            if httpx.get(f"{url}/screenshot", timeout=10).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the desktop's guest API at {url} did not answer within {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.5)


def install(url: str | None = None, *, token: str | None = None, revert: Revert | str = Revert.RECREATE,
            **create_options: Any) -> None:
    """Register `sandbox-desktop` as a provider of the installed `desktop_env` (idempotent). `url` and `token`
    name the server (default: the client's default URL and token; a `region` given to `DesktopEnv` that is
    a URL wins); `revert` is what happens between tasks; `create_options` go to every desktop created
    (`network=`, `limits=`, `home_template=`...). Raises RuntimeError for a `desktop_env` version not in
    `SUPPORTED`, or one whose factory or check is not as those versions have them."""
    version = importlib.metadata.version("desktop-env")
    if version not in SUPPORTED:
        raise RuntimeError(f"desktop_env {version} is not one this provider was written for ({', '.join(SUPPORTED)}):"
                           " its provider factory and name check may differ; see docs/osworld.md")
    Settings.url, Settings.token, Settings.revert = url, token, Revert(revert)
    Settings.create_options = dict(create_options)
    providers = importlib.import_module("desktop_env.providers")
    env_module = importlib.import_module("desktop_env.desktop_env")
    factory = providers.create_vm_manager_and_provider
    if getattr(factory, "_sandbox_desktop", False):
        return
    if env_module.create_vm_manager_and_provider is not factory:
        raise RuntimeError("desktop_env.desktop_env does not use desktop_env.providers' factory: not patched")
    init = env_module.DesktopEnv.__init__
    init.__code__ = _with_clean_start(init.__code__)
    patched = _factory(factory)
    setattr(providers, "create_vm_manager_and_provider", patched)  # noqa: B010 - a module's name, replaced
    setattr(env_module, "create_vm_manager_and_provider", patched)  # noqa: B010


def _factory(original: Callable[..., Any]) -> Callable[..., Any]:
    def create_vm_manager_and_provider(provider_name: str, region: str | None, use_proxy: bool = False) -> Any:
        if provider_name.lower().strip() == PROVIDER_NAME:
            manager, provider = provider_classes()
            return manager(region), provider(region)
        return original(provider_name, region, use_proxy=use_proxy)

    create_vm_manager_and_provider._sandbox_desktop = True  # type: ignore[attr-defined]
    return create_vm_manager_and_provider


def _with_clean_start(code: types.CodeType) -> types.CodeType:
    """`DesktopEnv.__init__`'s code with our name in the set of providers that start clean: the set literal is one
    constant of its code (a frozenset), which must be there exactly once, as in the supported versions."""
    found = [i for i, const in enumerate(code.co_consts) if const == CLEAN_START]
    if len(found) != 1:
        raise RuntimeError("DesktopEnv.__init__ has no single set of clean-start providers to add ours to")
    consts = list(code.co_consts)
    consts[found[0]] = CLEAN_START | {PROVIDER_NAME}
    return code.replace(co_consts=tuple(consts))
