"""Reading a model's context window out of what each kind of model server
answers (``wire/model_window.py``), and the server root under a base URL."""

from __future__ import annotations

from typing import Any

import pytest
from model_cards import (
    LLAMA_CPP_MODELS,
    LLAMA_CPP_PROPS,
    LM_STUDIO_MODELS,
    LM_STUDIO_V0_LOADED,
    LM_STUDIO_V0_NOT_LOADED,
    OLLAMA_MODELS,
    OLLAMA_SHOW,
    OLLAMA_SHOW_NO_NUM_CTX,
    OPENAI_MODELS,
    OPENROUTER_MODELS,
    VLLM_MODELS,
)

from hermes_trio.llm.endpoints import server_root
from hermes_trio.wire.model_window import (
    ContextWindow,
    card_for,
    window_from_card,
    window_from_ollama_show,
    window_from_props,
)


def test_vllm_states_max_model_len_on_its_card() -> None:
    card = card_for(VLLM_MODELS, "Qwen/Qwen2.5-7B-Instruct")
    assert window_from_card(card) == ContextWindow(32768, "the model card (max_model_len)")
    # A LoRA adapter's card carries its base model's window.
    assert window_from_card(card_for(VLLM_MODELS, "sql-lora")) == ContextWindow(
        32768, "the model card (max_model_len)"
    )


def test_openrouter_states_context_length_on_its_card() -> None:
    card = card_for(OPENROUTER_MODELS, "meta-llama/llama-3.1-8b-instruct")
    # The model's own figure, not one provider's.
    assert window_from_card(card) == ContextWindow(131072, "the model card (context_length)")


def test_lm_studio_loaded_context_length_beats_the_models_maximum() -> None:
    assert window_from_card(LM_STUDIO_V0_LOADED, "LM Studio /api/v0/models") == ContextWindow(
        4096, "LM Studio /api/v0/models (loaded_context_length)"
    )
    assert window_from_card(LM_STUDIO_V0_NOT_LOADED) == ContextWindow(
        32768, "the model card (max_context_length)"
    )


@pytest.mark.parametrize(
    ("listing", "model"),
    [
        (OPENAI_MODELS, "gpt-4o-mini"),
        (OLLAMA_MODELS, "llama3.1:8b"),
        (LM_STUDIO_MODELS, "qwen2.5-7b-instruct"),
        # llama.cpp's "meta" holds the file's training context, which is
        # not what the server runs with: /props says that.
        (LLAMA_CPP_MODELS, "anything"),
    ],
)
def test_cards_without_a_window_say_nothing(listing: dict[str, Any], model: str) -> None:
    card = card_for(listing, model)
    assert card is not None
    assert window_from_card(card) is None


def test_the_card_is_found_by_id_or_as_the_only_one() -> None:
    assert card_for(VLLM_MODELS, "sql-lora") is VLLM_MODELS["data"][1]
    # llama.cpp answers to any name and lists its one file.
    assert card_for(LLAMA_CPP_MODELS, "default") is LLAMA_CPP_MODELS["data"][0]
    assert card_for(VLLM_MODELS, "other") is None
    for listing in (None, [], {"data": "x"}, {"data": [1, "a"]}, {"error": "no"}):
        assert card_for(listing, "m") is None


def test_llama_cpp_props_state_one_slots_window() -> None:
    assert window_from_props(LLAMA_CPP_PROPS) == ContextWindow(4096, "llama.cpp /props")
    assert window_from_props({"n_ctx": 8192}) == ContextWindow(8192, "llama.cpp /props")


def test_ollama_num_ctx_beats_the_architectures_limit() -> None:
    assert window_from_ollama_show(OLLAMA_SHOW) == ContextWindow(8192, "Ollama /api/show (num_ctx)")
    assert window_from_ollama_show(OLLAMA_SHOW_NO_NUM_CTX) == ContextWindow(
        131072, "Ollama /api/show (context_length)"
    )
    # No general.architecture: the one key that names a context length.
    info = {"qwen2.context_length": 32768, "qwen2.block_count": 28}
    assert window_from_ollama_show({"model_info": info}) == ContextWindow(
        32768, "Ollama /api/show (context_length)"
    )


@pytest.mark.parametrize(
    "value",
    [None, 0, -1, True, 4096.0, "4096", [4096], {"n": 1}],
)
def test_a_window_that_is_not_a_positive_whole_number_is_not_one(value: object) -> None:
    assert window_from_card({"id": "m", "max_model_len": value}) is None
    assert window_from_props({"default_generation_settings": {"n_ctx": value}}) is None
    assert window_from_ollama_show({"model_info": {"llama.context_length": value}}) is None


@pytest.mark.parametrize(
    "parameters",
    ["num_ctx", "num_ctx 0", "num_ctx -5", "num_ctx 4k", "num_ctx ²", "stop num_ctx"],
)
def test_a_broken_num_ctx_line_is_skipped(parameters: str) -> None:
    assert window_from_ollama_show({"parameters": parameters}) is None


@pytest.mark.parametrize("answer", [None, [], "text", 4096, {"detail": "Not Found"}])
def test_answers_of_another_shape_say_nothing(answer: object) -> None:
    assert window_from_card(answer) is None
    assert window_from_props(answer) is None
    assert window_from_ollama_show(answer) is None


@pytest.mark.parametrize(
    ("base_url", "root"),
    [
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080"),
        ("http://localhost:11434/v1/", "http://localhost:11434"),
        ("http://h:1234", "http://h:1234"),
        ("https://gw.example/llama/v1?api_key=k#x", "https://gw.example/llama?api_key=k"),
        ("https://openrouter.ai/api/v1", "https://openrouter.ai/api"),
        # "v1" only as a whole segment.
        ("http://h/apiv1", "http://h/apiv1"),
        ("http://[::1]:8000/v1", "http://[::1]:8000"),
    ],
)
def test_the_server_root_is_the_base_url_without_v1(base_url: str, root: str) -> None:
    assert server_root(base_url) == root
