"""Fake secrets in the real shapes of every detector of helpers/secrets.py, and documents of
every format that embed them.

The values are built from parts at run time (random but seeded) so the repository itself holds
no string a secret scanner would flag; each has a long distinctive run to look for in results
and in the raw bytes of the index.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass
from pathlib import Path

from helpers.secrets import BlockRedactor

_RNG = random.Random(18)
ALNUM = string.ascii_letters + string.digits
MARKER = "zebracorn"  # a word next to every secret: the document is found by it


def _pick(alphabet: str, n: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def _b64_lines(n_bytes: int, width: int = 64) -> list[str]:
    raw = base64.b64encode(bytes(_RNG.randrange(256) for _ in range(n_bytes))).decode()
    return [raw[i : i + width] for i in range(0, len(raw), width)]


@dataclass(frozen=True)
class Secret:
    name: str  # the detector it exercises
    value: str  # the secret itself (multi-line for key blocks)
    key: str  # the config key it is stored under in key/value formats
    probe: str  # a distinctive run of it that must never be found anywhere

    def line(self) -> str:
        """The secret as a config-like line (or block) in a text file."""
        if "\n" in self.value:
            return self.value
        return f"{self.key} = {self.value}"


def _secret(name: str, value: str, key: str) -> Secret:
    runs = sorted("".join(c if c.isalnum() else " " for c in value).split(), key=len, reverse=True)
    return Secret(name, value, key, runs[0][:24])


def _pem(kind: str) -> str:
    begin = "-----BEGIN " + kind + "-----"
    end = "-----END " + kind + "-----"
    return "\n".join([begin, *_b64_lines(300), end])


def make_secrets() -> list[Secret]:
    jwt_head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    jwt_body = base64.urlsafe_b64encode(b'{"sub":"1234567890","name":"Ops"}').decode().rstrip("=")
    return [
        _secret("rsa private key", _pem("RSA " + "PRIVATE KEY"), "private_key"),
        _secret("openssh private key", _pem("OPENSSH " + "PRIVATE KEY"), "private_key"),
        _secret("pgp private key", _pem("PGP " + "PRIVATE KEY BLOCK"), "private_key"),
        _secret(
            "aws access key id", "AK" + "IA" + _pick("ABCDEFGHJKLMNPQRSTUVWXYZ234567", 16), "id"
        ),
        _secret("aws secret key", "w" + _pick(ALNUM + "/+", 39), "aws_secret_access_key"),
        _secret(
            "azure storage key",
            "DefaultEndpointsProtocol=https;AccountName=opsdata;AccountKey="
            + _pick(ALNUM, 86)
            + "==;EndpointSuffix=core.windows.net",
            "connection",
        ),
        _secret("github token", "gh" + "p_" + _pick(ALNUM, 36), "gh"),
        _secret("gitlab token", "gl" + "pat-" + _pick(ALNUM, 20), "gl"),
        _secret(
            "slack token", "xo" + "xb-" + _pick(string.digits, 12) + "-" + _pick(ALNUM, 24), "slack"
        ),
        _secret(
            "slack webhook",
            "https://hooks.slack.com/services/T"
            + _pick(string.ascii_uppercase, 8)
            + "/B"
            + _pick(string.ascii_uppercase, 8)
            + "/"
            + _pick(ALNUM, 24),
            "hook",
        ),
        _secret("stripe key", "sk" + "_live_" + _pick(ALNUM, 24), "stripe"),
        _secret("twilio key", "S" + "K" + _pick("0123456789abcdef", 32), "twilio"),
        _secret("sendgrid key", "S" + "G." + _pick(ALNUM, 22) + "." + _pick(ALNUM, 43), "sendgrid"),
        _secret("openai key", "sk" + "-proj-" + _pick(ALNUM, 48), "openai"),
        _secret("anthropic key", "sk" + "-ant-api03-" + _pick(ALNUM + "-_", 90) + "AA", "claude"),
        _secret("jwt", f"{jwt_head}.{jwt_body}.{_pick(ALNUM + '-_', 43)}", "session"),
        _secret(
            "url password", "postgres://app:" + _pick(ALNUM, 18) + "@db.internal:5432/app", "dsn"
        ),
        _secret("password assignment", "Qx" + _pick(ALNUM, 14) + "!9", "db_password"),
    ]


SECRETS = make_secrets()
GCP_KEY = _pem("PRIVATE KEY")


def gcp_service_account() -> dict[str, str]:
    return {
        "type": "service_account",
        "project_id": "ops-prod",
        "private_key_id": _pick("0123456789abcdef", 40),
        "private_key": GCP_KEY + "\n",
        "client_email": "ops@ops-prod.iam.gserviceaccount.com",
    }


PLACEHOLDERS = [
    "password = changeme",
    "secret: <password>",
    "token = ${GITHUB_TOKEN}",
    "api_key: '***'",
    "db_password: your_password_here",
    "password = os.environ['DB_PASSWORD']",
    "max_tokens: 4096",
    "Password: at least 12 characters, one digit and one symbol.",
    "The password policy requires a rotation every 90 days.",
    "AKIAIOSFODNN7EXAMPLE",
    "postgres://user:password@localhost/db",
    "token = tokens[0]",
    "secret = token_from_environment",
    "password = input('Password: ')",
    "tokenizer: sentencepiece",
    "password_min_length = 12",
    "passwd:         files systemd",
    "secretName: my-tls-secret",
    '"NextToken": "9d624e0c-388b-4862-a31e-a85c64fc1d4a",',
    'input_token = "next_token"',
    '"AccessToken": "StateCredentials"',
    "-----BEGIN RSA PRIVATE KEY-----\n... (private key in base64 encoding) ...\n"
    "-----END RSA PRIVATE KEY-----",
]


def prose(i: int) -> str:
    """Ordinary text around the secrets (a document that is mostly secrets is skipped)."""
    return (
        f"Setting {i} is read by the {MARKER} service when it starts; the operations team "
        "rotates it every quarter and records the change in the release notes, together with "
        "the name of the person who approved it and the ticket that asked for it."
    )


def _intro(fmt: str) -> str:
    return f"{MARKER} operations handbook in {fmt}: the deployment settings follow."


def write_text_formats(root: Path) -> dict[str, Path]:
    """One document per text format with every secret in SECRETS embedded in ordinary text."""
    root.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    body = "\n\n".join(f"{prose(i)}\n\n{s.line()}" for i, s in enumerate(SECRETS))
    out["txt"] = root / "handbook.txt"
    out["txt"].write_text(f"{_intro('txt')}\n\n{body}\n\nEnd of the settings.\n", encoding="utf-8")
    out["md"] = root / "handbook.md"
    md_parts = [f"# Handbook\n\n{_intro('md')}\n"]
    for s in SECRETS:
        block = f"```\n{s.value}\n```" if "\n" in s.value else f"- `{s.line()}`"
        md_parts.append(f"## {s.name}\n\n{prose(len(md_parts))}\n\n{block}\n")
    out["md"].write_text("\n".join(md_parts), encoding="utf-8")
    out["yaml"] = root / "handbook.yaml"
    yaml_lines = [f"# {_intro('yaml')}", "settings:"]
    for i, s in enumerate(SECRETS):
        yaml_lines.append(f"  note_{i}: {prose(i)}")
        if "\n" in s.value:
            yaml_lines.append(f"  {s.key}_{i}: |")
            yaml_lines += [f"    {line}" for line in s.value.splitlines()]
        else:
            yaml_lines.append(f"  {s.key}_{i}: {s.value}")
    out["yaml"].write_text("\n".join(yaml_lines) + "\n", encoding="utf-8")
    out["json"] = root / "handbook.json"
    data: dict[str, str] = {"about": _intro("json")}
    for i, s in enumerate(SECRETS):
        data[f"note_{i}"] = prose(i)
        data[f"{s.key}_{i}"] = s.value
    out["json"].write_text(json.dumps(data, indent=2), encoding="utf-8")
    out["csv"] = root / "handbook.csv"
    rows = [["setting", "value"], ["about", _intro("csv")]]
    for i, s in enumerate(SECRETS):
        rows += [["note", prose(i)], [s.key, s.line()]]
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    out["csv"].write_text(buf.getvalue(), encoding="utf-8")
    out["html"] = root / "handbook.html"
    html_parts = [f"<html><body><h1>Handbook</h1><p>{_intro('html')}</p>"]
    for i, s in enumerate(SECRETS):
        html_parts.append(f"<h2>{s.name}</h2><p>{prose(i)}</p>")
        if "\n" in s.value:
            html_parts.append(f"<pre>{s.value}</pre>")
        else:
            html_parts.append(f"<p>{s.line()}</p>")
    out["html"].write_text("".join(html_parts) + "</body></html>", encoding="utf-8")
    return out


def write_docx(path: Path) -> Path:
    """Every secret in a DOCX, one paragraph per line (a key block spans many paragraphs)."""
    import docx

    document = docx.Document()
    document.add_heading("Handbook", level=1)
    document.add_paragraph(_intro("docx"))
    for i, s in enumerate(SECRETS):
        document.add_paragraph(prose(i))
        for line in s.line().splitlines():
            document.add_paragraph(line)
    document.save(str(path))
    return path


def write_pdf(path: Path) -> Path:
    """Every secret in a PDF text layer, 40 lines a page (a key block can span a page break)."""
    from format_fixtures import write_text_pdf

    lines = [_intro("pdf")]
    for i, s in enumerate(SECRETS):
        text = prose(i)
        lines += [text[j : j + 90] for j in range(0, len(text), 90)]
        lines += s.line().splitlines()
    pages = [lines[i : i + 40] for i in range(0, len(lines), 40)]
    return write_text_pdf(path, pages)


class NullObserver:
    """A sync observer that records nothing and never cancels (rag_sync.SyncObserver)."""

    def check_cancel(self) -> None:
        return None

    def on_phase(self, phase: str) -> None: ...

    def on_plan(self, total_files: int, total_bytes: int) -> None: ...

    def on_file_start(self, rel_path: str) -> None: ...

    def on_file_done(self, rel_path: str, outcome: str, size: int, error: str | None) -> None: ...

    def on_error(self, rel_path: str, message: str) -> None: ...


class NoRedaction(BlockRedactor):
    """No detector, as before it existed: the text goes in as it is (an older index; the bench's
    baseline)."""

    def text(self, text: str) -> str:
        return text

    def extra(self, text: str, *, counted: bool = True) -> str:
        return text
