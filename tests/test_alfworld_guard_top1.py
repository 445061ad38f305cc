"""`guard-top1`'s switch for the learned priors: `prior_games=0` plays the guard's rules alone."""

from __future__ import annotations

from playground.envs.alfworld.guard import NO_PRIORS
from playground.envs.alfworld.procedural import GuardTop1Agent

from playground.core.payloads import AgentView


def test_prior_games_zero_plays_the_guard_without_learned_priors():
    agent = GuardTop1Agent(prior_games=0)
    assert agent.guard.priors is NO_PRIORS  # no train game is generated or read
    view = AgentView(goal="put a mug in cabinet.", observation="You are in the middle of a room.",
                     history=(), admissible_actions=("go to cabinet 1", "go to countertop 1", "inventory", "look"), step=0)
    proposal = agent.propose(view)
    assert proposal.action in view.admissible_actions and proposal.action not in ("inventory", "look")
