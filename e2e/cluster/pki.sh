#!/usr/bin/env bash
# The cluster's certificates and keys, made with openssl as hack/local-up-cluster.sh makes
# them: one CA for every serving and client certificate, and a key pair that signs and
# verifies service-account tokens. Sourced by up.sh.

# cert NAME CN ORGANISATION SUBJECT_ALT_NAMES(comma-separated, may be empty)
cert() {
  local name="$1" cn="$2" org="$3" sans="$4" subject ext
  [[ -f "${PKI_DIR}/${name}.crt" ]] && return
  subject="/CN=${cn}"
  [[ -n "${org}" ]] && subject="/O=${org}${subject}"
  ext="${PKI_DIR}/${name}.ext"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ -n "${sans}" ]]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=${sans}"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"${ext}"
  openssl req -new -newkey rsa:2048 -nodes -keyout "${PKI_DIR}/${name}.key" -subj "${subject}" \
    -out "${PKI_DIR}/${name}.csr" 2>/dev/null
  openssl x509 -req -in "${PKI_DIR}/${name}.csr" -CA "${PKI_DIR}/ca.crt" -CAkey "${PKI_DIR}/ca.key" \
    -CAcreateserial -days 365 -extfile "${ext}" -out "${PKI_DIR}/${name}.crt" 2>/dev/null
  rm -f "${PKI_DIR}/${name}.csr" "${ext}"
}

# kubeconfig NAME USER_CERT: a kubeconfig for a component that authenticates with its cert.
kubeconfig() {
  local name="$1" user="$2" file="${STATE_DIR}/$1.kubeconfig"
  [[ -f "${file}" ]] && return
  cat >"${file}" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: nsq-local
  cluster:
    server: ${APISERVER_URL}
    certificate-authority: ${PKI_DIR}/ca.crt
users:
- name: ${name}
  user:
    client-certificate: ${PKI_DIR}/${user}.crt
    client-key: ${PKI_DIR}/${user}.key
contexts:
- name: nsq-local
  context: {cluster: nsq-local, user: ${name}}
current-context: nsq-local
KUBECONFIG
}

make_pki() {
  mkdir -p "${PKI_DIR}"
  chmod 700 "${PKI_DIR}"
  if [[ ! -f "${PKI_DIR}/ca.crt" ]]; then
    openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "${PKI_DIR}/ca.key" -days 3650 \
      -subj "/CN=nsq-operator-cluster-ca" -out "${PKI_DIR}/ca.crt" 2>/dev/null
  fi
  local apiserver_sans="DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
  apiserver_sans+=",DNS:kubernetes.default.svc.${CLUSTER_DOMAIN},DNS:localhost"
  apiserver_sans+=",IP:${NODE_IP},IP:${KUBERNETES_SERVICE_IP},IP:127.0.0.1"
  cert apiserver kube-apiserver "" "${apiserver_sans}"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters ""
  cert admin kubernetes-admin system:masters ""
  cert controller-manager system:kube-controller-manager "" ""
  cert scheduler system:kube-scheduler "" ""
  cert kube-proxy system:kube-proxy "" ""
  cert kubelet-client "system:node:${NODE_NAME}" system:nodes ""
  cert kubelet "system:node:${NODE_NAME}" system:nodes "DNS:${NODE_NAME},IP:${NODE_IP}"
  cert local-volumes system:nsq-local-volumes system:masters ""
  if [[ ! -f "${PKI_DIR}/service-account.key" ]]; then
    openssl genrsa -out "${PKI_DIR}/service-account.key" 2048 2>/dev/null
    openssl rsa -in "${PKI_DIR}/service-account.key" -pubout -out "${PKI_DIR}/service-account.pub" 2>/dev/null
  fi
  kubeconfig admin admin
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler
  kubeconfig kube-proxy kube-proxy
  kubeconfig kubelet kubelet-client
  kubeconfig local-volumes local-volumes
}
