"""The explicit-state engine on toy models: pinned state counts, shortest counterexamples, caps, deadlocks,
symmetry reduction, liveness under weak fairness, coverage and the text/JSON reports."""

from __future__ import annotations

import dataclasses
import json

import pytest
import toys

from txnspec.checker import Model, Property, check

pytestmark = pytest.mark.quick  # the whole module is in the quick tier


def test_a_counter_has_limit_plus_one_states_and_every_property_holds() -> None:
    result = check(toys.counter(5))
    assert (result.states, result.transitions, result.depth) == (6, 5, 5)
    assert result.complete and result.ok and result.verdict_text == "holds"
    assert result.deadlock is None  # the end is final
    assert result.verdict("reaches_wish").counterexample is not None  # the witness: 5 steps
    assert len(result.verdict("reaches_wish").counterexample or ()) == 5


def test_two_phase_commit_with_three_rms_has_288_states_like_tlc() -> None:
    result = check(toys.two_phase_commit(3), symmetry=False)
    assert (result.states, result.transitions, result.depth) == (288, 1145, 10)
    assert result.complete and result.ok, result.render()


def test_the_shortest_counterexample_is_found_and_is_a_real_behaviour() -> None:
    model = toys.two_phase_commit(3, broken=True)
    result = check(model, symmetry=False)
    verdict = result.verdict("consistent")
    assert verdict.holds is False and verdict.counterexample is not None
    cex = verdict.counterexample
    assert len(cex) == 5
    assert cex.actions == ("RMPrepare(0)", "TMRcvPrepared(0)", "RMChooseToAbort(1)", "TMCommit", "RMRcvCommitMsg(0)")
    for (_, before), (action, after) in zip(cex.steps, cex.steps[1:], strict=False):
        assert (action, after) in list(model.next_steps(before))
    assert not model.property("consistent").condition(cex.steps[-1][1])


def test_each_invariant_gets_its_own_shortest_counterexample() -> None:
    result = check(toys.counter(10, bad_at=3), properties=["below_bad", "bounded"])
    assert len(result.verdict("below_bad").counterexample or ()) == 3
    assert result.verdict("bounded").holds is True  # the search went on for the other invariant
    assert result.complete and result.states == 11


def test_the_search_stops_once_every_invariant_is_violated() -> None:
    model = toys.counter(1000, bad_at=3)
    only_invariant = dataclasses.replace(model, properties=[model.property("below_bad")])
    result = check(only_invariant)
    assert result.verdict_text == "violated" and not result.complete
    assert result.stop_reason is not None and "every invariant" in result.stop_reason
    assert result.states == 4


def test_a_state_cap_gives_an_incomplete_verdict_never_holds() -> None:
    result = check(toys.counter(100), max_states=10)
    assert result.states == 10 and not result.complete
    assert result.verdict_text == "incomplete"
    assert result.verdict("bounded").holds is None
    assert result.verdict("reaches_wish").holds is None
    assert "INCOMPLETE" in result.summary() and "state cap" in result.summary()


def test_a_cap_equal_to_the_state_count_still_completes() -> None:
    assert check(toys.counter(9), max_states=10).complete


def test_a_depth_cap_gives_an_incomplete_verdict() -> None:
    result = check(toys.counter(100), max_depth=5)
    assert (result.states, result.depth, result.complete) == (6, 5, False)
    assert result.verdict_text == "incomplete"


def test_bad_caps_are_refused() -> None:
    with pytest.raises(ValueError, match="max_states"):
        check(toys.counter(3), max_states=0)


def test_a_sometimes_property_never_satisfied_fails_the_run() -> None:
    result = check(toys.counter(5, wish=99))
    verdict = result.verdict("reaches_wish")
    assert verdict.holds is False and verdict.never_satisfied and verdict.counterexample is None
    assert not result.ok and "never satisfied" in result.render()


def test_a_deadlock_is_reported_with_its_shortest_path() -> None:
    result = check(toys.dining())
    assert result.deadlock is not None and len(result.deadlock) == 2
    assert result.deadlock_count == 1 and not result.ok
    assert "deadlock" in result.render()
    assert check(toys.dining(), check_deadlock=False).ok


