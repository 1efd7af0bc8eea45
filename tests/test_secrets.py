"""helpers/secrets.py on its own: every detector finds its secret, placeholders and prose stay."""

from __future__ import annotations

import json

import pytest
from secret_fixtures import GCP_KEY, PLACEHOLDERS, SECRETS, gcp_service_account, prose

from helpers.secrets import (
    DETECTOR_VERSION,
    REDACTION,
    SKIP_MESSAGE,
    SKIP_REASON_SECRET,
    BlockRedactor,
    MostlySecret,
    find_secrets,
    redact,
)

KEYED = {"aws secret key", "password assignment"}  # found by their key, not their shape


@pytest.mark.parametrize("secret", SECRETS, ids=[s.name for s in SECRETS])
def test_every_detector_redacts_its_secret_in_a_config_line(secret):
    text = f"{prose(1)}\n{secret.line()}\n{prose(2)}"
    result = redact(text)
    assert secret.probe in text and secret.probe not in result.text
    assert REDACTION in result.text
    assert result.text.startswith(prose(1)) and result.text.endswith(prose(2))  # nothing else


@pytest.mark.parametrize("secret", SECRETS, ids=[s.name for s in SECRETS])
def test_every_secret_is_found_inside_a_sentence_and_a_json_string(secret):
    texts = [json.dumps({"settings": {secret.key: secret.value}}, indent=2)]
    if secret.name not in KEYED:
        texts.append(f"Deploy with {secret.value} and restart.")
    for text in texts:
        assert secret.probe not in redact(text).text, text


def test_a_bare_password_in_prose_is_not_guessed_at():
    """Without a key saying what it is, a random-looking word is not taken for a secret."""
    for secret in SECRETS:
        if secret.name in KEYED:
            assert find_secrets(f"Deploy with {secret.value} and restart.") == []


@pytest.mark.parametrize("text", PLACEHOLDERS)
def test_placeholders_references_and_password_policy_prose_are_not_redacted(text):
    assert find_secrets(text) == []
    assert redact(text).text == text


def test_config_lines_keep_their_keys_and_only_lose_the_values():
    text = 'db:\n  password: "Zr8!kQ2vLp0w"\n  user: app\nAPI_KEY=9fQ2xLr7Tb4mWc8N\n'
    assert redact(text).text == (
        f'db:\n  password: "{REDACTION}"\n  user: app\nAPI_KEY={REDACTION}\n'
    )


def test_a_key_split_over_many_blocks_is_redacted_from_begin_to_end():
    """A DOCX gives one paragraph per line; the base64 lines between BEGIN and END are key."""
    key = next(s for s in SECRETS if s.name == "rsa private key")
    redactor = BlockRedactor()
    blocks = [prose(1), *key.value.splitlines(), prose(2)]
    out = [redactor.text(b) for b in blocks]
    assert out[0] == prose(1) and out[-1] == prose(2)
    assert all(line.strip() in ("", REDACTION) for line in out[1:-1])
    assert redactor.redactions == 1 and redactor.kinds == {"private key": 1}


def test_a_sentence_naming_the_begin_line_does_not_swallow_the_next_paragraph():
    redactor = BlockRedactor()
    first = redactor.text("A key file starts with -----BEGIN RSA PRIVATE KEY----- on its own.")
    second = redactor.text(prose(3))
    assert second == prose(3)
    assert first.endswith("on its own.")


def test_a_key_file_and_a_service_account_json_are_mostly_secret_material():
    key = next(s for s in SECRETS if s.name == "openssh private key")
    for text in (key.value, json.dumps(gcp_service_account(), indent=2)):
        redactor = BlockRedactor()
        out = redactor.text(text)
        assert redactor.mostly_secret and "private key" in redactor.kinds_label()
        assert GCP_KEY.splitlines()[1] not in out and key.value.splitlines()[1] not in out
    handbook = BlockRedactor()
    handbook.text(f"{prose(1)}\n{prose(2)}\n{SECRETS[6].line()}")
    assert handbook.redactions == 1 and not handbook.mostly_secret


def test_the_skip_reason_is_a_constant_and_plain_words():
    assert SKIP_REASON_SECRET == "secret" and MostlySecret("x").reason == "secret"
    assert SKIP_MESSAGE.format(kinds="private key") == (
        "skipped: the file is mostly secret material (private key)"
    )
    assert isinstance(DETECTOR_VERSION, int) and DETECTOR_VERSION >= 1


def test_clean_text_costs_one_anchor_pass_and_has_no_spans():
    text = (prose(4) + " key: the token of a password policy, see https://example.org/a.\n") * 50
    assert find_secrets(text) == []


def test_putty_and_ssh2_private_keys_are_redacted_whole():
    body = "AAAAB3NzaC1yc2EAAAABJQAAAQEAhX2mK9" * 2
    putty = (
        "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: rsa-key-20261201\n"
        f"Public-Lines: 1\n{body}\nPrivate-Lines: 1\n{body[::-1]}\n"
        "Private-MAC: 4f3c2a1b0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b"
    )
    ssh2 = (
        "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: ops\n"
        f"{body}\n---- END SSH2 ENCRYPTED PRIVATE KEY ----"
    )
    for key in (putty, ssh2):
        result = redact(f"{prose(1)}\n{key}\n{prose(2)}")
        assert result.text == f"{prose(1)}\n{REDACTION}\n{prose(2)}"
        assert [s.kind for s in result.spans] == ["private key"]


def test_cells_under_a_password_column_are_values_and_other_columns_stay():
    header = "| user | DB password | token count | notes |\n|---|---|---|---|"
    redactor = BlockRedactor()
    rows = [
        "| alice | Xk9mQ2vLp7 | 1234567 | first login |",
        "| bob | changeme | 12 | reset |",
        "| carol |  | 5 | same as the admin one |",
        "| dave | see the vault entry 12 for it | 5 | moved |",
    ]
    out = [redactor.table_row(row, header) for row in rows]
    assert out[0] == f"| alice | {REDACTION} | 1234567 | first login |"
    assert out[1:] == rows[1:]
    assert redactor.redactions == 1
    plain = "| name | tokens |\n|---|---|"
    assert BlockRedactor().table_row("| gpt | 4096000 |", plain) == "| gpt | 4096000 |"
