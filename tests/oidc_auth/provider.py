"""An identity provider made in the test: its signing keys (made here, with ``cryptography``), its
JWK Set, and tokens signed with them (PyJWT), for any claims and header a test wants."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

ISSUER = "https://idp.example.com/realms/acme"
AUDIENCE = "cronwheel"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


@dataclass(frozen=True)
class SigningKey:
    kid: str
    alg: str
    private: PrivateKey

    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        if isinstance(public, rsa.RSAPublicKey):
            data = RSAAlgorithm.to_jwk(public, as_dict=True)
        elif isinstance(public, ec.EllipticCurvePublicKey):
            data = ECAlgorithm.to_jwk(public, as_dict=True)
        else:
            data = OKPAlgorithm.to_jwk(public, as_dict=True)
        return {**data, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def rsa_key(kid: str = "rsa-1", bits: int = 2048, alg: str = "RS256") -> SigningKey:
    return SigningKey(kid, alg, rsa.generate_private_key(public_exponent=65537, key_size=bits))


def ec_key(kid: str = "ec-1") -> SigningKey:
    return SigningKey(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


def ed_key(kid: str = "ed-1") -> SigningKey:
    return SigningKey(kid, "EdDSA", ed25519.Ed25519PrivateKey.generate())


@dataclass
class Provider:
    """The keys a provider publishes (``published``) and signs with."""

    published: list[SigningKey] = field(default_factory=list)

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.jwk() for key in self.published]}

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.jwks()))
        return path


def claims(now: datetime, **changes: Any) -> dict[str, Any]:
    """A typical access token's claims, valid for 5 minutes from ``now`` (``None`` drops a claim)."""
    stamp = int(now.timestamp())
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": [AUDIENCE, "account"],
        "sub": "f3a9-alice",
        "preferred_username": "alice",
        "iat": stamp,
        "nbf": stamp,
        "exp": stamp + 300,
        "groups": ["cronwheel:data", "staff"],
        "roles": ["cronwheel-reader"],
    }
    base.update(changes)
    return {key: value for key, value in base.items() if value is not None}


def sign(key: SigningKey, payload: dict[str, Any], **header: Any) -> str:
    return jwt.encode(payload, key.private, algorithm=key.alg, headers={"kid": key.kid, **header})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(header: dict[str, Any], payload: dict[str, Any], secret: bytes | None = None) -> str:
    """A token with any header: unsigned (``secret`` None), or HMAC-SHA256 with ``secret`` (say, a
    public key's PEM, as in the algorithm confusion attack)."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(payload).encode())}"
    signature = b"" if secret is None else hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"
