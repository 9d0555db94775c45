"""Credentials masked in every store URL a message shows, whatever else is wrong with the URL: each form
(userinfo, ``password=``, ``pass=``, ``pwd=``, ``passwd=``, ``token=``, ``access_token=``, ``secret=``,
``api_key=``, ``apikey=``, any case) through ``store_target``'s refusals and an unreachable server's
failure, and, for any secret, ``mask_credentials`` over JDBC, SQLAlchemy and ``key=value;`` forms."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.store.credential_urls import FORMS, MISTAKES, store_url
from tiltframe.errors import DefinitionError, StoreError
from tiltframe.model.aggregations import StoreSpec
from tiltframe.store import connect_store
from tiltframe.store.credentials import mask_credentials
from tiltframe.store.urls import hide_password, store_target

SECRET = "Zq7-sEcr3t.v4lue"


@pytest.mark.parametrize("mistake", [m for m in MISTAKES if m != "unreachable"])
@pytest.mark.parametrize("form", FORMS)
def test_a_refused_url_is_shown_without_its_secret(form: str, mistake: str) -> None:
    url = store_url(form, mistake, SECRET)
    with pytest.raises(DefinitionError) as refused:
        store_target(StoreSpec("rdbms", url))
    said = str(refused.value)
    assert SECRET not in said
    assert "***" in said and "127.0.0.1" in said  # the URL is still shown, its secret masked


@pytest.mark.parametrize("form", FORMS)
def test_an_unreachable_server_is_named_without_the_secret(form: str, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    monkeypatch.setenv("TILTFRAME_STORE_RETRY_SECONDS", "0")
    monkeypatch.setenv("DB_SECRET", SECRET)
    spec = StoreSpec("rdbms", store_url(form, "unreachable", "${DB_SECRET}"))
    store = connect_store(spec, tmp_path)
    try:
        with pytest.raises(StoreError) as failed, store.write_transaction("write"):  # type: ignore[attr-defined]
            pass
    finally:
        store.close()
    assert SECRET not in str(failed.value) and SECRET not in repr(store)
    assert "127.0.0.1:1" in str(failed.value)


secrets = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!$*+%="),
                  min_size=4, max_size=40).map(lambda s: f"Q{s}")


@given(secret=secrets, form=st.sampled_from(FORMS), mistake=st.sampled_from(MISTAKES),
       around=st.sampled_from(["{}", "@store(jdbc.url='{}')", "in {}: failed", '"{}"', "url={} x", "({})"]))
def test_no_secret_survives_masking(secret: str, form: str, mistake: str, around: str) -> None:
    text = around.format(store_url(form, mistake, secret))
    masked = mask_credentials(text)
    assert secret not in masked
    assert hide_password(store_url(form, mistake, secret)).count("***") == 1


@given(secret=secrets, key=st.sampled_from(["Password", "PWD", "pass", "token", "Secret", "ApiKey", "api-key"]),
       spaces=st.sampled_from(["", " "]))
def test_key_value_strings_are_masked(secret: str, key: str, spaces: str) -> None:
    text = f"Server=127.0.0.1;Port=5432;Database=db;User Id=tf;{key}{spaces}={spaces}{secret};Timeout=3"
    masked = mask_credentials(text)
    assert secret not in masked and masked.endswith(";Timeout=3") and "User Id=tf" in masked


def test_sqlalchemy_urls_and_quoted_values() -> None:
    import sqlalchemy as sa

    url = sa.URL.create("postgresql+psycopg", username="tf", password=SECRET, host="h", database="d",
                        query={"sslpassword": SECRET})
    assert SECRET not in hide_password(url)
    assert mask_credentials(f"password='{SECRET} x' and pwd=\"{SECRET} y\"") == "password=*** and pwd=***"
    assert mask_credentials(f"jdbc:oracle:thin:scott/{SECRET}@h:1521:orcl") == "jdbc:oracle:thin:scott/***@h:1521:orcl"
    assert mask_credentials(f"postgresql://tf:{SECRET}@x@h/db") == "postgresql://tf:***@h/db"  # an @ in it


@pytest.mark.parametrize("text", [
    "from A on token == 'x' and pass != 3 within 0L, 10L per 'sec'",
    "Access denied for user 'tf'@'127.0.0.1' (using password: YES)",
    "jdbc:postgresql://127.0.0.1:5432/tiltframe?user=tf&sslmode=require",
    "postgresql+psycopg://tf@127.0.0.1/db",
    "field 'password': value 'x' is not a long",
    "",
])
def test_text_without_credentials_is_left_as_it_is(text: str) -> None:
    assert mask_credentials(text) == text
