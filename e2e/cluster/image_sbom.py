"""Writes an SPDX 2.3 SBOM (JSON) of an image archive: its Debian packages and its Python packages.

The release's SBOM is BuildKit's (release.yml); the image built here has none, as buildah
makes no attestations. This reads what a scanner would, straight from the archive that
`buildah push ... docker-archive:` wrote: dpkg's status file and every Python
distribution's metadata (`*.dist-info/METADATA`, `*.egg-info/PKG-INFO`), as the image's
layers leave them (a later layer's file or whiteout wins). The same archive gives the same
document: its date is the image's, its namespace the image's ID.
"""

from __future__ import annotations

import argparse
import email.parser
import json
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

PYTHON_METADATA = re.compile(r"(?:.*/)?(?:site|dist)-packages/[^/]+\.(?:dist-info/METADATA|egg-info/PKG-INFO)")
DPKG_STATUS = "var/lib/dpkg/status"
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True)
class Package:
    kind: str  # "deb" or "pypi"
    name: str
    version: str
    path: str  # where its metadata is in the image
    license: str = "NOASSERTION"
    arch: str = ""


def image_files(archive: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The image's config and the files an SBOM reads, as the stacked layers leave them."""
    files: dict[str, bytes] = {}
    with tarfile.open(archive) as outer:
        [manifest] = json.load(_member(outer, "manifest.json"))
        config: dict[str, Any] = json.load(_member(outer, manifest["Config"]))
        for layer_name in manifest["Layers"]:
            with tarfile.open(fileobj=_member(outer, layer_name), mode="r:*") as layer:
                _apply_layer(layer, files)
    return config, files


def _member(archive: tarfile.TarFile, name: str) -> Any:
    content = archive.extractfile(name)
    if content is None:
        raise ValueError(f"{name} is not a file in the archive")
    return content


def _apply_layer(layer: tarfile.TarFile, files: dict[str, bytes]) -> None:
    for entry in layer:
        path = PurePosixPath(entry.name.removeprefix("./").lstrip("/"))
        if path.name == OPAQUE:
            prefix = f"{path.parent.as_posix()}/"
            for name in [n for n in files if n.startswith(prefix)]:
                del files[name]
        elif path.name.startswith(WHITEOUT):
            gone = (path.parent / path.name[len(WHITEOUT):]).as_posix()
            for name in [n for n in files if n == gone or n.startswith(f"{gone}/")]:
                del files[name]
        elif _wanted(path.as_posix()):
            if entry.isreg():
                files[path.as_posix()] = _member(layer, entry.name).read()
            else:
                files.pop(path.as_posix(), None)


def _wanted(name: str) -> bool:
    return name == DPKG_STATUS or PYTHON_METADATA.fullmatch(name) is not None


def debian_packages(status: bytes) -> list[Package]:
    packages = []
    for paragraph in status.decode("utf-8").split("\n\n"):
        fields = email.parser.HeaderParser().parsestr(paragraph.strip() + "\n")
        if fields.get("Package") and (fields.get("Status") or "").endswith(" installed"):
            packages.append(Package("deb", fields["Package"], fields["Version"], f"/{DPKG_STATUS}",
                                    arch=fields.get("Architecture") or ""))
    return packages


def python_package(path: str, metadata: bytes) -> Package:
    fields = email.parser.HeaderParser().parsestr(metadata.decode("utf-8", errors="replace"))
    return Package("pypi", fields["Name"], fields["Version"], f"/{path}",
                   license=fields.get("License-Expression") or "NOASSERTION")


def packages_of(files: dict[str, bytes]) -> list[Package]:
    found = debian_packages(files[DPKG_STATUS]) if DPKG_STATUS in files else []
    found += [python_package(path, data) for path, data in files.items() if path != DPKG_STATUS]
    return sorted(found, key=lambda p: (p.kind, p.name.lower(), p.version, p.path))


def purl(package: Package) -> str:
    if package.kind == "deb":
        return f"pkg:deb/debian/{package.name}@{package.version}?arch={package.arch}"
    return f"pkg:pypi/{re.sub(r'[-_.]+', '-', package.name).lower()}@{package.version}"


def spdx_document(image_name: str, config: dict[str, Any], image_id: str, packages: list[Package]) -> dict[str, Any]:
    created = (config.get("created") or "1970-01-01T00:00:00Z")[:19] + "Z"
    image_ref = "SPDXRef-image"
    spdx_packages: list[dict[str, Any]] = [{
        "SPDXID": image_ref, "name": image_name, "versionInfo": image_id,
        "downloadLocation": "NOASSERTION", "filesAnalyzed": False, "primaryPackagePurpose": "CONTAINER",
    }]
    relationships = [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                      "relatedSpdxElement": image_ref}]
    for index, package in enumerate(packages):
        ref = f"SPDXRef-{package.kind}-{index}-{re.sub(r'[^A-Za-z0-9.-]', '-', package.name)}"
        spdx_packages.append({
            "SPDXID": ref, "name": package.name, "versionInfo": package.version,
            "downloadLocation": "NOASSERTION", "filesAnalyzed": False,
            "licenseDeclared": package.license, "sourceInfo": f"metadata at {package.path}",
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                              "referenceLocator": purl(package)}],
        })
        relationships.append({"spdxElementId": image_ref, "relationshipType": "CONTAINS", "relatedSpdxElement": ref})
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": image_name,
        "documentNamespace": f"https://nsq-operator.invalid/spdx/{image_id.removeprefix('sha256:')}",
        "creationInfo": {"created": created, "creators": ["Tool: nsq-operator-e2e/cluster/image_sbom.py"]},
        "packages": spdx_packages,
        "relationships": relationships,
    }


def image_id(archive: Path) -> str:
    with tarfile.open(archive) as outer:
        [manifest] = json.load(_member(outer, "manifest.json"))
    return "sha256:" + PurePosixPath(manifest["Config"]).stem.removeprefix("sha256:")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path, help="a docker-archive tar (buildah push ... docker-archive:PATH)")
    parser.add_argument("--name", required=True, help="the image's name, with its tag")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    config, files = image_files(args.archive)
    document = spdx_document(args.name, config, image_id(args.archive), packages_of(files))
    partial = args.out.with_name(args.out.name + ".partial")
    partial.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    partial.replace(args.out)
    print(f"{args.out}: {len(document['packages']) - 1} packages")


if __name__ == "__main__":
    main()
