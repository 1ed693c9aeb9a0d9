import pytest

from lakehouse_engine.state.positions import BinlogPosition, after_transaction, bytes_behind, sequence


def test_positions_compare_by_file_number_not_by_string():
    assert BinlogPosition("mysql-bin.000009", 900) < BinlogPosition("mysql-bin.000010", 4)
    assert BinlogPosition("mysql-bin.999999", 4) < BinlogPosition("mysql-bin.1000000", 4)


def test_positions_in_one_file_compare_by_offset():
    assert BinlogPosition("b.000001", 120) < BinlogPosition("b.000001", 121)
    assert max(BinlogPosition("b.000001", 5), BinlogPosition("b.000001", 7)).offset == 7


@pytest.mark.parametrize(("a", "b"), [
    (BinlogPosition("b.000001", 7), BinlogPosition("b.000001", 9)),  # one file
    (BinlogPosition("b.000009", 900), BinlogPosition("b.000010", 4)),  # across files
    (BinlogPosition("b.999999", 4), BinlogPosition("b.1000000", 4)),  # the name's padding grows
])
def test_every_comparison_agrees_with_the_file_number_and_offset_order(a, b):
    assert (a < b, a <= b, a > b, a >= b, a == b) == (True, True, False, False, False)
    assert (b < a, b <= a, b > a, b >= a) == (False, False, True, True)
    same = BinlogPosition(a.file, a.offset)
    assert (a < same, a <= same, a > same, a >= same, a == same) == (False, True, False, True, True)


def test_a_position_does_not_compare_with_a_tuple():
    with pytest.raises(TypeError):
        assert BinlogPosition("b.000001", 1) < ("b.000001", 2)


def test_a_binlog_change_after_a_watermark_sorts_after_the_snapshot_rows():
    watermark = BinlogPosition("b.000003", 1000)
    snapshot_seq = sequence(watermark, 0)
    assert sequence(BinlogPosition("b.000003", 1001), 1) > snapshot_seq
    assert sequence(BinlogPosition("b.000004", 4), 1) > snapshot_seq
    assert sequence(BinlogPosition("b.000003", 999), 9) < snapshot_seq


def test_rows_of_one_event_keep_their_order():
    event = BinlogPosition("b.000001", 500)
    assert sequence(event, 1) < sequence(event, 2)


def test_json_round_trip():
    position = BinlogPosition("mysql-bin.000012", 4242)
    assert BinlogPosition.from_json(position.to_json()) == position


def test_out_of_range_row_index_is_refused():
    with pytest.raises(ValueError):
        sequence(BinlogPosition("b.000001", 4), -1)


def test_bytes_behind_within_one_file_and_across_files():
    sizes = {"b.000001": 1000, "b.000002": 500, "b.000003": 300}
    assert bytes_behind(BinlogPosition("b.000003", 100), BinlogPosition("b.000003", 300), sizes) == 200
    assert bytes_behind(BinlogPosition("b.000001", 900), BinlogPosition("b.000003", 120), sizes) == 100 + 500 + 120
    assert bytes_behind(BinlogPosition("b.000003", 300), BinlogPosition("b.000003", 300), {}) == 0
    assert bytes_behind(BinlogPosition("b.000004", 4), BinlogPosition("b.000003", 300), {}) == 0
    # A purged file counts as empty.
    assert bytes_behind(BinlogPosition("b.000001", 900), BinlogPosition("b.000003", 120), {"b.000003": 300}) == 120


def test_a_transaction_replaces_only_its_own_domains_entry_of_the_gtid_position():
    assert after_transaction("7-1-1,0-1-4", "0-1-5") == "7-1-1,0-1-5"
    assert after_transaction("7-1-1,0-1-4", "7-2-9") == "7-2-9,0-1-4"  # another server id, same domain
    assert after_transaction("0-1-4", "3-1-1") == "0-1-4,3-1-1"  # a domain's first transaction
    assert after_transaction("", "0-1-1") == "0-1-1"  # the first transaction ever logged


def test_an_unknown_gtid_position_stays_unknown_and_a_transaction_without_gtid_changes_nothing():
    assert after_transaction(None, "0-1-5") is None
    assert after_transaction("0-1-4", None) == "0-1-4"
