#!/usr/bin/env bash
# The client command of the conformance suite's authorization scenarios, with `sluice client` as
# the client under test. The suite appends the scenario's MCP URL and sets
# MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_PROTOCOL_VERSION and (pre-registered, client
# credentials or enterprise-managed authorization) MCP_CONFORMANCE_CONTEXT.
#
# It lists the tools, then calls `test-tool` in a second run that reuses the grant the first
# one kept (a step-up or an authorization-server change happens there). The sign-in URL is
# "opened" by an HTTP GET that follows the authorization server's redirect to sluice client's
# loopback callback, as a browser would; the suite's servers approve at once.
set -u
url=${!#}
sluice=${SLUICE_BIN:?SLUICE_BIN names the sluice binary}
py=${SLUICE_PYTHON:-python3}
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT

opener="$py -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10)'"
args=(--no-browser --open-with "$opener" --state-dir "$state" --timeout 20
      --client-metadata-url https://conformance-test.local/client-metadata.json)
case ${MCP_CONFORMANCE_PROTOCOL_VERSION:-2025-11-25} in
  2026-07-28) args+=(--era stateless) ;;
  *) args+=(--era handshake) ;;
esac

ctx() { "$py" -c 'import json, os, sys; print(json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT", "{}")).get(sys.argv[1], ""))' "$1"; }
case ${MCP_CONFORMANCE_SCENARIO:-} in
  auth/pre-registration)
    args+=(--client-id "$(ctx client_id)" --client-secret "$(ctx client_secret)") ;;
  auth/client-credentials-basic)
    args+=(--client-credentials --client-id "$(ctx client_id)" --client-secret "$(ctx client_secret)") ;;
  auth/client-credentials-jwt)
    ctx private_key_pem > "$state/key.pem"
    args+=(--client-credentials --client-id "$(ctx client_id)" --private-key "$state/key.pem"
           --signing-alg "$(ctx signing_algorithm)") ;;
  auth/enterprise-managed-authorization)
    ctx idp_id_token > "$state/id-token"
    args+=(--identity-assertion-file "$state/id-token" --idp-token-endpoint "$(ctx idp_token_endpoint)"
           --idp-client-id "$(ctx idp_client_id)" --client-id "$(ctx client_id)"
           --client-secret "$(ctx client_secret)") ;;
esac

"$sluice" client "${args[@]}" "$url" tools || exit $?
"$sluice" client "${args[@]}" "$url" call test-tool
