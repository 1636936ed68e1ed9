"""The multi-agent LLM EnvRunner: group rollouts of PettingZoo envs, one batched generate per module per step.

:meth:`LLMMultiAgentEnvRunner.sample` plays ``num_groups`` groups of ``group_size`` envs (a group's envs
reset with one seed) in lock step and returns RLlib ``MultiAgentEpisode``s. At every step it collects the
agents that act in each live env (AEC: the agent whose turn it is; parallel: every live agent), builds
their prompts with each agent's own env-to-module pipeline (memory + prompt builder, run on the agent's
``SingleAgentEpisode`` inside the multi-agent episode, so memories never mix agents), and answers all
prompts of one module -- every agent mapped to it, in every env -- with one ``generate`` call.

Agents map to modules with ``config.policy_mapping_fn`` (through ``MultiAgentEpisode.module_for``). Each
agent episode records the single-agent runner's ``extra_model_outputs`` per step (prompt/response ids,
old log-probs, anchor, validity, env reward) and ``custom_data`` (group id, seed, template, task), which is
all the learner connector needs. An unparseable response is recorded as the action ``"(invalid)"`` (RLlib's
episode treats a ``None`` action as "no action"); the env gets ``None``.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.connectors.env_to_module import EnvToModulePipeline
from ray.rllib.core import COMPONENT_RL_MODULE
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.env import INPUT_ENV_SINGLE_SPACES, INPUT_ENV_SPACES
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.utils.checkpoints import Checkpointable
from ray.rllib.utils.framework import get_device

from rllib_llm.action_parsing import parse_action
from rllib_llm.env_connectors.memory import INVALID_ACTION
from rllib_llm.env_connectors.prompts import PROMPT_IDS
from rllib_llm.env_runner import (
    ANCHOR,
    ENV_REWARD,
    GROUP_ID,
    NUM_ENV_FAULTS,
    NUM_ENV_STEPS,
    NUM_ENV_STEPS_LIFETIME,
    OLD_LOGP,
    PROMPT,
    RESPONSE,
    RESPONSE_TEXT,
    SEED,
    TOKENS_PER_S,
    VALID,
    LLMEnvRunner,
    anchor_of,
    begin_group_rollout,
    module_weights,
    prompt_fields,
)
from rllib_llm.generation import SamplingParams, make_backend
from rllib_llm.multi_agent.envs.base import agent_prompt_template, agent_task_description
from rllib_llm.multi_agent.pettingzoo_adapter import ALL, PettingZooAdapter, Transition, make_multi_agent_env

logger = logging.getLogger(__name__)

#: custom_data key of an agent episode: its agent id (also on ``SingleAgentEpisode.agent_id``).
AGENT_ID = "agent_id"
#: Metric: generate calls in the last rollout (one per module per step at most).
NUM_GENERATE_CALLS = "num_generate_calls"


def agent_metric_key(agent_id: str) -> str:
    """The result-dict key of an agent's metrics: ``env_runners/agent_<id>/...``."""
    return f"agent_{agent_id}"


def _mean(values: list, empty: float = 0.0) -> float:
    return float(np.mean(values)) if len(values) else empty


def _won(episode: Any) -> bool:
    return bool((episode.get_infos(-1) or {}).get("won", False))


def rollout_stats(episodes: list[MultiAgentEpisode], agents: Sequence[str] = ()) -> dict[str, Any]:
    """Success, validity, return and length means, overall and per agent (``agent_<id>`` sub-dicts).

    An episode succeeds when any agent ends it with ``won``; its return is the sum of its agents' returns.
    Every agent of ``agents`` gets a sub-dict even when it never acted (NaN means: the progress table
    prints ``-``), so per-agent columns exist from the first iteration on.
    """
    per_agent: dict[str, list] = defaultdict(list, {a: [] for a in agents})
    for episode in episodes:
        for agent_id, agent_episode in episode.agent_episodes.items():
            if len(agent_episode):
                per_agent[agent_id].append(agent_episode)
    all_agent_episodes = [ep for eps in per_agent.values() for ep in eps]

    def summary(agent_episodes: list, empty: float = 0.0) -> dict[str, float]:
        valid = [v for ep in agent_episodes for v in ep.get_extra_model_outputs(VALID)]
        return {
            "success_rate": _mean([_won(ep) for ep in agent_episodes], empty),
            "valid_action_rate": _mean(valid, empty),
            "episode_return_mean": _mean([ep.get_return() for ep in agent_episodes], empty),
            "episode_len_mean": _mean([len(ep) for ep in agent_episodes], empty),
            "response_length_mean": _mean(
                [len(r) for ep in agent_episodes for r in ep.get_extra_model_outputs(RESPONSE)], empty
            ),
        }

    stats: dict[str, Any] = {
        "num_episodes": len(episodes),
        "success_rate": _mean([any(_won(ep) for ep in e.agent_episodes.values()) for e in episodes]),
        "valid_action_rate": summary(all_agent_episodes)["valid_action_rate"],
        "episode_return_mean": _mean([e.get_return() for e in episodes]),
        "episode_len_mean": _mean([len(e) for e in episodes]),
        "response_length_mean": summary(all_agent_episodes)["response_length_mean"],
        "prompt_length_mean": _mean([len(p) for ep in all_agent_episodes for p in ep.get_extra_model_outputs(PROMPT)]),
    }
    for agent_id in sorted(per_agent, key=str):
        stats[agent_metric_key(agent_id)] = summary(per_agent[agent_id], empty=math.nan)
    return stats


