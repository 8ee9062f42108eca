{{/* The chart's name, or nameOverride. */}}
{{- define "nsq-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of the release's objects: fullnameOverride, else the release name, with the
chart name prefixed unless the release name holds it already. */}}
{{- define "nsq-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "nsq-operator.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "nsq-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nsq-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The selector labels as key=value,key=value: the operator is told them (OPERATOR_POD_LABELS)
so each NsqCluster's NetworkPolicy admits its pod. */}}
{{- define "nsq-operator.podSelector" -}}
{{- printf "app.kubernetes.io/name=%s,app.kubernetes.io/instance=%s" (include "nsq-operator.name" .) .Release.Name -}}
{{- end -}}

{{- define "nsq-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "nsq-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The operator's ServiceAccount: the one the release makes (serviceAccount.name, else the
release's name), or with serviceAccount.create false one that exists already, named. */}}
{{- define "nsq-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "nsq-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name the existing ServiceAccount the operator runs as (serviceAccount.create is false)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The operator's image; the example cluster runs nsqd and nsqlookupd from it too. */}}
{{- define "nsq-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Where the operator's namespaced rights are granted: every namespace when it watches
them all, else only the namespaces it watches. */}}
{{- define "nsq-operator.clusterwide" -}}
{{- if not .Values.watchNamespaces }}true{{ end -}}
{{- end -}}

{{/* A Kubernetes object name made from an NSQ topic or channel name (which may hold
upper case, "_", "." and "#"). */}}
{{- define "nsq-operator.objectName" -}}
{{- . | lower | replace "_" "-" | replace "." "-" | replace "#" "-" | trunc 63 | trimSuffix "-" -}}
{{- end -}}
