"""What a real kube-apiserver does to an object written to it, before it keeps it, that
KMock does not: defaulting from the CRD schema, the CRD's schema (a field the apiserver
would prune is refused here, so a test cannot rely on it), the OpenAPI schema of the core
kinds the operator writes, and StatefulSet's immutable spec. Those are checked at once
and refuse the write.

The apiserver's own code (crdcheck: the same and CEL) is a process per run, too slow for
every write under load: the written nsq.dev objects are queued and checked in batches
(``Backlog``); what it finds is recorded as a refusal after the fact, which fails the
test all the same."""
from __future__ import annotations

import asyncio
import copy
import functools
import re
from pathlib import Path
from typing import Any, Callable

import celpy
import jsonschema
import kubernetes_validate
import pydantic
import yaml

from nsq_operator import quantity
from tests import custom_kinds
from tests.apiserver_checks import CRD_FILES, check_async, tool

KUBERNETES_VERSION = "1.28.0"
# Core kinds the operator builds. Pods and claims are the test kubelet's, Events kopf's:
# checking each of their writes would cost more than it finds.
CHECKED_CORE = {"ConfigMap", "Service", "ServiceAccount", "StatefulSet", "Deployment", "PodDisruptionBudget"}
BATCH_PERIOD = 1.0  # seconds between two runs of crdcheck at the most
STATEFULSET_MUTABLE = {"replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
                       "minReadySeconds"}


class Refused(Exception):
    """The apiserver refuses the write (422 Invalid)."""


def _schemas(files: list[Path]) -> dict[str, dict[str, Any]]:
    out = {}
    for path in files:
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        for version in crd["spec"]["versions"]:
            out[f"{crd['spec']['group']}/{version['name']}/{crd['spec']['names']['kind']}"] = \
                version["schema"]["openAPIV3Schema"]
    return out


def default(value: Any, schema: dict[str, Any]) -> Any:
    """Structural defaulting: a missing property with a default gets it, then the
    defaulted value is walked too (so ``{}`` defaults fill their own fields)."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name, sub in properties.items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
        for name, sub in value.items():
            if name in properties:
                value[name] = default(sub, properties[name])
            elif isinstance(schema.get("additionalProperties"), dict):
                value[name] = default(sub, schema["additionalProperties"])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [default(item, schema["items"]) for item in value]
    return value


def unknown_fields(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """The fields the apiserver would prune: not in ``properties``, with no
    ``additionalProperties`` or ``x-kubernetes-preserve-unknown-fields`` to keep them."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for name, sub in value.items():
            where = f"{path}.{name}" if path else name
            if not path and name in ("apiVersion", "kind", "metadata"):
                continue  # the apiserver's own: ObjectMeta is checked apart
            if properties is not None and name in properties:
                out += unknown_fields(sub, properties[name], where)
            elif isinstance(extra, dict):
                out += unknown_fields(sub, extra, where)
            elif properties is not None or schema.get("type") == "object":
                out.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            out += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return out


@functools.lru_cache(maxsize=None)
def _program(rule: str) -> Any:
    environment = celpy.Environment()
    return environment.program(environment.compile(rule))


def transition_failures(old: Any, new: Any, schema: dict[str, Any], path: str) -> list[str]:
    """The CEL rules comparing a field with its old value (``oldSelf``) that the update
    breaks, judged with cel-python where both values exist, as the apiserver does."""
    out = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            verdict = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(new), "oldSelf": celpy.json_to_cel(old)})
            if not (isinstance(verdict, celpy.celtypes.BoolType) and bool(verdict)):  # false, or an error
                out.append(f"{path}: Invalid value: \"object\": {rule.get('message') or rule['rule']}")
    if isinstance(old, dict) and isinstance(new, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in old and name in new:
                out += transition_failures(old[name], new[name], sub, f"{path}.{name}" if path else name)
    return out


def field_rule_failures(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """The CEL rules on fields below the root without ``oldSelf`` (NsqdSpec's replicas
    rule), judged with cel-python at once. crdcheck decodes the objects it is given from
    YAML with every number a float64, where the apiserver keeps integers int64, so its CEL
    errs on any integer field a rule reads ("expected int, got float64"): those of its
    errors are dropped (``crdcheck_artefact``) and the rules judged here instead."""
    out = []
    if path:
        for rule in schema.get("x-kubernetes-validations") or []:
            if "oldSelf" in rule["rule"]:
                continue
            verdict = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})
            if not (isinstance(verdict, celpy.celtypes.BoolType) and bool(verdict)):
                out.append(f"{path}: Invalid value: \"object\": {rule.get('message') or rule['rule']}")
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in value and (path or name == "spec"):
                out += field_rule_failures(value[name], sub, f"{path}.{name}" if path else name)
    return out


