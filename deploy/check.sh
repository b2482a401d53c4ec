#!/usr/bin/env bash
# make deploy-check: the deployment files checked with real tools where this
# machine has them. helm v4 lints the chart (default values and every
# optional part on) and renders it; the rendered manifests and the static
# files are then checked by go test ./deploy -tags deploycheck. helm is built
# from the Go proxy into a cache directory (not go.mod); the image itself
# cannot be built here (no container engine) — TestDockerfile checks its
# source.
set -euo pipefail
cd "$(dirname "$0")/.."
HELM_VERSION="${HELM_VERSION:-v4.3.2}"
bin="${DEPLOY_TOOLS:-$(go env GOCACHE)/relay-deploy-tools}/helm-$HELM_VERSION"
if [ ! -x "$bin/helm" ]; then
  mkdir -p "$bin"
  GOBIN="$bin" go install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
fi
helm="$bin/helm"
chart=deploy/helm/shipsync-shore
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
"$helm" lint --strict "$chart"
"$helm" lint --strict "$chart" -f "$chart/ci/full-values.yaml"
"$helm" template shipsync "$chart" > "$out/default.yaml"
"$helm" template shipsync "$chart" -f "$chart/ci/full-values.yaml" > "$out/full.yaml"
# The chart must refuse what would exhaust PostgreSQL or drop below 3 replicas.
if "$helm" template shipsync "$chart" --set autoscaling.maxReplicas=100 >/dev/null 2>&1; then
  echo "deploy-check: the chart rendered past the PostgreSQL connection budget" >&2; exit 1
fi
if "$helm" template shipsync "$chart" --set server.replicas=2 --set autoscaling.enabled=false >/dev/null 2>&1; then
  echo "deploy-check: the chart rendered fewer than 3 server replicas" >&2; exit 1
fi
SHIPSYNC_RENDERED_CHART="$out/default.yaml" SHIPSYNC_RENDERED_FULL="$out/full.yaml" \
  go test -count=1 -tags deploycheck ./deploy/
bash -n deploy/shipsync/package/install.sh deploy/shipsync/package/rollback.sh deploy/shipsync/package/package.sh
echo "deploy-check: ok"
