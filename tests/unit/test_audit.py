"""The audit log: appended whole, torn lines skipped and never glued to the next record."""

from autograder.audit import log as audit


def report(points):
    return {
        "exercise": "ex1_numpy_attention",
        "seed": 7,
        "isolation": "jail",
        "status": "ok",
        "checks": [
            {"name": "test_a", "passed": points > 0, "max_points": 2.0},
            {"name": "test_b", "passed": True, "max_points": 1.0},
        ],
    }


def test_record_appends_and_reads_back(tmp_path):
    notebook = tmp_path / "submitted" / "alice" / "ex1" / "ex1.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text("{}")
    line = audit.record(report(2), course=tmp_path, notebook=notebook, student="alice", batch="b")
    audit.append(tmp_path, line)
    log = audit.read(tmp_path)
    assert log.torn == 0
    (back,) = log.records
    assert back["notebook"] == "submitted/alice/ex1/ex1.ipynb"
    assert back["notebook_sha256"] == audit.sha256_file(notebook)
    assert back["score"] == 3.0 and back["max_score"] == 3.0
    assert back["checks"] == {"test_a": 2.0, "test_b": 1.0}
    assert back["seed"] == 7 and back["checks_sha256"] and back["limits"]["cpus"] == 1.0


def test_torn_line_is_skipped_and_ended_before_next_append(tmp_path):
    notebook = tmp_path / "n.ipynb"
    notebook.write_text("{}")
    first = audit.record(report(0), course=tmp_path, notebook=notebook, student="a", batch="b")
    audit.append(tmp_path, first)
    with open(audit.log_path(tmp_path), "ab") as handle:
        handle.write(b'{"exercise": "ex1_numpy_attention", "stud')  # killed mid-write
    second = audit.record(report(2), course=tmp_path, notebook=notebook, student="a", batch="c")
    audit.append(tmp_path, second)
    log = audit.read(tmp_path)
    assert log.torn == 1
    assert [r["batch"] for r in log.records] == ["b", "c"]
    assert log.latest()[("ex1_numpy_attention", "a")]["score"] == 3.0
