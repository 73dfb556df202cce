"""`goldenset_client`'s team review against a real server, on every database backend: the eval's
team settings as `EvalRead` shows them, claiming a batch and giving it back, votes that agree and
votes that differ, a vote taken back, the queue's views, an adjudicator's decision, the team's
progress, and refusals surfacing the problem's `reason`; the async client the same way."""

from __future__ import annotations

import asyncio

import pytest
from goldenset_client import AsyncClient, Client, Conflict, EvalCreate, Forbidden, InvalidRequest
from sqlalchemy.engine import Engine

from tests.conftest import LiveServer
from tests.eval_support import ingest_and_curate, item_ids_by_external_id
from tests.evals.integration.test_refresh import kev

TEAM = EvalCreate(name="team", sources=["kev"], sealed_fraction=0, reviewers_per_item=2, review_assignment="claim", adjudicators=["judge"], review_guidelines="Gradable only.")


def _world(live_server: LiveServer, engine: Engine, count: int = 4) -> list[int]:
    """`count` unique items of source `kev` and the eval `TEAM` over them; the ids, oldest first."""
    ingest_and_curate(engine, "kev", [kev(number, f"2024-02-{number:02d}") for number in range(1, count + 1)])
    with Client(live_server.url, live_server.token("admin", name="admin")) as admin:
        admin.create_eval(TEAM)
    ids = item_ids_by_external_id(engine)
    return [ids[f"CVE-2024-{number:04d}"] for number in range(1, count + 1)]


def test_two_reviewers_claim_vote_disagree_and_an_adjudicator_decides(live_server: LiveServer, engine: Engine) -> None:
    first, second, third, fourth = _world(live_server, engine)
    alice = Client(live_server.url, live_server.token("read", "curate", name="alice"))
    bob = Client(live_server.url, live_server.token("curate", name="bob"))
    judge = Client(live_server.url, live_server.token("curate", name="judge"))
    with alice, bob, judge:
        settings = alice.get_eval("team")
        assert (settings.reviewers_per_item, settings.agreement_sample, settings.review_assignment) == (2, 1.0, "claim")
        assert (settings.adjudicators, settings.reviewers, settings.review_guidelines, settings.team_review) == (["judge"], [], "Gradable only.", True)

        assert alice.review_queue("team").entries == []  # `mine` by default: nothing claimed yet
        held = alice.claim_review_batch("team", size=3)
        assert (held.eval, held.held, held.claimed) == ("team", [first, second, third], [first, second, third]) and held.expires_at is not None
        again = alice.claim_review_batch("team", size=3)
        assert (again.held, again.claimed) == ([first, second, third], [])
        assert bob.claim_review_batch("team", size=2).held == [first, second]  # each item needs two reviewers
        assert [entry.id for entry in alice.review_queue("team", view="mine").entries] == [first, second, third]
        assert alice.review_queue("team", view="all").total == 4

        waiting = alice.vote("team", first, "approve")
        assert (waiting.item_id, waiting.eval, waiting.state, waiting.needed, waiting.status) == (first, "team", "waiting", 2, "unique")
        assert [(vote.reviewer, vote.decision, vote.reason) for vote in waiting.votes] == [("token:alice", "approve", "")]
        with pytest.raises(Conflict) as twice:
            alice.vote("team", first, "reject", "changed my mind")
        assert twice.value.reason == "already_voted" and twice.value.problem["reason"] == "already_voted" and "you voted approve" in twice.value.detail
        with pytest.raises(InvalidRequest) as unexplained:
            bob.vote("team", first, "reject")
        assert unexplained.value.reason == "reason_required"
        decided = bob.vote("team", first, "approve")
        assert (decided.state, decided.status, len(decided.votes)) == ("decided", "approved", 2)

        assert alice.vote("team", second, "reject", "not gradable").state == "waiting"
        taken_back = alice.withdraw_vote("team", second)
        assert (taken_back.state, taken_back.votes, taken_back.status) == ("waiting", [], "unique")
        with pytest.raises(Conflict) as nothing:
            alice.withdraw_vote("team", second)
        assert nothing.value.reason == "no_vote"
        alice.vote("team", second, "approve")
        disputed = bob.vote("team", second, "reject", "an internal ticket")
        assert disputed.state == "disputed" and {(vote.reviewer, vote.decision) for vote in disputed.votes} == {("token:alice", "approve"), ("token:bob", "reject")}
        assert [entry.id for entry in judge.review_queue("team", view="disputed").entries] == [second]

        with pytest.raises(Forbidden) as not_judge:
            alice.adjudicate("team", second, "approve")
        assert not_judge.value.reason == "not_adjudicator"
        adjudicated = judge.adjudicate("team", second, "reject", "an internal ticket, as bob says")
        assert (adjudicated.state, adjudicated.status, len(adjudicated.votes)) == ("decided", "rejected", 2)
        assert judge.review_queue("team", view="disputed").entries == []

        with pytest.raises(Conflict) as single:
            alice.approve(fourth)
        assert single.value.reason == "team_review"

        assert alice.give_back_claims("team") == 1  # the third item; a vote gives back the claim on its item
        assert alice.give_back_claims("team") == 0
        team = bob.review_team("team")
        assert (team.eval, team.reviewers_per_item, team.assignment, team.adjudicators, team.guidelines) == ("team", 2, "claim", ["judge"], "Gradable only.")
        assert (team.rounds, team.unanimous, team.percent_agreement, team.disputed) == (2, 1, 0.5, 0)
        people = {entry.reviewer: entry for entry in team.people}
        assert (people["token:alice"].votes, people["token:alice"].agreed_with_outcome, people["token:alice"].claimed) == (2, 1, 0)
        assert (people["token:bob"].votes, people["token:bob"].agreed_with_outcome) == (2, 2)
        assert people["token:judge"].adjudicated == 1


def test_the_async_client_reviews_as_a_team(live_server: LiveServer, engine: Engine) -> None:
    first, second, _, _ = _world(live_server, engine)
    tokens = {name: live_server.token("curate", name=name) for name in ("alice", "bob", "judge")}

    async def review() -> None:
        alice, bob, judge = (AsyncClient(live_server.url, tokens[name]) for name in ("alice", "bob", "judge"))
        async with alice, bob, judge:
            assert (await alice.claim_review_batch("team", 2)).held == [first, second]
            assert [entry.id for entry in (await alice.review_queue("team", view="mine")).entries] == [first, second]
            assert (await alice.vote("team", first, "approve")).state == "waiting"
            assert (await alice.withdraw_vote("team", first)).votes == []
            await alice.vote("team", first, "approve")
            with pytest.raises(Conflict) as twice:
                await alice.vote("team", first, "approve")
            assert twice.value.reason == "already_voted"
            assert (await bob.vote("team", first, "reject", "no answer in it")).state == "disputed"
            assert (await judge.adjudicate("team", first, "approve")).status == "approved"
            assert await alice.give_back_claims("team") == 1
            team = await judge.review_team("team")
            assert (team.rounds, team.unanimous, [entry.reviewer for entry in team.people]) == (1, 0, ["token:alice", "token:bob", "token:judge"])

    asyncio.run(review())
