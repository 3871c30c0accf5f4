#!/usr/bin/env bash
# The client command of the conformance suite's authorization scenarios, with the gateway as the
# client under test: `sluice serve` gets the scenario's MCP URL as an OAuth upstream ("remote",
# every tool listed), an operator signs it in with `sluice upstream login` (client credentials
# need none), and the MCP Python SDK client lists and calls `remote_test-tool` through the
# gateway (client credentials and enterprise-managed authorization, whose identity assertion is
# a file of the tree, need no login). When the upstream asks for a new login (more scopes, another authorization server),
# the operator logs in again: at most three logins.
#
# With SLUICE_PER_USER=1 (auth-gateway-per-user.sh) the upstream is per-user ("mode":
# "per_user") and no operator signs in: the SDK client is a principal (a static token) whose
# call is answered with a URL elicitation, and it follows the link as a browser would
# (gateway_driver.py); 2026-07-28 scenarios drive it as a 2026-07-28 client.
set -u
url=${!#}
sluice=${SLUICE_BIN:?SLUICE_BIN names the sluice binary}
py=${SLUICE_PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
home=$(mktemp -d)
gw=
cleanup() { [[ -n $gw ]] && kill "$gw" 2>/dev/null; wait 2>/dev/null; rm -rf "$home"; }
trap cleanup EXIT

port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
case ${MCP_CONFORMANCE_PROTOCOL_VERSION:-2025-11-25} in
  2026-07-28) era=stateless client_mode=auto ;;
  *) era=handshake client_mode=legacy ;;
esac
mode=shared
[[ ${SLUICE_PER_USER:-} == 1 ]] && mode=per_user
ctx() { "$py" -c 'import json, os, sys; print(json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT", "{}")).get(sys.argv[1], ""))' "$1"; }
oauth='{"mode": "'$mode'", "client_metadata_url": "https://conformance-test.local/client-metadata.json"}'
login=yes
case ${MCP_CONFORMANCE_SCENARIO:-} in
  auth/pre-registration)
    oauth=$("$py" -c 'import json, sys; o = {"mode": sys.argv[4], "client_id": sys.argv[1], "client_secret": sys.argv[2]}
if sys.argv[3]: o["issuer"] = sys.argv[3]
print(json.dumps(o))' "$(ctx client_id)" "$(ctx client_secret)" "$(ctx issuer)" "$mode") ;;
  auth/client-credentials-basic)
    login=
    oauth=$("$py" -c 'import json, sys; print(json.dumps({"mode": "client_credentials", "client_id": sys.argv[1], "client_secret": sys.argv[2]}))' "$(ctx client_id)" "$(ctx client_secret)") ;;
  auth/client-credentials-jwt)
    login=
    ctx private_key_pem > "$home/key.pem"
    oauth=$("$py" -c 'import json, sys; print(json.dumps({"mode": "client_credentials", "client_id": sys.argv[1], "private_key_file": "key.pem", "signing_alg": sys.argv[2], "token_endpoint_auth": "private_key_jwt"}))' "$(ctx client_id)" "$(ctx signing_algorithm)") ;;
  auth/enterprise-managed-authorization)
    # The gateway's identity assertion (the IdP's ID token) in a file of the tree.
    login=
    ctx idp_id_token > "$home/id-token"
    oauth=$("$py" -c 'import json, sys; print(json.dumps({"mode": "enterprise", "client_id": sys.argv[1], "client_secret": sys.argv[2], "idp_token_endpoint": sys.argv[3], "idp_client_id": sys.argv[4], "identity_assertion_file": "id-token"}))' "$(ctx client_id)" "$(ctx client_secret)" "$(ctx idp_token_endpoint)" "$(ctx idp_client_id)") ;;
esac

mkdir -p "$home/mcp"
cat > "$home/sluice.json" <<JSON
{"listen": "127.0.0.1:$port", "vault": {"key": "$("$sluice" vault keygen)"},
 "restart_initial_ms": 100, "restart_max_ms": 400, "connect_timeout_ms": 15000}
JSON
cat > "$home/mcp/expose.json" <<JSON
{"version": 1, "upstreams": [{"id": "remote", "transport": "http", "url": "$url", "era": "$era",
  "expose_all": true, "oauth": $oauth}]}
JSON

token=conformance-user-token
if [[ $mode == per_user ]]; then
  mkdir -p "$home/auth"
  cat > "$home/auth/auth.config.json" <<JSON
{"enabled": true, "tokens": [{"name": "conformance-user", "sha256": "$("$sluice" auth hash "$token")"}]}
JSON
fi

"$sluice" serve --home "$home" --no-admin 2> "$home/serve.log" &
gw=$!
for _ in $(seq 100); do
  "$py" -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && break
  sleep 0.1
done

open_url() { "$py" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)' "$1"; }
do_login() {
  "$sluice" upstream login remote --home "$home" --timeout 20 > "$home/login.out" &
  local lpid=$! url=
  for _ in $(seq 100); do
    url=$(head -n1 "$home/login.out")
    [[ -n $url ]] && break
    kill -0 "$lpid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $url ]] && open_url "$url"
  wait "$lpid"
}

rc=1
if [[ $mode == per_user ]]; then
  "$py" "$here/gateway_driver.py" "http://127.0.0.1:$port/mcp" 8 "$token" "$client_mode"
  rc=$?
else
  for _ in 1 2 3; do
    if [[ -n $login ]]; then
      do_login || { rc=$?; break; }
    fi
    "$py" "$here/gateway_driver.py" "http://127.0.0.1:$port/mcp" 8
    rc=$?
    [[ $rc == 3 && -n $login ]] || break
  done
fi
[[ $rc == 0 ]] || { echo "--- sluice serve's log" >&2; tail -n 30 "$home/serve.log" >&2; }
exit "$rc"
