"""OpenAPI / Swagger specs read by operation: real public specs (tests/data/openapi, from the
npm package @readme/oas-examples) and hostile ones (alias bombs, reference loops, deep nesting,
a 50 MB file), through the real extractors, the real sync worker and search."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import rag_service
from helpers.config import Config
from helpers.extract import registry
from helpers.extract.blocks import BlockKind, ExtractContext, TextBlock
from helpers.extract.document import DocumentText, build_document_text
from helpers.extract.openapi import MAX_PARSE_BYTES, spec_blocks
from helpers.extract.openapi_load import LoadedSpec, load_yaml_spec
from helpers.extract.openapi_schema import MAX_REF_HOPS
from helpers.store.index_db import connect

DATA = Path(__file__).parent / "data" / "openapi"


def extract(path: Path) -> list[TextBlock]:
    extractor = registry.extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ExtractContext()))


def sections(path: Path) -> DocumentText:
    return build_document_text(extract(path), 20_000_000, lambda: None)


def section_at(doc: DocumentText, *heading: str) -> str:
    texts = [s.text for s in doc.sections if s.location.heading_path == heading]
    assert texts, f"no section {heading}: {[s.location.heading_path for s in doc.sections]}"
    return "\n".join(texts)


def line_of(path: Path, text: str, after: int = 0) -> int:
    """1-based number of the first line at or after `after` that contains `text`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if n >= after and text in line)


def test_a_yaml_spec_has_one_section_per_operation_titled_method_and_path() -> None:
    path = DATA / "petstore-3.0.yaml"
    doc = sections(path)
    headings = [s.location.heading_path for s in doc.sections]
    assert ("paths", "/pet/{petId}", "DELETE") in headings
    assert ("info",) in headings and ("components", "schemas", "Pet") in headings
    assert doc.title == "Swagger Petstore (version 1.0.0)"
    text = section_at(doc, "paths", "/pet/{petId}", "DELETE")
    assert text.startswith("DELETE /pet/{petId}\nDeletes a pet")
    assert "- api_key (in header, string)" in text
    assert "- petId (in path, integer, int64, required): Pet id to delete." in text
    assert "- 404: Pet not found." in text
    delete = next(s for s in doc.sections if s.location.heading_path[-1:] == ("DELETE",))
    start = line_of(path, "delete:", after=line_of(path, "'/pet/{petId}':"))
    assert delete.location.line_start == start
    assert delete.location.label() == f"paths > /pet/{{petId}} > DELETE, lines {start}-" + str(
        delete.location.line_end
    )


def test_a_request_body_ref_is_resolved_inline_with_its_schema_properties() -> None:
    text = section_at(sections(DATA / "petstore-3.0.yaml"), "paths", "/pet", "POST")
    # requestBody: $ref '#/components/requestBodies/Pet' -> content schema $ref Pet -> properties
    assert "Request body (required, application/json, application/xml)" in text
    assert "- name (string, required)" in text
    assert "- status (string, enum: available, pending, sold): pet status in the store" in text
    assert "- category (Category)\n    - id (integer, int64)" in text


def test_a_swagger_2_json_spec_reads_its_body_parameter_as_the_request_body_with_lines() -> None:
    path = DATA / "petstore-2.0.json"
    doc = sections(path)
    text = section_at(doc, "paths", "/pet", "POST")
    assert "Request body (required): Pet object that needs to be added to the store." in text
    assert "- photoUrls (array of string, required)" in text
    assert "Parameters:" not in text  # the only parameter is the body
    found = text = section_at(doc, "paths", "/user/login", "GET")
    assert "- username (in query, string, required)" in found
    assert "Headers: X-Rate-Limit, X-Expires-After." in text
    post = next(s for s in doc.sections if s.location.heading_path == ("paths", "/pet", "POST"))
    assert post.location.line_start == line_of(path, '"post": {', after=line_of(path, '"/pet"'))
    assert ("definitions", "Order") in [s.location.heading_path for s in doc.sections]


