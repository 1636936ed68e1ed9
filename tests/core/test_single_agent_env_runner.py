"""The LLM EnvRunner: group resets, lock-step batched generation, per-step records."""

from types import SimpleNamespace
from typing import ClassVar

import pytest
from ray.rllib.callbacks.callbacks import RLlibCallback

from rllib_llm.columns import (
    ACTION_LOGP,
    ANCHOR,
    FEW_SHOT_KEY,
    GROUP_ID,
    PROMPT,
    RESPONSE,
    RESPONSE_PREFIX_KEY,
    TASK_KEY,
    TEMPLATE_KEY,
    VALID,
)
from rllib_llm.core.group_env_runner import prompt_fields
from rllib_llm.core.single_agent_env_runner import LLMEnvRunner
from tests.conftest import tiny_config
from tests.fake_backends import ScriptedBackend


@pytest.fixture(scope="module")
def runner():
    config = tiny_config(group_size=3, num_groups=2, max_episode_steps=3)
    config.validate()
    return LLMEnvRunner(config=config)


def test_groups_share_initial_state_and_groups_differ(runner):
    episodes = runner.sample(seeds=[1, 2])
    assert len(episodes) == 6
    first = [ep.get_observations(0) for ep in episodes]
    assert first[0] == first[1] == first[2] and first[3] == first[4] == first[5]
    assert len({ep.custom_data[GROUP_ID] for ep in episodes}) == 2
    assert episodes[0].custom_data[GROUP_ID] == episodes[2].custom_data[GROUP_ID]


def test_one_batched_generate_per_step_and_records(runner):
    runner.backend = ScriptedBackend(runner.module.tokenizer, ["<action>+</action>", "nonsense"])
    episodes = runner.sample(seeds=[3, 4])
    calls = runner.backend.calls
    assert calls[0] == 6 and all(a >= b for a, b in zip(calls, calls[1:], strict=False))  # active envs only, shrinking
    for ep in episodes:
        n = len(ep)
        for key in (PROMPT, RESPONSE, ACTION_LOGP, ANCHOR, VALID):
            assert len(ep.get_extra_model_outputs(key)) == n
        assert ep.is_done
    valid = [v for ep in episodes for v in ep.get_extra_model_outputs(VALID)]
    assert True in valid and False in valid
    # anchors are the env's anchor_obs of the state the action was taken in: (target, position)
    ep = episodes[0]
    assert ep.get_extra_model_outputs(ANCHOR)[0] == ep.get_infos(0)["anchor_obs"]


def test_prompts_are_built_from_current_observation_not_concatenated_history(runner):
    runner.backend = ScriptedBackend(runner.module.tokenizer, ["<action>-</action>"])
    episodes = runner.sample(seeds=[5])
    ep = max(episodes, key=len)
    prompts = ep.get_extra_model_outputs(PROMPT)
    text = runner.module.tokenizer.decode(prompts[-1])
    assert ep.get_observations(len(prompts) - 1) in text
    # sliding window of 3 keeps length bounded: later prompts are not the sum of earlier ones
    assert len(prompts[-1]) < len(prompts[0]) * 2


def test_env_exception_truncates_episode_and_is_counted(runner, monkeypatch):
    runner.backend = ScriptedBackend(runner.module.tokenizer, ["<action>+</action>"])
    broken = runner.envs[0]

    def boom(action):
        raise RuntimeError("env crashed")

    monkeypatch.setattr(broken, "step", boom)
    episodes = runner.sample(seeds=[6])
    assert episodes[0].is_truncated and "env_error" in episodes[0].get_infos(-1)
    assert runner.envs[0] is not broken


def test_model_output_faults_are_invalid_actions_and_counted(runner):
    """Empty responses, responses cut at the token budget and undecodable bytes never crash a rollout."""
    runner.backend = ScriptedBackend(runner.module.tokenizer, ["", "<action>\ufffd\ufffd</action>", "<action>+"])
    runner.backend.generate_orig = runner.backend.generate

    def generate(prompts, params):
        outs = runner.backend.generate_orig(prompts, params)
        for out in outs:
            if out.text == "<action>+":
                out.finish_reason = "length"
        return outs

    runner.backend.generate = generate
    runner.metrics.reduce()  # start from clean metrics
    episodes = runner.sample(seeds=[8])
    assert not any(v for ep in episodes for v in ep.get_extra_model_outputs(VALID))
    peek = runner.metrics.peek
    assert peek("valid_action_rate") == 0.0
    assert peek("empty_response_rate") == pytest.approx(1 / 3, abs=0.2)
    assert peek("truncated_response_rate") == pytest.approx(1 / 3, abs=0.2)


