"""The web console in a real headless browser (Debian's chromium): an embedded cluster over
TCP, a topic produced to, a broker killed; the console shows every broker and partition,
and marks what the kill left under-replicated. The screenshot is kept (the test's tmp dir,
and bench-results/console.png)."""

import logging
import pathlib
import shutil
import subprocess

import trio

from kcore.testing import open_cluster

CHROMIUM = shutil.which("chromium")
SCREENSHOT_COPY = pathlib.Path(__file__).parents[3] / "bench-results" / "console.png"


def _chromium(*args: str) -> str:
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
         *args],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return result.stdout


async def test_the_console_shows_the_cluster_in_a_browser(
    tmp_path, caplog, require_external, wait_until
):
    require_external("chromium", CHROMIUM is not None, "apt-get install -y chromium")
    caplog.set_level(logging.INFO, logger="kcore.state.change")
    settings = {"http.listener": "http://127.0.0.1:0", "zookeeper.session.timeout.ms": 1000}
    async with open_cluster(
        brokers=3, network="tcp", data_dir=tmp_path / "data", broker_config=settings
    ) as cluster:
        controller = await cluster.wait_for_controller()
        async with cluster.admin() as admin:
            await admin.create_topic("orders", partitions=3, replication_factor=3)
        async with cluster.producer(acks="all") as producer:
            for n in range(5):
                await producer.send_and_wait("orders", b"v%d" % n, partition=0)
        victim = next(b for b in sorted(cluster.brokers) if b != controller)
        host, port = cluster.http_addresses()[controller]
        await cluster.kill_broker(victim)

        def shrunk() -> bool:  # the controller's cache: every ISR without the victim
            partitions = cluster.brokers[controller].metadata_cache.partitions.values()
            return len(partitions) == 3 and all(victim not in p.isr for p in partitions)

        await wait_until(shrunk, timeout=30)
        url = f"http://{host}:{port}/"
        dom = await trio.to_thread.run_sync(_chromium, "--dump-dom", url)
        png = tmp_path / "console.png"
        await trio.to_thread.run_sync(_chromium, f"--screenshot={png}", url)

    for broker_id in (1, 2, 3):
        assert f'id="broker-{broker_id}"' in dom
    assert f'<tr class="down" id="broker-{victim}">' in dom
    for partition in range(3):
        assert f'<tr class="under-replicated" data-partition="orders-{partition}">' in dom
    assert f"Controller: broker {controller}, epoch" in dom
    assert "Changed partition orders-0" in dom  # the controller's state changes
    assert '<td class="num">5</td><td class="num">5</td>' in dom  # partition 0: HW, log end
    assert png.stat().st_size > 0
    SCREENSHOT_COPY.parent.mkdir(exist_ok=True)
    shutil.copyfile(png, SCREENSHOT_COPY)
