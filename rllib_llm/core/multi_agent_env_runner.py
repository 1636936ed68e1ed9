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

import functools
import inspect
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from ray.rllib.connectors.env_to_module import EnvToModulePipeline
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.env import INPUT_ENV_SINGLE_SPACES, INPUT_ENV_SPACES
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.utils import force_list

from rllib_llm.columns import (
    AGENT_ID,
    GENERATIONS,
    GROUP_ID,
    INFO_ACTION_VALID,
    PROMPT_IDS,
    SAMPLING_PARAMS,
    SEED,
    VALID,
)
from rllib_llm.core.group_env_runner import GroupEnvRunner, RolloutCounters, prompt_fields, step_record
from rllib_llm.env_connectors.memory import INVALID_ACTION
from rllib_llm.envs.multi_agent.base import agent_prompt_template, agent_task_description
from rllib_llm.envs.multi_agent.pettingzoo_adapter import ALL, PettingZooAdapter, Transition, make_multi_agent_env
from rllib_llm.generation import GenerationBackend, SamplingParams, make_backend

logger = logging.getLogger(__name__)


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


class LLMMultiAgentEnvRunner(GroupEnvRunner):
    """EnvRunner for multi-agent LLM systems (see module docstring). Configured by a MultiAgentLLMConfig.
    Its env slots are :class:`PettingZooAdapter`s (``self.adapters``); env faults are handled as in the
    single-agent runner (timeouts, reset retries, a failed step truncating its episode)."""

    def __init__(self, *, config, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        self._mapping = EpisodeMapping(self.config.policy_mapping_fn)
        self._pipelines: dict[str, EnvToModulePipeline] = {}
        for module_id in self.module.keys():
            module = self.module[module_id]
            build = functools.partial(make_backend, self.config.generation_backend, model=module.model,
                                      tokenizer=module.tokenizer, **self.config.generation_backend_options)
            module.generation_backend = self._backend_for(module, build)

    @property
    def backends(self) -> dict[str, GenerationBackend]:
        """Module id -> the generation backend its module samples with (set ``module[id].generation_backend``)."""
        return self._backends()

    # --- construction --------------------------------------------------------------------------------

    @property
    def adapters(self) -> list[PettingZooAdapter]:
        """The env slots: one PettingZoo env each, behind the adapter that plays AEC and parallel envs alike."""
        return self.envs

    def _new_env(self) -> PettingZooAdapter:
        return PettingZooAdapter(make_multi_agent_env(self.config.env, self.config.env_config))

    def _env_of(self, slot: PettingZooAdapter) -> Any:
        return slot.env

    def _reset_slot(self, slot: PettingZooAdapter, seed: int) -> tuple[dict, dict]:
        return slot.reset(seed)

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
        """The inference-only MultiRLModule, each module on RLlib's device and in its model's
        ``inference_dtype``, as the single-agent runner (backends run where their module is)."""
        spec = self.config.get_multi_rl_module_spec(spaces=self.get_spaces(), inference_only=True)
        self.module = spec.build()
        for module_id in self.module.keys():
            module = self.module[module_id]
            module.to(device=self.module_device(), dtype=module.spec.inference_torch_dtype)

    def pipeline(self, agent_id: str) -> EnvToModulePipeline:
        """The agent's env-to-module pipeline: ``agent_env_to_module[agent_id]`` or the config's default
        factory, built once per agent (so prompt builders keep per-agent budgets and warnings)."""
        if agent_id not in self._pipelines:
            factory = self.config.agent_env_to_module.get(agent_id, self.config.env_to_module_factory())
            spaces = self.get_spaces()
            pieces = factory(self.env, spaces, None)
            pieces = list(pieces) if isinstance(pieces, (list, tuple)) else [pieces]
            observation_space, action_space = spaces[INPUT_ENV_SINGLE_SPACES]
            self._pipelines[agent_id] = EnvToModulePipeline(
                input_observation_space=observation_space, input_action_space=action_space, connectors=pieces
            )
        return self._pipelines[agent_id]

    def _modules(self) -> dict[str, Any]:
        return {module_id: self.module[module_id] for module_id in self.module.keys()}

    def _module_state(self, components: Any) -> dict[str, dict]:
        """Trainable weights per module: all modules for ``rl_module``, the named ones for
        ``rl_module/<id>`` entries."""
        named = [c.split("/", 1)[1] for c in force_list(components) if c.startswith("rl_module/")]
        wanted = [m for m in self.module.keys() if not named or m in named]
        return {m: self.module[m].get_state(inference_only=True) for m in wanted}

    def _agent_ids(self) -> list[str]:
        return list(self.env.possible_agents)

    # --- episodes ------------------------------------------------------------------------------------

    def _new_episode(self, index: int, seed: int, group_id: str, reset: tuple[dict, dict]):
        observations, infos = reset
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

    def _play(self, episodes: list[MultiAgentEpisode], params: SamplingParams, explore: bool) -> RolloutCounters:
        """Lock-step play: the agents to act in every live env, their prompts, one generate call per
        module, then each env's joint step."""
        counters = RolloutCounters()
        for step in range(self.config.max_episode_steps):
            requests = [
                (i, a) for i, ep in enumerate(episodes) if not ep.is_done for a in self.adapters[i].agents_to_act()
            ]
            if not requests:
                break
            outputs, prompts = self._generate(episodes, requests, params, explore, counters)
            agent_episodes = [self.agent_episode(i, episodes[i], a) for i, a in requests]
            parsed = self._actions(agent_episodes, [outputs[key] for key in requests], explore)
            actions = dict(zip(requests, parsed, strict=True))
            counters.generated_tokens += sum(len(out.token_ids) for out in outputs.values())
            by_env: dict[int, list[str]] = defaultdict(list)
            for i, agent_id in requests:
                by_env[i].append(agent_id)
            for i, agent_ids in by_env.items():
                self._joint_step(
                    i, episodes[i], agent_ids, outputs, prompts, actions, last=step == self.config.max_episode_steps - 1
                )
                self._episode_callback("on_episode_step", i, episodes[i])
        return counters

    def _generate(self, episodes, requests, params, explore, counters: RolloutCounters) -> tuple[dict, dict]:
        """Prompts by each agent's pipeline, then one generate call per module: ({(env, agent): output},
        {(env, agent): prompt ids}); the calls and their seconds go to ``counters``."""
        by_key: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, agent_id in requests:
            module_id = episodes[i].module_for(agent_id)
            if module_id not in self.module:
                raise ValueError(
                    f"policy_mapping_fn mapped agent {agent_id!r} to module {module_id!r}, which is not one of the "
                    f"configured modules {sorted(self.module.keys())} (config.multi_agent(policies=...))."
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
            module = self.module[module_id]
            forward = module.forward_exploration if explore else module.forward_inference
            results = forward({PROMPT_IDS: [prompts[k] for k in keys], SAMPLING_PARAMS: params})[GENERATIONS]
            outputs.update(zip(keys, results, strict=True))
        counters.generate_seconds += time.perf_counter() - start
        counters.generate_calls += len(per_module)
        return outputs, prompts

    def _joint_step(
        self, i: int, episode: MultiAgentEpisode, agent_ids: list[str], outputs, prompts, parsed, *, last: bool
    ) -> None:
        actions, extra, recorded = {}, {}, {}
        for agent_id in agent_ids:
            out = outputs[(i, agent_id)]
            actions[agent_id] = parsed[(i, agent_id)]
            recorded[agent_id] = actions[agent_id] if actions[agent_id] is not None else INVALID_ACTION
            extra[agent_id] = step_record(prompts[(i, agent_id)], out, episode.agent_episodes[agent_id])
        transition = self._transition(i, episode, actions)
        rewards = {
            a: r
            for a, r in transition.rewards.items()
            if not (a in episode.agent_episodes and episode.agent_episodes[a].is_done)
        }
        for agent_id in agent_ids:
            info = transition.infos.get(agent_id, {})
            valid = bool(info.get(INFO_ACTION_VALID, actions[agent_id] is not None)) and actions[agent_id] is not None
            extra[agent_id][VALID] = valid
        if last and not transition.done:
            self._truncate(i, episode, transition)
        episode.add_env_step(
            observations=transition.observations,
            actions=recorded,
            rewards=rewards,
            infos={a: transition.infos.get(a, {}) for a in transition.observations},
            terminateds=transition.terminateds,
            truncateds=transition.truncateds,
            extra_model_outputs=extra,
        )

    def _transition(self, i: int, episode: MultiAgentEpisode, actions: dict[str, Any]) -> Transition:
        """The env's transition; an env failure truncates the episode (each live agent keeps its last
        observation, gets reward 0 and the error in its info)."""
        transition, error = self._env_step(i, episode, actions)
        if error is None:
            return transition
        observations = {a: ep.get_observations(-1) for a, ep in episode.agent_episodes.items() if not ep.is_done}
        return Transition(
            observations=observations,
            rewards=dict.fromkeys(actions, 0.0),
            truncateds={**dict.fromkeys(observations, True), ALL: True},
            infos={a: self._step_failure_info(error) for a in observations},
        )

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

