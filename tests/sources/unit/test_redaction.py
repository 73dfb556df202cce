import json
import re
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from ingest.redaction.detectors import SECRET_PLUGINS
from ingest.redaction.redactor import PLACEHOLDER_RE, RedactionPolicy, Redactor

REPORTS = Path(__file__).resolve().parents[4] / "shared" / "data" / "gitbugs_hadoop" / "reports.jsonl"
EMAIL_SHAPED = re.compile(r"[\w.%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")

# Fake credentials of real formats (AWS's documented example key, jwt.io's example token, ...).
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SLACK_TOKEN = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


# --- secrets ----------------------------------------------------------------------------------


def test_aws_access_key_and_secret_in_a_boto_log_line(redactor: Redactor) -> None:
    text = (
        "2024-05-01 12:00:01 DEBUG botocore.credentials: using aws_access_key_id="
        f"{AWS_KEY_ID} aws_secret_access_key={AWS_SECRET} region=us-east-1"
    )
    result = redactor.redact(text)
    assert result.text == (
        "2024-05-01 12:00:01 DEBUG botocore.credentials: using aws_access_key_id="
        "<SECRET:aws-access-key> aws_secret_access_key=<SECRET:aws-secret-key> region=us-east-1"
    )
    assert result.counts == {"SECRET:aws-access-key": 1, "SECRET:aws-secret-key": 1}


def test_quoted_aws_secret_uses_detect_secrets_pattern(redactor: Redactor) -> None:
    result = redactor.redact(f'config: {{"aws_secret_access_key": "{AWS_SECRET}"}}')
    assert result.text == 'config: {"aws_secret_access_key": "<SECRET:aws-secret-key>"}'


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        (f"git clone https://github.com/org/repo using token {GITHUB_TOKEN} failed", GITHUB_TOKEN, "github-token"),
        (f"SLACK_BOT_TOKEN={SLACK_TOKEN} posting to #incidents", SLACK_TOKEN, "slack-token"),
        (f"401 for request with token={JWT}; retrying", JWT, "jwt"),
        ("charge failed, key sk_live_4eC39HqLyjWDarjtT1zdp7dc in env", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe-key"),
        (
            "SENDGRID_API_KEY=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",
            "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",
            "sendgrid-key",
        ),
        (
            "maps call https://maps.googleapis.com/?key=AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe denied",
            "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
            "gcp-api-key",
        ),
        ("twilio sid AC" + "a1" * 16 + " rejected", "AC" + "a1" * 16, "twilio-key"),
        ("CI_TOKEN=glpat-xxxxxxxxxxxxxxxxxxxx pushed", "glpat-xxxxxxxxxxxxxxxxxxxx", "gitlab-token"),
        (
            "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\nalways-auth=true",
            "npm_abcdefghijklmnopqrstuvwxyz0123456789",
            "npm-token",
        ),
        ("twine upload -p pypi-AgEIcHlwaS5vcmc" + "x" * 70 + " dist/*", "pypi-AgEIcHlwaS5vcmc" + "x" * 70, "pypi-token"),
        (
            "OPENAI_API_KEY=sk-proj" + "K" * 20 + "T3BlbkFJ" + "Z" * 20 + " quota exceeded",
            "sk-proj" + "K" * 20 + "T3BlbkFJ" + "Z" * 20,
            "openai-key",
        ),
    ],
)
def test_well_known_token_formats(redactor: Redactor, text: str, secret: str, kind: str) -> None:
    result = redactor.redact(text)
    assert secret not in result.text
    assert text.replace(secret, f"<SECRET:{kind}>") == result.text
    assert result.counts == {f"SECRET:{kind}": 1}


def test_azure_storage_key_keeps_the_connection_string_shape(redactor: Redactor) -> None:
    key = "A" * 86 + "=="
    text = f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={key};EndpointSuffix=core.windows.net"
    assert redactor.redact(text).text == text.replace(key, "<SECRET:azure-storage-key>")


def test_pem_private_key_block_is_replaced_whole(redactor: Redactor) -> None:
    text = f"Deployed the wrong key:\n{PEM}\nand restarted the NameNode."
    result = redactor.redact(text)
    assert result.text == "Deployed the wrong key:\n<SECRET:private-key>\nand restarted the NameNode."
    assert result.counts == {"SECRET:private-key": 1}