def test_hanging_env_step_times_out_and_truncates(runner, monkeypatch):
    import time

    runner.backend = ScriptedBackend(runner.module.tokenizer, ["<action>+</action>"])
    monkeypatch.setattr(runner.config, "env_step_timeout_s", 0.5, raising=False)
    hung = runner.envs[1]
    monkeypatch.setattr(hung, "step", lambda action: time.sleep(30))
    start = time.perf_counter()
    episodes = runner.sample(seeds=[9])
    assert time.perf_counter() - start < 20
    assert episodes[1].is_truncated and "took longer than" in episodes[1].get_infos(-1)["env_error"]
    assert runner.envs[1] is not hung


def test_response_prefix_is_prefilled_in_the_prompt_and_parsed_with_the_reply():
    """``response_prefix="<action>"``: every prompt ends with the prefix's ids, the model writes only the rest
    ("+</action>"), and the action is parsed from prefix + generated text (without it: no valid action)."""
    from rllib_llm.env_connectors.prompts import response_prefix_ids

    config = tiny_config(group_size=2, num_groups=1, max_episode_steps=2, response_prefix="<action>")
    config.validate()
    prefixed = LLMEnvRunner(config=config)
    tokenizer = prefixed.module.tokenizer
    prefix_ids = response_prefix_ids(tokenizer, "<action>")
    assert prefix_ids and response_prefix_ids(tokenizer, "") == []
    prefixed.backend = ScriptedBackend(tokenizer, ["+</action>"])
    episodes = prefixed.sample(seeds=[1])
    for ep in episodes:
        assert all(list(p)[-len(prefix_ids):] == prefix_ids for p in ep.get_extra_model_outputs(PROMPT))
        assert all(ep.get_extra_model_outputs(VALID)) and set(ep.get_actions()) == {"+"}
    plain = LLMEnvRunner(config=tiny_config(group_size=2, num_groups=1, max_episode_steps=2))
    plain.backend = ScriptedBackend(tokenizer, ["+</action>"])
    episodes = plain.sample(seeds=[1])
    assert not any(v for ep in episodes for v in ep.get_extra_model_outputs(VALID))
    assert list(episodes[0].get_extra_model_outputs(PROMPT)[0])[-len(prefix_ids):] != prefix_ids


def test_prompt_fields_take_few_shot_from_the_config_else_the_env_and_per_agent_from_a_dict():
    env = SimpleNamespace(few_shot=[("env obs", "<action>+</action>")])
    own = SimpleNamespace(few_shot=None, response_prefix="<action>")
    fields = prompt_fields(own, env, "T {current_observation}", "task")
    assert fields == {
        TEMPLATE_KEY: "T {current_observation}",
        TASK_KEY: "task",
        FEW_SHOT_KEY: [("env obs", "<action>+</action>")],
        RESPONSE_PREFIX_KEY: "<action>",
        "action_format": "tags",
    }
    assert prompt_fields(own, SimpleNamespace(few_shot=[], action_format="raw"), "T", "")["action_format"] == "raw"
    assert prompt_fields(SimpleNamespace(few_shot=[], response_prefix=""), env, "T", "")[FEW_SHOT_KEY] == []
    per_agent = SimpleNamespace(few_shot={"solver": [("s", "r")]}, response_prefix="")
    assert prompt_fields(per_agent, env, "T", "", "solver")[FEW_SHOT_KEY] == [("s", "r")]
    assert prompt_fields(per_agent, env, "T", "", "verifier")[FEW_SHOT_KEY] == []


class CountingCallback(RLlibCallback):
    """Counts RLlib's sampling callbacks (class-level: RLlib builds its own instance from the class)."""

    calls: ClassVar[dict] = {}

    def _count(self, name, **kwargs):
        CountingCallback.calls[name] = CountingCallback.calls.get(name, 0) + 1

    def on_episode_start(self, *, episode, env_runner, env_index, rl_module, **kwargs):
        assert env_runner.envs[env_index] is not None and rl_module is env_runner.module and len(episode) == 0
        self._count("on_episode_start")

    def on_episode_step(self, *, episode, metrics_logger, **kwargs):
        metrics_logger.log_value("steps_seen_by_callback", 1, reduce="sum")
        self._count("on_episode_step")

    def on_episode_end(self, *, episode, **kwargs):
        assert episode.is_done
        self._count("on_episode_end")

    def on_sample_end(self, *, samples, **kwargs):
        CountingCallback.calls["samples"] = len(samples)
        self._count("on_sample_end")


