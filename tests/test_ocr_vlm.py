"""Vision-model correction against a real chat-completions server on 127.0.0.1."""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from PIL import Image

from helpers.extract.blocks import OcrText
from helpers.ocr.engine import OcrConfig, make_ocr_function
from helpers.ocr.vlm import (
    AUTO_START_ENV,
    AUTO_STOP_ENV,
    CONTROL_URL_ENV,
    MAX_CONSECUTIVE_FAILURES,
    VlmConfigError,
    VlmCorrector,
    require_loopback,
    validate_correction,
)
from tests.ocr_fixtures import ENGLISH_LINES, render_page

OCR_TEXT = (
    "Invoice 2024-03-15 for the quarterly maintenance c0ntract\n"
    "Total amount due: 1,250.00 THB within thirty days\n"
    "Please contact the accounting departrnent with questions"
)
GOOD = OCR_TEXT.replace("c0ntract", "contract").replace("departrnent", "department")
# Same numbers and line count, similar length, other words: a rewrite, not a correction.
REWRITTEN = (
    "Receipt 2024-03-15 issued to the regional logistics warehouse\n"
    "Balance paid: 1,250.00 THB by bank transfer today\n"
    "Thank you kindly for your business and trust"
)
HANG_LIMIT_S = 10.0  # a hung handler gives up after this so the test server can shut down

Reply = Callable[[str], tuple[int, bytes]]  # OCR text sent -> (HTTP status, body)


def chat_reply(content: str) -> tuple[int, bytes]:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    return 200, json.dumps(body).encode()


@dataclass
class FakeModelServer:
    """A real HTTP server speaking the chat-completions shape; `reply` decides the answer."""

    reply: Reply = lambda text: chat_reply(text)
    paths: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    hang: bool = False
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    state = FakeModelServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state.paths.append(self.path)
            if self.path.endswith("/chat/completions"):
                body = json.loads(raw)
                state.bodies.append(body)
                if state.hang:
                    state.release.wait(HANG_LIMIT_S)
                    return
                status, payload = state.reply(body["messages"][1]["content"][0]["text"])
            else:
                status, payload = 200, b"{}"
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            state.paths.append(self.path)
            status = 200 if self.path.endswith("/models") else 404
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:  # keep pytest output clean
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()


def _sent_text(text: str) -> str:
    return text.removeprefix("OCR text:\n")


def _correct(server: FakeModelServer, timeout_s: float = 10.0) -> OcrText:
    page = render_page(ENGLISH_LINES)
    with VlmCorrector(server.base + "/v1", "local-vlm", timeout_s, use_control_env=False) as vlm:
        return vlm.correct(page, OcrText(OCR_TEXT, "tesseract 5.3.0 eng+tha+rus"))


def test_a_good_correction_is_used_and_the_request_carries_image_and_text(
    server: FakeModelServer,
) -> None:
    server.reply = lambda sent: chat_reply(GOOD)
    result = _correct(server)
    assert result.text == GOOD
    assert result.note.startswith("vlm corrected") and "vlm local-vlm" in result.engine
    (body,) = server.bodies
    assert body["model"] == "local-vlm" and body["temperature"] == 0
    user = body["messages"][1]["content"]
    assert _sent_text(user[0]["text"]) == OCR_TEXT
    data_url = user[1]["image_url"]["url"]
    assert data_url.startswith("data:image/png;base64,")
    sent_image = Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1])))
    assert sent_image.format == "PNG" and sent_image.size == render_page(ENGLISH_LINES).size


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (GOOD.replace("1,250.00", "1,520.00"), "numbers changed"),
        (GOOD.replace("2024-03-15", "2024-03-16"), "numbers changed"),
        ("Here is the corrected text:\n" + GOOD, "prose"),
        (GOOD + "\nThis is an invoice for maintenance.", "added text"),
        (REWRITTEN, "similarity"),
        ("Счёт 2024-03-15, сумма 1,250.00 THB", "length"),
        ("", "empty"),
    ],
)
def test_a_bad_correction_is_rejected_and_the_ocr_text_kept(
    server: FakeModelServer, answer: str, reason: str
) -> None:
    server.reply = lambda sent: chat_reply(answer)
    result = _correct(server)
    assert result.text == OCR_TEXT
    assert result.engine == "tesseract 5.3.0 eng+tha+rus"
    assert result.note.startswith("vlm rejected") and reason in result.note


def test_a_hung_server_times_out_and_the_ocr_text_is_kept(server: FakeModelServer) -> None:
    server.hang = True
    result = _correct(server, timeout_s=0.5)
    assert result.text == OCR_TEXT
    assert result.note == "vlm failed: timed out after 0.5 s"


def test_a_server_that_is_down_leaves_the_ocr_text() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with VlmCorrector(f"http://127.0.0.1:{port}", "m", 5.0, use_control_env=False) as vlm:
        result = vlm.correct(render_page(["x"]), OcrText(OCR_TEXT, "tesseract"))
    assert result.text == OCR_TEXT and result.note == "vlm failed: server not reachable"


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (200, b"not json", "JSONDecodeError"),
        (200, b'{"error": "no"}', "not a chat"),
        (500, b"", "500"),
    ],
)
def test_an_answer_that_is_not_a_chat_completion_leaves_the_ocr_text(
    server: FakeModelServer, status: int, body: bytes, reason: str
) -> None:
    server.reply = lambda sent: (status, body)
    result = _correct(server)
    assert result.text == OCR_TEXT and reason in result.note


