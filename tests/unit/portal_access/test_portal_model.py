"""The portal's model: what a grant holds, the token's shape, the sealed credential."""

from __future__ import annotations

import pytest

from webhook_service.crypto import SecretBox, generate_master_key
from webhook_service.ids import new_id
from webhook_service.portal_access import (
    CREDENTIAL_PREFIX,
    DEFAULT_CAPABILITIES,
    Capability,
    Grant,
    granted,
    new_claims,
    new_token,
    open_credential,
    seal_credential,
    token_application,
    token_digest,
)
from webhook_service.sealing import seal, unseal
from webhook_service.store import keys
from webhook_service.store.app_deletion import is_applications_key

BOX = SecretBox(generate_master_key())


def test_the_default_is_everything_but_revealing_secrets() -> None:
    assert granted(None, read_only=False) == DEFAULT_CAPABILITIES
    assert Capability.VIEW_SECRETS not in DEFAULT_CAPABILITIES
    assert DEFAULT_CAPABILITIES | {Capability.VIEW_SECRETS} == set(Capability)


def test_view_is_always_held_and_read_only_holds_nothing_else() -> None:
    assert granted([Capability.RETRY], read_only=False) == {Capability.RETRY, Capability.VIEW}
    assert granted([], read_only=False) == {Capability.VIEW}
    assert granted(list(Capability), read_only=True) == {Capability.VIEW}


def test_a_token_names_its_application_and_nothing_else_passes_for_one() -> None:
    token = new_token("app_01KBZ4Y8V0B3N6W8Q2R5T7X9AD")
    assert token.startswith("whp_")
    assert token_application(token) == "app_01KBZ4Y8V0B3N6W8Q2R5T7X9AD"
    assert token_application(new_token("app_default")) == "app_default"
    assert new_token("app_x") != new_token("app_x")
    padding = "a" * 43
    for bogus in (
        "", "whp_", "whp_app_x", "whp_app_x.short", "whk_app_x." + padding,
        token.replace("whp_", "whps_"), "whp_." + padding, "whp_app_é." + padding,
    ):  # fmt: skip
        assert token_application(bogus) is None, bogus


def test_the_digest_is_of_the_whole_token_and_never_holds_it() -> None:
    token = new_token("app_x")
    assert token_digest(token) == token_digest(token)
    # Its last character changed (a random token ends with "A" one time in 64).
    other = token[:-1] + ("B" if token.endswith("A") else "A")
    assert token_digest(token) != token_digest(other)
    assert token.split(".")[1] not in token_digest(token)


def _claims() -> Grant:
    return Grant("app_x", frozenset({Capability.VIEW, Capability.RETRY}), 1_900_000_000_000, 3)


def test_a_credential_opens_to_what_was_sealed() -> None:
    claims = new_claims(_claims())
    credential = seal_credential(BOX, claims)
    assert credential.startswith(CREDENTIAL_PREFIX)
    # It travels as a cookie and as a bearer key.
    assert all(c.isalnum() or c in "-_=" for c in credential[len(CREDENTIAL_PREFIX) :])
    assert open_credential(BOX, credential) == claims
    assert (
        claims.expires_ms == _claims().expires_ms and claims.capabilities == _claims().capabilities
    )
    assert new_claims(_claims()).sid != claims.sid and claims.csrf != claims.sid


def test_a_credential_is_refused_when_forged_cut_or_sealed_for_something_else() -> None:
    credential = seal_credential(BOX, new_claims(_claims()))
    other_box = SecretBox(generate_master_key())
    assert open_credential(other_box, credential) is None
    assert open_credential(BOX, credential[:-4]) is None
    assert open_credential(BOX, credential[len(CREDENTIAL_PREFIX) :]) is None
    assert open_credential(BOX, "whps_not-base64!") is None
    # Sealed by us, but for another purpose (a dashboard session's associated data).
    fields = {"a": "app_x", "s": "s", "c": ["view"], "t": "t", "e": 1}
    assert open_credential(BOX, CREDENTIAL_PREFIX + seal(BOX, "dashboard-session", fields)) is None
    # Ours and of the right purpose, but not a credential's shape.
    assert open_credential(BOX, CREDENTIAL_PREFIX + seal(BOX, "portal-session", {"a": 1})) is None
    unknown = {**fields, "c": ["admin"]}
    assert open_credential(BOX, CREDENTIAL_PREFIX + seal(BOX, "portal-session", unknown)) is None


@pytest.mark.parametrize("purpose", ["portal-session", "dashboard-session"])
def test_sealing_round_trips_per_purpose(purpose: str) -> None:
    text = seal(BOX, purpose, {"k": "v", "n": 1})
    assert unseal(BOX, purpose, text) == {"k": "v", "n": 1}
    assert unseal(BOX, "another", text) is None
    assert unseal(BOX, purpose, seal(BOX, purpose, [1, 2])) is None  # type: ignore[arg-type]


def test_an_applications_portal_keys_are_of_its_bucket_and_go_with_it() -> None:
    app_id = new_id("app", 1_800_000_000_000, mark=37)
    for key in (
        keys.portal_generation(app_id),
        keys.portal_grant(app_id, token_digest(new_token(app_id))),
        keys.portal_session(app_id, "sid"),
    ):
        assert keys.bucket_of_key(key) == keys.bucket_of(app_id) == 37
        # The deletion job's sweep (store/app_deletion.py) takes them.
        assert is_applications_key(key, app_id)
        assert not is_applications_key(key, new_id("app", 1_800_000_000_000, mark=37))