def test_rllib_episode_and_sample_callbacks_fire():
    config = tiny_config(group_size=2, num_groups=2, max_episode_steps=3).callbacks(CountingCallback)
    config.validate()
    CountingCallback.calls.clear()
    runner = LLMEnvRunner(config=config)
    episodes = runner.sample()
    steps = sum(len(ep) for ep in episodes)
    calls = CountingCallback.calls
    assert calls["on_episode_start"] == calls["on_episode_end"] == len(episodes) == calls["samples"] == 4
    assert calls["on_episode_step"] == steps and calls["on_sample_end"] == 1
    assert runner.get_metrics()["steps_seen_by_callback"] == steps


def test_rllib_num_episodes_and_num_timesteps_requests(runner):
    assert len(runner.sample(num_episodes=4)) == 6  # whole groups of 3
    episodes = runner.sample(num_timesteps=20)
    assert sum(len(ep) for ep in episodes) >= 20 and len(episodes) % 3 == 0


def test_action_parsing_is_a_module_to_env_connector_a_user_can_swap():
    from rllib_llm.env_connectors.actions import ParseActions

    def first_symbol(reply: str) -> str | None:  # e.g. verl-agent's projection: any admissible token in the reply
        return next((s for s in "+-" if s in reply), None)

    config = tiny_config(group_size=2, num_groups=1, max_episode_steps=2).env_runners(
        module_to_env_connector=lambda env, spaces: [ParseActions(parser=first_symbol)]
    )
    config.validate()
    runner = LLMEnvRunner(config=config)
    runner.backend = ScriptedBackend(runner.module.tokenizer, ["I go - now", "no symbol"])
    episodes = runner.sample(seeds=[3])
    # the default parser finds no <action> block in either reply; this one takes "-" from the first
    assert episodes[0].get_actions()[0] == "-" and episodes[0].get_extra_model_outputs(VALID)[0]
    assert episodes[1].get_actions()[0] is None and not episodes[1].get_extra_model_outputs(VALID)[0]


class MemoryTrackingBackend(ScriptedBackend):
    """Records the EnvRunner's calls of the backend's hooks in order."""

    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer, ["<action>+</action>"])
        self.events: list[str] = []

    def generate(self, prompts, params):
        self.events.append("generate")
        return super().generate(prompts, params)

    def release_memory(self) -> None:
        self.events.append("release")

    def update_weights(self, state) -> None:
        self.events.append("sync")


def test_backends_release_memory_after_each_sample_and_weight_syncs_are_timed(runner):
    runner.backend = backend = MemoryTrackingBackend(runner.module.tokenizer)
    runner.sample(seeds=[5])
    assert backend.events[-1] == "release" and backend.events.count("release") == 1
    assert set(backend.events[:-1]) == {"generate"}  # not between the steps of one rollout
    runner.set_state({"rl_module": runner.module.get_state(inference_only=True)})
    assert backend.events[-1] == "sync"
    assert runner.get_metrics()["weight_sync_s"] >= 0.0


def test_sampling_goes_through_the_rl_modules_forward_passes():
    """The runner samples with ``module.forward_exploration`` (``forward_inference`` when greedy), so a
    module class that overrides ``_forward_exploration`` changes what the agent plays, as in RLlib."""
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rllib_llm.columns import GENERATIONS
    from rllib_llm.core.rl_module import LLMRLModule
    from rllib_llm.generation import GenerationOutput

    class AlwaysMinusWhenExploring(LLMRLModule):
        def _forward_exploration(self, batch, **kwargs):
            out = [GenerationOutput([1], [0.0], "-</action>", "stop") for _ in batch["prompt_ids"]]
            return {GENERATIONS: out}

    config = tiny_config(group_size=2, num_groups=1, max_episode_steps=1, response_prefix="<action>")
    config.rl_module(rl_module_spec=RLModuleSpec(module_class=AlwaysMinusWhenExploring))
    config.validate()
    runner = LLMEnvRunner(config=config)
    try:
        assert isinstance(runner.module, AlwaysMinusWhenExploring)
        runner.backend = ScriptedBackend(runner.module.tokenizer, ["+</action>"])
        explored = runner.sample(seeds=[1])
        greedy = runner.sample(seeds=[1], explore=False)
        assert {ep.get_actions(0) for ep in explored} == {"-"}
        assert {ep.get_actions(0) for ep in greedy} == {"+"} and runner.backend.calls == [2]
    finally:
        runner.stop()
