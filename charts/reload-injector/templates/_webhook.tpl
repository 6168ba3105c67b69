{{/*
What the Pod and the workload webhooks share, each field as in manifests/base/webhook.yaml
(tests/helm_chart.rs holds the default render equal to it). Called with
(dict "root" $ "caBundle" STRING "excluded" LIST).
*/}}
{{- define "reload-injector.webhookCommon" -}}
admissionReviewVersions: ["v1"]
sideEffects: None
matchPolicy: Equivalent
reinvocationPolicy: {{ .root.Values.webhook.reinvocationPolicy }}
timeoutSeconds: {{ .root.Values.webhook.timeoutSeconds }}
clientConfig:
  service:
    name: {{ include "reload-injector.name" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: /mutate
    port: 443
  {{- with .caBundle }}
  caBundle: {{ . }}
  {{- end }}
namespaceSelector:
  {{- with .root.Values.webhook.namespaceSelector.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    {{- with .root.Values.webhook.namespaceSelector.matchExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    # Never the system namespaces nor the webhook's own, by name, so a label cannot opt them in.
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ toJson .excluded }}
objectSelector:
  matchExpressions:
    - key: reload-injector.io/inject
      operator: NotIn
      values: ["false"]
{{- end }}
