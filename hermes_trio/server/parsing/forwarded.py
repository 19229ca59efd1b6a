"""The generation settings both endpoints forward to the model as the client
sent them (``temperature``, ``max_tokens``, ``tool_choice``...), with the
checks OpenAI documents for each (pure)."""

from __future__ import annotations

from typing import Any

from .validation import (
    FieldCheck,
    a_bool,
    a_string,
    an_integer,
    an_object,
    bad,
    check_fields,
    number,
    positive_int,
)

__all__ = ["FORWARDED"]


def _stop(value: Any, param: str) -> None:
    if not (
        isinstance(value, str)
        or (isinstance(value, list) and len(value) <= 4 and all(isinstance(s, str) for s in value))
    ):
        raise bad("'stop' must be a string or a list of at most 4 strings", param, "invalid_type")


def _response_format(value: Any, param: str) -> None:
    an_object(value, param)
    kind = value.get("type")
    a_string(kind, f"{param}.type")
    if kind == "json_schema":
        schema = value.get("json_schema")
        an_object(schema, f"{param}.json_schema")
        a_string(schema.get("name"), f"{param}.json_schema.name")
        check_fields(
            schema,
            {"schema": an_object, "strict": a_bool, "description": a_string},
            f"{param}.json_schema.",
        )


def _tool_choice(value: Any, param: str) -> None:
    if isinstance(value, str):
        return
    an_object(value, param)
    a_string(value.get("type"), f"{param}.type")
    if value["type"] == "function":
        fn = value.get("function")
        an_object(fn, f"{param}.function")
        a_string(fn.get("name"), f"{param}.function.name")


def _logit_bias(value: Any, param: str) -> None:
    an_object(value, param)
    for token, bias in value.items():
        if isinstance(bias, bool) or not isinstance(bias, int | float) or not -100 <= bias <= 100:
            raise bad(
                f"'{param}' values must be numbers from -100 to 100",
                f"{param}.{token}",
                "invalid_type",
            )


def _range(low: float, high: float) -> FieldCheck:
    def check(value: Any, param: str) -> None:
        number({param: value}, param, low, high)

    return check


def _positive(value: Any, param: str) -> None:
    positive_int({param: value}, param)


FORWARDED: dict[str, FieldCheck] = {
    "temperature": _range(0, 2),
    "top_p": _range(0, 1),
    "presence_penalty": _range(-2, 2),
    "frequency_penalty": _range(-2, 2),
    "max_tokens": _positive,
    "max_completion_tokens": _positive,
    "stop": _stop,
    "seed": an_integer,
    "response_format": _response_format,
    "tool_choice": _tool_choice,
    "parallel_tool_calls": a_bool,
    "reasoning_effort": a_string,
    "logit_bias": _logit_bias,
}
"""The generation settings the agent's model requests carry as the client
sent them, whatever ``extra_params`` says."""
