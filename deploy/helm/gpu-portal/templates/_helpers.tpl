{{/* The release's objects are named after the release; the cluster-wide ones (ClusterRoles, the
admission policy) after portalName, the name the portal itself gives the roles it binds. */}}
{{- define "gpu-portal.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gpu-portal.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpu-portal.labels" -}}
{{ include "gpu-portal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "gpu-portal.serviceAccountName" -}}
{{- default .Values.portalName .Values.serviceAccount.name -}}
{{- end -}}

{{- define "gpu-portal.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "gpu-portal.secretName" -}}
{{- default (include "gpu-portal.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* What every portal container reads its settings from, and checksums that roll the pods
when the chart's settings change. */}}
{{- define "gpu-portal.envFrom" -}}
envFrom:
  - configMapRef:
      name: {{ include "gpu-portal.fullname" . }}
  - secretRef:
      name: {{ include "gpu-portal.secretName" . }}
{{- end -}}

{{- define "gpu-portal.configChecksums" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end -}}

{{/* The pod-level parts every component shares; `component` is one of the values' sections. */}}
{{- define "gpu-portal.podSpec" -}}
{{- $root := .root -}}
{{- $component := .component -}}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with (default $root.Values.nodeSelector $component.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default $root.Values.tolerations $component.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (default $root.Values.affinity $component.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  # The root filesystem is read-only: Python, gunicorn and Celery write only here.
  - name: tmp
    emptyDir: {}
{{- end -}}

{{- define "gpu-portal.container" -}}
{{- $root := .root -}}
image: {{ include "gpu-portal.image" $root }}
imagePullPolicy: {{ $root.Values.image.pullPolicy }}
{{ include "gpu-portal.envFrom" $root }}
securityContext:
  {{- toYaml $root.Values.securityContext | nindent 2 }}
resources:
  {{- toYaml .component.resources | nindent 2 }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- end -}}
