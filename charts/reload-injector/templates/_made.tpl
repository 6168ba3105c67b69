{{/*
What the chart makes at `helm install` and keeps on every upgrade: certificate mode `helm`, and a
Secret-hash key created without a value. Each is looked up in the cluster first and, when there,
used again, so an upgrade never changes the certificate, the caBundle or the key (a new key
would roll every workload that reads a Secret through env). A render without a cluster
(`helm template`, a client-side dry run) cannot look anything up, so these fail it instead of
making new ones on every render ("reload-injector.needsCluster").

Each returns YAML and is computed once per render: the result is kept under .Values._made, so
the Secret and the webhooks' caBundle hold the same certificate.
*/}}

{{/* Fails the render when there is no cluster to look up what was made before. */}}
{{- define "reload-injector.needsCluster" -}}
{{- if not (lookup "v1" "Namespace" "" "kube-system") }}
{{- fail (printf "%s: the chart makes it at helm install and keeps it on upgrade by looking it up in the cluster, and this render has no cluster (helm template, or a client-side dry run). Use helm install/upgrade (or --dry-run=server), or give it: certificates.mode certManager, secret or generated; secretHashKey.value" .) }}
{{- end }}
{{- end }}

{{/* Mode `helm`: {caCrt, tlsCrt, tlsKey} (PEM), from the Secret already there or made now. */}}
{{- define "reload-injector.madeCertificate" -}}
{{- $made := .Values._made | default dict }}
{{- if not (hasKey $made "certificate") }}
{{- include "reload-injector.needsCluster" "certificates.mode is helm" }}
{{- $ns := .Release.Namespace }}
{{- $data := (lookup "v1" "Secret" $ns .Values.certificates.secretName).data | default dict }}
{{- $cert := dict }}
{{- if and (hasKey $data "ca.crt") (hasKey $data "tls.crt") (hasKey $data "tls.key") }}
{{- $cert = dict "caCrt" (b64dec (get $data "ca.crt")) "tlsCrt" (b64dec (get $data "tls.crt")) "tlsKey" (b64dec (get $data "tls.key")) }}
{{- else }}
{{- $caKey := genPrivateKey "ecdsa" }}
{{- $ca := genCAWithKey "reload-injector CA" 3650 $caKey }}
{{- $names := list "reload-injector" (printf "reload-injector.%s" $ns) (printf "reload-injector.%s.svc" $ns) (printf "reload-injector.%s.svc.cluster.local" $ns) }}
{{- $serving := genSignedCertWithKey (printf "reload-injector.%s.svc" $ns) nil $names 3650 $ca (genPrivateKey "ecdsa") }}
{{- $cert = dict "caCrt" $ca.Cert "tlsCrt" $serving.Cert "tlsKey" $serving.Key }}
{{- end }}
{{- $_ := set $made "certificate" $cert }}
{{- $_ := set .Values "_made" $made }}
{{- end }}
{{- get $made "certificate" | toYaml }}
{{- end }}

{{/* secretHashKey.create without a value: the key, from the Secret already there or made now. */}}
{{- define "reload-injector.madeHashKey" -}}
{{- $made := .Values._made | default dict }}
{{- if not (hasKey $made "hashKey") }}
{{- include "reload-injector.needsCluster" "secretHashKey.create is true without a value" }}
{{- $data := (lookup "v1" "Secret" .Release.Namespace .Values.secretHashKey.secretName).data | default dict }}
{{- $key := "" }}
{{- if hasKey $data "secret-hash.key" }}
{{- $key = b64dec (get $data "secret-hash.key") }}
{{- else }}
{{- $key = randAlphaNum 64 }}
{{- end }}
{{- $_ := set $made "hashKey" $key }}
{{- $_ := set .Values "_made" $made }}
{{- end }}
{{- get $made "hashKey" }}
{{- end }}
