"""Entra ID credentials for the suite's AAD mode (COSMOS_TEST_DATA_AUTH_MODE=aad), the way the
official emulator takes them: a JWT whose claims name the principal, the audience (the
resource of the scope asked for: https://cosmos.azure.com for the data plane,
https://dbinference.azure.com for the semantic reranker) and the expiry, and whose signature
part is the account key itself (base64url). strata accepts these as the emulator does; no
Entra ID tenant is involved."""
import base64
import json
import os
import time

from azure.core.credentials import AccessToken

EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _token(scopes) -> AccessToken:
    scope = scopes[0] if scopes else "https://cosmos.azure.com/.default"
    audience = scope[: -len("/.default")] if scope.endswith("/.default") else scope
    now = int(time.time())
    head = {"typ": "JWT", "alg": "RS256", "kid": "CosmosEmulatorPrimaryMaster"}
    claims = {"aud": audience, "oid": "strata-suite-principal", "iat": now, "nbf": now - 60,
              "exp": now + 3600}
    key = os.getenv("ACCOUNT_KEY", EMULATOR_KEY)
    jwt = ".".join([_b64(json.dumps(head).encode()), _b64(json.dumps(claims).encode()),
                    _b64(key.encode())])
    return AccessToken(jwt, now + 3600)


class EmulatorCredential:
    """A synchronous TokenCredential."""

    def get_token(self, *scopes, **kwargs):
        return _token(scopes)


class AsyncEmulatorCredential:
    """An asynchronous TokenCredential."""

    async def get_token(self, *scopes, **kwargs):
        return _token(scopes)

    async def close(self):
        pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *args):
        pass


def get_credential(is_async=False, **kwargs):
    """The emulator's Entra ID credential, signed with the account key."""
    return AsyncEmulatorCredential() if is_async else EmulatorCredential()
