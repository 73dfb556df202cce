import pytest

from service.sources.webhooks import SignatureError, delivery_digest, sign, verify

SECRET = "whsec_test"
BODY = b'[{"external_id": "1"}]'


def test_a_fresh_signature_verifies_and_gives_its_timestamp() -> None:
    assert verify(BODY, sign(BODY, secret=SECRET, timestamp=1000), secret=SECRET, now=1010, tolerance_seconds=300) == 1000


def test_a_delivery_is_the_signed_message_whichever_secret_signed_it() -> None:
    """A replay is recognised by what was signed, so re-signing a captured request with another of
    the source's secrets (during a rotation) or padding its header does not make it new."""
    assert delivery_digest(BODY, 1000) == delivery_digest(BODY, 1000)
    assert delivery_digest(BODY, 1000) != delivery_digest(BODY, 1001)
    assert delivery_digest(BODY, 1000) != delivery_digest(BODY + b" ", 1000)


def test_rotation_any_matching_v1_is_accepted() -> None:
    good = sign(BODY, secret=SECRET, timestamp=1000)
    header = f"t=1000,v1={'0' * 64},{good.split(',')[1]}"
    verify(BODY, header, secret=SECRET, now=1000, tolerance_seconds=300)


@pytest.mark.parametrize(
    ("header", "now", "message"),
    [
        (None, 1000, "missing"),
        ("garbage", 1000, "must look like"),
        ("t=1000", 1000, "must look like"),
        (sign(BODY, secret=SECRET, timestamp=1000), 1301, "more than 300 s"),
        (sign(BODY, secret=SECRET, timestamp=1000), 699, "more than 300 s"),
        (sign(BODY, secret="other", timestamp=1000), 1000, "does not match"),
        (sign(BODY + b" ", secret=SECRET, timestamp=1000), 1000, "does not match"),
        # the timestamp is signed: moving it forward breaks the signature
        (sign(BODY, secret=SECRET, timestamp=1000).replace("t=1000", "t=1200"), 1200, "does not match"),
    ],
)
def test_missing_stale_or_wrong_signatures_are_refused(header: str | None, now: int, message: str) -> None:
    with pytest.raises(SignatureError, match=message):
        verify(BODY, header, secret=SECRET, now=now, tolerance_seconds=300)
