#!/usr/bin/env bash
# The whole real-cluster proof: up.sh, scenario.sh, then down.sh (KEEP_CLUSTER=1 keeps
# the kind cluster). On failure, diagnostics are collected in ARTIFACTS_DIR first.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

finish() {
  local status=$?
  if ((status != 0)); then
    diagnose
  fi
  if [[ "${KEEP_CLUSTER:-0}" != "1" ]]; then
    "${KIND_DIR}/down.sh" || log "could not delete the kind cluster ${KIND_CLUSTER}"
  fi
  if ((status == 0)); then
    log "PASSED: rolling upgrade, scale-down and certificate renewal under load, 0 acknowledged messages lost"
  else
    log "FAILED (exit ${status}); diagnostics in ${ARTIFACTS_DIR}"
  fi
  exit "${status}"
}
trap finish EXIT

"${KIND_DIR}/up.sh"
"${KIND_DIR}/scenario.sh"
"${KIND_DIR}/scenario-tls.sh"
