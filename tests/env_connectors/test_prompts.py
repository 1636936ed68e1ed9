"""Templates as data, the chat template, few-shot, the env runner's custom_data keys, and images."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from rllib_llm.columns import IMAGES, PROMPT_IDS, PROMPT_TEXT
from rllib_llm.core.models import load_tokenizer
from rllib_llm.env_connectors import (
    ACTION_ONLY_FORMAT,
    TEMPLATES,
    ChatPromptBuilder,
    PromptTemplate,
    SlidingWindowMemory,
    get_template,
    register_template,
)
from rllib_llm.env_connectors.prompts import DEFAULT_SYSTEM_PROMPT
from rllib_llm.envs import make_env
from tests.env_connectors.conftest import add_step, call, new_episode, pipeline

GENERATION_PROMPT = "<|im_start|>assistant\n"


#: Envs that build offline in seconds (ALFWorld and AppWorld need their packages or servers: see below).
OFFLINE_ENVS = ["NumberLine", "Sokoban", "EZPoints", "Points24", "Blackjack", "WebShop", "Search"]


def test_builtin_envs_have_templates():
    assert {*OFFLINE_ENVS, "ALFWorld", "AppWorld"} <= set(TEMPLATES)


@pytest.mark.parametrize("name", OFFLINE_ENVS)
def test_env_template_renders_with_the_env_slots_no_history_then_history(name, module, tokenizer):
    """Each env's template, chosen by name through custom_data (config.group_rollouts(prompt_template=name))."""
    env = make_env(name)
    observation, info = env.reset(seed=0)
    episode = new_episode(observation, info, template=name, task=env.task_description)
    pipe = pipeline(SlidingWindowMemory(), ChatPromptBuilder())
    first = call(pipe, module, [episode])
    text = first[PROMPT_TEXT][0]
    obs_text = observation["text"] if isinstance(observation, dict) else observation
    template = get_template(name)
    assert obs_text in text and ("{task_description}" not in template.no_history or env.task_description in text)
    assert "Before this step" not in text  # no-history variant at step 0
    assert tokenizer.decode(first[PROMPT_IDS][0]).endswith(GENERATION_PROMPT)
    action = (info.get("available_actions") or ["x"])[0]
    next_observation, reward, _, _, next_info = env.step(action)
    add_step(episode, next_observation, action, reward, next_info)
    text = call(pipe, module, [episode])[PROMPT_TEXT][0]
    assert (
        "Before this step you took 1 step(s); your memory below covers 1 of them." in text
        and f"[Step 1] observation: {obs_text}" in text
    )
    if "{output_format}" in get_template(name).history:
        assert "<think>" in text and "<action>" in text
    if info.get("available_actions") and "{available_actions}" in template.history:
        assert f"[{', '.join(next_info['available_actions'])}]" in text
    if info.get("available_actions") and "{admissible_actions}" in template.history:  # verl-agent's quoted lines
        assert "\n ".join(f"'{a}'" for a in next_info["available_actions"]) in text


@pytest.mark.parametrize(
    ("name", "info"),
    [
        ("ALFWorld", {"available_actions": ["go to desk 1", "look"]}),
        (
            "AppWorld",
            {"prompt_slots": {"supervisor_name": "Ann", "supervisor_email": "a@b.c", "supervisor_phone": "1"}},
        ),
    ],
)
def test_server_env_templates_render_with_their_slots(name, info, module):
    episode = new_episode("You see a desk.", info, template=name, task="put a pen on the desk")
    pipe = pipeline(SlidingWindowMemory(), ChatPromptBuilder())
    add_step(episode, "Nothing happens.", "look", 0.0, info)
    text = call(pipe, module, [episode])[PROMPT_TEXT][0]
    assert "put a pen on the desk" in text and "[Step 1] observation: You see a desk. | action: look" in text
    assert "Nothing happens." in text and "<action>" in text


def test_generic_template_hand_checked(module):
    episode = new_episode("A door.", {"available_actions": ["open", "wait"]}, template="generic", task="Leave.")
    builder = ChatPromptBuilder(output_format=ACTION_ONLY_FORMAT)
    text = call(pipeline(builder), module, [episode])[PROMPT_TEXT][0]
    assert text == (
        "You are an agent acting in a text environment. Your task: Leave.\n"
        "You are now at step 1. Current observation:\nA door.\nYour admissible actions are [open, wait].\n"
        "Give exactly one action for this step inside <action> </action> tags."
    )


def test_chat_template_system_message_and_generation_prompt(module, tokenizer):
    episode = new_episode("obs", template="{current_observation}")
    ids = call(pipeline(ChatPromptBuilder()), module, [episode])[PROMPT_IDS][0]
    assert tokenizer.decode(ids) == (
        f"<|im_start|>system\n{DEFAULT_SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\nobs<|im_end|>\n{GENERATION_PROMPT}"
    )
    no_system = call(pipeline(ChatPromptBuilder(system_prompt="")), module, [episode])[PROMPT_IDS][0]
    assert tokenizer.decode(no_system) == f"<|im_start|>user\nobs<|im_end|>\n{GENERATION_PROMPT}"
    own = PromptTemplate(history="{current_observation}", no_history="{current_observation}", system="Be brief.")
    assert "system\nBe brief." in tokenizer.decode(
        call(pipeline(ChatPromptBuilder(template=own)), module, [episode])[PROMPT_IDS][0]
    )


