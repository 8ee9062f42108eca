"""The CRD upgrade path (operator/UPGRADING.md): the CRDs of this version, applied over a
released version's with `kubectl apply --server-side -f crds/`, accept every object the
released ones did. Checked against a copy of each release's CRDs (released_crds/): no
field is removed or retyped, no enum value or looser bound taken back, nothing newly
required, and an existing field made immutable only by a transition rule (which leaves
stored objects valid)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from nsq_operator.builders.limits import MAX_CLUSTER_NAME

RELEASED = Path(__file__).resolve().parent / "released_crds"
CURRENT = Path(__file__).resolve().parents[2] / "crds"
CRDCHECK = Path(__file__).resolve().parents[3] / "shared" / "k8s-crdcheck" / "crdcheck"
KINDS = ["nsqclusters", "nsqtopics", "nsqchannels"]


def schema(directory: Path, kind: str) -> dict[str, Any]:
    crd = yaml.safe_load((directory / f"{kind}.nsq.dev.yaml").read_text(encoding="utf-8"))
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    found: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return found


def _pattern(node: dict[str, Any]) -> str | None:
    """The pattern a node's strings must match: beside an int-or-string's anyOf, or (as
    0.1.0 wrote it, which no apiserver took) inside its string branch."""
    inside = [branch.get("pattern") for branch in node.get("anyOf") or [] if branch.get("pattern")]
    return node.get("pattern") or (inside[0] if inside else None)


def narrowed(old: dict[str, Any], new: dict[str, Any], path: str = "") -> Iterator[str]:
    """Every way ``new`` accepts less than ``old`` at ``path`` or below."""
    if old.get("type") != new.get("type"):
        yield f"{path or '.'}: type {old.get('type')} became {new.get('type')}"
    if "enum" in old and not set(old["enum"]) <= set(new.get("enum", old["enum"])):
        yield f"{path}: enum lost {sorted(set(old['enum']) - set(new['enum']))}"
    for bound, stricter in (("minimum", lambda o, n: n > o), ("maximum", lambda o, n: n < o),
                            ("maxLength", lambda o, n: n < o), ("minLength", lambda o, n: n > o)):
        if bound in new and (bound not in old or stricter(old[bound], new[bound])):
            yield f"{path}: {bound} {old.get(bound)} became {new[bound]}"
    if "pattern" in new and new.get("pattern") != _pattern(old):
        yield f"{path}: pattern {_pattern(old)!r} became {new['pattern']!r}"
    if set(new.get("required", [])) - set(old.get("required", [])):
        yield f"{path}: newly required {sorted(set(new.get('required', [])) - set(old.get('required', [])))}"
    for rule in new.get("x-kubernetes-validations", []):
        if rule not in old.get("x-kubernetes-validations", []) and "oldSelf" not in rule["rule"]:
            yield f"{path}: new rule {rule['rule']!r} may refuse a stored object"
    for name, sub in (old.get("properties") or {}).items():
        if name not in (new.get("properties") or {}):
            if not new.get("x-kubernetes-preserve-unknown-fields"):
                yield f"{path}.{name}: removed (the apiserver would prune it from stored objects)"
            continue
        yield from narrowed(sub, new["properties"][name], f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(old.get(key), dict) and isinstance(new.get(key), dict):
            yield from narrowed(old[key], new[key], f"{path}[]" if key == "items" else f"{path}{{}}")


# Narrowings taken knowingly, each with why no object that worked is refused (UPGRADING.md).
ACCEPTED = {
    # an NsqCluster named longer than this never ran: its nsqlookupd pods carry the label
    # controller-revision-hash: <name>-lookupd-<hash of up to 10 digits>, which the apiserver
    # refuses beyond 63 characters (builders/limits.py); such an object can only be deleted
    f": new rule 'self.metadata.name.size() <= {MAX_CLUSTER_NAME}' may refuse a stored object",
    # reads only spec.nsqd.replication, which no released CRD had (the apiserver pruned it
    # from every stored object), and `!has(self.replication)` holds for all of them
    ".spec.nsqd: new rule '!has(self.replication) || self.replication.replicas <= 1 || "
    "self.replication.replicas <= self.replicas' may refuse a stored object",
}


@pytest.mark.parametrize("release", sorted(p.name for p in RELEASED.iterdir()))
@pytest.mark.parametrize("kind", KINDS)
def test_the_crds_accept_everything_a_released_version_accepted(release: str, kind: str) -> None:
    assert [n for n in narrowed(schema(RELEASED / release, kind), schema(CURRENT, kind)) if n not in ACCEPTED] == []


def test_the_check_sees_a_narrowing() -> None:
    old = schema(RELEASED / "0.1.0", "nsqtopics")
    new = yaml.safe_load(yaml.safe_dump(old))
    del new["properties"]["spec"]["properties"]["paused"]
    new["properties"]["spec"]["properties"]["deletionPolicy"]["enum"] = ["Retain"]
    new["properties"]["spec"]["required"] = ["cluster", "topicName"]
    assert sorted(narrowed(old, new)) == [
        ".spec.deletionPolicy: enum lost ['Delete']", ".spec.paused: removed (the apiserver would prune it from "
        "stored objects)", ".spec: newly required ['topicName']"]


@pytest.mark.parametrize("release", sorted(p.name for p in RELEASED.iterdir() if p.is_dir()))
def test_each_released_copy_is_one_an_apiserver_accepts(release: str) -> None:
    """A copy a real apiserver would refuse (52cade3's: anyOf with types, not structural)
    stands for no release anyone could install, and the checks above against it prove nothing."""
    tool = str(CRDCHECK) if CRDCHECK.exists() else shutil.which("crdcheck")
    if tool is None:
        pytest.skip("crdcheck (../shared/k8s-crdcheck) is not on this machine")
    done = subprocess.run([tool, *map(str, sorted((RELEASED / release).glob("*.yaml")))],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith("0 errors"), done.stdout + done.stderr
