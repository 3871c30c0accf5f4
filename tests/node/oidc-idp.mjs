// An OpenID provider for the browser sign-in tests: `oidc-provider` (the certified
// implementation), on loopback, with one confidential client (the gateway) and its own dev
// login and consent pages (any login name signs in as that `sub`). It signs with the tests' RSA
// key (tests/keys/rs256.pem, kid rs-1), so the tests can mint access tokens of the same issuer.
//
//   node oidc-idp.mjs PORT CLIENT_ID CLIENT_SECRET REDIRECT_URI KEY_PEM
//
// Prints `ready <issuer>` once listening.
import Provider from 'oidc-provider';
import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';

const [port, clientId, clientSecret, redirectUri, pem] = process.argv.slice(2);
const jwk = createPrivateKey(readFileSync(pem)).export({ format: 'jwk' });
Object.assign(jwk, { kid: 'rs-1', alg: 'RS256', use: 'sig' });
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  jwks: { keys: [jwk] },
  cookies: { keys: ['sluice-e2e-cookie-key'] },
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
});
provider.on('server_error', (_ctx, err) => console.error('server_error', err));
provider.listen(Number(port), '127.0.0.1', () => console.log(`ready ${issuer}`));
