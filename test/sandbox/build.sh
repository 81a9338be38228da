#!/usr/bin/env bash
# Builds pinned binaries from their Go modules into a cache folder keyed by every input
# (versions, Go version, wrapper go.mod/go.sum files). A finished build is marked by a .complete
# stamp, so a second call returns at once. Prints the folder on stdout.
#   build.sh          the sandbox's control plane: etcd, kwok, kube-apiserver, kube-controller-manager,
#                     kube-scheduler, kubectl
#   build.sh helm     helm, for the chart's tests (charts/admiralty)
#   build.sh metrics-server
#                     metrics-server, which the sandbox runs in every cluster (`kubectl top`, HPAs)
#   build.sh kueue    Kueue's manager (cmd/kueue) with its CRDs, RBAC and webhook configurations, for
#                     queueing batch work in a source cluster (issue 56; `sandbox up --kueue`); not
#                     in CI. Cold (empty Go build cache, modules downloaded): 3 min 27 s on 2 cores
#                     shared with other work
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-modcacherw
K8S=v1.36.3 ETCD=v3.6.14 KWOK=v0.8.0 HELM=v4.3.1 METRICS_SERVER=v0.9.0 KUEUE=v0.17.0
# The folders of Kueue's module that the sandbox installs from (under config/components).
KUEUE_FILES="crd/bases rbac webhook/manifests.yaml"
what=${1:-control-plane}

command -v go >/dev/null || { echo "sandbox: Go 1.26.x is required to build the control plane" >&2; exit 1; }
go version | grep -q ' go1\.26\.' || { echo "sandbox: need Go 1.26.x, found: $(go version)" >&2; exit 1; }

# Hash of the wrapper modules named, in this order.
sums() { for f in go.mod go.sum; do for m in "$@"; do cat "$here/go/$m/$f"; done; done; }
case "$what" in
  control-plane) key="k8s-${K8S}_etcd-${ETCD}_kwok-${KWOK}_$(go env GOVERSION)_$(sums etcd k8s kwok | sha256sum | cut -c1-12)" ;;
  helm) key="helm-${HELM}_$(go env GOVERSION)_$(sums helm | sha256sum | cut -c1-12)" ;;
  metrics-server) key="metrics-server-${METRICS_SERVER}_$(go env GOVERSION)_$(sums metrics-server | sha256sum | cut -c1-12)" ;;
  # What is copied next to the binary is in the key too: a cache made before a file was added
  # is rebuilt rather than found without it.
  kueue) key="kueue-${KUEUE}_$(go env GOVERSION)_$( (sums kueue; echo "$KUEUE_FILES") | sha256sum | cut -c1-12)" ;;
  *) echo "usage: build.sh [control-plane|helm|metrics-server|kueue]" >&2; exit 2 ;;
esac
root="${SANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/admiralty-ts-sandbox}"
bin="$root/$key"
mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
if [ -f "$bin/.complete" ]; then echo "$bin"; exit 0; fi
mkdir -p "$bin"
log() { echo "sandbox build: $*" >&2; }
start=$(date +%s)

if [ "$what" = helm ]; then
  log "helm $HELM"
  H="-X helm.sh/helm/v4/internal/version"
  (cd "$here/go/helm" && go build -trimpath -ldflags "-s -w $H.version=$HELM $H.metadata= $H.gitTreeState=clean" -o "$bin/helm" helm.sh/helm/v4/cmd/helm)
  "$bin/helm" version --short | grep -qx "$HELM" || { echo "sandbox build: helm says $("$bin/helm" version --short), want $HELM" >&2; exit 1; }
elif [ "$what" = metrics-server ]; then
  log "metrics-server $METRICS_SERVER"
  # Its Makefile stamps the version into client-go's version package.
  (cd "$here/go/metrics-server" && go build -trimpath -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER" -o "$bin/metrics-server" sigs.k8s.io/metrics-server/cmd/metrics-server)
  "$bin/metrics-server" --version | grep -qx "$METRICS_SERVER" || { echo "sandbox build: metrics-server says $("$bin/metrics-server" --version), want $METRICS_SERVER" >&2; exit 1; }
elif [ "$what" = kueue ]; then
  log "kueue $KUEUE"
  # Its Makefile stamps the version into its version package, which the manager logs at start-up
  # (there is no commit to stamp: the module proxy serves no history). The manager has no
  # --version flag, so the check reads the main module's version that Go recorded in the binary.
  KV="-X sigs.k8s.io/kueue/pkg/version"
  (cd "$here/go/kueue" && go build -trimpath -ldflags "-s -w $KV.GitVersion=$KUEUE $KV.BuildDate=2026-07-23T00:00:00Z" -o "$bin/kueue" sigs.k8s.io/kueue/cmd/kueue)
  go version -m "$bin/kueue" | grep -qP "^\tmod\tsigs\.k8s\.io/kueue\t\Q$KUEUE\E\t" || { echo "sandbox build: kueue's binary does not record sigs.k8s.io/kueue $KUEUE" >&2; exit 1; }
  # Its CRDs, its RBAC (a kustomization: namespace and name prefix come from whoever applies it)
  # and its webhook configurations, from the same module, copied so that installing them needs
  # neither Go nor the module cache.
  src="$(cd "$here/go/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/config/components"
  mkdir -p "$bin/kueue-crds" "$bin/kueue-rbac"
  cp "$src"/crd/bases/*.yaml "$bin/kueue-crds/"
  cp "$src"/rbac/*.yaml "$bin/kueue-rbac/"
  cp "$src"/webhook/manifests.yaml "$bin/kueue-webhooks.yaml"
  chmod -R u+w "$bin/kueue-crds" "$bin/kueue-rbac" "$bin/kueue-webhooks.yaml"
else
  V="-X k8s.io/component-base/version"; C="-X k8s.io/client-go/pkg/version"; D=2026-07-23T00:00:00Z
  ldk="-s -w $V.gitVersion=$K8S $V.gitMajor=1 $V.gitMinor=36 $V.gitTreeState=clean $V.buildDate=$D"
  ldk="$ldk $C.gitVersion=$K8S $C.gitMajor=1 $C.gitMinor=36 $C.gitTreeState=clean $C.buildDate=$D"

  log "etcd $ETCD"
  (cd "$here/go/etcd" && go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)
  log "kwok $KWOK"
  (cd "$here/go/kwok" && go build -trimpath -ldflags "-s -w" -o "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok)
  # kwok reads its default stages from its module source; record where they are so that
  # starting the sandbox never needs Go.
  (cd "$here/go/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) > "$bin/kwok-module-dir"
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    log "$cmd $K8S"
    (cd "$here/go/k8s" && go build -trimpath -ldflags "$ldk" -o "$bin/$cmd" "k8s.io/kubernetes/cmd/$cmd")
  done

  for b in kube-apiserver kube-controller-manager kube-scheduler etcd kwok; do "$bin/$b" --version >/dev/null; done
  "$bin/kubectl" version --client >/dev/null
fi
touch "$bin/.complete"
log "done in $(( $(date +%s) - start )) s"
echo "$bin"
