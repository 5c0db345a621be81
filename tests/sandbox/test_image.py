"""The sandbox environment: content-hash naming, atomic builds, missing images."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from touchstone.sandbox import SandboxError, open_sandbox, resolve_backend
from touchstone.sandbox import image


@pytest.fixture
def edited_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of sandbox_images/ with one edit, selected via TOUCHSTONE_SANDBOX_IMAGES."""
    copy = tmp_path / "sandbox_images"
    shutil.copytree(image.images_dir(), copy)
    with open(copy / "setup-rootfs.sh", "a") as handle:
        handle.write("# edited\n")
    monkeypatch.setenv("TOUCHSTONE_SANDBOX_IMAGES", str(copy))
    return copy


def test_image_hash_follows_the_files(tmp_path: Path):
    original = image.image_hash()
    copy = tmp_path / "copy"
    shutil.copytree(image.images_dir(), copy)
    assert image.image_hash(copy) == original
    (copy / "README.md").write_text("documentation only\n")
    assert image.image_hash(copy) == original
    (copy / "Dockerfile").write_text((copy / "Dockerfile").read_text() + "\n")
    assert image.image_hash(copy) != original


def test_edit_renames_image_and_rootfs(edited_images: Path):
    assert image.image_tag().startswith("touchstone-sandbox:")
    assert image.short_hash() == image.image_hash(edited_images)[:16]
    assert image.rootfs_path().name == f"rootfs-{image.short_hash()}"


def test_failed_rootfs_build_leaves_nothing_half_built(edited_images, tmp_path, monkeypatch):
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        pytest.skip("building a root filesystem needs root and debootstrap")
    cache = tmp_path / "cache"
    monkeypatch.setenv("TOUCHSTONE_CACHE", str(cache))
    monkeypatch.setenv("TOUCHSTONE_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")  # nothing listens there
    with pytest.raises(SandboxError, match="debootstrap failed"):
        image.ensure_rootfs(progress=False)
    assert not image.rootfs_ready()
    assert [p.name for p in cache.iterdir() if p.is_dir()] == []  # no partial root left behind


@pytest.mark.docker
def test_missing_image_is_a_clear_error_and_auto_avoids_it(edited_images: Path, workspace: Path):
    with pytest.raises(SandboxError, match="is not built; run `touchstone sandbox build-image`"):
        open_sandbox(workspace, "docker")
    assert resolve_backend("auto") == "bwrap"


def test_both_backends_name_the_same_environment(sb):
    assert sb.image_digest == "sha256:" + image.image_hash()
    assert sb.exec("cat /etc/touchstone-image").stdout.strip() == image.image_hash()


@pytest.mark.docker
def test_build_image_is_idempotent_and_auto_prefers_docker():
    from click.testing import CliRunner

    from cli import main

    result = CliRunner().invoke(main, ["sandbox", "build-image"], catch_exceptions=False)
    assert result.exit_code == 0 and result.stdout.strip() == image.image_tag()
    assert resolve_backend("auto") == "docker"