def test_path_level_parameters_are_merged_into_each_operation() -> None:
    doc = sections(DATA / "parameters-common-3.0.yaml")
    text = section_at(doc, "paths", "/anything/{id}", "POST")
    assert "- id (in path, number, required): ID parameter." in text  # from the path item
    assert "- x-extra-id (in header, string)" in text
    assert "- limit (in query, integer, minimum 1, maximum 50, default 20)" in text  # a $ref


def test_webhooks_of_a_3_1_spec_are_operations_too() -> None:
    doc = sections(DATA / "webhooks-3.1.yaml")
    text = section_at(doc, "webhooks", "newPet", "POST")
    assert text.startswith("POST newPet (webhook)")
    assert "- name (string, required)" in text


def test_a_schema_that_refers_to_itself_is_named_not_expanded_again() -> None:
    doc = sections(DATA / "schema-circular-3.0.json")
    text = section_at(doc, "components", "schemas", "MultiPart")
    assert "\n- parent (MultiPart)\n- providers (object)" in text  # named, its properties not
    operation = section_at(doc, "paths", "/circular", "PUT")
    assert "  - file (FormDataBodyPart)\n    - contentDisposition (ContentDisposition)" in operation
    assert all(len(s.text) <= 4000 for s in doc.sections)


def test_a_spec_is_recognised_by_its_content_whatever_the_file_is_called(tmp_path: Path) -> None:
    renamed = tmp_path / "service-notes.yml"
    shutil.copy(DATA / "petstore-3.0.yaml", renamed)
    headings = [b.location.heading_path for b in extract(renamed)]
    assert ("paths", "/pet", "POST") in headings


def test_yaml_and_json_that_are_not_specs_are_read_as_before(tmp_path: Path) -> None:
    config = tmp_path / "deploy.yaml"
    config.write_text("swagger_ui: true\nservice:\n  port: 8080\n\nreplicas: 3\n", "utf-8")
    blocks = extract(config)
    assert [(b.text, b.location.line_start) for b in blocks] == [
        ("swagger_ui: true\nservice:\n  port: 8080", 1),
        ("replicas: 3", 5),
    ]
    not_a_spec = tmp_path / "package.json"
    not_a_spec.write_text('{\n  "name": "x",\n  "openapi": "a word, not a version"\n}\n', "utf-8")
    assert all(not b.location.heading_path for b in extract(not_a_spec))
    assert extract(not_a_spec)[0].location.line_start == 1


def test_a_minified_json_spec_has_operations_without_line_numbers(tmp_path: Path) -> None:
    minified = tmp_path / "api.json"
    minified.write_text(json.dumps(json.loads((DATA / "petstore-2.0.json").read_text())), "utf-8")
    blocks = [b for b in extract(minified) if b.location.heading_path == ("paths", "/pet", "PUT")]
    assert blocks and all(b.location.line_start is None for b in blocks)
    assert blocks[0].location.label() == "paths > /pet > PUT"


# -- hostile specs: each is bounded, and what is not a safe spec is read as text -----------------
SPEC_HEAD = "openapi: 3.0.0\ninfo:\n  title: t\n  version: '1'\n"


def _plain_text(blocks: list[TextBlock]) -> bool:
    return bool(blocks) and all(not b.location.heading_path for b in blocks)


