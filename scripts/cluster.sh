#!/usr/bin/env bash
# A real Kubernetes control plane with Volcano and KWOK nodes on loopback, for the Kubernetes
# backend's tests and for trying it without a cluster (docs/kubernetes.md).
#
#   scripts/cluster.sh build                     build what is missing (cached by versions)
#   scripts/cluster.sh up DIR [--nodes N] [--node-cpu C] [--node-memory M]
#                             [--schedule-period D] [--apiserver-gogc N]
#                                                start it all; writes DIR/admin.kubeconfig and
#                                                DIR/ucompute.kubeconfig (the chart's account)
#   scripts/cluster.sh restart DIR COMPONENT     stop and start one component (e.g. kube-apiserver)
#   scripts/cluster.sh down DIR                  stop exactly what `up` started, remove DIR
#   scripts/cluster.sh test [FILES...]           up a cluster in a temporary folder, run the
#                                                real-cluster suite (test/cluster-e2e) on it, down
#
# Upstream programs are built from their Go modules as dependencies of the wrapper modules in
# test/cluster/{kube,kwok,helm}; nothing upstream is copied into the repository. Binaries are cached in
# $UCOMPUTE_CLUSTER_CACHE (default /var/cache/ucompute-cluster) under a key of the modules' go.sum
# and the Go version, so a warm `up` only starts processes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cluster_src=$root/test/cluster
cache_root=${UCOMPUTE_CLUSTER_CACHE:-/var/cache/ucompute-cluster}
export GOTOOLCHAIN=${GOTOOLCHAIN:-local} GOFLAGS=-mod=mod
. "$root/scripts/node-env.sh"

die() { echo "cluster: $*" >&2; exit 1; }
say() { echo "cluster: $*" >&2; }

# ---- build --------------------------------------------------------------------------------------

