"""The search path never touches the network and never writes to stdout (the MCP channel):
a Thai search runs in a fresh interpreter with every socket connection refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO, make_config

import rag_service

CHILD = r"""
import json, socket, sys
from pathlib import Path

def refuse(*args, **kwargs):
    raise OSError("network disabled by test")

socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
sys.path.insert(0, sys.argv[1])
import rag_service
from helpers.config import Config

config = Config.from_json(sys.argv[2])
result = rag_service.search(config, sys.argv[3], mode="lexical")
Path(sys.argv[4]).write_text(json.dumps([h.path for h in result.hits]), encoding="utf-8")
"""


def test_a_thai_search_needs_no_network_and_prints_nothing_to_stdout(tmp_path: Path) -> None:
    knowledge = tmp_path / "docs"
    knowledge.mkdir()
    (knowledge / "meeting.md").write_text(
        "# บันทึกการประชุม\n\nที่ประชุมอนุมัติงบประมาณสำหรับเซิร์ฟเวอร์ใหม่ และความเป็นส่วนตัวของข้อมูลลูกค้า\n",
        encoding="utf-8",
    )
    (knowledge / "other.md").write_text("# Other\n\nunrelated English text\n", encoding="utf-8")
    config = make_config(knowledge, tmp_path / "state")
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)
    assert view.state == "succeeded"
    out = tmp_path / "hits.json"
    query = "อนุมัติงบประมาณ ความเป็นส่วนตัว อีเมล์"  # segmentation, compound, alias table
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(REPO), config.to_json(), query, str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "network disabled" not in proc.stderr
    assert json.loads(out.read_text(encoding="utf-8"))[0] == "meeting.md"
