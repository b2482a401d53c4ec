{{/* The chart's names and shared pieces. */}}

{{- define "shipsync.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "shipsync.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "shipsync.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "shipsync.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: shipsync
{{- end -}}

{{/* selector labels of one component: (dict "ctx" $ "component" "server") */}}
{{- define "shipsync.selector" -}}
app.kubernetes.io/name: {{ include "shipsync.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "shipsync.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "shipsync.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "shipsync.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The secret volumes every component mounts (read-only files). */}}
{{- define "shipsync.secretVolumes" -}}
- name: database
  secret:
    secretName: {{ required "secrets.database.existingSecret is required" .Values.secrets.database.existingSecret }}
    defaultMode: 0440
- name: target
  secret:
    secretName: {{ required "secrets.target.existingSecret is required" .Values.secrets.target.existingSecret }}
    defaultMode: 0440
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{- define "shipsync.secretMounts" -}}
- name: database
  mountPath: /run/secrets/shipsync/database
  readOnly: true
- name: target
  mountPath: /run/secrets/shipsync/target
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* Connection strings are read from the mounted files (relay's NAME_FILE). */}}
{{- define "shipsync.secretEnv" -}}
- name: DATABASE_URL_FILE
  value: /run/secrets/shipsync/database/{{ .Values.secrets.database.key }}
- name: SHIPSYNC_TARGET_DSN_FILE
  value: /run/secrets/shipsync/target/{{ .Values.secrets.target.key }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end -}}

{{/* Anti-affinity and zone spread of one component: (dict "ctx" $ "component" "server") */}}
{{- define "shipsync.placement" -}}
affinity:
  podAntiAffinity:
    {{- if eq .ctx.Values.server.antiAffinity "required" }}
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "shipsync.selector" . | nindent 12 }}
    {{- else }}
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "shipsync.selector" . | nindent 14 }}
    {{- end }}
{{- if .ctx.Values.server.topologySpread }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "shipsync.selector" . | nindent 8 }}
{{- end }}
{{- end -}}

{{/* The PostgreSQL connection budget (scale-out must not exhaust it). */}}
{{- define "shipsync.checkBudget" -}}
{{- $max := .Values.server.replicas -}}
{{- if .Values.autoscaling.enabled -}}{{- $max = .Values.autoscaling.maxReplicas -}}{{- end -}}
{{- /* + 2 per server pod: the applier's two engines each hold a session lock on a connection of their own */ -}}
{{- $total := mul $max (add .Values.server.postgresPoolMaxConns 2) -}}
{{- if .Values.cdc.enabled -}}{{- $total = add $total .Values.cdc.postgresPoolMaxConns -}}{{- end -}}
{{- if .Values.console.enabled -}}{{- $total = add $total (mul .Values.console.replicas .Values.console.postgresPoolMaxConns) -}}{{- end -}}
{{- if gt (int $total) (int .Values.postgres.connectionBudget) -}}
{{- fail (printf "PostgreSQL connections: up to %d pods' pools need %d connections, above postgres.connectionBudget %d; lower autoscaling.maxReplicas or the pool sizes" (int $max) (int $total) (int .Values.postgres.connectionBudget)) -}}
{{- end -}}
{{- if lt (int .Values.server.replicas) 3 -}}
{{- fail "server.replicas must be at least 3 (a replica may be down for maintenance while another upgrades)" -}}
{{- end -}}
{{- end -}}
