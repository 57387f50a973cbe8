"""Team secrets and signed webhooks (guarantee 9: a secret goes in and never comes out).

A team stores named secrets (``cronwheel secrets set TEAM/NAME``, ``PUT
/v1/teams/{team}/secrets/{name}``); jobs refer to them by name (``{"secret": "billing-api-key"}``
as a header or environment value, ``signing_secret`` of an HTTP target) instead of holding
credentials. The package, by concern:

* :mod:`~cronwheel.secrets.crypto`: sealing and opening a value (AES-256-GCM bound to team and
  name), the keyring. Pure.
* :mod:`~cronwheel.secrets.keys`: where a process gets its keys (environment, file, or the key
  file embedded mode creates next to its database).
* :mod:`~cronwheel.secrets.service`: set, list, delete, re-encrypt (the API's side).
* :mod:`~cronwheel.secrets.resolve`: the worker's side: references resolved at attempt time,
  values redacted from what an attempt keeps.
* :mod:`~cronwheel.secrets.signing`: Standard Webhooks signatures. Pure.
"""
