{{/*
What the Pod and the workload webhooks share, each field as in manifests/base/webhook.yaml
(tests/packaging/offline/helm_chart.rs holds the default render equal to it). Called with
(dict "root" $ "caBundle" STRING "excluded" LIST "optedIn" BOOL): `optedIn` for the webhooks
of the namespaces without the opt-in label, which send single opted-in objects.
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
    path: {{ if .optedIn }}/mutate/opted-in{{ else }}/mutate{{ end }}
    port: 443
  {{- with .caBundle }}
  caBundle: {{ . }}
  {{- end }}
namespaceSelector:
  {{- $selector := .root.Values.webhook.namespaceSelector }}
  {{- if .optedIn }}
  {{- /* The other namespaces: the opt-in requirement turned around, the rest kept. */}}
  {{- with omit ($selector.matchLabels | default dict) "reload-injector.io/inject" }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    - key: reload-injector.io/inject
      operator: NotIn
      values: ["enabled"]
    {{- range $selector.matchExpressions }}
    {{- if ne .key "reload-injector.io/inject" }}
    - {{ toJson . }}
    {{- end }}
    {{- end }}
  {{- else }}
  {{- with $selector.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    {{- with $selector.matchExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
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

{{/*
The conditions of both Pod webhooks: a Pod not opted out by annotation that reads a ConfigMap or
Secret (manifests/base/webhook.yaml explains each).
*/}}
{{- define "reload-injector.podConditions" -}}
- name: not-opted-out
  expression: >-
    !has(object.metadata.annotations) ||
    !('reload-injector.io/inject' in object.metadata.annotations) ||
    object.metadata.annotations['reload-injector.io/inject'] != 'false'
- name: reads-config
  expression: >-
    (has(object.spec.volumes) && object.spec.volumes.exists(v,
      has(v.configMap) || has(v.secret) ||
      (has(v.projected) && has(v.projected.sources) &&
        !v.projected.sources.exists(s, has(s.serviceAccountToken)) &&
        v.projected.sources.exists(s, has(s.configMap) || has(s.secret))))) ||
    object.spec.containers.exists(c, has(c.envFrom) ||
      (has(c.env) && c.env.exists(e, has(e.valueFrom) &&
        (has(e.valueFrom.configMapKeyRef) || has(e.valueFrom.secretKeyRef))))) ||
    (has(object.spec.initContainers) && object.spec.initContainers.exists(c, has(c.envFrom) ||
      (has(c.env) && c.env.exists(e, has(e.valueFrom) &&
        (has(e.valueFrom.configMapKeyRef) || has(e.valueFrom.secretKeyRef))))))
{{- end }}

{{/*
The rules of both workload webhooks: the workload objects only, not their subresources (scaling
and status updates never wait on the webhook); Argo Rollouts match nothing where the CRD is not
served.
*/}}
{{- define "reload-injector.workloadRules" -}}
- apiGroups: ["apps"]
  apiVersions: ["v1"]
  operations: ["CREATE", "UPDATE"]
  resources: ["deployments", "statefulsets", "daemonsets", "replicasets"]
  scope: Namespaced
- apiGroups: ["batch"]
  apiVersions: ["v1"]
  operations: ["CREATE", "UPDATE"]
  resources: ["jobs", "cronjobs"]
  scope: Namespaced
- apiGroups: ["argoproj.io"]
  apiVersions: ["v1alpha1"]
  operations: ["CREATE", "UPDATE"]
  resources: ["rollouts"]
  scope: Namespaced
{{- end }}

{{/*
What a controller creates or scales (its ReplicaSets and Jobs) never waits on a workload webhook.
*/}}
{{- define "reload-injector.notCreatedByAController" -}}
- name: not-created-by-a-controller
  expression: >-
    !(request.resource.group in ['apps', 'batch']
    && request.resource.resource in ['replicasets', 'jobs']
    && object != null
    && has(object.metadata.ownerReferences)
    && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller))
{{- end }}

{{/*
The opt-ins of a pod template at PATH (CEL, `object.spec.template` or a CronJob's
`object.spec.jobTemplate.spec.template`): the opt-in label or annotation, Reloader's annotations,
or what the product wrote on it. Called with the path.
*/}}
{{- define "reload-injector.templateOptIns" -}}
((has({{ . }}.metadata.labels) &&
  'reload-injector.io/inject' in {{ . }}.metadata.labels &&
  {{ . }}.metadata.labels['reload-injector.io/inject'] == 'enabled') ||
(has({{ . }}.metadata.annotations) &&
  (('reload-injector.io/inject' in {{ . }}.metadata.annotations &&
    {{ . }}.metadata.annotations['reload-injector.io/inject'] == 'enabled') ||
  ['reload-injector.io/workload-opt-in', 'reload-injector.io/config-hash',
    'reloader.stakater.com/auto', 'configmap.reloader.stakater.com/auto',
    'secret.reloader.stakater.com/auto', 'configmap.reloader.stakater.com/reload',
    'secret.reloader.stakater.com/reload', 'reloader.stakater.com/search'
  ].exists(k, k in {{ . }}.metadata.annotations))))
{{- end }}