class EpisodeMapping:
    """RLlib's ``policy_mapping_fn(agent_id, episode, **kwargs)`` as the ``(agent_id, episode)`` function a
    ``MultiAgentEpisode`` calls (RLlib's default mapping fn also wants ``worker``). A plain object holding
    only the function, so episodes pickle (to the Learner) without dragging the EnvRunner along."""

    def __init__(self, fn: Callable[..., str]) -> None:
        self.fn = fn
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            params = []
        self.pass_worker = any(p.name == "worker" or p.kind is p.VAR_KEYWORD for p in params)

    def __call__(self, agent_id: str, episode: Any) -> str:
        return self.fn(agent_id, episode, worker=None) if self.pass_worker else self.fn(agent_id, episode)


class LLMMultiAgentEnvRunner(EnvRunner, Checkpointable):
    """EnvRunner for multi-agent LLM systems (see module docstring). Configured by a MultiAgentLLMConfig."""

    def __init__(self, *, config, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        self._rng = np.random.default_rng(self._seed)
        self._num_rollouts = 0
        self.adapters: list[PettingZooAdapter] = []
        self.make_env()
        self.make_module()
        self._mapping = EpisodeMapping(self.config.policy_mapping_fn)
        self._pipelines: dict[str, EnvToModulePipeline] = {}
        self.backends = {
            module_id: make_backend(
                self.config.generation_backend,
                model=self.module[module_id].model,
                tokenizer=self.module[module_id].tokenizer,
                **self.config.generation_backend_options,
            )
            for module_id in self.module.keys()
        }
        self.sampling = SamplingParams.from_dict(self.config.sampling)

    # --- construction --------------------------------------------------------------------------------

    def _new_adapter(self) -> PettingZooAdapter:
        return PettingZooAdapter(make_multi_agent_env(self.config.env, self.config.env_config))

    def make_env(self) -> None:
        for adapter in self.adapters:
            adapter.close()
        self.adapters = [self._new_adapter() for _ in range(self.config.num_groups * self.config.group_size)]
        self.env = self.adapters[0].env

    def module_ids(self) -> list[str]:
        """Module ids of the config: ``policies`` plus those of a MultiRLModuleSpec."""
        ids = dict.fromkeys(self.config.policies)
        spec = self.config.rl_module_spec
        if isinstance(spec, MultiRLModuleSpec):
            ids.update(dict.fromkeys(spec.rl_module_specs))
        return list(ids)

    def get_spaces(self) -> dict[str, tuple[gym.Space, gym.Space]]:
        """Env spaces (Dicts over agents) and, per module, the (text) spaces of the env's first agent."""
        agents = list(self.env.possible_agents)
        observation = gym.spaces.Dict({a: self.env.observation_space(a) for a in agents})
        action = gym.spaces.Dict({a: self.env.action_space(a) for a in agents})
        single = (self.env.observation_space(agents[0]), self.env.action_space(agents[0]))
        return {
            INPUT_ENV_SPACES: (observation, action),
            INPUT_ENV_SINGLE_SPACES: (observation, action),
            **{module_id: single for module_id in self.module_ids()},
        }

    def make_module(self) -> None:
        """The inference-only MultiRLModule, each module on RLlib's device for ``num_gpus_per_env_runner`` and
        in its model's ``inference_dtype``, as the single-agent runner (backends run where their module is)."""
        spec = self.config.get_multi_rl_module_spec(spaces=self.get_spaces(), inference_only=True)
        self.module = spec.build()
        device = get_device(self.config, self.config.num_gpus_per_env_runner)
        for module_id in self.module.keys():
            module = self.module[module_id]
            module.to(device=device, dtype=module.spec.inference_torch_dtype)

    def pipeline(self, agent_id: str) -> EnvToModulePipeline:
        """The agent's env-to-module pipeline: ``agent_env_to_module[agent_id]`` or the config's default
        factory, built once per agent (so prompt builders keep per-agent budgets and warnings)."""
        if agent_id not in self._pipelines:
            factory = self.config.agent_env_to_module.get(agent_id, self.config._env_to_module_connector)
            spaces = self.get_spaces()
            pieces = factory(self.env, spaces, None)
            pieces = list(pieces) if isinstance(pieces, (list, tuple)) else [pieces]
            observation_space, action_space = spaces[INPUT_ENV_SINGLE_SPACES]
            self._pipelines[agent_id] = EnvToModulePipeline(
                input_observation_space=observation_space, input_action_space=action_space, connectors=pieces
            )
        return self._pipelines[agent_id]

    def assert_healthy(self) -> None:
        assert self.adapters and self.module is not None, "LLMMultiAgentEnvRunner has no envs or no module."

    # --- episodes ------------------------------------------------------------------------------------

    def _ensure_envs(self, count: int) -> None:
        while len(self.adapters) < count:
            self.adapters.append(self._new_adapter())

    def _reset(self, index: int, seed: int) -> tuple[dict, dict]:
        try:
            return self.adapters[index].reset(seed)
        except Exception:
            if not self.config.restart_failed_sub_environments:
                raise
            logger.exception("Env %d failed in reset; recreating it.", index)
            self.metrics.log_value(NUM_ENV_FAULTS, 1, reduce="sum")
            self.adapters[index] = self._new_adapter()
            return self.adapters[index].reset(seed)

    def _step(self, index: int, episode: MultiAgentEpisode, actions: dict[str, Any]) -> Transition:
        """The env's transition; an env exception truncates the episode (with each agent's last observation)."""
        try:
            return self.adapters[index].step(actions)
        except Exception as e:
            if not self.config.restart_failed_sub_environments:
                raise
            logger.exception("Env %d failed in step; recreating it and truncating its episode.", index)
            self.metrics.log_value(NUM_ENV_FAULTS, 1, reduce="sum")
            self.adapters[index] = self._new_adapter()
            error = {"is_action_valid": False, "won": False, "env_error": repr(e)}
            observations = {a: ep.get_observations(-1) for a, ep in episode.agent_episodes.items() if not ep.is_done}
            return Transition(
                observations=observations,
                rewards=dict.fromkeys(actions, 0.0),
                truncateds={**dict.fromkeys(observations, True), ALL: True},
                infos={a: dict(error) for a in observations},
            )

    def _start_episode(self, index: int, seed: int, group_id: str) -> MultiAgentEpisode:
        observations, infos = self._reset(index, seed)
        env = self.adapters[index].env
        agents = list(env.possible_agents)
        episode = MultiAgentEpisode(
            observation_space=gym.spaces.Dict({a: env.observation_space(a) for a in agents}),
            action_space=gym.spaces.Dict({a: env.action_space(a) for a in agents}),
            agent_to_module_mapping_fn=self._mapping,
        )
        episode.add_env_reset(observations=observations, infos=infos)
        episode.custom_data.update({GROUP_ID: group_id, SEED: seed})
        return episode

    def agent_episode(self, index: int, episode: MultiAgentEpisode, agent_id: str):
        """The agent's SingleAgentEpisode, its custom_data filled on first use (group, template, task...)."""
        agent_episode = episode.agent_episodes[agent_id]
        data = agent_episode.custom_data
        if GROUP_ID not in data:
            env = self.adapters[index].env
            template = (
                self.config.agent_prompts.get(agent_id)
                or self.config.prompt_template
                or agent_prompt_template(env, agent_id)
            )
            data.update(
                {GROUP_ID: episode.custom_data[GROUP_ID], SEED: episode.custom_data[SEED], AGENT_ID: agent_id},
                **prompt_fields(self.config, env, template, agent_task_description(env, agent_id), agent_id),
            )
        return agent_episode

    # --- sampling ------------------------------------------------------------------------------------

    def sample(
        self,
        *,
        seeds: list[int] | None = None,
        explore: bool = True,
        sampling: dict[str, Any] | None = None,
        group_size: int | None = None,
        record_metrics: bool = True,
        **kwargs: Any,
    ) -> list[MultiAgentEpisode]:
        """One group rollout (same arguments as :meth:`LLMEnvRunner.sample`)."""
        params, episodes = begin_group_rollout(self, seeds, explore, sampling, group_size)
        generated, t_gen, calls = 0, 0.0, 0
        for step in range(self.config.max_episode_steps):
            requests = [
                (i, a) for i, ep in enumerate(episodes) if not ep.is_done for a in self.adapters[i].agents_to_act()
            ]
            if not requests:
                break
            outputs, prompts, num_calls, seconds = self._generate(episodes, requests, params, explore)
            t_gen += seconds
            calls += num_calls
            generated += sum(len(out.token_ids) for out in outputs.values())
            by_env: dict[int, list[str]] = defaultdict(list)
            for i, agent_id in requests:
                by_env[i].append(agent_id)
            for i, agent_ids in by_env.items():
                self._env_step(
                    i, episodes[i], agent_ids, outputs, prompts, last=step == self.config.max_episode_steps - 1
                )
        if record_metrics:
            self._log_rollout_metrics(episodes, generated, t_gen, calls)
        return episodes

    def _generate(self, episodes, requests, params, explore) -> tuple[dict, dict, int, float]:
        """Prompts by each agent's pipeline, then one generate call per module: ({(env, agent): output},
        {(env, agent): prompt ids}, number of generate calls, seconds spent generating)."""
        by_key: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, agent_id in requests:
            module_id = episodes[i].module_for(agent_id)
            if module_id not in self.backends:
                raise ValueError(
                    f"policy_mapping_fn mapped agent {agent_id!r} to module {module_id!r}, which is not one of the "
                    f"configured modules {sorted(self.backends)} (config.multi_agent(policies=...))."
                )
            by_key[(agent_id, module_id)].append(i)
        prompts: dict[tuple[int, str], list[int]] = {}
        per_module: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for (agent_id, module_id), indices in by_key.items():
            batch = self.pipeline(agent_id)(
                rl_module=self.module[module_id],
                batch={},
                episodes=[self.agent_episode(i, episodes[i], agent_id) for i in indices],
                explore=explore,
                shared_data={},
                metrics=self.metrics,
            )
            for i, prompt_ids in zip(indices, batch[PROMPT_IDS], strict=True):
                prompts[(i, agent_id)] = prompt_ids
                per_module[module_id].append((i, agent_id))
        outputs: dict[tuple[int, str], Any] = {}
        start = time.perf_counter()
        for module_id, keys in per_module.items():
            results = self.backends[module_id].generate([prompts[k] for k in keys], params)
            outputs.update(zip(keys, results, strict=True))
        return outputs, prompts, len(per_module), time.perf_counter() - start

    def _env_step(
        self, i: int, episode: MultiAgentEpisode, agent_ids: list[str], outputs, prompts, *, last: bool
    ) -> None:
        env = self.adapters[i].env
        raw = getattr(env, "action_format", "tags") == "raw"
        actions, extra, recorded = {}, {}, {}
        for agent_id in agent_ids:
            out = outputs[(i, agent_id)]
            reply = self.config.response_prefix + out.text
            actions[agent_id] = reply if raw else parse_action(reply)
            recorded[agent_id] = actions[agent_id] if actions[agent_id] is not None else INVALID_ACTION
            agent_episode = episode.agent_episodes[agent_id]
            extra[agent_id] = {
                PROMPT: prompts[(i, agent_id)],
                RESPONSE: out.token_ids,
                OLD_LOGP: out.logprobs,
                RESPONSE_TEXT: out.text,
                ANCHOR: anchor_of(agent_episode.get_observations(-1), agent_episode.get_infos(-1) or {}),
            }
        transition = self._step(i, episode, actions)
        rewards = {
            a: r
            for a, r in transition.rewards.items()
            if not (a in episode.agent_episodes and episode.agent_episodes[a].is_done)
        }
        penalty = self.config.invalid_action_penalty
        for agent_id in agent_ids:
            info = transition.infos.get(agent_id, {})
            valid = bool(info.get("is_action_valid", actions[agent_id] is not None)) and actions[agent_id] is not None
            env_reward = float(rewards.get(agent_id, 0.0))
            rewards[agent_id] = env_reward - (0.0 if valid else penalty)
            extra[agent_id].update({VALID: valid, ENV_REWARD: env_reward})
        if last and not transition.done:
            self._truncate(i, episode, transition)
        lengths = {a: len(ep) for a, ep in episode.agent_episodes.items()}
        episode.add_env_step(
            observations=transition.observations,
            actions=recorded,
            rewards=rewards,
            infos={a: transition.infos.get(a, {}) for a in transition.observations},
            terminateds=transition.terminateds,
            truncateds=transition.truncateds,
            extra_model_outputs=extra,
        )
        self._complete_env_rewards(episode, lengths)

    def _truncate(self, i: int, episode: MultiAgentEpisode, transition: Transition) -> None:
        """The step limit: every agent still in the episode gets a last observation and is truncated."""
        adapter = self.adapters[i]
        for agent_id, agent_episode in episode.agent_episodes.items():
            if agent_id not in transition.observations and not agent_episode.is_done:
                transition.observations[agent_id] = adapter.observe(agent_id)
        for agent_id in transition.observations:
            if not transition.terminateds.get(agent_id):
                transition.truncateds[agent_id] = True
        transition.truncateds[ALL] = True

    def _complete_env_rewards(self, episode: MultiAgentEpisode, lengths: dict[str, int]) -> None:
        """A turn-based agent's step completes when its next turn comes, with rewards paid in between
        (e.g. the loser's -1): make its ``env_reward`` the whole step reward, minus the penalty part."""
        penalty = self.config.invalid_action_penalty
        for agent_id, agent_episode in episode.agent_episodes.items():
            if len(agent_episode) > lengths.get(agent_id, 0):
                valid = agent_episode.get_extra_model_outputs(VALID, -1)
                reward = agent_episode.get_rewards(-1) + (0.0 if valid else penalty)
                agent_episode.set_extra_model_outputs(key=ENV_REWARD, new_data=reward, at_indices=-1)

    def _log_rollout_metrics(self, episodes: list[MultiAgentEpisode], generated: int, t_gen: float, calls: int) -> None:
        steps = sum(len(ep) for ep in episodes)
        self.num_env_steps_sampled_lifetime += steps
        for key, value in rollout_stats(episodes, self.env.possible_agents).items():
            if isinstance(value, dict):
                for name, v in value.items():
                    self.metrics.log_value((key, name), v, window=1)
            elif key != "num_episodes":
                self.metrics.log_value(key, value, window=1)
        self.metrics.log_value(TOKENS_PER_S, generated / t_gen if t_gen > 0 else 0.0, window=1)
        self.metrics.log_value(NUM_GENERATE_CALLS, calls, window=1)
        self.metrics.log_value(NUM_ENV_STEPS, steps, reduce="sum")
        self.metrics.log_value(NUM_ENV_STEPS_LIFETIME, steps, reduce="lifetime_sum")

    def get_metrics(self) -> dict:
        return self.metrics.reduce()

    # --- state (weights) -----------------------------------------------------------------------------

    def get_state(self, components=None, *, not_components=None, **kwargs: Any) -> dict:
        """Counters and the seed RNG; module weights (trainable ones, per module) only when asked for."""
        state: dict[str, Any] = {
            NUM_ENV_STEPS_LIFETIME: self.num_env_steps_sampled_lifetime,
            "rng": self._rng.bit_generator.state,
            "num_rollouts": self._num_rollouts,
        }
        if components is not None and LLMEnvRunner._check_component(
            COMPONENT_RL_MODULE, _top_level(components), not_components
        ):
            wanted = _module_ids_in(components, list(self.module.keys()))
            state[COMPONENT_RL_MODULE] = {m: self.module[m].get_state(inference_only=True) for m in wanted}
        return state

    def set_state(self, state: dict) -> None:
        for module_id, module_state in (module_weights(state) or {}).items():
            if module_id in self.backends:
                self.module[module_id].set_state(module_state)
                self.backends[module_id].update_weights(module_state)
        self.num_env_steps_sampled_lifetime = state.get(NUM_ENV_STEPS_LIFETIME, self.num_env_steps_sampled_lifetime)
        if "rng" in state:
            self._rng.bit_generator.state = state["rng"]
        self._num_rollouts = state.get("num_rollouts", self._num_rollouts)

    def get_ctor_args_and_kwargs(self):
        return (), {"config": self.config}

    def get_checkpointable_components(self):
        return []

    def stop(self) -> None:
        for adapter in self.adapters:
            adapter.close()


def _as_list(components) -> list[str]:
    return [components] if isinstance(components, str) else list(components or ())


def _top_level(components) -> list[str]:
    return [c.split("/", 1)[0] for c in _as_list(components)]


def _module_ids_in(components, module_ids: list[str]) -> list[str]:
    """``rl_module`` -> all modules; ``rl_module/<id>`` entries -> those modules."""
    named = [c.split("/", 1)[1] for c in _as_list(components) if c.startswith(COMPONENT_RL_MODULE + "/")]
    return [m for m in module_ids if m in named] if named else module_ids
