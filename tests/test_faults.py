"""Faults during training, through ``algo.train()`` on the tiny model: envs that raise or hang in 1 of 10
steps, resets that fail, and model outputs that are empty, over the token budget, unparseable or not UTF-8.
Every episode of a rollout comes back (none dropped), a faulted one truncated and never a success, and the
counts reach the result dict under ``env_runners/``."""

from __future__ import annotations

import numpy as np
import pytest

from rllib_llm.columns import ENV_ERROR, FINISH_REASON, RESPONSE_TEXT, VALID
from rllib_llm.generation import GenerationBackend, GenerationOutput
from rllib_llm.metrics import episode_success
from tests import faulty_env
from tests.conftest import tiny_config

pytestmark = pytest.mark.usefixtures("ray_session")

GROUPS, GROUP_SIZE = 4, 2


def faulty_config(**faults):
    settings = {"inner": "WinsAfter", "inner_config": {"length": 3}, "fault_rate": 0.1, "seed": 0, **faults}
    config = tiny_config(group_size=GROUP_SIZE, num_groups=GROUPS).group_rollouts(env_step_timeout_s=0.5)
    config.env, config.env_config = "Faulty", settings  # .environment() would merge NumberLine's env_config
    return config


class RecordedAlgo:
    """The algorithm and every episode its training steps sampled (per iteration)."""

    def __init__(self, algo) -> None:
        self.algo, self.episodes = algo, []
        sample = algo.sample_episodes

        def recording() -> list:
            episodes = sample()
            self.episodes.append(episodes)
            return episodes

        algo.sample_episodes = recording


@pytest.fixture(scope="module")
def recorded():
    faulty_env.FAULTS.clear()
    algo = faulty_config(reset_fault_rate=0.1, hang_every=2).build_algo()
    yield RecordedAlgo(algo)
    algo.stop()


def faulted(episode) -> bool:
    return any(ENV_ERROR in (info or {}) for info in episode.get_infos())


def test_training_survives_env_faults_and_never_counts_a_faulted_episode_as_a_success(recorded):
    results = [recorded.algo.train() for _ in range(2)]
    assert [r["training_iteration"] for r in results] == [1, 2]
    faults = [r["env_runners"]["num_env_faults"] for r in results]
    assert sum(faults) == len(faulty_env.FAULTS) > 0  # every injected fault counted once, raises and hangs
    assert {kind for _, kind in faulty_env.FAULTS} == {"raise", "hang"}
    print(f"env faults: {len(faulty_env.FAULTS)} injected and survived")
    for result, episodes in zip(results, recorded.episodes, strict=True):
        assert len(episodes) == GROUPS * GROUP_SIZE  # a faulted episode is not dropped
        for episode in episodes:
            if faulted(episode):
                assert episode.is_truncated and not episode.is_terminated and not episode_success(episode)
            else:  # WinsAfter: every episode that ran to its end is won
                assert episode_success(episode) and len(episode) == 3
        expected = np.mean([episode_success(e) for e in episodes])
        assert result["env_runners"]["success_rate"] == pytest.approx(expected)
    assert any(faulted(e) for episodes in recorded.episodes for e in episodes)
    learner = results[-1]["learners"]["default_policy"]
    assert np.isfinite(learner["policy_loss"])
    # The fault is the env's: the step that hit it gets reward 0, and the model's reply is judged as it was
    # (valid if it parsed), so the Learner's invalid-action penalty only hits an unparseable one.
    hit = [
        (reward, valid, action)
        for episodes in recorded.episodes for episode in episodes
        for reward, valid, action, info in zip(episode.get_rewards(), episode.get_extra_model_outputs(VALID),
                                               episode.get_actions(), episode.get_infos()[1:], strict=True)
        if ENV_ERROR in info
    ]
    assert hit
    for reward, valid, action in hit:
        assert valid == (action is not None) and reward == 0.0