def crdcheck_artefact(error: str) -> bool:
    """crdcheck's CEL error for an integer read as float64 (see field_rule_failures)."""
    return "invalid data, expected int, got float64 evaluating rule" in error


class Admission:
    def __init__(self, crd_files: list[Path] = CRD_FILES) -> None:
        self.crd_files = crd_files
        self.schemas = _schemas(crd_files)
        self.validators = {key: jsonschema.Draft4Validator(schema) for key, schema in self.schemas.items()}
        self.tool = tool()

    def _key(self, obj: dict[str, Any]) -> str:
        return f"{obj.get('apiVersion')}/{obj.get('kind')}"

    def custom(self, obj: dict[str, Any]) -> bool:
        return self._key(obj) in self.schemas

    def defaulted(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Defaults of the CRD's schema on a custom object; a core object's quantities in
        their canonical form, as the apiserver stores them (``1024Mi`` is read back as
        ``1Gi``): custom objects keep theirs as written (int-or-string)."""
        schema = self.schemas.get(self._key(obj))
        if schema is not None:
            return default(obj, schema)
        if custom_kinds.is_custom(obj):
            return obj
        return canonical_quantities(obj)

    def admit(self, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """Raises Refused with the apiserver's words when it would not keep ``new``."""
        if old is None and (bad := name_and_labels(new)):
            raise Refused(f"{new.get('kind')} \"{new['metadata'].get('name')}\" is invalid: {'; '.join(bad)}")
        if old is not None and (bad := name_and_labels(new, name=False)):
            raise Refused(f"{new.get('kind')} \"{new['metadata'].get('name')}\" is invalid: {'; '.join(bad)}")
        if self.custom(new):
            self._admit_custom(new)
            if old is not None:
                broken = transition_failures(old, new, self.schemas[self._key(new)], "")
                if broken:
                    raise Refused(f"{new['kind']} {new['metadata'].get('name')}: {'; '.join(broken)}")
            return
        if custom_kinds.is_custom(new):  # cert-manager's and the Prometheus Operator's kinds, by their CRDs
            try:
                custom_kinds.validate(_without_server_fields(new))
            except (AssertionError, pydantic.ValidationError) as e:
                raise Refused(f"{new['kind']} {new['metadata'].get('name')}: {e}") from None
            return
        kind = new.get("kind")
        if kind not in CHECKED_CORE:
            return
        try:
            kubernetes_validate.validate(_without_server_fields(new), KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            raise Refused(f"{kind} {new['metadata'].get('name')}: {e}") from None
        if kind == "StatefulSet" and old is not None:
            changed = sorted(k for k in set(old.get("spec", {})) | set(new.get("spec", {}))
                             if k not in STATEFULSET_MUTABLE and old["spec"].get(k) != new["spec"].get(k))
            if changed:
                raise Refused(f"StatefulSet.apps \"{new['metadata']['name']}\" is invalid: spec: Forbidden: updates to "
                              f"statefulset spec for fields other than {', '.join(sorted(STATEFULSET_MUTABLE))} are "
                              f"forbidden (changed: {', '.join(changed)})")

    def _admit_custom(self, obj: dict[str, Any]) -> None:
        name = f"{obj['kind']} {obj['metadata'].get('name')}"
        schema = self.schemas[self._key(obj)]
        pruned = [f'unknown field "{path}" (the apiserver drops it)' for path in unknown_fields(obj, schema)]
        invalid = [_worded(e) for e in self.validators[self._key(obj)].iter_errors(_without_server_fields(obj))]
        invalid += root_rule_failures(obj, schema)
        invalid += field_rule_failures(obj, schema, "")
        if pruned or invalid:
            raise Refused(f"{name}: {'; '.join(pruned + invalid)}")


class Backlog:
    """nsq.dev objects as written, checked by crdcheck a batch at a time."""

    def __init__(self, admission: Admission, report: Callable[[str], None]) -> None:
        self.admission, self.report = admission, report
        self._queue: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._checking = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def add(self, obj: dict[str, Any]) -> None:
        if self.admission.tool is None:
            return
        self._queue.append(_without_server_fields(copy.deepcopy(obj)))
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            await self.flush()
            await asyncio.sleep(BATCH_PERIOD)  # what is written meanwhile waits for the next batch

    async def flush(self) -> None:
        async with self._checking:  # one crdcheck at a time, and never one cut short
            self._wake.clear()
            batch, self._queue = self._queue, []
            if batch:
                for error in await check_async(batch, self.admission.crd_files, self.admission.tool):
                    if not crdcheck_artefact(error):
                        self.report(f"crdcheck, after the write: {error}")

    async def close(self) -> None:
        async with self._checking:
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
        await self.flush()


def root_rule_failures(obj: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """The CEL rules at the root of a CRD's schema (where ``self.metadata`` holds the name),
    judged with cel-python at once, as the apiserver refuses the write itself."""
    out = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            continue
        root = {"metadata": {k: v for k, v in obj.get("metadata", {}).items() if k in ("name", "generateName")},
                **{k: v for k, v in obj.items() if k != "metadata"}}
        verdict = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(root)})
        if not (isinstance(verdict, celpy.celtypes.BoolType) and bool(verdict)):
            out.append(f"<nil>: Invalid value: \"object\": {rule.get('message') or rule['rule']}")
    return out


DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# kinds whose names are DNS labels (63 at most) rather than subdomains (253)
LABEL_NAMED = {"Service": DNS_1035_LABEL, "Namespace": DNS_1123_LABEL}


def name_and_labels(obj: dict[str, Any], name: bool = True) -> list[str]:
    """What the apiserver's ObjectMeta validation refuses: a name that is no DNS subdomain
    (no DNS label for a Service: at most 63 characters), and label values longer than 63
    characters or of other characters (a pod's controller-revision-hash, say)."""
    meta = obj.get("metadata") or {}
    out = []
    given = str(meta.get("name") or "")
    if name and given:
        rule = LABEL_NAMED.get(str(obj.get("kind")))
        limit = 63 if rule is not None else 253
        if len(given) > limit or not (rule or DNS_1123_SUBDOMAIN).match(given):
            out.append(f"metadata.name: Invalid value: \"{given}\": must be no more than {limit} characters"
                       if len(given) > limit else f"metadata.name: Invalid value: \"{given}\": not a valid name")
    for key, value in (meta.get("labels") or {}).items():
        if len(str(value)) > 63 or not LABEL_VALUE.match(str(value)):
            out.append(f"metadata.labels: Invalid value: \"{value}\": must be no more than 63 characters")
    return out


def canonical_quantities(value: Any, parent: str = "") -> Any:
    """Every quantity of a core object (``resources.requests`` / ``.limits``, a claim's
    ``status.capacity``) rewritten canonical, in place; what does not parse is left for
    the schema check to refuse."""
    if isinstance(value, dict):
        for key, sub in value.items():
            if isinstance(sub, dict) and ((parent == "resources" and key in ("requests", "limits"))
                                          or (parent == "status" and key == "capacity")):
                for name, amount in sub.items():
                    try:
                        sub[name] = quantity.canonical(amount)
                    except quantity.QuantityError:
                        pass
            else:
                canonical_quantities(sub, key)
    elif isinstance(value, list):
        for item in value:
            canonical_quantities(item, parent)
    return value


def _worded(error: jsonschema.ValidationError) -> str:
    """A schema error named by its field's path, as the apiserver words it."""
    path = ".".join(map(str, error.absolute_path))
    if error.validator == "required":
        missing = re.match(r"'([^']+)' is a required property", error.message)
        if missing:
            return f"{path + '.' if path else ''}{missing.group(1)}: Required value"
    return f"{path}: {error.message}"


def _without_server_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """managedFields in our FieldsV1 rendering are the emulator's, not the writer's."""
    out = dict(obj)
    out["metadata"] = {k: v for k, v in obj.get("metadata", {}).items() if k != "managedFields"}
    return out
