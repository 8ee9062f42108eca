"""Writes an OCI image archive (an image layout in one tar) from a directory or a few files.

The cluster has no registry: every image it runs is made here and imported into containerd
with `ctr images import`. This writes what that command reads, and nothing more: one
uncompressed layer, a config, a manifest and an index naming the image. Entries carry fixed
timestamps and sorted names, so the same input gives the same digest.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
FIXED_MTIME = 0
# A container's /dev, /proc and /sys are mounted by the runtime; what a root file system
# built with debootstrap holds there must not reach the layer.
RUNTIME_MOUNTS = ("dev", "proc", "sys")


def _add_tree(layer: tarfile.TarFile, root: Path) -> None:
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        relative = path.relative_to(root).as_posix()
        top = relative.split("/", 1)[0]
        if top in RUNTIME_MOUNTS and relative != top:
            continue
        info = layer.gettarinfo(str(path), arcname=relative)
        info.mtime = FIXED_MTIME
        info.uname = info.gname = ""
        if info.isreg():
            with path.open("rb") as content:
                layer.addfile(info, content)
        else:
            layer.addfile(info)


def _add_file(layer: tarfile.TarFile, source: Path, target: str, mode: int) -> None:
    parts = target.strip("/").split("/")
    for depth in range(1, len(parts)):
        directory = tarfile.TarInfo("/".join(parts[:depth]))
        directory.type, directory.mode, directory.mtime = tarfile.DIRTYPE, 0o755, FIXED_MTIME
        layer.addfile(directory)
    info = tarfile.TarInfo("/".join(parts))
    info.size, info.mode, info.mtime = source.stat().st_size, mode, FIXED_MTIME
    with source.open("rb") as content:
        layer.addfile(info, content)


def build_layer(tree: Path | None, files: list[tuple[Path, str]], out: Path) -> None:
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as layer:
        if tree is not None:
            _add_tree(layer, tree)
        for source, target in files:
            _add_file(layer, source, target, 0o755 if os.access(source, os.X_OK) else 0o644)


def _digest_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    with path.open("rb") as content:
        for block in iter(lambda: content.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest(), path.stat().st_size


def _blob(archive: tarfile.TarFile, data: bytes) -> tuple[str, int]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _add_bytes(archive, f"blobs/sha256/{digest.split(':')[1]}", data)
    return digest, len(data)


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), FIXED_MTIME
    archive.addfile(info, io.BytesIO(data))


def write_archive(name: str, layer_path: Path, image_config: dict[str, Any], out: Path) -> str:
    layer_digest, layer_size = _digest_file(layer_path)
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created_by": "e2e/cluster/oci_image.py"}],
    }
    with tarfile.open(out, "w") as archive:
        info = archive.gettarinfo(str(layer_path), arcname=f"blobs/sha256/{layer_digest.split(':')[1]}")
        info.mtime, info.uname, info.gname, info.uid, info.gid = FIXED_MTIME, "", "", 0, 0
        with layer_path.open("rb") as content:
            archive.addfile(info, content)
        config_digest, config_size = _blob(archive, json.dumps(config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": config_digest, "size": config_size},
            "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": layer_digest, "size": layer_size}],
        }
        manifest_digest, manifest_size = _blob(archive, json.dumps(manifest, sort_keys=True).encode())
        index = {
            "schemaVersion": 2,
            "mediaType": INDEX_MEDIA_TYPE,
            "manifests": [{
                "mediaType": MANIFEST_MEDIA_TYPE,
                "digest": manifest_digest,
                "size": manifest_size,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                },
            }],
        }
        _add_bytes(archive, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _add_bytes(archive, "index.json", json.dumps(index, sort_keys=True).encode())
    return manifest_digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the image's full name, with its tag")
    parser.add_argument("--rootfs", type=Path, help="a directory to become the image's file system")
    parser.add_argument("--file", action="append", default=[], metavar="SOURCE:TARGET",
                        help="a file to put at TARGET (for images FROM scratch)")
    parser.add_argument("--entrypoint", action="append", default=[])
    parser.add_argument("--cmd", action="append", default=[])
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--user", default="")
    parser.add_argument("--workdir", default="")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    files = [(Path(source), target) for source, target in (spec.split(":", 1) for spec in args.file)]
    image_config: dict[str, Any] = {"Env": args.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
    for key, value in (("Entrypoint", args.entrypoint), ("Cmd", args.cmd), ("User", args.user),
                       ("WorkingDir", args.workdir)):
        if value:
            image_config[key] = value
    with tempfile.TemporaryDirectory(dir=args.out.parent) as scratch:
        layer = Path(scratch) / "layer.tar"
        build_layer(args.rootfs, files, layer)
        digest = write_archive(args.name, layer, image_config, args.out)
    print(f"{args.name} {digest}")


if __name__ == "__main__":
    main()
