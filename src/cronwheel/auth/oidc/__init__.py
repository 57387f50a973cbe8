"""OIDC: JWTs from the organisation's identity provider accepted as API bearers.

Optional: off unless the operator names an issuer (``--oidc-issuer`` and its companions,
docs/service.md "OIDC"). A request's ``Authorization: Bearer <jwt>`` is then verified here after
the store's API tokens had no say (:class:`~cronwheel.api.callers.access.Authenticator`). By concern:

* :mod:`~cronwheel.auth.oidc.settings`: the operator's settings, checked at start (exit 2).
* :mod:`~cronwheel.auth.oidc.keys`: the identity provider's public keys (a JWKS from a URL or a file),
  cached, refreshed when an unknown key id arrives, at most once per ``refresh_min_s``, and kept
  when the provider cannot be reached.
* :mod:`~cronwheel.auth.oidc.authenticator`: the signature (PyJWT over ``cryptography``; asymmetric
  algorithms only), ``iss``, ``aud``, and the times by the injected clock, then the claims mapped
  to a :class:`~cronwheel.auth.identity.Caller` (teams, and scopes through roles).
"""

from cronwheel.auth.oidc.authenticator import OidcAuthenticator
from cronwheel.auth.oidc.keys import FileSource, Keys, UrlSource
from cronwheel.auth.oidc.settings import OidcSettings

__all__ = ["FileSource", "Keys", "OidcAuthenticator", "OidcSettings", "UrlSource"]
