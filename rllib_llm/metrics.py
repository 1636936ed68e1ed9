"""Rollout metrics: their names and the one function that computes them from episodes.

The training EnvRunners (single- and multi-agent), the held-out evaluation, the prompt agent and the
benchmarks all report :func:`rollout_stats`, so "success rate" means the same thing everywhere: the share
of episodes whose last step's info has ``won`` set (in a multi-agent episode: any agent's).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from rllib_llm.columns import ENV_FAULTS, FINISH_REASON, INFO_WON, PROMPT, RESPONSE, RESPONSE_TEXT, VALID

NUM_EPISODES = "num_episodes"
SUCCESS_RATE = "success_rate"
VALID_ACTION_RATE = "valid_action_rate"
EPISODE_RETURN_MEAN = "episode_return_mean"
EPISODE_LEN_MEAN = "episode_len_mean"
RESPONSE_LENGTH_MEAN = "response_length_mean"
PROMPT_LENGTH_MEAN = "prompt_length_mean"
#: Model-output faults: responses cut at ``max_new_tokens``, empty ones, ones with bytes that are not UTF-8
#: (decoded as U+FFFD). Without a parseable action they are invalid actions too.
TRUNCATED_RESPONSE_RATE = "truncated_response_rate"
EMPTY_RESPONSE_RATE = "empty_response_rate"
UNDECODABLE_RESPONSE_RATE = "undecodable_response_rate"
#: Env faults (failed resets and steps, each replaced by a fresh env) that hit the episodes.
NUM_ENV_FAULTS = "num_env_faults"
#: Sampler throughput and counters (EnvRunner metrics, not per-episode statistics).
TOKENS_PER_S = "generated_tokens_per_s"
NUM_ENV_STEPS = "num_env_steps_sampled"
NUM_ENV_STEPS_LIFETIME = "num_env_steps_sampled_lifetime"
#: Generate calls in the last rollout (multi-agent: one per module per step at most).
NUM_GENERATE_CALLS = "num_generate_calls"
#: Seconds the generation backends took to take the Learner's new weights (the last sync).
WEIGHT_SYNC_S = "weight_sync_s"
#: Prompts the prompt builder's token budget cut (summed over a rollout).
NUM_PROMPTS_TRUNCATED = "num_prompts_truncated"
#: Prefix of a multi-agent result's per-agent sub-dict: ``agent_<id>``.
AGENT_PREFIX = "agent_"

# Where a train() result holds them: RLlib's ENV_RUNNER_RESULTS and LEARNER_RESULTS (ray.rllib.utils.metrics,
# spelled here so that the CLI's progress table needs no RLlib import), and the Learner's own metrics.
ENV_RUNNERS = "env_runners"
LEARNERS = "learners"
#: Learner metrics per module: the KL term (when ``kl_coeff > 0``) and the sampled tokens' entropy.
KL = "kl"
ENTROPY = "entropy"
#: Learner metric: the share of episode groups whose advantages are all ~0 (every episode alike).
UNINFORMATIVE_GROUP_FRACTION = "uninformative_group_fraction"


def agent_metric_key(agent_id: str) -> str:
    """The result-dict key of an agent's metrics: ``env_runners/agent_<id>/...``."""
    return f"{AGENT_PREFIX}{agent_id}"


def agent_episodes(episodes: Iterable[Any]) -> list:
    """The non-empty per-agent ``SingleAgentEpisode``s of multi-agent episodes, in a stable order (agents of
    one episode sorted by id); single-agent episodes pass through."""
    out = []
    for episode in episodes:
        agents = getattr(episode, "agent_episodes", None)
        if agents is None:
            out.append(episode)
            continue
        out.extend(agents[aid] for aid in sorted(agents, key=str) if len(agents[aid]) > 0)
    return out


def _won(episode: Any) -> bool:
    return bool((episode.get_infos(-1) or {}).get(INFO_WON, False))


