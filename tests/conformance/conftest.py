"""One contract, several targets: the in-process client (`local`), the zkstub server over
TCP in zkstub's msgpack protocol (`tcp`), a real ZooKeeper 3.8 through the kazoo adapter
(`real`), kazoo against the zkstub server over ZooKeeper's own protocol (`kazoo-zkstub`), and
zkstub's own client speaking ZooKeeper's protocol (`jute://`) to the zkstub server (`jute`)
and to the real ZooKeeper (`jute-real`). Each client runs against both servers, so a
difference between a client's two targets is a difference between the servers.

The real server is started once per test session (a JVM takes seconds) in a thread of its
own with its own Trio loop, since each pytest-trio test runs in a fresh `trio.run`; every
test works under its own unique path so tests cannot see each other's nodes.
"""

import contextlib
import importlib
import importlib.util
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import trio

import transport
import zkstub

TARGETS = ["local", "tcp", "real", "kazoo-zkstub", "jute", "jute-real"]
ON_REAL_ZOOKEEPER = ("real", "jute-real")


def _testing_module():
    if importlib.util.find_spec("zkstub.testing") is None:
        return None
    return importlib.import_module("zkstub.testing")


@pytest.fixture(scope="session")
def real_zookeeper(require_external):
    testing = _testing_module()
    require_external(
        "zkstub.testing (real ZooKeeper runner)",
        testing is not None,
        "zkstub/testing.py is written by the kazoo-adapter helper",
    )
    classpath_found = testing.java_available() and testing.find_zookeeper_classpath() is not None
    require_external("ZooKeeper", classpath_found, "apt-get install zookeeper default-jre")
    with tempfile.TemporaryDirectory(prefix="zk-conformance-") as data_dir:
        runner = testing.RealZooKeeperThread(Path(data_dir))
        runner.start()
        try:
            yield runner
        finally:
            runner.stop()


ZKCLI = Path("/usr/share/zookeeper/bin/zkCli.sh")


@pytest.fixture
def zkcli(require_external) -> Path:
    """Debian's zkCli.sh, and the Java and ZooKeeper jars it runs on."""
    require_external("zkCli.sh", ZKCLI.exists(), "apt-get install zookeeper")
    require_external("java", shutil.which("java") is not None, "apt-get install default-jre")
    testing = _testing_module()
    has_jars = testing is not None and testing.find_zookeeper_classpath() is not None
    require_external("ZooKeeper's jars", has_jars, "apt-get install zookeeper")
    return ZKCLI


@pytest.fixture(params=TARGETS)
def target(request):
    if request.param in ON_REAL_ZOOKEEPER:
        return (request.param, request.getfixturevalue("real_zookeeper"))
    return (request.param, None)


@pytest.fixture
async def open_client(target):
    """`await open_client(chroot="")`: a new client of the target, closed after the test.

    Each client lives in a task of this fixture's nursery (pytest-trio runs fixtures and the
    test in different tasks, and a client's own nursery must belong to one task)."""
    kind, real_runner = target
    async with contextlib.AsyncExitStack() as stack:
        network = None if kind == "local" else transport.TcpNetwork()
        server = None
        if kind not in ON_REAL_ZOOKEEPER:
            address = ("127.0.0.1", 0) if kind == "tcp" else None
            server = await stack.enter_async_context(
                zkstub.open_server(network=network, address=address)
            )

        def context_for(chroot: str):
            if kind == "real":
                return zkstub.connect(
                    f"zookeeper://{real_runner.connect_string}{chroot}", session_timeout=10.0
                )
            if kind == "jute-real":
                return zkstub.connect(f"jute://{real_runner.connect_string}{chroot}",
                                      session_timeout=10.0, network=network)  # fmt: skip
            if kind == "local":
                return server.connect_local(session_timeout=10.0, chroot=chroot)
            host, port = server.address
            if kind == "kazoo-zkstub":
                return zkstub.connect(f"zookeeper://{host}:{port}{chroot}", session_timeout=10.0)
            if kind == "jute":
                return zkstub.connect(f"jute://{host}:{port}{chroot}", session_timeout=10.0,
                                      network=network)  # fmt: skip
            return zkstub.connect(f"{host}:{port}{chroot}", session_timeout=10.0, network=network)

        done = trio.Event()

        async def hold(chroot, *, task_status=trio.TASK_STATUS_IGNORED):
            async with context_for(chroot) as client:
                task_status.started(client)
                await done.wait()

        async with trio.open_nursery() as nursery:

            async def factory(chroot: str = ""):
                return await nursery.start(hold, chroot)

            factory.controls = _Controls(kind, server, real_runner)
            yield factory
            done.set()


class _Controls:
    """Expire a client's session, or cut its connection, on whichever target runs."""

    def __init__(self, kind, server, real_runner) -> None:
        self._kind = kind
        self._server = server
        self._real = real_runner

    async def expire(self, client) -> None:
        if self._kind in ON_REAL_ZOOKEEPER:
            await self._real.call(
                self._real.real.expire_session, client.session_id, client.session_password
            )
        else:
            await self._server.expire_session(client.session_id)

    async def drop_connection(self, client) -> None:
        """The client loses its connection; its session must survive (a real ZooKeeper is
        restarted on the same data dir and port, which clients ride through)."""
        if self._kind in ON_REAL_ZOOKEEPER:
            await self._real.call(self._real.real.restart)
        else:
            self._server.drop_connections(client.session_id)


@pytest.fixture
def controls(open_client):
    return open_client.controls


@pytest.fixture
async def base(open_client, request):
    """A fresh, unique parent path for the test, created empty."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)
    zk = await open_client()
    path = f"/conformance/{name}"
    with contextlib.suppress(zkstub.NodeExistsError):
        await zk.create("/conformance")
    with contextlib.suppress(zkstub.NoNodeError):
        await zk.delete(path, recursive=True)
    await zk.create(path)
    return path
