// A real OpenID Connect provider for the sign-in tests: panva's certified
// oidc-provider (installed into .tools by `make renderers`), on 127.0.0.1.
// Usage: node oidc_provider.mjs PORT REDIRECT_URI MODULE_URL (the file URL of
// the package's entry, which an ES module cannot find by NODE_PATH). Its
// development login form takes any user below (any password); each has groups
// in the `groups` claim.
const [port, redirect, moduleUrl] = process.argv.slice(2);
const { default: Provider } = await import(moduleUrl);
const people = {
  maria: ["finance"],
  bob: ["staff"],
  ann: ["finance", "ops"],
};

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [
    {
      client_id: "treadle",
      client_secret: "treadle-test-secret",
      redirect_uris: [redirect],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_basic",
    },
  ],
  pkce: { required: () => true },
  scopes: ["openid", "profile", "groups"],
  claims: { openid: ["sub"], profile: ["preferred_username", "name"], groups: ["groups"] },
  conformIdTokenClaims: false, // the ID token carries the claims its scopes ask for
  cookies: { keys: ["treadle-test-cookie-key"] },
  features: { devInteractions: { enabled: true } },
  async findAccount(ctx, id) {
    if (!(id in people)) return undefined;
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, name: id, groups: people[id] };
      },
    };
  },
});
provider.listen(Number(port), "127.0.0.1", () => {
  console.log(`oidc-provider ready on http://127.0.0.1:${port}`);
});
