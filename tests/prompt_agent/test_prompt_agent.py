"""The prompt-based agent against a local OpenAI-compatible server (127.0.0.1): retries after injected
500/429 errors, timeouts, the rate limit, and the same prompts and memory as training."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from rllib_llm.prompt_agent import (
    APIError,
    ChatClient,
    RateLimiter,
    backoff_delay,
    evaluate_prompt_agent,
    messages_output,
    prompt_agent_config,
)
from rllib_llm.run.cli import main
from tests.prompt_agent.openai_server import FakeChatServer

MESSAGES = [{"role": "user", "content": "Target 3, position 1."}]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_rate_limiter_spaces_requests_after_the_burst():
    clock = FakeClock()
    limiter = RateLimiter(rate=2.0, capacity=3, clock=clock, sleep=clock.sleep)
    waits = [limiter.acquire() for _ in range(6)]
    assert waits == [0.0, 0.0, 0.0, 0.5, 0.5, 0.5]
    clock.now += 10.0  # a quiet spell refills the bucket, up to its capacity only
    assert [limiter.acquire() for _ in range(4)] == [0.0, 0.0, 0.0, 0.5]


def test_backoff_grows_exponentially_with_jitter_and_a_cap():
    rng = random.Random(0)
    for attempt in range(8):
        full = min(10.0, 0.5 * 2**attempt)
        assert full / 2 <= backoff_delay(attempt, 0.5, 10.0, rng) <= full


def test_client_retries_500_then_429_honouring_retry_after(monkeypatch):
    monkeypatch.setenv("TEST_API_KEY", "sk-local")
    sleeps: list[float] = []
    with FakeChatServer(faults=[(500, {}), (429, {"Retry-After": "2"})]) as server:
        client = ChatClient(server.url, "oracle", api_key_env="TEST_API_KEY", backoff_base=0.25,
                            sleep=sleeps.append, rng=random.Random(0))
        result = client.chat(MESSAGES, temperature=0.0, max_tokens=64)
    assert result.text.startswith("<think>") and "<action>+</action>" in result.text and result.attempts == 3
    assert len(sleeps) == 2 and 0.125 <= sleeps[0] <= 0.25 and sleeps[1] == 2.0  # backoff, then Retry-After
    assert client.stats == {"requests": 3, "retries": 2, "failures": 0}
    assert [r["headers"]["Authorization"] for r in server.requests] == ["Bearer sk-local"] * 3
    body = server.requests[-1]["body"]
    assert body == {"model": "oracle", "messages": MESSAGES, "temperature": 0.0, "max_tokens": 64}


def test_client_fails_at_once_on_a_client_error_and_gives_up_after_max_retries():
    with FakeChatServer(faults=[(401, {})]) as server:
        client = ChatClient(server.url, "oracle", sleep=lambda s: None)
        with pytest.raises(APIError, match="HTTP 401") as error:
            client.chat(MESSAGES)
        assert error.value.status == 401 and len(server.requests) == 1
    with FakeChatServer(faults=[(503, {})] * 3) as server:
        client = ChatClient(server.url, "oracle", max_retries=2, sleep=lambda s: None)
        with pytest.raises(APIError, match="gave up after 3 attempts"):
            client.chat(MESSAGES)
        assert client.stats == {"requests": 3, "retries": 2, "failures": 1}


def test_client_retries_a_timed_out_request():
    with FakeChatServer(delays=[1.5]) as server:
        client = ChatClient(server.url, "oracle", timeout=0.3, sleep=lambda s: None)
        assert "<action>+</action>" in client.chat(MESSAGES).text
    assert client.stats["retries"] == 1 and client.stats["requests"] == 2


def test_client_rejects_a_bad_base_url():
    with pytest.raises(ValueError, match="base_url must start with http"):
        ChatClient("localhost:8000/v1", "m")


def test_api_prompts_are_the_training_prompts():
    """Step 1's messages, run through the tiny model's chat template, are the ids the training EnvRunner
    generates from on the same seed (same template, few-shot pair, memory and system prompt)."""
    from rllib_llm.columns import PROMPT
    from rllib_llm.core.single_agent_env_runner import LLMEnvRunner
    from rllib_llm.env_connectors import encode_chat
    from rllib_llm.run.cli import load_tuned_example

    config = load_tuned_example("tests/fixtures/tiny_numberline.py")[0].group_rollouts(max_episode_steps=1)
    trainer = LLMEnvRunner(config=config)
    try:
        [trained] = trainer.sample(seeds=[5], explore=False, group_size=1)
        with FakeChatServer() as server:
            client = ChatClient(server.url, "oracle")
            _, [api] = evaluate_prompt_agent(config, client, [5])
        messages = api.get_extra_model_outputs(PROMPT)[0]
        assert messages == server.requests[0]["body"]["messages"]
        assert encode_chat(trainer.module.tokenizer, messages) == list(trained.get_extra_model_outputs(PROMPT)[0])
    finally:
        trainer.stop()


def test_cli_prompt_agent_scores_the_oracle_and_survives_injected_errors(tmp_path, capsys):
    with FakeChatServer(faults=[(500, {}), (429, {"Retry-After": "0"})]) as server:
        argv = ["prompt-agent", "--env", "NumberLine", "--base-url", server.url, "--model", "oracle",
                "--episodes", "4", "--concurrency", "2", "--output", str(tmp_path)]
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Prompt agent oracle on NumberLine: success rate 1.000, valid-action rate 1.000" in out
    assert "over 4 held-out seeds" in out and "2 retried, 0 failed" in out
    requests = [r["body"] for r in server.requests]
    assert all(b["temperature"] == 0.0 and b["max_tokens"] == 512 for b in requests)
    first = requests[0]["messages"]
    assert first[0]["role"] == "system" and first[2] == {"role": "assistant", "content": "<action>-</action>"}
    assert any("[Step 1] observation: Target" in b["messages"][-1]["content"] for b in requests)  # memory
    records = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["success"] for r in records)
    assert records[0]["steps"][0]["prompt"].startswith("system: ") and records[0]["steps"][0]["action"] in "+-"
    assert json.loads((tmp_path / "summary.json").read_text())["success_rate"] == 1.0


def test_cli_prompt_agent_plays_a_tuned_example_and_reports_bad_input(capsys):
    with FakeChatServer() as server:
        argv = ["prompt-agent", "--example", "tests/fixtures/tiny_numberline.py", "--base-url", server.url,
                "--model", "oracle", "--episodes", "2"]
        assert main(argv) == 0
        assert "success rate 1.000" in capsys.readouterr().out
        assert all(b["body"]["max_tokens"] == 6 for b in server.requests)  # the example's max_new_tokens
    assert main(["prompt-agent", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]) == 2
    assert "exactly one of --env NAME or --example" in capsys.readouterr().err


def test_failed_requests_become_invalid_actions_not_a_crash():
    with FakeChatServer(faults=[(400, {})]) as server:
        client = ChatClient(server.url, "oracle")
        config = prompt_agent_config(env="NumberLine", env_config={"max_position": 2, "max_steps": 3})
        stats, episodes = evaluate_prompt_agent(config, client, [0])
    assert stats["api_failures"] == 1 and stats["valid_action_rate"] < 1.0
    assert episodes[0].get_actions()[0] is None


def test_image_observations_are_sent_as_image_url_parts():
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    from rllib_llm.columns import FEW_SHOT_KEY, TASK_KEY, TEMPLATE_KEY
    from rllib_llm.env_connectors import ChatPromptBuilder

    builder = messages_output(ChatPromptBuilder(template="{current_observation}", multimodal=True))
    assert isinstance(builder, ChatPromptBuilder) and builder.system_prompt is None
    observation = {"text": "a red square", "image": np.full((4, 4, 3), 255, dtype=np.uint8)}
    episode = SingleAgentEpisode(observations=[observation], infos=[{}], len_lookback_buffer=0)
    episode.custom_data.update({TEMPLATE_KEY: "{current_observation}", TASK_KEY: "", FEW_SHOT_KEY: []})
    messages, text = builder.build(None, episode, "", 0)
    image, part = messages[-1]["content"]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/png;base64,")
    assert part == {"type": "text", "text": "a red square"} and text == "a red square"


def test_prompt_agent_drops_a_tuned_examples_response_prefix():
    """A chat API writes the whole reply, so a prefilled ``<action>`` (training only) would be parsed twice."""
    from rllib_llm.run.cli import load_tuned_example

    base = load_tuned_example("tests/fixtures/tiny_numberline.py")[0].group_rollouts(response_prefix="<action>")
    with FakeChatServer() as server:
        config = prompt_agent_config(base=base)
        assert config.response_prefix == "" and base.response_prefix == "<action>"
        summary, _ = evaluate_prompt_agent(config, ChatClient(server.url, "oracle"), [1, 2])
    assert summary["success_rate"] == 1.0
