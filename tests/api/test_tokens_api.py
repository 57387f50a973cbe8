"""``/v1/tokens``: a token is answered once and never again; admins of every team manage every
token, an admin of one team that team's only; another team's token is absent."""

from __future__ import annotations

import httpx

from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import token_id

from .conftest import Env, issue_token


async def test_a_new_token_is_shown_once_and_works(env: Env, client: httpx.AsyncClient) -> None:
    body = {
        "name": "deploy bot",
        "team": "data",
        "scopes": ["trigger", "read"],
        "expires_at": "2026-04-01T00:00:00Z",
    }
    response = await client.post("/v1/tokens", json=body)
    assert response.status_code == 201, response.text
    made = response.json()
    assert response.headers["location"] == f"/v1/tokens/{made['id']}"
    assert response.headers["cache-control"] == "no-store"
    assert made["token"].startswith(f"cw_{made['id']}_")
    assert made["scopes"] == ["read", "trigger"]
    assert made["state"] == "active"
    assert made["expires_at"] == "2026-04-01T00:00:00Z"
    assert made["created_by"] == token_id(env.admin_token)

    read = await client.get(f"/v1/tokens/{made['id']}")
    listed = await client.get("/v1/tokens")
    for answer in (read, listed):
        assert answer.status_code == 200
        assert made["token"] not in answer.text
        assert "digest" not in answer.text
    assert read.json() == {key: value for key, value in made.items() if key != "token"}

    async with env.client(made["token"]) as bot:
        assert (await bot.get("/v1/jobs")).status_code == 200
        assert (await bot.get("/v1/tokens")).status_code == 403  # not an admin


async def test_bad_token_requests_are_refused_whole(env: Env, client: httpx.AsyncClient) -> None:
    before = (await client.get("/v1/tokens")).json()["items"]
    for body in (
        {"name": "x", "team": "data", "scopes": []},
        {"name": "x", "team": "data", "scopes": ["root"]},
        {"name": "", "team": "data", "scopes": ["read"]},
        {"name": "x", "team": "no spaces", "scopes": ["read"]},
        {"name": "x", "team": "data", "scopes": ["read"], "expires_at": "2026-03-01T00:00:00Z"},  # past
        {"name": "x", "team": "data", "scopes": ["read"], "extra": 1},
    ):
        response = await client.post("/v1/tokens", json=body)
        assert response.status_code == 422, (body, response.text)
    assert (await client.get("/v1/tokens")).json()["items"] == before


async def test_a_team_admin_manages_its_own_teams_tokens_only(env: Env, client: httpx.AsyncClient) -> None:
    theirs = (
        await client.post("/v1/tokens", json={"name": "b", "team": "billing", "scopes": ["read"]})
    ).json()
    team_admin = await issue_token(env.store, Scope.ADMIN, team="data", name="data-admin")
    async with env.client(team_admin) as data_admin:
        own = await data_admin.post("/v1/tokens", json={"name": "d", "team": "data", "scopes": ["admin"]})
        assert own.status_code == 201
        for team in ("billing", None):
            refused = await data_admin.post(
                "/v1/tokens", json={"name": "x", "team": team, "scopes": ["read"]}
            )
            assert refused.status_code == 403, refused.text
        listed = {t["name"] for t in (await data_admin.get("/v1/tokens")).json()["items"]}
        assert listed == {"data-admin", "d"}
        assert (await data_admin.get("/v1/tokens", params={"team": "billing"})).json()["items"] == []
        missing = await data_admin.get("/v1/tokens/000000000000")
        hidden = await data_admin.get(f"/v1/tokens/{theirs['id']}")
        assert missing.status_code == hidden.status_code == 404
        assert hidden.json()["detail"] == f"token {theirs['id']} not found"
        assert (await data_admin.delete(f"/v1/tokens/{theirs['id']}")).status_code == 404
        assert (await data_admin.delete(f"/v1/tokens/{own.json()['id']}")).status_code == 204
    assert (await client.get(f"/v1/tokens/{theirs['id']}")).json()["state"] == "active"


async def test_revoked_tokens_are_listed_on_request(env: Env, client: httpx.AsyncClient) -> None:
    made = (await client.post("/v1/tokens", json={"name": "old", "team": "data", "scopes": ["read"]})).json()
    assert (await client.delete(f"/v1/tokens/{made['id']}")).status_code == 204
    assert (await client.delete(f"/v1/tokens/{made['id']}")).status_code == 204  # revoked stays revoked
    assert made["id"] not in {t["id"] for t in (await client.get("/v1/tokens")).json()["items"]}
    listed = (await client.get("/v1/tokens", params={"include_revoked": "true"})).json()["items"]
    (revoked,) = [t for t in listed if t["id"] == made["id"]]
    assert revoked["state"] == "revoked"
    assert revoked["revoked_at"] == "2026-03-02T12:00:00Z"


async def test_tokens_are_listed_a_page_at_a_time(env: Env, client: httpx.AsyncClient) -> None:
    for index in range(3):
        env.clock.advance(1)
        await client.post("/v1/tokens", json={"name": f"t{index}", "team": "data", "scopes": ["read"]})
    first = (await client.get("/v1/tokens", params={"team": "data", "limit": 2})).json()
    rest = (await client.get("/v1/tokens", params={"team": "data", "cursor": first["next_cursor"]})).json()
    assert [t["name"] for t in first["items"] + rest["items"]] == ["t0", "t1", "t2"]
    bad = await client.get("/v1/tokens", params={"cursor": "nope"})
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "cursor"


async def test_no_token_of_an_unprivileged_caller_may_make_tokens(env: Env) -> None:
    for scope in (Scope.READ, Scope.WRITE, Scope.TRIGGER):
        text = await issue_token(env.store, scope, team="data")
        async with env.client(text) as http:
            response = await http.post("/v1/tokens", json={"name": "x", "team": "data", "scopes": ["admin"]})
            assert response.status_code == 403
            assert response.json()["detail"] == "this token lacks the 'admin' scope"