def test_truncated_private_key_is_replaced_to_the_end_of_the_text(redactor: Redactor) -> None:
    text = f"pasted key: -----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n(truncated)"
    assert redactor.redact(text).text == "pasted key: <SECRET:private-key>"


def test_password_in_url_keeps_user_host_and_port(redactor: Redactor) -> None:
    result = redactor.redact("could not connect to postgres://app:hunter2@db.internal:5432/x: timeout")
    assert result.text == "could not connect to postgres://app:<SECRET:password-in-url>@db.internal:5432/x: timeout"
    assert result.counts == {"SECRET:password-in-url": 1}


def test_bearer_and_basic_authorization_headers(redactor: Redactor) -> None:
    text = (
        'curl -H "Authorization: Bearer abc.def" https://api.internal/v1\n'
        "proxy sent Authorization: Basic dXNlcjpwYXNzd29yZA== upstream\n"
        f"retried with Bearer {JWT}"
    )
    result = redactor.redact(text)
    assert result.text == (
        'curl -H "Authorization: Bearer <SECRET:bearer-token>" https://api.internal/v1\n'
        "proxy sent Authorization: Basic <SECRET:basic-auth> upstream\n"
        "retried with Bearer <SECRET:bearer-token>"
    )
    assert result.counts == {"SECRET:bearer-token": 2, "SECRET:basic-auth": 1}


def test_bearer_and_basic_as_plain_words_are_left_alone(redactor: Redactor) -> None:
    text = "Bearer tokens expire after 1h. Basic authentication is disabled. Bearer token-based login."
    assert redactor.redact(text).text == text


