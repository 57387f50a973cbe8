"""Who is calling: the caller and its scopes and teams (:mod:`.identity`), API tokens
(:mod:`.tokens`), OIDC JWTs as bearers (:mod:`.oidc`), and the embedded server's admin token file
as the CLI finds it (:mod:`.localtoken`). Below the store: records and pure checks, no I/O but the
token file and the OIDC keys."""