def episode_success(episode: Any) -> bool:
    """Whether the episode ended with the env's ``won`` flag set (multi-agent: on any agent's last info)."""
    agents = getattr(episode, "agent_episodes", None)
    if agents is None:
        return _won(episode)
    return any(_won(ep) for ep in agents.values())


def _mean(values: Sequence, empty: float = 0.0) -> float:
    return float(np.mean(values)) if len(values) else empty


def _step_values(episodes: list, key: str) -> list:
    return [v for ep in episodes for v in ep.get_extra_model_outputs(key)]


def step_stats(steps_of: list, empty: float = 0.0) -> dict[str, float]:
    """Validity and the model-output rates over every step of ``steps_of`` (single-agent episodes)."""
    finish = _step_values(steps_of, FINISH_REASON)
    texts = _step_values(steps_of, RESPONSE_TEXT)
    return {
        VALID_ACTION_RATE: _mean(_step_values(steps_of, VALID), empty),
        RESPONSE_LENGTH_MEAN: _mean([len(r) for r in _step_values(steps_of, RESPONSE)], empty),
        PROMPT_LENGTH_MEAN: _mean([len(p) for p in _step_values(steps_of, PROMPT)], empty),
        TRUNCATED_RESPONSE_RATE: _mean([f == "length" for f in finish], empty),
        EMPTY_RESPONSE_RATE: _mean([not str(t).strip() for t in texts], empty),
        UNDECODABLE_RESPONSE_RATE: _mean(["\ufffd" in str(t) for t in texts], empty),
    }


def rollout_stats(episodes: Sequence[Any], agents: Sequence[str] = ()) -> dict[str, Any]:
    """Success, validity, return, length and response statistics of a rollout, plus its env faults.

    Works on single- and multi-agent episodes. A multi-agent episode succeeds when any agent ends it with
    ``won``; its return is the sum of its agents' returns; its steps are every agent's. Multi-agent
    results also hold one ``agent_<id>`` sub-dict per agent (success, validity, return, length, response
    length) -- every agent of ``agents`` too, with NaN means when it never acted (the progress table prints
    ``-``), so per-agent columns exist from the first iteration on.
    """
    episodes = list(episodes)
    steps_of = agent_episodes(episodes)
    stats: dict[str, Any] = {
        NUM_EPISODES: len(episodes),
        NUM_ENV_FAULTS: int(sum(ep.custom_data.get(ENV_FAULTS, 0) for ep in episodes)),
        SUCCESS_RATE: _mean([episode_success(ep) for ep in episodes]),
        EPISODE_RETURN_MEAN: _mean([ep.get_return() for ep in episodes]),
        EPISODE_LEN_MEAN: _mean([len(ep) for ep in episodes]),
        **step_stats(steps_of),
    }
    multi_agent = any(hasattr(ep, "agent_episodes") for ep in episodes) or bool(agents)
    if multi_agent:
        per_agent: dict[str, list] = defaultdict(list, {a: [] for a in agents})
        for episode in episodes:
            for agent_id, agent_episode in getattr(episode, "agent_episodes", {}).items():
                if len(agent_episode):
                    per_agent[agent_id].append(agent_episode)
        for agent_id in sorted(per_agent, key=str):
            mine = per_agent[agent_id]
            stats[agent_metric_key(agent_id)] = {
                SUCCESS_RATE: _mean([_won(ep) for ep in mine], math.nan),
                VALID_ACTION_RATE: _mean(_step_values(mine, VALID), math.nan),
                EPISODE_RETURN_MEAN: _mean([ep.get_return() for ep in mine], math.nan),
                EPISODE_LEN_MEAN: _mean([len(ep) for ep in mine], math.nan),
                RESPONSE_LENGTH_MEAN: _mean([len(r) for r in _step_values(mine, RESPONSE)], math.nan),
            }
    return stats


def flat_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """``rollout_stats`` with each per-agent sub-dict flattened to ``agent_<id>/<name>`` keys."""
    out: dict[str, Any] = {}
    for key, value in stats.items():
        out.update({f"{key}/{k}": v for k, v in value.items()} if isinstance(value, dict) else {key: value})
    return out
