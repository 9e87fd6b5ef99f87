"""The behaviour-case runner: comparison rules, malformed input, and the spec on the public sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnspec.cli import main
from txnspec.conformance.cases.runner import CaseInputError, compare, run_cases, target_named

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

PUBLIC = Path(__file__).resolve().parents[2] / "conformance" / "data" / "public.jsonl"
FOUND = PUBLIC.with_name("found.jsonl")  # answers real Kafka gave the audit, pinned as cases
GROUP_PUBLIC = PUBLIC.with_name("group_public.jsonl")  # the public sample of the group component
ADMIN = PUBLIC.with_name("admin.jsonl")  # ours: issue 32, the admin's abort of a transaction at its partition
GROUP = PUBLIC.with_name("group.jsonl")  # ours: issue 15's rules 1, 2 and 6, each from a Kafka test or source line


def public_cases(component: str) -> list[str]:
    return [line for line in PUBLIC.read_text().splitlines() if json.loads(line)["component"] == component]


@pytest.mark.parametrize("component", ["coordinator", "partition"])
def test_the_spec_passes_every_public_case_of(component: str, tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(public_cases(component)) + "\n")
    report = run_cases(path, target_named("spec"))
    failures = [(r.case_id, r.error, [str(m) for m in r.mismatches]) for r in report.results if not r.passed]
    assert failures == []
    assert report.passed == len(public_cases(component)) > 0


@pytest.mark.parametrize("target", ["spec", "impl"])
def test_both_targets_pass_the_cases_real_kafka_forced(target: str) -> None:
    report = run_cases(FOUND, target_named(target))
    assert [(r.case_id, r.error, [str(m) for m in r.mismatches]) for r in report.results if not r.passed] == []
    assert report.passed == len(FOUND.read_text().splitlines()) >= 5


@pytest.mark.parametrize("target", ["spec", "impl"])
def test_both_targets_pass_the_admin_abort_cases(target: str) -> None:
    """Admin.abortTransaction's marker (transaction version 0, the coordinator epoch the admin names): it closes
    the open transaction; an older coordinator epoch is fenced, an older producer epoch refused; at the
    producer's own epoch it is taken where a TV2 marker would not be."""
    report = run_cases(ADMIN, target_named(target))
    assert [(r.case_id, r.error, [str(m) for m in r.mismatches]) for r in report.results if not r.passed] == []
    assert report.passed == len(ADMIN.read_text().splitlines()) == 4


@pytest.mark.parametrize("target", ["spec", "impl"])
@pytest.mark.parametrize("cases", [GROUP_PUBLIC, GROUP], ids=["public", "ours"])
def test_both_targets_pass_every_group_case(target: str, cases: Path) -> None:
    report = run_cases(cases, target_named(target))
    assert [(r.case_id, r.error, [str(m) for m in r.mismatches]) for r in report.results if not r.passed] == []
    assert report.passed == len(cases.read_text().splitlines()) >= 2


@pytest.mark.parametrize("when", [
    {"request": "TxnOffsetCommit", "group_id": "g", "producer_id": 5, "producer_epoch": 0, "offsets": {"p-0": -1}},
    {"request": "TxnOffsetCommit", "group_id": "", "producer_id": 5, "producer_epoch": 0, "offsets": {}},
    {"request": "TxnOffsetCommit", "group_id": "g", "producer_id": 5, "producer_epoch": 0, "offsets": {},
     "generation_id": "one"},
    {"event": "Rebalance", "group_id": "g", "members": ["m1"]},
    {"read": "OffsetFetch", "group_id": "g", "partitions": "p-0"},
    {"request": "JoinGroup", "group_id": "g"},
])
@pytest.mark.parametrize("target", ["spec", "impl"])
def test_a_malformed_group_step_is_a_case_error_naming_it(target: str, when: dict[str, object],
                                                           tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "bad", "component": "group", "given": {"offsets": {}},
                                "steps": [{"when": when, "then": {}}]}) + "\n")
    report = run_cases(path, target_named(target))
    assert report.results[0].malformed, report.results[0]


