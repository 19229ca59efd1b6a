"""config.yaml.example documents every key and loads as the defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from hermes_trio.config import Config, load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "config.yaml.example"


def keys_of(cls: type, prefix: str = "") -> set[str]:
    found = set()
    for f in dataclasses.fields(cls):
        if f.name in ("source", "env_files"):  # where it came from, not a key
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            found |= keys_of(type(default), f"{prefix}{f.name}.")
        else:
            found.add(prefix + f.name)
    return found


def flatten(data: dict, prefix: str = "") -> set[str]:
    found = set()
    for key, value in data.items():
        if isinstance(value, dict) and value and key != "extra_body":
            found |= flatten(value, f"{prefix}{key}.")
        else:
            found.add(prefix + key)
    return found


def test_the_example_lists_every_key() -> None:
    documented = flatten(yaml.safe_load(EXAMPLE.read_text()))
    assert documented == keys_of(Config)


def test_the_example_loads_and_equals_the_defaults() -> None:
    loaded = load_config(EXAMPLE, env={})
    assert dataclasses.replace(loaded, source=None) == Config()
