#!/usr/bin/env bash
# What scenario.sh checks and does to the NsqCluster and the load Jobs, as functions
# (tests/e2e/test_kind_checks.py runs them against a stand-in kubectl). Sourced after
# lib.sh, never run.
# shellcheck disable=SC2034  # used by the scripts that source this file

NSQD_SELECTOR="app.kubernetes.io/instance=${CLUSTER_NAME},app.kubernetes.io/component=nsqd"
LOOKUPD_SELECTOR="app.kubernetes.io/instance=${CLUSTER_NAME},app.kubernetes.io/component=nsqlookupd"
LAST_ROLLOUT=""

cluster_field() {
  k get nsqcluster "${CLUSTER_NAME}" -o "jsonpath=$1" 2>/dev/null
}

# Ready=True for the current generation of the spec.
cluster_ready() {
  local ready generation observed
  ready="$(cluster_field '{.status.conditions[?(@.type=="Ready")].status}')"
  generation="$(cluster_field '{.metadata.generation}')"
  observed="$(cluster_field '{.status.observedGeneration}')"
  [[ "${ready}" == "True" && "${generation}" == "${observed}" ]]
}

# pods_on SELECTOR IMAGE COUNT: exactly COUNT pods, every one running IMAGE, Ready and
# not being deleted.
pods_on() {
  local selector="$1" want_image="$2" want_count="$3" listing
  listing="$(k get pods --selector "${selector}" -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.spec.containers[0].image}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.metadata.deletionTimestamp}{"\n"}{end}')"
  [[ "$(grep -c . <<<"${listing}")" == "${want_count}" ]] || return 1
  ! awk -v image="${want_image}" '$2 != image || $3 != "True" || $4 != "" { bad = 1 } END { exit !bad }' <<<"${listing}"
}

# The roller's progress, logged each time it changes.
show_rollout() {
  local rollout
  rollout="$(cluster_field '{.status.rollout.phase} {.status.rollout.reason} {.status.rollout.pod} {.status.rollout.message}' || true)"
  if [[ "${rollout}" =~ ^[[:space:]]*$ ]]; then
    rollout=""  # no status.rollout: kubectl still prints the spaces between the fields
  fi
  if [[ "${rollout}" != "${LAST_ROLLOUT}" ]]; then
    log "status.rollout: ${rollout:-<none>}"
    LAST_ROLLOUT="${rollout}"
  fi
}

# The roller has nothing left to do (status.rollout absent or Complete).
rollout_complete() {
  local phase
  phase="$(cluster_field '{.status.rollout.phase}')"
  [[ -z "${phase}" || "${phase}" == "Complete" ]]
}

cluster_settled_on() {
  local image="$1" nsqds="$2"
  show_rollout
  cluster_ready && rollout_complete && pods_on "${NSQD_SELECTOR}" "${image}" "${nsqds}" && pods_on "${LOOKUPD_SELECTOR}" "${image}" 2
}

pod_gone() {
  ! k get pod "$1" >/dev/null 2>&1
}

claim_gone() {
  ! k get pvc "$1" >/dev/null 2>&1
}

load_pod() {
  k get pods --selector "app.kubernetes.io/instance=$1" -o jsonpath='{.items[0].metadata.name}' 2>/dev/null
}

load_publishing() {
  local pod logs
  pod="$(load_pod "$1")" && [[ -n "${pod}" ]] || return 1
  # Read whole, not piped: grep -q stops reading at the first match, and under pipefail
  # kubectl's write to the closed pipe would fail the check once the log is long.
  logs="$(k logs "${pod}" 2>/dev/null)" || return 1
  grep -q '^publishing to' <<<"${logs}"
}

load_finished() {
  local succeeded failed
  succeeded="$(k get job "$1" -o jsonpath='{.status.succeeded}')"
  failed="$(k get job "$1" -o jsonpath='{.status.failed}')"
  [[ "${succeeded:-0}" -gt 0 || "${failed:-0}" -gt 0 ]]
}

# start_load NAME [MANIFEST]: a load Job (load-job.yaml, or load-job-tls.yaml for TLS clients)
start_load() {
  local name="$1" manifest="${2:-load-job.yaml}"
  k delete job "${name}" --ignore-not-found --wait >/dev/null
  render "${manifest}" "${name}" | kubectl apply -f - >/dev/null
  wait_until 180 "load ${name} publishing" load_publishing "${name}"
}

# stop_load NAME: tell the load to stop publishing, wait for its verdict, show its counts.
stop_load() {
  local name="$1" pod
  pod="$(load_pod "${name}")"
  k exec "${pod}" -- python -c "open('/work/stop', 'w').close()"
  wait_until $((SETTLE_TIMEOUT + 120)) "load ${name} finished" load_finished "${name}"
  k logs "${pod}" >"${ARTIFACTS_DIR}/${name}.log"
  grep -v '^RESULT ' "${ARTIFACTS_DIR}/${name}.log" | tail -n 12 >&2
  grep -q '^RESULT ' "${ARTIFACTS_DIR}/${name}.log" || die "load ${name} printed no RESULT line"
  [[ "$(k get job "${name}" -o jsonpath='{.status.succeeded}')" == "1" ]] ||
    die "load ${name}: acknowledged messages were lost or not delivered (${ARTIFACTS_DIR}/${name}.log)"
  log "load ${name}: 0 acknowledged messages lost"
}

# Each nsqd pod was recreated after the patch, the highest ordinal first.
check_roll_order() {
  local since="$1" created previous="" ordinal
  for ordinal in 2 1 0; do
    created="$(k get pod "${CLUSTER_NAME}-nsqd-${ordinal}" -o jsonpath='{.metadata.creationTimestamp}')"
    [[ ! "${created}" < "${since}" ]] || die "${CLUSTER_NAME}-nsqd-${ordinal} was not replaced (created ${created})"
    [[ -z "${previous}" || "${created}" > "${previous}" ]] ||
      die "${CLUSTER_NAME}-nsqd-${ordinal} was replaced before a higher ordinal (${created} <= ${previous})"
    previous="${created}"
  done
  log "nsqd pods replaced in order 2, 1, 0"
}

# The TLS revision (a hash of the certificate's Secret) each nsqd pod was made with, one a line.
nsqd_tls_revisions() {
  k get pods --selector "${NSQD_SELECTOR}" -o jsonpath='{range .items[*]}{.metadata.annotations.nsq\.dev/tls-revision}{"\n"}{end}'
}

# tls_rolled_from REVISION COUNT: the cluster settled with COUNT nsqds, every one made with
# the same TLS revision, not REVISION (the certificate was renewed and every nsqd replaced).
tls_rolled_from() {
  local before="$1" nsqds="$2" revisions
  show_rollout
  cluster_ready && rollout_complete && pods_on "${NSQD_SELECTOR}" "$(image "${IMAGE_TAG}")" "${nsqds}" || return 1
  revisions="$(nsqd_tls_revisions)" || return 1
  [[ "$(grep -c . <<<"${revisions}")" == "${nsqds}" && "$(sort -u <<<"${revisions}" | grep -c .)" == 1 ]] || return 1
  ! grep -qx -- "${before}" <<<"${revisions}"
}
