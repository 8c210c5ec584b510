{{/* The release's objects are named after it ("ucompute" when the release is called so). */}}
{{- define "ucompute.fullname" -}}
{{- if contains "ucompute" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-ucompute" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels. app.kubernetes.io/name: ucompute is also what the jobs' network policies let in (the session proxy). */}}
{{- define "ucompute.selectorLabels" -}}
app.kubernetes.io/name: ucompute
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ucompute.labels" -}}
{{ include "ucompute.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ucompute.postgres" -}}
{{- if .Values.store.postgres.secretName }}true{{ end -}}
{{- end -}}

{{- define "ucompute.storageClaim" -}}
{{- .Values.storage.existingClaim | default (printf "%s-storage" (include "ucompute.fullname" .)) -}}
{{- end -}}

{{/* The jobs' namespace with the `single` strategy. */}}
{{- define "ucompute.jobsNamespace" -}}
{{- .Values.kubernetes.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* The configuration file (README "Configuration"): what the values say, `config` merged over it. */}}
{{- define "ucompute.config" -}}
{{- $kubernetes := merge (dict
  "namespace" (include "ucompute.jobsNamespace" .)
  "serviceNamespace" .Release.Namespace
  "storageClaim" (include "ucompute.storageClaim" .)
  "storageSubPath" .Values.storage.subPath) (deepCopy .Values.kubernetes) -}}
{{- $server := dict "host" "0.0.0.0" "port" 8080 -}}
{{- if .Values.ingress.enabled -}}
{{- $_ := set $server "publicUrl" (printf "%s://%s" (ternary "https" "http" (ne .Values.ingress.tls.secretName "")) .Values.ingress.host) -}}
{{- end -}}
{{- $config := dict
  "backend" "kubernetes"
  "dataDir" "/var/lib/ucompute"
  "storage" (dict "root" "/storage")
  "server" $server
  "kubernetes" $kubernetes
  "sessions" (dict "domain" .Values.sessions.domain "hostPrefix" .Values.sessions.hostPrefix) -}}
{{- if .Values.products -}}
{{- $_ := set $config "products" "/etc/ucompute/products.yml" -}}
{{- end -}}
{{- if .Values.catalog -}}
{{- $_ := set $config "apps" "/etc/ucompute-apps" -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $config (deepCopy .Values.config)) -}}
{{- end -}}
