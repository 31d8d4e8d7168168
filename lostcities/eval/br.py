"""Progress on a game too big for exact exploitability: a best response and earlier selves.

Exploitability (the margin a best response wins against an agent) is what CFR drives to
zero; on Lost Cities it cannot be computed, so a run measures two approximations at every
evaluation:

- ``best_response_match``: a local best response (in the sense of Lisy & Bowling 2017:
  one step of deviation from the agent, each deviation valued by search) playing the
  frozen agent. At each of its decisions it redeals what it cannot see (``redeals``
  times), plays each of the agent's ``candidates`` most probable moves on every redeal,
  the opponent's next ``agent_plies`` decisions by the agent (its model of the opponent)
  and the rest of the game by sigma_1's rule (in C: a full playout through the agent
  costs a network forward per step), and plays the agent's own move unless another beats
  it by 2 standard errors of the paired difference (PIMC search over the agent:
  lostcities/eval/search.py). Its mean score difference against the agent is the margin:
  an agent that no one-step deviation improves on leaves it at zero (the agent against
  itself scores zero by symmetry: seats alternate); a falling margin means the agent is
  harder to exploit this way. The searcher's copy of the agent draws its own per-game
  randomness (single Deep CFR's iteration), so it models the agent's mixture, not the
  game's draw. The default models the opponent by sigma_1's rule (``agent_plies`` 0): the
  agent's own plies gave the same margin at twice the cost
  (experiments/lost_cities_learning/README.md, progress measures).
- ``head_to_head``: the agent against an earlier agent of the same run, on the same deals
  with seats alternating; the later one should win.
"""

from __future__ import annotations

from lostcities.eval.agents import Agent
from lostcities.eval.match import PlayedMatch, play_match
from lostcities.eval.players import AgentPlayer
from lostcities.eval.search import SearchAgent, SearchConfig
from lostcities.games.lost_cities_spec import DEFAULT_MAX_TURNS
from lostcities.rng import EvaluationRole, Purpose, stream_key


def best_response_match(
    agent: Agent,
    model: Agent,
    games: int,
    seed: int,
    redeals: int = 32,
    candidates: int = 5,
    max_turns: int = DEFAULT_MAX_TURNS,
    agent_plies: int = 0,
) -> PlayedMatch:
    """The search best response (player A) against ``agent`` (player B); ``model`` is the
    searcher's copy of the agent (the same strategy, drawing its own per-game randomness).
    ``games`` even: every deal is played from both seats. All games step together, so the
    searcher's playouts of every game in flight share each batched forward."""
    search = SearchConfig(
        determinizations=redeals,
        candidates=candidates,
        rollout="heuristic",
        blueprint_plies=agent_plies,
        seed=stream_key(seed, 0, 0, 0, Purpose.SEARCH),
    )
    best_response = AgentPlayer(
        SearchAgent(model, search),
        "greedy",  # one-hot choices: the search's own
        lambda i: stream_key(seed, i, EvaluationRole.BEST_RESPONSE, 0, Purpose.EVALUATION),
        name="best_response",
    )
    frozen = AgentPlayer(
        agent,
        "sampled",
        lambda i: stream_key(seed, i, EvaluationRole.PROGRESS_AGENT, 0, Purpose.EVALUATION),
    )
    return play_match(best_response, frozen, games, seed, max_turns, batch_size=games)


def head_to_head(
    agent: Agent,
    earlier: Agent,
    games: int,
    seed: int,
    batch_size: int = 256,
    max_turns: int = DEFAULT_MAX_TURNS,
) -> PlayedMatch:
    """``agent`` (player A) against ``earlier`` (player B), both sampled, seats alternating."""
    later = AgentPlayer(
        agent,
        "sampled",
        lambda i: stream_key(seed, i, EvaluationRole.PROGRESS_AGENT, 0, Purpose.EVALUATION),
    )
    before = AgentPlayer(
        earlier,
        "sampled",
        lambda i: stream_key(seed, i, EvaluationRole.EARLIER_AGENT, 0, Purpose.EVALUATION),
        name="earlier",
    )
    return play_match(later, before, games, seed, max_turns, batch_size)