def test_unknown_property_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(KeyError, match="bounded"):
        check(toys.counter(3), properties=["nope"])


@pytest.mark.parametrize("model", [toys.two_phase_commit(3), toys.tokens(3), toys.two_phase_commit(3, broken=True)],
                         ids=lambda m: m.name)
def test_symmetry_reduction_agrees_on_every_verdict(model: Model[object]) -> None:
    full = check(model, symmetry=False)
    reduced = check(model, symmetry=True)
    assert reduced.states < full.states
    assert [(v.name, v.holds) for v in full.verdicts] == [(v.name, v.holds) for v in reduced.verdicts]
    for a, b in zip(full.verdicts, reduced.verdicts, strict=True):
        if a.counterexample is not None:  # shortest lengths do not depend on the reduction
            assert b.counterexample is not None and len(a.counterexample) == len(b.counterexample)


def test_symmetry_keeps_one_state_per_multiset() -> None:
    assert check(toys.tokens(3), symmetry=False).states == 27
    assert check(toys.tokens(3)).states == 10  # multisets of size 3 over {0, 1, 2}
    assert check(toys.two_phase_commit(3)).states == 80


def test_a_symmetric_counterexample_is_a_genuine_behaviour() -> None:
    model = toys.two_phase_commit(3, broken=True)
    cex = check(model).verdict("consistent").counterexample
    assert cex is not None
    for (_, before), (action, after) in zip(cex.steps, cex.steps[1:], strict=False):
        assert (action, after) in list(model.next_steps(before))


def test_recording_the_graph_changes_no_count_or_verdict() -> None:
    model = toys.two_phase_commit(3)
    plain = check(model, symmetry=False, properties=["consistent", "some_commit"])
    graphed = check(model, symmetry=False, properties=["consistent", "some_commit"], build_graph=True)
    assert (plain.states, plain.transitions) == (graphed.states, graphed.transitions) == (288, 1145)
    assert graphed.graph is not None and graphed.graph.edge_count == 1145
    broken = toys.two_phase_commit(3, broken=True)
    plain = check(broken, symmetry=False)
    graphed = check(broken, symmetry=False, build_graph=True)
    assert [(v.holds, v.counterexample and len(v.counterexample)) for v in plain.verdicts] == \
        [(v.holds, v.counterexample and len(v.counterexample)) for v in graphed.verdicts]


# --- liveness -----------------------------------------------------------------------------------


def test_leads_to_holds_only_with_fairness() -> None:
    assert check(toys.spinner(fair=True)).verdict("eventually_done").holds is True
    verdict = check(toys.spinner(fair=False)).verdict("eventually_done")
    assert verdict.holds is False and verdict.counterexample is not None
    cex = verdict.counterexample
    assert cex.actions == ("spin", "spin") and cex.loop_start == 0
    assert cex.steps[cex.loop_start][1] == cex.steps[-1][1]  # a lasso


def test_weak_fairness_does_not_cross_on_a_blinking_light() -> None:
    verdict = check(toys.traffic_light()).verdict("waiting_car_crosses")
    assert verdict.holds is False and verdict.counterexample is not None
    cex = verdict.counterexample
    assert cex.actions == ("arrive", "toggle", "toggle") and cex.loop_start == 1
    assert cex.steps[cex.loop_start][1] == cex.steps[-1][1]
    assert "loop" in check(toys.traffic_light()).render()


def test_a_trigger_state_without_successors_violates_leads_to() -> None:
    result = check(toys.dropped_request())
    verdict = result.verdict("request_answered")
    assert verdict.holds is False and verdict.counterexample is not None
    assert verdict.counterexample.actions == ("request", "drop") and verdict.counterexample.stutter
    assert result.deadlock is not None  # and it is a deadlock too


def test_progress_is_assumed_unless_stuttering_where_unfair_is_asked_for() -> None:
    assert check(toys.client_choice()).verdict("open_gets_closed").holds is True
    verdict = check(toys.client_choice(), stutter_where_unfair=True).verdict("open_gets_closed")
    assert verdict.holds is False and verdict.counterexample is not None and verdict.counterexample.stutter


