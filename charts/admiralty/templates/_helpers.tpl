{{/*
The provider's components (--enable): the sources component only with sourceController.enabled,
the scheduler extender only with the proxy scheduler that calls it.
*/}}
{{- define "admiralty.components" -}}
{{- $c := list "targets" "delegation" "summary" -}}
{{- if .Values.sourceController.enabled }}{{ $c = append $c "sources" }}{{ end -}}
{{- $c = concat $c (list "webhook" "kubelet") -}}
{{- if .Values.proxyScheduler.enabled }}{{ $c = append $c "extender" }}{{ end -}}
{{- join "," $c -}}
{{- end -}}

{{/* The provider's image: the tag defaults to the chart's appVersion. */}}
{{- define "admiralty.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Pod-level settings every pod of the chart takes from the values (indented for a pod spec). */}}
{{- define "admiralty.podPlacement" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}
