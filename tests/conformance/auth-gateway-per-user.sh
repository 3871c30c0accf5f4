#!/usr/bin/env bash
# The client command of the conformance suite's authorization scenarios with the gateway as the
# client and the scenario's server a per-user upstream: auth-gateway.sh with SLUICE_PER_USER=1
# (a principal connects its own account through the URL elicitation; no operator login).
SLUICE_PER_USER=1 exec "$(cd "$(dirname "$0")" && pwd)/auth-gateway.sh" "$@"
