import pytest

from kcore.errors import KafkaError
from kcore.log import InconsistentBrokerIdError, InconsistentClusterIdError, check_meta_properties


def test_first_start_creates_the_dir_and_file(tmp_path):
    log_dir = tmp_path / "data" / "kafka-logs"
    check_meta_properties(log_dir, 3, "abc-123")
    assert (
        log_dir / "meta.properties"
    ).read_text() == "version=0\nbroker.id=3\ncluster.id=abc-123\n"
    check_meta_properties(log_dir, 3, "abc-123")  # a restart with the same identity


def test_other_broker_id_is_refused(tmp_path):
    check_meta_properties(tmp_path, 1, "c")
    with pytest.raises(InconsistentBrokerIdError) as caught:
        check_meta_properties(tmp_path, 2, "c")
    message = str(caught.value)
    assert "2" in message and "broker.id 1" in message and str(tmp_path) in message


def test_other_cluster_id_is_refused(tmp_path):
    check_meta_properties(tmp_path, 1, "first-cluster")
    with pytest.raises(InconsistentClusterIdError) as caught:
        check_meta_properties(tmp_path, 1, "second-cluster")
    message = str(caught.value)
    assert "first-cluster" in message and "second-cluster" in message
    assert str(tmp_path) in message
    assert isinstance(caught.value, KafkaError)


def test_kafka_written_file_with_comments_is_accepted(tmp_path):
    (tmp_path / "meta.properties").write_text(
        "#\n#Sun Nov 22 12:00:00 UTC 2026\ncluster.id=XyZ\nversion=0\nbroker.id=7\n"
    )
    check_meta_properties(tmp_path, 7, "XyZ")
