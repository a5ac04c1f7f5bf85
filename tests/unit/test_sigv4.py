"""SigV4 signing against AWS's published Signature Version 4 test suite (and botocore's signer).

The vectors are the suite's requests (the ``.req`` files: method, path, headers, body) with the
``.authz`` signatures AWS published; all use the suite's example key pair, region ``us-east-1``,
service ``service`` and the time 2015-08-30T12:36:00Z.
"""

from __future__ import annotations

import pickle
from datetime import UTC, datetime
from typing import Any

import pytest

from chatclient.models.http.sigv4 import AWSCredentials, CredentialSource, canonical_request, sign, string_to_sign

KEY = AWSCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
WHEN = datetime(2015, 8, 30, 12, 36, 0, tzinfo=UTC)
HOST = ("Host", "example.amazonaws.com")
STS_TOKEN = (
    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwth"
    "Ax7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVX"
    "AkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="
)

# name: (method, path and query, extra headers, body, signed headers, signature)
VECTORS: dict[str, tuple[str, str, list[tuple[str, str]], bytes, str, str]] = {
    "get-vanilla": (
        "GET", "/", [], b"", "host;x-amz-date",
        "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    ),
    "get-vanilla-query-order-key-case": (
        "GET", "/?Param2=value2&Param1=value1", [], b"", "host;x-amz-date",
        "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
    ),
    "get-unreserved": (
        "GET", "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", [], b"", "host;x-amz-date",
        "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f",
    ),
    "get-utf8": (
        "GET", "/\u1234", [], b"", "host;x-amz-date",
        "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85",
    ),
    "get-header-value-trim": (
        "GET", "/", [("My-Header1", " value1"), ("My-Header2", ' "a   b   c"')], b"",
        "host;my-header1;my-header2;x-amz-date",
        "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
    ),
    "get-header-key-duplicate": (
        "GET", "/", [("My-Header1", "value2"), ("My-Header1", "value2"), ("My-Header1", "value1")], b"",
        "host;my-header1;x-amz-date",
        "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
    ),
    "post-vanilla": (
        "POST", "/", [], b"", "host;x-amz-date",
        "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
    ),
    "post-vanilla-empty-query-value": (
        "POST", "/?Param1=value1", [], b"", "host;x-amz-date",
        "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11",
    ),
    "post-x-www-form-urlencoded": (
        "POST", "/", [("Content-Type", "application/x-www-form-urlencoded")], b"Param1=value1",
        "content-type;host;x-amz-date",
        "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_published_vectors(name: str) -> None:
    method, target, headers, body, signed, signature = VECTORS[name]
    out = sign(method, "https://example.amazonaws.com" + target, [HOST, *headers], body, KEY,
               region="us-east-1", service="service", now=WHEN)  # fmt: skip
    assert out["x-amz-date"] == "20150830T123600Z"
    assert out["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
    assert "x-amz-security-token" not in out


def test_session_token_is_signed_before_the_signature() -> None:
    # post-sts-header-before: the token is a signed header.
    creds = AWSCredentials(KEY.access_key_id, KEY.secret_access_key, STS_TOKEN)
    out = sign("POST", "https://example.amazonaws.com/", [HOST], b"", creds, region="us-east-1", service="service",
               now=WHEN)  # fmt: skip
    assert out["x-amz-security-token"] == STS_TOKEN
    assert out["authorization"].endswith(
        "SignedHeaders=host;x-amz-date;x-amz-security-token, "
        "Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"
    )


def test_intermediate_steps_match_the_suite() -> None:
    # post-x-www-form-urlencoded.creq and .sts
    canonical, signed = canonical_request(
        "POST",
        "https://example.amazonaws.com/",
        [("Content-Type", "application/x-www-form-urlencoded"), HOST, ("X-Amz-Date", "20150830T123600Z")],
        b"Param1=value1",
    )
    assert signed == "content-type;host;x-amz-date"
    assert canonical == (
        "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\n"
        "x-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n"
        "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"
    )
    assert string_to_sign(canonical, "20150830T123600Z", "us-east-1", "service") == (
        "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
        "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281"
    )


def test_host_comes_from_the_url_with_a_non_default_port() -> None:
    canonical, _ = canonical_request(
        "POST", "http://127.0.0.1:8123/model/x/converse", [("host", "127.0.0.1:8123")], b""
    )
    out = sign("POST", "http://127.0.0.1:8123/model/x/converse", [], b"", KEY, region="us-east-1", service="bedrock",
               now=WHEN)  # fmt: skip
    assert "host:127.0.0.1:8123\n" in canonical
    assert "SignedHeaders=host;x-amz-date," in out["authorization"]


def test_a_model_id_colon_is_signed_double_encoded() -> None:
    canonical, _ = canonical_request(
        "POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-v2%3A1/converse", [HOST], b"{}"
    )
    assert canonical.split("\n")[1] == "/model/anthropic.claude-v2%253A1/converse"


def test_matches_botocore_signer_for_a_bedrock_request() -> None:
    botocore_auth = pytest.importorskip("botocore.auth")
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = "https://bedrock-runtime.eu-west-1.amazonaws.com/model/us.anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    body = b'{"messages":[{"role":"user","content":[{"text":"hi \xc3\xa9"}]}]}'
    creds = AWSCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-value")
    request = AWSRequest("POST", url, data=body, headers={"content-type": "application/json"})
    signer = botocore_auth.SigV4Auth(Credentials(*[creds.access_key_id, creds.secret_access_key, creds.session_token]),
                                     "bedrock", "eu-west-1")  # fmt: skip
    signer.add_auth(request)  # at its own clock: ours signs at the same second
    when = datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    ours = sign("POST", url, {"content-type": "application/json"}, body, creds, region="eu-west-1", service="bedrock",
                now=when)  # fmt: skip
    assert ours["x-amz-date"] == request.headers["X-Amz-Date"]
    assert ours["authorization"] == request.headers["Authorization"]


def test_credentials_hide_their_secret_and_validate() -> None:
    creds = AWSCredentials.of(("AKIDEXAMPLE", "very-secret-value", "tok-secret-value"))
    assert "very-secret" not in repr(creds) and "tok-secret" not in repr(creds)
    assert creds.secrets() == ["very-secret-value", "tok-secret-value"]
    with pytest.raises(TypeError, match="access_key_id"):
        AWSCredentials.of("AKID:secret")
    with pytest.raises(ValueError, match="non-empty"):
        AWSCredentials.of(("", "x"))


def test_credential_source_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret-key")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "env-session-token")
    source = CredentialSource()
    assert source.get() == AWSCredentials("AKIDENV", "env-secret-key", "env-session-token")
    assert "env-secret" not in source.source
    copy: Any = pickle.loads(pickle.dumps(source))
    assert copy.get() == source.get()
    explicit = CredentialSource(("AKIDX", "explicit-secret"))
    assert explicit.get() == AWSCredentials("AKIDX", "explicit-secret", None)


def test_credential_source_without_any_credentials_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("chatclient.models.http.sigv4._botocore_available", lambda: False)
    with pytest.raises(ValueError, match="AWS_ACCESS_KEY_ID"):
        CredentialSource()


def _no_env_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config"
    config.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask an instance metadata service here


def test_botocore_chain_reads_a_shared_credentials_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    pytest.importorskip("botocore")
    _no_env_credentials(monkeypatch, tmp_path)
    shared = tmp_path / "credentials"
    shared.write_text("[work]\naws_access_key_id = AKIDFROMFILE\naws_secret_access_key = file-secret-key\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(shared))
    source = CredentialSource(profile="work")
    assert source.get() == AWSCredentials("AKIDFROMFILE", "file-secret-key", None)
    copy: Any = pickle.loads(pickle.dumps(source))  # no live botocore object travels
    assert copy.get() == AWSCredentials("AKIDFROMFILE", "file-secret-key", None)


def test_botocore_chain_failures_are_typed(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    pytest.importorskip("botocore")
    _no_env_credentials(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    from chatclient.errors import AuthenticationError

    with pytest.raises(AuthenticationError, match="ProfileNotFound"):
        CredentialSource(profile="no-such-profile").get()
