"""Kubernetes' Pod Security Standards, "restricted" level (latest, which includes
"baseline"), as the PodSecurity admission plugin applies them to a pod: each rule of
kubernetes.io/docs/concepts/security/pod-security-standards written as a check that
names the offending field. The emulator refuses pods that break them in a namespace
labelled for it, as a real API server does, and the tests run every generated pod
template and the chart's Deployment through them."""
from __future__ import annotations

from typing import Any, Iterator, Mapping

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
                      "secret"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
SECCOMP_ALLOWED = {"RuntimeDefault", "Localhost"}
APPARMOR_ALLOWED = {"RuntimeDefault", "Localhost"}


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(field) or []:
            yield f"spec.{field}[{container.get('name')}]", container


def _seccomp_type(context: Mapping[str, Any] | None) -> str | None:
    return ((context or {}).get("seccompProfile") or {}).get("type")


def violations(pod_spec: Mapping[str, Any], annotations: Mapping[str, str] | None = None) -> list[str]:
    """Every rule of the restricted profile the pod breaks, each naming its field."""
    found: list[str] = []
    pod_context = pod_spec.get("securityContext") or {}
    # -- baseline --------------------------------------------------------------------
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(host):
            found.append(f"spec.{host} must be unset or false")
    if (pod_context.get("windowsOptions") or {}).get("hostProcess"):
        found.append("spec.securityContext.windowsOptions.hostProcess must not be true")
    for volume in pod_spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if "hostPath" in kinds:
            found.append(f"spec.volumes[{volume.get('name')}]: hostPath volumes are forbidden")
        elif not kinds <= RESTRICTED_VOLUMES:
            found.append(f"spec.volumes[{volume.get('name')}]: {', '.join(sorted(kinds))} is not a restricted volume type")
    for sysctl in pod_context.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            found.append(f"spec.securityContext.sysctls: {sysctl.get('name')} is not a safe sysctl")
    for key, value in (annotations or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
                value == "runtime/default" or value.startswith("localhost/")):
            found.append(f"annotation {key}: {value} is not an allowed AppArmor profile")
    found += _selinux("spec.securityContext", pod_context)
    found += _apparmor("spec.securityContext", pod_context)
    if _seccomp_type(pod_context) == "Unconfined":
        found.append("spec.securityContext.seccompProfile.type must not be Unconfined")
    # -- restricted, pod level --------------------------------------------------------
    pod_non_root = pod_context.get("runAsNonRoot") is True
    pod_seccomp = _seccomp_type(pod_context) in SECCOMP_ALLOWED
    if pod_context.get("runAsUser") == 0:
        found.append("spec.securityContext.runAsUser must not be 0")
    # -- every container --------------------------------------------------------------
    for where, container in _containers(pod_spec):
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            found.append(f"{where}.securityContext.privileged must be unset or false")
        if (context.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"{where}.securityContext.windowsOptions.hostProcess must not be true")
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                found.append(f"{where}.ports: hostPort {port['hostPort']} is forbidden")
        if context.get("procMount", "Default") != "Default":
            found.append(f"{where}.securityContext.procMount must be Default")
        found += _selinux(f"{where}.securityContext", context)
        found += _apparmor(f"{where}.securityContext", context)
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"{where}.securityContext.allowPrivilegeEscalation must be false")
        if context.get("runAsNonRoot") is False or not (pod_non_root or context.get("runAsNonRoot") is True):
            found.append(f"{where}.securityContext.runAsNonRoot must be true (here or for the pod)")
        if context.get("runAsUser") == 0:
            found.append(f"{where}.securityContext.runAsUser must not be 0")
        kind = _seccomp_type(context)
        if kind == "Unconfined" or (kind not in SECCOMP_ALLOWED and not pod_seccomp):
            found.append(f"{where}.securityContext.seccompProfile.type must be RuntimeDefault or Localhost "
                         f"(here or for the pod)")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"{where}.securityContext.capabilities.drop must include ALL")
        extra = set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}
        if extra:
            found.append(f"{where}.securityContext.capabilities.add may only hold NET_BIND_SERVICE, not "
                         f"{', '.join(sorted(extra))}")
    return found


def _selinux(where: str, context: Mapping[str, Any]) -> list[str]:
    options = context.get("seLinuxOptions") or {}
    found = []
    if options.get("type", "") not in SELINUX_TYPES:
        found.append(f"{where}.seLinuxOptions.type {options['type']} is not allowed")
    for field in ("user", "role"):
        if options.get(field):
            found.append(f"{where}.seLinuxOptions.{field} must be unset")
    return found


def _apparmor(where: str, context: Mapping[str, Any]) -> list[str]:
    profile = (context.get("appArmorProfile") or {}).get("type")
    if profile is not None and profile not in APPARMOR_ALLOWED:
        return [f"{where}.appArmorProfile.type {profile} is not allowed"]
    return []


def pod_templates(manifest: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    """(pod spec, pod annotations) of a Pod or of any workload that holds a pod template."""
    if manifest.get("kind") == "Pod":
        yield dict(manifest.get("spec") or {}), dict((manifest.get("metadata") or {}).get("annotations") or {})
        return
    spec = manifest.get("spec") or {}
    if manifest.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = spec.get("template")
    if isinstance(template, dict):
        yield dict(template.get("spec") or {}), dict((template.get("metadata") or {}).get("annotations") or {})


def manifest_violations(manifest: Mapping[str, Any]) -> list[str]:
    return [problem for spec, annotations in pod_templates(manifest) for problem in violations(spec, annotations)]
