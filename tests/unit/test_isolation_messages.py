"""What a refusal says is missing for the jail (issue: CI round 2, item 1): a root grader runs
bubblewrap without a user namespace, which needs CAP_SYS_ADMIN and CAP_NET_ADMIN; a container
(Docker's and podman's defaults, Gradescope) grants neither, whatever the user-namespace
sysctl says. An unprivileged grader needs unprivileged user namespaces. Measured in a podman
container by tests/integration/test_gradescope_container.py; here the host is simulated."""

from __future__ import annotations

import pytest

from autograder.core.errors import IsolationError
from autograder.sandbox import isolation, jail

DOCKER_CAPS = 0xA80425FB  # Docker's and podman's built-in default set
PODMAN_DEBIAN_CAPS = 0x800405FB  # Debian podman's containers.conf
ALL_CAPS = 0x1FFFFFFFFFF


@pytest.fixture
def host(monkeypatch):
    """Set the grader's uid, capabilities and whether bwrap is installed."""

    def make(*, root: bool, caps: int = ALL_CAPS, bwrap: bool = True) -> None:
        monkeypatch.setattr(isolation.os, "geteuid", lambda: 0 if root else 1000)
        monkeypatch.setattr(jail, "effective_capabilities", lambda: caps, raising=False)
        monkeypatch.setattr(jail, "bwrap", lambda: "/usr/bin/bwrap" if bwrap else None)
        monkeypatch.setattr(isolation, "_jail_works", lambda: False)
        isolation._choose.cache_clear()

    yield make
    isolation._choose.cache_clear()


def refusal(level: str = "jail") -> str:
    with pytest.raises(IsolationError) as raised:
        isolation._choose(level)
    return str(raised.value)


@pytest.mark.parametrize("caps", [DOCKER_CAPS, PODMAN_DEBIAN_CAPS, 0])
def test_root_in_a_container_is_told_about_capabilities_not_the_sysctl(host, caps):
    host(root=True, caps=caps)
    message = refusal()
    assert "CAP_SYS_ADMIN" in message and "CAP_NET_ADMIN" in message
    assert "--cap-add SYS_ADMIN --cap-add NET_ADMIN" in message
    assert "sysctl" not in message and "user namespaces" not in message
    assert "uid" in message, "what the container offers instead"


def test_root_lacking_only_net_admin_is_told_just_that(host):
    host(root=True, caps=DOCKER_CAPS | 1 << 21)
    message = refusal()
    assert "lacks CAP_NET_ADMIN" in message and "lacks CAP_SYS_ADMIN" not in message


def test_root_with_every_capability_is_not_blamed_on_capabilities(host):
    host(root=True)
    assert "lacks" not in refusal()


def test_an_unprivileged_grader_is_told_about_user_namespaces(host):
    host(root=False)
    message = refusal()
    assert "unprivileged user namespaces" in message and "CAP_SYS_ADMIN" not in message


@pytest.mark.parametrize("root", [True, False])
def test_without_bubblewrap_the_install_comes_first(host, root):
    host(root=root, bwrap=False)
    assert refusal().split("here: ", 1)[1].startswith("bubblewrap is not installed")
