"""scripts/hash_modelsync_requirements.py: which PyPI files the model-sync Job's pins may match."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "hash_modelsync_requirements.py"
spec = importlib.util.spec_from_file_location("hash_modelsync_requirements", SCRIPT)
lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lock)


def test_pure_python_and_glibc_cpython_311_wheels_can_install_in_the_job_image():
    assert lock.installable("six-1.17.0-py2.py3-none-any.whl")
    assert lock.installable("pyyaml-6.0.4-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")
    assert lock.installable("hf_xet-1.8.0-cp38-abi3-manylinux_2_28_aarch64.whl")


def test_sdists_musl_other_pythons_and_other_systems_are_not_hashed():
    assert not lock.installable("hf_xet-1.8.0.tar.gz")
    assert not lock.installable("hf_xet-1.8.0-cp38-abi3-musllinux_1_2_x86_64.whl")
    assert not lock.installable("pyyaml-6.0.4-cp312-cp312-manylinux2014_x86_64.whl")
    assert not lock.installable("hf_xet-1.8.0-cp38-abi3-win_amd64.whl")


def test_the_rendered_file_keeps_every_pin_it_was_given():
    text = lock.render([("six", "1.17.0", ["a" * 64]), ("PyYAML", "6.0.4", ["b" * 64, "c" * 64])])
    assert lock.pins(text) == [("six", "1.17.0"), ("PyYAML", "6.0.4")]
    assert text.count("--hash=sha256:") == 3
