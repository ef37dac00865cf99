"""Observability settings: Alertmanager webhook URLs are credentials, so a receiver must be
https and, in the program, set as a Pulumi secret; stack files with encrypted URLs still load
outside the engine. These rules run before the first resource exists."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from contract.settings import SettingsError, parse
from contract.settings.observability import plaintext_webhook_problems
from contract.settings.stack_file import from_engine_config, read_stack
from tests.harness import ROOT


def test_a_plain_http_webhook_is_rejected_naming_its_key() -> None:
    raw = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    raw = {k.removeprefix("inference-platform:"): v for k, v in raw.items() if k.startswith("inference-platform:")}
    raw["observability"]["alertmanager"] = {"receivers": [{"name": "pager", "webhookUrl": "http://hooks.example.com"}]}
    with pytest.raises(SettingsError, match=r"observability\.alertmanager\.receivers\[0\]\.webhookUrl"):
        parse(raw)


def with_receiver(url: Any) -> dict[str, Any]:
    raw = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    raw = {k.removeprefix("inference-platform:"): v for k, v in raw.items() if k.startswith("inference-platform:")}
    raw["observability"]["alertmanager"] = {"receivers": [{"name": "oncall", "webhookUrl": url}]}
    return raw


def test_a_plaintext_webhook_url_is_refused() -> None:
    obs = parse(with_receiver("https://hooks.example.com/T0")).observability
    problems = plaintext_webhook_problems(obs, is_secret=lambda key: False)
    assert problems and "receivers[0].webhookUrl must be set with `pulumi config set --secret" in problems[0]


def test_a_webhook_url_set_as_a_secret_is_accepted() -> None:
    obs = parse(with_receiver("https://hooks.example.com/T0")).observability
    assert plaintext_webhook_problems(obs, is_secret=lambda key: key == "inference-platform:observability") == []


def test_an_encrypted_webhook_in_a_stack_file_still_loads_outside_the_engine() -> None:
    # The capacity tooling reads stack files directly; `secure:` ciphertext must not break it.
    settings = parse(with_receiver({"secure": "v1:c2VjcmV0"}))
    assert settings.observability.alertmanager.receivers[0].name == "oncall"


def engine_config_with_receiver(url: str) -> dict[str, str]:
    config = read_stack("prod", ROOT).engine_config()
    config["inference-platform:observability"] = json.dumps(with_receiver(url)["observability"])
    return config


def test_the_engine_config_refuses_a_plaintext_webhook_naming_its_key() -> None:
    with pytest.raises(
        SettingsError, match=r"observability\.alertmanager\.receivers\[0\]\.webhookUrl must be set with"
    ):
        from_engine_config(engine_config_with_receiver("https://hooks.example.com/T0"), is_secret=lambda key: False)


def test_the_engine_config_accepts_a_webhook_set_as_a_secret() -> None:
    settings = from_engine_config(
        engine_config_with_receiver("https://hooks.example.com/T0"),
        is_secret=lambda key: key == "inference-platform:observability",
    )
    assert settings.observability.alertmanager.receivers[0].webhook_url == "https://hooks.example.com/T0"


def dev_raw() -> dict[str, Any]:
    raw = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    return {k.removeprefix("inference-platform:"): v for k, v in raw.items() if k.startswith("inference-platform:")}


def test_the_exporters_cannot_share_the_monitoring_namespace() -> None:
    """The privileged level they need would admit host access for Prometheus, Grafana and Alertmanager too."""
    raw = dev_raw()
    raw["observability"]["exportersNamespace"] = raw["observability"].get("namespace", "monitoring")
    with pytest.raises(SettingsError, match=r"observability\.exportersNamespace .*must differ from observability"):
        parse(raw)


def test_the_model_writer_cannot_share_the_exporters_namespace() -> None:
    raw = dev_raw()
    raw["observability"]["exportersNamespace"] = "model-sync"
    with pytest.raises(
        SettingsError, match=r"modelStore\.syncNamespace \('model-sync'\) is also observability\.exportersNamespace"
    ):
        parse(raw)
