{{/*
Values that would make a broken or surprising install fail the render, each naming the value.
values.schema.json checks types, enums and unknown keys; these are the checks across values.
Included once, from webhook.yaml.
*/}}
{{- define "reload-injector.validate" -}}
{{- $v := .Values }}

{{- if and (eq $v.webhook.pods.failurePolicy "Fail") (lt (int $v.replicas) 2) }}
{{- fail (printf "webhook.pods.failurePolicy is Fail with replicas: %d: while that one replica restarts or is drained, no Pod can be created or healed in an opted-in namespace. Set replicas to 2 or more, or webhook.pods.failurePolicy to Ignore" (int $v.replicas)) }}
{{- end }}

{{- $minAvailable := $v.podDisruptionBudget.minAvailable }}
{{- if and (gt (int $v.replicas) 1) (not (kindIs "string" $minAvailable)) (ge (int $minAvailable) (int $v.replicas)) }}
{{- fail (printf "podDisruptionBudget.minAvailable is %d with replicas: %d: no replica could ever be evicted, and every node drain would hang. Keep it below replicas" (int $minAvailable) (int $v.replicas)) }}
{{- end }}

{{- $selector := $v.webhook.namespaceSelector | default dict }}
{{- if and (empty $selector.matchLabels) (empty $selector.matchExpressions) }}
{{- fail "webhook.namespaceSelector is empty: it would select every namespace, not only those labelled reload-injector.io/inject=enabled. Keep the requirement reload-injector.io/inject In [enabled] (add others to narrow it)" }}
{{- end }}
{{- $optIn := eq (get ($selector.matchLabels | default dict) "reload-injector.io/inject" | toString) "enabled" }}
{{- range $selector.matchExpressions }}
{{- if and (eq .key "reload-injector.io/inject") (eq .operator "In") (eq (toJson .values) "[\"enabled\"]") }}
{{- $optIn = true }}
{{- end }}
{{- end }}
{{- if not $optIn }}
{{- fail "webhook.namespaceSelector does not require reload-injector.io/inject In [enabled]: the rollout controller and `reload-injector status` treat exactly the namespaces with that label as opted in. Keep that requirement and add others to narrow it" }}
{{- end }}

{{- $c := $v.certificates }}
{{- if eq $c.mode "secret" }}
{{- if not $c.caBundle }}
{{- fail "certificates.mode is secret but certificates.caBundle is empty: the API server would have no CA to trust for the webhook. Give the base64 CA bundle (the ca-bundle.b64 that `reload-injector certs` writes: --set-file certificates.caBundle=DIR/ca-bundle.b64)" }}
{{- end }}
{{- if not (contains "-----BEGIN CERTIFICATE-----" (b64dec (trim $c.caBundle))) }}
{{- fail "certificates.caBundle is not a base64-encoded PEM certificate (it must decode to -----BEGIN CERTIFICATE-----...)" }}
{{- end }}
{{- else if $c.caBundle }}
{{- fail (printf "certificates.caBundle is set but certificates.mode is %s: the caBundle is used in mode secret only (remove it, or set certificates.mode=secret)" $c.mode) }}
{{- end }}

{{- range $key, $marker := dict "tlsCrt" "-----BEGIN CERTIFICATE-----" "tlsKey" "PRIVATE KEY-----" "caCrt" "-----BEGIN CERTIFICATE-----" }}
{{- $file := get $c.generated $key }}
{{- if eq $c.mode "generated" }}
{{- if not $file }}
{{- fail (printf "certificates.mode is generated but certificates.generated.%s is empty: run `reload-injector certs --out DIR --namespace %s` and pass --set-file certificates.generated.tlsCrt=DIR/tls.crt,certificates.generated.tlsKey=DIR/tls.key,certificates.generated.caCrt=DIR/ca.crt" $key $.Release.Namespace) }}
{{- end }}
{{- if not (contains $marker $file) }}
{{- fail (printf "certificates.generated.%s is not a PEM file (no %s in it): pass the file itself with --set-file" $key $marker) }}
{{- end }}
{{- else if $file }}
{{- fail (printf "certificates.generated.%s is set but certificates.mode is %s: the files are used in mode generated only" $key $c.mode) }}
{{- end }}
{{- end }}

{{- if and (ne $c.mode "certManager") (not (empty $c.certManager.issuerRef)) }}
{{- fail (printf "certificates.certManager.issuerRef is set but certificates.mode is %s: it is used in mode certManager only" $c.mode) }}
{{- end }}

{{- if and (not $v.secretHashKey.create) $v.secretHashKey.value }}
{{- fail "secretHashKey.value is set but secretHashKey.create is false: set create=true for the chart to render the Secret, or remove the value" }}
{{- end }}

{{- if and $v.metrics.serviceMonitor.enabled $v.metrics.podMonitor.enabled }}
{{- fail "metrics.serviceMonitor.enabled and metrics.podMonitor.enabled are both true: Prometheus would scrape every replica twice. Enable one" }}
{{- end }}

{{- if eq (int $v.metrics.port) 8443 }}
{{- fail "metrics.port is 8443, the webhook's HTTPS port: choose another" }}
{{- end }}
{{- end }}