def test_an_alias_bomb_is_read_as_plain_text_not_expanded(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    bomb = tmp_path / "laughs.yaml"  # 9**10 = 3.5 billion strings once expanded
    bomb.write_text(SPEC_HEAD + "x-lol:\n" + "".join(f"  {line}\n" for line in lines), "utf-8")
    blocks = extract(bomb)
    assert _plain_text(blocks)
    assert sum(len(b.text) for b in blocks) < 2 * bomb.stat().st_size


def test_a_merge_key_bomb_is_read_as_plain_text(tmp_path: Path) -> None:
    lines = ["m0: &m0 {k0: v}"]
    lines += [
        f"m{i}: &m{i} {{<<: [*m{i - 1}], k{i}: [*m{i - 1}, *m{i - 1}]}}" for i in range(1, 40)
    ]
    bomb = tmp_path / "merge.yaml"
    bomb.write_text(SPEC_HEAD + "x-m:\n" + "".join(f"  {line}\n" for line in lines), "utf-8")
    assert _plain_text(extract(bomb))


def test_a_recursive_anchor_and_an_object_building_tag_are_read_as_plain_text(
    tmp_path: Path,
) -> None:
    loop = tmp_path / "loop.yaml"
    loop.write_text(SPEC_HEAD + "paths: &p\n  /a:\n    get: *p\n", "utf-8")
    assert _plain_text(extract(loop))
    marker = tmp_path / "ran"
    tag = tmp_path / "tag.yaml"
    tag.write_text(
        SPEC_HEAD + f"x: !!python/object/apply:os.system ['touch {marker}']\npaths: {{}}\n", "utf-8"
    )
    assert _plain_text(extract(tag)) and not marker.exists()


def test_deep_nesting_is_read_as_plain_text_without_exhausting_the_stack(tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text(SPEC_HEAD + "x: " + "[" * 200_000 + "]" * 200_000 + "\n", "utf-8")
    assert _plain_text(extract(deep))
    deep_json = tmp_path / "deep.json"
    deep_json.write_text('{"openapi": "3.0.0", "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    assert _plain_text(extract(deep_json))


def _ref_spec(schemas: dict[str, object], body_ref: str) -> dict[str, object]:
    body = {"content": {"application/json": {"schema": {"$ref": body_ref}}}}
    operation = {"summary": "s", "requestBody": body, "responses": {"200": {"description": "ok"}}}
    return {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/x": {"post": operation}},
        "components": {"schemas": schemas},
    }


def test_a_long_ref_chain_and_a_ref_loop_are_cut(tmp_path: Path) -> None:
    chain: dict[str, object] = {
        f"S{i}": {"$ref": f"#/components/schemas/S{i + 1}"} for i in range(5000)
    }
    chain["S5000"] = {"type": "object", "properties": {"end": {"type": "string"}}}
    chain["A"] = {"$ref": "#/components/schemas/B"}
    chain["B"] = {"$ref": "#/components/schemas/A"}
    chain["R"] = {"$ref": "https://example.invalid/remote.yaml#/Thing"}  # never fetched
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(_ref_spec(chain, "#/components/schemas/S0")), "utf-8")
    doc = sections(path)
    text = section_at(doc, "paths", "/x", "POST")
    assert f"Schema: S{MAX_REF_HOPS - 1}" in text  # MAX_REF_HOPS links followed, then named
    assert "- end" not in text
    assert section_at(doc, "components", "schemas", "A").startswith("schema A\nA: B")
    assert section_at(doc, "components", "schemas", "R").startswith("schema R\nR: Thing")


def test_fan_out_references_cost_bounded_text(tmp_path: Path) -> None:
    # Each level has 50 properties all referring to the next: 50**12 paths if expanded.
    schemas: dict[str, object] = {
        f"L{i}": {
            "type": "object",
            "properties": {f"p{j}": {"$ref": f"#/components/schemas/L{i + 1}"} for j in range(50)},
        }
        for i in range(12)
    }
    schemas["L12"] = {"type": "string"}
    path = tmp_path / "fan.json"
    path.write_text(json.dumps(_ref_spec(schemas, "#/components/schemas/L0")), "utf-8")
    blocks = extract(path)
    assert sum(len(b.text) for b in blocks) < 100 * path.stat().st_size
    assert max(len(b.text) for b in blocks) < 100_000


def test_a_50_mb_json_spec_is_over_the_parse_cap_and_streams_as_text(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    filler = json.dumps({"description": "x" * 1000}) + ",\n"
    with path.open("w", encoding="utf-8") as out:
        out.write('{\n"openapi": "3.0.0",\n"info": {"title": "t", "version": "1"},\n"x": [\n')
        out.write(filler * (50 * 1024 * 1024 // len(filler)))
        out.write("{}]\n}\n")
    assert path.stat().st_size > MAX_PARSE_BYTES
    extractor = registry.extractor_for(path)
    assert extractor is not None
    first = list(itertools.islice(extractor(path, ExtractContext()), 5))
    assert _plain_text(first) and first[0].location.line_start == 1
    assert first[0].kind == BlockKind.PARAGRAPH


# -- through the sync and search ---------------------------------------------------------------
def _folder(knowledge: Path) -> None:
    shutil.copy(DATA / "petstore-3.0.yaml", knowledge / "api.yml")
    (knowledge / "guide.md").write_text(
        "# Adopting a pet\n\nVisit the shelter, pick a pet, and sign the adoption papers.\n",
        "utf-8",
    )
    (knowledge / "deploy.yaml").write_text("service:\n  port: 8080\n  replicas: 3\n", "utf-8")


def test_a_question_about_an_operation_returns_it_first_with_its_parameters_and_responses(
    config: Config, knowledge: Path
) -> None:
    _folder(knowledge)
    job = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert job.state == "succeeded" and not job.errors, job
    hits = rag_service.search(config, "remove a pet by its id", mode="lexical").hits
    assert hits[0].citation.startswith("api.yml, paths > /pet/{petId} > DELETE, lines ")
    section = rag_service.read_document(
        config, hits[0].path, section_id=hits[0].section_id, before=0, after=0
    )
    text = "\n".join(s["text"] for s in section["sections"])
    assert "- petId (in path, integer, int64, required)" in text and "- 404: Pet not found" in text


def test_a_spec_indexed_by_the_older_reader_is_re_split_and_nothing_else_is_read_again(
    config: Config, knowledge: Path
) -> None:
    _folder(knowledge)
    rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    conn = connect(config.db_path)
    conn.execute("UPDATE documents SET format_version = 0")  # as an index from before
    conn.close()
    job = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert job.counts["updated"] == 2 and job.counts["unchanged"] == 1  # api.yml, deploy.yaml
    conn = connect(config.db_path)
    versions = dict(conn.execute("SELECT path, format_version FROM documents").fetchall())
    conn.close()
    assert versions == {"api.yml": 1, "deploy.yaml": 1, "guide.md": 0}
    again = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert again.counts["unchanged"] == 3


def test_hostile_specs_in_a_sync_are_indexed_as_text_and_the_job_goes_on(
    config: Config, knowledge: Path
) -> None:
    _folder(knowledge)
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    (knowledge / "laughs.yaml").write_text(
        SPEC_HEAD + "x-lol:\n" + "".join(f"  {line}\n" for line in lines), "utf-8"
    )
    (knowledge / "deep.json").write_text(
        '{"openapi": "3.0.0", "x": ' + "[" * 200_000 + "]" * 200_000 + "}", "utf-8"
    )
    (knowledge / "tiny-deep.yaml").write_text(SPEC_HEAD + "x: " + "[" * 900 + "]" * 900, "utf-8")
    job = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert job.state == "succeeded" and not job.errors, job
    assert job.counts["added"] == 6
    hits = rag_service.search(config, "lol", mode="lexical").hits
    assert hits and hits[0].path == "laughs.yaml" and hits[0].location_label.startswith("line")


def _key_paths(value: object, path: tuple[object, ...], depth: int) -> list[tuple[object, ...]]:
    if depth == 0 or not isinstance(value, dict | list):
        return []
    items = value.items() if isinstance(value, dict) else enumerate(value)
    out = []
    for key, item in items:
        out.append((*path, key))
        out += _key_paths(item, (*path, key), depth - 1)
    return out


def test_a_spec_with_any_value_of_the_wrong_type_still_renders_without_an_error() -> None:
    swagger = json.loads((DATA / "petstore-2.0.json").read_text(encoding="utf-8"))
    common = load_yaml_spec((DATA / "parameters-common-3.0.yaml").read_text(encoding="utf-8"))
    assert common is not None
    wrong: list[object] = [None, 7, [1], {"$ref": "#/nowhere"}, {"$ref": 5}, {"a": 1}]
    for original, depth in ((swagger, 3), (common.data, 6)):
        for path in _key_paths(original, (), depth):
            for value in wrong:
                data = json.loads(json.dumps(original))
                parent = data
                for key in path[:-1]:
                    parent = parent[key]
                parent[path[-1]] = value
                blocks = list(spec_blocks(LoadedSpec(data), 20_000))
                assert blocks[0].kind == BlockKind.HEADING, path