def test_only_regex_plugins_of_detect_secrets_are_used() -> None:
    names = {plugin.detector.__name__ for plugin in SECRET_PLUGINS}
    assert {"AWSKeyDetector", "PrivateKeyDetector", "JwtTokenDetector", "BasicAuthDetector"} <= names
    assert not names & {"KeywordDetector", "Base64HighEntropyString", "HexHighEntropyString"}
    assert all(re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", plugin.kind) for plugin in SECRET_PLUGINS)


# --- e-mail and IP addresses -------------------------------------------------------------------


def test_emails(redactor: Redactor) -> None:
    text = "Reported by jane.doe+oncall@example.co.uk; cc [~ops-team@corp.example.com], see mailto:a_b@x.io."
    result = redactor.redact(text)
    assert result.text == "Reported by <EMAIL>; cc [~<EMAIL>], see mailto:<EMAIL>."
    assert result.counts == {"EMAIL": 3}


def test_ipv4_keeps_ports_and_rejects_invalid_quads(redactor: Redactor) -> None:
    text = (
        "Retrying connect to server: nn1/10.0.0.12:8020. Already tried 3 time(s); "
        "DNS answered 151.101.196.215, bogus 192.168.1.256"
    )
    result = redactor.redact(text)
    assert result.text == (
        "Retrying connect to server: nn1/<IPV4>:8020. Already tried 3 time(s); "
        "DNS answered <IPV4>, bogus 192.168.1.256"
    )
    assert result.counts == {"IPV4": 2}


def test_ipv6_forms(redactor: Redactor) -> None:
    text = (
        "bind [fd12:3456:789a::1]:8080 failed; link fe80::1ff:fe23:4567:890a%eth0; "
        "mapped ::ffff:10.0.0.128 and full 2a00:1450:4001:0829:0000:0000:0000:200e."
    )
    result = redactor.redact(text)
    assert result.text == "bind [<IPV6>]:8080 failed; link <IPV6>%eth0; mapped <IPV6> and full <IPV6>."
    assert result.counts == {"IPV6": 4}


def test_addresses_that_identify_nobody_are_kept(redactor: Redactor) -> None:
    text = (
        "curl http://127.0.0.1:8080/health and [::1]:8080 work; listening on 0.0.0.0:9870 and [::]:9870; "
        "resolv.conf has 1.1.1.1, 8.8.8.8 and 2606:4700:4700::1111; IMDS at 169.254.169.254 times out; "
        "docs use 192.0.2.10, 198.51.100.7, 203.0.113.9 and 2001:db8::7; netmask 255.255.255.0; "
        "mapped ::ffff:192.0.2.128"
    )
    result = redactor.redact(text)
    assert result.text == text
    assert result.counts == {}


def test_private_and_public_hosts_are_redacted(redactor: Redactor) -> None:
    text = "from 192.168.1.135 via gateway 172.20.0.1 (CGNAT 100.92.11.63) to 52.95.110.1 and 9.9.9.10"
    result = redactor.redact(text)
    assert result.text == "from <IPV4> via gateway <IPV4> (CGNAT <IPV4>) to <IPV4> and <IPV4>"


@pytest.mark.parametrize(
    "text",
    [
        "Affects 2.7.3, fixed in 3.3.0",
        "https://github.com/apache/hadoop/blob/release-2.7.3-RC2/hadoop-yarn-project/FSDownload.java#L255",
        "dotted 1.2.3.4.5 and v1.2.3.4",
        "Upgrade jackson-databind to 2.9.10.3",
        "2021-09-30 17:20:00,123 INFO created at 17:20:00 (2021-09-30T17:20:00Z)",
        "commit 3f9a6c2e8b1d4f7a9c0e2b4d6f8a1c3e5b7d9f0a and d4f7a9c",
        "container 123e4567-e89b-12d3-a456-426614174000 on blk_1073741825_1001",
        "MAC 00:1a:2b:3c:4d:5e, std::vector<int>, x :: xs, Face::add",
        "eb06d8f6-5693-461b-b63c-5858fa7655e6:29cb0d19-2b68-4409-bc35-cb7160b90dd8:::CF:1",
        "user hdfs@localhost, java.lang.Object@6d06d69c",
    ],
)
def test_ordinary_incident_text_is_untouched(redactor: Redactor, text: str) -> None:
    result = redactor.redact(text)
    assert result.text == text
    assert result.counts == {}


# --- policy, counts, idempotence -------------------------------------------------------------

MIXED = (
    f"On-call alice@example.com pasted {AWS_KEY_ID} from host 10.1.2.3 and [fd00:1234::7]:22;\n"
    f"Authorization: Bearer {JWT}\nmail bob@example.org, db postgres://svc:s3cr3t@10.1.2.4:5432/app\n{PEM}"
)


def test_counts_over_mixed_text(redactor: Redactor) -> None:
    result = redactor.redact(MIXED)
    assert result.counts == {
        "SECRET:aws-access-key": 1,
        "SECRET:bearer-token": 1,
        "SECRET:password-in-url": 1,
        "SECRET:private-key": 1,
        "EMAIL": 2,
        "IPV4": 2,
        "IPV6": 1,
    }
    assert sum(result.counts.values()) == len(PLACEHOLDER_RE.findall(result.text))
    assert "postgres://svc:<SECRET:password-in-url>@<IPV4>:5432/app" in result.text


@pytest.mark.parametrize(
    ("policy", "absent"),
    [
        (RedactionPolicy(secrets=False), "SECRET:"),
        (RedactionPolicy(emails=False), "EMAIL"),
        (RedactionPolicy(ip_addresses=False), "IPV"),
    ],
)
def test_a_flag_off_disables_its_family(policy: RedactionPolicy, absent: str) -> None:
    result = Redactor(policy).redact(MIXED)
    assert all(not kind.startswith(absent) for kind in result.counts)
    assert absent not in result.text
    assert result.counts  # the other families still ran


def test_everything_off_is_the_identity() -> None:
    policy = RedactionPolicy(secrets=False, emails=False, ip_addresses=False)
    result = Redactor(policy).redact(MIXED)
    assert result.text == MIXED
    assert result.counts == {}


def test_policy_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        RedactionPolicy.model_validate({"secrets": True, "phone_numbers": True})


def test_secrets_go_first_so_an_email_inside_a_password_is_not_half_replaced(redactor: Redactor) -> None:
    result = redactor.redact("sftp://deploy:hunter2@files.example.com/drop")
    assert result.text == "sftp://deploy:<SECRET:password-in-url>@files.example.com/drop"
    assert result.counts == {"SECRET:password-in-url": 1}


def test_idempotent_and_placeholders_never_redacted_again(redactor: Redactor) -> None:
    once = redactor.redact(MIXED)
    twice = redactor.redact(once.text)
    assert twice.text == once.text
    assert twice.counts == {}
    already = "see <EMAIL> at <IPV4>:80, [<IPV6>]:443, token <SECRET:jwt>, Bearer <SECRET:bearer-token>"
    assert redactor.redact(already).text == already


@pytest.mark.parametrize(
    "text",
    [
        "a.b@c.dea.b@c.dea.b@c.de",  # an e-mail's TLD running into the next address
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw-" * 3,  # telegram-shaped, glued together
        "GR1348941abc" * 40,  # a gitlab prefix repeated past the pattern's 50-char bound
    ],
)
def test_idempotent_when_neighbours_are_glued(redactor: Redactor, text: str) -> None:
    once = redactor.redact(text).text
    assert redactor.redact(once).text == once


@pytest.mark.parametrize(
    "text",
    [
        "eyJ" * 50_000,  # detect-secrets' JWT pattern alone is quadratic here
        "eyJhbGciOiJIU=" * 10_000,
        "//a/:_authToken=" * 10_000,  # and its npm pattern here
        "10.0.0.1-" * 10_000,
        "1-2-3-4-" * 10_000,
        "ip-1-2-3-4." * 10_000,
        "a" * 100_000 + "1.2.3.4",
    ],
)
def test_adversarial_input_stays_linear(redactor: Redactor, text: str) -> None:
    # CPU time of this process: what the input costs, not how busy other test workers keep the machine.
    started = time.process_time()
    redactor.redact(text)
    assert time.process_time() - started < 2.0


def test_four_part_versions_are_told_from_addresses(redactor: Redactor) -> None:
    text = "Bump snappy-java to 1.1.8.2; the client retried to connect to 10.1.2.3 (from jdk 11.0.15.0)"
    assert redactor.redact(text).text == "Bump snappy-java to 1.1.8.2; the client retried to connect to <IPV4> (from jdk 11.0.15.0)"


@pytest.mark.parametrize(
    "text",
    [
        "Performance issues with 2.53.12 are worse than 2.53.5.1",
        "User agent: Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:60.0) Gecko/20100101 Firefox/60.0 SeaMonkey/2.53.5.1",
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.109 Safari/537.36",
        "Build identifier: 20.1.3.4 fails; release 10.2.1.0 too; firmware 10.0.0.50; update 4.2.13.1",
        "NETGEAR DGN2200 devices with firmware through 10.0.0.50",
        "Upgrade org.apache.derby:derby to 10.17.1.0",
        "Upgrade Huawei OBS client to 3.22.3.1",
        "jackson < 2.9.10.4 and jackson-databind 2.12.7.1, range [,2.9.10.5)",
        "v1.2.3.4, ddcMD1.1.17, DrayTek_Vigor300B_V1.5.1.5_01release-note.pdf",
        "OpenJDK 64-Bit Server VM (Zulu 8.54.0.21-CA-macos-aarch64); CloudBees 2.263.4.2-rolling",
        "~[hadoop-auth-3.1.1.7.2.9.0-153.jar:?] and HDP-2.6.5.165-3-tag, ~[solr-core.jar:8.4.1.7]",
        "Package_for_KB2621440~31bf3856ad364e35~amd64~~6.1.1.5, Servicing Stack v6.1.7601.23505",
        "/usr/ddp/3.1.4.0-315/hadoop, <version>0.10.0.0</version>",
        "leading zeros 1.02.03.04 and parts over 255: 6.1.7601.23505",
        "Versions-before-9-4-0-1-and-9-3-0-2, image-2020-12-25-08-32-32-982.png",
    ],
)
def test_versions_are_not_redacted(redactor: Redactor, text: str) -> None:
    result = redactor.redact(text)
    assert result.text == text
    assert result.counts == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sh /tmp/command-192.168.1.135-478816069.sh", "sh /tmp/command-<IPV4>-478816069.sh"),
        ("[ec2-user@ip-10-0-1-23 ~]$ curl http://ip-10-0-1-23.ec2.internal:4040", "[ec2-user@ip-<IPV4> ~]$ curl http://ip-<IPV4>.ec2.internal:4040"),
        ("rhost=adsl-63-197-98-106.dsl.mtry01.pacbell.net", "rhost=adsl-<IPV4>.dsl.mtry01.pacbell.net"),
        ("connection from 206.196.21.129 (host129.206.196.21.maximumasp.com)", "connection from <IPV4> (host<IPV4>.maximumasp.com)"),
        ("(dsl-Chn-static-059.45.101.203.touchtelindia.net)", "(dsl-Chn-static-<IPV4>.touchtelindia.net)"),
        ("Old: nn2-192-168-1-100/192.168.1.100:9000", "Old: nn2-<IPV4>/<IPV4>:9000"),
        ("for block BP-1836197545-10.125.248.11-1672668423261:blk_1", "for block BP-1836197545-<IPV4>-1672668423261:blk_1"),
        ("Shutting down KMSWebServer at hadoop-benchmark/172.17.0.2", "Shutting down KMSWebServer at hadoop-benchmark/<IPV4>"),
        ("rhost=68.143.156.89.nw.nuvox.net  user=root", "rhost=<IPV4>.nw.nuvox.net  user=root"),
        ("10.11.21.138,10.11.10.1 \"GET /v2/servers", "<IPV4>,<IPV4> \"GET /v2/servers"),
        ("network 5.5.224.0 via interface alt0; ip=10.0.1.155 v=13", "network <IPV4> via interface alt0; ip=<IPV4> v=13"),
    ],
)
def test_addresses_inside_identifiers_and_host_names_are_redacted(redactor: Redactor, text: str, expected: str) -> None:
    result = redactor.redact(text)
    assert result.text == expected
    assert redactor.redact(result.text).text == result.text


