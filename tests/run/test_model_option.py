"""``--model``: another policy model for a tuned example without editing it (its LoRA and dtype kept)."""

import argparse

from rllib_llm.run.cli import add_train_options, with_model
from tests.conftest import tiny_config


def test_model_option_replaces_the_model_and_keeps_lora_and_dtype():
    config = tiny_config().llm(model={"name_or_path": "tiny-random-llama", "gguf_file": "x.gguf",
                                      "lora": {"r": 4}, "dtype": "bfloat16"})  # fmt: skip
    with_model(config, "/models/qwen15.gguf")
    assert config.llm_model["name_or_path"] == "/models/qwen15.gguf" and config.llm_model["gguf_file"] is None
    assert config.llm_model["lora"] == {"r": 4} and config.llm_model["dtype"] == "bfloat16"


def test_the_train_options_take_a_model():
    parser = argparse.ArgumentParser()
    add_train_options(parser)
    assert parser.parse_args(["--model", "Qwen/Qwen2.5-1.5B-Instruct"]).model == "Qwen/Qwen2.5-1.5B-Instruct"
    assert parser.parse_args([]).model is None
