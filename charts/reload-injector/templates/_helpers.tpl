{{/*
Every object is named `reload-injector`: `reload-injector status` finds the
MutatingWebhookConfiguration by that name, and the rollout controller's Lease has it too.
*/}}
{{- define "reload-injector.name" -}}
reload-injector
{{- end }}

{{/* The selector labels: stable across upgrades (a Deployment's selector is immutable). */}}
{{- define "reload-injector.selectorLabels" -}}
app.kubernetes.io/name: reload-injector
{{- end }}

{{/*
Labels of every object: the kustomize base's `app.kubernetes.io/name`, plus Helm's standard
labels (the only labels the render tests allow to differ from the base).
*/}}
{{- define "reload-injector.labels" -}}
{{ include "reload-injector.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The one image: the webhook runs it, and injects it as the sidecar unless told otherwise. */}}
{{- define "reload-injector.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* The serving certificate's Certificate (cert-manager mode), for cainjector's annotation. */}}
{{- define "reload-injector.servingCertificate" -}}
reload-injector-serving
{{- end }}
