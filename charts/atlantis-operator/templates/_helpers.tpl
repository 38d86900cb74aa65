{{/* Chart name, at most 63 characters (a label value). */}}
{{- define "atlantis-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object names: the release name, or <release>-<chart> when it does not contain the chart name. */}}
{{- define "atlantis-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The controller pods' labels and the selector of the Deployment, Service, PDB and
anti-affinity. The same as manifests/ (no instance label), so objects installed from
manifests/ can be adopted by a release: a Deployment's selector cannot change.
*/}}
{{- define "atlantis-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "atlantis-operator.name" . }}
app.kubernetes.io/component: controller
{{- end }}

{{/* Labels of every object the chart templates. */}}
{{- define "atlantis-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "atlantis-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "atlantis-operator.imageTag" . | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: atlantis-operator
{{- end }}

{{- define "atlantis-operator.controllerLabels" -}}
{{ include "atlantis-operator.labels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "atlantis-operator.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{- define "atlantis-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "atlantis-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The single watched namespace, or "" for all. The controller's --namespace takes one.
*/}}
{{- define "atlantis-operator.watchNamespace" -}}
{{- $ns := .Values.watchNamespaces | default list }}
{{- if gt (len $ns) 1 }}
{{- fail (printf "watchNamespaces: %v names %d namespaces, but the controller's --namespace watches one (or, when empty, all): install one release per namespace" $ns (len $ns)) }}
{{- end }}
{{- if $ns }}{{ first $ns }}{{ end }}
{{- end }}

{{/*
"true" when the controller runs with --leader-elect. Several replicas without it would all
reconcile, so that is refused.
*/}}
{{- define "atlantis-operator.leaderElect" -}}
{{- if .Values.leaderElection.enabled }}true
{{- else if gt (int .Values.replicaCount) 1 }}
{{- fail (printf "leaderElection.enabled is false with replicaCount %v: every replica would reconcile; enable leader election or set replicaCount to 1" .Values.replicaCount) }}
{{- end }}
{{- end }}
