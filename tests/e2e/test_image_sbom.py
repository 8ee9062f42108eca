"""e2e/cluster/image_sbom.py on an archive made here: it lists what the stacked layers leave
(a whiteout removes a distribution, an opaque directory hides what was below it), only
the Debian packages dpkg says are installed, and the same archive gives the same bytes.
tests/cluster/test_image.py checks it on the project's real image."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SITE = "opt/venv/lib/python3.11/site-packages"
STATUS = """Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u14

Package: oldlib
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0-1

Package: python3
Status: install ok installed
Architecture: amd64
Version: 3.11.2-1+b1
Description: interactive high-level object-oriented language
 a continuation line: Version: 9 is not a field
"""


def metadata(name: str, version: str, license_expression: str = "") -> bytes:
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
    lines += [f"License-Expression: {license_expression}"] if license_expression else []
    return ("\n".join(lines) + "\n\nA description.\n").encode()


def layer(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def docker_archive(path: Path, layers: list[dict[str, bytes]]) -> None:
    config = {"created": "2026-11-27T16:40:00.123456789Z", "config": {}}
    config_name = "ab" * 32 + ".json"
    with tarfile.open(path, "w") as tar:
        names = []
        for index, files in enumerate(layers):
            names.append(f"layer{index}.tar")
            _add(tar, names[-1], layer(files))
        _add(tar, config_name, json.dumps(config).encode())
        _add(tar, "manifest.json", json.dumps([{"Config": config_name, "Layers": names}]).encode())


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def sbom(archive: Path, out: Path) -> dict[str, Any]:
    subprocess.run([sys.executable, str(ROOT / "e2e" / "cluster" / "image_sbom.py"), str(archive),
                    "--name", "localhost/probe:1", "--out", str(out)], check=True, capture_output=True, timeout=60)
    return dict(json.loads(out.read_text(encoding="utf-8")))


def test_the_sbom_is_what_the_layers_leave(tmp_path: Path) -> None:
    archive = tmp_path / "image.tar"
    docker_archive(archive, [
        {"var/lib/dpkg/status": STATUS.encode(),
         f"{SITE}/kept-1.0.dist-info/METADATA": metadata("kept", "1.0", "MIT"),
         f"{SITE}/removed-2.0.dist-info/METADATA": metadata("removed", "2.0"),
         "usr/lib/python3/dist-packages/hidden-3.0.dist-info/METADATA": metadata("hidden", "3.0"),
         "usr/lib/python3/dist-packages/setuptools-66.1.1.egg-info/PKG-INFO": metadata("setuptools", "66.1.1"),
         "srv/lib/site-packages/gone-5.0.dist-info/METADATA": metadata("gone", "5.0")},
        {f"{SITE}/.wh.removed-2.0.dist-info": b"",
         ".wh.srv": b"",
         "usr/lib/python3/dist-packages/.wh..wh..opq": b"",
         f"{SITE}/Added_Name-4.0.dist-info/METADATA": metadata("Added_Name", "4.0")},
    ])
    document = sbom(archive, tmp_path / "sbom.json")
    assert document["spdxVersion"] == "SPDX-2.3" and document["creationInfo"]["created"] == "2026-11-27T16:40:00Z"
    image, *packages = document["packages"]
    assert image["versionInfo"] == "sha256:" + "ab" * 32
    purls = [p["externalRefs"][0]["referenceLocator"] for p in packages]
    assert purls == ["pkg:deb/debian/libc6@2.36-9+deb12u14?arch=amd64", "pkg:deb/debian/python3@3.11.2-1+b1?arch=amd64",
                     "pkg:pypi/added-name@4.0", "pkg:pypi/kept@1.0"]
    assert [p["licenseDeclared"] for p in packages] == ["NOASSERTION", "NOASSERTION", "NOASSERTION", "MIT"]
    assert len(document["relationships"]) == 1 + len(packages)
    again = sbom(archive, tmp_path / "again.json")
    assert (tmp_path / "sbom.json").read_bytes() == (tmp_path / "again.json").read_bytes() and again == document