ensure_debian_packages() {
  local missing
  missing=$(for p in etcd-server etcd-client openssl; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
  [ -z "$missing" ] && return
  [ "$(id -u)" = 0 ] || die "missing Debian packages (install them as root): $missing"
  say "installing Debian packages: $missing"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
  # The package starts a system etcd where systemd runs; ours are started by `up`.
}

bin_dir() {
  command -v go >/dev/null || die "Go is missing: install Go >= 1.24 (the cluster's programs are built from Go modules)"
  local key
  key=$( (go env GOVERSION; cat "$cluster_src"/kube/go.sum "$cluster_src"/kwok/go.sum) | sha256sum | cut -c1-16)
  echo "$cache_root/$key/bin"
}

# Helm (for deploy/helm/ucompute) is cached apart, under a key of its own module.
helm_bin() {
  local key
  key=$( (go env GOVERSION; cat "$cluster_src"/helm/go.sum) | sha256sum | cut -c1-16)
  echo "$cache_root/helm-$key/bin/helm"
}

# The Kubernetes version the kube module builds, for the binaries' version (discovery, kubectl).
kube_version() { sed -n 's/^\tk8s.io\/kubernetes \(v[0-9.]*\).*$/\1/p' "$cluster_src/kube/go.mod" | head -1; }

build() {
  ensure_debian_packages
  local bin; bin=$(bin_dir)
  local want=(kube-apiserver kube-controller-manager kubectl scheduler controller-manager webhook-manager kwok)
  local missing=()
  for b in "${want[@]}"; do [ -x "$bin/$b" ] || missing+=("$b"); done
  local helm; helm=$(helm_bin)
  if [ ! -x "$helm" ]; then
    mkdir -p "$(dirname "$helm")"
    (cd "$cluster_src/helm" && go build -p 2 -trimpath -ldflags "-s -w" -o "$helm.partial" helm.sh/helm/v3/cmd/helm)
    mv "$helm.partial" "$helm"
  fi
  [ ${#missing[@]} -eq 0 ] && return
  mkdir -p "$bin.partial"
  local started=$SECONDS
  say "building ${missing[*]} into $bin (the first build on a machine takes a while; see BENCHMARKS.md)"
  local v; v=$(kube_version)
  local minor=${v#v1.}; minor=${minor%%.*}
  (cd "$cluster_src/kube" && go build -p 2 -tags providerless -trimpath \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    -o "$bin.partial/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl \
    volcano.sh/volcano/cmd/scheduler volcano.sh/volcano/cmd/controller-manager volcano.sh/volcano/cmd/webhook-manager)
  (cd "$cluster_src/kwok" && go build -p 2 -trimpath -ldflags "-s -w" -o "$bin.partial/" sigs.k8s.io/kwok/cmd/kwok)
  mkdir -p "$bin" && mv "$bin.partial"/* "$bin/" && rmdir "$bin.partial"
  say "built in $((SECONDS - started)) s"
}

# The folder of an upstream module in the module cache (its CRDs and installer are read from there).
module_dir() { (cd "$cluster_src/$1" && go list -m -f '{{.Dir}}' "$2"); }

# ---- up -----------------------------------------------------------------------------------------

free_port() {
  node -e 'const s=require("node:net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# Starts a component in the background, recording its pid and command line (for `restart`).
start() {
  local name=$1; shift
  printf '%q ' "$@" > "$dir/run/$name.cmd"
  nohup "$@" > "$dir/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$dir/run/$name.pid"
}

# Waits (bounded) until a command succeeds; on timeout shows the component's last log lines.
wait_for() {
  local what=$1 log=$2 tries=$3; shift 3
  for ((i = 0; i < tries; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "cluster: $what did not come up; the end of $log:" >&2
  tail -20 "$log" >&2 || true
  return 1
}

cert() { # name subject [san]
  local name=$1 subject=$2 san=${3:-}
  openssl req -new -newkey rsa:2048 -nodes -keyout "$dir/pki/$name.key" -subj "$subject" \
    -out "$dir/pki/$name.csr" 2>/dev/null
  local ext=$dir/pki/$name.ext
  if [ -n "$san" ]; then printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" > "$ext"
  else printf 'extendedKeyUsage=clientAuth\n' > "$ext"; fi
  openssl x509 -req -in "$dir/pki/$name.csr" -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" \
    -CAcreateserial -days 3650 -extfile "$ext" -out "$dir/pki/$name.crt" 2>/dev/null
}

kubeconfig() { # file user-yaml
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: ucompute-test
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 "$dir/pki/ca.crt")
contexts:
- name: ucompute-test
  context: {cluster: ucompute-test, user: $3}
current-context: ucompute-test
users:
- name: $3
  user:
$2
EOF
  chmod 600 "$1"
}

nodes_yaml() {
  for ((n = 0; n < nodes; n++)); do
    cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$n
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-$n, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
status:
  allocatable: {cpu: "$node_cpu", memory: $node_memory, pods: "1000"}
  capacity: {cpu: "$node_cpu", memory: $node_memory, pods: "1000"}
---
EOF
  done
}

up() {
  dir=${1:-}; [ -n "$dir" ] || die "usage: cluster.sh up DIR [--nodes N] [--node-cpu C] [--node-memory M]"
  shift
  nodes=4 node_cpu=8 node_memory=32Gi schedule_period=1s apiserver_gogc=
  while [ $# -gt 0 ]; do
    case $1 in
      --nodes) nodes=$2; shift 2 ;;
      --node-cpu) node_cpu=$2; shift 2 ;;
      --node-memory) node_memory=$2; shift 2 ;;
      --schedule-period) schedule_period=$2; shift 2 ;;
      --apiserver-gogc) apiserver_gogc=$2; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [ -e "$dir/run" ] && die "$dir already holds a cluster (scripts/cluster.sh down $dir first)"
  build
  local bin; bin=$(bin_dir)
  local started=$SECONDS
  mkdir -p "$dir"/{pki,logs,run,storage}
  dir=$(cd "$dir" && pwd)
  echo "$bin" > "$dir/run/bin"
  helm_bin > "$dir/run/helm"
  local kube_mod volcano_dir kwok_dir
  volcano_dir=$(module_dir kube volcano.sh/volcano)
  kwok_dir=$(module_dir kwok sigs.k8s.io/kwok)
  kube_mod=$cluster_src/kube

  # PKI: one CA for the API server, clients, the webhooks and KWOK's kubelet endpoint.
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$dir/pki/ca.key" -subj /CN=ucompute-test-ca \
    -days 3650 -out "$dir/pki/ca.crt" 2>/dev/null
  cert apiserver /CN=kube-apiserver "IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes.default.svc"
  cert admin "/O=system:masters/CN=admin"
  cert webhook /CN=volcano-admission "IP:127.0.0.1"
  cert kwok /CN=kwok "IP:127.0.0.1"
  openssl genrsa -out "$dir/pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/pki/sa.key" -pubout -out "$dir/pki/sa.pub" 2>/dev/null

  local etcd_port etcd_peer api_port webhook_port kwok_port
  etcd_port=$(free_port); etcd_peer=$(free_port); api_port=$(free_port)
  webhook_port=$(free_port); kwok_port=$(free_port)
  # etcd in memory where it can be: no container, no fsync cost, gone with the cluster.
  local etcd_data=$dir/etcd
  if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    etcd_data=$(mktemp -d /dev/shm/ucompute-etcd.XXXXXX)
    ln -s "$etcd_data" "$dir/etcd"
  fi
  start etcd etcd --name default --data-dir "$etcd_data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "default=http://127.0.0.1:$etcd_peer" --quota-backend-bytes=8589934592
  echo "http://127.0.0.1:$etcd_port" > "$dir/run/etcd-endpoint"

  # An audit log of ucompute's own requests only (the benchmark counts API requests per job).
  cat > "$dir/run/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: [system:serviceaccount:ucompute:ucompute]
  - level: None
EOF
  start kube-apiserver env ${apiserver_gogc:+GOGC=$apiserver_gogc} "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
    --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
    --client-ca-file="$dir/pki/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$dir/pki/sa.pub" \
    --service-account-signing-key-file="$dir/pki/sa.key" --service-cluster-ip-range=10.96.0.0/16 \
    --authorization-mode=RBAC --allow-privileged=true --endpoint-reconciler-type=none \
    --kubelet-client-certificate="$dir/pki/admin.crt" --kubelet-client-key="$dir/pki/admin.key" \
    --kubelet-preferred-address-types=InternalIP --max-requests-inflight=1000 --max-mutating-requests-inflight=500 \
    --audit-policy-file="$dir/run/audit-policy.yaml" --audit-log-path="$dir/logs/audit.log" \
    --audit-log-format=json --audit-log-mode=batch
  kubeconfig "$dir/admin.kubeconfig" "    client-certificate-data: $(base64 -w0 "$dir/pki/admin.crt")
    client-key-data: $(base64 -w0 "$dir/pki/admin.key")" admin
  local k=("$bin/kubectl" --kubeconfig="$dir/admin.kubeconfig")
  wait_for kube-apiserver "$dir/logs/kube-apiserver.log" 240 "${k[@]}" get --raw /readyz

  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig="$dir/admin.kubeconfig" \
    --secure-port=0 --leader-elect=false \
    --controllers=serviceaccount,serviceaccount-token,garbagecollector,namespace,persistentvolume-binder \
    --service-account-private-key-file="$dir/pki/sa.key" --root-ca-file="$dir/pki/ca.crt" \
    --kube-api-qps=500 --kube-api-burst=1000 --concurrent-gc-syncs=10

  # Volcano's CRDs and KWOK's (logs, exec, port-forward per pod), from their modules.
  "${k[@]}" apply --server-side -f "$volcano_dir/config/crd/volcano/bases/" \
    -f "$volcano_dir/config/crd/jobflow/bases/" >/dev/null
  for crd in logs clusterlogs execs clusterexecs portforwards clusterportforwards; do
    "${k[@]}" apply --server-side -f "$kwok_dir/kustomize/crd/bases/kwok.x-k8s.io_$crd.yaml" >/dev/null
  done
  "${k[@]}" wait --for=condition=Established crd --all --timeout=120s >/dev/null

  # Volcano: the scheduler as its installer configures it, with proportion (queue weights, which
  # ucompute sets per owner) where the installer's default has capacity, as its chart documents.
  sed 's/- name: capacity/- name: proportion/' \
    "$volcano_dir/installer/helm/chart/volcano/config/volcano-scheduler.conf" > "$dir/run/volcano-scheduler.conf"
  start volcano-scheduler "$bin/scheduler" --kubeconfig="$dir/admin.kubeconfig" \
    --scheduler-conf="$dir/run/volcano-scheduler.conf" --leader-elect=false --schedule-period="$schedule_period" \
    --enable-healthz=false --enable-metrics=false --cache-dumper=false
  # Its job controller syncs a job on one of --worker-threads, each sync several API calls in turn:
  # 8 workers left jobs 10-20 s per step in its queues on a loaded machine (BENCHMARKS.md, issue 17).
  # The webhooks GET the queue or PodGroup per admission: client-go's 50/s would cap ~12 jobs/s.
  start volcano-controller-manager "$bin/controller-manager" --kubeconfig="$dir/admin.kubeconfig" \
    --leader-elect=false --enable-healthz=false --kube-api-qps=500 --kube-api-burst=1000 --worker-threads=64
  # The admission webhooks, registered by URL on loopback (the installer's configurations with
  # the Service reference replaced); webhook-manager fills in their CA bundle itself.
  node "$cluster_src/webhook-configurations.ts" \
    "$volcano_dir/installer/volcano-development.yaml" "https://127.0.0.1:$webhook_port" > "$dir/run/webhooks.yaml"
  "${k[@]}" apply -f "$dir/run/webhooks.yaml" >/dev/null
  local admissions
  admissions=$(sed -n 's/^.*- --enabled-admission=\(.*\)$/\1/p' "$volcano_dir/installer/volcano-development.yaml" | head -1)
  start volcano-webhook-manager "$bin/webhook-manager" --kubeconfig="$dir/admin.kubeconfig" \
    --listen-address=127.0.0.1 --port="$webhook_port" --webhook-url="https://127.0.0.1:$webhook_port" \
    --tls-cert-file="$dir/pki/webhook.crt" --tls-private-key-file="$dir/pki/webhook.key" \
    --ca-cert-file="$dir/pki/ca.crt" --enabled-admission="$admissions" --kube-api-qps=500 --kube-api-burst=1000

  # KWOK: the nodes and the pods' lifecycle (test/cluster/kwok-stages.yaml), answering logs, exec
  # and port-forward through the API server from local files, processes and ports.
  # No node leases (--node-lease-duration-seconds=0): with leases, KWOK v0.7.0 plays a pod only
  # while its informer cache shows the node's lease held by this process's identity, a new UUID
  # at each start (pod_controller.go:434, node_lease_controller.go:168, controller.go:630), and
  # drops the pod's events otherwise, logged at DEBUG only (when its node stages start before its
  # pod stages: Go's map order, controller.go:545). A restarted KWOK thus started no pod until the
  # old process's 600 s leases expired, then only those it listed again node by node (one paged
  # List at a time): 10 min without a pod start here, and the restarted KWOKs of the 10,000-job
  # run (BENCHMARKS.md, issue 17). Nothing here watches node health (no node lifecycle
  # controller runs); without leases KWOK v0.7.0 also heartbeats a node's status every 10-20 min
  # instead of every 20-45 s. UCOMPUTE_KWOK_V=DEBUG logs why KWOK skips a pod.
  # KWOK plays each pod's stages (here: start it Running) on podPlayStageParallelism workers, each
  # a PATCH of the pod's status in turn: its default 4 made pod starts ~4 per API-server round trip
  # (1-2 s under load), the ceiling of the first 10,000-job run (2-2.7 jobs/s per side). With 4,
  # 3,000 jobs on one cluster (load 30-100) had 518 bound pods waiting 10 min for KWOK, +0-5 Running
  # per 15 s; restarted with 64: +120-316 per 15 s at once, Volcano Jobs Running right behind
  # (BENCHMARKS.md, issue 17). A simulated cluster of many nodes needs many kubelets' worth.
  cat "$cluster_src/kwok-stages.yaml" - > "$dir/run/kwok.yaml" <<EOF
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: 64
EOF
  start kwok "$bin/kwok" --kubeconfig="$dir/admin.kubeconfig" --config="$dir/run/kwok.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-ip=127.0.0.1 --node-port="$kwok_port" --server-address="127.0.0.1:$kwok_port" \
    --tls-cert-file="$dir/pki/kwok.crt" --tls-private-key-file="$dir/pki/kwok.key" \
    --cidr=10.244.0.0/16 --node-lease-duration-seconds=0 ${UCOMPUTE_KWOK_V:+--v=$UCOMPUTE_KWOK_V} \
    --enable-crds=Logs,ClusterLogs,Exec,ClusterExec,PortForward,ClusterPortForward
  nodes_yaml | "${k[@]}" apply -f - >/dev/null

  # ucompute's account and roles as the chart makes them (bound cluster-wide: the tests use both
  # namespace strategies), with a long-lived token; and the chart's storage claim, which jobs mount.
  "${k[@]}" create namespace ucompute >/dev/null
  "$(helm_bin)" template ucompute "$root/deploy/helm/ucompute" --namespace ucompute --set kubernetes.namespaceStrategy=per-owner \
    --show-only templates/rbac.yaml --show-only templates/storage.yaml | "${k[@]}" apply -f - >/dev/null
  "${k[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: ucompute-token
  namespace: ucompute
  annotations: {kubernetes.io/service-account.name: ucompute}
type: kubernetes.io/service-account-token
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: ucompute-storage}
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteMany]
  hostPath: {path: $dir/storage}
  claimRef: {namespace: ucompute, name: ucompute-storage}
EOF
  local token=
  for ((i = 0; i < 120; i++)); do
    token=$("${k[@]}" -n ucompute get secret ucompute-token -o 'jsonpath={.data.token}' 2>/dev/null || true)
    [ -n "$token" ] && break
    sleep 0.5
  done
  [ -n "$token" ] || die "the ServiceAccount token was not issued (kube-controller-manager: $dir/logs/kube-controller-manager.log)"
  kubeconfig "$dir/ucompute.kubeconfig" "    token: $(echo "$token" | base64 -d)" ucompute

  echo '{"apiVersion":"scheduling.volcano.sh/v1beta1","kind":"Queue","metadata":{"name":"probe"},"spec":{"weight":1}}' \
    > "$dir/run/probe-queue.json"
  wait_for "Volcano's webhooks" "$dir/logs/volcano-webhook-manager.log" 240 \
    "${k[@]}" create --dry-run=server -f "$dir/run/probe-queue.json"
  wait_for "the default queue" "$dir/logs/volcano-controller-manager.log" 240 \
    sh -c "'$bin/kubectl' --kubeconfig='$dir/admin.kubeconfig' get queue default -o jsonpath='{.status.state}' | grep -qx Open"
  wait_for "$nodes KWOK nodes" "$dir/logs/kwok.log" 240 \
    sh -c "[ \$('$bin/kubectl' --kubeconfig='$dir/admin.kubeconfig' get nodes --no-headers | grep -cw Ready) -ge $nodes ]"
  # The API server taints a new node not-ready until the node lifecycle controller sees it Ready;
  # that controller is not run here (KWOK's nodes do not fail), so the taint goes once they are.
  "${k[@]}" taint nodes --all node.kubernetes.io/not-ready- >/dev/null 2>&1 || true
  write_config
  say "up in $((SECONDS - started)) s: $nodes nodes of $node_cpu CPU, $node_memory; kubectl --kubeconfig $dir/admin.kubeconfig"
}

# A configuration for `ucompute serve --backend kubernetes` against this cluster (docs/kubernetes.md).
write_config() {
  cat > "$dir/ucompute.yaml" <<EOF
# ucompute serve --backend kubernetes --config $dir/ucompute.yaml
backend: kubernetes
storage:
  root: $dir/storage
kubernetes:
  kubeconfig: $dir/ucompute.kubeconfig
  namespaceStrategy: single
  namespace: ucompute
EOF
}

# ---- down / restart -----------------------------------------------------------------------------

stop_pid() { # pidfile
  local pid; pid=$(cat "$1" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

# Components in the reverse order of their start.
components=(kwok volcano-webhook-manager volcano-controller-manager volcano-scheduler kube-controller-manager kube-apiserver etcd)

down() {
  dir=${1:-}; [ -n "$dir" ] || die "usage: cluster.sh down DIR"
  [ -d "$dir/run" ] || die "$dir holds no cluster"
  for c in "${components[@]}"; do stop_pid "$dir/run/$c.pid"; done
  local target; target=$(readlink "$dir/etcd" 2>/dev/null || true)
  case $target in /dev/shm/ucompute-etcd.*) rm -rf "$target" ;; esac
  rm -rf "$dir"
}

restart() {
  dir=${1:-}; local name=${2:-}
  [ -f "$dir/run/$name.cmd" ] || die "usage: cluster.sh restart DIR COMPONENT (one of: ${components[*]})"
  stop_pid "$dir/run/$name.pid"
  local cmd; cmd=$(cat "$dir/run/$name.cmd")
  eval "nohup $cmd >> '$dir/logs/$name.log' 2>&1 < /dev/null &"
  echo $! > "$dir/run/$name.pid"
}

# The real-cluster suite (npm run test:cluster). Outside CI, a machine without Go skips it with
# a message; under CI=true everything it needs must be there, and a failed build fails it.
suite() {
  if ! command -v go >/dev/null && [ "${CI:-}" != true ]; then
    say "Go is missing: the real-cluster suite is skipped (CI runs it)"; return 0
  fi
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ucompute-cluster.XXXXXX")
  rmdir "$dir"
  trap 'down "$dir" 2>/dev/null || true' EXIT
  up "$dir"
  local files=("$@")
  [ ${#files[@]} -gt 0 ] || files=("$root"/test/cluster-e2e/*.e2e.ts)
  UCOMPUTE_CLUSTER_DIR=$dir node --test --test-concurrency=1 "${files[@]}"
}

case ${1:-} in
  build) build; echo "$(bin_dir)" ;;
  up) shift; up "$@" ;;
  down) shift; down "$@" ;;
  restart) shift; restart "$@" ;;
  test) shift; suite "$@" ;;
  *) die "usage: cluster.sh build | up DIR [--nodes N] [--node-cpu C] [--node-memory M] | restart DIR COMPONENT | down DIR | test [FILES...]" ;;
esac