def test_empty_text(redactor: Redactor) -> None:
    result = redactor.redact("")
    assert result.text == ""
    assert result.counts == {}


def test_redact_value_walks_dicts_and_lists_and_keeps_keys(redactor: Redactor) -> None:
    value = {
        "title": "NameNode 10.0.0.1 down",
        "comments": [{"author": "alice@example.com", "body": f"key {AWS_KEY_ID}"}, "ping bob@example.org"],
        "alice@example.com": 3,
        "retries": 3,
        "flaky": None,
    }
    redacted, counts = redactor.redact_value(value)
    assert redacted == {
        "title": "NameNode <IPV4> down",
        "comments": [{"author": "<EMAIL>", "body": "key <SECRET:aws-access-key>"}, "ping <EMAIL>"],
        "alice@example.com": 3,
        "retries": 3,
        "flaky": None,
    }
    assert counts == {"IPV4": 1, "EMAIL": 2, "SECRET:aws-access-key": 1}
    assert value["title"] == "NameNode 10.0.0.1 down"  # the input is not mutated


def test_redact_value_leaves_other_types_alone(redactor: Redactor) -> None:
    assert redactor.redact_value(42) == (42, {})
    assert redactor.redact_value(b"a@b.com") == (b"a@b.com", {})
    assert redactor.redact_value("a@b.com") == ("<EMAIL>", {"EMAIL": 1})


