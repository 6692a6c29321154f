"""The web console's page (`GET /` on the broker's http.listener), built by pure functions:
what is escaped, what is highlighted, and what it says when ZooKeeper does not answer."""

from kcore.metrics._console import (
    BrokerRow,
    ConsoleState,
    GroupOffsetRow,
    GroupRow,
    PartitionRow,
    StateChange,
    render_console,
)


def _state(**changes) -> ConsoleState:
    values = dict(
        broker_id=1,
        cluster_id="abc",
        controller_id=1,
        controller_epoch=3,
        zookeeper_error=None,
        brokers=(
            BrokerRow(1, True, "PLAINTEXT://127.0.0.1:9092", True, True),
            BrokerRow(2, False, "", False, False),
        ),
        partitions=(
            PartitionRow("fine", 0, 1, (1,), (1,), (1,), high_watermark=7, log_end_offset=9),
            PartitionRow("lagging", 0, 1, (1, 2), (1,), (1,)),
            PartitionRow("gone", 0, None, (2,), (2,), ()),
        ),
        groups=(GroupRow("g", "Stable", 2, (GroupOffsetRow("fine", 0, 4, 7),)),),
        state_changes=(StateChange("12:00:00", "INFO", "[Controller id=1 epoch=3] Changed"),),
        generated_at="now",
    )
    values.update(changes)
    return ConsoleState(**values)


def test_user_input_is_escaped_everywhere():
    evil = '<script>alert("x")</script>'
    page = render_console(
        _state(
            partitions=(PartitionRow(evil, 0, 1, (1,), (1,), (1,)),),
            groups=(GroupRow(evil, "Empty", 0, (GroupOffsetRow(evil, 0, 1, None),)),),
            state_changes=(StateChange("t", "INFO", evil),),
            cluster_id=evil,
        )
    )
    assert "<script>" not in page
    assert page.count("&lt;script&gt;") >= 5


def test_offline_and_under_replicated_partitions_are_marked_and_offline_says_why():
    page = render_console(_state())
    assert '<tr class="ok" data-partition="fine-0">' in page
    assert '<tr class="under-replicated" data-partition="lagging-0">' in page
    assert '<tr class="offline" data-partition="gone-0">' in page
    assert "OFFLINE (no leader: ISR 2; live replicas none)" in page
    assert "3 partitions: 1 offline, 1 under-replicated; 1 of 2 brokers up." in page
    assert '<td class="num">7</td><td class="num">9</td>' in page  # HW, log end


def test_groups_show_lag_and_the_page_refreshes_itself():
    page = render_console(_state())
    assert '<tr data-group="g"><td>g</td><td>Stable</td><td class="num">2</td>' in page
    assert '<td>fine-0</td><td class="num">4</td><td class="num">3</td>' in page
    assert '<meta http-equiv="refresh" content="5">' in page
    assert "[Controller id=1 epoch=3] Changed" in page
    assert "http://" not in page.replace('lang="en"', "")  # nothing fetched from elsewhere


def test_the_page_renders_without_zookeeper_and_says_so():
    page = render_console(
        _state(controller_id=None, controller_epoch=None, zookeeper_error="no answer within 2 s")
    )
    assert "ZooKeeper unreachable: no answer within 2 s" in page
    assert 'id="broker-2"' in page