def test_comparison_rules() -> None:
    assert compare({"a": 1}, {"a": 1, "b": 2}) == []  # partial objects
    assert compare({"partitions": ["b", "a"]}, {"partitions": ["a", "b"]}) == []  # names as sets
    assert compare({"records": [2, 1]}, {"records": [1, 2]}) != []  # other lists in order
    assert compare({"records": [1]}, {"records": [1, 2]}) != []  # lists whole
    assert compare({"log_append": None}, {"log_append": {}}) != []  # null is exact
    assert compare({"log_append": {}}, {"log_append": {"state": "Ongoing"}}) == []
    assert compare({"x": [{"a": 1}]}, {"x": [{"a": 1, "b": 0}]}) == []  # objects in lists partially
    assert compare({"fatal": False}, {"fatal": 0}) != []  # a boolean is not a number
    assert compare({"error": "NONE"}, {}) == [("error", "NONE", "<not reported>")]


def test_a_malformed_case_is_an_error_and_the_others_still_run(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    good = public_cases("coordinator")[0]
    bad_json = '{"id": "broken", '
    unknown_request = json.dumps({"id": "unknown-request", "component": "coordinator",
                                  "given": {"now_ms": 0, "transactional_id": "t", "metadata": None},
                                  "steps": [{"when": {"request": "Frobnicate"}, "then": {}}]})
    negative_epoch = json.dumps({"id": "bad-type", "component": "coordinator",
                                 "given": {"now_ms": "soon", "transactional_id": "t", "metadata": None},
                                 "steps": []})
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([good, bad_json, unknown_request, negative_epoch]) + "\n")
    status = main(["cases", str(path), "--target", "spec"])
    out = capsys.readouterr().out
    assert status == 2  # bad input, and no case that could run failed
    assert out.splitlines()[-1] == "1 passed, 3 failed (3 malformed)"
    assert "line 2: not valid JSON" in out
    assert "unknown coordinator request 'Frobnicate'" in out
    assert "field 'now_ms' must be an integer" in out


def test_a_missing_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cases", "/no/such/file.jsonl"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize(("component", "given", "when", "message"), [
    ("coordinator", {"now_ms": 0, "transactional_id": "t", "metadata": None}, {"event": "Reboot"},
     "unknown coordinator event 'Reboot'"),
    ("coordinator", {"now_ms": 0, "transactional_id": "t", "metadata": None},
     {"request": "EndTxn", "transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "result": "MAYBE"},
     "field 'result' must be one of COMMIT, ABORT"),
    ("partition", {}, {"read": "fetch", "offset": -1, "isolation": "READ_COMMITTED"}, "field 'offset' must be >= 0"),
    ("client", {"transactional_id": "t", "state": "READY", "producer_id": 1, "producer_epoch": 0},
     {"response": "EndTxn", "error": "NO_SUCH_ERROR"}, "NO_SUCH_ERROR"),
])
def test_both_targets_read_a_case_with_the_one_parser(component: str, given: dict[str, object],
                                                      when: dict[str, object], message: str) -> None:
    """A malformed step is refused by both targets with the same error: the parsing is shared."""
    errors = []
    for name in ("spec", "impl"):
        session = target_named(name)(component, given)
        with pytest.raises(CaseInputError) as caught:
            session.apply(when)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and message in errors[0]


# every case file of conformance/data and the cases it holds (a case added or lost must be pinned here)
CASE_FILES = {"public.jsonl": 63, "found.jsonl": 10, "group_public.jsonl": 2, "group.jsonl": 18, "admin.jsonl": 4,
              "kafka_tests_coordinator.jsonl": 153, "kafka_tests_partition.jsonl": 68,
              "kafka_tests_group.jsonl": 19, "kafka_tests_client.jsonl": 71, "kip848.jsonl": 17,
              "two_phase.jsonl": 25}  # KIP-939: Kafka's 2PC test methods and 4.4's source lines


def test_the_case_files_are_the_pinned_ones() -> None:
    assert {p.name for p in PUBLIC.parent.glob("*.jsonl")} == set(CASE_FILES)
    ids = [json.loads(line)["id"] for name in CASE_FILES for line in (PUBLIC.parent / name).read_text().splitlines()]
    assert len(ids) == len(set(ids)) == sum(CASE_FILES.values())


@pytest.mark.parametrize("target", ["spec", "impl"])
@pytest.mark.parametrize("name", sorted(CASE_FILES))
def test_both_targets_pass_every_case_of(name: str, target: str) -> None:
    """Every case file on both targets; the kafka_tests_* files hold Kafka's own test methods, one case each."""
    path = PUBLIC.parent / name
    report = run_cases(path, target_named(target))
    assert [(r.case_id, r.error, [str(m) for m in r.mismatches]) for r in report.results if not r.passed] == []
    assert report.passed == CASE_FILES[name]
    if name.startswith("kafka_tests_"):
        assert all(r.case_id.startswith("kafka/") for r in report.results)
