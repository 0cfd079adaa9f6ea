{{- define "karpenter-rs.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "karpenter-rs.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "karpenter-rs.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "karpenter-rs.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "karpenter-rs.labels" -}}
app.kubernetes.io/name: {{ include "karpenter-rs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "karpenter-rs.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter-rs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "karpenter-rs.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "karpenter-rs.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}


{{- /* The controller's image: pinned by digest when one is given. */ -}}
{{- define "karpenter-rs.image" -}}
{{- $image := .Values.controller.image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{- /* settings.tags as `k1=v1,k2=v2` (ADDITIONAL_TAGS). */ -}}
{{- define "karpenter-rs.tags" -}}
{{- $pairs := list -}}
{{- range $k, $v := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{- /* Gives each pod affinity term in .terms that has none the pods' own selector, so
anti-affinity and spread keep replicas apart without the values naming the chart's labels. */ -}}
{{- define "karpenter-rs.withSelector" -}}
{{- $selector := dict "matchLabels" (fromYaml (include "karpenter-rs.selectorLabels" .root)) -}}
{{- range $term := .terms -}}
{{- if not (hasKey $term "labelSelector") -}}
{{- $_ := set $term "labelSelector" $selector -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* .Values.affinity's podAffinity and podAntiAffinity terms, given a selector where they
have none. */ -}}
{{- define "karpenter-rs.patchAffinity" -}}
{{- range $kind := list "podAffinity" "podAntiAffinity" -}}
{{- with (get $.Values.affinity $kind) -}}
{{- include "karpenter-rs.withSelector" (dict "root" $ "terms" (default list .requiredDuringSchedulingIgnoredDuringExecution)) -}}
{{- $preferred := list -}}
{{- range .preferredDuringSchedulingIgnoredDuringExecution -}}
{{- $preferred = append $preferred .podAffinityTerm -}}
{{- end -}}
{{- include "karpenter-rs.withSelector" (dict "root" $ "terms" $preferred) -}}
{{- end -}}
{{- end -}}
{{- end -}}