def test_env_runner_keys_legacy_string_template_and_few_shot(module, tokenizer):
    """What the env runner puts in custom_data: the env's own format string, task, few-shot pairs."""
    env = make_env("NumberLine")
    observation, info = env.reset(seed=1)
    episode = new_episode(
        observation, info, template=env.prompt_template, task=env.task_description, few_shot=env.few_shot
    )
    pipe = pipeline(SlidingWindowMemory(), ChatPromptBuilder())
    decoded = tokenizer.decode(call(pipe, module, [episode])[PROMPT_IDS][0])
    shot_observation, shot_response = env.few_shot[0]
    assert decoded.index(shot_observation) < decoded.index(shot_response) < decoded.rindex(observation)
    assert f"0-{env.max_position}" in decoded  # the env's prompt_slots fill its template
    next_observation, reward, _, _, next_info = env.step("+")
    add_step(episode, next_observation, "+", reward, next_info)
    text = call(pipe, module, [episode])[PROMPT_TEXT][0]
    assert text.startswith(env.prompt_template.split("{")[0]) and f"[Step 1] observation: {observation}" in text


def test_builder_template_overrides_episode_template_and_dict_templates(module):
    episode = new_episode("obs", template="EPISODE {current_observation}")
    assert call(pipeline(ChatPromptBuilder(template="B {current_observation}")), module, [episode])[PROMPT_TEXT] == [
        "B obs"
    ]
    pair = {"history": "H {memory}{current_observation}", "no_history": "N {current_observation}"}
    pipe = pipeline(SlidingWindowMemory(window=1), ChatPromptBuilder(template=pair))
    assert call(pipe, module, [episode])[PROMPT_TEXT] == ["N obs"]
    add_step(episode, "obs2", "+")
    assert call(pipe, module, [episode])[PROMPT_TEXT] == [
        "H Your last 1 step(s):\n[Step 1] observation: obs | action: +\nobs2"
    ]


def test_registered_template_and_clear_errors(module):
    register_template("my-env", {"history": "{memory}{current_observation}!", "no_history": "{current_observation}?"})
    try:
        episode = new_episode("obs", template="MY-ENV")  # names are case-insensitive
        assert call(pipeline(ChatPromptBuilder()), module, [episode])[PROMPT_TEXT] == ["obs?"]
    finally:
        del TEMPLATES["my-env"]
    with pytest.raises(KeyError, match="registered: .*NumberLine"):
        ChatPromptBuilder(template="NoSuchEnv")
    with pytest.raises(KeyError, match="slot {max_position}"):
        call(pipeline(ChatPromptBuilder(template="NumberLine")), module, [new_episode("obs")])
    with pytest.raises(ValueError, match="history"):
        PromptTemplate.from_any({"no_history": "x"})


VL_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for part in m['content'] %}{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% endif %}"
)


@pytest.fixture
def image_episode():
    image = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    return new_episode({"text": "a grid", "image": image}, template="{current_observation}"), image


def test_image_observation_uses_multimodal_content_when_supported(image_episode):
    from types import SimpleNamespace

    episode, image = image_episode
    vl_tokenizer = load_tokenizer("tiny-random-llama")
    vl_tokenizer.chat_template = VL_TEMPLATE
    batch = call(pipeline(ChatPromptBuilder(system_prompt="")), SimpleNamespace(tokenizer=vl_tokenizer), [episode])
    assert (
        vl_tokenizer.decode(batch[PROMPT_IDS][0]) == f"<|im_start|>user\n<image>a grid<|im_end|>\n{GENERATION_PROMPT}"
    )
    assert batch[IMAGES][0] is image and batch[PROMPT_TEXT] == ["a grid"]
    messages = ChatPromptBuilder().messages(episode, "", 0, image=True)
    assert messages[-1]["content"] == [{"type": "image"}, {"type": "text", "text": "a grid"}]


def test_image_with_text_only_tokenizer_warns_and_still_passes_pixels(image_episode, module, tokenizer, caplog):
    episode, image = image_episode
    text_only = new_episode("a grid", template="{current_observation}")
    with caplog.at_level(logging.WARNING, logger="rllib_llm.env_connectors.prompts"):
        batch = call(pipeline(ChatPromptBuilder()), module, [episode, text_only])
    assert batch[PROMPT_IDS][0] == batch[PROMPT_IDS][1]  # the text prompt, no list repr
    assert batch[IMAGES][0] is image and batch[IMAGES][1] is None
    assert "no image support" in caplog.text
    forced = call(pipeline(ChatPromptBuilder(multimodal=False)), module, [episode])
    assert forced[PROMPT_IDS][0] == batch[PROMPT_IDS][0]