def test_two_phase_commit_decides_under_fairness_but_not_without() -> None:
    model = toys.two_phase_commit(3)
    assert check(model, symmetry=False, properties=["prepared_decides"]).ok
    unfair = dataclasses.replace(model, fairness=None)
    verdict = check(unfair, symmetry=False, properties=["prepared_decides"]).verdict("prepared_decides")
    assert verdict.holds is False and verdict.counterexample is not None
    assert verdict.counterexample.loop_start is not None


def test_liveness_is_not_judged_on_an_incomplete_run() -> None:
    result = check(toys.spinner(fair=False), max_states=2)
    assert result.verdict("eventually_done").holds is None and result.verdict_text == "incomplete"


def test_a_lasso_takes_every_fairness_class_the_loop_keeps_enabled() -> None:
    # two fair spinners flip in turn; the goal is never reached; the loop must take both classes
    def next_steps(s: tuple[int, int]) -> list[tuple[str, tuple[int, int]]]:
        return [("a", (1 - s[0], s[1])), ("b", (s[0], 1 - s[1]))]

    model = Model("two-spinners", lambda: [(0, 0)], next_steps,
                  properties=[Property.leads_to("never", lambda s: True, lambda s: False)], fairness=lambda a: a)
    cex = check(model).verdict("never").counterexample
    assert cex is not None and cex.loop_start is not None
    loop = cex.actions[cex.loop_start:]
    assert set(loop) == {"a", "b"}
    assert cex.steps[cex.loop_start][1] == cex.steps[-1][1]


# --- coverage and reports -----------------------------------------------------------------------


def test_coverage_counts_transitions_per_kind_and_flags_kinds_never_taken() -> None:
    result = check(toys.two_phase_commit(3), symmetry=False)
    assert sum(result.coverage.values()) == result.transitions
    assert result.coverage["TMCommit"] > 0 and result.coverage["RMCrash"] == 0
    assert result.never_taken == ("RMCrash",)
    counter = check(toys.counter(4))
    assert counter.coverage == {"dec": 0, "inc": 4} and counter.never_taken == ("dec",)


def test_the_summary_reads_as_documented() -> None:
    model = toys.counter(5)
    only_invariants = dataclasses.replace(model, properties=[model.property("bounded")])
    summary = check(only_invariants).summary()
    assert summary.startswith("all 1 invariants hold on 6 distinct states, 5 transitions (depth 5, ")
    assert "states/s)" in summary


def test_the_report_shows_each_step_with_the_lines_it_changed() -> None:
    text = check(toys.counter(10, bad_at=3)).render()
    assert "below_bad: shortest counterexample (3 steps)" in text
    assert "  3. inc(2)\n         n=3" in text


def test_to_json_is_plain_json_with_verdicts_counts_timings_and_coverage() -> None:
    data = check(toys.two_phase_commit(3, broken=True)).to_json()
    text = json.dumps(data)
    assert json.loads(text)["states"] == data["states"]
    assert data["verdict"] == "violated" and data["symmetry"] is True
    consistent = next(p for p in data["properties"] if p["name"] == "consistent")
    assert consistent["counterexample"]["length"] == 5
    assert {"seconds", "states_per_second", "coverage", "never_taken", "transitions", "depth"} <= set(data)


def test_progress_goes_to_a_callable() -> None:
    seen: list[tuple[int, int, float]] = []
    check(toys.counter(50), progress=lambda states, depth, rate: seen.append((states, depth, rate)))
    assert seen and seen[-1][0] == 51


def test_progress_true_writes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    check(toys.counter(5), progress=True)
    assert "6 states" in capsys.readouterr().err


def test_generators_and_lists_of_successors_are_both_accepted() -> None:
    model = Model("gen", lambda: iter([0]), lambda n: ((f"inc({n})", n + 1) for _ in range(1) if n < 3),
                  is_final=lambda n: n == 3)
    result = check(model)
    assert (result.states, result.transitions, result.ok) == (4, 3, True)
