"""The one stack loader: a stack name or a `Pulumi.<stack>.yaml` path -> the validated
settings, the same whether a tool reads the file or the engine hands the program its config."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.settings import SettingsError
from contract.settings.stack_file import (
    find_stack_file,
    from_engine_config,
    load_stack,
    namespace_config,
    read_stack,
)
from tests.harness import ROOT


def test_a_stack_name_is_the_stack_file_under_the_root() -> None:
    assert find_stack_file("dev", ROOT) == ROOT / "Pulumi.dev.yaml"


def test_a_path_is_taken_as_it_is_whatever_the_root(tmp_path: Path) -> None:
    copy = tmp_path / "Pulumi.staging.yaml"
    copy.write_text((ROOT / "Pulumi.prod.yaml").read_text())
    assert find_stack_file(copy, ROOT / "nowhere") == copy
    assert read_stack(str(copy)).name == "staging"
    assert load_stack(copy) == load_stack("prod", ROOT)


def test_a_missing_stack_file_names_the_path_it_looked_for(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=str(tmp_path / "Pulumi.qa.yaml")):
        load_stack("qa", tmp_path)
    with pytest.raises(ValueError, match=r"Pulumi.gone.yaml"):
        read_stack(tmp_path / "Pulumi.gone.yaml")


def test_a_stack_file_without_a_config_mapping_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text("config: [1, 2]\n")
    with pytest.raises(ValueError, match=f"{path}.*'config:' mapping"):
        read_stack(path)


def test_the_stack_name_is_read_from_the_file_name() -> None:
    assert read_stack("prod", ROOT).name == "prod"


def test_the_engine_config_means_what_the_stack_file_means() -> None:
    for stack in ("dev", "prod"):
        engine = read_stack(stack, ROOT).engine_config()
        assert all(isinstance(value, str) for value in engine.values())
        assert from_engine_config(engine, is_secret=lambda key: True) == load_stack(stack, ROOT)


def test_only_the_platform_namespace_is_read_and_json_values_are_decoded() -> None:
    flat = {
        "aws:region": "us-west-2",
        "inference-platform:environment": "dev",
        "inference-platform:network": '{"cidr": "10.0.0.0/16"}',
    }
    assert namespace_config(flat) == {"environment": "dev", "network": {"cidr": "10.0.0.0/16"}}


def test_an_autoscaling_replacement_is_held_to_the_stack_files_rules() -> None:
    with pytest.raises(SettingsError, match=r"autoscaling\.default\.maxReplicas"):
        read_stack("dev", ROOT).settings(autoscaling={"default": {"minReplicas": 3, "maxReplicas": 2}})
