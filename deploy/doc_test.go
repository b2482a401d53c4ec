// Package deploy_test checks the deployment files of deploy/ for the
// properties that matter and that can be checked without a container
// engine or a cluster: the image runs as non-root from a pinned distroless
// base and copies no secret in; the development compose file keeps secrets
// in files, health-checks what others wait for and refers only to what it
// defines; the Helm chart's values hold no secret; the offline package's
// scripts verify, install, upgrade and roll back. make deploy-check adds
// helm lint and checks of the rendered chart (chart_rendered_test.go).
package deploy_test
