{{/* Chart name, overridable. */}}
{{- define "kai-ray.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object-name prefix: the release name, suffixed with the chart name unless it contains it. */}}
{{- define "kai-ray.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "kai-ray.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "kai-ray.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kai-ray.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels naming the release's objects. */}}
{{- define "kai-ray.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kai-ray.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels that select the scheduler pods and no Ray pod; never change them (Deployment selectors are immutable). */}}
{{- define "kai-ray.schedulerSelectorLabels" -}}
{{ include "kai-ray.selectorLabels" . }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{- define "kai-ray.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kai-ray.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name must name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kai-ray.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Name of the RayCluster; KubeRay names its head Service <name>-head-svc. */}}
{{- define "kai-ray.rayClusterName" -}}
{{- printf "%s-ray" (include "kai-ray.fullname" .) | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{/* RAY_ADDRESS for the scheduler, empty for embedded Ray. */}}
{{- define "kai-ray.rayAddress" -}}
{{- if eq .Values.ray.mode "external" -}}
{{- required "ray.address is required when ray.mode is external" .Values.ray.address -}}
{{- else if eq .Values.ray.mode "kuberay" -}}
{{- printf "ray://%s-head-svc.%s.svc:10001" (include "kai-ray.rayClusterName" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* Render-time checks of value combinations a schema cannot express. */}}
{{- define "kai-ray.checks" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicas > 1 needs leaderElection.enabled: two schedulers without a leader would bind the same capacity" -}}
{{- end -}}
{{- if not (has .Values.ray.mode (list "embedded" "external" "kuberay")) -}}
{{- fail (printf "ray.mode must be embedded, external or kuberay, not %q" .Values.ray.mode) -}}
{{- end -}}
{{- if not (has .Values.eviction.mode (list "eviction" "delete")) -}}
{{- fail (printf "eviction.mode must be eviction or delete, not %q" .Values.eviction.mode) -}}
{{- end -}}
{{- end -}}