def test_evaluation_faults_are_the_evaluations_own_not_a_training_iterations(recorded):
    """The held-out evaluation reports the faults that hit it; the next training result counts only the faults
    (and env steps) of its own rollout."""
    faulty_env.FAULTS.clear()
    runner = recorded.algo.env_runner
    lifetime = runner.num_env_steps_sampled_lifetime
    stats = recorded.algo.evaluate_seeds(list(range(100, 140)))
    evaluation_faults = len(faulty_env.FAULTS)
    assert evaluation_faults > 0 and stats["num_env_faults"] == evaluation_faults
    assert runner.num_env_steps_sampled_lifetime == lifetime  # evaluation steps are no training samples
    result = recorded.algo.train()
    steps = sum(len(e) for e in recorded.episodes[-1])
    assert result["env_runners"]["num_env_faults"] == len(faulty_env.FAULTS) - evaluation_faults
    assert result["env_runners"]["num_env_steps_sampled"] == steps
    assert runner.num_env_steps_sampled_lifetime == lifetime + steps


def byte_chars() -> dict[int, str]:
    """GPT-2's byte -> character table, which the tiny model's byte-level tokenizer uses as its vocabulary."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in bs]
    return dict(zip(bs + others, map(chr, bs + [256 + n for n in range(len(others))]), strict=True))


class ScriptedBackend(GenerationBackend):
    """Answers with scripted raw bytes, cut at ``max_new_tokens`` like a real backend (``finish_reason``
    ``"length"``), decoded by the byte tokenizer (invalid UTF-8 becomes U+FFFD)."""

    RESPONSES = [
        b"",  # empty
        b"I think I should move right, so <action>+</action>",  # over the token budget: cut before the tag
        b"no tags at all",  # unparseable
        b"\xff\xfe<action>\xc3</action>",  # not UTF-8: the action decodes to U+FFFD, not a valid action
    ]

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.calls, self.chars = tokenizer, 0, byte_chars()

    def generate(self, prompts, params):
        outputs = []
        for _ in prompts:
            raw = self.RESPONSES[self.calls % len(self.RESPONSES)]
            self.calls += 1
            ids = self.tokenizer.convert_tokens_to_ids([self.chars[b] for b in raw])
            cut = ids[: params.max_new_tokens]
            text = self.tokenizer.decode(cut)
            finish = "length" if len(ids) > params.max_new_tokens else "stop"
            outputs.append(GenerationOutput(token_ids=cut, logprobs=[-1.0] * len(cut), text=text, finish_reason=finish))
        return outputs

    def update_weights(self, state) -> None:
        pass


def test_model_output_faults_are_penalized_and_reach_the_result_dict(recorded):
    runner = recorded.algo.env_runner
    backend, sampling = runner.backend, runner.sampling
    runner.backend, runner.sampling = ScriptedBackend(runner.module.tokenizer), sampling.replace(max_new_tokens=24)
    try:
        result = recorded.algo.train()
    finally:
        runner.backend, runner.sampling = backend, sampling
    env = result["env_runners"]
    steps = [
        step
        for episode in recorded.episodes[-1]
        for step in zip(
            episode.get_extra_model_outputs(RESPONSE_TEXT),
            episode.get_extra_model_outputs(FINISH_REASON),
            episode.get_extra_model_outputs(VALID),
            episode.get_rewards(),
            [ENV_ERROR in (info or {}) for info in episode.get_infos()[1:]],
            strict=True,
        )
    ]
    texts = [s[0] for s in steps]
    # Every response is invalid wherever the env judged it (a step the env failed on is valid iff it parsed).
    assert not any(s[2] for s in steps if not s[4])
    assert env["valid_action_rate"] == pytest.approx(np.mean([s[2] for s in steps]))
    for key, flags in (
        ("empty_response_rate", [not t.strip() for t in texts]),
        ("truncated_response_rate", [s[1] == "length" for s in steps]),
        ("undecodable_response_rate", ["\ufffd" in t for t in texts]),
    ):
        assert np.mean(flags) > 0 and env[key] == pytest.approx(np.mean(flags)), key
    assert np.isfinite(result["learners"]["default_policy"]["policy_loss"])


def test_an_env_that_cannot_reset_fails_with_one_clear_error(recorded, monkeypatch):
    runner = recorded.algo.env_runner

    def broken() -> faulty_env.FaultyEnv:
        return faulty_env.FaultyEnv(inner="WinsAfter", reset_fault_rate=1.0, seed=1)

    monkeypatch.setattr(runner, "_new_env", broken)
    monkeypatch.setattr(runner, "envs", [broken() for _ in runner.envs])
    with pytest.raises(RuntimeError, match=r"env 'Faulty' failed to reset \(seed 7\) 3 times in a row"):
        runner.sample(seeds=[7])
