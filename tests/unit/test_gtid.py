"""GtidSet against a set-of-transactions model (hypothesis) and MySQL's documented text forms."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_mysql_cdc.core.gtid import MAX_TRANSACTION_NUMBER, Gtid, GtidSet, as_gtid_set, parse_owned_gtids
from airflow_provider_mysql_cdc.errors import InvalidGtidSetError, MySqlCdcError, TerminalCdcError

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4e11fa47-71ca-11e1-9e33-c80aa9429562"
U3 = "00000000-0000-0000-0000-000000000001"
UUIDS = (U1, U2, U3)
TAGS = ("", "etl", "backfill_2")

Model = frozenset[tuple[str, str, int]]


@st.composite
def gtid_sets(draw: st.DrawFn) -> tuple[GtidSet, Model]:
    """A random set as text pieces (unsorted, overlapping) plus the model it denotes."""
    pieces = draw(
        st.lists(
            st.tuples(st.sampled_from(UUIDS), st.sampled_from(TAGS), st.integers(1, 40), st.integers(0, 6)),
            max_size=8,
        )
    )
    model = frozenset((u, t, n) for u, t, first, span in pieces for n in range(first, first + span + 1))
    texts = []
    for uuid, tag, first, span in pieces:
        interval = f"{first}" if span == 0 else f"{first}-{first + span}"
        head = uuid.upper() if draw(st.booleans()) else uuid
        texts.append(f"{head}:{tag.upper()}:{interval}" if tag else f"{head}:{interval}")
    separator = draw(st.sampled_from([",", ",\n", " , "]))
    return GtidSet.parse(separator.join(texts)), model


def to_model(gtids: GtidSet) -> Model:
    return frozenset((g.source_uuid, g.tag, g.number) for g in gtids)


@given(gtid_sets())
def test_parse_denotes_the_model_and_round_trips(pair: tuple[GtidSet, Model]) -> None:
    gtids, model = pair
    assert to_model(gtids) == model
    assert len(gtids) == len(model)
    assert GtidSet.parse(str(gtids)) == gtids
    assert GtidSet.parse(gtids.to_mysql_text()) == gtids
    assert hash(GtidSet.parse(str(gtids))) == hash(gtids)
    assert bool(gtids) == bool(model)


@given(gtid_sets(), gtid_sets())
def test_algebra_matches_the_model(left: tuple[GtidSet, Model], right: tuple[GtidSet, Model]) -> None:
    a, model_a = left
    b, model_b = right
    assert to_model(a | b) == model_a | model_b
    assert to_model(a & b) == model_a & model_b
    assert to_model(a - b) == model_a - model_b
    assert (a <= b) == (model_a <= model_b)
    assert a.issubset(b) == (model_a <= model_b)
    assert (a >= b) == (model_a >= model_b)
    assert (a < b) == (model_a < model_b)
    assert (a == b) == (model_a == model_b)


@given(gtid_sets(), st.sampled_from(UUIDS), st.sampled_from(TAGS), st.integers(1, 50))
def test_membership_matches_the_model(pair: tuple[GtidSet, Model], uuid: str, tag: str, number: int) -> None:
    gtids, model = pair
    text = f"{uuid}:{tag}:{number}" if tag else f"{uuid}:{number}"
    assert (text in gtids) == ((uuid, tag, number) in model)
    assert (Gtid.parse(text) in gtids) == ((uuid, tag, number) in model)


def test_canonical_text_is_mysqls() -> None:
    text = f"{U2}:7,\n{U1.upper()}:11-18:1-5:6:ETL:3:1-2,{U1}:aa:9"
    gtids = GtidSet.parse(text)
    assert str(gtids) == f"{U1}:1-6:11-18:aa:9:etl:1-3,{U2}:7"
    assert gtids.to_mysql_text() == f"{U1}:1-6:11-18:aa:9:etl:1-3,\n{U2}:7"
    assert len(gtids) == 6 + 8 + 1 + 3 + 1


def test_containment_that_python_mysql_replication_gets_wrong() -> None:
    assert GtidSet.parse(f"{U1}:1-5") <= GtidSet.parse(f"{U1}:1-10")
    assert not GtidSet.parse(f"{U1}:1-11") <= GtidSet.parse(f"{U1}:1-10")
    assert GtidSet.parse(f"{U1}:1-5,{U1}:3-8") == GtidSet.parse(f"{U1}:1-8")


@pytest.mark.parametrize("text", ["", "   ", "\n", None])
def test_empty_inputs_are_the_empty_set(text: str | None) -> None:
    assert GtidSet.parse(text) == GtidSet()
    assert str(GtidSet.parse(text)) == ""
    assert len(GtidSet.parse(text)) == 0
    assert as_gtid_set(text) == GtidSet()


@pytest.mark.parametrize(
    "text",
    [
        "not-a-uuid:1",
        f"{U1}",
        f"{U1}:",
        f"{U1}:0",
        f"{U1}:5-3",
        f"{U1}:1-x",
        f"{U1}:etl",
        f"{U1}:1:etl",
        f"{U1}:etl:other:1",
        f"{U1}:1,,{U2}:1",
        f"{U1}:1,",
        f"{U1}:{MAX_TRANSACTION_NUMBER + 1}",
        f"{U1}:9bad_tag:1",
        f"{U1}:{'t' * 33}:1",
        f"{U1[:-1]}:1",
        f"{U1}:1 2",
    ],
)
def test_bad_text_raises_a_package_error_quoting_it(text: str) -> None:
    with pytest.raises(InvalidGtidSetError) as raised:
        GtidSet.parse(text)
    assert repr(text) in str(raised.value)
    assert isinstance(raised.value, TerminalCdcError)
    assert isinstance(raised.value, MySqlCdcError)


def test_single_gtid_parse_and_text() -> None:
    assert str(Gtid.parse(f"{U1.upper()}:ETL:5")) == f"{U1}:etl:5"
    assert str(Gtid.parse(f"{U1}:5")) == f"{U1}:5"
    with pytest.raises(InvalidGtidSetError):
        Gtid.parse(f"{U1}:1-5")


def test_gtid_set_is_immutable_and_hashable() -> None:
    gtids = GtidSet.parse(f"{U1}:1-3")
    with pytest.raises(AttributeError):
        gtids.anything = 1
    assert {gtids: "x"}[GtidSet.parse(f"{U1}:3,{U1}:1-2")] == "x"
    assert GtidSet.of([f"{U1}:1", f"{U1}:2", f"{U1}:etl:4"]) == GtidSet.parse(f"{U1}:1-2:etl:4")
    assert GtidSet.from_intervals({(U1, ""): [(1, 2)]}) == GtidSet.parse(f"{U1}:1-2")


UUID_A = "207d435d-ee50-11f1-8eed-02fc00000001"
UUID_B = "16c55cd0-ee50-11f1-9c3c-02fc00000001"


@pytest.mark.parametrize(
    ("owned", "gtids"),
    [
        ("", ""),
        (f"{UUID_A}:3#13", f"{UUID_A}:3"),
        (f"{UUID_A}:5#14:4#13:3#12", f"{UUID_A}:3-5"),
        # MySQL 9.7 runs a thread id straight into the next source's UUID (here 12, then UUID_A again, tagged)
        (f"{UUID_A}:5#14:4#13:3#12{UUID_A}:tg:1#15", f"{UUID_A}:3-5:tg:1"),
        (f"{UUID_A}:7#1234567{UUID_B}:2#8", f"{UUID_A}:7,{UUID_B}:2"),
        (f"{UUID_A}:3#13,{UUID_B}:7#2", f"{UUID_A}:3,{UUID_B}:7"),
    ],
)
def test_gtid_owned_text_gives_its_gtids_without_the_owner_threads(owned: str, gtids: str) -> None:
    assert parse_owned_gtids(owned) == GtidSet.parse(gtids)


@pytest.mark.parametrize("owned", [f"{UUID_A}:3#x", f"{UUID_A}:#3", f"{UUID_A}:3#1#2", "not-a-uuid:3#1"])
def test_gtid_owned_text_in_another_format_is_refused(owned: str) -> None:
    with pytest.raises(InvalidGtidSetError):
        parse_owned_gtids(owned)
