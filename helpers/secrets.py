"""Secrets in document text: found by a fixed list of high-precision detectors and redacted
before anything is chunked, stored, indexed or embedded (rag_sync.extract_document).

detect-secrets 1.5 (its plugin regexes are the reference for the patterns below) scans ~0.1 MB/s
here, far too slow for every document. Here one pass of a literal-only regex (every branch starts
with a fixed string, so SQLite-free C code skips clean text at ~80 M chars/s) finds the anchors
present, and only the detectors behind them run; assignments are found from their secret word in
the lower-cased text. The detectors:

- private keys: PEM / OpenSSH / PGP / PuTTY private-key blocks, BEGIN to END (also across the
  blocks of one document, and with literal `\\n` escapes as in a GCP service-account JSON)
- AWS access key ids (AKIA/ASIA/ABIA/ACCA/A3T + 16) and secret keys (`aws_secret_access_key =`)
- Azure storage account keys (`AccountKey=`), `SharedAccessKey=`, SAS signatures (`sig=`)
- GitHub (ghp_/gho_/ghu_/ghs_/ghr_, github_pat_) and GitLab (glpat- and friends) tokens
- Slack tokens (xoxb-/xoxp-/... , xapp-) and webhooks (hooks.slack.com/services/...)
- API keys: Stripe (sk_/rk_ live/test), Twilio (AC/SK + 32 hex), SendGrid (SG.x.y), OpenAI
  (sk-..., sk-proj-..., T3BlbkFJ), Anthropic (sk-ant-api03-...), Google (AIza...), Hugging Face
  (hf_), npm (npm_), PyPI (pypi-AgE...)
- JWTs: three base64url parts, the first two JSON objects (`eyJ...eyJ...`)
- passwords in URLs (`scheme://user:password@host`)
- `password=` / `secret:` / `token =` / `api_key:` assignments in config-like lines: an identifier
  key that ends in a secret word, then `=`, `:`, `:=` or `=>`, then a quoted string or one token
  (after `:` it must end the line, as in YAML), with guards: placeholders (`changeme`,
  `<password>`, `${VAR}`, `***`, `your_password`, `example`), references (`config.password`,
  `$VAR`, `os.environ[...]`, paths) and prose ("Password: at least 12 characters").

Documented sample keys (`AKIAIOSFODNN7EXAMPLE`) are left alone. Bump DETECTOR_VERSION whenever
what is detected changes: documents indexed under another version are read again on the next
sync, so a secret an older version missed leaves the index.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from helpers.skips import FileSkipped, SkipReason

DETECTOR_VERSION = 1
REDACTION = "[redacted secret]"
# The reason code of a file skipped because it is mostly secret material (for per-reason skip
# counts); SKIP_MESSAGE is what the job's per-file report says.
SKIP_REASON_SECRET = SkipReason.SECRET.value
SKIP_MESSAGE = "skipped: the file is mostly secret material ({kinds})"
# A document whose redacted characters are at least this share of its non-space text is a
# secret file under an innocent name (a key file, a service-account JSON, a copied .env): it is
# skipped, not indexed as a few words around "[redacted secret]". A GCP service-account JSON is
# ~75 % key; a README with one embedded key a few percent.
MOSTLY_SECRET_SHARE = 0.5
# A private-key block without its END line is redacted for at most this many characters (an
# RSA 4096 PEM is ~3,300, a PGP private key block with subkeys ~7,000).
MAX_KEY_BLOCK_CHARS = 16_000
PRIVATE_KEY = "private key"
MAX_REPEATED_TEXTS = 1024  # distinct table headers / headings remembered per document
GENERIC = "password or token"


class MostlySecret(FileSkipped):
    """A document that is mostly secret material: it is skipped (counted under the skip reason
    `secret`), and the message says why."""

    def __init__(self, detail: str) -> None:
        super().__init__(SkipReason.SECRET, detail)


@dataclass(frozen=True)
class SecretSpan:
    start: int
    end: int
    kind: str  # plain words: "private key", "AWS key", "password or token", ...


@dataclass(frozen=True)
class Redacted:
    text: str
    spans: tuple[SecretSpan, ...]  # offsets in the input text


_KEY_BEGIN = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d+:"
    r"|---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----"
)
_KEY_END = re.compile(
    r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|Private-MAC: *[0-9a-fA-F]+"
    r"|---- END SSH2 ENCRYPTED PRIVATE KEY ----"
)
_END_MARKERS = ("-----END ", "Private-MAC:", "---- END ")
# The lines of a key body: base64 runs and the few header lines PEM, PGP and PuTTY put there.
# Without its END line, a key is redacted only as far as such lines go (a sentence that merely
# mentions "-----BEGIN RSA PRIVATE KEY-----" loses that marker, not the page after it).
_KEY_HEADER = (
    r"(?:Proc-Type|DEK-Info|Version|Comment|Hash|Charset|Encryption|Public-Lines|Private-Lines"
    r"|Key-Derivation|Argon2-[A-Za-z]+): [^\r\n\\]*"
)
_KEY_LINE = r"(?:[A-Za-z0-9+/=]+|" + _KEY_HEADER + r")"
_KEY_RUN = re.compile(
    r"(?:[ \t]*(?:\r?\n|\\r\\n|\\n)+[ \t]*" + _KEY_LINE + r"(?=[ \t]*(?:\r?\n|\\[rn]|$)))*"
)
_KEY_HEADER_LINE = re.compile(_KEY_HEADER)
_BASE64_BODY = re.compile(r"[A-Za-z0-9+/=\s]*")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{16}")


def _looks_like_key_body(body: str) -> bool:
    """Base64 (and PEM/PuTTY header lines) with at least one long run: a real key, not a
    documentation stand-in such as "... (private key in base64 encoding) ..."."""
    body = _KEY_HEADER_LINE.sub(" ", body.replace("\\n", "\n").replace("\\r", ""))
    return bool(_BASE64_RUN.search(body)) and _BASE64_BODY.fullmatch(body) is not None


_KEY_BLOCK = re.compile(r"\s*(?:" + _KEY_LINE + r"[ \t]*(?:\r?\n\s*|$))+")

# (kind, anchors, pattern): the secret is the pattern's first group that matched.
# Each anchor regex starts with an upper-case letter or a sign (a lower-case start would make
# the prefilter stop at every letter of prose; lookbehinds check the letters before the sign).
_TOKEN_DETECTORS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    (
        "AWS key",
        r"AKIA|ASIA|ABIA|ACCA|A3T",
        re.compile(r"(?<![A-Z0-9])((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})(?![A-Z0-9])"),
    ),
    (
        "Azure key",
        r"AccountKey=|SharedAccessKey=|=(?<=[?&]sig=)",
        re.compile(
            r"AccountKey=([A-Za-z0-9+/]{86}==)"
            r"|SharedAccessKey=([A-Za-z0-9+/]{42,43}=)"
            r"|[?&]sig=([A-Za-z0-9%+/]{40,}(?:%3D|=)*)"
        ),
    ),
    (
        "GitHub token",
        r"_(?<=gh[opusr]_)|_pat_(?<=github_pat_)",
        re.compile(
            r"(?<![A-Za-z0-9_])((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36}"
            r"|github_pat_[A-Za-z0-9_]{50,255})(?![A-Za-z0-9_])"
        ),
    ),
    (
        "GitLab token",
        r"-(?<=glpat-)|-(?<=gldt-)|-(?<=glft-)|-(?<=glrt-)|-(?<=glptt-)|-(?<=gloas-)|-(?<=glcbt-)"
        r"|-(?<=glsoat-)|GR1348941",
        re.compile(
            r"(?<![A-Za-z0-9_\-])((?:glpat|gldt|glft|glsoat|glrt|glptt|gloas|glcbt)-"
            r"[A-Za-z0-9_\-]{20,64}|GR1348941[A-Za-z0-9_\-]{20,50})(?![A-Za-z0-9_\-])"
        ),
    ),
    (
        "Slack token",
        r"-(?<=xox[abposre]-)|-(?<=xapp-)|\.slack\.com/",
        re.compile(
            r"(?<![A-Za-z0-9])(xox[abposre]-(?:[0-9]+-)+[A-Za-z0-9]{10,}"
            r"|xapp-[0-9]-[A-Z0-9]+-[0-9]+-[a-z0-9]{20,})"
            r"|(https://hooks\.slack\.com/(?:services|workflows)/T[A-Za-z0-9_]+/"
            r"[AB][A-Za-z0-9_]+/[A-Za-z0-9_]{8,})"
        ),
    ),
    (
        "Stripe key",
        r"_live_(?<=k_live_)|_test_(?<=k_test_)",
        re.compile(r"(?<![A-Za-z0-9_])([rs]k_(?:live|test)_[0-9a-zA-Z]{24,99})(?![A-Za-z0-9])"),
    ),
    (
        "Twilio key",
        r"AC(?=[0-9a-f]{32})|SK(?=[0-9a-f]{32})",  # the lookahead: "ACME", "SKU" are no hits
        re.compile(r"(?<![A-Za-z0-9])((?:AC|SK)[0-9a-f]{32})(?![A-Za-z0-9])"),
    ),
    (
        "SendGrid key",
        r"SG\.",
        re.compile(
            r"(?<![A-Za-z0-9])(SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43})(?![A-Za-z0-9_\-])"
        ),
    ),
    (
        "API key",  # OpenAI (legacy, project, service account, T3BlbkFJ) and Anthropic keys
        r"-(?<=sk-)",
        re.compile(
            r"(?<![A-Za-z0-9_\-])(sk-ant-(?:api|admin|oat)[0-9]{2}-[A-Za-z0-9_\-]{40,}"
            r"|sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,}"
            r"|sk-[A-Za-z0-9_\-]{0,40}T3BlbkFJ[A-Za-z0-9_\-]{20,}"
            r"|sk-[A-Za-z0-9]{48})(?![A-Za-z0-9_\-])"
        ),
    ),
    (
        "API key",  # Google, Hugging Face, npm, PyPI
        r"AIza|_(?<=hf_)|_(?<=npm_)|-AgE(?<=pypi-AgE)",
        re.compile(
            r"(?<![A-Za-z0-9_\-])(AIza[0-9A-Za-z_\-]{35}|hf_[A-Za-z0-9]{34,40}|npm_[A-Za-z0-9]{36}"
            r"|pypi-AgE[A-Za-z0-9_\-]{70,})(?![A-Za-z0-9_\-])"
        ),
    ),
    (
        "JWT",
        r"\.eyJ",
        re.compile(
            r"(?<![A-Za-z0-9_\-])(eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{16,})"
        ),
    ),
)
_URL_AUTH = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.\-]{1,15}://([^\s:/@?#\"'<>\[\]]{1,64}):([^\s/@\"'<>]{3,128})@"
    r"([^\s/:?#\"'<>]*)"
)
# One pass of this plain alternation is what clean text costs (no capturing groups: saying which
# branch matched makes the scan many times slower, bench/RESULTS.md "Secret detector cost");
# each hit is then matched against the anchors that start with its first character.
_KEY_ANCHOR = r"PRIVATE KEY|PuTTY-User-Key-File-"
_URL_ANCHOR = r"://"
_ANCHORS = re.compile(
    "|".join([_KEY_ANCHOR, _URL_ANCHOR] + [anchor for _kind, anchor, _p in _TOKEN_DETECTORS])
)
_ANCHOR_CHECKS: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
for _name, _anchor in [("key", _KEY_ANCHOR), ("url", _URL_ANCHOR)] + [
    (str(i), anchor) for i, (_kind, anchor, _p) in enumerate(_TOKEN_DETECTORS)
]:
    for _branch in re.split(r"\|(?![^(]*\))", _anchor):
        _first = _branch.lstrip("\\")[0]
        _ANCHOR_CHECKS.setdefault(_first, []).append((_name, re.compile(_branch)))


_NAMES_BY_CHAR = {c: {name for name, _ in checks} for c, checks in _ANCHOR_CHECKS.items()}


def _anchors_in(text: str) -> set[str]:
    """Names of the detectors whose anchor occurs: "key", "url" or a _TOKEN_DETECTORS index."""
    found: set[str] = set()
    for hit in _ANCHORS.finditer(text):
        first = hit.group()[0]
        if found >= _NAMES_BY_CHAR[first]:
            continue  # "ACACAC..." or a row of dashes: each hit would re-check the same names
        for name, check in _ANCHOR_CHECKS[first]:
            if name not in found and check.match(text, hit.start()):
                found.add(name)
    return found


# Config-like assignments: the secret word is found by str.find of a few roots in the lower-cased
# text (C speed; one regex over every letter position was the detector's main cost), the rest
# (suffix, operator, value) is matched where the word ends, and the key start is walked back to.
_ROOTS: tuple[tuple[str, re.Pattern[str] | None], ...] = (
    ("pass", re.compile(r"pass(?:word|wd|phrase)")),
    ("pwd", None),
    ("secret", None),
    ("token", None),
    ("credential", re.compile(r"credentials?")),
    ("key", None),  # only after api / access / private / auth / account, see _KEY_PREFIX
)
_KEY_PREFIX = re.compile(r"(?:api|access|private|auth|account)[_\-]?$")
_ASSIGNMENT_TAIL = re.compile(
    r"(?:[_.\-]?(?:id|hash|value|b64|base64|key|[0-9]{1,3}))?"
    r"[\"']?\]?[ \t]*(?P<op>:=|=>|=|:|\|)[ \t]*"
    r"(?:(?P<q>[\"'`])(?P<qval>[^\"'`\n]{1,256})(?P=q)|(?P<val>[^\s\"'`,;|<>]{1,256}))",
    re.IGNORECASE,
)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.$")
_MAX_KEY_CHARS = 64

# Values that stand for a secret in documentation and templates.
_PLACEHOLDER_TEXT = """
    changeme change_me change-me changeit password passwd passphrase secret token example
    placeholder redacted none null nil true false yes no required optional string str todo
    tbd dummy test testing undefined empty hidden masked notset not_set unset default
    hunter2 foobar qwerty letmein"""
_PLACEHOLDER_WORDS = frozenset(_PLACEHOLDER_TEXT.split())
_PLACEHOLDER_MARKERS = (
    "your",
    "example",
    "placeholder",
    "redacted",
    "password",
    "passwd",
    "secret",
    "token",
    "xxxx",
    "****",
    "....",
    "<",
    "${",
    "$(",
    "{{",
    "%(",
    "%s",
    "env[",
    "environ",
    "getenv",
    "process.env",
    "vault:",
)
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_PATHLIKE = re.compile(r"(?:[/~]|\.{1,2}/|[A-Za-z]:\\)")
_ONE_CHAR_RUN = re.compile(r"(.)\1*")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_]*")  # no digit: a name, not a generated secret
_CODE_CHARS = frozenset("()[]{}")
# Keys that end in a secret word but name no secret: pagination cursors and request ids.
_NOT_SECRET_KEY = re.compile(
    r"(?:next|page|continuation|client|request|idempotency|lock|sequence|sync|pagination"
    r"|start|marker|cancel|csrf)[_\-.]?token$"
)
_EXAMPLE_HOST = re.compile(r"(?:[\w-]+\.)*example(?:\.[a-z]+)?$|localhost$|host$", re.IGNORECASE)
# Shorter values ("admin", "root", "1234") are defaults and examples, not secrets worth a hole.
MIN_VALUE_CHARS = 6


def is_placeholder(value: str, key: str = "") -> bool:
    """True for values that stand for a secret without being one (docs, templates, code)."""
    v = value.strip().strip("\"'`")
    low = v.lower()
    if len(v) < MIN_VALUE_CHARS or low in _PLACEHOLDER_WORDS:
        return True
    if any(marker in low for marker in _PLACEHOLDER_MARKERS) or _ONE_CHAR_RUN.fullmatch(v):
        return True  # <password>, ${DB_PASS}, your_token, ******, xxxxxxxx
    if v.startswith(("$", "%", "@", "&", "*", "!", "#", "{", "(", "[")) or v.endswith(("(", ")")):
        return True  # $VAR, %VAR%, @variable, *ref, !tag, #comment, {template}, calls
    return bool(key) and low.replace("-", "_") == key.lower().replace("-", "_")


def _assignment(text: str, word_start: int, match: re.Match[str]) -> SecretSpan | None:
    """The value span of a config-like assignment, or None for code, prose and placeholders."""
    start = word_start
    while start > 0 and word_start - start < _MAX_KEY_CHARS and text[start - 1] in _KEY_CHARS:
        start -= 1
    if start > 0 and text[start - 1] == ":":
        return None  # an RST role (:token:`name`), not a key
    key = text[start : match.start("op")].strip("\"' \t]$")
    if _NOT_SECRET_KEY.search(key.lower()):
        return None  # NextToken, ClientToken, page_token: pagination and request ids
    if match.group("qval") is not None:
        value, group = match.group("qval"), "qval"
        if value.count(" ") >= 2 and not any(c.isdigit() for c in value):
            return None  # a quoted sentence ("The secret to success") is prose
        if _IDENTIFIER.fullmatch(value):
            return None  # "next_token", "StateCredentials": a name in code or an API doc
    else:
        value, group = match.group("val").rstrip("."), "val"
        if match.group("op") == "|" and not text.startswith("|", match.end()):
            line_end = text.find("\n", match.end())
            cell_end = text[match.end() : line_end if line_end >= 0 else len(text)].lstrip(" \t")
            if not cell_end.startswith("|"):
                return None  # a key | value table row: the value must fill its cell
        if match.group("op") == ":":
            line_end = text.find("\n", match.end())
            rest = text[match.end() : line_end if line_end >= 0 else len(text)].strip(" \t,;")
            if rest and not rest.startswith(("|", "<", "#")):
                return None  # "Password: at least 12 characters" is a sentence
            if value.lower().startswith(("http", "ftp", "//")):
                return None  # token_url: https://... (a password in a URL is found apart)
        if _DOTTED_NAME.fullmatch(value) or _PATHLIKE.match(value) or _CODE_CHARS & set(value):
            return None  # config.password, tokens[0], get(), /run/secrets/db: code or a path
        if match.group("op") != ":" and _IDENTIFIER.fullmatch(value):
            return None  # token = token_from_env: in code, a bare name is a variable
        if value.isdigit() and len(value) < 8:
            return None  # max_token: 512 is a limit
    if is_placeholder(value, key):
        return None
    kind = "AWS key" if "aws" in key.lower() else GENERIC
    return SecretSpan(match.start(group), match.start(group) + len(value), kind)


def _assignments(text: str) -> Iterator[SecretSpan]:
    low = text.lower()
    if len(low) != len(text):  # a few characters (İ) lower-case to two: keep offsets exact
        low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    for root, full in _ROOTS:
        pos = low.find(root)
        while pos >= 0:
            start, end = pos, pos + len(root)
            if full is not None:
                word = full.match(low, pos)
                end = word.end() if word else -1
            elif root == "key":
                prefix = _KEY_PREFIX.search(low, max(0, pos - 8), pos)
                start, end = (prefix.start(), end) if prefix else (pos, -1)
            if end > 0:
                match = _ASSIGNMENT_TAIL.match(text, end)
                if match is not None:
                    found = _assignment(text, start, match)
                    if found is not None:
                        yield found
            pos = low.find(root, pos + len(root))


def find_secrets(text: str) -> list[SecretSpan]:
    """Non-overlapping secret spans of `text`, in order. A private-key block without its END
    runs to the end of the text (BlockRedactor carries it into the following blocks)."""
    spans: list[SecretSpan] = []
    anchors = _anchors_in(text)
    if anchors:
        if "key" in anchors:
            for begin in _KEY_BEGIN.finditer(text):
                if spans and begin.start() < spans[-1].end:
                    continue
                end = _KEY_END.search(text, begin.end(), begin.end() + MAX_KEY_BLOCK_CHARS)
                if end is not None:
                    body = text[begin.end() : end.start()]
                    if begin.group().startswith("PuTTY"):  # the key type ends the first line
                        body = body.partition("\n")[2]
                    if not _looks_like_key_body(body):
                        continue  # "-----BEGIN ... KEY----- ... (your key here) ... -----END"
                    stop = end.end()
                else:
                    run = _KEY_RUN.match(text, begin.end())
                    stop = min(run.end() if run else begin.end(), begin.end() + MAX_KEY_BLOCK_CHARS)
                spans.append(SecretSpan(begin.start(), stop, PRIVATE_KEY))
        detectors = sorted(int(a) for a in anchors if a.isdigit())
        for index in detectors:
            kind, _anchors, pattern = _TOKEN_DETECTORS[index]
            for match in pattern.finditer(text):
                g = next(i for i in range(1, (pattern.groups or 0) + 1) if match.group(i))
                if "example" not in match.group(g).lower():  # AKIAIOSFODNN7EXAMPLE & co.
                    spans.append(SecretSpan(match.start(g), match.end(g), kind))
        if "url" in anchors:
            for match in _URL_AUTH.finditer(text):
                user, password, host = match.groups()
                if not (is_placeholder(password) or password == user or _EXAMPLE_HOST.match(host)):
                    spans.append(SecretSpan(match.start(2), match.end(2), "password in a URL"))
    if "=" in text or ":" in text or "|" in text:
        spans.extend(_assignments(text))
    return _merged(spans)


def _merged(spans: list[SecretSpan]) -> list[SecretSpan]:
    """Sorted, with overlapping spans joined (named by the more specific detector)."""
    if len(spans) < 2:
        return spans
    spans.sort(key=lambda s: (s.start, -s.end))
    out = [spans[0]]
    for span in spans[1:]:
        last = out[-1]
        if span.start < last.end:
            kind = span.kind if last.kind == GENERIC else last.kind  # the specific name wins
            out[-1] = SecretSpan(last.start, max(span.end, last.end), kind)
            continue
        out.append(span)
    return out


def redact(text: str) -> Redacted:
    """`text` with every secret span replaced by REDACTION."""
    spans = find_secrets(text)
    if not spans:
        return Redacted(text, ())
    parts: list[str] = []
    pos = 0
    for span in spans:
        parts += [text[pos : span.start], REDACTION]
        pos = span.end
    parts.append(text[pos:])
    return Redacted("".join(parts), tuple(spans))


# Table columns whose header names a secret ("password", "DB password", "api_key", "token"):
# their cells are values even without `=` (an accounts sheet). Plurals and longer names ("tokens",
# "password hint", "token count") are other things.
_SECRET_COLUMN = re.compile(
    r"(?:[a-z0-9]+[ _\-])?(?:password|passwd|pwd|passphrase|secret|token|credentials?"
    r"|(?:api|private|access|secret|auth)[ _\-]?key|client[ _\-]?secret"
    r"|(?:auth|access)[ _\-]?token)"
)
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _cells(row: str) -> list[str] | None:
    """The cells of a Markdown row `| a | b |` (None for other text)."""
    row = row.strip()
    if not (row.startswith("|") and row.endswith("|")) or "\n" in row:
        return None
    return [c.strip() for c in _CELL_SPLIT.split(row[1:-1])]


def _is_cell_secret(value: str) -> bool:
    """A cell under a secret column holds one: not empty, a placeholder, a number, or prose."""
    if is_placeholder(value) or (value.isdigit() and len(value) < 8) or value == REDACTION:
        return False
    if value.count(" ") >= 3 or (value.count(" ") >= 2 and not any(c.isdigit() for c in value)):
        return False  # "same as the admin one", a note that landed in the column
    return not (_PATHLIKE.match(value) or value.lower().startswith(("http://", "https://")))


def _visible(text: str) -> int:
    return len(text) - text.count(" ") - text.count("\n") - text.count("\t")


class BlockRedactor:
    """Redacts the blocks of one document in order and keeps its tally.

    A private key split over several blocks (a DOCX paragraph per line, a PDF page break) is
    redacted from its BEGIN line to its END line across them."""

    def __init__(self) -> None:
        self.redactions = 0
        self.redacted_chars = 0
        self.total_chars = 0
        self.kinds: dict[str, int] = {}  # spans per kind
        self._kind_chars: dict[str, int] = {}
        self._open_key: int | None = None  # characters of a key block still without its END
        self._extra: dict[str, str] = {}  # repeated text (a CSV header on every row) scanned once
        self._columns: dict[str, tuple[int, ...]] = {}  # table header -> its secret columns

    def table_row(self, row: str, header: str) -> str:
        """A Markdown table row, redacted; cells under a secret-naming header column are
        values (unless placeholders) even without an `=`."""
        columns = self._columns.get(header)
        if columns is None:
            names = _cells(header.split("\n", 1)[0]) or []
            columns = tuple(i for i, n in enumerate(names) if _SECRET_COLUMN.fullmatch(n.lower()))
            if len(self._columns) < MAX_REPEATED_TEXTS:
                self._columns[header] = columns
        cells = _cells(row) if columns else None
        hits = [i for i in columns if cells and i < len(cells) and _is_cell_secret(cells[i])]
        if cells is None or not hits:
            return self.text(row)
        self.total_chars += _visible(row)
        for i in hits:
            chars = _visible(cells[i])
            self.redactions += 1
            self.redacted_chars += chars
            self.kinds[GENERIC] = self.kinds.get(GENERIC, 0) + 1
            self._kind_chars[GENERIC] = self._kind_chars.get(GENERIC, 0) + chars
            cells[i] = REDACTION
        return self._scan("| " + " | ".join(cells) + " |")

    def text(self, text: str) -> str:
        """A block's text, redacted (it counts towards the document's share of secrets)."""
        self.total_chars += _visible(text)
        return self._scan(text)

    def _scan(self, text: str) -> str:
        head = ""
        if self._open_key is not None:
            cut = self._key_continuation(text)
            if cut:
                self.redacted_chars += _visible(text[:cut])
                head, text = REDACTION, text[cut:]
                if self._open_key is not None or not text.strip():
                    return head + text
        result = redact(text)
        if not result.spans:
            return head + text
        self.redactions += len(result.spans)
        for span in result.spans:
            chars = _visible(text[span.start : span.end])
            self.kinds[span.kind] = self.kinds.get(span.kind, 0) + 1
            self._kind_chars[span.kind] = self._kind_chars.get(span.kind, 0) + chars
            self.redacted_chars += chars
        last = result.spans[-1]
        if (
            last.kind == PRIVATE_KEY
            and not text[last.end :].strip()
            and not _KEY_END.search(text, last.start)
        ):
            self._open_key = last.end - last.start  # the key goes on in the next block
        return head + result.text

    def _key_continuation(self, text: str) -> int:
        """How much of `text` continues the open key block (0: it does not; the key is closed)."""
        assert self._open_key is not None
        end = _KEY_END.search(text) if any(m in text for m in _END_MARKERS) else None
        body = text[: end.start()] if end else text
        if (body.strip() and not _KEY_BLOCK.fullmatch(body)) or (
            self._open_key + len(body) > MAX_KEY_BLOCK_CHARS
        ):
            self._open_key = None
            return 0
        if end is not None:
            self._open_key = None
            return end.end()
        self._open_key += len(text)
        return len(text)

    def extra(self, text: str, *, counted: bool = True) -> str:
        """Redact repeated text (a table header above every row) without adding it to the
        document's size; its secrets count once (`counted=False`: not at all, for headings in
        a breadcrumb, already counted as heading blocks)."""
        out = self._extra.get(text)
        if out is None:
            result = redact(text)
            out = result.text
            if len(self._extra) < MAX_REPEATED_TEXTS:
                self._extra[text] = out
            if counted:
                self.redactions += len(result.spans)
                for span in result.spans:
                    self.kinds[span.kind] = self.kinds.get(span.kind, 0) + 1
        return out

    @property
    def mostly_secret(self) -> bool:
        share = MOSTLY_SECRET_SHARE * self.total_chars
        return self.redactions > 0 and self.redacted_chars >= share

    def kinds_label(self) -> str:
        """'private key' or 'private key, AWS key': the kind with most redacted text first."""
        ordered = sorted(self._kind_chars.items(), key=lambda item: (-item[1], item[0]))
        return ", ".join(kind for kind, _ in ordered) or "secret"