def test_repeated_failures_skip_the_model_for_the_rest_of_the_batch(
    server: FakeModelServer,
) -> None:
    server.reply = lambda sent: (503, b"")
    page = render_page(["x"])
    with VlmCorrector(server.base, "m", 5.0, use_control_env=False) as vlm:
        notes = [vlm.correct(page, OcrText(OCR_TEXT, "t")).note for _ in range(5)]
    assert len(server.bodies) == MAX_CONSECUTIVE_FAILURES
    assert notes[-1].startswith("vlm skipped: 3 failures in a row")


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.5:8080/v1",
        "http://192.168.1.2/v1",
        "https://api.example.com/v1",
        "http://localhost.example.com/v1",
        "http://127.0.0.1@example.com/v1",
        "http://[::ffff:10.0.0.1]/v1",
        "file:///etc/passwd",
    ],
)
def test_a_non_loopback_url_is_refused(url: str) -> None:
    with pytest.raises(VlmConfigError, match="loopback|http"):
        make_ocr_function(OcrConfig(vlm_url=url, vlm_model="m"))


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8080/v1", "http://127.3.2.1:1", "http://[::1]:8080", "http://LOCALHOST/"],
)
def test_loopback_urls_are_accepted(url: str) -> None:
    assert require_loopback(url) == url


def test_a_non_loopback_control_url_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONTROL_URL_ENV, "http://10.1.1.1:9000")
    with pytest.raises(VlmConfigError, match=CONTROL_URL_ENV):
        VlmCorrector("http://127.0.0.1:1/v1", "m", 1.0)


def test_each_batch_of_pages_goes_through_the_model_between_server_start_and_stop(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTROL_URL_ENV, server.base + "/control/")
    monkeypatch.setenv(AUTO_START_ENV, "1")
    monkeypatch.setenv(AUTO_STOP_ENV, "1")
    server.reply = lambda sent: chat_reply(_sent_text(sent).replace("Invoice", "INVOICE"))
    cfg = OcrConfig(vlm_url=server.base + "/v1", vlm_model="local-vlm", vlm_timeout_s=10.0)
    ocr = make_ocr_function(cfg)
    assert ocr is not None
    with ocr:  # one batch
        first = ocr(render_page(ENGLISH_LINES[:1]))
        second = ocr(render_page(ENGLISH_LINES[1:2]))
    batch = [
        "/control/server/start",
        "/v1/models",  # waits until the started server answers
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/control/server/stop",
    ]
    assert server.paths == batch
    with ocr:  # the same function serves a later batch: the server is started again
        ocr(render_page(ENGLISH_LINES[2:3]))
    assert server.paths[len(batch) :] == [p for i, p in enumerate(batch) if i != 3]
    sent_first = _sent_text(server.bodies[0]["messages"][1]["content"][0]["text"])
    assert "Invoice" in sent_first  # what real tesseract read
    assert first.text == sent_first.replace("Invoice", "INVOICE")
    assert first.note.startswith("vlm corrected")
    assert second.note == "vlm: no change"  # the second line has no "Invoice" to change


@pytest.mark.parametrize(
    ("start", "stop", "expected"),
    [
        (None, None, ["/v1/chat/completions"]),  # the URL alone never starts or stops anything
        ("1", None, ["/control/server/start", "/v1/models", "/v1/chat/completions"]),
        (None, "1", ["/v1/chat/completions", "/control/server/stop"]),
        ("0", "0", ["/v1/chat/completions"]),
    ],
)
def test_server_start_and_stop_are_sent_only_when_their_switch_is_on(
    server: FakeModelServer,
    monkeypatch: pytest.MonkeyPatch,
    start: str | None,
    stop: str | None,
    expected: list[str],
) -> None:
    monkeypatch.setenv(CONTROL_URL_ENV, server.base + "/control")
    for name, value in ((AUTO_START_ENV, start), (AUTO_STOP_ENV, stop)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    server.reply = lambda sent: chat_reply(GOOD)
    with VlmCorrector(server.base + "/v1", "m", 5.0) as vlm:
        result = vlm.correct(render_page(["x"]), OcrText(OCR_TEXT, "t"))
    assert result.text == GOOD
    assert server.paths == expected
    with VlmCorrector(server.base + "/v1", "m", 5.0):
        pass  # a batch that sent no page stops nothing
    assert server.paths == expected


def test_thai_digits_count_as_the_same_numbers() -> None:
    assert validate_correction("ราคา ๑,๒๕๐ บาท วันที่ 15", "ราคา 1,250 บาท วันที่ 15").ok
    assert not validate_correction("ราคา ๑,๒๕๐ บาท", "ราคา 1,205 บาท").ok


def test_a_stray_digit_inside_a_word_may_be_fixed_but_codes_may_not() -> None:
    assert validate_correction("the c0ntract of 2024", "the contract of 2024").ok
    assert not validate_correction("order INV2024A shipped", "order INV2025A shipped").ok
    assert not validate_correction("total l00 THB today", "total 100 THB today").ok


def test_ocr_text_that_itself_starts_like_a_preamble_may_still_be_corrected() -> None:
    ocr_text = "Corrected invoice 2024-03-15, total 1,250.00 THB, due in thirty days"
    assert validate_correction(ocr_text, ocr_text.replace("due", "Due")).ok


def test_a_failed_server_start_skips_the_model_and_keeps_the_text(
    server: FakeModelServer,
) -> None:
    with socket.socket() as probe:  # a control port nothing listens on
        probe.bind(("127.0.0.1", 0))
        control = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with VlmCorrector(server.base, "m", 5.0, control_url=control, auto_start=True) as vlm:
        result = vlm.correct(render_page(["x"]), OcrText(OCR_TEXT, "t"))
    assert result.text == OCR_TEXT
    assert result.note == "vlm skipped: server/start failed: server not reachable"
    assert server.bodies == []