# --- real reports ----------------------------------------------------------------------------


def _reports(limit: int | None = None) -> list[str]:
    if not REPORTS.exists():
        pytest.skip(f"{REPORTS} not present")
    texts: list[str] = []
    with REPORTS.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if limit is not None and number >= limit:
                break
            record = json.loads(line)
            texts.append(f"{record.get('title') or ''}\n{record.get('description') or ''}")
    return texts


def test_first_200_hadoop_reports(redactor: Redactor) -> None:
    texts = _reports(200)
    assert len(texts) == 200
    before = sum(len(EMAIL_SHAPED.findall(text)) for text in texts)
    total: dict[str, int] = {}
    for text in texts:
        result = redactor.redact(text)
        assert EMAIL_SHAPED.search(result.text) is None, EMAIL_SHAPED.search(result.text)
        assert redactor.redact(result.text).text == result.text
        for kind, count in result.counts.items():
            total[kind] = total.get(kind, 0) + count
    assert before > 0 and total["EMAIL"] >= before


def test_all_hadoop_reports_are_fast(redactor: Redactor) -> None:
    texts = _reports()
    started = time.perf_counter()
    for text in texts:
        redactor.redact(text)
    # About 0.3 s on one core for ~2.5 MB; the bound only catches a pathological regression.
    assert time.perf_counter() - started < 5.0


def test_a_remembered_short_value_gives_the_same_result_and_its_counts_are_the_callers() -> None:
    redactor = Redactor()
    text = "ping ops@example.com from 10.0.0.7"
    first = redactor.redact(text)
    first.counts["EMAIL"] = 99  # a caller adding to its result must not change the next one
    second = redactor.redact(text)
    assert second.text == first.text == "ping <EMAIL> from <IPV4>"
    assert second.counts == {"EMAIL": 1, "IPV4": 1}
    long_text = "x " * 200 + text
    assert redactor.redact(long_text).counts == {"EMAIL": 1, "IPV4": 1}
