from kcore.controller.broker_change import classify_broker_change


def test_new_dead_and_bounced_brokers():
    change = classify_broker_change({1: 10, 2: 20, 3: 30}, {1: 10, 2: 45, 4: 50})
    assert (change.new, change.dead, change.bounced) == ([4], [3], [2])
    assert change.changed


def test_a_re_registration_is_a_bounce_not_no_change():
    change = classify_broker_change({1: 10}, {1: 11})
    assert change.bounced == [1] and change.changed


def test_nothing_changed():
    change = classify_broker_change({1: 10, 2: 20}, {2: 20, 1: 10})
    assert not change.changed
